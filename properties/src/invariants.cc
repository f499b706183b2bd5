#include "packoracle/properties/invariants.h"

#include <array>

namespace packoracle {
namespace {

struct Entry {
  Invariant invariant;
  const char* name;
  const char* statement;
};

constexpr std::array<Entry, 12> kEntries{{
    {Invariant::kShape, "shape",
     "every per-token array of a row has the row's length; rows are at most L long (exactly L when padded to the "
     "row length); cu_seqlens start at 0, never decrease, end at the row length"},
    {Invariant::kCoverage, "coverage",
     "every document token appears exactly once, in order, contiguous (or as the declared overflow policy says); "
     "nothing appears that is neither a document token, a declared delimiter nor padding"},
    {Invariant::kSegments, "segments",
     "the boundaries implied by every encoding present agree with each other and with the real document layout"},
    {Invariant::kPositions, "positions", "position ids follow the declared rule"},
    {Invariant::kTargets, "targets",
     "every weighted target is the next token of the same document; boundary and row-end targets follow the "
     "policy; padding is never a target; supervised tokens are targets and unsupervised ones are not"},
    {Invariant::kAttention, "attention",
     "the context sets equal the declared rule: under doc_causal no position sees another document; causal "
     "everywhere"},
    {Invariant::kDenominator, "denominator",
     "the reported denominator equals the sum of the weights under the declared scope, counted on the same "
     "targets as the numerator; zero valid targets is reported, never divided by"},
    {Invariant::kLoss, "loss",
     "given per-target losses supplied by the kit, the reported loss equals the declared objective "
     "(Σwℓ/Σw over the step for global_targets), whatever the split into rows, micro-batches and ranks"},
    {Invariant::kPackingInvariance, "packing_invariance",
     "with the tiny reference decoder run on the candidate's own encodings, each document's losses in the packed "
     "batch equal its losses alone in a row of its own"},
    {Invariant::kDeterminism, "determinism", "the same input gives the same output, whatever was packed before"},
    {Invariant::kEfficiency, "efficiency", "utilization = non-pad slots / all slots (reported)"},
    {Invariant::kGradient, "gradient",
     "given per-target losses supplied by the kit as leaf tensors, the gradient of what a reducer backpropagates "
     "with respect to each per-target loss equals its weight over the step's declared count, m / Σm (a reducer "
     "whose value is right and whose gradient is not, or that backpropagates another value than it reports, "
     "breaks it)"},
}};

}  // namespace

const char* Name(Invariant invariant) { return kEntries[static_cast<std::size_t>(invariant)].name; }
const char* Statement(Invariant invariant) { return kEntries[static_cast<std::size_t>(invariant)].statement; }

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
