// Every formula of conventions §4 on a hand-computed step: one micro-batch with 1 valid target, one with 99
// (conventions §6 case 8: micro-batch means weigh the lone target 99 times more than the token mean does).
#include <gtest/gtest.h>

#include <numeric>

#include "packoracle/oracle.h"

namespace packoracle {
namespace {

std::vector<Token> Iota(int n) {
  std::vector<Token> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 1);
  return v;
}

class Denominators100 : public ::testing::Test {
 protected:
  // d0 = [1 2]: one target (loss 4). d1 = [1..100]: 99 targets (loss 1 each). One document per row of 100.
  OracleBatch Build(std::int64_t dp_world_size, const Policy& policy = FindPreset("reference").policy,
                    std::vector<Document> extra = {}) {
    docs_ = {{"d0", {1, 2}, {}}, {"d1", Iota(100), {}}};
    for (auto& d : extra) docs_.push_back(d);
    auto layout = OneDocumentPerRow(docs_, policy, 100);
    AssignMicrobatches(layout, 1, dp_world_size);
    losses_ = {{0, 4}, std::vector<double>(100, 1.0)};
    for (const auto& d : extra) losses_.push_back(std::vector<double>(d.tokens.size(), 8.0));
    return Materialize(docs_, layout, policy);
  }
  double Value(const OracleBatch& batch, Denominator formula, CountBasis basis = CountBasis::kTargets) {
    const auto objective = Objective(batch, losses_, formula, basis);
    EXPECT_TRUE(objective.has_targets);
    return objective.value;
  }
  std::vector<Document> docs_;
  TargetLosses losses_;
};

TEST_F(Denominators100, CountsOnOneRankWithTwoMicrobatches) {
  const auto counts = Denominators(Build(1));
  EXPECT_EQ(counts.global_targets, 100.0);
  EXPECT_EQ(counts.per_microbatch.at({0, 0}), 1.0);
  EXPECT_EQ(counts.per_microbatch.at({0, 1}), 99.0);
  EXPECT_EQ(counts.per_rank.at(0), 100.0);
  EXPECT_EQ(counts.all_positions, 200);
  EXPECT_EQ(counts.sequences, 2);
  EXPECT_EQ(counts.grad_accum_steps, 2);
}

TEST_F(Denominators100, EachFormulaOnOneRank) {
  const auto batch = Build(1);
  EXPECT_DOUBLE_EQ(Value(batch, Denominator::kGlobalTargets), 103.0 / 100.0);     // (4 + 99) / 100
  EXPECT_DOUBLE_EQ(Value(batch, Denominator::kRankMean), 103.0 / 100.0);          // one rank: the same
  EXPECT_DOUBLE_EQ(Value(batch, Denominator::kMicrobatchMean), (4.0 + 1.0) / 2);  // (4/1 + 99/99) / 2
  EXPECT_DOUBLE_EQ(Value(batch, Denominator::kSequenceMean), (4.0 + 1.0) / 2);    // per-document means
  EXPECT_DOUBLE_EQ(Value(batch, Denominator::kAllPositions), 103.0 / 200.0);      // 2 rows x 100 slots
}

TEST_F(Denominators100, RankMeanOnTwoRanks) {
  const auto batch = Build(2);  // d0's row on rank 0, d1's on rank 1
  EXPECT_DOUBLE_EQ(Value(batch, Denominator::kGlobalTargets), 103.0 / 100.0);
  EXPECT_DOUBLE_EQ(Value(batch, Denominator::kRankMean), (4.0 / 1 + 99.0 / 99) / 2);
  EXPECT_DOUBLE_EQ(Value(batch, Denominator::kMicrobatchMean), (4.0 / 1 + 99.0 / 99) / 2);
}

TEST_F(Denominators100, AnEmptyMicrobatchCountsAsZeroInMicrobatchMeanAsMegatronClampsIt) {
  const auto batch = Build(1, FindPreset("reference").policy, {{"d2", {7, 8, 9}, {0, 0, 0}}});
  EXPECT_EQ(Denominators(batch).per_microbatch.at({0, 2}), 0.0);
  EXPECT_DOUBLE_EQ(Value(batch, Denominator::kMicrobatchMean), (4.0 + 1.0 + 0.0) / 3);  // 0 / max(1, 0)
  EXPECT_DOUBLE_EQ(Value(batch, Denominator::kGlobalTargets), 103.0 / 100.0);          // unchanged
}

TEST_F(Denominators100, UnshiftedLabelCountOverCountsOnePerRowAsHfBeforePr46204) {
  const auto batch = Build(1, FindPreset("hf-padded").policy);
  // aligned labels: d0's row [1 2 -100...] and d1's [1..100]: 2 + 100 labels, but 1 + 99 targets.
  EXPECT_EQ(Denominators(batch).unshifted_labels, 102);
  EXPECT_DOUBLE_EQ(Value(batch, Denominator::kGlobalTargets, CountBasis::kUnshiftedLabels), 103.0 / 102.0);
  EXPECT_DOUBLE_EQ(Value(batch, Denominator::kGlobalTargets, CountBasis::kTargets), 103.0 / 100.0);
}

// The weights of ObjectiveWeights are ∂L/∂ℓ: Σ weight·ℓ gives back the Objective under every formula, and
// under global_targets each weighted target weighs m / Σm.
TEST_F(Denominators100, ObjectiveWeightsAreTheObjectivesGradient) {
  for (std::int64_t ranks : {1, 2}) {
    const auto batch = Build(ranks, FindPreset("reference").policy, {{"d2", {7, 8, 9}, {0, 0, 0}}});
    for (Denominator formula : {Denominator::kGlobalTargets, Denominator::kRankMean, Denominator::kMicrobatchMean,
                                Denominator::kSequenceMean, Denominator::kAllPositions}) {
      const auto weights = ObjectiveWeights(batch, formula);
      ASSERT_EQ(weights.size(), batch.rows.size());
      double value = 0;
      for (std::size_t r = 0; r < batch.rows.size(); ++r) {
        ASSERT_EQ(weights[r].size(), batch.rows[r].predictions.size());
        for (std::size_t i = 0; i < weights[r].size(); ++i) {
          const Prediction& p = batch.rows[r].predictions[i];
          if (p.weight == 0) {
            EXPECT_EQ(weights[r][i], 0.0);
            continue;
          }
          value += weights[r][i] * losses_[static_cast<std::size_t>(p.target_doc)][static_cast<std::size_t>(p.target_offset)];
        }
      }
      EXPECT_NEAR(value, Value(batch, formula), 1e-12) << Name(formula) << " on " << ranks << " ranks";
    }
  }
  const auto batch = Build(1);
  const auto weights = ObjectiveWeights(batch, Denominator::kGlobalTargets);
  EXPECT_DOUBLE_EQ(weights[0][0], 1.0 / 100);  // d0's one target: m / Σm
  EXPECT_DOUBLE_EQ(ObjectiveWeights(batch, Denominator::kMicrobatchMean)[0][0], 1.0 / 2);  // 1 / (M · 1)
  EXPECT_DOUBLE_EQ(ObjectiveWeights(batch, Denominator::kMicrobatchMean)[1][0], 1.0 / (2 * 99));
}

TEST(Denominators, AStepWithoutTargetsHasNoObjective) {
  const std::vector<Document> docs = {{"a", {1, 2, 3}, {0, 0, 0}}};
  const Policy& policy = FindPreset("reference").policy;
  const auto batch = Materialize(docs, SequentialLayout(docs, policy, 4), policy);
  const auto objective = Objective(batch, {{1, 1, 1}}, Denominator::kGlobalTargets);
  EXPECT_FALSE(objective.has_targets);
  EXPECT_EQ(objective.value, 0.0);
  EXPECT_EQ(Denominators(batch).global_targets, 0.0);
  for (const auto& row : ObjectiveWeights(batch, Denominator::kGlobalTargets))
    for (double w : row) EXPECT_EQ(w, 0.0);
}

}  // namespace
}  // namespace packoracle

namespace packoracle {
namespace {

TEST(Denominators, EveryRankAndMicroStepOfTheStepIsListedZeroWhereEmpty) {
  // Three rows over two ranks: rank 0 gets micro-steps 0 and 1, rank 1 only micro-step 0.
  const auto docs = MakeDocuments({{1, 2, 3}, {4, 5}, {6, 7, 8, 9}});
  const Policy& policy = FindPreset("reference").policy;
  auto layout = OneDocumentPerRow(docs, policy, 4);
  AssignMicrobatches(layout, 1, 2);
  const auto counts = Denominators(Materialize(docs, layout, policy));
  EXPECT_EQ(counts.per_microbatch, (std::map<MicrobatchKey, double>{{{0, 0}, 2}, {{0, 1}, 3}, {{1, 0}, 1}, {{1, 1}, 0}}));
  EXPECT_EQ(counts.per_rank, (std::map<std::int64_t, double>{{0, 5}, {1, 1}}));
}

}  // namespace
}  // namespace packoracle
