// DocumentsFromSegments: a batch's documents read from its rows alone (the guard without documents). The Python
// tests (python/tests/test_guard_segments.py, and the realpack and generated differential tests) read every preset
// through the binding; these pin the rules of jobs/row_documents.h one by one.
#include "packoracle/jobs/row_documents.h"

#include <gtest/gtest.h>

#include "packoracle/oracle/presets.h"

namespace packoracle::jobs {
namespace {

struct Row {
  std::vector<Token> ids, labels;
  std::vector<std::int64_t> positions;
  RowSegments segments;
  RowFields Fields() const { return {ids, labels, {}, positions, {}, {}}; }
};

RowsRead Read(const Row& row, const Policy& policy, const PadReading& reading = kPadReadings[0]) {
  const std::vector<RowFields> fields{row.Fields()};
  const std::vector<RowSegments> segments{row.segments};
  return DocumentsFromSegments(fields, segments, policy, reading);
}

TEST(DocumentsFromSegments, OnePiecePerSegmentAndPaddingByTheRightSide) {
  // hf-padded: two documents, then two pad slots with ignored labels
  Policy p = FindPreset("reference").policy;
  const Row row{{11, 12, 21, 0, 0}, {12, -100, -100, -100, -100}, {0, 1, 0, 0, 0}, {{0, 2, 3}, true}};
  const RowsRead read = Read(row, p);
  ASSERT_EQ(read.spans.size(), 1u);
  EXPECT_EQ(read.spans[0], (std::vector<DocSpan>{{"row0.seg0", 0, 2, 0}, {"row0.seg1", 2, 1, 0}}));
  ASSERT_EQ(read.documents.size(), 2u);
  EXPECT_EQ(read.documents[0].tokens, (std::vector<Token>{11, 12}));
  // pre-shifted: token 12 is targeted by slot 0's label; a row's first token has no slot before it
  EXPECT_EQ(read.documents[0].supervised, (std::vector<int>{1, 1}));
}

TEST(DocumentsFromSegments, AContinuedFirstPieceCountsItsOffsetFromItsPositions) {
  Policy p = FindPreset("hf-flatten").policy;
  p.overflow = Overflow::kSplit;
  p.split_positions = SplitPositions::kContinue;
  // the row starts 3 tokens into a document (positions 3, 4), then a document of its own starts
  const Row row{{13, 14, 21, 22}, {13, 14, -100, -100}, {3, 4, 0, 1}, {{0, 2}, true}};
  const RowsRead read = Read(row, p);
  ASSERT_EQ(read.spans[0].size(), 2u);
  EXPECT_EQ(read.spans[0][0].doc_offset, 3);
  const Token stand_in = StandIn(p);
  EXPECT_EQ(read.documents[0].tokens, (std::vector<Token>{stand_in, stand_in, stand_in, 13, 14}));
  // the last piece goes on (the policy splits): a stand-in for the next row's first token, supervised only where
  // the row's last slot carries a target (here its label is ignored)
  EXPECT_EQ(read.documents[1].tokens, (std::vector<Token>{21, 22, stand_in}));
  EXPECT_EQ(read.documents[1].supervised.back(), 0);
}

TEST(DocumentsFromSegments, MegatronsPadsAreReadAsPaddingOnlyUnderThatReading) {
  // Megatron: EOD 0 is also the pad id; pads labelled with the pad id and carrying no target (loss_mask 0)
  Policy p = FindPreset("megatron-gpt").policy;
  const std::vector<double> mask{1, 1, 0, 0};
  Row row{{11, 0, 0, 0}, {0, 0, 0, 0}, {0, 1, 2, 3}, {{0, 2, 3}, true}};
  std::vector<RowFields> fields{row.Fields()};
  fields[0].loss_mask = mask;
  const std::vector<RowSegments> segments{row.segments};
  const RowsRead plain = DocumentsFromSegments(fields, segments, p, kPadReadings[0]);
  const RowsRead megatron = DocumentsFromSegments(fields, segments, p, kPadReadings[1]);
  EXPECT_EQ(plain.spans[0].size(), 3u);     // each pad a one-token document of the pad id
  ASSERT_EQ(megatron.spans[0].size(), 1u);  // the document with its closing EOD, then padding
  EXPECT_EQ(megatron.spans[0][0].length, 2);
}

TEST(DocumentsFromSegments, TheTokenAfterTheRowOpensADocumentOfItsOwnAfterAnEod) {
  Policy p = FindPreset("megatron-gpt").policy;
  // the row ends with a document's EOD (0), and its last label, a target, is the next document's first token
  const Row row{{11, 12, 0}, {12, 0, 31}, {0, 1, 2}, {{0}, true}};
  std::vector<RowFields> fields{row.Fields()};
  const std::vector<double> mask{1, 1, 1};
  fields[0].loss_mask = mask;
  const RowsRead read = DocumentsFromSegments(fields, std::vector<RowSegments>{row.segments}, p, kPadReadings[0]);
  ASSERT_EQ(read.documents.size(), 2u);
  EXPECT_EQ(read.documents[1].uid, "row0.next");
  EXPECT_EQ(read.documents[1].tokens, (std::vector<Token>{31}));
}

TEST(DocumentsFromSegments, TheStandInIsNoIdThePolicyGivesAMeaningTo) {
  Policy p = FindPreset("reference").policy;
  p.eos_id = 1;
  p.bos_id = 2;
  p.pad_id = 3;
  EXPECT_EQ(StandIn(p), 4);
}

}  // namespace
}  // namespace packoracle::jobs
