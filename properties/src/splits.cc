// ReducerSplits: the same rows of a step, dealt in the ways that broke real trainers (splits.h).
#include "packoracle/properties/splits.h"

#include <algorithm>
#include <array>

#include "packoracle/properties/context_parallel.h"

namespace packoracle {
namespace {

RowLayout PaddingRow(std::int64_t row_length, std::int64_t micro_step, std::int64_t rank) {
  RowLayout row;
  row.length = row_length;
  row.micro_step = micro_step;
  row.rank = rank;
  return row;
}

std::int64_t MicroSteps(const Layout& layout) {
  std::int64_t m = 0;
  for (const auto& row : layout.rows) m = std::max(m, row.micro_step + 1);
  return m;
}

}  // namespace

std::vector<StepSplit> ReducerSplits(const Layout& packed, std::int64_t dp_world_size, std::uint64_t draw) {
  std::vector<StepSplit> out;
  out.push_back({"as packed", packed, dp_world_size, 1});
  const auto n = static_cast<std::int64_t>(packed.rows.size());
  const std::int64_t L = packed.row_length;

  StepSplit longest{"one row per micro-batch on one rank", packed, 1, 1};
  for (std::int64_t k = 0; k < n; ++k) {
    longest.layout.rows[static_cast<std::size_t>(k)].micro_step = k;
    longest.layout.rows[static_cast<std::size_t>(k)].rank = 0;
  }
  out.push_back(longest);

  StepSplit single{"all rows in one micro-batch", packed, 1, 1};
  for (auto& row : single.layout.rows) row.micro_step = row.rank = 0;
  out.push_back(single);

  // Round-robin on two ranks; DDP steps every rank together, so the rank with fewer rows gets padding.
  StepSplit two{"one row per micro-batch, round-robin on 2 ranks", packed, 2, 1};
  for (std::int64_t k = 0; k < n; ++k) {
    two.layout.rows[static_cast<std::size_t>(k)].rank = k % 2;
    two.layout.rows[static_cast<std::size_t>(k)].micro_step = k / 2;
  }
  if (n % 2 == 1) {
    two.layout.rows.push_back(PaddingRow(L, n / 2, 1));
    two.name += ", rank 1 topped up with an all-padding row";
  }
  out.push_back(two);

  StepSplit idle{"2 ranks, rank 1 holds only all-padding rows", longest.layout, 2, 1};
  for (std::int64_t k = 0; k < std::max<std::int64_t>(n, 1); ++k) idle.layout.rows.push_back(PaddingRow(L, k, 1));
  out.push_back(idle);

  StepSplit empty{"as packed, then an all-padding micro-batch on every rank", packed, dp_world_size, 1};
  const std::int64_t next = MicroSteps(packed);
  for (std::int64_t r = 0; r < dp_world_size; ++r) empty.layout.rows.push_back(PaddingRow(L, next, r));
  out.push_back(empty);

  out.push_back({"as packed, every row cut into 2 contiguous context-parallel shards", packed, dp_world_size, 2,
                 CpScheme::kContiguous});

  // The drawn context-parallel split.
  const auto [cp, scheme] = DrawnCp(draw);
  out.push_back({"as packed, every row dealt to " + std::to_string(cp) + " context-parallel ranks (" + Name(scheme) +
                     (scheme == CpScheme::kLoadBalanced ? ": chunks k and 2cp-1-k of every document" : "") + ")",
                 packed, dp_world_size, cp, scheme});
  return out;
}

CpDraw DrawnCp(std::uint64_t draw) {
  // a splitmix64 step of the draw picks the CP size and the scheme
  std::uint64_t z = draw + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  constexpr std::array<std::int64_t, 3> kSizes = {2, 4, 8};
  return {kSizes[z % kSizes.size()],
          (z / kSizes.size()) % 2 == 0 ? CpScheme::kLoadBalanced : CpScheme::kContiguous};
}

StepLayout StepLayoutOf(const std::vector<CandidateMicrobatch>& microbatches, std::size_t m, std::int64_t dp_world_size,
                        std::uint64_t draw) {
  const CandidateMicrobatch& mb = microbatches.at(m);
  const CpDraw cp = DrawnCp(draw);
  StepLayout out;
  out.microbatch = static_cast<std::int64_t>(m);
  out.dp_rank = mb.rank;
  out.dp_world_size = dp_world_size;
  out.micro_step = mb.micro_step;
  out.micro_steps = std::count_if(microbatches.begin(), microbatches.end(),
                                  [&](const CandidateMicrobatch& other) { return other.rank == mb.rank; });
  out.context_parallel_size = cp.size;
  out.context_parallel_scheme = cp.scheme;
  for (const auto& row : mb.rows) out.cp_shards.push_back(CpShards(row, cp.size, cp.scheme));
  return out;
}

}  // namespace packoracle
