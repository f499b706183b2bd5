// CheckCase with the fast verifier in front: what `packoracle fuzz` and the in-process runner call by default.
//
// For a candidate that only packs, the case is packed once (twice more for determinism, as CheckCase does)
// and the answer checked by FastStepChecker. A pass is the verdict. A violation, a deferral or a
// nondeterministic packer sends the case to CheckCase, which packs again and writes the full report (a
// deterministic packer gives the same answer, so the verdict is the oracle's). Candidates with a loss
// reducer or an attention consumer go to CheckCase directly.
#pragma once

#include <cstdint>
#include <vector>

#include "packoracle/fastcheck/step_check.h"
#include "packoracle/properties/invariants.h"

namespace packoracle::fastcheck {

struct FastCaseCounters {
  std::int64_t fast_passes = 0;   // decided by the fast verifier alone
  std::int64_t oracle_runs = 0;   // sent to CheckCase (violations, deferrals, other roles)
};

CaseResult CheckCaseFast(Candidate& candidate, const PackRequest& request, const CheckOptions& options = {},
                         FastCaseCounters* counters = nullptr);

// The attention findings CheckCase makes for an attention consumer fed `microbatches` (rows with their
// doc_spans), projected onto (invariant, row, slot): one per row whose mask breaks the rule, at its first
// wrong query; (row, -1) when the consumer throws or returns a mask that is not n × n.
std::vector<Finding> ConsumerFindings(AttentionConsumerRole& consumer, const std::vector<CandidateMicrobatch>& microbatches,
                                      const Policy& policy);

}  // namespace packoracle::fastcheck
