// The invariants of DESIGN §4, each with a stable name, and the check of one case against all of them.
//
// Every failure names one invariant:
//   shape        every per-token array of a row has the row's length; rows are at most L long (exactly L when
//                padded to the row length); cu_seqlens start at 0, never decrease, end at the row length
//   coverage     every document token appears exactly once, in order (or as the overflow policy says); slots
//                outside the spans are padding; a refusal happens exactly when the policy demands one
//   segments     the boundaries every encoding implies (cu_seqlens, seq_lens, doc_ids, positions, EOD/BOS
//                tokens, a 2-D mask) agree with the spans
//   positions    position ids follow the declared rule
//   targets      every weighted target is the next token of the same document (or a declared boundary or
//                row-end target); padding and unsupervised tokens are never targets; supervised ones always are
//   attention    the context sets equal the declared rule (from the encodings, or the consumer's dense mask)
//   denominator  the reported denominator equals the count of its declared scope, on the same targets
//   loss         the reported losses give the declared objective: Σwℓ/Σw over the step for global_targets
//   packing_invariance
//                the tiny reference decoder (packoracle/oracle/decoder.h), fed each row as a backend is fed it
//                (the candidate's input_ids; its position_ids, or the slot index when it has none; its consumer's
//                mask, or the mask its declared encoding gives, packoracle/properties/backend_attention.h),
//                gives every weighted target the loss of the same prediction in its document piece alone in a row
//                of its own (plain causal, positions from the policy's base; a piece continued from an earlier
//                row gets the positions split_positions gives it and only its own tokens as context). Boundary and
//                row-end targets are compared like any other: their context is their own document. Strict
//                (relative 1e-12) under doc_causal + doc_reset; elsewhere the change is measured (contamination)
//                and never fails
//   gradient     given per-target losses as leaf tensors, the gradient of what a reducer backpropagates with
//                respect to each per-target loss equals the weight the declared objective gives it (m / Σm
//                over the step under global_targets: ObjectiveWeights, packoracle/oracle/denominator.h). Checked
//                where the reducer hands back gradients (ProducerTotals::gradient), not applicable elsewhere
//   determinism  the same input gives the same output, whatever was packed before
//   efficiency   (reported) utilization; a violation only when asked for
// A common way to break `targets` is shifting the labels of the whole packed row instead of each document
// (torchtune before PR #2613); `loss`, averaging micro-batch means under a global token mean (HF before 4.46).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "packoracle/oracle/batch.h"
#include "packoracle/oracle/denominator.h"
#include "packoracle/oracle/layout.h"
#include "packoracle/properties/candidate.h"

namespace packoracle {

enum class Invariant {
  kShape,
  kCoverage,
  kSegments,
  kPositions,
  kTargets,
  kAttention,
  kDenominator,
  kLoss,
  kPackingInvariance,
  kDeterminism,
  kEfficiency,
  kGradient,  // last, so that the values of the others stay as they were
};

const char* Name(Invariant invariant);
const char* Statement(Invariant invariant);  // DESIGN §4's sentence
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

// Everything one case produced, for the verdict and for the report.
struct CaseResult {
  std::vector<Violation> violations;      // sorted by invariant; the first is the headline
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
  // Checks the producer's totals did not allow, one sentence each (ProducerNotes,
  // packoracle/properties/producer_totals.h): a denominator alone checks the count, not the loss.
  std::vector<std::string> notes;
  bool passed() const { return violations.empty(); }
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

}  // namespace packoracle
