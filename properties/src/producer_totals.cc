#include "packoracle/properties/producer_totals.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

namespace packoracle {

double CountOfScope(DenominatorScope scope, double microbatch, double rank, double global) {
  switch (scope) {
    case DenominatorScope::kMicrobatch: return microbatch;
    case DenominatorScope::kStep: return rank;
    case DenominatorScope::kGlobal: return global;
  }
  return global;
}

ScopeCombination CombineByScope(Denominator policy, DenominatorScope scope, double ranks, double microbatches) {
  if (policy == Denominator::kSequenceMean || scope == DenominatorScope::kGlobal) return {};
  std::ostringstream r, m;
  r << ranks;
  m << microbatches;
  if (scope == DenominatorScope::kStep) return {1 / ranks, "averaged over " + r.str() + " ranks"};
  return {1 / (ranks * microbatches), "averaged over " + r.str() + " ranks x " + m.str() + " micro-batches"};
}

DenominatorScope ImpliedScope(Denominator denominator) {
  switch (denominator) {
    case Denominator::kGlobalTargets:
    case Denominator::kAllPositions: return DenominatorScope::kGlobal;
    case Denominator::kRankMean: return DenominatorScope::kStep;
    case Denominator::kMicrobatchMean:
    case Denominator::kSequenceMean: return DenominatorScope::kMicrobatch;
  }
  return DenominatorScope::kGlobal;
}

std::optional<DenominatorScope> DividedScope(const ProducerTotals& totals, Denominator policy) {
  return totals.denominator ? ScopeNamed(totals.denominator_scope) : std::optional(ImpliedScope(policy));
}

std::optional<std::string> TotalsShapeProblem(const ProducerTotals& t) {
  const auto problem = ProducerTotalsProblem(t, !t.denominator_scope.empty());
  if (!problem) return std::nullopt;
  return problem->field == "producer" ? "a producer object that " + problem->sentence
                                      : "producer totals: field '" + problem->field + "' " + problem->sentence;
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
  switch (ImpliedScope(policy)) {
    case DenominatorScope::kGlobal: return "the step's " + what + " over every rank";
    case DenominatorScope::kStep: return "its rank's " + what + " in the step";
    case DenominatorScope::kMicrobatch: break;
  }
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
  const DenominatorScope scope = ImpliedScope(policy);
  auto declared = [&](const MicrobatchDivision& d) { return CountOfScope(scope, d.count, per_rank[d.rank], global); };
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
