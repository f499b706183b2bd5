// Context parallelism: how a row's slots are dealt to the CP ranks of its group, as real trainers shard a
// packed batch (bugzoo §3.6: a denominator counted over DP but not CP, or a CP-local token mean).
//
//   contiguous               rank k of cp holds slots [k·c, min(n, (k+1)·c)), c = ⌈n / cp⌉ (a plain split
//                            of the sequence dimension, as DeepSpeed Ulysses and a naive ring shard a row)
//   load_balanced            each document of the row (each doc_span, and each run of padding) is cut into
//                            2·cp chunks, chunk j = [⌊j·ℓ/2cp⌋, ⌊(j+1)·ℓ/2cp⌋) of its ℓ slots; rank k holds
//                            chunks k and 2cp−1−k of every document (the causal load balancing of Megatron's
//                            THD format, TransformerEngine and torchtitan: an early chunk with a late one)
//
// One owner of the rule: the kit deals the shards (ReduceRequest::cp_shards) and a reducer computes each
// rank's part from them, as a trainer's CP rank computes from what it was handed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "packoracle/properties/candidate.h"

namespace packoracle {

// Name(CpScheme): candidate.h, beside the scheme (the exec protocol writes it too).

// Per CP rank 0..cp-1, the chunks of `row` it holds, in slot order, adjacent chunks merged, empty ones left
// out. Every slot of the row is held by exactly one rank. cp ≥ 1.
std::vector<std::vector<CpChunk>> CpShards(const CandidateRow& row, std::int64_t cp, CpScheme scheme);

}  // namespace packoracle
