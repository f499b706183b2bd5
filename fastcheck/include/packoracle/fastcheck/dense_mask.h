// Dense [L×L] attention masks checked against the policy's rule at memory speed.
//
// For a non-padding query i the rule (Attends in oracle/batch.h) is a run: keys [lo, i] are visible, every
// other key is not, where lo is the start of i's piece (doc_causal) or 0 (row_causal). A query row is
// therefore three constant runs (0…0 1…1 0…0), and checking it is a vectorisable "are these n bytes all v"
// scan, reading each byte of the mask once, as a memcpy would. Rows where padding keys lie at or before the
// query (padding inside a row) fall back to a per-cell comparison with the same rule. Padding queries reach
// no loss and are never compared (as in CheckCase).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "packoracle/oracle/policy.h"
#include "packoracle/properties/candidate.h"

namespace packoracle::fastcheck {

// The truth of one row, per slot: the index of its piece (any id equal within a piece), -1 for padding.
struct RowPieces {
  const std::int32_t* piece = nullptr;
  std::size_t n = 0;
};

// True when `bytes[0..n)` are all `value` (0 or 1): the vectorised inner loop.
bool AllEqual(const std::uint8_t* bytes, std::size_t n, std::uint8_t value);

// Does query row i (`mask_row` holds its n keys, 0 or nonzero) follow the rule? `lo` is where the rule's
// visible run starts (the piece start under doc_causal); `pads_before` whether a padding key lies in [0, i].
bool QueryRowMatches(const std::uint8_t* mask_row, const RowPieces& row, const Policy& policy, std::size_t i,
                     std::size_t lo, bool pads_before);

// The first non-padding query whose mask row breaks the rule, or -1. `mask` is row-major with `stride`
// bytes between query rows (n for a packed [n×n] buffer).
std::int64_t FirstWrongQuery(const std::uint8_t* mask, std::size_t stride, const RowPieces& row, const Policy& policy);

// The same for a DenseMask (a vector per query row, as AttentionConsumerRole returns). The caller checks the
// shape (n rows of n).
std::int64_t FirstWrongQuery(const DenseMask& mask, const RowPieces& row, const Policy& policy);

}  // namespace packoracle::fastcheck
