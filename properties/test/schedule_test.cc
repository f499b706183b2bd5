// Schedules (DESIGN §4 `loss`, oracle/denominator.h OptimizerStepOf): a generation batch feeding several optimizer
// steps (GRPO/PPO steps_per_generation > gradient accumulation steps). Under CheckOptions::optimizer_steps the
// reducer gets the packed step as one generation batch (ReduceRequest::optimizer_steps, grad_accum_steps the
// accumulation within each) and each optimizer step is checked against the declared objective over that step
// alone. The mechanism (issue 43): a reducer that normalises every micro-batch over the whole generation batch
// (the denominator counted once per generation, then reused by every optimizer step it feeds); its fixed twin
// counts each optimizer step's targets.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "packoracle/oracle.h"
#include "packoracle/properties/generators.h"
#include "packoracle/properties/invariants.h"

namespace packoracle {
namespace {

// Four documents that share no row of 8 slots: one row each, one row a micro-batch, so four micro-steps.
PackRequest Rollouts() {
  PackRequest request;
  request.policy = FindPreset("reference").policy;  // pre_shifted, no loss_mask: a target is labels[i] != -100
  request.row_length = 8;
  request.micro_batch_rows = 1;
  request.documents = {{"a", {11, 12, 13}, {}}, {"b", {21, 22, 23, 24, 25, 26}, {}},
                       {"c", {31, 32, 33, 34, 35}, {}}, {"d", {41, 42, 43, 44, 45, 46, 47}, {}}};
  request.target_losses = {{"a", {0, 1, 3}}, {"b", {0, 1, 1, 1, 1, 1}}, {"c", {0, 2, 2, 2, 2}},
                           {"d", {0, 1, 2, 3, 4, 5, 6}}};
  return request;
}

// A global-token-mean reducer; `per_optimizer_step` false: the GRPO-style bug, every micro-batch divided by the
// targets of the whole generation batch; true: by the targets of the optimizer step it feeds (the fixed twin).
struct GenerationReducer {
  bool per_optimizer_step = true;
  ReduceResult Reduce(const ReduceRequest& request) const {
    const std::size_t n = request.microbatches.size();
    std::vector<double> targets(n, 0), sums(n, 0);
    for (std::size_t m = 0; m < n; ++m) {
      const auto& rows = request.microbatches[m].rows;
      for (std::size_t r = 0; r < rows.size(); ++r)
        for (std::size_t i = 0; i < rows[r].labels.size(); ++i)
          if (rows[r].labels[i] != request.policy.ignore_index) {
            targets[m] += 1;
            sums[m] += request.slot_losses[m][r][i];
          }
    }
    auto step_of = [&](std::size_t m) {
      return per_optimizer_step ? OptimizerStepOf(request.microbatches[m].micro_step, request.grad_accum_steps) : 0;
    };
    ReduceResult out;
    for (std::size_t m = 0; m < n; ++m) {
      double count = 0;
      for (std::size_t k = 0; k < n; ++k)
        if (step_of(k) == step_of(m)) count += targets[k];
      ProducerTotals t;
      t.loss_sum = sums[m];
      t.denominator = count;
      t.denominator_scope = "global";
      t.loss = count > 0 ? sums[m] / count : 0.0;
      out.push_back(t);
    }
    return out;
  }
};

CheckOptions Scheduled(std::int64_t optimizer_steps) {
  CheckOptions options;
  options.packing_invariance = false;
  options.optimizer_steps = optimizer_steps;
  return options;
}

std::string Text(const CaseResult& result) {
  std::string out;
  for (const auto& v : result.violations) out += std::string(Name(v.invariant)) + ": " + v.sentence + "\n";
  return out;
}

TEST(Schedule, TheOptimizerStepOfAMicroStep) {
  EXPECT_EQ(OptimizerStepOf(0, 2), 0);
  EXPECT_EQ(OptimizerStepOf(1, 2), 0);
  EXPECT_EQ(OptimizerStepOf(2, 2), 1);
  EXPECT_EQ(OptimizerStepOf(5, 3), 1);
}

TEST(Schedule, AReducerNormalisingOverTheGenerationBatchIsCaughtPerOptimizerStep) {
  Candidate buggy = MakeCandidate("grpo-generation-denominator", GenerationReducer{false});
  const CaseResult result = CheckCase(buggy, Rollouts(), Scheduled(2));
  ASSERT_FALSE(result.passed());
  const Violation& v = result.violations.front();
  EXPECT_EQ(v.invariant, Invariant::kDenominator) << Text(result);
  // a's and b's rows feed optimizer step 0 (2 + 5 targets); c's and d's step 1 (4 + 6): 17 over the generation.
  EXPECT_EQ(v.sentence,
            "the loss reducer (optimizer step 0 of the 2 its generation batch feeds, 2 micro-steps each), micro-batch "
            "0: divided by 17, but its global has 7 valid targets");
}

TEST(Schedule, ItsFixedTwinCountingEachOptimizerStepPasses) {
  Candidate fixed = MakeCandidate("grpo-step-denominator", GenerationReducer{true});
  const CaseResult result = CheckCase(fixed, Rollouts(), Scheduled(2));
  EXPECT_TRUE(result.passed()) << Text(result);
  EXPECT_TRUE(result.checked.count(Invariant::kLoss));
}

TEST(Schedule, WithoutAScheduleTheGenerationBatchIsTheStepAndBothPass) {
  for (bool per_step : {false, true}) {
    Candidate reducer = MakeCandidate("generation-reducer", GenerationReducer{per_step});
    const CaseResult result = CheckCase(reducer, Rollouts(), Scheduled(1));
    EXPECT_TRUE(result.passed()) << per_step << "\n" << Text(result);
  }
}

TEST(Schedule, TheReducerIsToldTheSchedule) {
  struct Recorder {
    std::vector<std::pair<std::int64_t, std::int64_t>>* seen;
    ReduceResult Reduce(const ReduceRequest& request) {
      seen->push_back({request.optimizer_steps, request.grad_accum_steps});
      return GenerationReducer{true}.Reduce(request);
    }
  };
  std::vector<std::pair<std::int64_t, std::int64_t>> seen;
  Candidate recorder = MakeCandidate("recorder", Recorder{&seen});
  CheckCase(recorder, Rollouts(), Scheduled(3));  // 4 micro-steps: optimizer steps of ⌈4/3⌉ = 2, so 2 of them
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front(), (std::pair<std::int64_t, std::int64_t>{2, 2}));
  for (std::size_t k = 1; k < seen.size(); ++k) EXPECT_EQ(seen[k].first, 1) << "the splits stay unscheduled";
}

}  // namespace
}  // namespace packoracle
