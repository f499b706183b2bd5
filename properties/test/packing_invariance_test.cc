// packing_invariance (DESIGN §4): the tiny decoder on the candidate's rows against each document alone.
#include <gtest/gtest.h>

#include <numeric>

#include "packoracle/oracle.h"
#include "packoracle/properties/invariants.h"
#include "packoracle/properties/verify.h"

namespace packoracle {
namespace {

PackRequest LessonRequest(const Policy& policy) {
  PackRequest r;
  r.row_length = 8;
  r.policy = policy;
  r.documents = MakeDocuments({{11, 12, 13}, {21, 22, 23, 24}});
  return r;
}

// The reference packer with the positions of LlamaFactory's neat_packing (bugzoo PO-01): arange along the row.
struct PositionsNotReset {
  PackResult Pack(const PackRequest& request) {
    PackResult out = ReferenceCandidate().packer->Pack(request);
    for (auto& mb : out.microbatches) {
      for (auto& row : mb.rows) {
        std::vector<std::int64_t> arange(row.input_ids.size());
        std::iota(arange.begin(), arange.end(), 0);
        row.position_ids = arange;
      }
    }
    return out;
  }
};

const Violation* Find(const CaseResult& result, Invariant inv) {
  for (const auto& v : result.violations)
    if (v.invariant == inv) return &v;
  return nullptr;
}

TEST(PackingInvariance, ReferencePackerOfEveryPresetKeepsIt) {
  for (const auto& preset : Presets()) {
    SCOPED_TRACE(preset.name);
    Candidate reference = ReferenceCandidate();
    reference.policies = {preset.policy};
    VerifyOptions options;
    options.cases = 120;
    options.only = Invariant::kPackingInvariance;
    const VerifyReport report = Verify(reference, options);
    EXPECT_TRUE(report.passed) << report.text;
    EXPECT_TRUE(report.checked.count(Invariant::kPackingInvariance));
    ASSERT_TRUE(report.contamination.has_value());
    EXPECT_GT(report.contamination->targets, 0);
    const bool isolating = preset.policy.attention == Attention::kDocCausal && preset.policy.positions == Positions::kDocReset;
    if (isolating) {
      EXPECT_EQ(report.contamination->max_relative, 0.0) << "isolation reproduces losses bit for bit";
    }
  }
}

TEST(PackingInvariance, PositionsThatDoNotResetAreCaughtWithRowSlotDocumentAndLosses) {
  Candidate c = MakeCandidate("positions-not-reset", PositionsNotReset{});
  const CaseResult result = CheckCase(c, LessonRequest(FindPreset("reference").policy));
  ASSERT_TRUE(result.checked.count(Invariant::kPackingInvariance));
  const Violation* v = Find(result, Invariant::kPackingInvariance);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->row, 0);
  EXPECT_EQ(v->slot, 3);  // d1's first prediction (21 → 22), at position 3 instead of 0
  EXPECT_NE(v->sentence.find("document 'd1'"), std::string::npos) << v->sentence;
  EXPECT_NE(v->expected, v->actual);
  EXPECT_GT(result.contamination->max_relative, 1e-6);
}

// The reference packer under hf-flatten (cu_seqlens), with cu_seqlens dropped from every row (or only from
// rows of one document): a backend then reads each row as one causal sequence.
struct CuSeqlensDropped {
  bool only_single_document_rows = false;
  PackResult Pack(const PackRequest& request) {
    PackResult out = ReferenceCandidate().packer->Pack(request);
    for (auto& mb : out.microbatches)
      for (auto& row : mb.rows)
        if (!only_single_document_rows || row.doc_spans.size() == 1) row.cu_seqlens.reset();
    return out;
  }
};

TEST(PackingInvariance, AMissingEncodingRunsTheRowAsOneSequence) {
  PackRequest request = LessonRequest(FindPreset("hf-flatten").policy);
  request.row_length = 16;  // both documents in one row
  Candidate everywhere = MakeCandidate("cu-seqlens-dropped", CuSeqlensDropped{false});
  const CaseResult shared = CheckCase(everywhere, request);
  ASSERT_NE(Find(shared, Invariant::kAttention), nullptr);
  const Violation* leak = Find(shared, Invariant::kPackingInvariance);
  ASSERT_NE(leak, nullptr) << "the decoder runs on the row as fed and measures d1 seeing d0";
  EXPECT_NE(leak->sentence.find("document 'd1'"), std::string::npos) << leak->sentence;

  request.row_length = 4;  // one document per row: nothing to cross, nothing changes
  request.documents = MakeDocuments({{11, 12, 13, 14}, {21, 22, 23, 24}});
  Candidate single = MakeCandidate("cu-seqlens-dropped-single", CuSeqlensDropped{true});
  const CaseResult alone = CheckCase(single, request);
  EXPECT_TRUE(alone.passed()) << (alone.violations.empty() ? "" : alone.violations.front().sentence);
  EXPECT_TRUE(alone.checked.count(Invariant::kPackingInvariance));
  ASSERT_EQ(alone.notes.size(), 1u);
  EXPECT_NE(alone.notes.front().find("rows without cu_seqlens"), std::string::npos) << alone.notes.front();
}

TEST(PackingInvariance, ALeakyConsumerIsCaughtThroughItsOwnMask) {
  struct CausalAcrossDocuments {  // MK-09: causal plus padding, packing never looked for
    DenseMask Consume(const CandidateRow& row, const Policy&) {
      const auto n = row.input_ids.size();
      DenseMask m(n, std::vector<std::uint8_t>(n, 0));
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j <= i; ++j) m[i][j] = 1;
      return m;
    }
  };
  Candidate c = MakeCandidate("causal-across-documents", CausalAcrossDocuments{});
  const CaseResult result = CheckCase(c, LessonRequest(FindPreset("trl-padding-free").policy));
  EXPECT_NE(Find(result, Invariant::kAttention), nullptr);
  EXPECT_NE(Find(result, Invariant::kPackingInvariance), nullptr);
}

TEST(PackingInvariance, RowCausalPoliciesAreMeasuredNeverFailed) {
  Candidate reference = ReferenceCandidate();
  PackRequest request = LessonRequest(FindPreset("megatron-gpt").policy);
  const CaseResult result = CheckCase(reference, request);
  EXPECT_TRUE(result.passed()) << (result.violations.empty() ? "" : result.violations.front().sentence);
  EXPECT_TRUE(result.checked.count(Invariant::kPackingInvariance));
  ASSERT_TRUE(result.contamination.has_value());
  EXPECT_GT(result.contamination->max_relative, 0.0) << "attention across documents changes the losses";
  EXPECT_GE(result.contamination->max_relative, result.contamination->mean_relative);
}

TEST(PackingInvariance, CanBeSwitchedOff) {
  Candidate c = MakeCandidate("positions-not-reset", PositionsNotReset{});
  CheckOptions options;
  options.packing_invariance = false;
  const CaseResult result = CheckCase(c, LessonRequest(FindPreset("reference").policy), options);
  EXPECT_EQ(Find(result, Invariant::kPackingInvariance), nullptr);
  EXPECT_FALSE(result.checked.count(Invariant::kPackingInvariance));
  EXPECT_TRUE(result.not_applicable.count(Invariant::kPackingInvariance));
}

}  // namespace
}  // namespace packoracle
