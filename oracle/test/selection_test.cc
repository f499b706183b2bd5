// Selections inside the objective (oracle/selection.h) on a hand-scored step: which targets each rule keeps,
// the tie-break, the scope (the whole step or each optimizer step), and the counts that follow.
#include <gtest/gtest.h>

#include <vector>

#include "packoracle/oracle.h"

namespace packoracle {
namespace {

// a = [11 12 13] and b = [21 .. 26], one row each, one row a micro-batch (micro-steps 0 and 1), under the
// reference preset: a's slots 0, 1 predict its tokens 1, 2; b's slots 0..4 its tokens 1..5.
OracleBatch TwoRows() {
  const std::vector<Document> docs = {{"a", {11, 12, 13}, {}}, {"b", {21, 22, 23, 24, 25, 26}, {}}};
  const Policy& policy = FindPreset("reference").policy;
  auto layout = OneDocumentPerRow(docs, policy, 8);
  AssignMicrobatches(layout, 1, 1);
  return Materialize(docs, layout, policy);
}

// Scores by target: a1 0.9, a2 0.1; b1 0.5, b2 0.8, b3 0.5 (a tie with b1), b4 0.2, b5 0.7.
const TargetScores kScores = {{0.0, 0.9, 0.1}, {0.0, 0.5, 0.8, 0.5, 0.2, 0.7}};

std::vector<std::vector<double>> Weights(const OracleBatch& batch) {
  std::vector<std::vector<double>> out;
  for (const auto& row : batch.rows) {
    auto& w = out.emplace_back();
    for (const auto& p : row.predictions) w.push_back(p.weight);
  }
  return out;
}

constexpr std::int64_t kWholeStep = 2;  // past both micro-steps: one optimizer step

TEST(Selection, KeepsTheTopFractionOfTheStepWithTheTieToTheSmallerOffset) {
  // 7 targets, q = 0.5: ⌈3.5⌉ = 4 kept, a1 0.9, b2 0.8, b5 0.7, then b1 0.5 before b3 0.5 (same document,
  // smaller offset).
  const OracleBatch selected = SelectedTargets(TwoRows(), kScores, SelectionRule{0.5}, kWholeStep);
  EXPECT_EQ(Weights(selected), (std::vector<std::vector<double>>{{1, 0, 0, 0, 0, 0, 0, 0}, {1, 1, 0, 0, 1, 0, 0, 0}}));
  EXPECT_EQ(Denominators(selected).global_targets, 4) << "the denominator counts the selected targets only";
  const TargetLosses losses = {{0, 1, 3}, {0, 1, 2, 4, 8, 16}};
  EXPECT_DOUBLE_EQ(Objective(selected, losses, Denominator::kGlobalTargets).value, (1 + 1 + 2 + 16) / 4.0);
}

TEST(Selection, ChoosesWithinEachOptimizerStep) {
  // q = 0.25. Over the whole step: ⌈1.75⌉ = 2, a1 and b2. One micro-step per optimizer step: a keeps ⌈0.5⌉ = 1
  // (a1), b ⌈1.25⌉ = 2 (b2, b5).
  const auto whole = SelectedTargets(TwoRows(), kScores, SelectionRule{0.25}, kWholeStep);
  EXPECT_EQ(Weights(whole), (std::vector<std::vector<double>>{{1, 0, 0, 0, 0, 0, 0, 0}, {0, 1, 0, 0, 0, 0, 0, 0}}));
  const auto per_step = SelectedTargets(TwoRows(), kScores, SelectionRule{0.25}, 1);
  EXPECT_EQ(Weights(per_step), (std::vector<std::vector<double>>{{1, 0, 0, 0, 0, 0, 0, 0}, {0, 1, 0, 0, 1, 0, 0, 0}}));
}

TEST(Selection, KeepingEverythingIsNoSelection) {
  const OracleBatch batch = TwoRows();
  EXPECT_EQ(Weights(SelectedTargets(batch, kScores, SelectionRule{1.0}, kWholeStep)), Weights(batch));
  EXPECT_EQ(Weights(SelectedTargets(batch, {}, SelectionRule{}, kWholeStep)), Weights(batch)) << "no scores needed";
}

TEST(Selection, RefusesARuleItCannotApply) {
  EXPECT_THROW(SelectedTargets(TwoRows(), kScores, SelectionRule{0.0}, kWholeStep), InputError);
  EXPECT_THROW(SelectedTargets(TwoRows(), kScores, SelectionRule{1.5}, kWholeStep), InputError);
  EXPECT_THROW(SelectedTargets(TwoRows(), kScores, SelectionRule{0.5}, 0), InputError);
  EXPECT_THROW(SelectedTargets(TwoRows(), {{0.0, 0.9, 0.1}}, SelectionRule{0.5}, kWholeStep), InputError)
      << "b's targets have no score";
}

}  // namespace
}  // namespace packoracle
