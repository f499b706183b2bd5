// FastStepChecker's producer totals (see step_check.cc).
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>

#include "packoracle/oracle/denominator.h"
#include "packoracle/oracle/layout.h"
#include "packoracle/properties/producer_totals.h"
#include "step_impl.h"

namespace packoracle::fastcheck {

// Checker::CheckTotals for the packer's producer totals, and the token mean of Checker::Run.
void FastStepChecker::Impl::Totals() {
  const bool known = options.losses_known;
  const Policy& policy = this->policy();
  auto Add = [&](Invariant inv) { v.findings.push_back({inv, -1, -1}); };
  std::int64_t max_micro = 0, max_rank = 0;
  for (const auto& mb : mbs) {
    max_micro = std::max(max_micro, mb.micro_step);
    max_rank = std::max(max_rank, mb.rank);
  }
  // Objective's StepShape checks (Resolve in oracle/src/denominator.cc) throw on these: defer.
  auto shape_ok = [&](std::int64_t R, std::int64_t M) {
    if (R > kMaxMicrobatchesPerStep || M > kMaxMicrobatchesPerStep || R * M > kMaxMicrobatchesPerStep) return false;
    for (const auto& mb : mbs)
      if (mb.rows > 0 && (mb.rank >= R || mb.micro_step >= M)) return false;
    return true;
  };
  if (known && !shape_ok(max_rank + 1, max_micro + 1)) throw Outcome::kDefer;

  // Per micro-batch counts, as CheckTotals makes them.
  std::vector<double> n_mb(mbs.size(), 0.0);
  std::map<std::int64_t, double> per_rank;
  double global = 0;
  {
    std::size_t flat = 0;
    for (std::size_t m = 0; m < mbs.size(); ++m) {
      double n = 0;
      for (std::int64_t k = 0; k < mbs[m].rows; ++k, ++flat) {
        const RowSums& s = sums[flat];
        n += DenominatorCount(policy, s.weight, s.labels, static_cast<double>(s.length));
      }
      n_mb[m] = n;
      per_rank[mbs[m].rank] += n;
      global += n;
    }
  }
  std::vector<const ProducerTotals*> totals;
  for (const auto& mb : mbs)
    if (mb.producer) totals.push_back(&*mb.producer);

  auto token_mean_of_oracle = [&] {
    double w = 0, l = 0;
    for (const auto& s : sums) {
      w += s.weight;
      l += s.loss;
    }
    if (w > 0) v.token_mean = l / w;
  };

  if (!totals.empty() && totals.size() != mbs.size()) Add(Invariant::kDenominator);
  if (totals.empty() || totals.size() != mbs.size()) {
    if (known) token_mean_of_oracle();
    return;
  }
  for (auto& note : ProducerNotes(totals, options)) AddNote(std::move(note));
  const bool seq_mean = policy.denominator == Denominator::kSequenceMean;
  const bool partial_ranks = options.partial_ranks;
  // The count of micro-batch m under a scope, as ScopeCounts::Of; none for a scope that is not one of §5's.
  auto count_of = [&](const std::string& scope, std::size_t m) -> std::optional<double> {
    if (scope == "microbatch") return n_mb[m];
    if (scope == "step") return per_rank[mbs[m].rank];
    if (scope == "global") return global;
    return std::nullopt;
  };
  auto finite = [](const std::optional<double>& x) { return !x || std::isfinite(*x); };
  // Checker::CheckGivenLoss: the loss against (loss_sum or Σwℓ) / (denominator or the implied scope's count).
  auto given_loss_ok = [&](const ProducerTotals& t, std::size_t m) {
    const std::optional<double> sum = t.loss_sum ? t.loss_sum : (known ? std::optional<double>(mb_loss[m]) : std::nullopt);
    if (!sum) return true;
    std::optional<double> divisor = t.denominator;
    if (!divisor) {
      const std::string scope = ImpliedScope(policy.denominator);
      if (partial_ranks && scope == "global") return true;
      divisor = count_of(scope, m);
    }
    if ((*divisor > 0 && !internal::LossClose(*t.loss, *sum / *divisor)) || (*divisor == 0 && *t.loss != 0)) {
      Add(Invariant::kLoss);
      return false;
    }
    return true;
  };
  bool ok = true;
  for (std::size_t m = 0; m < totals.size(); ++m) {
    const ProducerTotals& t = *totals[m];
    if (TotalsShapeProblem(t) || !finite(t.loss_sum) || !finite(t.denominator) || !finite(t.loss)) {
      Add(Invariant::kDenominator);
      ok = false;
      continue;
    }
    if (t.denominator) {
      const std::optional<double> expected = count_of(t.denominator_scope, m);
      if (!expected) {
        Add(Invariant::kDenominator);
        ok = false;
        continue;
      }
      const bool empty_ok = *expected == 0 && (*t.denominator == 0 || *t.denominator == 1);
      const bool unseen_ranks = partial_ranks && t.denominator_scope == "global";
      if (!seq_mean && !unseen_ranks && !Close(*t.denominator, *expected) && !empty_ok) {
        Add(Invariant::kDenominator);
        ok = false;
      }
    }
    if (t.loss_sum && known && !internal::LossClose(*t.loss_sum, mb_loss[m])) {
      Add(Invariant::kLoss);
      ok = false;
      continue;
    }
    if (t.loss && !seq_mean && !given_loss_ok(t, m)) ok = false;
  }
  auto finish = [&] {
    if (known) token_mean_of_oracle();
  };
  // Checker::CheckWeighting, where the step objective is not compared: the denominators against the
  // policy's, by the one rule (producer_totals.h).
  auto weigh_and_finish = [&] {
    if (!(partial_ranks && std::string(ImpliedScope(policy.denominator)) == "global")) {
      std::vector<MicrobatchDivision> divisions;
      for (std::size_t m = 0; m < totals.size(); ++m)
        if (totals[m]->denominator) divisions.push_back({mbs[m].rank, m, n_mb[m], *totals[m]->denominator});
      Weighting w = DenominatorWeighting(policy.denominator, divisions, "the step");
      for (auto& note : w.notes) AddNote(std::move(note));
      for (std::size_t k = 0; k < w.problems.size(); ++k) Add(Invariant::kDenominator);  // one finding each, as CheckCase
    }
    finish();
  };
  if (!ok) return finish();
  if ((seq_mean && !known) || partial_ranks) return weigh_and_finish();

  auto scope_of = [&](const ProducerTotals& t) {
    return t.denominator ? t.denominator_scope : std::string(ImpliedScope(policy.denominator));
  };
  const std::string scope = scope_of(*totals.front());
  for (const auto* t : totals) {
    if (scope_of(*t) != scope) {
      Add(Invariant::kDenominator);
      return finish();
    }
  }
  std::vector<double> loss_sums;
  for (const auto* t : totals)
    if (auto s = GivenLossSum(*t)) loss_sums.push_back(*s);
  const bool sums_given = loss_sums.size() == totals.size();
  if (!known && sums_given) {
    double total = 0, total_n = 0;
    for (std::size_t m = 0; m < totals.size(); ++m) {
      total += loss_sums[m];
      total_n += n_mb[m];
    }
    if (total_n > 0) v.token_mean = total / total_n;
  }
  double sum = 0;
  for (const auto* t : totals) {
    const std::optional<double> loss = GivenLoss(*t);
    if (!loss) return weigh_and_finish();
    sum += *loss;
  }
  const auto R = static_cast<double>(dp_world_size);
  const auto M = static_cast<double>(max_micro + 1);
  double declared = sum;
  if (!seq_mean) {
    if (scope == "step") declared = sum / R;
    if (scope == "microbatch") declared = sum / (R * M);
  }
  v.declared_objective = declared;
  double want = 0;
  if (known) {
    // Objective (oracle/src/denominator.cc) under the policy's formula, from the per-row sums.
    if (!shape_ok(dp_world_size, max_micro + 1)) throw Outcome::kDefer;
    double weight = 0, loss = 0, count = 0;
    std::int64_t length = 0;
    for (const auto& s : sums) {
      weight += s.weight;
      loss += s.loss;
      count += s.count;
      length += s.length;
    }
    if (weight > 0) {
      switch (policy.denominator) {
        case Denominator::kGlobalTargets: want = count > 0 ? loss / count : 0.0; break;
        case Denominator::kRankMean:
        case Denominator::kMicrobatchMean: {
          const bool by_rank = policy.denominator == Denominator::kRankMean;
          std::map<std::pair<std::int64_t, std::int64_t>, std::pair<double, double>> groups;
          std::size_t flat = 0;
          for (const auto& mb : mbs)
            for (std::int64_t k = 0; k < mb.rows; ++k, ++flat) {
              auto& sn = groups[{mb.rank, by_rank ? 0 : mb.micro_step}];
              sn.first += sums[flat].loss;
              sn.second += sums[flat].count;
            }
          double total = 0;
          for (const auto& [key, sn] : groups) total += sn.first / std::max(1.0, sn.second);
          want = total / (by_rank ? R : R * M);
          break;
        }
        case Denominator::kSequenceMean: {
          double total = 0;
          std::int64_t count_docs = 0;
          for (const std::int64_t d : StepOrder()) {
            const auto [l, w] = per_doc[static_cast<std::size_t>(d)];
            if (w == 0) continue;
            total += l / w;
            ++count_docs;
          }
          want = total / static_cast<double>(count_docs);
          break;
        }
        case Denominator::kAllPositions: want = loss / static_cast<double>(length); break;
      }
    }
  } else {
    if (!sums_given) return weigh_and_finish();
    double total = 0, total_n = 0, per_mb = 0;
    std::map<std::int64_t, std::pair<double, double>> by_rank;
    for (std::size_t m = 0; m < totals.size(); ++m) {
      total += loss_sums[m];
      total_n += n_mb[m];
      by_rank[mbs[m].rank].first += loss_sums[m];
      by_rank[mbs[m].rank].second += n_mb[m];
      per_mb += loss_sums[m] / std::max(1.0, n_mb[m]);
    }
    switch (policy.denominator) {
      case Denominator::kGlobalTargets:
      case Denominator::kAllPositions: want = total_n > 0 ? total / total_n : 0; break;
      case Denominator::kRankMean: {
        double rank_sum = 0;
        for (const auto& [rank, sn] : by_rank) rank_sum += sn.first / std::max(1.0, sn.second);
        want = rank_sum / R;
        break;
      }
      case Denominator::kMicrobatchMean: want = per_mb / (R * M); break;
      case Denominator::kSequenceMean: break;
    }
  }
  if (!internal::LossClose(declared, want)) Add(Invariant::kLoss);
  finish();
}

}  // namespace packoracle::fastcheck
