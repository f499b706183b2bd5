#include "packoracle/properties/invariants.h"

#include <array>

namespace packoracle {
namespace {

// Each invariant stated once (DESIGN §4's rule, as the reports, `packoracle invariants`, the README and --help
// give it), then, in the manner of absl's hash_testing.h, a common way to break it and the bundled candidate
// that does (fixtures/bugs; fixtures/test/bugzoo_test.cc checks that each named one exists and is caught by it).
struct Entry {
  Invariant invariant;
  const char* name;
  const char* statement;
  const char* common_break;  // "a common way to break this is ..." (the rest of the sentence)
  const char* bundled;       // the bundled candidate that breaks it so; "" where none is bundled
};

constexpr std::array<Entry, kInvariantCount> kEntries{{
    {Invariant::kShape, "shape",
     "every per-token array of a row has the row's length; rows are at most L long (exactly L when padded to the "
     "row length); cu_seqlens start at 0, never decrease, end at the row length",
     "holding cu_seqlens in a narrow integer, which wraps once a flattened micro-batch passes its range", "SZ-04"},
    {Invariant::kCoverage, "coverage",
     "every document token appears exactly once, in order, contiguous (or as the declared overflow policy says); "
     "nothing appears that is neither a document token, a declared delimiter nor padding; a refusal happens "
     "exactly when the policy demands one",
     "truncating a document that does not fit and dropping the rest of it (TRL's BFD packing)", "PK-01"},
    {Invariant::kSegments, "segments",
     "the boundaries implied by every encoding present (cu_seqlens, seq_lens, doc_ids, position resets, EOD/BOS "
     "tokens, a 2-D mask) agree with each other and with the real document layout",
     "computing cu_seqlens per row and feeding them to a flattened micro-batch of several rows (axolotl's "
     "multipack)", "MK-01"},
    {Invariant::kPositions, "positions", "position ids follow the declared rule",
     "one arange along the whole packed row instead of one per document (LlamaFactory's neat packing)", "PO-01"},
    {Invariant::kTargets, "targets",
     "every weighted target is the next token of the same document; boundary and row-end targets follow the "
     "policy; padding is never a target; supervised tokens are targets and unsupervised ones are not",
     "shifting the labels of the whole packed row instead of each document's (torchtune before PR #2613)",
     "TG-02"},
    {Invariant::kAttention, "attention",
     "the context sets equal the declared rule: under doc_causal no position sees another document; causal "
     "everywhere",
     "a 2-D attention_mask beside packed position_ids, which turns the model's packed-sequence detection off "
     "(transformers)", "MK-04"},
    {Invariant::kDenominator, "denominator",
     "the reported denominator equals the sum of the weights under the declared scope, counted on the same "
     "targets as the numerator; zero valid targets is reported, never divided by",
     "a rank's own count of targets multiplied by the world size, in place of the count over every rank",
     "SY-07"},
    {Invariant::kLoss, "loss",
     "given per-target losses supplied by the kit, the reported loss equals the declared objective "
     "(Σwℓ/Σw over the step for global_targets), whatever the split into rows, micro-batches and ranks",
     "averaging the micro-batches' means under gradient accumulation (transformers before 4.46)", "AC-01"},
    {Invariant::kPackingInvariance, "packing_invariance",
     "with the tiny reference decoder run on each row as a backend is fed it (the candidate's ids, its positions "
     "or the slot index, its consumer's mask or the mask its declared encoding gives), each document's losses in "
     "the packed batch equal its losses alone in a row of its own (strict under doc_causal + doc_reset; elsewhere "
     "the change is measured as contamination); and a value consumer's per-position outputs for each document "
     "piece packed equal its outputs alone in a row of its own, within the consumer's declared tolerance",
     "segment ids clamped to [0, 1] and handed to the model as its document ids (open-instruct)", "PI-03"},
    {Invariant::kDeterminism, "determinism", "the same input gives the same output, whatever was packed before",
     "a packer that keeps state between calls, such as a buffer carried over from the last batch", ""},
    {Invariant::kEfficiency, "efficiency",
     "utilization = non-pad slots / all slots (reported); under the policy's promise efficiency: "
     "no_mergeable_rows, no two rows of a rank could be one row: used(r) + used(s) > L for every two rows "
     "(used = non-pad slots, delimiters included; L rounded down to a multiple of k under pad_to multiple_of:k); "
     "a consumer that says what its kernel computes is measured against the least the declared rule needs "
     "(Σ over non-pad queries of |C(i)|), and under the policy's consumer_overhead: p computes at most (1 + p/100) "
     "times that in each micro-batch",
     "opening a new row for a document that an earlier row had room for (next fit, or a first fit that misses "
     "a row, as TRL #3887's segment tree sized to a non-power of two)", ""},
    {Invariant::kGradient, "gradient",
     "given per-target losses supplied by the kit as leaf tensors, the gradient of what a reducer backpropagates "
     "with respect to each per-target loss equals its weight over the step's declared count, m / Σm; and a value "
     "consumer's parameter gradient of the kit's probe loss over a packed micro-batch equals the sum over its "
     "document pieces alone",
     "a fused loss that ignores grad_output, or logging one loss and backpropagating another (Liger-Kernel #968, "
     "torchtitan PR #4194)", ""},
}};

// Each entry at its enumerator's place (Name indexes by the enum's value): a missing or misplaced one fails
// the build.
constexpr bool EntriesInEnumOrder() {
  for (std::size_t k = 0; k < kEntries.size(); ++k)
    if (kEntries[k].invariant != static_cast<Invariant>(k) || kEntries[k].name == nullptr) return false;
  return true;
}
static_assert(EntriesInEnumOrder(), "kEntries: one entry per PACKORACLE_INVARIANTS enumerator, in its order");

}  // namespace

const char* Name(Invariant invariant) { return kEntries[static_cast<std::size_t>(invariant)].name; }
const char* Statement(Invariant invariant) { return kEntries[static_cast<std::size_t>(invariant)].statement; }
const char* CommonBreak(Invariant invariant) { return kEntries[static_cast<std::size_t>(invariant)].common_break; }
const char* BundledBreak(Invariant invariant) { return kEntries[static_cast<std::size_t>(invariant)].bundled; }


std::optional<Invariant> ParseInvariant(const std::string& name) {
  for (const auto& e : kEntries)
    if (name == e.name) return e.invariant;
  return std::nullopt;
}

const std::vector<Invariant>& CheckedInvariants() {
  static const std::vector<Invariant> all = {Invariant::kShape,       Invariant::kCoverage, Invariant::kSegments,
                                             Invariant::kPositions,   Invariant::kTargets,  Invariant::kAttention,
                                             Invariant::kDenominator, Invariant::kLoss,     Invariant::kGradient,
                                             Invariant::kPackingInvariance,
                                             Invariant::kDeterminism};
  return all;
}

void Accumulate(Contamination& total, const Contamination& more) {
  if (more.targets <= 0) return;
  const auto n = static_cast<double>(total.targets + more.targets);
  total.mean_relative = (total.mean_relative * static_cast<double>(total.targets) +
                         more.mean_relative * static_cast<double>(more.targets)) / n;
  total.targets += more.targets;
  total.max_relative = total.max_relative > more.max_relative ? total.max_relative : more.max_relative;
}

}  // namespace packoracle
