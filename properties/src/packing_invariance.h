// Internal to packoracle_properties (check.cc calls it): DESIGN §4 packing_invariance with the tiny decoder.
#pragma once

#include <string>
#include <vector>

#include "packoracle/oracle/batch.h"
#include "packoracle/properties/candidate.h"
#include "packoracle/properties/invariants.h"

namespace packoracle::internal {

struct InvarianceRow {
  const CandidateRow* row = nullptr;     // the candidate's row (input ids, position ids, encodings)
  std::string where;                     // "micro-batch 0 row 1", for messages
  const MaskRuns* consumer_mask = nullptr;  // the candidate consumer's mask; null: derive from the encodings
};

// Runs the decoder on every row as the candidate feeds it and on every document piece alone, and compares each
// weighted target's loss (packoracle/properties/invariants.h says the rules). `rows[r]` is oracle row r.
// Adds violations (doc_causal + doc_reset policies) and sets result.contamination.
void CheckPackingInvariance(const std::vector<InvarianceRow>& rows, const OracleBatch& oracle, const Policy& policy,
                            CaseResult& result);

}  // namespace packoracle::internal
