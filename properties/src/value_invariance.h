// Internal to packoracle_properties (check.cc calls it): a value consumer's outputs and parameter gradients,
// packed against each document piece alone (DESIGN §12, "Values and gradients").
#pragma once

#include <string>
#include <vector>

#include "packoracle/oracle/batch.h"
#include "packoracle/properties/candidate.h"
#include "packoracle/properties/invariants.h"
#include "packing_invariance.h"

namespace packoracle::internal {

// The micro-batch of one row that holds piece `piece` of oracle row `truth` alone, in the encodings `row` (the
// packed row it came from) carries: its tokens and labels, the positions it has alone (AlonePositions),
// cu_seqlens {0, n}, seq_lens {n}, doc_ids 0, attention_mask 1, one doc span.
CandidateMicrobatch AloneMicrobatch(const CandidateMicrobatch& packed, const CandidateRow& row, const OracleRow& truth,
                                    const PieceSlots& piece, const std::string& uid, const Policy& policy);

// u_i of the probe loss (ValueRequest::slot_weights) for a document token: a fixed number in [0.5, 1.5) per
// (document uid, offset), the same wherever the token sits; 0 on padding.
double ProbeSlotWeight(const std::string& uid, std::int64_t offset);

// Calls the consumer on every micro-batch and on each of its document pieces alone, and compares: each piece's
// values within the consumer's tolerance (packing_invariance, one violation per row), and, where the consumer
// answers gradients, the micro-batch's parameter gradient with the sum of its pieces' (gradient). `where[r]`
// names flat row r ("micro-batch 0 row 1"); rows flatten the micro-batches in order, as oracle.rows does.
// Checked only where the policy promises isolation (PromisesIsolation).
// `step`: what StepLayoutOf needs for each micro-batch's layout (its world size and the case's draw).
struct StepOfCase {
  std::int64_t dp_world_size = 1;
  std::uint64_t draw = 0;
};
void CheckValueInvariance(ValueConsumerRole& consumer, const std::vector<CandidateMicrobatch>& microbatches,
                          const std::vector<std::string>& where, const OracleBatch& oracle, const Policy& policy,
                          const StepOfCase& step, CaseResult& result);

}  // namespace packoracle::internal
