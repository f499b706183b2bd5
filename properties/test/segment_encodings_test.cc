// segment_encodings: rows (DESIGN §3): cu_seqlens, seq_lens and doc_ids that name rows, not documents (TRL
// pack_dataset 'wrapped' through the padding-free collator), legal only under row_causal attention. Checked
// by CheckCase (and by the fast verifier, pinned to it in fastcheck/test/differential_test.cc, where
// MixedPolicy draws the key).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "packoracle/gtest.h"
#include "packoracle/oracle.h"
#include "packoracle/properties/generators.h"

namespace packoracle {
namespace {

Policy RowNamed(const char* preset = "reference") {
  Policy p = FindPreset(preset).policy;
  p.attention = Attention::kRowCausal;
  p.segment_encodings = SegmentEncodings::kRows;
  return p;
}

PackRequest Request(const Policy& policy, std::vector<std::vector<Token>> tokens, std::int64_t L) {
  PackRequest r;
  r.row_length = L;
  r.micro_batch_rows = 2;
  r.dp_world_size = 1;
  r.policy = policy;
  r.documents = MakeDocuments(tokens);
  return r;
}

struct Replay {
  PackResult out;
  PackResult Pack(const PackRequest&) { return out; }
};

std::string First(const CaseResult& result) { return result.violations.empty() ? "" : result.violations[0].sentence; }

TEST(SegmentEncodings, TheOracleEncodesEachRowAsOneSequence) {
  const auto batch =
      Materialize(MakeDocuments({{11, 12}, {21}}), SequentialLayout(MakeDocuments({{11, 12}, {21}}), RowNamed(), 5),
                  RowNamed());
  ASSERT_EQ(batch.rows.size(), 1u);
  EXPECT_EQ(batch.rows[0].doc_ids, (std::vector<std::int64_t>{0, 0, 0, kPad, kPad}));
  EXPECT_EQ(batch.rows[0].cu_seqlens, (std::vector<std::int64_t>{0, 3, 5}));  // the tokens, then the padding
  EXPECT_EQ(batch.rows[0].seq_lens, (std::vector<std::int64_t>{3, 2}));
}

TEST(SegmentEncodings, RowNamedEncodingsHoldUnderRowsAndAreAFindingUnderDocuments) {
  const auto request = Request(RowNamed(), {{11}, {21}}, 2);
  Candidate reference = ReferenceCandidate();
  const PackResult rows = reference.packer->Pack(request);
  ASSERT_EQ(rows.microbatches.size(), 1u);
  const CandidateRow& row = rows.microbatches[0].rows[0];
  ASSERT_TRUE(row.cu_seqlens && row.doc_ids);
  EXPECT_EQ(*row.cu_seqlens, (std::vector<std::int64_t>{0, 2}));  // TRL's cu_seq_lens_q for d0=[0] d1=[0]
  EXPECT_EQ(*row.doc_ids, (std::vector<std::int64_t>{0, 0}));     // and its seq_idx
  const auto held = CheckCase(reference, request);
  EXPECT_TRUE(held.passed()) << First(held);

  PackRequest documents = request;
  documents.policy.segment_encodings = SegmentEncodings::kDocuments;
  Candidate replay = MakeCandidate("row-named", Replay{rows});
  const auto found = CheckCase(replay, documents);
  ASSERT_FALSE(found.passed());
  EXPECT_EQ(found.violations[0].invariant, Invariant::kSegments);
  EXPECT_EQ(First(found), "micro-batch 0 row 0: cu_seqlens put document starts at [0], the spans at [0 1]");
}

TEST(SegmentEncodings, DocumentNamedEncodingsAreAFindingUnderRows) {
  const auto request = Request(RowNamed(), {{11}, {21}}, 2);
  PackResult out = ReferenceCandidate().packer->Pack(request);
  CandidateRow& row = out.microbatches[0].rows[0];
  row.cu_seqlens = std::vector<std::int64_t>{0, 1, 2};
  row.seq_lens = std::vector<std::int64_t>{1, 1};
  row.doc_ids = std::vector<std::int64_t>{0, 1};
  Candidate replay = MakeCandidate("document-named", Replay{out});
  const auto found = CheckCase(replay, request);
  ASSERT_FALSE(found.passed());
  EXPECT_EQ(found.violations[0].invariant, Invariant::kSegments);
  EXPECT_EQ(First(found),
            "micro-batch 0 row 0: cu_seqlens put segment starts at [0 1], but under segment_encodings: rows they "
            "name the row, starting at [0]");
  bool attention = false;  // and they isolate the documents the declared row_causal lets see each other
  for (const auto& v : found.violations) attention = attention || v.invariant == Invariant::kAttention;
  EXPECT_TRUE(attention);
}

TEST(SegmentEncodings, TheReferencePassesGeneratedCasesUnderRows) {
  VerifyOptions options;
  options.cases = 150;
  Candidate reference = ReferenceCandidate();
  reference.policies = {RowNamed(), RowNamed("trl-wrapped"), RowNamed("megatron-gpt")};
  const auto passed = Verify(reference, options);
  EXPECT_TRUE(passed.passed) << passed.text;
}

}  // namespace
}  // namespace packoracle
