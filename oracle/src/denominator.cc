#include "packoracle/oracle/denominator.h"

#include <algorithm>
#include <set>

#include "packoracle/oracle/error.h"

namespace packoracle {
namespace {

StepShape Resolve(const OracleBatch& batch, StepShape shape) {
  std::int64_t max_rank = 0, max_micro = 0;
  for (const auto& row : batch.rows) {
    max_rank = std::max(max_rank, row.rank);
    max_micro = std::max(max_micro, row.micro_step);
  }
  if (shape.dp_world_size == 0) shape.dp_world_size = max_rank + 1;
  if (shape.grad_accum_steps == 0) shape.grad_accum_steps = max_micro + 1;
  if (shape.dp_world_size < 0 || shape.grad_accum_steps < 0 || shape.dp_world_size > kMaxMicrobatchesPerStep ||
      shape.grad_accum_steps > kMaxMicrobatchesPerStep ||
      shape.dp_world_size * shape.grad_accum_steps > kMaxMicrobatchesPerStep) {
    throw InputError("a step of " + std::to_string(shape.dp_world_size) + " ranks x " +
                     std::to_string(shape.grad_accum_steps) + " micro-batches: both must be positive and their product at most " +
                     std::to_string(kMaxMicrobatchesPerStep));
  }
  for (std::size_t r = 0; r < batch.rows.size(); ++r) {
    const auto& row = batch.rows[r];
    if (row.rank >= shape.dp_world_size || row.micro_step >= shape.grad_accum_steps) {
      throw InputError("row " + std::to_string(r) + ": rank " + std::to_string(row.rank) + ", micro_step " +
                       std::to_string(row.micro_step) + " lies outside a step of " +
                       std::to_string(shape.dp_world_size) + " ranks x " + std::to_string(shape.grad_accum_steps) +
                       " micro-batches");
    }
  }
  return shape;
}

// The count of one row on the producer's basis.
double Count(const OracleRow& row, const Policy& policy, CountBasis basis) {
  return basis == CountBasis::kTargets ? WeightSum(row) : static_cast<double>(UnshiftedLabelCount(row, policy));
}

// Σ w ℓ over one row.
double LossSum(const OracleBatch& batch, const OracleRow& row, const TargetLosses& losses) {
  double sum = 0;
  for (std::size_t i = 0; i < row.predictions.size(); ++i) {
    const Prediction& p = row.predictions[i];
    if (p.weight == 0) continue;
    const auto d = static_cast<std::size_t>(p.target_doc);
    const auto k = static_cast<std::size_t>(p.target_offset);
    if (d >= losses.size() || k >= losses[d].size()) {
      throw InputError("no loss given for target token " + std::to_string(k) + " of document '" +
                       batch.documents[d].uid + "' (losses cover " +
                       std::to_string(d < losses.size() ? losses[d].size() : 0) + " of its " +
                       std::to_string(batch.documents[d].size()) + " tokens)");
    }
    sum += p.weight * losses[d][k];
  }
  return sum;
}

}  // namespace

StepDenominators Denominators(const OracleBatch& batch, StepShape shape) {
  shape = Resolve(batch, shape);
  StepDenominators out;
  out.dp_world_size = shape.dp_world_size;
  out.grad_accum_steps = shape.grad_accum_steps;
  for (std::int64_t r = 0; r < shape.dp_world_size; ++r) {
    out.per_rank[r] = 0;
    for (std::int64_t m = 0; m < shape.grad_accum_steps; ++m) out.per_microbatch[{r, m}] = 0;
  }
  std::set<std::int64_t> docs_with_targets;
  for (const auto& row : batch.rows) {
    const double w = WeightSum(row);
    out.global_targets += w;
    out.per_rank[row.rank] += w;
    out.per_microbatch[{row.rank, row.micro_step}] += w;
    out.all_positions += row.length();
    out.unshifted_labels += UnshiftedLabelCount(row, batch.policy);
    for (std::size_t i = 0; i < row.predictions.size(); ++i)
      if (row.predictions[i].weight > 0) docs_with_targets.insert(row.slots[i].doc);
  }
  out.sequences = static_cast<std::int64_t>(docs_with_targets.size());
  return out;
}

StepObjective Objective(const OracleBatch& batch, const TargetLosses& losses, Denominator formula,
                        CountBasis basis, StepShape shape) {
  shape = Resolve(batch, shape);
  StepObjective out;
  out.formula = Name(formula);
  const Policy& policy = batch.policy;

  double total_weight = 0;
  for (const auto& row : batch.rows) {
    total_weight += WeightSum(row);
    out.loss_sum += LossSum(batch, row, losses);
  }
  out.has_targets = total_weight > 0;
  if (!out.has_targets) return out;  // zero valid targets: reported, never divided

  switch (formula) {
    case Denominator::kGlobalTargets: {
      // L = Σ w ℓ / N, N counted on the producer's basis over the whole step.
      double n = 0;
      for (const auto& row : batch.rows) n += Count(row, policy, basis);
      out.value = n > 0 ? out.loss_sum / n : 0.0;  // n ≥ Σw > 0 on either basis; guarded all the same
      break;
    }
    case Denominator::kRankMean: {
      // L = (1/R) Σ_r S_r / max(1, N_r)
      std::map<std::int64_t, std::pair<double, double>> per_rank;  // rank -> (S, N)
      for (const auto& row : batch.rows) {
        per_rank[row.rank].first += LossSum(batch, row, losses);
        per_rank[row.rank].second += Count(row, policy, basis);
      }
      double sum = 0;
      for (const auto& [rank, sn] : per_rank) sum += sn.first / std::max(1.0, sn.second);
      out.value = sum / static_cast<double>(shape.dp_world_size);
      break;
    }
    case Denominator::kMicrobatchMean: {
      // L = (1/(R·M)) Σ_{r,m} S_rm / max(1, N_rm)
      std::map<MicrobatchKey, std::pair<double, double>> per_mb;
      for (const auto& row : batch.rows) {
        auto& sn = per_mb[{row.rank, row.micro_step}];
        sn.first += LossSum(batch, row, losses);
        sn.second += Count(row, policy, basis);
      }
      double sum = 0;
      for (const auto& [key, sn] : per_mb) sum += sn.first / std::max(1.0, sn.second);
      out.value = sum / static_cast<double>(shape.dp_world_size * shape.grad_accum_steps);
      break;
    }
    case Denominator::kSequenceMean: {
      // L = mean over documents s with Σ_{p∈s} w > 0 of (Σ_{p∈s} w ℓ / Σ_{p∈s} w); p ∈ s when its input is in s.
      std::map<std::int64_t, std::pair<double, double>> per_doc;
      for (const auto& row : batch.rows) {
        for (std::size_t i = 0; i < row.predictions.size(); ++i) {
          const Prediction& p = row.predictions[i];
          if (p.weight == 0) continue;
          auto& sn = per_doc[row.slots[i].doc];
          sn.first += p.weight * losses[static_cast<std::size_t>(p.target_doc)][static_cast<std::size_t>(p.target_offset)];
          sn.second += p.weight;
        }
      }
      double sum = 0;
      for (const auto& [doc, sn] : per_doc) sum += sn.first / sn.second;
      out.value = sum / static_cast<double>(per_doc.size());
      break;
    }
    case Denominator::kAllPositions: {
      // L = Σ w ℓ / (number of slots of all rows)
      std::int64_t slots = 0;
      for (const auto& row : batch.rows) slots += row.length();
      out.value = out.loss_sum / static_cast<double>(slots);
      break;
    }
  }
  return out;
}

std::vector<std::vector<double>> ObjectiveWeights(const OracleBatch& batch, Denominator formula, CountBasis basis,
                                                  StepShape shape) {
  shape = Resolve(batch, shape);
  const Policy& policy = batch.policy;
  std::vector<std::vector<double>> out;
  double total_weight = 0;
  for (const auto& row : batch.rows) {
    out.emplace_back(row.predictions.size(), 0.0);
    total_weight += WeightSum(row);
  }
  if (total_weight <= 0) return out;  // no objective: nothing has a weight in it

  // The divisor each row's weighted predictions share (the formulas of Objective, term by term).
  std::vector<double> divisor(batch.rows.size(), 1.0);
  switch (formula) {
    case Denominator::kGlobalTargets: {
      double n = 0;
      for (const auto& row : batch.rows) n += Count(row, policy, basis);
      std::fill(divisor.begin(), divisor.end(), n);
      break;
    }
    case Denominator::kRankMean: {
      std::map<std::int64_t, double> per_rank;
      for (const auto& row : batch.rows) per_rank[row.rank] += Count(row, policy, basis);
      for (std::size_t r = 0; r < batch.rows.size(); ++r)
        divisor[r] = static_cast<double>(shape.dp_world_size) * std::max(1.0, per_rank[batch.rows[r].rank]);
      break;
    }
    case Denominator::kMicrobatchMean: {
      std::map<MicrobatchKey, double> per_mb;
      for (const auto& row : batch.rows) per_mb[{row.rank, row.micro_step}] += Count(row, policy, basis);
      for (std::size_t r = 0; r < batch.rows.size(); ++r) {
        const auto& row = batch.rows[r];
        divisor[r] = static_cast<double>(shape.dp_world_size * shape.grad_accum_steps) *
                     std::max(1.0, per_mb[{row.rank, row.micro_step}]);
      }
      break;
    }
    case Denominator::kSequenceMean: {
      // Per document (by the input token's): its weight sum times the number of documents with a target.
      std::map<std::int64_t, double> per_doc;
      for (const auto& row : batch.rows)
        for (std::size_t i = 0; i < row.predictions.size(); ++i)
          if (row.predictions[i].weight != 0) per_doc[row.slots[i].doc] += row.predictions[i].weight;
      const auto docs = static_cast<double>(per_doc.size());
      for (std::size_t r = 0; r < batch.rows.size(); ++r) {
        const auto& row = batch.rows[r];
        for (std::size_t i = 0; i < row.predictions.size(); ++i)
          if (row.predictions[i].weight != 0)
            out[r][i] = row.predictions[i].weight / (per_doc[row.slots[i].doc] * docs);
      }
      return out;
    }
    case Denominator::kAllPositions: {
      std::int64_t slots = 0;
      for (const auto& row : batch.rows) slots += row.length();
      std::fill(divisor.begin(), divisor.end(), static_cast<double>(slots));
      break;
    }
  }
  for (std::size_t r = 0; r < batch.rows.size(); ++r) {
    const auto& row = batch.rows[r];
    for (std::size_t i = 0; i < row.predictions.size(); ++i)
      if (row.predictions[i].weight != 0 && divisor[r] > 0) out[r][i] = row.predictions[i].weight / divisor[r];
  }
  return out;
}

double WeightSum(const OracleRow& row) {
  double sum = 0;
  for (const auto& p : row.predictions) sum += p.weight;
  return sum;
}

// Number of labels != ignore_index in one row, counted without the shift (HF Trainer before PR #46204).
std::int64_t UnshiftedLabelCount(const OracleRow& row, const Policy& policy) {
  std::int64_t count = 0;
  for (Token label : row.labels) count += label != policy.ignore_index ? 1 : 0;
  return count;
}

double DenominatorCount(const Policy& policy, double targets, double unshifted_labels, double positions) {
  if (policy.denominator == Denominator::kAllPositions) return positions;
  return policy.count_basis == CountBasis::kUnshiftedLabels ? unshifted_labels : targets;
}

double RowDenominatorCount(const OracleRow& row, const Policy& policy) {
  return DenominatorCount(policy, WeightSum(row), static_cast<double>(UnshiftedLabelCount(row, policy)),
                          static_cast<double>(row.length()));
}

const char* DenominatorCountName(const Policy& policy) {
  if (policy.denominator == Denominator::kAllPositions) return "positions";
  return policy.count_basis == CountBasis::kUnshiftedLabels ? "unshifted_labels" : "targets";
}

}  // namespace packoracle
