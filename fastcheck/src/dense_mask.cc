#include "packoracle/fastcheck/dense_mask.h"

#include <cstring>

namespace packoracle::fastcheck {

bool AllEqual(const std::uint8_t* bytes, std::size_t n, std::uint8_t value) {
  // Masks hold 0/1, but a consumer may write any nonzero byte for "visible": compare against 0 either way.
  // Blocks of 64 bytes with an OR reduction and no early exit inside a block (GCC vectorises this loop), then
  // 8-byte words for the tail: a row is three runs, so tails are a real share of short rows.
  constexpr std::uint64_t kLow = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
  auto word = [&](std::size_t k) {
    std::uint64_t w;
    std::memcpy(&w, bytes + k, 8);
    return w;
  };
  auto has_zero_byte = [&](std::uint64_t w) { return ((w - kLow) & ~w & kHigh) != 0; };
  std::size_t k = 0;
  if (value == 0) {
    for (; k + 64 <= n; k += 64) {
      std::uint8_t any = 0;
      for (std::size_t t = 0; t < 64; ++t) any |= bytes[k + t];
      if (any) return false;
    }
    for (; k + 8 <= n; k += 8)
      if (word(k)) return false;
    for (; k < n; ++k)
      if (bytes[k]) return false;
    return true;
  }
  for (; k + 64 <= n; k += 64) {
    std::uint8_t zero = 0;
    for (std::size_t t = 0; t < 64; ++t) zero |= static_cast<std::uint8_t>(bytes[k + t] == 0);
    if (zero) return false;
  }
  for (; k + 8 <= n; k += 8)
    if (has_zero_byte(word(k))) return false;
  for (; k < n; ++k)
    if (!bytes[k]) return false;
  return true;
}

bool QueryRowMatches(const std::uint8_t* m, const RowPieces& row, const Policy& policy, std::size_t i,
                     std::size_t lo, bool pads_before) {
  const std::size_t n = row.n;
  if (!pads_before) {
    return AllEqual(m, lo, 0) && AllEqual(m + lo, i + 1 - lo, 1) && AllEqual(m + i + 1, n - i - 1, 0);
  }
  // Attends (oracle/src/batch.cc) cell by cell, for rows with padding keys at or before the query.
  const bool visible_pads = policy.pad_keys == PadKeys::kVisible;
  const bool row_causal = policy.attention == Attention::kRowCausal;
  for (std::size_t j = 0; j < n; ++j) {
    bool allowed = false;
    if (j <= i) allowed = row.piece[j] < 0 ? visible_pads : (row_causal || row.piece[j] == row.piece[i]);
    if ((m[j] != 0) != allowed) return false;
  }
  return true;
}

namespace {

// Walks the queries of a row, keeping the piece start and whether padding was seen, and asks `matches`.
template <class RowOf>
std::int64_t Walk(RowOf row_of, const RowPieces& row, const Policy& policy) {
  std::size_t lo = 0;
  bool pads = false;
  const bool row_causal = policy.attention == Attention::kRowCausal;
  for (std::size_t i = 0; i < row.n; ++i) {
    const std::int32_t p = row.piece[i];
    if (p < 0) {
      pads = true;
      continue;
    }
    if (!row_causal && (i == 0 || row.piece[i - 1] != p)) lo = i;
    if (!QueryRowMatches(row_of(i), row, policy, i, lo, pads)) return static_cast<std::int64_t>(i);
  }
  return -1;
}

}  // namespace

std::int64_t FirstWrongQuery(const std::uint8_t* mask, std::size_t stride, const RowPieces& row, const Policy& policy) {
  return Walk([&](std::size_t i) { return mask + i * stride; }, row, policy);
}

std::int64_t FirstWrongQuery(const DenseMask& mask, const RowPieces& row, const Policy& policy) {
  return Walk([&](std::size_t i) { return mask[i].data(); }, row, policy);
}

}  // namespace packoracle::fastcheck
