// Internal to packoracle_properties (check.cc calls it): DESIGN §4 packing_invariance with the tiny decoder.
#pragma once

#include <string>
#include <vector>

#include "packoracle/oracle/batch.h"
#include "packoracle/properties/candidate.h"
#include "packoracle/properties/invariants.h"

namespace packoracle::internal {

// One piece of a row: slots [start, start + length) hold tokens of document `doc` from `offset` on.
struct PieceSlots {
  std::int64_t doc = kPad;
  std::int64_t offset = 0;
  std::size_t start = 0;
  std::size_t length = 0;
};
std::vector<PieceSlots> PiecesOf(const OracleRow& row);

// Where packed must equal alone: the policy promises isolation (doc_causal attention, per-document positions).
// Elsewhere a document's outputs legitimately depend on what was packed before it.
bool PromisesIsolation(const Policy& policy);

// The positions a piece has alone in a row of its own: the oracle's under doc_reset (offset + base; a piece
// continued from an earlier row counts on, wraps or restarts as split_positions says), base + k under
// row_continuous.
std::vector<std::int64_t> AlonePositions(const OracleRow& truth, const PieceSlots& piece, const Policy& policy);

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
