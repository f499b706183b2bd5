// Producer totals as they come (DESIGN §5, packoracle/properties/producer_totals.h): every non-empty subset of
// loss_sum, denominator and loss is checked for what it says, by CheckCase and by the fast verifier alike,
// with correct and with wrong values, with the per-target losses known (generated cases) and unknown (dumps).
//
// The case is the lesson's: documents a = [11 12 13] and b = [21 .. 26] under `reference`, one row each, one
// row per micro-batch: micro-batch 0 has 2 valid targets (losses 1 and 3: Σwℓ = 4), micro-batch 1 has 5
// (Σwℓ = 5); the step has 7, and the token mean is 9/7.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <sstream>
#include <string>

#include "packoracle/fastcheck/step_check.h"
#include "packoracle/oracle.h"
#include "packoracle/properties/invariants.h"
#include "packoracle/properties/producer_totals.h"

namespace packoracle::fastcheck {
namespace {

struct Replay {
  PackResult out;
  PackResult Pack(const PackRequest&) { return out; }
};

PackRequest Lesson(const std::string& preset = "reference") {
  PackRequest r;
  r.row_length = 8;
  r.micro_batch_rows = 1;
  r.policy = FindPreset(preset).policy;
  r.documents = {{"a", {11, 12, 13}, {1, 1, 1}}, {"b", {21, 22, 23, 24, 25, 26}, {1, 1, 1, 1, 1, 1}}};
  r.target_losses = {{"a", {0, 1, 3}}, {"b", {0, 1, 1, 1, 1, 1}}};
  return r;
}

ProducerTotals Totals(std::optional<double> loss_sum, std::optional<double> denominator, std::string scope,
                      std::optional<double> loss) {
  ProducerTotals t;
  t.loss_sum = loss_sum;
  t.denominator = denominator;
  t.denominator_scope = std::move(scope);
  t.loss = loss;
  return t;
}

// What both checkers said about one case.
struct Verdicts {
  CaseResult oracle;
  StepVerdict fast;
};

std::string Names(const CaseResult& r) {
  std::ostringstream os;
  for (const auto& v : r.violations) os << Name(v.invariant) << ": " << v.sentence << "\n";
  return os.str();
}

bool Same(const std::optional<double>& a, const std::optional<double>& b) {
  return a.has_value() == b.has_value() && (!a || std::fabs(*a - *b) <= 1e-12 * std::max(1.0, std::fabs(*a)));
}

// The reference packer's micro-batches with the given totals, through CheckCase and the fast verifier, which
// must agree on every finding, the objective, the token mean and the notes.
Verdicts Check(const PackRequest& request, const std::vector<ProducerTotals>& totals, bool losses_known) {
  Candidate reference = ReferenceCandidate();
  PackResult out = reference.packer->Pack(request);
  EXPECT_EQ(out.microbatches.size(), totals.size());
  for (std::size_t m = 0; m < out.microbatches.size() && m < totals.size(); ++m) out.microbatches[m].producer = totals[m];
  CheckOptions options = losses_known ? CheckOptions{} : DumpStepOptions();
  options.determinism = false;
  options.packing_invariance = false;
  Verdicts v;
  Candidate replay = MakeCandidate("replay", Replay{out});
  v.oracle = CheckCase(replay, request, options);

  const auto effective = Effective(request.documents, request.policy, request.delimiters);
  StepDocuments docs = StepDocuments::Of(effective, request.target_losses);  // as the differential test
  const StepInput in = StepInput::Of(request, out, docs, options);
  FastStepChecker checker;
  v.fast = checker.Check(in);
  EXPECT_NE(v.fast.outcome, Outcome::kDefer);
  std::vector<Finding> want;
  for (const auto& x : v.oracle.violations) want.push_back({x.invariant, x.row, x.slot});
  EXPECT_EQ(v.fast.findings, want) << Names(v.oracle);
  EXPECT_EQ(v.fast.outcome == Outcome::kPassed, v.oracle.passed());
  if (v.oracle.passed()) {
    EXPECT_TRUE(Same(v.fast.declared_objective, v.oracle.declared_objective));
    EXPECT_TRUE(Same(v.fast.token_mean, v.oracle.token_mean));
    EXPECT_EQ(v.fast.notes, v.oracle.notes);
  }
  return v;
}

bool Mentions(const std::vector<std::string>& notes, const std::string& text) {
  for (const auto& n : notes)
    if (n.find(text) != std::string::npos) return true;
  return false;
}

void ExpectOnly(const CaseResult& r, Invariant inv) {
  ASSERT_FALSE(r.passed());
  for (const auto& v : r.violations) EXPECT_EQ(v.invariant, inv) << v.sentence;
}

const double kA = 4.0, kB = 5.0;  // Σwℓ of the two micro-batches
const double kN = 7.0;            // valid targets of the step

// ---- a denominator alone: checked as the count ----------------------------------------------------------

TEST(ProducerSubsets, DenominatorAloneIsCheckedAsTheCount) {
  for (bool known : {true, false}) {
    SCOPED_TRACE(known ? "losses known" : "dump");
    const Verdicts v = Check(Lesson(), {Totals({}, kN, "global", {}), Totals({}, kN, "global", {})}, known);
    EXPECT_TRUE(v.oracle.passed()) << Names(v.oracle);
    EXPECT_FALSE(v.oracle.declared_objective);  // no loss: nothing to combine
    EXPECT_TRUE(Mentions(v.oracle.notes, "denominator alone")) << ::testing::PrintToString(v.oracle.notes);
    EXPECT_TRUE(v.oracle.checked.count(Invariant::kDenominator));
    EXPECT_TRUE(v.oracle.not_applicable.count(Invariant::kLoss));
  }
}

TEST(ProducerSubsets, WrongDenominatorAloneIsADenominatorViolation) {
  for (bool known : {true, false}) {
    SCOPED_TRACE(known ? "losses known" : "dump");
    // 8: every slot of the row counted, not the valid targets.
    const Verdicts v = Check(Lesson(), {Totals({}, 8, "global", {}), Totals({}, kN, "global", {})}, known);
    ExpectOnly(v.oracle, Invariant::kDenominator);
    EXPECT_NE(v.oracle.violations.front().sentence.find("divided by 8, but its global has 7 valid targets"),
              std::string::npos)
        << Names(v.oracle);
  }
}

TEST(ProducerSubsets, MicrobatchScopedDenominatorAloneIsCheckedAgainstItsMicrobatch) {
  PackRequest per_microbatch = Lesson();
  per_microbatch.policy.denominator = Denominator::kMicrobatchMean;
  const Verdicts ok = Check(per_microbatch, {Totals({}, 2, "microbatch", {}), Totals({}, 5, "microbatch", {})}, false);
  EXPECT_TRUE(ok.oracle.passed()) << Names(ok.oracle);
  EXPECT_TRUE(ok.oracle.notes.size() == 1 && Mentions(ok.oracle.notes, "denominator alone")) << ok.oracle.notes.size();
  const Verdicts bad = Check(per_microbatch, {Totals({}, 2, "microbatch", {}), Totals({}, 6, "microbatch", {})}, false);
  ExpectOnly(bad.oracle, Invariant::kDenominator);
}

// Issue 27: the counts of the scope the producer declares, the wrong objective for the policy. Each
// micro-batch divided by its own count (2 and 5) under global_targets (7) is a mean of micro-batch means,
// whatever scope it says: the same rule as guard.check_step (DenominatorWeighting).
TEST(ProducerSubsets, AMeanOfMicrobatchMeansIsADenominatorViolationWhateverItsScope) {
  const Verdicts means = Check(Lesson(), {Totals({}, 2, "microbatch", {}), Totals({}, 5, "microbatch", {})}, false);
  ExpectOnly(means.oracle, Invariant::kDenominator);
  EXPECT_NE(means.oracle.violations.front().sentence.find("rank 0 micro-batch 0 divides by 2, the step's valid "
                                                          "targets over every rank (global_targets) is 7"),
            std::string::npos) << Names(means.oracle);
  // Known losses compare the step objective itself: the finer verdict, under loss (4/2 + 5/5 against 9/7).
  const Verdicts known = Check(Lesson(), {Totals(kA, 2, "microbatch", {}), Totals(kB, 5, "microbatch", {})}, true);
  ExpectOnly(known.oracle, Invariant::kLoss);
}

TEST(DenominatorWeighting, AUniformRatioIsANoteAnUnequalOneNamesEachMicrobatchOff) {
  const std::vector<MicrobatchDivision> scaled = {{0, 0, 4, 4}, {1, 0, 4, 4}};  // two ranks, own counts, equal
  const Weighting note = DenominatorWeighting(Denominator::kGlobalTargets, scaled, "step 3");
  EXPECT_TRUE(note.problems.empty());
  ASSERT_EQ(note.notes.size(), 1u);
  EXPECT_NE(note.notes.front().find("every denominator is 0.5 ×"), std::string::npos) << note.notes.front();
  const std::vector<MicrobatchDivision> unequal = {{0, 0, 4, 4}, {1, 0, 6, 10}, {1, 1, 0, 3}};  // the empty one adds nothing
  const Weighting bad = DenominatorWeighting(Denominator::kGlobalTargets, unequal, "step 3");
  ASSERT_EQ(bad.problems.size(), 1u);
  EXPECT_EQ(bad.problems.front(), "rank 0 micro-batch 0 divides by 4, the step's valid targets over every rank "
                                  "(global_targets) is 10: the micro-batches of step 3 are weighted unequally");
  EXPECT_TRUE(DenominatorWeighting(Denominator::kRankMean, scaled, "step 3").problems.empty());  // each its rank's
  EXPECT_TRUE(DenominatorWeighting(Denominator::kSequenceMean, unequal, "step 3").problems.empty());
}

// ---- a loss_sum alone: checked as the sum ---------------------------------------------------------------

TEST(ProducerSubsets, LossSumAloneIsCheckedAsTheSum) {
  const Verdicts known = Check(Lesson(), {Totals(kA, {}, "", {}), Totals(kB, {}, "", {})}, true);
  EXPECT_TRUE(known.oracle.passed()) << Names(known.oracle);
  EXPECT_FALSE(known.oracle.declared_objective);  // what it was divided by is unknown
  EXPECT_TRUE(Mentions(known.oracle.notes, "loss_sum alone"));
  const Verdicts wrong = Check(Lesson(), {Totals(kA + 0.5, {}, "", {}), Totals(kB, {}, "", {})}, true);
  ExpectOnly(wrong.oracle, Invariant::kLoss);
  EXPECT_NE(wrong.oracle.violations.front().sentence.find("loss_sum 4.5, but Σwℓ of its valid targets is 4"),
            std::string::npos);
}

TEST(ProducerSubsets, LossSumAloneInADumpGivesTheTokenMean) {
  // Without per-target losses a loss sum is taken as given: it gives the token mean with the kit's count.
  const Verdicts v = Check(Lesson(), {Totals(kA, {}, "", {}), Totals(kB, {}, "", {})}, false);
  EXPECT_TRUE(v.oracle.passed());
  ASSERT_TRUE(v.oracle.token_mean);
  EXPECT_DOUBLE_EQ(*v.oracle.token_mean, 9.0 / 7.0);
  EXPECT_FALSE(v.oracle.declared_objective);
}

// ---- a loss alone: the micro-batch loss under the policy ------------------------------------------------

TEST(ProducerSubsets, LossAloneIsTheMicrobatchLossUnderThePolicy) {
  // reference divides by the global count: 4/7 and 5/7, which add up to the token mean.
  const Verdicts v = Check(Lesson(), {Totals({}, {}, "", kA / kN), Totals({}, {}, "", kB / kN)}, true);
  EXPECT_TRUE(v.oracle.passed()) << Names(v.oracle);
  ASSERT_TRUE(v.oracle.declared_objective);
  EXPECT_NEAR(*v.oracle.declared_objective, 9.0 / 7.0, 1e-12);
  EXPECT_TRUE(v.oracle.notes.empty()) << ::testing::PrintToString(v.oracle.notes);
}

TEST(ProducerSubsets, LossAloneDividedByItsOwnCountIsALossViolation) {
  // 4/2 and 5/5: each micro-batch's mean, under a policy that divides by the step's count (HF before 4.46).
  const Verdicts v = Check(Lesson(), {Totals({}, {}, "", kA / 2), Totals({}, {}, "", kB / 5)}, true);
  ExpectOnly(v.oracle, Invariant::kLoss);
  EXPECT_NE(v.oracle.violations.front().sentence.find("is not Σwℓ of its valid targets / the global count (7)"),
            std::string::npos)
      << Names(v.oracle);
}

TEST(ProducerSubsets, LossAloneUnderMicrobatchMeanIsDividedByItsOwnCount) {
  PackRequest r = Lesson();
  r.policy.denominator = Denominator::kMicrobatchMean;
  const Verdicts v = Check(r, {Totals({}, {}, "", kA / 2), Totals({}, {}, "", kB / 5)}, true);
  EXPECT_TRUE(v.oracle.passed()) << Names(v.oracle);
  ASSERT_TRUE(v.oracle.declared_objective);
  EXPECT_NEAR(*v.oracle.declared_objective, (2.0 + 1.0) / 2, 1e-12);  // the mean of the two means
  const Verdicts wrong = Check(r, {Totals({}, {}, "", kA / kN), Totals({}, {}, "", kB / kN)}, true);
  ExpectOnly(wrong.oracle, Invariant::kLoss);
}

TEST(ProducerSubsets, LossAloneInADumpIsNotCheckedAndTheReportSaysSo) {
  for (double l0 : {kA / kN, kA / 2}) {  // right or wrong, nothing to compare it with
    const Verdicts v = Check(Lesson(), {Totals({}, {}, "", l0), Totals({}, {}, "", kB / kN)}, false);
    EXPECT_TRUE(v.oracle.passed()) << Names(v.oracle);
    EXPECT_TRUE(Mentions(v.oracle.notes, "loss alone"));
    EXPECT_FALSE(v.oracle.token_mean);
  }
}

// ---- pairs ----------------------------------------------------------------------------------------------

TEST(ProducerSubsets, LossAndDenominatorWithoutLossSum) {
  const Verdicts ok = Check(Lesson(), {Totals({}, kN, "global", kA / kN), Totals({}, kN, "global", kB / kN)}, true);
  EXPECT_TRUE(ok.oracle.passed()) << Names(ok.oracle);
  EXPECT_TRUE(ok.oracle.notes.empty());
  const Verdicts wrong = Check(Lesson(), {Totals({}, kN, "global", 0.5), Totals({}, kN, "global", kB / kN)}, true);
  ExpectOnly(wrong.oracle, Invariant::kLoss);
  // In a dump the sum is loss × denominator: the step objective is still compared (divided by each own count
  // under a global policy: 4/2 + 5/5 = 3 against the token mean 9/7).
  const Verdicts dump = Check(Lesson(), {Totals({}, 2, "microbatch", 2.0), Totals({}, 5, "microbatch", 1.0)}, false);
  ExpectOnly(dump.oracle, Invariant::kLoss);
  EXPECT_NE(dump.oracle.violations.front().sentence.find("step objective"), std::string::npos) << Names(dump.oracle);
}

TEST(ProducerSubsets, LossSumAndLossWithoutDenominator) {
  const Verdicts ok = Check(Lesson(), {Totals(kA, {}, "", kA / kN), Totals(kB, {}, "", kB / kN)}, false);
  EXPECT_TRUE(ok.oracle.passed()) << Names(ok.oracle);
  ASSERT_TRUE(ok.oracle.declared_objective);
  EXPECT_NEAR(*ok.oracle.declared_objective, 9.0 / 7.0, 1e-12);
  const Verdicts wrong = Check(Lesson(), {Totals(kA, {}, "", kA / 2), Totals(kB, {}, "", kB / kN)}, false);
  ExpectOnly(wrong.oracle, Invariant::kLoss);
  EXPECT_NE(wrong.oracle.violations.front().sentence.find("is not loss_sum / the global count (7)"), std::string::npos)
      << Names(wrong.oracle);
}

TEST(ProducerSubsets, EveryFieldAsBefore) {
  const Verdicts v = Check(Lesson(), {Totals(kA, kN, "global", kA / kN), Totals(kB, kN, "global", kB / kN)}, true);
  EXPECT_TRUE(v.oracle.passed()) << Names(v.oracle);
  EXPECT_TRUE(v.oracle.notes.empty());
  EXPECT_TRUE(v.oracle.checked.count(Invariant::kLoss));
}

// Micro-batches giving different subsets: a loss alone divided by the scope the policy implies is the same
// scope as a given global one.
TEST(ProducerSubsets, MixedSubsetsShareTheImpliedScope) {
  const Verdicts v = Check(Lesson(), {Totals({}, kN, "global", kA / kN), Totals({}, {}, "", kB / kN)}, true);
  EXPECT_TRUE(v.oracle.passed()) << Names(v.oracle);
  ASSERT_TRUE(v.oracle.declared_objective);
  EXPECT_NEAR(*v.oracle.declared_objective, 9.0 / 7.0, 1e-12);
  const Verdicts mixed = Check(Lesson(), {Totals({}, 2, "microbatch", 2.0), Totals({}, {}, "", kB / kN)}, true);
  ExpectOnly(mixed.oracle, Invariant::kDenominator);
  EXPECT_NE(mixed.oracle.violations.front().sentence.find("'microbatch' and 'global (implied by the policy)'"),
            std::string::npos)
      << Names(mixed.oracle);
}

// ---- shapes that are not totals (a candidate's output; a dump's readers refuse them as input) -------------

TEST(ProducerSubsets, MalformedTotalsAreDenominatorViolations) {
  for (const auto& bad : {Totals({}, {}, "", {}), Totals(kA, kN, "", {}), Totals(kA, {}, "global", {})}) {
    const Verdicts v = Check(Lesson(), {bad, Totals(kB, kN, "global", kB / kN)}, true);
    ExpectOnly(v.oracle, Invariant::kDenominator);
    EXPECT_EQ(v.oracle.violations.front().sentence.find("the packer, micro-batch 0: "), 0u) << Names(v.oracle);
  }
}

TEST(ProducerSubsets, NonFiniteGivenFieldIsReported) {
  const Verdicts v = Check(Lesson(), {Totals({}, 0, "microbatch", NAN), Totals({}, 5, "microbatch", 1.0)}, true);
  ExpectOnly(v.oracle, Invariant::kDenominator);
  EXPECT_NE(v.oracle.violations.front().sentence.find("(-, 0, nan)"), std::string::npos) << Names(v.oracle);
}

TEST(ProducerNotes, SayWhichChecksTheFieldsDidNotAllow) {
  const ProducerTotals den = Totals({}, 7, "global", {}), sum = Totals(4, {}, "", {}), loss = Totals({}, {}, "", 0.5);
  const ProducerTotals all = Totals(4, 7, "global", 4.0 / 7);
  CheckOptions known, dump = DumpStepOptions();
  EXPECT_TRUE(ProducerNotes({&all, &all}, dump).empty());
  EXPECT_EQ(ProducerNotes({&den}, dump).size(), 1u);
  EXPECT_EQ(ProducerNotes({&sum}, known).size(), 1u);
  EXPECT_TRUE(ProducerNotes({&loss}, known).empty());  // checked against Σwℓ / the policy's count
  EXPECT_EQ(ProducerNotes({&loss}, dump).size(), 1u);
  EXPECT_EQ(ProducerNotes({&den, &sum, &loss}, dump).size(), 3u);
}

}  // namespace
}  // namespace packoracle::fastcheck
