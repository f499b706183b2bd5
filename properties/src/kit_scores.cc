// KitScores (invariants.h): the scores the kit supplies for a declared selection (oracle/selection.h).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <utility>
#include <vector>

#include "packoracle/properties/invariants.h"

namespace packoracle {
namespace {

// SplitMix64's finaliser: a bijection of 64-bit words that scatters neighbouring inputs.
std::uint64_t Scatter(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// FNV-1a over the documents' tokens and target losses: the seed of a case's score order.
std::uint64_t CaseSeed(const std::vector<EffectiveDocument>& docs, const TargetLosses& losses) {
  std::uint64_t h = 0xCBF29CE484222325ULL;
  auto add = [&](std::uint64_t word) { h = (h ^ word) * 0x100000001B3ULL; };
  for (std::size_t d = 0; d < docs.size(); ++d) {
    for (Token t : docs[d].tokens) add(static_cast<std::uint64_t>(t));
    for (double l : losses[d]) {
      std::uint64_t bits = 0;
      std::memcpy(&bits, &l, sizeof bits);
      add(bits);
    }
  }
  return h;
}

}  // namespace

TargetScores KitScores(const PackRequest& request, const std::vector<EffectiveDocument>& docs) {
  const TargetLosses losses = LossesOf(request, docs);
  const std::uint64_t seed = CaseSeed(docs, losses);
  // Entry t (documents in order, then tokens) is ordered by Scatter(seed + t), then by t: a permutation.
  std::vector<std::pair<std::size_t, std::size_t>> entries;  // (document, token)
  for (std::size_t d = 0; d < docs.size(); ++d)
    for (std::size_t k = 0; k < docs[d].tokens.size(); ++k) entries.push_back({d, k});
  std::vector<std::size_t> order(entries.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const std::uint64_t ka = Scatter(seed + a), kb = Scatter(seed + b);
    return ka != kb ? ka < kb : a < b;
  });
  TargetScores scores(docs.size());
  for (std::size_t d = 0; d < docs.size(); ++d) scores[d].assign(docs[d].tokens.size(), 0.0);
  const auto total = static_cast<double>(entries.size());
  for (std::size_t r = 0; r < order.size(); ++r) {
    const auto [d, k] = entries[order[r]];
    scores[d][k] = static_cast<double>(r) / total;  // the r-th of T: distinct, in [0, 1)
  }
  return scores;
}

}  // namespace packoracle
