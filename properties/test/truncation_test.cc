// truncate_to: pad_multiple (DESIGN §3): under overflow: truncate with pad_to multiple_of:k a truncated document
// keeps ⌊L/k⌋·k tokens, the most a row padded to a multiple of k holds (TRL pack_dataset with seq_length =
// L//k*k). Checked by CheckCase through TileDocument (and by the fast verifier, pinned to it in
// fastcheck/test/differential_test.cc, where MixedPolicy draws the key).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "packoracle/gtest.h"
#include "packoracle/oracle.h"
#include "packoracle/properties/generators.h"

namespace packoracle {
namespace {

// The TRL adapter's policy: trl-padding-free, rows padded to a multiple of 8, truncation at the multiple.
Policy TrlPad8(TruncateTo truncate_to = TruncateTo::kPadMultiple) {
  Policy p = FindPreset("trl-padding-free").policy;
  p.padding = Padding::kRight;
  p.pad_to = PadTo{PadTo::Kind::kMultipleOf, 8};
  p.truncate_to = truncate_to;
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

// A padded packer that cuts every document after `keep(L)` tokens, one document per row.
template <std::int64_t (*Keep)(std::int64_t)>
struct CutAt {
  PackResult Pack(const PackRequest& r) {
    Layout layout{r.row_length, {}};
    const auto docs = Effective(r.documents, r.policy);
    for (std::size_t d = 0; d < docs.size(); ++d) {
      const std::int64_t n = std::min(docs[d].size(), Keep(r.row_length));
      if (n == 0) continue;
      RowLayout row;
      row.pieces.push_back({static_cast<std::int64_t>(d), 0, 0, n});
      row.length = (n + 7) / 8 * 8;
      layout.rows.push_back(row);
    }
    return PackWithLayout(r, layout);
  }
};
std::int64_t FloorToEight(std::int64_t L) { return L / 8 * 8; }
std::int64_t OneEightShort(std::int64_t L) { return (L - 1) / 8 * 8; }  // seq_length (L-1)//8*8: a slot kept for EOS

std::string First(const CaseResult& result) { return result.violations.empty() ? "" : result.violations[0].sentence; }

TEST(Truncation, AtThePaddingMultipleHoldsUnderPadMultipleAndIsAFindingUnderRowLen) {
  Candidate trl = MakeCandidate("cut-at-L//8*8", CutAt<FloorToEight>{});
  const std::vector<std::vector<Token>> nine = {{11, 12, 13, 14, 15, 16, 17, 18, 19}};
  const auto declared = CheckCase(trl, Request(TrlPad8(), nine, 9));
  EXPECT_TRUE(declared.passed()) << First(declared);
  EXPECT_TRUE(CheckCase(trl, Request(TrlPad8(), {{1, 2, 3, 4, 5, 6, 7, 8, 9}}, 10)).passed());  // 9 ≤ L, cut at 8

  const auto row_len = CheckCase(trl, Request(TrlPad8(TruncateTo::kRowLen), nine, 9));
  ASSERT_FALSE(row_len.passed());
  EXPECT_EQ(row_len.violations[0].invariant, Invariant::kCoverage);
  EXPECT_EQ(First(row_len), "document 'd0': only 8 of its 9 tokens are packed");
}

TEST(Truncation, APrefixShorterThanTheMultipleDropsTokensTheRowHadRoomFor) {
  Candidate short_cut = MakeCandidate("cut-at-(L-1)//8*8", CutAt<OneEightShort>{});
  const auto result = CheckCase(short_cut, Request(TrlPad8(), {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}}, 16));
  ASSERT_FALSE(result.passed());
  EXPECT_EQ(result.violations[0].invariant, Invariant::kCoverage);
  EXPECT_EQ(First(result), "document 'd0': only 8 of its 17 tokens are packed");
}

TEST(Truncation, AMultipleLargerThanTheRowIsStillARefusal) {
  Candidate trl = MakeCandidate("cut-at-L//8*8", CutAt<FloorToEight>{});
  const auto result = CheckCase(trl, Request(TrlPad8(), {{1, 2, 3}}, 7));  // keeps nothing: no refusal given
  ASSERT_FALSE(result.passed());
  EXPECT_EQ(result.violations[0].invariant, Invariant::kCoverage);
  EXPECT_TRUE(PolicyDemandsRefusal(TrlPad8(), 7, {3}));
}

TEST(Truncation, TheReferencePassesGeneratedCasesAndACutOneMultipleShortIsFound) {
  VerifyOptions options;
  options.cases = 150;
  Policy pad4 = TrlPad8();
  pad4.pad_to.multiple = 4;
  Candidate reference = ReferenceCandidate();
  reference.policies = {TrlPad8(), pad4};
  const auto passed = Verify(reference, options);
  EXPECT_TRUE(passed.passed) << passed.text;
  Candidate short_cut = MakeCandidate("cut-at-(L-1)//8*8", CutAt<OneEightShort>{}, {TrlPad8()});
  const auto report = Verify(short_cut, options);
  ASSERT_FALSE(report.passed);
  EXPECT_EQ(report.broken(), Invariant::kCoverage) << report.text;
}

}  // namespace
}  // namespace packoracle
