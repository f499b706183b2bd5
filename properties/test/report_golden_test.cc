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

// Issue 44 item 2, reports are data: the sections a front end picks are the report's own pieces, and the text
// is exactly their rendering (no front end needs to cut it).
TEST(ReportSections, AreTheTextsPiecesAndItsData) {
  Candidate c = MakeCandidate("causal-only", CausalOnly{});
  VerifyOptions options;
  options.reproduce_command = "rerun me";
  const auto report = VerifyOne(c, LessonRequest(), options);
  ASSERT_FALSE(report.passed);
  ASSERT_TRUE(report.sections.has_value());
  const ReportSections& s = *report.sections;
  EXPECT_EQ(RenderReport(s), report.text);
  EXPECT_EQ(s.headline, report.text.substr(0, report.text.find('\n')));
  EXPECT_EQ(s.headline, "Verify(causal-only) failed: attention");
  ASSERT_FALSE(s.violations.empty());
  EXPECT_EQ(s.violations.front().invariant, report.broken());
  EXPECT_EQ(s.request.row_length, 8);
  ASSERT_EQ(s.request.documents.size(), 2u);
  EXPECT_EQ(s.request.documents[1].tokens, (std::vector<Token>{21, 22, 23, 24}));
  EXPECT_EQ(s.reproduce, report.reproduce);
  EXPECT_EQ(s.reproduce_command, "rerun me");
  // Each drawn section is in the text whole, in the order of the report, titles included.
  std::size_t at = 0;
  for (const std::string* section : {&s.minimal_case, &s.drawn, &s.regression_draft}) {
    ASSERT_FALSE(section->empty());
    const auto found = report.text.find(*section, at);
    ASSERT_NE(found, std::string::npos) << *section;
    at = found + section->size();
  }
  EXPECT_EQ(s.minimal_case.rfind("=== Minimal counterexample (after 1 case and 0 shrinks; profile given)\n", 0), 0u);
  EXPECT_EQ(s.drawn.rfind("=== Row 0 ", 0), 0u);
  EXPECT_NE(s.drawn.find("=== Attention row 0"), std::string::npos);
  EXPECT_EQ(s.totals, "");  // an attention failure of a packer without a declared objective: no totals
  EXPECT_EQ(RenderVerdict(s).rfind("  " + s.violations.front().sentence + "\n", 0), 0u);
}

TEST(ReportSections, TheHeadlineViolationComesFirstUnderOnly) {
  Candidate c = MakeCandidate("arange-positions", ArangePositions{});
  VerifyOptions options;
  options.only = Invariant::kPackingInvariance;
  const auto report = VerifyOne(c, LessonRequest(), options);
  ASSERT_TRUE(report.sections && report.failure);
  ASSERT_GT(report.failure->violations.size(), 1u);
  EXPECT_NE(report.failure->violations.front().invariant, Invariant::kPackingInvariance);
  EXPECT_EQ(report.sections->violations.front().invariant, Invariant::kPackingInvariance);
  EXPECT_EQ(report.sections->violations.size(), report.failure->violations.size());
  EXPECT_NE(report.sections->invariance, "");
}

// The draft names a constructible candidate where the candidate has a name (Candidate::source; a bundled one is
// compiled and run by fixtures/test's RegressionDraft test), and says "best effort" where it has none.
TEST(ReportSections, TheDraftConstructsANamedCandidateAndIsBestEffortOtherwise) {
  Candidate c = MakeCandidate("shift-whole-row", ShiftWholeRow{});
  const auto anonymous = VerifyOne(c, LessonRequest());
  ASSERT_TRUE(anonymous.sections);
  const std::string& unnamed = anonymous.sections->regression_draft;
  EXPECT_EQ(unnamed.rfind("#include \"packoracle/gtest.h\"\n", 0), 0u) << unnamed;
  EXPECT_NE(unnamed.find("// Best effort: nothing says how C++ constructs shift-whole-row"), std::string::npos) << unnamed;
  EXPECT_EQ(unnamed.find("auto candidate ="), std::string::npos) << unnamed;

  c.source = {"packoracle::MakeBundledCandidate(\"TG-02\")", "packoracle/bugzoo.h"};
  const auto named = VerifyOne(c, LessonRequest());
  ASSERT_TRUE(named.sections);
  const std::string& draft = named.sections->regression_draft;
  EXPECT_EQ(draft.find("Best effort"), std::string::npos) << draft;
  EXPECT_NE(draft.find("#include \"packoracle/bugzoo.h\"\n"), std::string::npos) << draft;
  EXPECT_NE(draft.find("  auto candidate = packoracle::MakeBundledCandidate(\"TG-02\");\n"
                       "  EXPECT_TRUE(packoracle::CheckOneCase(candidate, request));\n}\n"),
            std::string::npos)
      << draft;
}

// A candidate type of a gtest is named by its qualified type (a member of an anonymous namespace through the
// enclosing one); a type a draft cannot name or default-construct is best effort.
TEST(ReportSections, ACandidateTypeIsConstructedByItsQualifiedName) {
  EXPECT_EQ(TypeSource<ShiftWholeRow>().expression, "packoracle::ShiftWholeRow{}");
  struct Local {
    PackResult Pack(const PackRequest& r) { return ReferenceCandidate().packer->Pack(r); }
  };
  EXPECT_EQ(TypeSource<Local>().expression, "");
  struct NoDefault {
    explicit NoDefault(int) {}
    PackResult Pack(const PackRequest& r) { return ReferenceCandidate().packer->Pack(r); }
  };
  EXPECT_EQ(TypeSource<NoDefault>().expression, "");
}

}  // namespace
}  // namespace packoracle
