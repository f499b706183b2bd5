// Data-dependent selections inside the objective (DESIGN §4 `loss`; issue 43): which targets an optimizer step
// keeps when the declared objective selects them by a score computed from the data.
//
// The rule (RL recipes keeping the top-20% entropy tokens of a step): of optimizer step o's predictions with a
// weight (w_p > 0, all data-parallel ranks, all micro-batches the step accumulates; the whole step without a
// schedule), keep the k_o = ⌈q · n_o⌉ with the highest scores, n_o their number and q the declared fraction
// (k_o computed in double precision as written: std::ceil(q * n_o)). Equal scores are ordered by the smaller
// target document, then the smaller target offset, so the rule is total. Every formula of denominator.h then
// reads the selected weights
//   w'_p = w_p · [p ∈ S_o]        S_o = the k_o predictions of o first in (score descending, target document,
//                                       target offset)
// e.g. under global_targets  L_o = Σ_{p∈o} w'_p ℓ_p / Σ_{p∈o} w'_p: the denominator counts the selected targets
// only (all_positions and count_basis unshifted_labels count slots and labels, which a selection leaves as they
// are: only their numerators change). S_o depends on the optimizer step's targets and their scores alone,
// never on how its rows are split into micro-batches or ranks: a selection computed per micro-batch (the known
// bug, ⌈q·n_m⌉ of each micro-batch m) makes the objective depend on the split.
#pragma once

#include <cstdint>
#include <vector>

#include "packoracle/oracle/batch.h"

namespace packoracle {

// A declared selection: the top fraction q of an optimizer step's weighted targets by score. q = 1 keeps every
// target (no selection).
struct SelectionRule {
  double top_fraction = 1.0;  // q ∈ (0, 1]
  bool active() const { return top_fraction < 1.0; }
};

// Per-target scores, indexed as TargetLosses: scores[d][k] is the score of predicting token k of effective
// document d.
using TargetScores = std::vector<std::vector<double>>;

// The step's batch with every prediction outside its optimizer step's selection given weight 0 (the other
// weights kept): the selected weights w'_p above. Rows feed optimizer step OptimizerStepOf(row.micro_step,
// accumulation) (accumulation ≥ 1; a value past every micro_step makes the step one optimizer step), all ranks
// together. An inactive rule returns the batch unchanged. Throws InputError for q outside (0, 1], an
// accumulation below 1, or a weighted prediction without a score in `scores`.
OracleBatch SelectedTargets(const OracleBatch& batch, const TargetScores& scores, const SelectionRule& rule,
                            std::int64_t accumulation);

}  // namespace packoracle
