// Internal to packoracle_properties (check.cc calls it): what an attention consumer computes against the least
// the declared rule needs (DESIGN §4 efficiency, the policy's consumer_overhead).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "packoracle/oracle/batch.h"
#include "packoracle/properties/candidate.h"
#include "packoracle/properties/invariants.h"

namespace packoracle::internal {

// Pairs (query, key) in runs (mask_runs.h), well-formed: Σ over queries of the runs' lengths.
std::int64_t PairsIn(const MaskRuns& runs);

// Pairs in computed ∪ mask, query by query, both well-formed over the same n (computed null: the mask alone).
std::int64_t PairsInUnion(const MaskRuns* computed, const MaskRuns& mask);

// One micro-batch's consumer answer with its work. `masks[k]`: row k's well-formed mask (null where it was not),
// `truth[k]` its oracle row, `where` names the micro-batch ("micro-batch 0"). Adds the micro-batch's counts to
// result.consumer_work; a malformed work report, or under consumer_overhead: p more than (1 + p/100) times the
// pairs needed, is an `efficiency` violation naming it (`first_row`: the micro-batch's first flat row).
void CheckConsumerWork(const ComputedWork& work, const std::vector<const MaskRuns*>& masks,
                       const std::vector<const OracleRow*>& truth, const Policy& policy, const std::string& where,
                       std::int64_t first_row, CaseResult& result);

}  // namespace packoracle::internal
