// The `gradient` invariant (DESIGN §4) on hand-made steps: a reducer hands back, beside its totals, the gradient
// of what it backpropagates with respect to each per-target loss (ProducerTotals::gradient); the kit compares it
// with the weight the declared objective gives that loss (ObjectiveWeights: m / Σm over the step under
// global_targets). Here the reducers differentiate by hand; python/tests/test_gradient.py does it with torch.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest-spi.h>

#include "conformance_probe.h"
#include "packoracle/oracle.h"
#include "packoracle/properties/invariants.h"

namespace packoracle {
namespace {

// The lesson (DESIGN §1): a = [11 12 13] with target losses 1 and 3, b = [21 .. 26] with five losses of 1, in
// two rows of 8: 2 + 5 = 7 valid targets, token mean 9/7.
PackRequest Lesson(Denominator formula = Denominator::kGlobalTargets) {
  PackRequest request;
  request.policy = FindPreset("reference").policy;  // pre_shifted: labels[i] is the target of slot i
  request.policy.denominator = formula;
  request.row_length = 8;
  request.documents = {{"a", {11, 12, 13}, {}}, {"b", {21, 22, 23, 24, 25, 26}, {}}};
  request.target_losses = {{"a", {0, 1, 3}}, {"b", {0, 1, 1, 1, 1, 1}}};
  return request;
}

enum class Backward {
  kReported,     // backpropagates the loss it reports: correct
  kNone,         // hands back no gradient: `gradient` not checked
  kDetached,     // the value is right, the backward tensor detached (every gradient zero)
  kDoubled,      // the value is right, the gradient scaled (Liger-Kernel #968 ignoring grad_output)
  kMeanOfMeans,  // reports the token mean, backpropagates micro-batch means averaged over the steps
  kPadding,      // also backpropagates the losses of slots that are no target
};

// A reducer on the reference preset (pre_shifted, no loss_mask): m = labels[i] != ignore_index. It reports
// loss_sum / denominator under the policy's formula (global_targets or microbatch_mean) and differentiates
// what it backpropagates by hand.
struct HandReducer {
  Backward backward = Backward::kReported;
  ReduceResult Reduce(const ReduceRequest& request) {
    const bool global = request.policy.denominator == Denominator::kGlobalTargets;
    std::vector<double> n(request.microbatches.size(), 0), sum(request.microbatches.size(), 0);
    double total = 0;
    for (std::size_t m = 0; m < request.microbatches.size(); ++m) {
      const auto& rows = request.microbatches[m].rows;
      for (std::size_t r = 0; r < rows.size(); ++r)
        for (std::size_t i = 0; i < rows[r].labels.size(); ++i)
          if (rows[r].labels[i] != request.policy.ignore_index) {
            n[m] += 1;
            sum[m] += request.slot_losses[m][r][i];
          }
      total += n[m];
    }
    const auto M = static_cast<double>(request.grad_accum_steps * request.dp_world_size);
    ReduceResult out;
    for (std::size_t m = 0; m < request.microbatches.size(); ++m) {
      ProducerTotals t;
      t.loss_sum = sum[m];
      t.denominator = global ? total : n[m];
      t.denominator_scope = global ? "global" : "microbatch";
      t.loss = *t.denominator > 0 ? sum[m] / *t.denominator : 0.0;
      if (backward != Backward::kNone) {
        std::vector<std::vector<double>> g;
        for (const auto& row : request.microbatches[m].rows) {
          std::vector<double> slots(row.labels.size(), 0.0);
          for (std::size_t i = 0; i < slots.size(); ++i) {
            const bool target = row.labels[i] != request.policy.ignore_index;
            const double d = *t.denominator > 0 ? 1 / *t.denominator : 0.0;
            switch (backward) {
              case Backward::kReported: slots[i] = target ? d : 0; break;
              case Backward::kDetached: slots[i] = 0; break;
              case Backward::kDoubled: slots[i] = target ? 2 * d : 0; break;
              case Backward::kMeanOfMeans: slots[i] = target ? 1 / (M * std::max(1.0, n[m])) : 0; break;
              case Backward::kPadding: slots[i] = d; break;
              case Backward::kNone: break;
            }
          }
          g.push_back(std::move(slots));
        }
        t.gradient = std::move(g);
      }
      out.push_back(t);
    }
    return out;
  }
};

CaseResult Check(Backward backward, Denominator formula = Denominator::kGlobalTargets) {
  Candidate candidate = MakeCandidate("hand-reducer", HandReducer{backward});
  CheckOptions options;
  options.packing_invariance = false;
  return CheckCase(candidate, Lesson(formula), options);
}

std::string Text(const CaseResult& result) {
  std::string out;
  for (const auto& v : result.violations) out += std::string(Name(v.invariant)) + ": " + v.sentence + "\n";
  return out;
}

TEST(Gradient, IsNamedAndListed) {
  EXPECT_STREQ(Name(Invariant::kGradient), "gradient");
  EXPECT_EQ(ParseInvariant("gradient"), Invariant::kGradient);
  const auto& all = CheckedInvariants();
  EXPECT_NE(std::find(all.begin(), all.end(), Invariant::kGradient), all.end());
}

TEST(Gradient, AReducerThatBackpropagatesWhatItReportsPasses) {
  for (Denominator formula : {Denominator::kGlobalTargets, Denominator::kMicrobatchMean}) {
    const CaseResult result = Check(Backward::kReported, formula);
    EXPECT_TRUE(result.passed()) << Name(formula) << "\n" << Text(result);
    EXPECT_TRUE(result.checked.count(Invariant::kGradient)) << Name(formula);
    EXPECT_FALSE(result.not_applicable.count(Invariant::kGradient));
  }
}

TEST(Gradient, WithoutAGradientItIsNotCheckedNeverPassed) {
  const CaseResult result = Check(Backward::kNone);
  EXPECT_TRUE(result.passed()) << Text(result);
  EXPECT_FALSE(result.checked.count(Invariant::kGradient));
  EXPECT_TRUE(result.not_applicable.count(Invariant::kGradient));
  EXPECT_TRUE(result.checked.count(Invariant::kLoss));
}

TEST(Gradient, APackerAloneHasNoGradient) {
  Candidate reference = ReferenceCandidate();
  const CaseResult result = CheckCase(reference, Lesson());
  EXPECT_TRUE(result.passed()) << Text(result);
  EXPECT_TRUE(result.not_applicable.count(Invariant::kGradient));
}

TEST(Gradient, ADetachedBackwardTensorIsCaughtNamingTheSlot) {
  const CaseResult result = Check(Backward::kDetached);
  ASSERT_FALSE(result.passed());
  const Violation& v = result.violations.front();
  EXPECT_EQ(v.invariant, Invariant::kGradient) << Text(result);
  // micro-batch 0 holds a's row: slots 0 and 1 target 12 and 13; each weighs 1/7 of the step.
  EXPECT_EQ(v.row, 0);
  EXPECT_EQ(v.slot, 0);
  EXPECT_EQ(v.actual, "0");
  EXPECT_NE(v.sentence.find("micro-batch 0 row 0 slot 0"), std::string::npos) << v.sentence;
  EXPECT_NE(v.sentence.find("m / Σm"), std::string::npos) << v.sentence;
  EXPECT_TRUE(std::none_of(result.violations.begin(), result.violations.end(),
                           [](const Violation& x) { return x.invariant == Invariant::kLoss; }))
      << "the value is right: only its gradient is not\n" << Text(result);
}

TEST(Gradient, ARescaledGradientIsCaught) {
  const CaseResult result = Check(Backward::kDoubled);
  ASSERT_FALSE(result.passed());
  EXPECT_EQ(result.violations.front().invariant, Invariant::kGradient) << Text(result);
}

TEST(Gradient, BackpropagatingMicrobatchMeansWhileReportingTheTokenMeanIsCaught) {
  const CaseResult result = Check(Backward::kMeanOfMeans);
  ASSERT_FALSE(result.passed());
  const Violation& v = result.violations.front();
  EXPECT_EQ(v.invariant, Invariant::kGradient) << Text(result);
  // a's two targets get 1 / (2 · 2) each instead of 1 / 7.
  EXPECT_EQ(v.expected.substr(0, 5), "0.142") << v.expected;
  EXPECT_EQ(v.actual, "0.25");
}

TEST(Gradient, AGradientOnSlotsThatAreNoTargetIsCaught) {
  const CaseResult result = Check(Backward::kPadding);
  ASSERT_FALSE(result.passed());
  const Violation& v = result.violations.front();
  EXPECT_EQ(v.invariant, Invariant::kGradient) << Text(result);
  EXPECT_EQ(v.slot, 2);  // a's last token predicts nothing (the boundary is excluded)
  EXPECT_EQ(v.expected, "0");
  EXPECT_NE(v.sentence.find("not a weighted target"), std::string::npos) << v.sentence;
}

// The typed suite's gradient test (packoracle/gtest.h), generated from the invariants' list: it catches a
// reducer whose gradient is twice its weight, and passes the reducer that backpropagates what it reports.
template <Backward kBackward>
struct ReferenceReducer {
  static std::vector<Policy> Policies() { return {FindPreset("reference").policy}; }
  ReduceResult Reduce(const ReduceRequest& request) { return HandReducer{kBackward}.Reduce(request); }
};

TEST(Gradient, TheTypedSuitesGradientTestCatchesADoubledGradientAndPassesTheRightOne) {
  EXPECT_NONFATAL_FAILURE(ConformanceProbe<ReferenceReducer<Backward::kDoubled>>().Check(Invariant::kGradient),
                          "gradient");
  ConformanceProbe<ReferenceReducer<Backward::kReported>>().Check(Invariant::kGradient);
}

}  // namespace
}  // namespace packoracle
