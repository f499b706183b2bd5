// shift: document (DESIGN §3): each document shifted on its own (torchtitan's HuggingFaceTextDataset since PR
// #4075, NeMo's GPTSFTPackedDataset collate): a document of n tokens enters the rows as its inputs e[0..n-2]
// with the pre-shifted labels e[1..n-1], its last token a label only, no target across documents. Checked by
// CheckCase (and by the fast verifier, pinned to it in fastcheck/test/differential_test.cc, where MixedPolicy
// draws the key).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "packoracle/gtest.h"
#include "packoracle/oracle.h"
#include "packoracle/properties/generators.h"

namespace packoracle {
namespace {

// The reference policy with an EOS appended to every document, shifted per document (or not).
Policy Reference(Shift shift = Shift::kDocument) {
  Policy p = FindPreset("reference").policy;
  p.eos_id = 2;
  p.shift = shift;
  return p;
}

// torchtitan/hf-text as its adapter declares it: BOS and EOS, the stream cut every L inputs (the remainder
// dropped), positions restarting per document and per row, the row end predicting within its document.
Policy Torchtitan() {
  Policy p = FindPreset("reference").policy;
  p.boundary_source = BoundarySource::kPositionReset;
  p.split_positions = SplitPositions::kRestart;
  p.row_end_target = RowEndTarget::kNextInDoc;
  p.stream_stride = StreamStride::kL;
  p.padding = Padding::kNone;
  p.overflow = Overflow::kSplit;
  p.bos_id = 1;
  p.eos_id = 2;
  p.shift = Shift::kDocument;
  return p;
}

PackRequest Request(const Policy& policy, std::vector<std::vector<Token>> tokens, std::int64_t L) {
  PackRequest r;
  r.row_length = L;
  r.micro_batch_rows = 2;
  r.dp_world_size = 1;
  r.policy = policy;
  r.documents = MakeDocuments(tokens);
  // 1 nat per target, for the packer's own totals (the delimiters' entries too: BOS and EOS at most).
  for (const auto& d : r.documents) r.target_losses[d.uid].assign(d.tokens.size() + 2, 1.0);
  return r;
}

struct Replay {
  PackResult out;
  PackResult Pack(const PackRequest&) { return out; }
};

std::string First(const CaseResult& result) { return result.violations.empty() ? "" : result.violations[0].sentence; }

TEST(Shift, TheOracleShiftsEachDocumentOnItsOwn) {
  // d0 = [11 12 EOS], d1 = [21 EOS]: inputs [11 12] and [21], labels [12 EOS] and [EOS].
  const auto docs = MakeDocuments({{11, 12}, {21}});
  const auto batch = Materialize(docs, SequentialLayout(docs, Reference(), 4), Reference());
  ASSERT_EQ(batch.rows.size(), 1u);
  const OracleRow& row = batch.rows[0];
  EXPECT_EQ(row.input_ids, (std::vector<Token>{11, 12, 21, 0}));
  EXPECT_EQ(row.labels, (std::vector<Token>{12, 2, 2, -100}));
  EXPECT_EQ(row.predictions[1].kind, TargetKind::kDocumentEnd);  // rule 5: followed by another document
  EXPECT_EQ(row.predictions[2].kind, TargetKind::kDocumentEnd);  // followed by padding
  EXPECT_EQ(row.position_ids[2], 0);
  // A layout that places a document's last token is no layout under shift: document.
  Layout placed{4, {RowLayout{4, {{0, 0, 0, 3}}, 0, 0}}};
  try {
    Materialize(docs, placed, Reference());
    ADD_FAILURE() << "a piece holding d0's last token was accepted";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "row 0, piece 0: span [0, 3) of document 'd0' lies outside the document's 2 input tokens "
                           "(shift: document: its last token is a label only)");
  }
}

TEST(Shift, TorchtitansStreamIsCutEveryLInputs) {
  // [BOS 5 EOS] [BOS 6 7 EOS]: inputs [1 5] [1 6 7], 5 inputs, one full row of 4, the rest dropped.
  const auto request = Request(Torchtitan(), {{5}, {6, 7}}, 4);
  Candidate reference = ReferenceCandidate();
  const PackResult out = reference.packer->Pack(request);
  ASSERT_EQ(out.microbatches.size(), 1u);
  ASSERT_EQ(out.microbatches[0].rows.size(), 1u);
  const CandidateRow& row = out.microbatches[0].rows[0];
  EXPECT_EQ(row.input_ids, (std::vector<Token>{1, 5, 1, 6}));
  EXPECT_EQ(row.labels, (std::vector<Token>{5, 2, 6, 7}));  // the row end: the next token of its document
  EXPECT_EQ(*row.position_ids, (std::vector<std::int64_t>{0, 1, 0, 1}));
  const auto held = CheckCase(reference, request);
  EXPECT_TRUE(held.passed()) << First(held);
  // Three inputs in all make no row of 4: refused, as torchtitan's loader runs out of data.
  EXPECT_TRUE(PolicyDemandsRefusal(Torchtitan(), 4, {3, 2}));
  EXPECT_FALSE(PolicyDemandsRefusal(Torchtitan(), 4, {3, 3}));  // 2 + 2 inputs: one row
}

TEST(Shift, ShiftedRowsHoldUnderDocumentAndAreACoverageFindingUnderRow) {
  // d1 is empty: [EOS] alone has no input and takes no slot.
  const auto request = Request(Reference(), {{11, 12}, {}, {21}}, 4);
  Candidate reference = ReferenceCandidate();
  const PackResult rows = reference.packer->Pack(request);
  const auto held = CheckCase(reference, request);
  EXPECT_TRUE(held.passed()) << First(held);

  PackRequest row_shift = request;
  row_shift.policy.shift = Shift::kRow;
  Candidate replay = MakeCandidate("per-document", Replay{rows});
  const auto found = CheckCase(replay, row_shift);
  ASSERT_FALSE(found.passed());
  EXPECT_EQ(found.violations[0].invariant, Invariant::kCoverage);
  EXPECT_EQ(First(found), "document 'd0': only 2 of its 3 tokens are packed");
}

TEST(Shift, RowShiftedRowsAreACoverageFindingUnderDocument) {
  const auto request = Request(Reference(Shift::kRow), {{11, 12}, {21}}, 5);
  const PackResult rows = ReferenceCandidate().packer->Pack(request);  // [11 12 EOS 21 EOS]
  PackRequest document = request;
  document.policy.shift = Shift::kDocument;
  Candidate replay = MakeCandidate("per-row", Replay{rows});
  const auto found = CheckCase(replay, document);
  ASSERT_FALSE(found.passed());
  EXPECT_EQ(found.violations[0].invariant, Invariant::kCoverage);
  EXPECT_EQ(First(found),
            "micro-batch 0 row 0: span of 'd0' (start 0, length 3, doc_offset 0) lies outside its row or its "
            "document (under shift: document its last token, 2, is a label only, never an input)");
}

TEST(Shift, ATargetAcrossTheBoundaryIsATargetsFinding) {
  const auto request = Request(Reference(), {{11, 12}, {21}}, 4);
  PackResult out = ReferenceCandidate().packer->Pack(request);
  CandidateRow& row = out.microbatches[0].rows[0];
  ASSERT_EQ(row.labels, (std::vector<Token>{12, 2, 2, -100}));
  row.labels[1] = 21;  // d0's last input predicting d1's first token: the row's shift, not the document's
  Candidate replay = MakeCandidate("crossing", Replay{out});
  const auto found = CheckCase(replay, request);
  ASSERT_FALSE(found.passed());
  EXPECT_EQ(found.violations[0].invariant, Invariant::kTargets);
  EXPECT_EQ(First(found), "micro-batch 0 row 0 slot 1: prediction targets 21, but the next token of its document is 2");
}

TEST(Shift, TheReferencePassesGeneratedCasesUnderDocument) {
  VerifyOptions options;
  options.cases = 150;
  Candidate reference = ReferenceCandidate();
  Policy torchtune = FindPreset("torchtune-packed").policy;
  torchtune.overflow = Overflow::kSplit;
  torchtune.row_end_target = RowEndTarget::kNextInDoc;
  torchtune.shift = Shift::kDocument;
  Policy truncating = Reference();
  truncating.overflow = Overflow::kTruncate;
  reference.policies = {Reference(), Torchtitan(), torchtune, truncating};
  const auto passed = Verify(reference, options);
  EXPECT_TRUE(passed.passed) << passed.text;
}

}  // namespace
}  // namespace packoracle
