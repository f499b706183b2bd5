// FastStepChecker's producer totals (see step_check.cc): Checker::CheckTotals and the token mean of
// Checker::Run, from the per-row sums the row passes left. One TotalsPass per step, in three parts: each
// micro-batch's totals against its own counts, the weighting of the denominators, and the step's declared
// objective against the policy's formula.
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

class FastStepChecker::Impl::TotalsPass {
 public:
  explicit TotalsPass(Impl& impl)
      : s_(impl), policy_(impl.policy()), known_(impl.options.losses_known),
        seq_mean_(policy_.denominator == Denominator::kSequenceMean), partial_ranks_(impl.options.partial_ranks) {}

  void Run() {
    for (const auto& mb : s_.mbs) {
      max_micro_ = std::max(max_micro_, mb.micro_step);
      max_rank_ = std::max(max_rank_, mb.rank);
    }
    if (known_ && !ShapeOk(max_rank_ + 1, max_micro_ + 1)) throw Outcome::kDefer;
    CountMicrobatches();
    for (const auto& mb : s_.mbs)
      if (mb.producer) totals_.push_back(&*mb.producer);
    if (!totals_.empty() && totals_.size() != s_.mbs.size()) Add(Invariant::kDenominator);
    if (totals_.empty() || totals_.size() != s_.mbs.size()) return Finish();
    for (auto& note : ProducerNotes(totals_, s_.options)) s_.AddNote(std::move(note));
    if (!EachMicrobatchOk()) return Finish();
    if ((seq_mean_ && !known_) || partial_ranks_) return WeighAndFinish();
    CompareObjective();
  }

 private:
  void Add(Invariant inv) { s_.v.findings.push_back({inv, -1, -1}); }

  // Objective's StepShape checks (Resolve in oracle/src/denominator.cc) throw on these: the fast path defers.
  bool ShapeOk(std::int64_t R, std::int64_t M) const {
    if (R > kMaxMicrobatchesPerStep || M > kMaxMicrobatchesPerStep || R * M > kMaxMicrobatchesPerStep) return false;
    for (const auto& mb : s_.mbs)
      if (mb.rows > 0 && (mb.rank >= R || mb.micro_step >= M)) return false;
    return true;
  }

  // Per micro-batch counts, as CheckTotals makes them: DenominatorCount of each row, summed by micro-batch,
  // by rank and over the step.
  void CountMicrobatches() {
    n_mb_.assign(s_.mbs.size(), 0.0);
    std::size_t flat = 0;
    for (std::size_t m = 0; m < s_.mbs.size(); ++m) {
      double n = 0;
      for (std::int64_t k = 0; k < s_.mbs[m].rows; ++k, ++flat) {
        const Impl::RowSums& row = s_.sums[flat];
        n += DenominatorCount(policy_, row.weight, row.labels, static_cast<double>(row.length));
      }
      n_mb_[m] = n;
      per_rank_[s_.mbs[m].rank] += n;
      global_ += n;
    }
  }

  // The count of micro-batch m under a scope, as ScopeCounts::Of; none for a scope that is not one of §5's.
  std::optional<double> CountOf(const std::string& scope, std::size_t m) const {
    const std::optional<DenominatorScope> named = ScopeNamed(scope);
    if (!named) return std::nullopt;
    return CountOf(*named, m);
  }
  double CountOf(DenominatorScope scope, std::size_t m) const {
    return CountOfScope(scope, n_mb_[m], per_rank_.at(s_.mbs[m].rank), global_);
  }

  // Each micro-batch's totals on their own: well-formed, the denominator its scope's count, the loss sum the
  // oracle's, the loss the sum over the divisor. False when one is wrong (its finding added).
  bool EachMicrobatchOk() {
    auto finite = [](const std::optional<double>& x) { return !x || std::isfinite(*x); };
    bool ok = true;
    for (std::size_t m = 0; m < totals_.size(); ++m) {
      const ProducerTotals& t = *totals_[m];
      if (TotalsShapeProblem(t) || !finite(t.loss_sum) || !finite(t.denominator) || !finite(t.loss)) {
        Add(Invariant::kDenominator);
        ok = false;
        continue;
      }
      if (t.denominator) {
        const std::optional<double> expected = CountOf(t.denominator_scope, m);
        if (!expected) {  // a scope that is not one of §5's: nothing else of this micro-batch can be read
          Add(Invariant::kDenominator);
          ok = false;
          continue;
        }
        if (!DenominatorMatches(t, *expected)) {
          Add(Invariant::kDenominator);
          ok = false;
        }
      }
      if (t.loss_sum && known_ && !internal::LossClose(*t.loss_sum, s_.mb_loss[m])) {
        Add(Invariant::kLoss);
        ok = false;
        continue;
      }
      if (t.loss && !seq_mean_ && !GivenLossOk(t, m)) ok = false;
    }
    return ok;
  }

  // A given denominator against the count of the scope it names (0 or 1 where there is nothing to count).
  bool DenominatorMatches(const ProducerTotals& t, double expected) const {
    const bool empty_ok = expected == 0 && (*t.denominator == 0 || *t.denominator == 1);
    const bool unseen_ranks = partial_ranks_ && ScopeNamed(t.denominator_scope) == DenominatorScope::kGlobal;
    return seq_mean_ || unseen_ranks || internal::Close(*t.denominator, expected) || empty_ok;
  }

  // Checker::CheckGivenLoss: the loss against (loss_sum or Σwℓ) / (denominator or the implied scope's count).
  bool GivenLossOk(const ProducerTotals& t, std::size_t m) {
    const std::optional<double> sum =
        t.loss_sum ? t.loss_sum : (known_ ? std::optional<double>(s_.mb_loss[m]) : std::nullopt);
    if (!sum) return true;
    std::optional<double> divisor = t.denominator;
    if (!divisor) {
      const DenominatorScope scope = ImpliedScope(policy_.denominator);
      if (partial_ranks_ && scope == DenominatorScope::kGlobal) return true;
      divisor = CountOf(scope, m);
    }
    if ((*divisor > 0 && !internal::LossClose(*t.loss, *sum / *divisor)) || (*divisor == 0 && *t.loss != 0)) {
      Add(Invariant::kLoss);
      return false;
    }
    return true;
  }

  // The token mean of Checker::Run, from the oracle's losses (when they are known).
  void Finish() {
    if (!known_) return;
    double w = 0, l = 0;
    for (const auto& row : s_.sums) {
      w += row.weight;
      l += row.loss;
    }
    if (w > 0) s_.v.token_mean = l / w;
  }

  // Checker::CheckWeighting, where the step objective is not compared: the denominators against the
  // policy's, by the one rule (producer_totals.h).
  void WeighAndFinish() {
    if (!(partial_ranks_ && ImpliedScope(policy_.denominator) == DenominatorScope::kGlobal)) {
      std::vector<MicrobatchDivision> divisions;
      for (std::size_t m = 0; m < totals_.size(); ++m)
        if (totals_[m]->denominator) divisions.push_back({s_.mbs[m].rank, m, n_mb_[m], *totals_[m]->denominator});
      Weighting w = DenominatorWeighting(policy_.denominator, divisions, "the step");
      for (auto& note : w.notes) s_.AddNote(std::move(note));
      for (std::size_t k = 0; k < w.problems.size(); ++k) Add(Invariant::kDenominator);  // one finding each, as CheckCase
    }
    Finish();
  }

  std::string ScopeOf(const ProducerTotals& t) const {
    return t.denominator ? t.denominator_scope : std::string(ToString(ImpliedScope(policy_.denominator)));
  }

  // The step's declared objective (the producers' losses, averaged as their one scope says) against the
  // policy's formula, from the oracle's sums when the losses are known, else from the given loss sums.
  void CompareObjective() {
    const std::string scope = ScopeOf(*totals_.front());
    for (const auto* t : totals_) {
      if (ScopeOf(*t) != scope) {
        Add(Invariant::kDenominator);
        return Finish();
      }
    }
    std::vector<double> loss_sums;
    for (const auto* t : totals_)
      if (auto sum = GivenLossSum(*t)) loss_sums.push_back(*sum);
    const bool sums_given = loss_sums.size() == totals_.size();
    if (!known_ && sums_given) {
      double total = 0, total_n = 0;
      for (std::size_t m = 0; m < totals_.size(); ++m) {
        total += loss_sums[m];
        total_n += n_mb_[m];
      }
      if (total_n > 0) s_.v.token_mean = total / total_n;
    }
    double sum = 0;
    for (const auto* t : totals_) {
      const std::optional<double> loss = GivenLoss(*t);
      if (!loss) return WeighAndFinish();
      sum += *loss;
    }
    const auto R = static_cast<double>(s_.dp_world_size);
    const auto M = static_cast<double>(max_micro_ + 1);
    // (a scope that is none of §5's is a `denominator` finding of EachMicrobatchOk: added up meanwhile)
    const double declared =
        sum * CombineByScope(policy_.denominator, ScopeNamed(scope).value_or(DenominatorScope::kGlobal), R, M).factor;
    s_.v.declared_objective = declared;
    if (!known_ && !sums_given) return WeighAndFinish();
    const double want = known_ ? ObjectiveFromRows(R, M) : ObjectiveFromLossSums(loss_sums, R, M);
    if (!internal::LossClose(declared, want)) Add(Invariant::kLoss);
    Finish();
  }

  // Objective (oracle/src/denominator.cc) under the policy's formula, from the per-row sums.
  double ObjectiveFromRows(double R, double M) const {
    if (!ShapeOk(s_.dp_world_size, max_micro_ + 1)) throw Outcome::kDefer;
    double weight = 0, loss = 0, count = 0;
    std::int64_t length = 0;
    for (const auto& row : s_.sums) {
      weight += row.weight;
      loss += row.loss;
      count += row.count;
      length += row.length;
    }
    if (weight <= 0) return 0;
    switch (policy_.denominator) {
      case Denominator::kGlobalTargets: return count > 0 ? loss / count : 0.0;
      case Denominator::kRankMean:
      case Denominator::kMicrobatchMean: return MeanOfGroups(policy_.denominator == Denominator::kRankMean, R, M);
      case Denominator::kSequenceMean: {
        double total = 0;
        std::int64_t count_docs = 0;
        for (const std::int64_t d : s_.StepOrder()) {
          const auto [l, w] = s_.per_doc[static_cast<std::size_t>(d)];
          if (w == 0) continue;
          total += l / w;
          ++count_docs;
        }
        return total / static_cast<double>(count_docs);
      }
      case Denominator::kAllPositions: return loss / static_cast<double>(length);
    }
    return 0;
  }

  // rank_mean (by_rank) or microbatch_mean: the mean over ranks (× micro-steps) of each group's Σℓ / max(1, n).
  double MeanOfGroups(bool by_rank, double R, double M) const {
    std::map<std::pair<std::int64_t, std::int64_t>, std::pair<double, double>> groups;
    std::size_t flat = 0;
    for (const auto& mb : s_.mbs)
      for (std::int64_t k = 0; k < mb.rows; ++k, ++flat) {
        auto& sn = groups[{mb.rank, by_rank ? 0 : mb.micro_step}];
        sn.first += s_.sums[flat].loss;
        sn.second += s_.sums[flat].count;
      }
    double total = 0;
    for (const auto& [key, sn] : groups) total += sn.first / std::max(1.0, sn.second);
    return total / (by_rank ? R : R * M);
  }

  // The policy's formula from the producers' loss sums and the kit's counts (losses unknown).
  double ObjectiveFromLossSums(const std::vector<double>& loss_sums, double R, double M) const {
    double total = 0, total_n = 0, per_mb = 0;
    std::map<std::int64_t, std::pair<double, double>> by_rank;
    for (std::size_t m = 0; m < totals_.size(); ++m) {
      total += loss_sums[m];
      total_n += n_mb_[m];
      by_rank[s_.mbs[m].rank].first += loss_sums[m];
      by_rank[s_.mbs[m].rank].second += n_mb_[m];
      per_mb += loss_sums[m] / std::max(1.0, n_mb_[m]);
    }
    switch (policy_.denominator) {
      case Denominator::kGlobalTargets:
      case Denominator::kAllPositions: return total_n > 0 ? total / total_n : 0;
      case Denominator::kRankMean: {
        double rank_sum = 0;
        for (const auto& [rank, sn] : by_rank) rank_sum += sn.first / std::max(1.0, sn.second);
        return rank_sum / R;
      }
      case Denominator::kMicrobatchMean: return per_mb / (R * M);
      case Denominator::kSequenceMean: return 0;
    }
    return 0;
  }

  Impl& s_;
  const Policy& policy_;
  const bool known_, seq_mean_, partial_ranks_;
  std::int64_t max_micro_ = 0, max_rank_ = 0;
  std::vector<double> n_mb_;
  std::map<std::int64_t, double> per_rank_;
  double global_ = 0;
  std::vector<const ProducerTotals*> totals_;
};

void FastStepChecker::Impl::Totals() { TotalsPass(*this).Run(); }

}  // namespace packoracle::fastcheck
