// An attention mask in compact form: per query row, the keys it may attend as sorted half-open runs.
//
// A consumer's mask for a row of n slots is n query rows; query i's visible keys are the runs
// [run_begin[r], run_end[r]) for r in [row_offsets[i], row_offsets[i + 1]), sorted and disjoint (adjacent runs
// are allowed). A packed row's mask is a few runs a query (one under doc_causal without padding: keys
// [piece start, i]), so a row of 8,192 slots takes kilobytes where its dense n × n matrix takes 64 MiB: this
// is how a consumer reaches rows of real length (segment ids, a mask function, a block mask are all read into
// it without a matrix). A dense answer converts to it (RunsFromDense) and back (ToDense, for small rows).
//
//   MaskRuns m = RunsFromDense({{1, 0}, {1, 1}});   // query 0: [0, 1); query 1: [0, 2)
//   m.Visible(1, 0) == true
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace packoracle {

// A dense [L][L] mask, 1 where query i may attend key j.
using DenseMask = std::vector<std::vector<std::uint8_t>>;

// How a consumer answered, which says what a row costs it and the kit: runs it holds (segment ids, cu_seqlens,
// a C++ MaskRuns: O(n) a row), a mask function read cell by cell (a mask function, a mask_mod, a BlockMask:
// O(n²) time in bounded memory), or a dense n × n matrix (O(n²) time and memory).
enum class MaskSource { kRuns, kFunction, kDense };

// The longest rows a consumer is generated, by how it answers (Verify asks it once a run): a consumer that
// answers runs gets max_row_length (8,192 slots at the defaults).
inline constexpr std::int64_t kFunctionConsumerMaxRowLength = 4096;
inline constexpr std::int64_t kDenseConsumerMaxRowLength = 512;
// But one case in kFullSizeCaseEvery (the last of every such run of cases) gets rows of the run's full length,
// at least kFullSizeMinRowLength slots, one row a micro-batch: a mask bug gated on size (a ring or chunked
// attention split that joins documents only past 2,048 slots) is found whatever the consumer answers, and it
// holds one row's n × n cells at a time.
inline constexpr int kFullSizeCaseEvery = 32;
inline constexpr std::int64_t kFullSizeMinRowLength = 4096;

struct MaskRuns {
  std::int64_t n = 0;                      // query rows (and keys); -1: a dense answer that was not square
  std::vector<std::int64_t> row_offsets;   // n + 1 entries, from 0 to the number of runs
  std::vector<std::int64_t> run_begin;     // first visible key of each run
  std::vector<std::int64_t> run_end;       // one past its last
  MaskSource source = MaskSource::kRuns;   // how the consumer answered (converted here)

  std::int64_t runs(std::int64_t i) const { return row_offsets[i + 1] - row_offsets[i]; }
  // Is key j visible to query i? (binary search in i's runs)
  bool Visible(std::int64_t i, std::int64_t j) const {
    const auto b = run_begin.begin() + row_offsets[i], e = run_begin.begin() + row_offsets[i + 1];
    const auto it = std::upper_bound(b, e, j);  // the first run starting after j
    if (it == b) return false;
    return j < run_end[static_cast<std::size_t>(it - run_begin.begin() - 1)];
  }
  bool operator==(const MaskRuns&) const = default;
};

// The runs of a dense mask (a nonzero byte is visible); a mask that is not square gives n = -1.
inline MaskRuns RunsFromDense(const DenseMask& mask) {
  MaskRuns out;
  out.source = MaskSource::kDense;
  out.n = static_cast<std::int64_t>(mask.size());
  for (const auto& line : mask)
    if (line.size() != mask.size()) out.n = -1;
  if (out.n < 0) return out;
  out.row_offsets.reserve(mask.size() + 1);
  out.row_offsets.push_back(0);
  for (const auto& line : mask) {
    for (std::size_t j = 0; j < line.size();) {
      if (!line[j]) {
        ++j;
        continue;
      }
      std::size_t end = j;
      while (end < line.size() && line[end]) ++end;
      out.run_begin.push_back(static_cast<std::int64_t>(j));
      out.run_end.push_back(static_cast<std::int64_t>(end));
      j = end;
    }
    out.row_offsets.push_back(static_cast<std::int64_t>(out.run_begin.size()));
  }
  return out;
}

// The dense n × n matrix of well-formed runs (Malformed says nothing): for small rows only.
inline DenseMask ToDense(const MaskRuns& runs) {
  const auto n = static_cast<std::size_t>(std::max<std::int64_t>(runs.n, 0));
  DenseMask out(n, std::vector<std::uint8_t>(n, 0));
  for (std::size_t i = 0; i < n; ++i)
    for (auto r = runs.row_offsets[i]; r < runs.row_offsets[i + 1]; ++r)
      std::fill(out[i].begin() + runs.run_begin[static_cast<std::size_t>(r)],
                out[i].begin() + runs.run_end[static_cast<std::size_t>(r)], std::uint8_t{1});
  return out;
}

// What is wrong with `runs` as the mask of a row of n slots, in a sentence; nullopt when nothing is.
inline std::optional<std::string> Malformed(const MaskRuns& runs, std::int64_t n) {
  const std::string square = "the consumer's mask is not " + std::to_string(n) + " x " + std::to_string(n);
  if (runs.n != n) return square;
  if (runs.row_offsets.size() != static_cast<std::size_t>(n + 1) || runs.row_offsets.front() != 0 ||
      runs.run_begin.size() != runs.run_end.size() ||
      runs.row_offsets.back() != static_cast<std::int64_t>(runs.run_begin.size())) {
    return square + " (its runs do not cover " + std::to_string(n) + " query rows)";
  }
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t previous_end = 0;
    if (runs.row_offsets[i + 1] < runs.row_offsets[i]) return square + " (its run offsets decrease at query " + std::to_string(i) + ")";
    for (auto r = runs.row_offsets[i]; r < runs.row_offsets[i + 1]; ++r) {
      const auto b = runs.run_begin[static_cast<std::size_t>(r)], e = runs.run_end[static_cast<std::size_t>(r)];
      if (b < previous_end || b >= e || e > n) {
        return "the consumer's mask runs of query " + std::to_string(i) + " are not sorted, disjoint key ranges in [0, " +
               std::to_string(n) + ") (a run [" + std::to_string(b) + ", " + std::to_string(e) + "))";
      }
      previous_end = e;
    }
  }
  return std::nullopt;
}

}  // namespace packoracle
