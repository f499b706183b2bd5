// Each backend's boundary rule, on the examples of conventions.md §6.
#include <gtest/gtest.h>

#include "packoracle/oracle.h"

namespace packoracle {
namespace {

using Starts = SegmentStarts;

TEST(Segments, ResetRuleAndStepRuleDisagreeOnPositionsThatJump) {
  // conventions §6 case 5: positions [0,1,2,5,6] are one document for the HF flash rule, two for SDPA's.
  EXPECT_EQ(FromPositionReset({0, 1, 2, 5, 6}, 0), (Starts{0}));
  EXPECT_EQ(FromPositionStep({0, 1, 2, 5, 6}), (Starts{0, 3}));
}

TEST(Segments, TrlPaddingWithPositionZeroMakesEachPadItsOwnSegment) {
  // conventions §2.2: pad_to_multiple_of pads with position 0; the flash rule cuts at every pad.
  EXPECT_EQ(FromPositionReset({0, 1, 2, 0, 1, 0, 0, 0}, 0), (Starts{0, 3, 5, 6, 7}));
}

TEST(Segments, CuSeqlensWithTrailingRepeatsMeanNothing) {
  // Megatron inter_document_masking pads cu_seqlens with the row length.
  EXPECT_EQ(FromCuSeqlens({0, 4, 8, 8, 8, 8}, 8), (Starts{0, 4}));
  EXPECT_EQ(FromSeqLens({3, 0, 5}, 8), (Starts{0, 3}));
}

TEST(Segments, EodClosesAndBosOpens) {
  EXPECT_EQ(FromEodCloses({11, 12, 13, 0, 21, 22, 23, 24}, 0), (Starts{0, 4}));  // the EOD belongs to its document
  EXPECT_EQ(FromBosOpens({0, 11, 12, 13, 0, 21, 22, 23}, 0), (Starts{0, 4}));    // the EOT opens the next
  EXPECT_EQ(FromDocIds({0, 0, 0, 1, 1, -1, -1}), (Starts{0, 3, 5}));
}

TEST(Segments, TruthCountsPiecesAndPaddingRuns) {
  const auto docs = MakeDocuments({{11, 12, 13}, {21, 22}});
  const auto batch = Materialize(docs, SequentialLayout(docs, Policy{}, 8), Policy{});
  EXPECT_EQ(TrueSegmentStarts(batch.rows.at(0)), (Starts{0, 3, 5}));
  EXPECT_EQ(batch.rows[0].cu_seqlens, (std::vector<std::int64_t>{0, 3, 5, 8}));
  EXPECT_EQ(batch.rows[0].seq_lens, (std::vector<std::int64_t>{3, 2, 3}));
  EXPECT_EQ(batch.rows[0].doc_ids, (std::vector<std::int64_t>{0, 0, 0, 1, 1, -1, -1, -1}));
}

}  // namespace
}  // namespace packoracle
