// The reference layouts on small inputs, checked piece by piece.
#include <gtest/gtest.h>

#include "packoracle/oracle.h"

namespace packoracle {
namespace {

const auto kSetB = MakeDocuments({{1, 2, 3, 4, 5}, {6, 7}, {8, 9, 10, 11, 12, 13, 14}, {15}});

std::vector<Piece> Pieces(const Layout& layout, std::size_t row) { return layout.rows.at(row).pieces; }

TEST(Layout, SequentialGreedyStartsANewRowWhenTheDocumentDoesNotFit) {
  const auto layout = SequentialLayout(kSetB, FindPreset("reference").policy, 8);
  ASSERT_EQ(layout.rows.size(), 2u);
  EXPECT_EQ(Pieces(layout, 0), (std::vector<Piece>{{0, 0, 0, 5}, {1, 0, 5, 2}}));
  EXPECT_EQ(Pieces(layout, 1), (std::vector<Piece>{{2, 0, 0, 7}, {3, 0, 7, 1}}));
  EXPECT_EQ(layout.rows[0].length, 8);  // padded right to the row length
}

TEST(Layout, SequentialSplitFillsEveryRowLikeSplitAcrossPack) {
  Policy policy = FindPreset("torchtune-packed").policy;
  policy.overflow = Overflow::kSplit;
  const auto layout = SequentialLayout(kSetB, policy, 8);
  ASSERT_EQ(layout.rows.size(), 2u);  // torchtune no_eos_split_true packs: [1..8], [9..15, pad]
  EXPECT_EQ(Pieces(layout, 0), (std::vector<Piece>{{0, 0, 0, 5}, {1, 0, 5, 2}, {2, 0, 7, 1}}));
  EXPECT_EQ(Pieces(layout, 1), (std::vector<Piece>{{2, 1, 0, 6}, {3, 0, 6, 1}}));
}

TEST(Layout, TruncationKeepsTheFirstRowLengthTokens) {
  const auto layout = SequentialLayout(MakeDocuments({{1, 2, 3, 4, 5, 6}}), FindPreset("trl-padding-free").policy, 4);
  ASSERT_EQ(layout.rows.size(), 1u);
  EXPECT_EQ(Pieces(layout, 0), (std::vector<Piece>{{0, 0, 0, 4}}));
  EXPECT_EQ(layout.rows[0].length, 4);  // padding none: as long as the content
}

// truncate_to: pad_multiple: rows of 10 padded to a multiple of 4 hold 8 tokens, and a truncated document
// keeps 8 (9 tokens, shorter than the row, are cut too: a row of 9 would be padded to 12 > 10).
TEST(Layout, TruncationAtThePaddingMultipleKeepsFloorLOverKTimesKTokens) {
  Policy policy = FindPreset("reference").policy;
  policy.overflow = Overflow::kTruncate;
  policy.pad_to = PadTo{PadTo::Kind::kMultipleOf, 4};
  policy.truncate_to = TruncateTo::kPadMultiple;
  const auto docs = MakeDocuments({{1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {1, 2, 3}});
  for (const auto& layout : {SequentialLayout(docs, policy, 10), FirstFitLayout(docs, policy, 10)}) {
    ASSERT_EQ(layout.rows.size(), 3u);
    EXPECT_EQ(Pieces(layout, 0), (std::vector<Piece>{{0, 0, 0, 8}}));
    EXPECT_EQ(Pieces(layout, 1), (std::vector<Piece>{{1, 0, 0, 8}}));
    EXPECT_EQ(Pieces(layout, 2), (std::vector<Piece>{{2, 0, 0, 3}}));
    EXPECT_EQ(layout.rows[0].length, 8);
    EXPECT_EQ(layout.rows[2].length, 4);
  }
  const auto alone = OneDocumentPerRow(docs, policy, 10);
  EXPECT_EQ(Pieces(alone, 1), (std::vector<Piece>{{1, 0, 0, 8}}));
  policy.truncate_to = TruncateTo::kRowLen;  // keeps 10, padded to 12 > 10: no layout
  EXPECT_THROW(SequentialLayout(docs, policy, 10), InputError);
}

// overflow: drop (axolotl's excess_length_strategy: drop): a document longer than the row is in no row, the
// others are laid out as if it were not there; exactly L tokens still fit. PolicyDemandsRefusal never asks
// for a refusal.
TEST(Layout, DropLeavesADocumentLongerThanTheRowOutOfEveryRow) {
  Policy policy = FindPreset("reference").policy;
  policy.overflow = Overflow::kDrop;
  const auto docs = MakeDocuments({{1, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}, {12}, {4, 5, 6, 7, 8, 9, 10, 11}});
  for (const auto& layout : {SequentialLayout(docs, policy, 8), FirstFitLayout(docs, policy, 8)}) {
    ASSERT_EQ(layout.rows.size(), 2u);
    EXPECT_EQ(Pieces(layout, 0), (std::vector<Piece>{{0, 0, 0, 3}, {2, 0, 3, 1}}));
    EXPECT_EQ(Pieces(layout, 1), (std::vector<Piece>{{3, 0, 0, 8}}));
  }
  const auto alone = OneDocumentPerRow(docs, policy, 8);
  ASSERT_EQ(alone.rows.size(), 3u);
  EXPECT_EQ(Pieces(alone, 2), (std::vector<Piece>{{3, 0, 0, 8}}));
  EXPECT_FALSE(PolicyDemandsRefusal(policy, 8, {3, 9, 1, 8}));
  EXPECT_TRUE(DroppedDocument(policy, 8, 9));
  EXPECT_FALSE(DroppedDocument(policy, 8, 8));
  policy.shift = Shift::kDocument;  // 9 tokens are 8 inputs: kept
  EXPECT_EQ(SequentialLayout(docs, policy, 8).rows.size(), 3u);
}

TEST(Layout, OneDocumentPerRowSplitCutsChunks) {
  Policy policy = FindPreset("hf-padded").policy;
  policy.overflow = Overflow::kSplit;
  const auto layout = OneDocumentPerRow(MakeDocuments({{1, 2, 3, 4, 5}, {6}}), policy, 2);
  ASSERT_EQ(layout.rows.size(), 4u);
  EXPECT_EQ(Pieces(layout, 2), (std::vector<Piece>{{0, 4, 0, 1}}));
  EXPECT_EQ(Pieces(layout, 3), (std::vector<Piece>{{1, 0, 0, 1}}));
}

TEST(Layout, StreamWindowsWithStrideLAndLPlus1) {
  Policy policy = FindPreset("llmc").policy;  // bos 0 prepended: stream 0 1 2 3 4 5 0 6 7 0 8 ... (19 tokens)
  auto layout = StreamWindows(kSetB, policy, 8);
  ASSERT_EQ(layout.rows.size(), 2u);  // rows while r·8 + 9 <= 19, as llm.c's (N-1)/(B·T)
  EXPECT_EQ(Pieces(layout, 1), (std::vector<Piece>{{1, 2, 0, 1}, {2, 0, 1, 7}}));
  policy.stream_stride = StreamStride::kLPlus1;  // torchtitan: one transition per window never trained
  layout = StreamWindows(kSetB, policy, 8);
  ASSERT_EQ(layout.rows.size(), 2u);
  EXPECT_EQ(Pieces(layout, 1).front(), (Piece{2, 0, 0, 8}));  // starts at stream token 9
}

TEST(Layout, StreamWindowsKeepThePaddedTailUnderPaddingRight) {
  const auto layout = StreamWindows(MakeDocuments({{11, 12, 13}, {21, 22, 23, 24, 25, 26}}),
                                    FindPreset("megatron-gpt").policy, 8);
  ASSERT_EQ(layout.rows.size(), 2u);  // Megatron's validation split: [25 26 EOD pad ...]
  EXPECT_EQ(Pieces(layout, 1), (std::vector<Piece>{{1, 4, 0, 3}}));
  EXPECT_EQ(layout.rows[1].length, 8);
}

TEST(Layout, MicrobatchesAreDealtRoundRobinOverRanks) {
  Layout layout{4, std::vector<RowLayout>(5)};
  AssignMicrobatches(layout, 2, 2);  // micro-batches 0 0 1 1 2 → ranks 0 0 1 1 0, micro_steps 0 0 0 0 1
  std::vector<std::pair<std::int64_t, std::int64_t>> got;
  for (const auto& row : layout.rows) got.emplace_back(row.rank, row.micro_step);
  EXPECT_EQ(got, (std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 0}, {0, 0}, {1, 0}, {1, 0}, {0, 1}}));
}

// pad_to: longest (LitGPT's get_sft_collate_fn): every row of a micro-batch as wide as its widest content. One
// document per row of 3, 5 and 1 tokens (L = 8): all in micro-batch 0, 5 slots each; two rows a micro-batch,
// rows 0 and 1 keep 5 and row 2, alone in its micro-batch, 1. Under padding left the content moves with the end.
TEST(Layout, PadToLongestPadsEveryRowToItsMicrobatchsWidestContent) {
  Policy policy = FindPreset("hf-padded").policy;
  policy.pad_to = PadTo{PadTo::Kind::kLongest, 0};
  const auto docs = MakeDocuments({{11, 12, 13}, {21, 22, 23, 24, 25}, {31}});
  Layout layout = OneDocumentPerRow(docs, policy, 8);
  ASSERT_EQ(layout.rows.size(), 3u);
  for (const auto& row : layout.rows) EXPECT_EQ(row.length, 5);
  AssignMicrobatches(layout, 2, 1, policy);
  EXPECT_EQ(layout.rows[0].length, 5);
  EXPECT_EQ(layout.rows[1].length, 5);
  EXPECT_EQ(layout.rows[2].length, 1);
  policy.padding = Padding::kLeft;
  Layout left = OneDocumentPerRow(docs, policy, 8);
  EXPECT_EQ(Pieces(left, 0), (std::vector<Piece>{{0, 0, 2, 3}}));  // [pad pad 11 12 13]
  AssignMicrobatches(left, 1, 2, policy);                          // each row its own micro-batch
  EXPECT_EQ(left.rows[0].length, 3);
  EXPECT_EQ(Pieces(left, 0), (std::vector<Piece>{{0, 0, 0, 3}}));
  EXPECT_EQ(Pieces(left, 2), (std::vector<Piece>{{2, 0, 0, 1}}));
  // The rows of a micro-batch are as long as its longest content, never L: the three in one micro-batch of
  // sequential rows of 8 hold 3 + 5 (row 0) and 1 (row 1): 8 and 8.
  policy.padding = Padding::kRight;
  policy.boundary_source = BoundarySource::kSpans;
  const Layout packed = SequentialLayout(docs, policy, 8);
  ASSERT_EQ(packed.rows.size(), 2u);
  EXPECT_EQ(packed.rows[1].length, 8);
}

TEST(Layout, EmptyDocumentsOccupyNoSlot) {
  const auto layout = SequentialLayout(MakeDocuments({{}, {1, 2}, {}}), Policy{}, 4);
  ASSERT_EQ(layout.rows.size(), 1u);
  EXPECT_EQ(Pieces(layout, 0), (std::vector<Piece>{{1, 0, 0, 2}}));
}

}  // namespace
}  // namespace packoracle

namespace packoracle {
namespace {

TEST(Layout, StreamTailUnderNextInStreamNeedsATargetAsMegatronDoes) {
  // 8 tokens + EOD = 9 = L + 1: one full window whose row-end target is the last token; no second row.
  const auto docs = MakeDocuments({{1, 2, 3, 4, 5, 6, 7, 8}});
  EXPECT_EQ(StreamWindows(docs, FindPreset("megatron-gpt").policy, 8).rows.size(), 1u);
  Policy wrapped = FindPreset("trl-wrapped").policy;  // row_end_target none: every token is an input
  wrapped.eos_id = 0;
  EXPECT_EQ(StreamWindows(docs, wrapped, 8).rows.size(), 2u);
}

}  // namespace
}  // namespace packoracle
