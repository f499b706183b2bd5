// The denominator scopes and the totals' shape, each stated once (candidate.h, producer_totals.h): the names a
// producer writes, the count each scope picks, how a step's losses combine by scope, and the shape every reader
// refuses.
#include "packoracle/properties/producer_totals.h"

#include <gtest/gtest.h>

namespace packoracle {
namespace {

TEST(DenominatorScope, EachNameReadsAsItsScopeAndNoOtherNameDoes) {
  for (const auto scope : kDenominatorScopes) EXPECT_EQ(ScopeNamed(ToString(scope)), scope);
  EXPECT_EQ(ScopeNamed("microbatch"), DenominatorScope::kMicrobatch);
  EXPECT_EQ(ScopeNamed("global"), DenominatorScope::kGlobal);
  for (const char* other : {"", "rank", "Global", "micro_batch", "steps"}) EXPECT_FALSE(ScopeNamed(other)) << other;
}

TEST(DenominatorScope, EachScopePicksItsOwnCount) {
  EXPECT_EQ(CountOfScope(DenominatorScope::kMicrobatch, 3, 7, 20), 3);
  EXPECT_EQ(CountOfScope(DenominatorScope::kStep, 3, 7, 20), 7);
  EXPECT_EQ(CountOfScope(DenominatorScope::kGlobal, 3, 7, 20), 20);
  EXPECT_EQ(ImpliedScope(Denominator::kGlobalTargets), DenominatorScope::kGlobal);
  EXPECT_EQ(ImpliedScope(Denominator::kAllPositions), DenominatorScope::kGlobal);
  EXPECT_EQ(ImpliedScope(Denominator::kRankMean), DenominatorScope::kStep);
  EXPECT_EQ(ImpliedScope(Denominator::kMicrobatchMean), DenominatorScope::kMicrobatch);
}

// Two ranks of three micro-batches, each loss divided by its scope's count: the losses add up to the step
// objective under global, to R times it under step (each rank's losses are its mean), to R × M times it under
// microbatch; sequence means are each micro-batch's share and add up under any scope.
TEST(DenominatorScope, LossesCombineAsTheirScopeDivided) {
  const auto step = CombineByScope(Denominator::kRankMean, DenominatorScope::kStep, 2, 3);
  EXPECT_DOUBLE_EQ(step.factor, 0.5);
  EXPECT_EQ(step.words, "averaged over 2 ranks");
  const auto microbatch = CombineByScope(Denominator::kMicrobatchMean, DenominatorScope::kMicrobatch, 2, 3);
  EXPECT_DOUBLE_EQ(microbatch.factor, 1.0 / 6);
  EXPECT_EQ(microbatch.words, "averaged over 2 ranks x 3 micro-batches");
  EXPECT_DOUBLE_EQ(CombineByScope(Denominator::kGlobalTargets, DenominatorScope::kGlobal, 2, 3).factor, 1);
  const auto sequence = CombineByScope(Denominator::kSequenceMean, DenominatorScope::kMicrobatch, 2, 3);
  EXPECT_DOUBLE_EQ(sequence.factor, 1);
  EXPECT_EQ(sequence.words, "added up");
}

TEST(ProducerTotals, EveryReaderRefusesTheSameShapes) {
  ProducerTotals none;
  EXPECT_EQ(ProducerTotalsProblem(none, false)->field, "producer");
  ProducerTotals count;
  count.denominator = 7;
  EXPECT_EQ(ProducerTotalsProblem(count, false)->sentence,
            "is missing: a denominator needs its scope (microbatch, step or global)");
  count.denominator_scope = "global";
  EXPECT_FALSE(ProducerTotalsProblem(count, true));
  ProducerTotals scope_alone;
  scope_alone.loss = 0.5;
  scope_alone.denominator_scope = "step";
  EXPECT_EQ(ProducerTotalsProblem(scope_alone, true)->field, "denominator_scope");
  ProducerTotals empty_scope = count;
  empty_scope.denominator_scope.clear();
  EXPECT_EQ(ProducerTotalsProblem(empty_scope, true)->sentence, "is empty (microbatch, step or global)");
  // A candidate's answer: the same rule, as its `denominator` violation's sentence.
  EXPECT_EQ(*TotalsShapeProblem(scope_alone),
            "producer totals: field 'denominator_scope' is given without a denominator (the scope says what a "
            "denominator counts)");
  EXPECT_FALSE(TotalsShapeProblem(count));
}

}  // namespace
}  // namespace packoracle
