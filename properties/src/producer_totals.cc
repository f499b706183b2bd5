#include "packoracle/properties/producer_totals.h"

#include <algorithm>

namespace packoracle {

const char* ImpliedScope(Denominator denominator) {
  switch (denominator) {
    case Denominator::kGlobalTargets:
    case Denominator::kAllPositions: return "global";
    case Denominator::kRankMean: return "step";
    case Denominator::kMicrobatchMean:
    case Denominator::kSequenceMean: return "microbatch";
  }
  return "global";
}

std::optional<std::string> TotalsShapeProblem(const ProducerTotals& t) {
  if (!t.loss_sum && !t.denominator && !t.loss)
    return "producer totals with none of loss_sum, denominator, loss";
  if (t.denominator && t.denominator_scope.empty())
    return "a denominator without its denominator_scope (what it counts is unknown)";
  if (!t.denominator && !t.denominator_scope.empty())
    return "a denominator_scope '" + t.denominator_scope + "' without a denominator";
  return std::nullopt;
}

std::optional<double> GivenLoss(const ProducerTotals& t) {
  if (t.loss) return t.loss;
  if (t.loss_sum && t.denominator) return *t.denominator > 0 ? *t.loss_sum / *t.denominator : 0.0;
  return std::nullopt;
}

std::optional<double> GivenLossSum(const ProducerTotals& t) {
  if (t.loss_sum) return t.loss_sum;
  if (t.loss && t.denominator) return *t.loss * *t.denominator;
  return std::nullopt;
}

std::vector<std::string> ProducerNotes(const std::vector<const ProducerTotals*>& totals, const CheckOptions& options) {
  auto any = [&](auto pred) { return std::any_of(totals.begin(), totals.end(), [&](const ProducerTotals* t) { return pred(*t); }); };
  std::vector<std::string> out;
  // Each case below is a subset that leaves a check without its inputs; the four subsets that remain
  // (everything; loss_sum + denominator; loss + denominator; loss_sum + loss) allow every check.
  if (any([](const ProducerTotals& t) { return t.denominator && !t.loss_sum && !t.loss; }))
    out.push_back("producer totals give a denominator alone (no loss_sum, no loss): the count was checked, the "
                  "loss and the step objective were not");
  if (any([](const ProducerTotals& t) { return t.loss_sum && !t.denominator && !t.loss; }))
    out.push_back("producer totals give a loss_sum alone (no denominator, no loss): what it was divided by is "
                  "unknown, so the step objective was not checked");
  if (!options.losses_known && any([](const ProducerTotals& t) { return t.loss && !t.loss_sum && !t.denominator; }))
    out.push_back("producer totals give a loss alone (no loss_sum, no denominator): without per-target losses "
                  "neither it nor the step objective could be checked");
  return out;
}

}  // namespace packoracle
