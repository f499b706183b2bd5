#include "packoracle/properties/attention_runs.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <unordered_set>

namespace packoracle {
namespace {

struct Run {
  std::int64_t begin = 0, end = 0;
};

// The runs of padding slots of a row, in slot order.
std::vector<Run> PaddingRuns(const std::vector<std::int64_t>& piece) {
  std::vector<Run> out;
  for (std::size_t j = 0; j < piece.size(); ++j) {
    if (piece[j] >= 0) continue;
    const auto s = static_cast<std::int64_t>(j);
    if (!out.empty() && out.back().end == s) ++out.back().end;
    else out.push_back({s, s + 1});
  }
  return out;
}

// The rule's runs for non-padding query i: [0, i] cut into padding and non-padding stretches; a non-padding
// stretch is visible from lo on (the same piece under doc_causal: pieces are contiguous, so j ≥ lo is d_j = d_i
// among the keys j ≤ i), a padding stretch exactly under pad_keys visible. Adjacent visible stretches merge.
void ExpectedRuns(std::int64_t i, std::int64_t lo, const std::vector<Run>& pads, bool visible_pads,
                  std::vector<Run>& out) {
  out.clear();
  auto add = [&](std::int64_t b, std::int64_t e) {
    if (b >= e) return;
    if (!out.empty() && out.back().end == b) out.back().end = e;
    else out.push_back({b, e});
  };
  std::int64_t at = 0;
  for (const Run& pad : pads) {
    if (pad.begin > i) break;
    add(std::max(at, lo), pad.begin);               // the non-padding stretch before it
    if (visible_pads) add(pad.begin, std::min(pad.end, i + 1));
    at = pad.end;
  }
  add(std::max(at, lo), i + 1);
}

// |A Δ B| and its smallest key, for two sorted lists of disjoint runs (adjacent runs allowed).
QueryDisagreement Difference(const std::vector<Run>& a, const MaskRuns& m, std::int64_t i, std::vector<std::int64_t>& points) {
  const std::int64_t b0 = m.row_offsets[static_cast<std::size_t>(i)], b1 = m.row_offsets[static_cast<std::size_t>(i) + 1];
  QueryDisagreement out{i, 0, -1};
  if (a.size() == 1 && b1 - b0 == 1 && m.run_begin[static_cast<std::size_t>(b0)] == a[0].begin &&
      m.run_end[static_cast<std::size_t>(b0)] == a[0].end) {
    return out;  // the common case: one run each, the same
  }
  points.clear();
  for (const Run& r : a) points.insert(points.end(), {r.begin, r.end});
  for (auto r = b0; r < b1; ++r) points.insert(points.end(), {m.run_begin[static_cast<std::size_t>(r)], m.run_end[static_cast<std::size_t>(r)]});
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  std::size_t ia = 0;
  auto ib = b0;
  for (std::size_t k = 0; k + 1 < points.size(); ++k) {
    const std::int64_t x = points[k], y = points[k + 1];  // membership is constant on [x, y)
    while (ia < a.size() && a[ia].end <= x) ++ia;
    while (ib < b1 && m.run_end[static_cast<std::size_t>(ib)] <= x) ++ib;
    const bool in_a = ia < a.size() && a[ia].begin <= x;
    const bool in_b = ib < b1 && m.run_begin[static_cast<std::size_t>(ib)] <= x;
    if (in_a == in_b) continue;
    if (out.keys == 0) out.first_key = x;
    out.keys += y - x;
  }
  return out;
}

}  // namespace

std::vector<std::int64_t> PieceIds(const OracleRow& row) {
  std::vector<std::int64_t> out(row.slots.size());
  for (std::size_t j = 0; j < row.slots.size(); ++j) out[j] = row.slots[j].is_pad() ? -1 : row.slots[j].piece;
  return out;
}

std::vector<QueryDisagreement> DisagreeingQueries(const MaskRuns& runs, const std::vector<std::int64_t>& piece,
                                                  const Policy& policy) {
  const auto pads = PaddingRuns(piece);
  const bool row_causal = policy.attention == Attention::kRowCausal;
  const bool visible_pads = policy.pad_keys == PadKeys::kVisible;
  std::vector<QueryDisagreement> out;
  std::vector<Run> expected;
  std::vector<std::int64_t> points;
  std::unordered_set<std::int64_t> closed;  // pieces whose range has ended
  std::int64_t lo = 0;
  for (std::size_t s = 0; s < piece.size(); ++s) {
    const auto i = static_cast<std::int64_t>(s);
    if (s > 0 && piece[s - 1] >= 0 && piece[s - 1] != piece[s]) closed.insert(piece[s - 1]);
    if (piece[s] < 0) continue;  // padding queries reach no loss: never compared
    if (s == 0 || piece[s - 1] != piece[s]) {
      if (closed.count(piece[s])) {
        throw std::logic_error("DisagreeingQueries: piece " + std::to_string(piece[s]) + " recurs at slot " +
                               std::to_string(s) + " after its range ended (pieces are contiguous in a packed row)");
      }
      if (!row_causal) lo = i;
    }
    ExpectedRuns(i, lo, pads, visible_pads, expected);
    const QueryDisagreement d = Difference(expected, runs, i, points);
    if (d.keys > 0) out.push_back(d);
  }
  return out;
}

}  // namespace packoracle
