// The oracle's own properties: metamorphic relations that any correct reading of the definitions keeps.
#include <gtest/gtest.h>  // before rapidcheck/gtest.h

#include <rapidcheck/gtest.h>

#include <algorithm>
#include <numeric>

#include "packoracle/oracle.h"
#include "packoracle/properties/generators.h"

namespace packoracle {
namespace {

// Materializes the workload with its default layout; nullopt when the policy refuses the input (overflow:
// error, or a stream too short for one window), which the refusal properties below check separately.
std::optional<OracleBatch> TryMaterialize(const Workload& w) {
  try {
    return Materialize(w.documents, DefaultLayout(w.documents, w.policy, w.row_length), w.policy);
  } catch (const InputError&) {
    return std::nullopt;
  }
}

bool Overlong(const Workload& w) {
  for (const auto& doc : Effective(w.documents, w.policy))
    if (doc.size() > w.row_length) return true;
  return false;
}

std::vector<std::int64_t> Sizes(const OracleBatch& batch) {
  std::vector<std::int64_t> sizes;
  for (const auto& doc : batch.documents) sizes.push_back(doc.size());
  return sizes;
}

// Σ_d Σ_{k=1}^{n_d-1} supervised_d[k]: the weighted targets of document isolation without splitting.
double SupervisedPairs(const std::vector<EffectiveDocument>& docs) {
  double n = 0;
  for (const auto& doc : docs)
    for (std::int64_t k = 1; k < doc.size(); ++k) n += doc.supervised[static_cast<std::size_t>(k)];
  return n;
}

RC_GTEST_PROP(OracleProperties, ReorderingDocumentsKeepsTheTargetCountUnderIsolation, ()) {
  // Under boundary exclusion with no row-end target and no splitting, each document contributes its own
  // supervised pairs wherever it lands: the order of documents cannot change N.
  const auto row_length = *gen::RowLength();
  Policy policy = FindPreset("reference").policy;
  policy.overflow = Overflow::kTruncate;
  const auto docs = *gen::Documents(row_length);
  auto shuffled = *rc::gen::just(docs);
  std::reverse(shuffled.begin(), shuffled.end());
  std::rotate(shuffled.begin(), shuffled.begin() + (shuffled.empty() ? 0 : *rc::gen::inRange<std::size_t>(0, shuffled.size())),
              shuffled.end());
  const auto a = Denominators(Materialize(docs, SequentialLayout(docs, policy, row_length), policy));
  const auto b = Denominators(Materialize(shuffled, SequentialLayout(shuffled, policy, row_length), policy));
  RC_ASSERT(a.global_targets == b.global_targets);
}

RC_GTEST_PROP(OracleProperties, IsolationWithoutSplittingCountsSupervisedPairs, ()) {
  // Document isolation, documents no longer than a row: N = Σ_d Σ_{k≥1} supervised_d[k], whatever the layout.
  const auto row_length = *gen::RowLength();
  const Policy policy = *rc::gen::elementOf(std::vector<Policy>{
      FindPreset("reference").policy, FindPreset("hf-flatten").policy, FindPreset("torchtune-packed").policy,
      FindPreset("trl-padding-free").policy, FindPreset("megatron-sft-thd").policy});
  auto docs = *gen::Documents(row_length);
  for (auto& doc : docs) {  // keep every document within a row
    if (static_cast<std::int64_t>(doc.tokens.size()) > row_length) {
      doc.tokens.resize(static_cast<std::size_t>(row_length));
      doc.supervised.resize(static_cast<std::size_t>(row_length));
    }
  }
  const bool one_per_row = *rc::gen::arbitrary<bool>();
  const auto layout = one_per_row ? OneDocumentPerRow(docs, policy, row_length) : SequentialLayout(docs, policy, row_length);
  const auto batch = Materialize(docs, layout, policy);
  RC_ASSERT(Denominators(batch).global_targets == SupervisedPairs(batch.documents));
}

RC_GTEST_PROP(OracleProperties, AllPositionsIsAtLeastTheTargetCount, (const Workload& w)) {
  const auto batch = TryMaterialize(w);
  RC_PRE(batch.has_value());
  const auto counts = Denominators(*batch);
  RC_ASSERT(static_cast<double>(counts.all_positions) >= counts.global_targets);
}

RC_GTEST_PROP(OracleProperties, AttentionIsCausalAndIsolatedForEveryPreset, (const Workload& w)) {
  const auto batch = TryMaterialize(w);
  RC_PRE(batch.has_value());
  for (const auto& row : batch->rows) {
    for (std::int64_t i = 0; i < row.length(); ++i) {
      const Slot& q = row.slots[static_cast<std::size_t>(i)];
      if (!q.is_pad()) RC_ASSERT(Attends(row, w.policy, i, i));  // a token always sees itself
      for (std::int64_t j = 0; j < row.length(); ++j) {
        if (!Attends(row, w.policy, i, j)) continue;
        RC_ASSERT(j <= i);  // causal for every preset
        const Slot& k = row.slots[static_cast<std::size_t>(j)];
        if (w.policy.attention == Attention::kDocCausal && !q.is_pad() && !k.is_pad()) {
          RC_ASSERT(k.doc == q.doc);  // no position sees another document
        }
      }
    }
  }
}

RC_GTEST_PROP(OracleProperties, LabelsDecodeToTheOraclesWeightsAndTargets, (const Workload& w)) {
  // LabelsOf and DecodeTargets are inverse readings of the same encoding: what a loss would read from the
  // canonical labels is exactly the oracle's (target, weight) for every weighted prediction.
  const auto batch = TryMaterialize(w);
  RC_PRE(batch.has_value());
  for (const auto& row : batch->rows) {
    const auto decoded = DecodeTargets(row.labels, w.policy.loss_mask ? &row.loss_mask : nullptr, w.policy);
    for (std::size_t i = 0; i < row.predictions.size(); ++i) {
      const Prediction& p = row.predictions[i];
      RC_ASSERT(decoded[i].weight == p.weight);
      if (p.weight > 0) RC_ASSERT(decoded[i].target == p.target);
    }
  }
}

RC_GTEST_PROP(OracleProperties, WeightedTargetsAreNextTokensOfTheSameDocumentOrDeclaredBoundaries, (const Workload& w)) {
  const auto batch = TryMaterialize(w);
  RC_PRE(batch.has_value());
  for (const auto& row : batch->rows) {
    for (std::size_t i = 0; i < row.predictions.size(); ++i) {
      const Prediction& p = row.predictions[i];
      const Slot& s = row.slots[i];
      if (p.weight == 0) continue;
      RC_ASSERT(!s.is_pad());  // padding is never an input of a weighted prediction
      const auto& target_doc = batch->documents[static_cast<std::size_t>(p.target_doc)];
      RC_ASSERT(target_doc.supervised[static_cast<std::size_t>(p.target_offset)] == 1);
      if (p.target_doc == s.doc) {
        RC_ASSERT(p.target_offset == s.offset + 1);  // the shift happens once, inside the document
      } else {
        RC_ASSERT(w.policy.boundary_target == BoundaryTarget::kIncluded);
        RC_ASSERT(p.target_offset == 0);
      }
    }
  }
}

RC_GTEST_PROP(OracleProperties, EncodingsReDeriveTheTrueSegments, (const Workload& w)) {
  const auto batch = TryMaterialize(w);
  RC_PRE(batch.has_value());
  for (const auto& row : batch->rows) {
    const auto truth = TrueSegmentStarts(row);
    RC_ASSERT(FromCuSeqlens(row.cu_seqlens, row.length()) == truth);
    RC_ASSERT(FromSeqLens(row.seq_lens, row.length()) == truth);
    RC_ASSERT(FromDocIds(row.doc_ids) == truth);
  }
}

RC_GTEST_PROP(OracleProperties, GlobalObjectiveDoesNotDependOnTheSplitIntoMicrobatchesAndRanks, (const Workload& w)) {
  auto layout = [&] {
    try {
      return std::optional<Layout>(DefaultLayout(w.documents, w.policy, w.row_length));
    } catch (const InputError&) {
      return std::optional<Layout>();
    }
  }();
  RC_PRE(layout.has_value());
  const auto one = Materialize(w.documents, *layout, w.policy);
  const auto losses = *gen::ExactLosses(Sizes(one));
  AssignMicrobatches(*layout, *rc::gen::inRange<std::int64_t>(1, 4), *rc::gen::inRange<std::int64_t>(1, 4), w.policy);
  const auto split = Materialize(w.documents, *layout, w.policy);
  const auto a = Objective(one, losses, Denominator::kGlobalTargets);
  const auto b = Objective(split, losses, Denominator::kGlobalTargets);
  RC_ASSERT(a.has_targets == b.has_targets);
  if (a.has_targets) RC_ASSERT(a.value == b.value);
  RC_ASSERT(Denominators(one).global_targets == Denominators(split).global_targets);
}

RC_GTEST_PROP(OracleProperties, ZeroValidTargetsIsReportedNeverDivided, (const Workload& w)) {
  auto docs = w.documents;
  for (auto& doc : docs) std::fill(doc.supervised.begin(), doc.supervised.end(), 0);
  Policy policy = w.policy;
  policy.bos_id.reset();  // delimiters are supervised: drop them so that nothing is a target
  policy.eos_id.reset();
  if (policy.boundary_source == BoundarySource::kEodCloses || policy.boundary_source == BoundarySource::kBosOpens) {
    policy.boundary_source = BoundarySource::kSpans;
  }
  Workload unsupervised{docs, w.row_length, policy};
  const auto batch = TryMaterialize(unsupervised);
  RC_PRE(batch.has_value());
  const auto losses = *gen::ExactLosses(Sizes(*batch));
  for (auto formula : {Denominator::kGlobalTargets, Denominator::kRankMean, Denominator::kMicrobatchMean,
                       Denominator::kSequenceMean, Denominator::kAllPositions}) {
    const auto objective = Objective(*batch, losses, formula);
    RC_ASSERT(!objective.has_targets);
    RC_ASSERT(objective.value == 0.0);  // never NaN, never a silent 0/0
  }
  RC_ASSERT(Denominators(*batch).global_targets == 0.0);
}

RC_GTEST_PROP(OracleProperties, RefusalHappensExactlyWhenTheOverflowPolicySaysSo, (const Workload& w)) {
  // Sequential and one-per-row layouts refuse an over-long document iff overflow is error.
  Policy policy = w.policy;
  policy.stream_stride = StreamStride::kNone;
  policy.row_end_target = RowEndTarget::kNone;
  bool refused = false;
  try {
    SequentialLayout(w.documents, policy, w.row_length);
  } catch (const InputError&) {
    refused = true;
  }
  RC_ASSERT(refused == (policy.overflow == Overflow::kError && Overlong(w)));
}

RC_GTEST_PROP(OracleProperties, LayoutsPlaceEveryTokenOnceInOrderUnlessTruncated, (const Workload& w)) {
  const auto docs = Effective(w.documents, w.policy);
  Layout layout;
  try {
    layout = DefaultLayout(w.documents, w.policy, w.row_length);
  } catch (const InputError&) {
    RC_DISCARD("refused by the policy");
  }
  std::vector<std::int64_t> next(docs.size(), 0);  // next expected offset per document
  for (const auto& row : layout.rows) {
    RC_ASSERT(row.length <= w.row_length);
    for (const auto& piece : row.pieces) {
      RC_ASSERT(piece.doc_offset == next[static_cast<std::size_t>(piece.doc)]);
      next[static_cast<std::size_t>(piece.doc)] += piece.length;
    }
  }
  const bool stream = w.policy.stream_stride != StreamStride::kNone;
  const bool stream_drops_tail = stream && w.policy.padding == Padding::kNone;
  if (w.policy.overflow != Overflow::kTruncate && !stream_drops_tail) {
    // Under next_in_stream the stream's very last token may be only the previous row's row-end target.
    std::int64_t last = -1;
    for (std::size_t d = 0; d < docs.size(); ++d)
      if (docs[d].size() > 0) last = static_cast<std::int64_t>(d);
    for (std::size_t d = 0; d < docs.size(); ++d) {
      const bool may_miss_one = stream && w.policy.row_end_target == RowEndTarget::kNextInStream &&
                                static_cast<std::int64_t>(d) == last;
      RC_ASSERT(next[d] == docs[d].size() || (may_miss_one && next[d] == docs[d].size() - 1));
    }
  }
}

}  // namespace
}  // namespace packoracle
