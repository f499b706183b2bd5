// The invariants of DESIGN §4, each with a stable name, and the check of one case against all of them.
//
// Every failure names one invariant. Each is stated once, in properties/src/invariants.cc (Statement, with a
// common way to break it: CommonBreak, BundledBreak); `packoracle invariants` prints them, and the README's list
// is generated from it. How each is checked: properties/src/check.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "packoracle/oracle/batch.h"
#include "packoracle/oracle/denominator.h"
#include "packoracle/oracle/layout.h"
#include "packoracle/properties/candidate.h"

namespace packoracle {

// The invariants, one X(enumerator, TestName) each, in the enum's order (a new one goes last, so that the
// values of the others stay as they were): the enum below and the typed suite of packoracle/gtest.h (one test
// per invariant) are generated from this list, and kEntries (invariants.cc, their names and statements) is
// held to its length, so that none of them can leave an invariant out.
#define PACKORACLE_INVARIANTS(X)                                                                               \
  X(kShape, Shape)                                                                                              \
  X(kCoverage, Coverage)                                                                                        \
  X(kSegments, Segments)                                                                                        \
  X(kPositions, Positions)                                                                                      \
  X(kTargets, Targets)                                                                                          \
  X(kAttention, Attention)                                                                                      \
  X(kDenominator, Denominator)                                                                                  \
  X(kLoss, Loss)                                                                                                \
  X(kPackingInvariance, PackingInvariance)                                                                      \
  X(kDeterminism, Determinism)                                                                                  \
  X(kEfficiency, Efficiency)                                                                                    \
  X(kGradient, Gradient)

#define PACKORACLE_INVARIANT_ENUMERATOR(enumerator, test) enumerator,
enum class Invariant { PACKORACLE_INVARIANTS(PACKORACLE_INVARIANT_ENUMERATOR) };
#undef PACKORACLE_INVARIANT_ENUMERATOR

#define PACKORACLE_INVARIANT_ONE(enumerator, test) +1
inline constexpr std::size_t kInvariantCount = 0 PACKORACLE_INVARIANTS(PACKORACLE_INVARIANT_ONE);
#undef PACKORACLE_INVARIANT_ONE

const char* Name(Invariant invariant);
const char* Statement(Invariant invariant);     // DESIGN §4's rule, in one sentence
const char* CommonBreak(Invariant invariant);   // "a common way to break this is ..." (the rest of the sentence)
const char* BundledBreak(Invariant invariant);  // the bundled candidate that breaks it so ("TG-02"), or ""
std::optional<Invariant> ParseInvariant(const std::string& name);
// The invariants this kit checks today, in report order.
const std::vector<Invariant>& CheckedInvariants();

struct Violation {
  Invariant invariant = Invariant::kShape;
  std::string sentence;        // one sentence: what is wrong and where
  std::int64_t row = -1;       // index into the step's rows (micro-batches flattened in order), -1: none
  std::int64_t slot = -1;      // -1: the whole row or step
  std::string expected;        // short renderings, may be empty
  std::string actual;
  std::vector<std::pair<std::int64_t, std::int64_t>> cells;  // attention (query, key) cells that disagree
};

struct CheckOptions {
  bool determinism = true;  // pack every case twice, once after an unrelated case
  // Auditing a dump (packoracle verify): a step holds only part of the documents' lives, so pieces must be
  // contiguous and in order but documents need not be complete within the case (the caller checks across
  // steps); and the per-target losses are unknown, so the producer's loss sums are taken as given and only
  // their normalisation is checked.
  bool partial_coverage = false;
  // The step holds all of the packer's input (a generated case, a dump of the whole run): a refusal the policy
  // demands of it (a document longer than the row, a stream shorter than a window) is checked. False for a
  // window of a run (the guard's batches, whose documents may go on before and after them): not checked.
  bool whole_input = true;
  bool losses_known = true;
  // Auditing one rank's dump of a data-parallel step (packoracle verify on some ranks' files): a global-scope
  // denominator and the step objective span ranks not seen here, so they are not compared (packoracle merge
  // checks them across the ranks' summaries); everything rank-local still is.
  bool partial_ranks = false;
  // Who computed the micro-batches' producer totals, as the reports name them: a packer candidate's own, or
  // in an audited step (check_step, packoracle verify) the training loop's loss code, a loss reducer's.
  std::string totals_owner = "the packer";
  bool efficiency = false;  // report utilization below `min_utilization` as a violation
  double min_utilization = 0.0;
  bool packing_invariance = true;  // run the tiny decoder (15–40% of a case's time, bench/properties_bench)
  // The decoder's attention is quadratic in the row (and its dense masks L² bytes): it runs on cases whose
  // rows are at most this long; longer cases are checked on every structural invariant, where the
  // size-dependent bugs show (a wrapped segment id, a clamped position, a cut document).
  std::int64_t decoder_max_row_length = 256;
  // A schedule (DESIGN §4 `loss`, oracle/denominator.h OptimizerStepOf): the loss reducer is handed the packed
  // step as one generation batch that feeds this many optimizer steps in turn (GRPO/PPO steps_per_generation >
  // gradient accumulation steps), each of ⌈M/K⌉ micro-steps; its totals must give each optimizer step the
  // declared objective over that step alone. 1: the step is one optimizer step (every reducer before schedules).
  std::int64_t optimizer_steps = 1;
  // A selection declared as part of the objective (DESIGN §4 `loss`, oracle/selection.h): the loss reducer is
  // handed the kit's score of every target (ReduceRequest::slot_scores, KitScores) and the rule, and its totals
  // must give each optimizer step the declared objective over the targets the rule selects within that
  // optimizer step, whatever the split. Inactive by default (top_fraction 1).
  SelectionRule selection;
};

// How packoracle verify checks one step of a dump, on the fast path and through CheckCase alike (and how the
// benchmarks time it): no determinism (a dump is replayed, not packed), partial coverage, unknown losses, and
// no tiny decoder, whose O(L²) attention a row makes audits ~25× slower (verify --decoder turns it back on).
CheckOptions DumpStepOptions();

// How much packing changed the tiny decoder's losses: over the weighted targets of a case (or a run),
// |packed − alone| / alone. Zero for an isolating producer; under row_causal, the measured contamination.
struct Contamination {
  std::int64_t targets = 0;
  double max_relative = 0;
  double mean_relative = 0;
};
// Folds `more` into `total` (max of the maxima, mean weighted by the targets).
void Accumulate(Contamination& total, const Contamination& more);

// What an attention consumer computed against the least the declared rule needs (ComputedWork, candidate.h;
// DESIGN §4 efficiency): (query, key) pairs, summed over micro-batches (a case's, a run's).
struct ConsumerWork {
  std::int64_t computed = 0;  // Σ |computed ∪ mask| over rows, plus the pairs of the rows built beyond them
  std::int64_t required = 0;  // Σ RequiredAttentionPairs over the rows (oracle/batch.h)
  // The consumer's utilization: needed pairs / computed pairs (1 when it computed nothing).
  double utilization() const {
    return computed > 0 ? static_cast<double>(required) / static_cast<double>(computed) : 1.0;
  }
  void Add(const ConsumerWork& more) {
    computed += more.computed;
    required += more.required;
  }
};

// Everything one case produced, for the verdict and for the report.
// Violations one case keeps in full: past these, each is counted under its invariant and dropped (a row of
// 10^7 slots wrong slot by slot reports, rather than exhausting memory; issue 27).
inline constexpr std::size_t kMaxViolationsKept = 1000;

struct CaseResult {
  std::vector<Violation> violations;      // sorted by invariant; the first is the headline; kMaxViolationsKept at most
  std::map<Invariant, std::int64_t> not_kept;  // violations found past kMaxViolationsKept, counted by invariant
  std::set<Invariant> checked;            // invariants that applied and were checked
  std::set<Invariant> not_applicable;     // needing a role the candidate lacks, or nothing to check
  std::optional<PackResult> packed;       // the packer's answer
  std::optional<OracleBatch> oracle;      // the oracle on the candidate's layout (or the reference layout)
  std::optional<ReduceResult> reduced;    // the reducer's answer
  double utilization = 0;                 // non-pad slots / slots
  std::optional<double> declared_objective;  // the step objective the producer's totals give
  std::optional<double> token_mean;          // Σwℓ/Σw over the step (none without targets)
  // A loss reducer's declared objective under each split of the step it was checked on (splits.h), the
  // packed split first: under microbatch_mean or rank_mean these differ from token_mean, and the gap is the
  // price of the declared formula.
  struct SplitObjective {
    std::string split;
    double declared = 0;
  };
  std::vector<SplitObjective> split_objectives;
  std::optional<Contamination> contamination;  // packing_invariance's measurement (when it ran)
  // What the attention consumer computed, where it said (ConsumerAnswer::work): efficiency of its compute.
  std::optional<ConsumerWork> consumer_work;
  // Checks the producer's totals did not allow, one sentence each (ProducerNotes,
  // packoracle/properties/producer_totals.h): a denominator alone checks the count, not the loss.
  std::vector<std::string> notes;
  bool passed() const { return violations.empty(); }
  // Every violation found: those kept and those only counted.
  std::size_t found() const {
    std::size_t n = violations.size();
    for (const auto& [invariant, count] : not_kept) n += static_cast<std::size_t>(count);
    return n;
  }
};

// Checks one case against every invariant the candidate's roles allow. Never throws for a candidate's
// misbehaviour (a throw from the candidate is reported as that case's failure); throws InputError when the
// request itself is invalid (a bug in the caller, not the candidate).
CaseResult CheckCase(Candidate& candidate, const PackRequest& request, const CheckOptions& options = {});

// The oracle's rows for a layout as a correct producer emits them (every encoding the policy's systems use),
// with producer totals under the policy's denominator: the reference packer's output.
std::vector<CandidateMicrobatch> ReferenceMicrobatches(const OracleBatch& batch, const PackRequest& request);

// A correct producer's answer for a given layout: micro-batches assigned, every row encoded by the oracle;
// a refusal (with the oracle's message) when the layout or policy is refused. Buggy candidates start here.
PackResult PackWithLayout(const PackRequest& request, Layout layout);

// The reference packer of the kit: DefaultLayout, Materialize, ReferenceMicrobatches. Passes every invariant
// for every policy.
Candidate ReferenceCandidate();

// The layout a packer's doc_spans describe (micro-batches flattened in order); throws InputError naming the
// micro-batch, row and span when a span names an unknown document.
Layout LayoutFromSpans(const std::vector<CandidateMicrobatch>& microbatches, const std::vector<EffectiveDocument>& docs,
                       std::int64_t row_length);

// Per-target losses of a request as the oracle indexes them (by effective document).
TargetLosses LossesOf(const PackRequest& request, const std::vector<EffectiveDocument>& docs);
// The scores the kit supplies for a selection (CheckOptions::selection), indexed as LossesOf's: scores[d][k] for
// token k of effective document d. Every entry of the step gets its own score, a rank r/T among the T entries
// of all documents (so no two are equal and no tie is ever broken), the order drawn from the documents' tokens
// and target losses by a hash: a function of the case alone, the same for every split of its step.
TargetScores KitScores(const PackRequest& request, const std::vector<EffectiveDocument>& docs);

}  // namespace packoracle
