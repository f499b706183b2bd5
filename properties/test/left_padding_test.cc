// padding: left (DESIGN §3): every row's content ends at its last slot and the padding sits before its first token
// (HF tokenizers with padding_side="left": generation and RL rollout batches). Two 2025–26 mechanisms that only
// left padding can show, each caught under its invariant with its fixed twin passing:
//   - a causal fallback (the padding mask dropped, is_causal=True over the row) lets every real query attend
//     the left-pad keys before it; under right padding the same consumer is correct (no pad key precedes a
//     real query), so without the policy value it could not be stated;
//   - positions left at the model's default arange along the row (unsloth-zoo PR #840: the padded GRPO path
//     passed attention_mask but no position_ids, so left padding shifted RoPE positions); under right padding,
//     one document per row, arange is exactly the declared positions.
// The coverage invariant holds padding before the first token (PaddingOutOfPlace); the fast verifier is pinned
// to CheckCase under left padding in fastcheck/test/differential_test.cc (MixedPolicy draws the value).
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "packoracle/gtest.h"
#include "packoracle/oracle.h"
#include "packoracle/properties/generators.h"

namespace packoracle {
namespace {

Policy HfPadded(Padding padding) {
  Policy p = FindPreset("hf-padded").policy;
  p.padding = padding;
  return p;
}

PackRequest Request(const Policy& policy, std::int64_t L = 8) {
  PackRequest r;
  r.row_length = L;
  r.micro_batch_rows = 2;
  r.dp_world_size = 1;
  r.policy = policy;
  r.documents = MakeDocuments({{11, 12, 13}, {21, 22, 23, 24, 25}, {31}});
  return r;
}

std::string First(const CaseResult& result) { return result.violations.empty() ? "" : result.violations[0].sentence; }

std::vector<bool> PadSlots(const CandidateRow& row) {
  std::vector<bool> pad(row.input_ids.size(), true);
  for (const DocSpan& span : row.doc_spans)
    for (std::int64_t t = 0; t < span.length; ++t) pad[static_cast<std::size_t>(span.start + t)] = false;
  return pad;
}

// The consumer of a padded batch, as an SDPA-style backend computes it: causal, and padding keys masked by the
// 2-D attention_mask, unless `drop_padding_mask` (the causal fallback: the mask is dropped and is_causal=True
// runs over the whole row).
struct CausalConsumer {
  bool drop_padding_mask = false;
  DenseMask Consume(const CandidateRow& row, const Policy&) const {
    const auto n = row.input_ids.size();
    const auto pad = PadSlots(row);
    DenseMask mask(n, std::vector<std::uint8_t>(n, 0));
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j <= i; ++j) mask[i][j] = drop_padding_mask || pad[i] || !pad[j] ? 1 : 0;
    return mask;
  }
};

// A producer that leaves position_ids at the model's default: arange along the row (unsloth-zoo PR #840).
struct ArangePositions {
  PackResult Pack(const PackRequest& request) {
    PackResult out = ReferencePack(request);
    for (auto& mb : out.microbatches)
      for (auto& row : mb.rows) {
        std::vector<std::int64_t> arange(row.input_ids.size());
        std::iota(arange.begin(), arange.end(), request.policy.position_base);
        row.position_ids = arange;
      }
    return out;
  }
  static PackResult ReferencePack(const PackRequest& request) {
    Layout layout = OneDocumentPerRow(request.documents, request.policy, request.row_length);
    AssignMicrobatches(layout, request.micro_batch_rows, request.dp_world_size);
    return PackWithLayout(request, layout);
  }
};

// A producer that pads on the side `padding` says, whatever the policy says.
struct PaddedOn {
  Padding padding;
  PackResult Pack(const PackRequest& request) {
    Policy declared = request.policy;
    declared.padding = padding;
    Layout layout = OneDocumentPerRow(request.documents, declared, request.row_length);
    AssignMicrobatches(layout, request.micro_batch_rows, request.dp_world_size);
    return PackWithLayout(request, layout);
  }
};

TEST(LeftPadding, TheReferenceLayoutEndsEveryRowAtItsLastSlot) {
  const auto docs = MakeDocuments({{11, 12, 13}});
  const Layout layout = OneDocumentPerRow(docs, HfPadded(Padding::kLeft), 8);
  ASSERT_EQ(layout.rows.size(), 1U);
  EXPECT_EQ(layout.rows[0].length, 8);
  EXPECT_EQ(layout.rows[0].pieces[0].start, 5);
  const OracleBatch batch = Materialize(docs, layout, HfPadded(Padding::kLeft));
  const OracleRow& row = batch.rows[0];
  EXPECT_EQ(row.input_ids, (std::vector<Token>{0, 0, 0, 0, 0, 11, 12, 13}));
  EXPECT_EQ(row.cu_seqlens, (std::vector<std::int64_t>{0, 5, 8}));
  // aligned: labels[i] is prediction i-1's target, and slot 4 is padding, which predicts nothing: the first token's
  // label is ignored (a collator copying input_ids into labels trains a padding query on it: a targets finding).
  EXPECT_EQ(row.labels, (std::vector<Token>{-100, -100, -100, -100, -100, -100, 12, 13}));
  EXPECT_EQ(ContextSet(row, batch.policy, 6), (std::vector<std::int64_t>{5, 6}));         // no left-pad key
}

TEST(LeftPadding, TheReferencePackerAndConsumerPass) {
  for (const Policy& policy : {HfPadded(Padding::kLeft), HfPadded(Padding::kRight)}) {
    Candidate reference = ReferenceCandidate(), masked = MakeCandidate("causal+padding-mask", CausalConsumer{false});
    const auto packer = CheckCase(reference, Request(policy));
    EXPECT_TRUE(packer.passed()) << First(packer);
    const auto consumer = CheckCase(masked, Request(policy));
    EXPECT_TRUE(consumer.passed()) << Name(policy.padding) << ": " << First(consumer);
  }
}

TEST(LeftPadding, ACausalFallbackAttendingLeftPadKeysIsAnAttentionFinding) {
  Candidate fallback = MakeCandidate("causal-fallback", CausalConsumer{true});
  EXPECT_TRUE(CheckCase(fallback, Request(HfPadded(Padding::kRight))).passed());  // right padding cannot show it
  const auto left = CheckCase(fallback, Request(HfPadded(Padding::kLeft)));
  ASSERT_FALSE(left.passed());
  EXPECT_EQ(left.violations[0].invariant, Invariant::kAttention) << First(left);
  EXPECT_NE(First(left).find("row 0: query 5 may attend key 0 (padding), the policy says no"), std::string::npos)
      << First(left);
}

TEST(LeftPadding, ArangePositionsUnderLeftPaddingAreAPositionsFinding) {
  Candidate arange = MakeCandidate("arange", ArangePositions{}), reference = ReferenceCandidate();
  EXPECT_TRUE(CheckCase(arange, Request(HfPadded(Padding::kRight))).passed());
  Policy left = HfPadded(Padding::kLeft);
  left.positions = Positions::kDocReset;  // HF generate: position_ids = cumsum(attention_mask) - 1
  EXPECT_TRUE(CheckCase(reference, Request(left)).passed());
  const auto got = CheckCase(arange, Request(left));
  ASSERT_FALSE(got.passed());
  EXPECT_EQ(got.violations[0].invariant, Invariant::kPositions) << First(got);
}

TEST(LeftPadding, RightPaddedRowsUnderADeclaredLeftPaddingAreACoverageFinding) {
  Candidate right = MakeCandidate("right-padded", PaddedOn{Padding::kRight});
  Candidate left = MakeCandidate("left-padded", PaddedOn{Padding::kLeft});
  const auto got = CheckCase(right, Request(HfPadded(Padding::kLeft)));
  ASSERT_FALSE(got.passed());
  EXPECT_EQ(got.violations[0].invariant, Invariant::kCoverage);
  EXPECT_EQ(First(got), "micro-batch 0 row 0 slot 3 is padding after a document token (left padding only)");
  // and the converse: left-padded rows under right padding
  const auto converse = CheckCase(left, Request(HfPadded(Padding::kRight)));
  ASSERT_FALSE(converse.passed());
  EXPECT_EQ(First(converse), "micro-batch 0 row 0 slot 5 holds a document token after padding (right padding only)");
}

TEST(LeftPadding, StreamWindowsPadTheirPartialWindowOnTheLeft) {
  Policy p = FindPreset("reference").policy;
  p.padding = Padding::kLeft;
  p.overflow = Overflow::kSplit;
  p.stream_stride = StreamStride::kL;
  const Layout layout = StreamWindows(MakeDocuments({{1, 2, 3, 4, 5}}), p, 4);
  ASSERT_EQ(layout.rows.size(), 2U);
  EXPECT_EQ(layout.rows[1].length, 4);
  EXPECT_EQ(layout.rows[1].pieces[0].start, 3);  // token 5 in the last slot
  EXPECT_FALSE(StreamCutsNoRow(p, 4, 3));        // a partial window is kept, as under right padding
}

TEST(LeftPadding, ThePolicyValueReadsAndWrites) {
  Policy p;
  SetPolicyKey(p, "padding", std::string("left"));
  EXPECT_EQ(p.padding, Padding::kLeft);
  EXPECT_STREQ(Name(p.padding), "left");
  EXPECT_TRUE(PolicyProblems(p).empty());
}

}  // namespace
}  // namespace packoracle
