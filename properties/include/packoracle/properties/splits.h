// Splits of one optimizer step: the same rows dealt into micro-batches, data-parallel ranks and
// context-parallel shards in different ways. The step-level property of a loss reducer (DESIGN §4 `loss`) is
// that its objective does not depend on the split: Σwℓ / Σw over the whole step under `global_targets`,
// whatever the gradient accumulation, the world size, or a micro-batch or a rank holding no valid target
// (bugzoo §3.6 INV-14: the mean-of-means bug came back on every new axis, GA, DP and CP).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "packoracle/oracle/layout.h"
#include "packoracle/properties/candidate.h"

namespace packoracle {

struct StepSplit {
  std::string name;                          // for people: "one row per micro-batch on 2 ranks", ...
  Layout layout;                             // rows with their micro_step and rank
  std::int64_t dp_world_size = 1;            // R of the step
  std::int64_t context_parallel_size = 1;    // CP ranks each row is dealt to (ReduceRequest)
  CpScheme cp_scheme = CpScheme::kContiguous;  // how (context_parallel.h)
};

// The splits a reducer is checked on, from the rows a packer (or the reference) produced. The first is
// `packed` itself, its rows already dealt to micro-batches and ranks; the others deal the same rows
//   - one row per micro-batch on one rank (the longest accumulation),
//   - all rows in one micro-batch (no accumulation),
//   - one row per micro-batch, round-robin on two ranks, the shorter rank topped up with an all-padding row,
//   - on two ranks where rank 1 holds only all-padding rows (a rank with zero valid targets),
//   - as packed, then one more micro-batch of an all-padding row on every rank (an empty micro-batch),
//   - as packed, each row cut into two contiguous context-parallel shards,
//   - as packed, each row dealt to cp ∈ {2, 4, 8} context-parallel ranks, contiguous or load-balanced per
//     document, drawn from `draw` (the case's id: every case of a run sees another, a replay the same).
// An all-padding row is `row_length` slots with no document: no input a loss could see, no target.
// The context-parallel size (2, 4 or 8) and scheme a case is drawn, from `draw` (the case's id): the reducer's
// drawn CP split and the layout handed to consumers (StepLayoutOf) are the same.
struct CpDraw {
  std::int64_t size = 1;
  CpScheme scheme = CpScheme::kContiguous;
};
CpDraw DrawnCp(std::uint64_t draw);

// Micro-batch m's place in the step (StepLayout, candidate.h): its DP rank and micro-step, how many micro-batches
// its rank has, and each row dealt to the case's drawn CP size and scheme (CpShards).
StepLayout StepLayoutOf(const std::vector<CandidateMicrobatch>& microbatches, std::size_t m, std::int64_t dp_world_size,
                        std::uint64_t draw);

std::vector<StepSplit> ReducerSplits(const Layout& packed, std::int64_t dp_world_size, std::uint64_t draw);

}  // namespace packoracle
