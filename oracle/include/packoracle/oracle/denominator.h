// Denominators and the step objective (reference/conventions.md §4).
//
// Notation: V(r,m) the predictions of micro-batch m on data-parallel rank r, w_p a prediction's weight, ℓ_p
// its loss (nats), R the data-parallel world size, M the accumulation steps (micro-batches per rank).
//   global_targets   L = Σ_{r,m,p} w_p ℓ_p / Σ_{r,m,p} w_p                     (the lesson's objective)
//   rank_mean        L = (1/R) Σ_r [ Σ_{m,p} w_p ℓ_p / max(1, Σ_{m,p} w_p) ]
//   microbatch_mean  L = (1/(R·M)) Σ_{r,m} [ Σ_p w_p ℓ_p / max(1, Σ_p w_p) ]     (Megatron's max(1, n))
//   sequence_mean    L = mean over sequences s with Σ_{p∈s} w_p > 0 of Σ_{p∈s} w_p ℓ_p / Σ_{p∈s} w_p
//   all_positions    L = Σ w_p ℓ_p / (number of slots of all rows)               (llm.c: B·T·GA·R)
//   count_basis unshifted_labels: the count is the number of labels != ignore_index, taken without the shift.
// A step with no weighted prediction has no objective: that is reported, never divided.
// A schedule: a generation batch of K·A micro-steps per rank feeds K optimizer steps of A micro-steps each
// (steps_per_generation = K·A > A: GRPO/PPO mini-batches over one generation). Every formula above is stated per
// optimizer step o, over its micro-batches only, with M = A:
//   global_targets   L_o = Σ_{r, m∈o, p} w_p ℓ_p / Σ_{r, m∈o, p} w_p               (never Σ over the generation)
// Micro-step s feeds optimizer step s / A (OptimizerStepOf).
// A declared selection (the top fraction of an optimizer step's targets by a score the kit supplies) replaces
// every w_p above by the selected weight w'_p = w_p · [p selected within its optimizer step]: selection.h states
// which, SelectedTargets gives the batch every formula here then reads.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "packoracle/oracle/batch.h"

namespace packoracle {

// The optimizer step that micro-step `micro_step` feeds when a generation batch feeds optimizer steps of
// `accumulation` micro-steps each (A ≥ 1).
inline std::int64_t OptimizerStepOf(std::int64_t micro_step, std::int64_t accumulation) {
  return micro_step / accumulation;
}

// R and M of the step; 0 means "derive from the rows" (largest rank + 1, largest micro_step + 1).
struct StepShape {
  std::int64_t dp_world_size = 0;
  std::int64_t grad_accum_steps = 0;
};

using MicrobatchKey = std::pair<std::int64_t, std::int64_t>;  // (rank, micro_step)

struct StepDenominators {
  std::int64_t dp_world_size = 1;     // R
  std::int64_t grad_accum_steps = 1;  // M
  double global_targets = 0;          // Σ w over the step
  std::map<std::int64_t, double> per_rank;         // Σ w per rank (every rank 0..R-1 present)
  std::map<MicrobatchKey, double> per_microbatch;  // Σ w per (rank, micro_step) (all R·M present)
  std::int64_t all_positions = 0;     // slots of all rows
  std::int64_t unshifted_labels = 0;  // labels != ignore_index over all rows, without the shift
  std::int64_t sequences = 0;         // documents with a weighted prediction (by the input token's document)
};

// Computes every count above from the oracle's weights. Throws InputError when a row's rank or micro_step
// lies outside the given shape.
StepDenominators Denominators(const OracleBatch& batch, StepShape shape = {});

// What a producer's denominator is compared with, over some rows: the one statement of the rule (DESIGN §3
// `denominator` and `count_basis`), for CheckCase, the fast verifier, verify's summary and the guard:
//   all_positions                  every slot of the rows               (positions)
//   count_basis unshifted_labels   labels != ignore_index, no shift     (unshifted_labels)
//   otherwise                      the valid targets, Σ w               (targets)
// Linear in the rows, so it is given the three tallies of the same rows.
double DenominatorCount(const Policy& policy, double targets, double unshifted_labels, double positions);
// The name of what DenominatorCount counts under `policy`: "targets", "unshifted_labels" or "positions".
const char* DenominatorCountName(const Policy& policy);
// The tallies of one oracle row: Σ w over its predictions, and its labels != ignore_index without the shift.
double WeightSum(const OracleRow& row);
std::int64_t UnshiftedLabelCount(const OracleRow& row, const Policy& policy);
// DenominatorCount of one oracle row (a sum over rows gives theirs).
double RowDenominatorCount(const OracleRow& row, const Policy& policy);

// Per-target losses, as in the exec protocol: losses[d][k] is the loss of predicting token k of effective
// document d (entry 0 is used only where the policy makes a document's first token a target).
using TargetLosses = std::vector<std::vector<double>>;

struct StepObjective {
  bool has_targets = false;  // false: no weighted prediction in the step; value is then meaningless
  double value = 0;          // the objective L under the formula
  double loss_sum = 0;       // Σ w_p ℓ_p over the step
  std::string formula;       // e.g. "global_targets"
};

// The objective under `formula` and `basis` (the policy's are the usual choice). Throws InputError when a
// weighted prediction has no loss in `losses`.
StepObjective Objective(const OracleBatch& batch, const TargetLosses& losses, Denominator formula,
                        CountBasis basis = CountBasis::kTargets, StepShape shape = {});

// The weight the objective under `formula` gives each per-target loss: weights[row][slot] = ∂L/∂ℓ of the
// prediction at that slot (L is linear in the losses, so L = Σ weights·ℓ, the Objective above). Under
// global_targets it is m / Σm over the step; zero where the prediction has no weight, and everywhere when the
// step has no weighted prediction. The `gradient` invariant compares a reducer's backpropagated gradient with it.
std::vector<std::vector<double>> ObjectiveWeights(const OracleBatch& batch, Denominator formula,
                                                  CountBasis basis = CountBasis::kTargets, StepShape shape = {});

}  // namespace packoracle
