#include "packoracle/properties/producer_totals.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

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

namespace {

std::string Num(double v) {
  std::ostringstream os;
  os.precision(12);
  os << v;
  return os.str();
}

// Ratios of exact counts; 1e-9 relative leaves room for a denominator that went through float32 (a count below
// 2^24 stays exact there) without letting one target in a million pass.
bool SameRatio(double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max({1.0, std::fabs(a), std::fabs(b)}); }

// What the policy's denominator divides micro-batch m by, in words, for the problem sentences.
std::string Declared(Denominator policy) {
  const std::string what = policy == Denominator::kAllPositions ? "positions" : "valid targets";
  const std::string scope = ImpliedScope(policy);
  if (scope == "global") return "the step's " + what + " over every rank";
  if (scope == "step") return "its rank's " + what + " in the step";
  return "its own " + what;
}

}  // namespace

Weighting DenominatorWeighting(Denominator policy, const std::vector<MicrobatchDivision>& divisions,
                               const std::string& where) {
  Weighting out;
  if (policy == Denominator::kSequenceMean) return out;
  double global = 0;
  std::map<std::int64_t, double> per_rank;
  for (const auto& d : divisions) {
    global += d.count;
    per_rank[d.rank] += d.count;
  }
  const std::string scope = ImpliedScope(policy);
  auto declared = [&](const MicrobatchDivision& d) {
    return scope == "global" ? global : scope == "step" ? per_rank[d.rank] : d.count;
  };
  std::vector<std::pair<const MicrobatchDivision*, double>> ratios;  // d_m / e_m of each micro-batch with a count
  for (const auto& d : divisions)
    if (d.count > 0) ratios.emplace_back(&d, d.denominator / declared(d));
  if (ratios.empty()) return out;
  const double first = ratios.front().second;
  const bool uniform = std::all_of(ratios.begin(), ratios.end(), [&](const auto& r) { return SameRatio(r.second, first); });
  if (uniform && first > 0) {
    if (!SameRatio(first, 1.0))
      out.notes.push_back("every denominator is " + Num(first) + " × the one " + Name(policy) +
                          " declares: the same objective up to scale at " + where +
                          " (it changes at the first step whose counts differ between micro-batches)");
    return out;
  }
  for (const auto& [d, ratio] : ratios) {
    if (SameRatio(ratio, 1.0)) continue;
    out.problems.push_back("rank " + std::to_string(d->rank) + " micro-batch " + std::to_string(d->index) +
                           " divides by " + Num(d->denominator) + ", " + Declared(policy) + " (" + Name(policy) +
                           ") is " + Num(declared(*d)) + ": the micro-batches of " + where +
                           " are weighted unequally");
  }
  return out;
}

}  // namespace packoracle
