// A value consumer's outputs and parameter gradients, packed against each document piece alone.
#include "value_invariance.h"

#include <cmath>
#include <cstdint>
#include <exception>
#include <optional>
#include <sstream>

#include "packoracle/properties/context_parallel.h"
#include "packoracle/properties/splits.h"

namespace packoracle::internal {
namespace {

std::string Num(double v) {
  std::ostringstream os;
  os.precision(9);
  os << v;
  return os.str();
}

std::string ToleranceText(const ValueTolerance& t) {
  return "absolute " + Num(t.absolute) + ", relative " + Num(t.relative);
}

// The consumer's answer for `mb`, or the sentence saying why there is none (it threw, or answered another
// number of rows, or rows of another length, or no features).
struct Called {
  ValueAnswer answer;
  std::string failure;
};

Called Call(ValueConsumerRole& consumer, const CandidateMicrobatch& mb, const Policy& policy,
            const ValueRequest& request) {
  Called out;
  try {
    out.answer = consumer.ConsumeValues(mb, policy, request);
  } catch (const std::exception& e) {
    out.failure = std::string("the value consumer threw: ") + e.what();
    return out;
  }
  if (out.answer.rows.size() != mb.rows.size()) {
    out.failure = "the value consumer returned " + std::to_string(out.answer.rows.size()) +
                  " rows of values for a micro-batch of " + std::to_string(mb.rows.size()) + " rows";
    return out;
  }
  for (std::size_t r = 0; r < mb.rows.size(); ++r) {
    const SlotValues& v = out.answer.rows[r];
    const auto n = static_cast<std::int64_t>(mb.rows[r].input_ids.size());
    if (v.features <= 0 || static_cast<std::int64_t>(v.values.size()) != n * v.features) {
      out.failure = "the value consumer's row " + std::to_string(r) + " holds " + std::to_string(v.values.size()) +
                    " values with " + std::to_string(v.features) + " features a slot, for a row of " +
                    std::to_string(n) + " slots (give n × features values, features ≥ 1)";
      return out;
    }
  }
  if (request.gradient && !out.answer.parameter_gradient)
    out.failure = "the value consumer was asked for its parameter gradient and gave none";
  return out;
}

// A piece alone keeps its micro-batch's place (rank, micro-step) and the case's CP size and scheme, dealt over
// its own row; it is no micro-batch of the step (microbatch -1).
StepLayout AloneLayout(const StepLayout& packed, const CandidateRow& alone) {
  StepLayout out = packed;
  out.microbatch = -1;
  out.cp_shards = {CpShards(alone, packed.context_parallel_size, packed.context_parallel_scheme)};
  return out;
}

std::vector<std::vector<double>> WeightsOf(const std::vector<const OracleRow*>& truths, const OracleBatch& oracle) {
  std::vector<std::vector<double>> out;
  for (const OracleRow* truth : truths) {
    std::vector<double> row(truth->slots.size(), 0.0);
    for (std::size_t i = 0; i < row.size(); ++i) {
      const Slot& s = truth->slots[i];
      if (!s.is_pad()) row[i] = ProbeSlotWeight(oracle.documents[static_cast<std::size_t>(s.doc)].uid, s.offset);
    }
    out.push_back(std::move(row));
  }
  return out;
}

// Piece `piece` of a row: its values alone against its values packed. Returns the number of differing values
// and sets `first` (slot in the piece, feature) of the first.
std::int64_t Differing(const SlotValues& packed, const SlotValues& alone, const PieceSlots& piece,
                       const ValueTolerance& tolerance, std::pair<std::int64_t, std::int64_t>& first) {
  std::int64_t differing = 0;
  for (std::size_t k = 0; k < piece.length; ++k)
    for (std::int64_t f = 0; f < packed.features; ++f) {
      const double a = packed.At(static_cast<std::int64_t>(piece.start + k), f);
      const double b = alone.At(static_cast<std::int64_t>(k), f);
      if (tolerance.Close(a, b)) continue;
      if (differing++ == 0) first = {static_cast<std::int64_t>(k), f};
    }
  return differing;
}

// Row r's pieces alone; adds one violation for the row's first differing piece. Returns false when the consumer
// failed on a piece (reported). Adds each piece's gradient to `gradient_sum` when asked.
bool CompareRow(ValueConsumerRole& consumer, const CandidateMicrobatch& mb, const StepLayout& layout, std::size_t k,
                const SlotValues& packed,
                const OracleRow& truth, const std::string& where, std::int64_t flat, const OracleBatch& oracle,
                const Policy& policy, bool gradient, std::optional<std::vector<double>>& gradient_sum,
                CaseResult& result) {
  const ValueTolerance tolerance = consumer.Tolerance();
  bool reported = false;
  for (const PieceSlots& piece : PiecesOf(truth)) {
    const std::string& uid = oracle.documents[static_cast<std::size_t>(piece.doc)].uid;
    const CandidateMicrobatch alone = AloneMicrobatch(mb, mb.rows[k], truth, piece, uid, policy);
    ValueRequest request{gradient, {{}}, AloneLayout(layout, alone.rows[0])};
    for (std::size_t j = 0; j < piece.length; ++j)
      request.slot_weights[0].push_back(ProbeSlotWeight(uid, truth.slots[piece.start + j].offset));
    const Called got = Call(consumer, alone, policy, request);
    if (!got.failure.empty()) {
      result.violations.push_back({Invariant::kPackingInvariance,
                                   where + ": document '" + uid + "' alone: " + got.failure, flat, -1, "", "", {}});
      return false;
    }
    if (gradient) {
      const auto& g = *got.answer.parameter_gradient;
      if (!gradient_sum) gradient_sum = std::vector<double>(g.size(), 0.0);
      if (gradient_sum->size() == g.size())
        for (std::size_t p = 0; p < g.size(); ++p) (*gradient_sum)[p] += g[p];
    }
    const SlotValues& values = got.answer.rows[0];
    if (reported) continue;
    if (values.features != packed.features) {
      reported = true;
      result.violations.push_back({Invariant::kPackingInvariance,
                                   where + ": document '" + uid + "' alone has " + std::to_string(values.features) +
                                       " features a slot, packed " + std::to_string(packed.features),
                                   flat, static_cast<std::int64_t>(piece.start), "", "", {}});
      continue;
    }
    std::pair<std::int64_t, std::int64_t> first{0, 0};
    const std::int64_t differing = Differing(packed, values, piece, tolerance, first);
    if (differing == 0) continue;
    reported = true;  // one violation per row: its first differing piece's first differing value
    const auto slot = static_cast<std::int64_t>(piece.start) + first.first;
    const double expected = values.At(first.first, first.second), actual = packed.At(slot, first.second);
    result.violations.push_back(
        {Invariant::kPackingInvariance,
         where + " slot " + std::to_string(slot) + ": document '" + uid + "' (token " +
             std::to_string(truth.slots[static_cast<std::size_t>(slot)].offset) + ") has output " +
             std::to_string(first.second) + " = " + Num(actual) + " packed, " + Num(expected) +
             " alone in a row of its own (" + std::to_string(differing) + " of its values in this row differ beyond " +
             ToleranceText(tolerance) + ": the consumer's output depends on what is packed beside the document)",
         flat, slot, Num(expected), Num(actual), {}});
  }
  return true;
}

void CompareGradients(const std::vector<double>& packed, const std::vector<double>& alone_sum,
                      const ValueTolerance& tolerance, const std::string& where, std::int64_t flat,
                      CaseResult& result) {
  if (packed.size() != alone_sum.size()) {
    result.violations.push_back({Invariant::kGradient,
                                 where + ": the value consumer's parameter gradient has " +
                                     std::to_string(packed.size()) + " entries packed, " +
                                     std::to_string(alone_sum.size()) + " for a document alone",
                                 flat, -1, "", "", {}});
    return;
  }
  std::int64_t differing = 0;
  std::size_t first = 0;
  for (std::size_t p = 0; p < packed.size(); ++p)
    if (!tolerance.Close(packed[p], alone_sum[p]) && differing++ == 0) first = p;
  if (differing == 0) return;
  result.violations.push_back(
      {Invariant::kGradient,
       where + ": the parameter gradient of the probe loss over the packed micro-batch differs from the sum over "
               "its documents alone: entry " + std::to_string(first) + " is " + Num(packed[first]) + " packed, " +
           Num(alone_sum[first]) + " summed alone (" + std::to_string(differing) + " of " +
           std::to_string(packed.size()) + " entries differ beyond " + ToleranceText(tolerance) +
           (std::isnan(packed[first]) ? "; a NaN packed: slots no document holds, such as padding past the last "
                                        "cu_seqlens, feed the gradient"
                                      : "") +
           ")",
       flat, -1, Num(alone_sum[first]), Num(packed[first]), {}});
}

}  // namespace

double ProbeSlotWeight(const std::string& uid, std::int64_t offset) {
  std::uint64_t h = 1469598103934665603ULL;  // FNV-1a: the same number on every platform
  for (const unsigned char c : uid) h = (h ^ c) * 1099511628211ULL;
  const std::uint64_t mixed = h + 7919ULL * static_cast<std::uint64_t>(offset);
  return 0.5 + static_cast<double>(mixed % 997) / 997.0;
}

CandidateMicrobatch AloneMicrobatch(const CandidateMicrobatch& packed, const CandidateRow& row, const OracleRow& truth,
                                    const PieceSlots& piece, const std::string& uid, const Policy& policy) {
  const auto n = static_cast<std::int64_t>(piece.length);
  const auto from = static_cast<std::ptrdiff_t>(piece.start), to = from + static_cast<std::ptrdiff_t>(n);
  CandidateRow alone;
  for (std::size_t k = 0; k < piece.length; ++k) alone.input_ids.push_back(truth.slots[piece.start + k].token);
  if (static_cast<std::ptrdiff_t>(row.labels.size()) >= to) alone.labels.assign(row.labels.begin() + from, row.labels.begin() + to);
  if (row.loss_mask && static_cast<std::ptrdiff_t>(row.loss_mask->size()) >= to)
    alone.loss_mask.emplace(row.loss_mask->begin() + from, row.loss_mask->begin() + to);
  if (row.position_ids) alone.position_ids = AlonePositions(truth, piece, policy);
  if (row.cu_seqlens) alone.cu_seqlens = std::vector<std::int64_t>{0, n};
  if (row.seq_lens) alone.seq_lens = std::vector<std::int64_t>{n};
  if (row.doc_ids) alone.doc_ids = std::vector<std::int64_t>(piece.length, 0);
  if (row.attention_mask) alone.attention_mask = std::vector<std::int64_t>(piece.length, 1);
  alone.doc_spans = {{uid, 0, n, piece.offset}};
  CandidateMicrobatch out;
  out.step = packed.step;
  out.micro_step = packed.micro_step;
  out.rank = packed.rank;
  out.rows.push_back(std::move(alone));
  return out;
}

void CheckValueInvariance(ValueConsumerRole& consumer, const std::vector<CandidateMicrobatch>& microbatches,
                          const std::vector<std::string>& where, const OracleBatch& oracle, const Policy& policy,
                          const StepOfCase& step, CaseResult& result) {
  if (!PromisesIsolation(policy)) return;
  result.checked.insert(Invariant::kPackingInvariance);
  const bool gradient = consumer.AnswersGradients();
  if (gradient) result.checked.insert(Invariant::kGradient);
  for (std::size_t m = 0, flat = 0; m < microbatches.size(); flat += microbatches[m].rows.size(), ++m) {
    const CandidateMicrobatch& mb = microbatches[m];
    if (flat + mb.rows.size() > oracle.rows.size()) return;
    std::vector<const OracleRow*> truths;
    for (std::size_t k = 0; k < mb.rows.size(); ++k) {
      truths.push_back(&oracle.rows[flat + k]);
      if (mb.rows[k].input_ids.size() != truths.back()->slots.size()) return;  // shape reports it
    }
    const auto first_row = static_cast<std::int64_t>(flat);
    const StepLayout layout = StepLayoutOf(microbatches, m, step.dp_world_size, step.draw);
    const Called packed = Call(consumer, mb, policy, ValueRequest{gradient, WeightsOf(truths, oracle), layout});
    if (!packed.failure.empty()) {
      result.violations.push_back({Invariant::kPackingInvariance, where[flat] + ": " + packed.failure, first_row, -1,
                                   "", "", {}});
      continue;
    }
    std::optional<std::vector<double>> alone_gradient;
    bool complete = true;
    for (std::size_t k = 0; k < mb.rows.size() && complete; ++k)
      complete = CompareRow(consumer, mb, layout, k, packed.answer.rows[k], *truths[k], where[flat + k],
                            static_cast<std::int64_t>(flat + k), oracle, policy, gradient, alone_gradient, result);
    if (gradient && complete)
      CompareGradients(*packed.answer.parameter_gradient,
                       alone_gradient.value_or(std::vector<double>(packed.answer.parameter_gradient->size(), 0.0)),
                       consumer.Tolerance(), where[flat], first_row, result);
  }
}

}  // namespace packoracle::internal
