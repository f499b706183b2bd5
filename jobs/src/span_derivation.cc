#include "packoracle/jobs/span_derivation.h"

#include <algorithm>
#include <utility>

namespace packoracle::jobs {
namespace {

// How many of `doc`'s tokens match row[start:], from the first (at most what the row has left).
std::int64_t CommonPrefix(std::span<const Token> row, std::int64_t start, std::span<const Token> doc) {
  const std::int64_t m = std::min<std::int64_t>(static_cast<std::int64_t>(doc.size()),
                                                static_cast<std::int64_t>(row.size()) - start);
  std::int64_t k = 0;
  while (k < m && row[start + k] == doc[k]) ++k;
  return k;
}

bool AllEqual(std::span<const Token> values, Token v) {
  return std::all_of(values.begin(), values.end(), [v](Token t) { return t == v; });
}

}  // namespace

SpanDerivation::SpanDerivation(std::vector<std::vector<Token>> documents, Overflow overflow,
                               std::optional<Token> pad_id)
    : owned_(std::move(documents)),
      docs_(owned_.begin(), owned_.end()),
      cut_(overflow == Overflow::kSplit || overflow == Overflow::kTruncate),
      split_(overflow == Overflow::kSplit),
      pad_id_(pad_id) {
  IndexDocuments();
}

SpanDerivation::SpanDerivation(std::vector<std::span<const Token>> documents, Overflow overflow,
                               std::optional<Token> pad_id)
    : docs_(std::move(documents)),
      cut_(overflow == Overflow::kSplit || overflow == Overflow::kTruncate),
      split_(overflow == Overflow::kSplit),
      pad_id_(pad_id) {
  IndexDocuments();
}

void SpanDerivation::IndexDocuments() {
  for (std::size_t k = 0; k < docs_.size(); ++k) {
    const auto& d = docs_[k];
    placed_.push_back(d.empty());  // an empty document has nothing to place
    all_pad_.push_back(pad_id_ && !d.empty() && AllEqual(d, *pad_id_));
    if (!d.empty()) by_first_[d.front()].push_back(static_cast<std::int64_t>(k));
  }
}

std::int64_t SpanDerivation::Unplaced() const {
  return static_cast<std::int64_t>(std::count(placed_.begin(), placed_.end(), false));
}

std::optional<std::int64_t> SpanDerivation::FirstUnplaced() const {
  const auto it = std::find(placed_.begin(), placed_.end(), false);
  if (it == placed_.end()) return std::nullopt;
  return static_cast<std::int64_t>(it - placed_.begin());
}

bool SpanDerivation::PaddingFrom(std::span<const Token> row, std::int64_t i) const {
  return pad_id_ && AllEqual(row.subspan(static_cast<std::size_t>(i)), *pad_id_);
}

// Whether slots i.. of row r, where document k (made of the pad id) would go, read as padding: the rest of the
// row is the pad id and none of the slots the document would cover is a target.
bool SpanDerivation::PaddingRatherThan(std::int64_t k, std::size_t r, std::int64_t i) const {
  if (!all_pad_[static_cast<std::size_t>(k)] || !PaddingFrom(rows_[r], i)) return false;
  const auto& targets = targets_[r];
  if (targets.empty()) return true;
  const std::int64_t m = std::min<std::int64_t>(static_cast<std::int64_t>(docs_[static_cast<std::size_t>(k)].size()),
                                                static_cast<std::int64_t>(rows_[r].size()) - i);
  return std::none_of(targets.begin() + i, targets.begin() + i + m, [](std::uint8_t t) { return t != 0; });
}

// The first unplaced document (in order) whose tokens start at slot i of row r, whole or cut at the row's end
// where the policy cuts.
std::optional<std::int64_t> SpanDerivation::NextDocument(std::size_t r, std::int64_t i) const {
  const std::span<const Token> row = rows_[r];
  const auto found = by_first_.find(row[static_cast<std::size_t>(i)]);
  if (found == by_first_.end()) return std::nullopt;
  for (std::int64_t k : found->second) {
    if (placed_[static_cast<std::size_t>(k)] || PaddingRatherThan(k, r, i)) continue;
    const auto& doc = docs_[static_cast<std::size_t>(k)];
    const std::int64_t m = std::min<std::int64_t>(static_cast<std::int64_t>(doc.size()),
                                                  static_cast<std::int64_t>(row.size()) - i);
    if ((m == static_cast<std::int64_t>(doc.size()) || cut_) && CommonPrefix(row, i, doc) == m) return k;
  }
  return std::nullopt;
}

const std::vector<DerivedSpan>& SpanDerivation::Match(std::span<const Token> row, std::span<const std::uint8_t> targets) {
  rows_.emplace_back(row.begin(), row.end());
  targets_.emplace_back(targets.begin(), targets.end());
  spans_.emplace_back();
  const std::size_t r = rows_.size() - 1;
  auto& spans = spans_.back();
  const std::int64_t n = static_cast<std::int64_t>(row.size());
  std::int64_t i = 0;
  if (open_) {  // the rest of a document cut at the previous row's end
    const auto [k, offset] = *open_;
    open_.reset();
    const std::span<const Token> rest = std::span<const Token>(docs_[static_cast<std::size_t>(k)]).subspan(
        static_cast<std::size_t>(offset));
    const std::int64_t m = CommonPrefix(row, 0, rest);
    if (m > 0) {
      spans.push_back({k, 0, m, offset});
      if (m < static_cast<std::int64_t>(rest.size()) && split_) open_ = {k, offset + m};
      i = m;
    }
  }
  while (i < n) {
    std::optional<std::int64_t> k = NextDocument(r, i);
    // As Solve chooses: a document out of order only where the rest is not padding.
    if (k && k != FirstUnplaced() && PaddingFrom(row, i)) k.reset();
    if (!k) {
      if (!PaddingFrom(row, i)) ++misses_;  // the rest is unexplained unless it is padding
      break;
    }
    const auto& doc = docs_[static_cast<std::size_t>(*k)];
    const std::int64_t m = std::min<std::int64_t>(static_cast<std::int64_t>(doc.size()), n - i);
    spans.push_back({*k, i, m, 0});
    placed_[static_cast<std::size_t>(*k)] = true;
    if (m < static_cast<std::int64_t>(doc.size()) && split_) open_ = {*k, m};
    i += m;
  }
  return spans;
}

// The depth-first search of Solve: at each slot a continued piece, padding when the rest of the row is the pad
// id, or an unplaced document that matches (cut at the row's end where the policy cuts), in the order packers
// make them: the first unplaced document if it matches here; else padding (what the greedy reading could not
// explain is most often a document of pad ids read where the packer left padding); else any other document
// that matches, in the documents' order.
struct SpanDerivation::Search {
  const SpanDerivation& d;
  Token pad_id;
  std::vector<bool> placed;
  std::vector<std::vector<DerivedSpan>> found;
  std::vector<DerivedSpan> acc;  // the spans of the row being read
  std::int64_t budget = kSolveSteps;

  bool RowFrom(std::size_t r, std::int64_t i, std::optional<std::pair<std::int64_t, std::int64_t>> open) {
    if (--budget < 0) return false;
    if (r == d.rows_.size()) return !open && std::find(placed.begin(), placed.end(), false) == placed.end();
    const std::span<const Token> row = d.rows_[r];
    const std::int64_t n = static_cast<std::int64_t>(row.size());
    if (i == n) return NextRow(r, open);
    if (i == 0 && open) return Continue(r, *open);
    const std::vector<std::int64_t> matching = Matching(row, i);
    const auto first = std::find(placed.begin(), placed.end(), false);
    const std::int64_t first_k = first == placed.end() ? -1 : static_cast<std::int64_t>(first - placed.begin());
    if (first_k >= 0 && std::find(matching.begin(), matching.end(), first_k) != matching.end() &&
        Place(r, i, first_k)) {
      return true;
    }
    if (AllEqual(row.subspan(static_cast<std::size_t>(i)), pad_id)) {  // padding to the row's end
      const std::size_t keep = acc.size();
      if (NextRow(r, std::nullopt)) return true;
      acc.resize(keep);
    }
    for (std::int64_t k : matching) {
      if (k != first_k && Place(r, i, k)) return true;
    }
    return false;
  }

  bool NextRow(std::size_t r, std::optional<std::pair<std::int64_t, std::int64_t>> open) {
    found[r] = acc;
    std::vector<DerivedSpan> saved;
    saved.swap(acc);
    if (RowFrom(r + 1, 0, open)) return true;
    acc.swap(saved);
    return false;
  }

  // The rest of a document cut at the previous row's end: the only reading of the row's start.
  bool Continue(std::size_t r, std::pair<std::int64_t, std::int64_t> open) {
    const auto [k, offset] = open;
    const std::span<const Token> rest =
        std::span<const Token>(d.docs_[static_cast<std::size_t>(k)]).subspan(static_cast<std::size_t>(offset));
    const std::int64_t m = CommonPrefix(d.rows_[r], 0, rest);
    if (m == 0) return false;
    std::optional<std::pair<std::int64_t, std::int64_t>> next;
    if (m < static_cast<std::int64_t>(rest.size()) && d.split_) next = {k, offset + m};
    acc.push_back({k, 0, m, offset});
    if (RowFrom(r, m, next)) return true;
    acc.pop_back();
    return false;
  }

  // Document k at slot i (cut at the row's end, then continued in the next row where the policy splits).
  bool Place(std::size_t r, std::int64_t i, std::int64_t k) {
    const std::int64_t size = static_cast<std::int64_t>(d.docs_[static_cast<std::size_t>(k)].size());
    const std::int64_t m = std::min(size, static_cast<std::int64_t>(d.rows_[r].size()) - i);
    std::optional<std::pair<std::int64_t, std::int64_t>> next;
    if (m < size && d.split_) next = {k, m};
    placed[static_cast<std::size_t>(k)] = true;
    acc.push_back({k, i, m, 0});
    if (RowFrom(r, i + m, next)) return true;
    acc.pop_back();
    placed[static_cast<std::size_t>(k)] = false;
    return false;
  }

  std::vector<std::int64_t> Matching(std::span<const Token> row, std::int64_t i) const {
    std::vector<std::int64_t> out;
    const auto candidates = d.by_first_.find(row[static_cast<std::size_t>(i)]);
    if (candidates == d.by_first_.end()) return out;
    for (std::int64_t k : candidates->second) {
      const auto& doc = d.docs_[static_cast<std::size_t>(k)];
      const std::int64_t m = std::min<std::int64_t>(static_cast<std::int64_t>(doc.size()),
                                                    static_cast<std::int64_t>(row.size()) - i);
      if (!placed[static_cast<std::size_t>(k)] && (m == static_cast<std::int64_t>(doc.size()) || d.cut_) &&
          CommonPrefix(row, i, doc) == m) {
        out.push_back(k);
      }
    }
    return out;
  }
};

bool SpanDerivation::Solve(Token pad_id) {
  Search search{*this, pad_id, {}, std::vector<std::vector<DerivedSpan>>(rows_.size()), {}};
  for (const auto& doc : docs_) search.placed.push_back(doc.empty());
  if (!search.RowFrom(0, 0, std::nullopt)) return false;
  spans_ = std::move(search.found);
  placed_ = std::move(search.placed);
  misses_ = 0;
  return true;
}

}  // namespace packoracle::jobs
