// SpanDerivation: the greedy reading of rows without doc_spans, and the search that takes over when documents
// made of the pad id leave the greedy reading unable to explain the step. (The Python tests read the same
// examples through packoracle._batch.SpanMatcher, and pin the dump converters' cursor to this reading.)
#include "packoracle/jobs/span_derivation.h"

#include <gtest/gtest.h>

namespace packoracle::jobs {
namespace {

using Rows = std::vector<std::vector<Token>>;

std::vector<std::vector<DerivedSpan>> ReadAll(SpanDerivation& d, const Rows& rows) {
  for (const auto& row : rows) d.Match(row, {});
  return d.rows();
}

TEST(SpanDerivation, DistinctTokensAreReadGreedily) {
  SpanDerivation d({{11, 12}, {21}}, Overflow::kError, 0);
  const auto spans = ReadAll(d, {{11, 12, 21, 0}});
  EXPECT_EQ(spans, (std::vector<std::vector<DerivedSpan>>{{{0, 0, 2, 0}, {1, 2, 1, 0}}}));
  EXPECT_EQ(d.misses(), 0);
  EXPECT_EQ(d.Unplaced(), 0);
}

TEST(SpanDerivation, ASplitDocumentContinuesAtTheNextRowsStart) {
  SpanDerivation d({{1, 2, 3, 4, 5}, {6}}, Overflow::kSplit, 0);
  const auto spans = ReadAll(d, {{1, 2, 3}, {4, 5, 6}});
  EXPECT_EQ(spans, (std::vector<std::vector<DerivedSpan>>{{{0, 0, 3, 0}}, {{0, 0, 2, 3}, {1, 2, 1, 0}}}));
  EXPECT_EQ(d.Unplaced(), 0);
}

TEST(SpanDerivation, ShuffledStreamWindowsStartInsideAnyDocument) {
  // Megatron's GPTDataset as built: windows of one stream (1 2 0 | 3 0 | 4 0, L = 3) handed out shuffled. Row 0
  // is d2's EOD, which the greedy reading first takes for d0's; row 1 then places d0 whole (a token read twice),
  // and the search reads row 0 as the rest of d2, the one piece that leaves no token read twice.
  SpanDerivation d({{1, 2, 0}, {3, 0}, {4, 0}}, Overflow::kSplit, 99);
  ReadAll(d, {{0}, {1, 2, 0}, {3, 0, 4}});
  ASSERT_GT(d.misses(), 0);
  ASSERT_TRUE(d.Solve(99));
  EXPECT_EQ(d.rows(), (std::vector<std::vector<DerivedSpan>>{{{2, 0, 1, 1}},
                                                             {{0, 0, 3, 0}},
                                                             {{1, 0, 2, 0}, {2, 2, 1, 0}}}));
  EXPECT_EQ(d.Unplaced(), 0);
}

TEST(SpanDerivation, AStreamsDroppedTailLeavesTheGreedyReadingAsItIs) {
  // torchtitan's HuggingFaceTextDataset: one window of the stream, the rest dropped. The greedy reading (d1 cut
  // at the row's end) read every row; d2, in no row, is what the step did not pack, and no search replaces it.
  SpanDerivation d({{1, 11, 12, 13, 14, 15}, {1, 21}, {1}}, Overflow::kSplit, 0);
  ReadAll(d, {{1, 11, 12, 13, 14, 15, 1}});
  EXPECT_EQ(d.misses(), 0);
  EXPECT_EQ(d.Unplaced(), 1);
  EXPECT_FALSE(d.Solve(0));
  EXPECT_EQ(d.rows(), (std::vector<std::vector<DerivedSpan>>{{{0, 0, 6, 0}, {1, 6, 1, 0}}}));
}

TEST(SpanDerivation, UnderOverflowDropALongDocumentIsInNoRowOrReadCutAsPacked) {
  // axolotl's excess_length_strategy: drop: d1 (9 tokens, rows of 8) is in no row: it stays unplaced. Its first 8
  // tokens in a row (a packer that truncates it) are read as d1 cut at the row's end, as the packer placed them,
  // so that the checks name d1's piece as verify does from the dumped spans.
  SpanDerivation d({{1, 2, 3}, {4, 5, 6, 7, 8, 9, 10, 11, 12}}, Overflow::kDrop, 0);
  EXPECT_EQ(ReadAll(d, {{1, 2, 3, 0, 0, 0, 0, 0}}), (std::vector<std::vector<DerivedSpan>>{{{0, 0, 3, 0}}}));
  EXPECT_EQ(d.misses(), 0);
  EXPECT_EQ(d.Unplaced(), 1);
  SpanDerivation truncated({{1, 2, 3}, {4, 5, 6, 7, 8, 9, 10, 11, 12}}, Overflow::kDrop, 0);
  EXPECT_EQ(ReadAll(truncated, {{1, 2, 3, 0, 0, 0, 0, 0}, {4, 5, 6, 7, 8, 9, 10, 11}}),
            (std::vector<std::vector<DerivedSpan>>{{{0, 0, 3, 0}}, {{1, 0, 8, 0}}}));
  EXPECT_EQ(truncated.misses(), 0);
  EXPECT_EQ(truncated.Unplaced(), 0);
}

TEST(SpanDerivation, TheSearchReadsAPadIdDocumentAsPaddingWhereTheGreedyReadingTookIt) {
  // The packer: [d0 pad] [d1 d2] [d3 d4]. The greedy reading puts d2 (a lone pad id) in row 0's padding, so
  // row 2's first token has no document left; the search reads row 0's tail as padding.
  SpanDerivation d({{0, 0}, {0, 0}, {0}, {0}, {1}}, Overflow::kError, 0);
  ReadAll(d, {{0, 0, 0}, {0, 0, 0}, {0, 1, 0}});
  ASSERT_GT(d.misses() + d.Unplaced(), 0);
  ASSERT_TRUE(d.Solve(0));
  EXPECT_EQ(d.rows(), (std::vector<std::vector<DerivedSpan>>{
                          {{0, 0, 2, 0}}, {{1, 0, 2, 0}, {2, 2, 1, 0}}, {{3, 0, 1, 0}, {4, 1, 1, 0}}}));
  EXPECT_EQ(d.misses(), 0);
  EXPECT_EQ(d.Unplaced(), 0);
}

TEST(SpanDerivation, AnUnexplainableStepKeepsTheGreedyReading) {
  SpanDerivation d(std::vector<std::vector<Token>>{{11}}, Overflow::kError, 0);
  ReadAll(d, {{11, 7, 0}});  // token 7 belongs to no document
  EXPECT_EQ(d.misses(), 1);
  EXPECT_FALSE(d.Solve(0));
  EXPECT_EQ(d.rows(), (std::vector<std::vector<DerivedSpan>>{{{0, 0, 1, 0}}}));
}

TEST(SpanDerivation, APadIdDocumentOverTargetsIsADocument) {
  // Slots 1-2 are targets: padding is never a target, so the pad-id document d1 is read there.
  SpanDerivation d({{5}, {0, 0}}, Overflow::kError, 0);
  const std::vector<Token> row{5, 0, 0};
  const std::vector<std::uint8_t> targets{1, 1, 0};
  EXPECT_EQ(d.Match(row, targets), (std::vector<DerivedSpan>{{0, 0, 1, 0}, {1, 1, 2, 0}}));
  SpanDerivation without({{5}, {0, 0}}, Overflow::kError, 0);
  const std::vector<std::uint8_t> none{1, 0, 0};
  EXPECT_EQ(without.Match(row, none), (std::vector<DerivedSpan>{{0, 0, 1, 0}}));
}

// The documents viewed where the caller holds them read as the same documents held by the derivation: the
// greedy reading, a split continued, and the search, which reads them again (a copy that dropped or moved a
// view would show here).
TEST(SpanDerivation, ViewedDocumentsReadAsDocumentsOfItsOwn) {
  struct Case {
    Rows docs, rows;
    Overflow overflow;
  };
  const std::vector<Case> cases = {{{{11, 12}, {21}}, {{11, 12, 21, 0}}, Overflow::kError},
                                   {{{1, 2, 3, 4, 5}, {6}}, {{1, 2, 3}, {4, 5, 6}}, Overflow::kSplit},
                                   {{{0, 0}, {0, 0}, {0}, {0}, {1}}, {{0, 0, 0}, {0, 0, 0}, {0, 1, 0}}, Overflow::kError}};
  for (const Case& c : cases) {
    SpanDerivation owned(c.docs, c.overflow, 0);
    std::vector<std::span<const Token>> views(c.docs.begin(), c.docs.end());
    SpanDerivation viewed(std::move(views), c.overflow, 0);
    EXPECT_EQ(ReadAll(viewed, c.rows), ReadAll(owned, c.rows));
    EXPECT_EQ(viewed.misses(), owned.misses());
    EXPECT_EQ(viewed.Solve(0), owned.Solve(0));
    EXPECT_EQ(viewed.rows(), owned.rows());
    EXPECT_EQ(viewed.Unplaced(), owned.Unplaced());
  }
}

TEST(SpanDerivation, TheRowsOwnEncodingsChooseBetweenDocumentsThatBothMatch) {
  // Row 0 is [1 1 | pad]: d1 = [1 1] whole, or d0 = [1] then d2 = [1 0]. The tokens explain both; the greedy
  // reading takes the first in order (d0) unless the row's encodings start a segment at slot 2, not at 1.
  const std::vector<std::vector<Token>> docs{{1}, {1, 1}, {1, 0}};
  const std::vector<Token> row{1, 1, 0, 0};
  SpanDerivation blind(docs, Overflow::kError, 0);
  EXPECT_EQ(blind.Match(row, {}), (std::vector<DerivedSpan>{{0, 0, 1, 0}, {2, 1, 2, 0}}));
  SpanDerivation told(docs, Overflow::kError, 0);
  int asked = 0;
  const auto starts = [&asked] {
    ++asked;
    return std::vector<std::int64_t>{0, 2};
  };
  EXPECT_EQ(told.Match(row, {}, starts), (std::vector<DerivedSpan>{{1, 0, 2, 0}}));
  EXPECT_EQ(asked, 1);  // asked once, where two documents matched
  SpanDerivation unique({{5, 6}}, Overflow::kError, 0);
  unique.Match(std::vector<Token>{5, 6}, {}, starts);
  EXPECT_EQ(asked, 1);  // a slot only one document matches needs no encoding
}

TEST(SpanDerivation, AnEncodedStartOutranksPaddingWhereTwoDocumentsMatch) {
  // A first-fit-decreasing packer, pad id 0: row 0 = d1 = [0 0] (doc_ids [0 0]: one segment, starts {0}; slot 0
  // a target), row 1 = d0 = [0] then padding (doc_ids [0 -1]: starts {0 1}; no target). At row 0 both d0 (then
  // padding) and d1 match; the encoding bears out d1's end (the row's) better than d0's (padding only). Ranking
  // the two ends alike made d0 the reading there, a false violation of a correct packer.
  const std::vector<std::vector<Token>> docs{{0}, {0, 0}};
  const std::vector<Token> row{0, 0};
  const std::vector<std::uint8_t> first_targets{1, 0}, second_targets{0, 0};
  const auto one_segment = [] { return std::vector<std::int64_t>{0}; };
  const auto with_padding = [] { return std::vector<std::int64_t>{0, 1}; };
  SpanDerivation d(docs, Overflow::kError, 0);
  d.Match(row, first_targets, one_segment);
  d.Match(row, second_targets, with_padding);
  d.Finish(0);
  EXPECT_EQ(d.rows(), (std::vector<std::vector<DerivedSpan>>{{{1, 0, 2, 0}}, {{0, 0, 1, 0}}}));
  EXPECT_EQ(d.misses() + d.Unplaced(), 0);
}

TEST(SpanDerivation, ThePaddingTheRowsMarkDecidesBetweenTwoCompleteReadings) {
  // A truncating packer, pad id 0, L = 2: row 0 = d0 = [0] then padding (doc_ids [0 -1]), row 1 = d1 = [0 0]
  // (doc_ids [0 0]), no targets anywhere. Both readings place every document: the packer's, and d0 with d1 cut
  // to one token in row 0, then a row of padding (a false coverage violation). The rows' marks of padding
  // bear out only the packer's.
  const std::vector<std::vector<Token>> docs{{0}, {0, 0}};
  const std::vector<Token> row{0, 0};
  const std::vector<std::uint8_t> none{0, 0};
  RowEvidence padded({0, 1}), unpadded({0});
  padded.padding_from = 1;
  unpadded.padding_from = 2;
  SpanDerivation d(docs, Overflow::kTruncate, 0);
  d.Match(row, none, [&] { return padded; });
  d.Match(row, none, [&] { return unpadded; });
  EXPECT_GT(d.contradicted() + d.Unplaced(), 0);
  d.Finish(0);
  EXPECT_EQ(d.rows(), (std::vector<std::vector<DerivedSpan>>{{{0, 0, 1, 0}}, {{1, 0, 2, 0}}}));
  EXPECT_EQ(d.misses() + d.Unplaced() + d.contradicted(), 0);
}

TEST(SpanDerivation, AGreedyReadingTheEncodingsContradictIsSearchedAgain) {
  // The packer: row 0 = d1 d2 = [1][2] (segments start at {0 1}), row 1 = d0 = [1 2] ({0}), row 2 = d3 = [1].
  // The greedy reading places every document, but row 0 as d0 (first in order where the ends tie) and row 1 as
  // d1 d2, a segment start at slot 1 that row 1's encoding does not make: the search reads the step again.
  const std::vector<std::vector<Token>> docs{{1, 2}, {1}, {2}, {1}};
  SpanDerivation d(docs, Overflow::kError, 9);
  const std::vector<std::uint8_t> none;
  d.Match(std::vector<Token>{1, 2}, none, [] { return std::vector<std::int64_t>{0, 1}; });
  d.Match(std::vector<Token>{1, 2}, none, [] { return std::vector<std::int64_t>{0}; });
  d.Match(std::vector<Token>{1}, none, [] { return std::vector<std::int64_t>{0}; });
  EXPECT_EQ(d.misses() + d.Unplaced(), 0);
  EXPECT_EQ(d.contradicted(), 1);
  EXPECT_TRUE(d.Finish(9));
  EXPECT_EQ(d.rows(), (std::vector<std::vector<DerivedSpan>>{{{1, 0, 1, 0}, {2, 1, 1, 0}}, {{0, 0, 2, 0}},
                                                             {{3, 0, 1, 0}}}));
  EXPECT_EQ(d.contradicted(), 0);
}

TEST(SpanDerivation, DocumentsOfTheSameTokensAreTriedOnceAtASlot) {
  // Megatron's stream of one-token documents of the EOD id 0 (which is also the pad id), windows handed out in
  // reverse: the search finds the reading within its bound only if it does not try every order of the twelve
  // interchangeable documents.
  std::vector<std::vector<Token>> docs{{5, 0}};
  for (int k = 0; k < 12; ++k) docs.push_back({0});
  docs.push_back({7, 0});
  // the stream 5 0 0 0 ... 0 7 0 in windows of 2, last first
  std::vector<Token> stream{5, 0};
  for (int k = 0; k < 12; ++k) stream.push_back(0);
  stream.insert(stream.end(), {7, 0});
  Rows rows;
  for (std::size_t i = 0; i < stream.size(); i += 2) rows.insert(rows.begin(), {stream[i], stream[i + 1]});
  SpanDerivation d(docs, Overflow::kSplit, 0);
  ReadAll(d, rows);
  d.Finish(0);
  EXPECT_EQ(d.misses(), 0);
  EXPECT_EQ(d.Unplaced(), 0);
}

TEST(SpanDerivation, OtherReadingsAreTheCompleteReadingsOfDocumentsAlikeInTokensButNotInSupervision) {
  // trl-wrapped, pad id 0, L = 2, rows handed out in reverse: row 0 = [1 0] (one document, then padding: doc ids
  // [0 -1]), row 1 = [0 1] (two documents). d1 = d2 = [1], d1 supervised, d2 not. The greedy reading puts d1 in
  // row 0; the packer put d2 there. Both bear out the rows' evidence, and their verdicts differ (the target of
  // row 1's slot 0 is d1's supervised token or d2's unsupervised one): the derivation must hand over both.
  const std::vector<std::vector<Token>> docs{{0}, {1}, {1}};
  const std::vector<std::uint8_t> none{0, 0};
  RowEvidence padded({0}), two({0, 1});
  padded.padding_from = 1;
  two.padding_from = 2;
  SpanDerivation d(docs, Overflow::kSplit, 0);
  d.Interchangeable({0, 1, 2});  // supervision: d1 and d2 are not interchangeable
  d.Match(std::vector<Token>{1, 0}, none, [&] { return padded; });
  d.Match(std::vector<Token>{0, 1}, none, [&] { return two; });
  d.Finish(0);
  const std::vector<std::vector<DerivedSpan>> greedy{{{1, 0, 1, 0}}, {{0, 0, 1, 0}, {2, 1, 1, 0}}};
  const std::vector<std::vector<DerivedSpan>> packers{{{2, 0, 1, 0}}, {{0, 0, 1, 0}, {1, 1, 1, 0}}};
  ASSERT_EQ(d.rows(), greedy);
  EXPECT_EQ(d.OtherReadings(0, 3), (std::vector<std::vector<std::vector<DerivedSpan>>>{packers}));
  // Alike in supervision too, the two readings are one: the search tries one of them at a slot.
  SpanDerivation alike(docs, Overflow::kSplit, 0);
  alike.Match(std::vector<Token>{1, 0}, none, [&] { return padded; });
  alike.Match(std::vector<Token>{0, 1}, none, [&] { return two; });
  alike.Finish(0);
  EXPECT_TRUE(alike.OtherReadings(0, 3).empty());
}

// padding: left. A row's padding is its leading run, and its documents are read from where that ends.
TEST(SpanDerivation, LeftPaddedRowsAreReadAfterTheirPadding) {
  SpanDerivation d({{5, 6}, {7}, {8, 9}}, Overflow::kError, 0, /*left_padded=*/true);
  const auto spans = ReadAll(d, {{0, 0, 5, 6, 7}, {0, 0, 0, 8, 9}});
  EXPECT_EQ(spans, (std::vector<std::vector<DerivedSpan>>{{{0, 2, 2, 0}, {1, 4, 1, 0}}, {{2, 3, 2, 0}}}));
  EXPECT_EQ(d.misses(), 0);
  EXPECT_EQ(d.Unplaced(), 0);
}

TEST(SpanDerivation, UnderLeftPaddingADocumentOfThePadIdEndsThePaddingEarlier) {
  // [0 0 0 5] with the documents [0] and [5] in that order: the padding is two slots, then [0] and [5]; the marks
  // of padding, where the row has them, say where it ends whatever the tokens.
  SpanDerivation d({{0}, {5}}, Overflow::kError, 0, /*left_padded=*/true);
  EXPECT_EQ(ReadAll(d, {{0, 0, 0, 5}}), (std::vector<std::vector<DerivedSpan>>{{{0, 2, 1, 0}, {1, 3, 1, 0}}}));
  SpanDerivation marked({{0, 0}, {5}}, Overflow::kError, 0, /*left_padded=*/true);
  RowEvidence evidence(std::vector<std::int64_t>{0, 1, 3});
  evidence.padding_from = 4;  // no trailing run
  evidence.padding_until = 1;
  marked.Match(std::vector<Token>{0, 0, 0, 5}, {}, [&] { return evidence; });
  EXPECT_EQ(marked.rows(), (std::vector<std::vector<DerivedSpan>>{{{0, 1, 2, 0}, {1, 3, 1, 0}}}));
}

TEST(SpanDerivation, RightPaddingIsUnchangedByTheLeftReading) {
  SpanDerivation right({{5, 6}}, Overflow::kError, 0);
  EXPECT_EQ(ReadAll(right, {{5, 6, 0, 0}}), (std::vector<std::vector<DerivedSpan>>{{{0, 0, 2, 0}}}));
  // Right-padded rows under a declared left padding: read as they are (the checks then find the padding out of
  // place, PaddingOutOfPlace).
  SpanDerivation left({{5, 6}}, Overflow::kError, 0, /*left_padded=*/true);
  EXPECT_EQ(ReadAll(left, {{5, 6, 0, 0}}), (std::vector<std::vector<DerivedSpan>>{{{0, 0, 2, 0}}}));
}

}  // namespace
}  // namespace packoracle::jobs
