// Producer totals as they come (DESIGN §5 `producer`): what each subset of loss_sum, denominator and loss
// allows the kit to check, shared by CheckCase (properties/src/check.cc) and the fast verifier
// (fastcheck/src/step_totals.cc) so that both say the same thing about the same totals.
//
// A producer gives any non-empty subset of the three, with denominator_scope exactly when it gives a
// denominator. Each given field is checked for what it says:
//   denominator  against the count of its scope (microbatch, step = the rank's micro-batches, global)
//   loss_sum     against Σwℓ of the micro-batch's valid targets (when the per-target losses are known: a
//                dump's loss sums are taken as given)
//   loss         against loss_sum / denominator, where a field is missing the kit's own Σwℓ or the count of
//                the scope the policy's denominator implies (ImpliedScope)
// The step objective needs every micro-batch's loss (given, or loss_sum / denominator); without per-target
// losses the objective it is compared with, and the global token mean, need every micro-batch's loss sum
// (given, or loss × denominator). ProducerNotes says which of these the given fields did not allow.
//
// A common way to get this wrong is a Trainer that logs num_items_in_batch alone: its count is checked, and
// the report says that the loss was not (a silent pass on a loss nobody checked would be a false assurance).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "packoracle/oracle/policy.h"
#include "packoracle/properties/candidate.h"
#include "packoracle/properties/invariants.h"

namespace packoracle {

// The count a denominator of `scope` is compared with, of the micro-batch's own count, its rank's and the
// step's: the one place a scope picks its count (CheckCase, the fast verifier, the weighting rule).
double CountOfScope(DenominatorScope scope, double microbatch, double rank, double global);

// How a step's micro-batch losses, each divided by the count of `scope`, combine into the step objective
// (what the trainer's optimizer step sees): added up under global; averaged over the R ranks under step (each
// rank's sum is its own mean, DDP averages them); over R × M micro-batches under microbatch. Under the policy's
// sequence_mean every loss is its own mean and they are added up whatever the scope. `factor` multiplies the
// sum of the losses; `words` says it for a report ("averaged over 2 ranks").
struct ScopeCombination {
  double factor = 1;
  std::string words = "added up";
};
ScopeCombination CombineByScope(Denominator policy, DenominatorScope scope, double ranks, double microbatches);

// The scope a producer divides by when its policy's denominator is followed: global for global_targets and
// all_positions, step (the rank's micro-batches) for rank_mean, microbatch for microbatch_mean and
// sequence_mean (as the reference producer reports them). A loss given without a denominator is checked
// against the count of this scope.
DenominatorScope ImpliedScope(Denominator denominator);

// The scope the totals' loss was divided by: the one their denominator declares, else the policy's
// (ImpliedScope); none for a declared name that is not one of §5's.
std::optional<DenominatorScope> DividedScope(const ProducerTotals& totals, Denominator policy);

// What is wrong with the shape of one micro-batch's totals, or nullopt: ProducerTotalsProblem (candidate.h, the
// rule a dump's readers refuse as input errors) as one sentence, for a candidate (a loss reducer, an in-process
// packer) that returns them: its `denominator` violation.
std::optional<std::string> TotalsShapeProblem(const ProducerTotals& totals);

// The micro-batch loss the totals give: `loss`, or loss_sum / denominator (0 when the denominator is 0, as a
// clamped producer reports it); nullopt when the fields do not say it.
std::optional<double> GivenLoss(const ProducerTotals& totals);

// The micro-batch loss sum the totals give: `loss_sum`, or loss × denominator; nullopt when the fields do not
// say it.
std::optional<double> GivenLossSum(const ProducerTotals& totals);

// The checks the given fields of one step's totals (one per micro-batch) did not allow, one sentence each,
// in a fixed order and wording (a report lists each once for a whole audit). Empty when every check ran.
std::vector<std::string> ProducerNotes(const std::vector<const ProducerTotals*>& totals, const CheckOptions& options);

// One micro-batch's division, as the weighting rule below sees it.
struct MicrobatchDivision {
  std::int64_t rank = 0;
  std::size_t index = 0;  // the micro-batch's number where the caller reports it (its place in the step)
  double count = 0;       // its own count on the basis the policy's denominator counts (positions under all_positions)
  double denominator = 0; // what its loss sum was divided by
};

struct Weighting {
  std::vector<std::string> problems;  // one sentence per micro-batch weighted off the declared objective
  std::vector<std::string> notes;     // a uniform ratio other than 1: the declared objective up to a factor
};

// The weighting rule, the one owner of it for CheckCase, the fast verifier and the guard's check_step
// (DESIGN §11). CheckCase and the fast verifier apply it where the step objective is not compared (no
// per-target losses and no loss sums: a dump or a guard of denominators alone); where it is, the objective's
// `loss` verdict is the finer one. The rule: the objective a step optimizes is Σ_m c·sum_m / d_m (d_m what micro-batch m divided by, c the
// trainer's constant factor), and it is the declared one, Σ_m sum_m / e_m up to that factor, for every loss
// value exactly when d_m / e_m is the same for every micro-batch with a count, e_m being the count of the
// scope the policy's denominator implies (ImpliedScope: the step's over every rank under global_targets, the
// rank's under rank_mean, the micro-batch's own under microbatch_mean), whatever scope the producer declares.
// A ratio that differs between micro-batches changes the objective: a problem naming each micro-batch whose
// ratio is not 1 (a mean of micro-batch means under global_targets divides by 7 and 3 where both should be 10).
// One ratio for all other than 1 (every rank divided by its own count and the counts happened to be equal)
// changes the scale alone: a note. Micro-batches without a count add nothing whatever they divide by and are
// left out. `where` names the step in the sentences ("step 3"). Nothing under sequence_mean (a producer's
// denominator is then its own affair: no count is compared with it). Not for a global count over ranks not
// all seen (the caller leaves those out).
Weighting DenominatorWeighting(Denominator policy, const std::vector<MicrobatchDivision>& divisions,
                               const std::string& where);

}  // namespace packoracle
