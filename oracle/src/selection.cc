#include "packoracle/oracle/selection.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>

#include "packoracle/oracle/denominator.h"
#include "packoracle/oracle/error.h"

namespace packoracle {
namespace {

// One weighted prediction of the step, where it sits and how it ranks.
struct Candidate {
  double score = 0;
  std::int64_t target_doc = 0;
  std::int64_t target_offset = 0;
  std::size_t row = 0;
  std::size_t slot = 0;
};

// The selection order: the higher score first; equal scores by the smaller target document, then offset.
bool SelectedBefore(const Candidate& a, const Candidate& b) {
  return std::make_tuple(-a.score, a.target_doc, a.target_offset) <
         std::make_tuple(-b.score, b.target_doc, b.target_offset);
}

double ScoreOf(const TargetScores& scores, const Prediction& p, std::size_t row, std::size_t slot) {
  const auto d = static_cast<std::size_t>(p.target_doc);
  const auto k = static_cast<std::size_t>(p.target_offset);
  if (p.target_doc < 0 || d >= scores.size() || p.target_offset < 0 || k >= scores[d].size()) {
    throw InputError("row " + std::to_string(row) + " slot " + std::to_string(slot) + ": its target, token " +
                     std::to_string(p.target_offset) + " of document " + std::to_string(p.target_doc) +
                     ", has no score (a selection needs one per weighted target)");
  }
  return scores[d][k];
}

}  // namespace

OracleBatch SelectedTargets(const OracleBatch& batch, const TargetScores& scores, const SelectionRule& rule,
                            std::int64_t accumulation) {
  if (!(rule.top_fraction > 0.0 && rule.top_fraction <= 1.0)) {
    throw InputError("selection top_fraction must be in (0, 1], got " + std::to_string(rule.top_fraction));
  }
  if (accumulation < 1) throw InputError("selection accumulation must be at least 1, got " + std::to_string(accumulation));
  if (!rule.active()) return batch;
  // Every weighted prediction, by the optimizer step it feeds (all ranks of the step together).
  std::map<std::int64_t, std::vector<Candidate>> by_step;
  for (std::size_t r = 0; r < batch.rows.size(); ++r) {
    const OracleRow& row = batch.rows[r];
    for (std::size_t i = 0; i < row.predictions.size(); ++i) {
      const Prediction& p = row.predictions[i];
      if (!(p.weight > 0)) continue;
      by_step[OptimizerStepOf(row.micro_step, accumulation)].push_back(
          {ScoreOf(scores, p, r, i), p.target_doc, p.target_offset, r, i});
    }
  }
  OracleBatch out = batch;
  for (auto& [step, candidates] : by_step) {
    std::sort(candidates.begin(), candidates.end(), SelectedBefore);
    const auto n = static_cast<double>(candidates.size());
    const auto keep = static_cast<std::size_t>(std::ceil(rule.top_fraction * n));  // k_o = ⌈q · n_o⌉
    for (std::size_t c = keep; c < candidates.size(); ++c) {
      out.rows[candidates[c].row].predictions[candidates[c].slot].weight = 0.0;  // not selected: w'_p = 0
    }
  }
  return out;
}

}  // namespace packoracle
