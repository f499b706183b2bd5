// jobs::RunSelftest over candidates the caller passes (not the bugzoo): a correct one passes, a buggy one is
// caught by the invariant it names, and a surprise is what the text shows.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "packoracle/jobs/lesson.h"
#include "packoracle/jobs/selftest.h"
#include "test_candidates.h"

namespace packoracle::jobs {
namespace {

std::vector<SelftestCandidate> Two(std::optional<Invariant> bug_expected) {
  return {{"REF-reference", "reference", "the kit", std::nullopt, [] { return ReferenceCandidate(); }},
          {"XX-01", "weights-the-first-slot", "a test", bug_expected,
           [] { return MakeCandidate("weights-the-first-slot", testing::WeightsTheFirstSlot{}); }}};
}

SelftestOptions Few() {
  SelftestOptions options;
  options.cases = 100;
  return options;
}

TEST(RunSelftest, PassesWhenEveryCandidateBehavesAsExpected) {
  const SelftestResult r = RunSelftest(Two(Invariant::kTargets), Few());
  EXPECT_EQ(r.exit_code, 0);
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_TRUE(r.rows[0].report.passed);
  EXPECT_EQ(r.rows[1].report.broken(), Invariant::kTargets);
  const std::string text = RenderSelftestText(r);
  EXPECT_NE(text.find("2 as expected, 0 not"), std::string::npos) << text;
  EXPECT_NE(text.find("One counterexample in full (XX-01, a test)"), std::string::npos) << text;
}

TEST(RunSelftest, SaysWhichCandidateSurprised) {
  SelftestOptions only = Few();
  only.only = "XX";
  const SelftestResult r = RunSelftest(Two(Invariant::kLoss), only);
  EXPECT_EQ(r.exit_code, 1);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_NE(RenderSelftestText(r).find("XX-01 did not behave as expected: it should be caught by loss, but targets broke"),
            std::string::npos);
}

TEST(LessonText, CountsSevenIncludedTargets) {
  EXPECT_NE(LessonText().find("number of included targets: 7."), std::string::npos);
}

}  // namespace
}  // namespace packoracle::jobs
