// CpShards (context_parallel.h): every slot of a row is held by exactly one CP rank; under load_balanced
// rank k holds chunks k and 2cp−1−k of every document, stated here slot by slot from the formula.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <vector>

#include "packoracle/properties/context_parallel.h"

namespace packoracle {
namespace {

// A row of n slots whose spans are consecutive documents of the given lengths, then padding.
CandidateRow RowOf(const std::vector<std::int64_t>& lengths, std::int64_t padding) {
  CandidateRow row;
  std::int64_t at = 0;
  for (std::size_t d = 0; d < lengths.size(); ++d) {
    row.doc_spans.push_back({"d" + std::to_string(d), at, lengths[d], 0});
    at += lengths[d];
  }
  row.input_ids.assign(static_cast<std::size_t>(at + padding), 1);
  return row;
}

// The rank holding each slot, from the shards.
std::vector<int> Owners(const std::vector<std::vector<CpChunk>>& shards, std::int64_t n) {
  std::vector<int> owner(static_cast<std::size_t>(n), -1);
  for (std::size_t k = 0; k < shards.size(); ++k) {
    std::int64_t last_end = -1;
    for (const CpChunk& c : shards[k]) {
      RC_ASSERT(c.start < c.end);        // no empty chunk
      RC_ASSERT(c.start > last_end);     // in slot order, adjacent ones merged
      last_end = c.end;
      for (std::int64_t i = c.start; i < c.end; ++i) {
        RC_ASSERT(owner[static_cast<std::size_t>(i)] == -1);  // held once
        owner[static_cast<std::size_t>(i)] = static_cast<int>(k);
      }
    }
  }
  return owner;
}

RC_GTEST_PROP(CpShards, EverySlotIsHeldOnceByTheRankTheFormulaNames, ()) {
  const auto lengths = *rc::gen::container<std::vector<std::int64_t>>(rc::gen::inRange<std::int64_t>(1, 40));
  const auto padding = *rc::gen::inRange<std::int64_t>(0, 20);
  const auto cp = *rc::gen::element<std::int64_t>(1, 2, 4, 8);
  const CandidateRow row = RowOf(lengths, padding);
  const auto n = static_cast<std::int64_t>(row.input_ids.size());

  const auto contiguous = Owners(CpShards(row, cp, CpScheme::kContiguous), n);
  const std::int64_t c = (n + cp - 1) / cp;
  for (std::int64_t i = 0; i < n; ++i) RC_ASSERT(contiguous[static_cast<std::size_t>(i)] == i / c);

  const auto balanced = Owners(CpShards(row, cp, CpScheme::kLoadBalanced), n);
  std::vector<std::int64_t> segments = lengths;
  if (padding > 0) segments.push_back(padding);  // padding is cut like a document
  std::int64_t start = 0;
  for (const std::int64_t length : segments) {
    for (std::int64_t i = 0; i < length; ++i) {
      std::int64_t j = 0;  // the chunk of slot i: ⌊j·ℓ/2cp⌋ ≤ i < ⌊(j+1)·ℓ/2cp⌋
      while ((j + 1) * length / (2 * cp) <= i) ++j;
      const std::int64_t rank = j < cp ? j : 2 * cp - 1 - j;
      RC_ASSERT(balanced[static_cast<std::size_t>(start + i)] == rank);
    }
    start += length;
  }
}

TEST(CpShards, LoadBalancedGivesEachRankAnEarlyAndALateChunkOfEveryDocument) {
  const CandidateRow row = RowOf({8, 4}, 0);
  const auto shards = CpShards(row, 2, CpScheme::kLoadBalanced);
  // document of 8: chunks [0,2) [2,4) [4,6) [6,8) → rank 0: 0 and 3, rank 1: 1 and 2; document of 4 likewise.
  EXPECT_EQ(shards[0], (std::vector<CpChunk>{{0, 2}, {6, 9}, {11, 12}}));
  EXPECT_EQ(shards[1], (std::vector<CpChunk>{{2, 6}, {9, 11}}));
}

}  // namespace
}  // namespace packoracle
