#include "packoracle/fastcheck/case_check.h"

#include <exception>

#include "packoracle/fastcheck/dense_mask.h"
#include "packoracle/fastcheck/document_check.h"
#include "packoracle/oracle.h"
#include "packoracle/properties/determinism.h"

namespace packoracle::fastcheck {
namespace {

PackResult PackCatching(PackerRole& packer, const PackRequest& request) {
  try {
    return packer.Pack(request);
  } catch (const std::exception& e) {
    return PackResult::Fault(std::string("the packer threw: ") + e.what());
  }
}

}  // namespace

CaseResult CheckCaseFast(Candidate& candidate, const PackRequest& request, const CheckOptions& options,
                         FastCaseCounters* counters) {
  auto oracle = [&] {
    if (counters) ++counters->oracle_runs;
    return CheckCase(candidate, request, options);
  };
  // The fast path has no decoder and no reducer or consumer roles: those cases are the oracle's.
  const bool decoder = options.packing_invariance && request.row_length <= options.decoder_max_row_length;
  if (!candidate.packer || candidate.reducer || candidate.consumer || decoder) return oracle();
  std::vector<EffectiveDocument> effective;
  try {
    ValidatePolicy(request.policy);
    if (request.row_length <= 0 || request.micro_batch_rows <= 0 || request.dp_world_size <= 0) return oracle();
    effective = EffectiveFast(request.documents, request.policy, request.delimiters);
  } catch (const InputError&) {
    return oracle();  // it throws the same error, with CheckCase's wording
  }
  static thread_local FastStepChecker checker;  // buffers reused from case to case
  StepDocuments docs = StepDocuments::Of(effective, request.target_losses);

  PackResult out = PackCatching(*candidate.packer, request);
  if (options.determinism) {
    PackCatching(*candidate.packer, DeterminismDecoy(request));
    if (!(PackCatching(*candidate.packer, request) == out)) return oracle();
  }
  const StepInput in = StepInput::Of(request, out, docs, options);
  const StepVerdict& v = checker.Check(in);
  if (v.outcome != Outcome::kPassed) return oracle();
  if (counters) ++counters->fast_passes;
  CaseResult result;
  for (auto inv : {Invariant::kShape, Invariant::kCoverage, Invariant::kSegments, Invariant::kPositions,
                   Invariant::kTargets, Invariant::kAttention})
    result.checked.insert(inv);
  if (options.determinism) result.checked.insert(Invariant::kDeterminism);
  if (options.efficiency || request.policy.efficiency == Efficiency::kNoMergeableRows)
    result.checked.insert(Invariant::kEfficiency);
  result.not_applicable.insert(Invariant::kGradient);  // only a reducer backpropagates (CheckCase says the same)
  if (v.declared_objective) {
    result.checked.insert(Invariant::kDenominator);
    result.checked.insert(Invariant::kLoss);
  } else {
    result.not_applicable.insert(Invariant::kDenominator);
    result.not_applicable.insert(Invariant::kLoss);
  }
  result.packed = std::move(out);
  result.utilization = v.utilization;
  result.declared_objective = v.declared_objective;
  result.token_mean = v.token_mean;
  result.notes = v.notes;
  return result;
}

std::vector<Finding> ConsumerFindings(AttentionConsumerRole& consumer, const std::vector<CandidateMicrobatch>& microbatches,
                                      const Policy& policy) {
  std::vector<Finding> out;
  std::vector<std::int32_t> piece;
  std::int64_t flat = 0;
  for (const auto& mb : microbatches) {
    // The consumer sees the whole micro-batch, as CheckCase hands it (a backend may look at the batch: PI-01).
    std::vector<DenseMask> masks;
    bool failed = false;
    try {
      masks = consumer.ConsumeMicrobatch(mb, policy);
      failed = masks.size() != mb.rows.size();
    } catch (const std::exception&) {
      failed = true;
    }
    for (std::size_t k = 0; k < mb.rows.size(); ++k) {
      const CandidateRow& row = mb.rows[k];
      const std::int64_t r = flat++;
      if (failed) {
        out.push_back({Invariant::kAttention, r, -1});
        continue;
      }
      const std::size_t n = row.input_ids.size();
      piece.assign(n, -1);
      for (std::size_t p = 0; p < row.doc_spans.size(); ++p)
        for (std::int64_t t = 0; t < row.doc_spans[p].length; ++t)
          piece[static_cast<std::size_t>(row.doc_spans[p].start + t)] = static_cast<std::int32_t>(p);
      const DenseMask& mask = masks[k];
      bool square = mask.size() == n;
      for (const auto& line : mask) square = square && line.size() == n;
      if (!square) {
        out.push_back({Invariant::kAttention, r, -1});
        continue;
      }
      const std::int64_t q = FirstWrongQuery(mask, RowPieces{piece.data(), n}, policy);
      if (q >= 0) out.push_back({Invariant::kAttention, r, q});
    }
  }
  return out;
}

}  // namespace packoracle::fastcheck
