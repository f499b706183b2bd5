// The failure report's format is pinned by golden files (properties/test/golden/*.txt), as googletest's
// output test and xtensor's xio tests do, so that it changes only on purpose. To accept a new format:
//   PACKORACLE_UPDATE_GOLDEN=1 ./build/properties/test/properties_tests --gtest_filter='ReportGolden.*'
// and review the diff of the golden files.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "packoracle/gtest.h"
#include "packoracle/oracle.h"
#include "packoracle/properties/verify.h"

namespace packoracle {
namespace {

std::string GoldenPath(const std::string& name) { return std::string(PACKORACLE_GOLDEN_DIR) + "/" + name + ".txt"; }

void ExpectMatchesGolden(const std::string& name, const std::string& text) {
  const std::string path = GoldenPath(name);
  if (std::getenv("PACKORACLE_UPDATE_GOLDEN")) {
    std::ofstream(path) << text;
    GTEST_SKIP() << "wrote " << path;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << "no golden file " << path << " (run with PACKORACLE_UPDATE_GOLDEN=1 to create it)";
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_EQ(text, want.str()) << "the report format changed; if on purpose, regenerate with PACKORACLE_UPDATE_GOLDEN=1";
}

// The lesson's documents under torchtune-packed, packed by a packer that shifts labels over the whole row
// (bugzoo TG-02) and puts both documents in one row.
struct ShiftWholeRow {
  PackResult Pack(const PackRequest& request) {
    PackResult out = ReferenceCandidate().packer->Pack(request);
    for (auto& mb : out.microbatches)
      for (auto& row : mb.rows)
        for (std::size_t i = 0; i + 1 < row.input_ids.size(); ++i)
          if (row.input_ids[i + 1] != request.policy.pad_id) row.labels[i] = row.input_ids[i + 1];
    return out;
  }
};

// An attention consumer that ignores documents (bugzoo MK-04: SDPA's is_causal fast path).
struct CausalOnly {
  DenseMask Consume(const CandidateRow& row, const Policy&) {
    DenseMask m(row.input_ids.size(), std::vector<std::uint8_t>(row.input_ids.size(), 0));
    for (std::size_t i = 0; i < m.size(); ++i)
      for (std::size_t j = 0; j <= i; ++j) m[i][j] = 1;
    return m;
  }
};

PackRequest LessonRequest() {
  PackRequest r;
  r.policy = FindPreset("torchtune-packed").policy;
  r.row_length = 8;
  r.documents = {{"a", {11, 12, 13}, {}}, {"b", {21, 22, 23, 24}, {}}};
  r.target_losses = {{"a", {0, 1, 3}}, {"b", {0, 1, 1, 1}}};
  return r;
}

TEST(ReportGolden, TargetsViolation) {
  Candidate c = MakeCandidate("shift-whole-row", ShiftWholeRow{});
  const auto report = VerifyOne(c, LessonRequest());
  ASSERT_FALSE(report.passed);
  ExpectMatchesGolden("targets_whole_row_shift", report.text);
}

// Issue 44 item 2: the first line names what the person ran (the Python call, the gtest test with its
// file:line); a front end without C++ asks for no regression draft rather than cutting it off the text.
TEST(ReportHeadline, NamesTheCallerAndLeavesTheDraftOutWhenAsked) {
  Candidate c = MakeCandidate("shift-whole-row", ShiftWholeRow{});
  const auto report = VerifyOne(c, LessonRequest());
  ASSERT_FALSE(report.passed);
  ASSERT_TRUE(report.counterexample && report.failure);
  VerifyOptions options;
  options.headline = "packoracle.fuzz(pack, 'torchtune-packed')";
  options.regression_draft = false;
  const std::string text = RenderFailure(c.name, *report.counterexample, *report.failure, report, options);
  EXPECT_EQ(text.substr(0, text.find('\n')), "packoracle.fuzz(pack, 'torchtune-packed') failed: targets");
  EXPECT_EQ(text.find("=== Regression test draft"), std::string::npos);
  EXPECT_EQ(text, report.text.substr(0, report.text.find("=== Regression test draft")).replace(
                      0, report.text.find(" failed: "), options.headline));
}

TEST(ReportHeadline, AGtestFailureNamesTheTestAndItsFileAndLine) {
  Candidate c = MakeCandidate("shift-whole-row", ShiftWholeRow{});
  VerifyOptions options;
  options.cases = 20;
  const ::testing::AssertionResult result = VerifyCandidate(c, options);
  ASSERT_FALSE(result);
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string message = result.message();
  const std::string want = "ReportHeadline.AGtestFailureNamesTheTestAndItsFileAndLine (" + std::string(__FILE__) +
                           ":" + std::to_string(info->line()) + "): Verify(shift-whole-row) failed: ";
  EXPECT_EQ(message.substr(1, want.size()), want) << message.substr(0, 300);
  EXPECT_NE(message.find("=== Regression test draft"), std::string::npos);  // C++ users keep the draft
}

TEST(ReportGolden, AttentionViolationDrawsTheGrid) {
  Candidate c = MakeCandidate("causal-only", CausalOnly{});
  const auto report = VerifyOne(c, LessonRequest());
  ASSERT_FALSE(report.passed);
  ExpectMatchesGolden("attention_causal_only", report.text);
}

// Positions that never reset (bugzoo PO-01), reported by packing_invariance alone: the tiny decoder's losses of
// the second document, packed and alone, side by side.
struct ArangePositions {
  PackResult Pack(const PackRequest& request) {
    PackResult out = ReferenceCandidate().packer->Pack(request);
    for (auto& mb : out.microbatches)
      for (auto& row : mb.rows)
        for (std::size_t i = 0; i < row.input_ids.size(); ++i) (*row.position_ids)[i] = static_cast<std::int64_t>(i);
    return out;
  }
};

TEST(ReportGolden, PackingInvarianceViolationShowsBothLosses) {
  Candidate c = MakeCandidate("arange-positions", ArangePositions{});
  VerifyOptions options;
  options.only = Invariant::kPackingInvariance;
  const auto report = VerifyOne(c, LessonRequest(), options);
  ASSERT_FALSE(report.passed);
  ExpectMatchesGolden("packing_invariance_arange_positions", report.text);
}

}  // namespace
}  // namespace packoracle
