#include "packoracle/jobs/span_derivation.h"

#include <algorithm>
#include "packoracle/properties/backend_attention.h"
#include <cstring>
#include <utility>

namespace packoracle::jobs {
namespace {

// How many of `doc`'s tokens match row[start:], from the first (at most what the row has left).
std::int64_t CommonPrefix(std::span<const Token> row, std::int64_t start, std::span<const Token> doc) {
  const std::int64_t m = std::min<std::int64_t>(static_cast<std::int64_t>(doc.size()),
                                                static_cast<std::int64_t>(row.size()) - start);
  // The common case, the whole document in place, as one memcmp (vectorised); the first difference otherwise.
  if (m > 0 && std::memcmp(row.data() + start, doc.data(), static_cast<std::size_t>(m) * sizeof(Token)) == 0) return m;
  std::int64_t k = 0;
  while (k < m && row[start + k] == doc[k]) ++k;
  return k;
}

bool AllEqual(std::span<const Token> values, Token v) {
  return std::all_of(values.begin(), values.end(), [v](Token t) { return t == v; });
}

}  // namespace

SpanDerivation::SpanDerivation(std::vector<std::vector<Token>> documents, Overflow overflow,
                               std::optional<Token> pad_id, bool left_padded)
    : owned_(std::move(documents)),
      docs_(owned_.begin(), owned_.end()),
      cut_(overflow == Overflow::kSplit || overflow == Overflow::kTruncate || overflow == Overflow::kDrop),
      split_(overflow == Overflow::kSplit),
      pad_id_(pad_id),
      left_(left_padded && pad_id.has_value()) {
  IndexDocuments();
}

SpanDerivation::SpanDerivation(std::vector<std::span<const Token>> documents, Overflow overflow,
                               std::optional<Token> pad_id, bool left_padded)
    : docs_(std::move(documents)),
      cut_(overflow == Overflow::kSplit || overflow == Overflow::kTruncate || overflow == Overflow::kDrop),
      split_(overflow == Overflow::kSplit),
      pad_id_(pad_id),
      left_(left_padded && pad_id.has_value()) {
  IndexDocuments();
}

void SpanDerivation::IndexDocuments() {
  for (std::size_t k = 0; k < docs_.size(); ++k) {
    const auto& d = docs_[k];
    claimed_.emplace_back();
    placed_.push_back(d.empty());  // an empty document has nothing to place
    all_pad_.push_back(pad_id_ && !d.empty() && AllEqual(d, *pad_id_));
    pad_first_ = pad_first_ || (pad_id_ && !d.empty() && d.front() == *pad_id_);
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

RowEvidence EvidenceOf(const CandidateRow& row, const Policy& policy) {
  RowEvidence evidence;
  if (const auto encoded = EncodedSegments(row, policy)) evidence.starts = encoded->first;
  if (!row.doc_ids && !row.attention_mask) return evidence;
  // The trailing run of slots marked as padding (a doc id below 0, an attention_mask of 0).
  const auto marked = [&row](std::size_t i) {
    return (row.doc_ids && i < row.doc_ids->size() && (*row.doc_ids)[i] < 0) ||
           (row.attention_mask && i < row.attention_mask->size() && (*row.attention_mask)[i] == 0);
  };
  std::size_t from = row.input_ids.size();
  while (from > 0 && marked(from - 1)) --from;
  evidence.padding_from = static_cast<std::int64_t>(from);
  std::size_t until = 0;  // the leading run (padding: left)
  while (until < row.input_ids.size() && marked(until)) ++until;
  evidence.padding_until = static_cast<std::int64_t>(until);
  return evidence;
}

bool SpanDerivation::StartBorneOut(std::size_t r, std::int64_t start) const {
  const auto& starts = starts_[r].starts;
  return starts.empty() || std::binary_search(starts.begin(), starts.end(), start);
}

bool SpanDerivation::EndBorneOut(std::size_t r, std::int64_t end) const {
  return !starts_[r].padding_from || end <= *starts_[r].padding_from;
}

bool SpanDerivation::PaddingBorneOut(std::size_t r, std::int64_t i) const {
  return !TargetFrom(r, i) && (!starts_[r].padding_from || i == *starts_[r].padding_from);
}

bool SpanDerivation::TargetFrom(std::size_t r, std::int64_t i) const {
  const auto& targets = targets_[r];
  return !targets.empty() && std::any_of(targets.begin() + i, targets.end(), [](std::uint8_t t) { return t != 0; });
}

// Whether the rows' own evidence contradicts a reading of row r: a piece that starts where the encodings start
// no segment, or padding (the rest of the row after the last piece) where a slot is a target, while a document
// could be read as that padding (one starts with the pad id). Only rows whose encodings were read are held to it.
bool SpanDerivation::Contradicts(std::size_t r, const std::vector<DerivedSpan>& spans) const {
  if (!starts_asked_[r]) return false;
  for (const DerivedSpan& span : spans)
    if (!StartBorneOut(r, span.start) || !EndBorneOut(r, span.start + span.length)) return true;
  const std::int64_t end = spans.empty() ? 0 : spans.back().start + spans.back().length;
  return pad_first_ && end < static_cast<std::int64_t>(rows_[r].size()) && !PaddingBorneOut(r, end);
}

int SpanDerivation::EndEvidence(std::size_t r, std::int64_t i, std::int64_t k) const {
  const auto& starts = starts_[r].starts;
  if (starts.empty()) return 0;
  const std::int64_t n = static_cast<std::int64_t>(rows_[r].size());
  const std::int64_t end = std::min<std::int64_t>(i + static_cast<std::int64_t>(docs_[static_cast<std::size_t>(k)].size()), n);
  if (end == n || std::binary_search(starts.begin(), starts.end(), end)) return 2;
  return PaddingFrom(rows_[r], end) ? 1 : 0;
}

void SpanDerivation::PreferEncoded(std::size_t r, std::int64_t i, std::vector<std::int64_t>& candidates) const {
  if (starts_[r].starts.empty()) return;
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](std::int64_t a, std::int64_t b) { return EndEvidence(r, i, a) > EndEvidence(r, i, b); });
}

// The first unplaced document (in order) whose tokens start at slot i of row r, whole or cut at the row's end
// where the policy cuts; of several, the one whose end the row's encodings bear out best (EndEvidence).
std::optional<std::int64_t> SpanDerivation::NextDocument(std::size_t r, std::int64_t i, const StartsOf& starts) {
  const std::span<const Token> row = rows_[r];
  const auto found = by_first_.find(row[static_cast<std::size_t>(i)]);
  if (found == by_first_.end()) return std::nullopt;
  std::optional<std::int64_t> first;
  for (std::int64_t k : found->second) {
    if (placed_[static_cast<std::size_t>(k)] || PaddingRatherThan(k, r, i)) continue;
    const auto& doc = docs_[static_cast<std::size_t>(k)];
    const std::int64_t m = std::min<std::int64_t>(static_cast<std::int64_t>(doc.size()),
                                                  static_cast<std::int64_t>(row.size()) - i);
    if ((m != static_cast<std::int64_t>(doc.size()) && !cut_) || CommonPrefix(row, i, doc) != m) continue;
    if (!first) {
      first = k;
      if (!starts) return first;  // nothing to choose by
      continue;
    }
    ++choices_;
    // A second document matches here: the row's encodings choose (read once a row, where first needed).
    if (!starts_asked_[r]) {
      starts_asked_[r] = true;
      starts_[r] = starts();
    }
    if (starts_[r].starts.empty()) return first;
    if (EndEvidence(r, i, k) > EndEvidence(r, i, *first)) first = k;  // of equals, the first in order
  }
  return first;
}

bool SpanDerivation::MatchesAt(std::int64_t k, std::span<const Token> row, std::int64_t i) const {
  const auto& doc = docs_[static_cast<std::size_t>(k)];
  const std::int64_t m = std::min<std::int64_t>(static_cast<std::int64_t>(doc.size()),
                                                static_cast<std::int64_t>(row.size()) - i);
  return !doc.empty() && (m == static_cast<std::int64_t>(doc.size()) || cut_) && CommonPrefix(row, i, doc) == m;
}

bool SpanDerivation::UnplacedMatchesAt(std::span<const Token> row, std::int64_t i) const {
  const auto found = by_first_.find(row[static_cast<std::size_t>(i)]);
  if (found == by_first_.end()) return false;
  return std::any_of(found->second.begin(), found->second.end(), [&](std::int64_t k) {
    return !placed_[static_cast<std::size_t>(k)] && MatchesAt(k, row, i);
  });
}

std::int64_t SpanDerivation::LeadingPadding(std::span<const Token> row, std::span<const std::uint8_t> targets,
                                            const std::optional<RowEvidence>& evidence) const {
  if (evidence && (evidence->padding_until > 0 || evidence->padding_from)) return evidence->padding_until;
  const std::int64_t n = static_cast<std::int64_t>(row.size());
  const auto target = [&](std::int64_t i) { return !targets.empty() && targets[static_cast<std::size_t>(i)] != 0; };
  std::int64_t run = 0;
  while (run < n && row[static_cast<std::size_t>(run)] == *pad_id_ && !target(run)) ++run;
  if (!pad_first_) return run;
  // A document starting with the pad id may end the padding earlier: the next document in order where it is
  // one (packers place documents in order), else one the rest of the row cannot be read without.
  if (const auto first = FirstUnplaced(); first && docs_[static_cast<std::size_t>(*first)].front() == *pad_id_)
    for (std::int64_t lead = run - 1; lead >= 0; --lead)
      if (MatchesAt(*first, row, lead)) return lead;
  if (run < n && UnplacedMatchesAt(row, run)) return run;
  for (std::int64_t lead = run - 1; lead >= 0; --lead)
    if (UnplacedMatchesAt(row, lead)) return lead;
  return run;
}

const std::vector<std::vector<DerivedSpan>>& SpanDerivation::Shifted(
    const std::vector<std::vector<DerivedSpan>>& readings, std::vector<std::vector<DerivedSpan>>& out) const {
  out = readings;
  for (std::size_t r = 0; r < out.size() && r < leads_.size(); ++r)
    for (DerivedSpan& span : out[r]) span.start += leads_[r];
  return out;
}

const std::vector<DerivedSpan>& SpanDerivation::Match(std::span<const Token> row, std::span<const std::uint8_t> targets,
                                                     const StartsOf& starts, bool viewed) {
  if (!left_) {
    leads_.push_back(0);
    return MatchRow(row, targets, starts, viewed);
  }
  // Left padding: the row's evidence is read first (where its padding ends), then the row after its padding
  // is matched as any row, with the evidence moved with it.
  std::optional<RowEvidence> evidence;
  if (starts) evidence = starts();
  const std::int64_t lead = LeadingPadding(row, targets, evidence);
  leads_.push_back(lead);
  StartsOf moved;
  if (evidence) {
    RowEvidence after = *evidence;
    after.starts.clear();
    for (std::int64_t s : evidence->starts)
      if (s >= lead) after.starts.push_back(s - lead);
    if (after.padding_from) after.padding_from = std::max<std::int64_t>(0, *after.padding_from - lead);
    after.padding_until = 0;
    moved = [after] { return after; };
  }
  const auto l = static_cast<std::size_t>(lead);
  const auto& spans = MatchRow(row.subspan(l), targets.empty() ? targets : targets.subspan(l), moved, viewed);
  match_out_ = spans;
  for (DerivedSpan& span : match_out_) span.start += lead;
  return match_out_;
}

const std::vector<DerivedSpan>& SpanDerivation::MatchRow(std::span<const Token> row,
                                                        std::span<const std::uint8_t> targets, const StartsOf& starts,
                                                        bool viewed) {
  if (viewed) {
    rows_.push_back(row);
  } else {
    row_copies_.emplace_back(row.begin(), row.end());
    rows_.emplace_back(row_copies_.back());
  }
  targets_.emplace_back(targets.begin(), targets.end());
  starts_.emplace_back();
  starts_asked_.push_back(false);
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
  if (i == 0 && split_ && n > 0 && !NextDocument(r, 0, starts)) {
    // A row that starts inside a document other than the one cut at the previous row's end: a stream window
    // of rows handed out shuffled (Megatron's GPTDataset, llm.c), or a step that begins mid-document.
    if (const auto piece = ContinuedPiece(row, claimed_)) {
      ++choices_;  // a guess among the documents this row may continue
      spans.push_back(*piece);
      const std::int64_t size = static_cast<std::int64_t>(docs_[static_cast<std::size_t>(piece->document)].size());
      if (piece->doc_offset + piece->length < size) open_ = {piece->document, piece->doc_offset + piece->length};
      i = piece->length;
    }
  }
  while (i < n) {
    std::optional<std::int64_t> k = NextDocument(r, i, starts);
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
  // A token read twice (a continued piece guessed for an earlier row's start that a later row places): the
  // greedy reading does not explain the step, and Solve searches.
  for (std::size_t a = 0; a < spans.size(); ++a) {
    if (!Claim(claimed_, spans[a], true)) ++misses_;
    for (std::size_t b = 0; b < a; ++b)
      if (spans[b].document == spans[a].document) ++misses_;  // a row holds at most one piece of a document
  }
  // A row that ends in the pad id, where a document may start with it: the greedy reading may have taken
  // padding for a document or a document for padding, so the row's encodings are read (once) to hold it against.
  if (pad_first_ && n > 0 && row.back() == *pad_id_) ++choices_;  // padding or a document of the pad id
  if (pad_first_ && starts && n > 0 && row.back() == *pad_id_ && !starts_asked_[r]) {
    starts_asked_[r] = true;
    starts_[r] = starts();
  }
  if (Contradicts(r, spans)) {
    ++contradicted_;
    borne_out_ = false;
  }
  return spans;
}

bool SpanDerivation::Claim(Claimed& claimed, const DerivedSpan& span, bool claim) const {
  auto& pieces = claimed[static_cast<std::size_t>(span.document)];
  const std::pair<std::int64_t, std::int64_t> piece{span.doc_offset, span.doc_offset + span.length};
  if (!claim) {
    const auto it = std::find(pieces.begin(), pieces.end(), piece);
    if (it == pieces.end()) return false;
    pieces.erase(it);
    return true;
  }
  const bool free = Free(claimed, span);
  pieces.push_back(piece);
  return free;
}

bool SpanDerivation::Free(const Claimed& claimed, const DerivedSpan& span) const {
  const std::int64_t from = span.doc_offset, to = span.doc_offset + span.length;
  for (const auto& [a, b] : claimed[static_cast<std::size_t>(span.document)])
    if (a < to && from < b) return false;
  return true;
}

bool SpanDerivation::Covered(const Claimed& claimed, std::int64_t document, std::int64_t from, std::int64_t to) {
  auto pieces = claimed[static_cast<std::size_t>(document)];
  std::sort(pieces.begin(), pieces.end());
  for (const auto& [a, b] : pieces) {
    if (from >= to) break;
    if (a > from) return false;
    from = std::max(from, b);
  }
  return from >= to;
}

// The piece a row starts with when it starts inside a document: the first document (in order) and the smallest
// offset past its first token whose tokens from there fill the row's start up to the document's end or the
// row's. Only where the policy splits documents across rows.
std::optional<DerivedSpan> SpanDerivation::ContinuedPiece(std::span<const Token> row, const Claimed& claimed) const {
  const std::vector<DerivedSpan> pieces = ContinuedPieces(row, claimed);
  return pieces.empty() ? std::nullopt : std::optional<DerivedSpan>(pieces.front());
}

// Every piece a row may start with when it starts inside a document, none of whose tokens is claimed: first those
// that continue what earlier rows placed (the document's tokens before the offset all claimed), then the rest;
// each in the documents' order, then by offset.
std::vector<DerivedSpan> SpanDerivation::ContinuedPieces(std::span<const Token> row, const Claimed& claimed) const {
  const std::int64_t n = static_cast<std::int64_t>(row.size());
  std::vector<DerivedSpan> continuing, others;
  for (std::size_t k = 0; k < docs_.size() && n > 0; ++k) {
    const std::span<const Token> doc = docs_[k];
    for (std::size_t offset = 1; offset < doc.size(); ++offset) {
      if (doc[offset] != row[0]) continue;
      const std::int64_t m = std::min<std::int64_t>(static_cast<std::int64_t>(doc.size() - offset), n);
      const DerivedSpan piece{static_cast<std::int64_t>(k), 0, m, static_cast<std::int64_t>(offset)};
      if (CommonPrefix(row, 0, doc.subspan(offset)) != m || !Free(claimed, piece)) continue;
      const bool continues = Covered(claimed, static_cast<std::int64_t>(k), 0, static_cast<std::int64_t>(offset));
      (continues ? continuing : others).push_back(piece);
    }
  }
  continuing.insert(continuing.end(), others.begin(), others.end());
  return continuing;
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
  Claimed claimed;  // per document, the pieces of the reading
  bool every_document = true;  // a reading must place every document (else: every row read, no token twice)
  bool borne_out = false;      // a reading must bear out the rows' evidence (StartBorneOut, no target padded)
  std::int64_t budget = kSolveSteps;
  // OtherReadings: each complete reading other than `chosen` goes here, and the search goes on until `limit`.
  std::vector<std::vector<std::vector<DerivedSpan>>>* others = nullptr;
  const std::vector<std::vector<DerivedSpan>>* chosen = nullptr;
  std::size_t limit = 0;

  // At the last row's end: the reading is complete. Solve takes it; OtherReadings keeps it and looks on.
  bool Complete() {
    if (!others) return true;
    if (found != *chosen && std::find(others->begin(), others->end(), found) == others->end()) others->push_back(found);
    return others->size() >= limit;
  }

  // Whether the rest of a document cut at the last row's end was read elsewhere (rows out of stream order).
  bool RestRead(std::pair<std::int64_t, std::int64_t> open) const {
    const std::int64_t size = static_cast<std::int64_t>(d.docs_[static_cast<std::size_t>(open.first)].size());
    return Covered(claimed, open.first, open.second, size);
  }

  // `span` added to the reading, then RowFrom(r, next slot, open); undone where that fails. False where one of
  // its tokens is already read.
  bool With(const DerivedSpan& span, std::size_t r, std::optional<std::pair<std::int64_t, std::int64_t>> open) {
    if (!d.Free(claimed, span)) return false;
    if (borne_out && (!d.StartBorneOut(r, span.start) || !d.EndBorneOut(r, span.start + span.length))) return false;
    for (const DerivedSpan& other : acc)
      if (other.document == span.document) return false;  // a row holds at most one piece of a document
    d.Claim(claimed, span, true);
    acc.push_back(span);
    if (RowFrom(r, span.start + span.length, open)) return true;
    acc.pop_back();
    d.Claim(claimed, span, false);
    return false;
  }

  bool RowFrom(std::size_t r, std::int64_t i, std::optional<std::pair<std::int64_t, std::int64_t>> open) {
    if (--budget < 0) return false;
    if (r == d.rows_.size()) {
      // Every document placed and none left cut; or, where that cannot be, every row read (a document cut at
      // the last row's end whose rest is in no row is then the coverage finding it is, as one never placed).
      if (!every_document) return Complete();
      return (!open || RestRead(*open)) && std::find(placed.begin(), placed.end(), false) == placed.end() &&
             Complete();
    }
    const std::span<const Token> row = d.rows_[r];
    const std::int64_t n = static_cast<std::int64_t>(row.size());
    if (i == n) return NextRow(r, open);
    if (i == 0 && open) return Continue(r, *open);
    std::vector<std::int64_t> matching = Matching(row, i);
    const auto first = std::find(placed.begin(), placed.end(), false);
    std::int64_t first_k = first == placed.end() ? -1 : static_cast<std::int64_t>(first - placed.begin());
    if (std::find(matching.begin(), matching.end(), first_k) == matching.end()) first_k = -1;
    // Where the row's encodings tell documents that both match apart, the one they mark goes first.
    d.PreferEncoded(r, i, matching);
    if (first_k >= 0 && !matching.empty() && d.EndEvidence(r, i, matching.front()) > d.EndEvidence(r, i, first_k))
      first_k = matching.front();
    if (first_k >= 0 && Place(r, i, first_k)) return true;
    if (i == 0 && d.split_) {  // a row that starts inside a document (rows out of stream order)
      for (const DerivedSpan& piece : d.ContinuedPieces(row, claimed)) {
        const std::int64_t size = static_cast<std::int64_t>(d.docs_[static_cast<std::size_t>(piece.document)].size());
        std::optional<std::pair<std::int64_t, std::int64_t>> next;
        if (piece.doc_offset + piece.length < size) next = {piece.document, piece.doc_offset + piece.length};
        if (With(piece, r, next)) return true;
      }
    }
    if (AllEqual(row.subspan(static_cast<std::size_t>(i)), pad_id) && !(borne_out && !d.PaddingBorneOut(r, i))) {
      // padding to the row's end
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
    std::optional<std::pair<std::int64_t, std::int64_t>> next;
    if (m < static_cast<std::int64_t>(rest.size()) && d.split_) next = {k, offset + m};
    if (m > 0 && With({k, 0, m, offset}, r, next)) return true;
    // rows out of stream order: the row need not continue the previous one
    return d.split_ && RowFrom(r, 0, std::nullopt);
  }

  // Document k at slot i (cut at the row's end, then continued in the next row where the policy splits).
  bool Place(std::size_t r, std::int64_t i, std::int64_t k) {
    const std::int64_t size = static_cast<std::int64_t>(d.docs_[static_cast<std::size_t>(k)].size());
    const std::int64_t m = std::min(size, static_cast<std::int64_t>(d.rows_[r].size()) - i);
    std::optional<std::pair<std::int64_t, std::int64_t>> next;
    if (m < size && d.split_) next = {k, m};
    placed[static_cast<std::size_t>(k)] = true;
    if (With({k, static_cast<std::int64_t>(i), m, 0}, r, next)) return true;
    placed[static_cast<std::size_t>(k)] = false;
    return false;
  }

  // The unplaced documents that match at slot i, in the documents' order. Of documents placed whole that are
  // the same tokens (both equal the row's slots) and have no piece anywhere yet, only the first: any reading
  // with another is the same reading with the two swapped, and trying each would multiply the search by the
  // number of ways to order them (a stream of one-token documents of the pad id).
  std::vector<std::int64_t> Matching(std::span<const Token> row, std::int64_t i) const {
    std::vector<std::int64_t> out;
    const auto candidates = d.by_first_.find(row[static_cast<std::size_t>(i)]);
    if (candidates == d.by_first_.end()) return out;
    std::vector<std::pair<std::int64_t, std::int64_t>> whole;  // (size, kind) of the fresh documents taken whole
    for (std::int64_t k : candidates->second) {
      const auto& doc = d.docs_[static_cast<std::size_t>(k)];
      const std::int64_t size = static_cast<std::int64_t>(doc.size());
      const std::int64_t m = std::min<std::int64_t>(size, static_cast<std::int64_t>(row.size()) - i);
      if (placed[static_cast<std::size_t>(k)] || (m != size && !d.cut_) || CommonPrefix(row, i, doc) != m) continue;
      if (m == size && claimed[static_cast<std::size_t>(k)].empty()) {
        const std::pair<std::int64_t, std::int64_t> alike{size, d.kinds_.empty() ? 0 : d.kinds_[static_cast<std::size_t>(k)]};
        if (std::find(whole.begin(), whole.end(), alike) != whole.end()) continue;
        whole.push_back(alike);
      }
      out.push_back(k);
    }
    return out;
  }
};

bool SpanDerivation::Solve(Token pad_id) {
  // First a reading that places every document and bears out the rows' evidence; then, where the greedy reading
  // did not place every document, one that does; then one that reads every row with no token twice (a document
  // the packer dropped, as Megatron drops a stream's tail, is then the coverage finding it is). A greedy
  // reading that placed every document stays where the evidence bears out no other: what it contradicts is
  // then what the checks find.
  const bool complete = misses_ == 0 && Unplaced() == 0;
  struct Tier {
    bool every_document, borne_out;
  };
  for (const Tier tier : {Tier{true, true}, Tier{true, false}, Tier{false, false}}) {
    if (!tier.borne_out && complete) break;
    if (!tier.every_document && misses_ == 0) break;
    Search search{*this, pad_id, {}, std::vector<std::vector<DerivedSpan>>(rows_.size()), {}, {},
                  tier.every_document, tier.borne_out};
    for (const auto& doc : docs_) {
      search.placed.push_back(doc.empty());
      search.claimed.emplace_back();
    }
    if (search.RowFrom(0, 0, std::nullopt)) {
      spans_ = std::move(search.found);
      placed_ = std::move(search.placed);
      misses_ = 0;
      contradicted_ = 0;
      ++choices_;
      borne_out_ = tier.borne_out;
      return true;
    }
  }
  return false;
}

std::vector<std::vector<std::vector<DerivedSpan>>> SpanDerivation::OtherReadings(Token pad_id, std::size_t limit) const {
  std::vector<std::vector<std::vector<DerivedSpan>>> others;
  if (choices_ == 0 || limit == 0 || misses_ > 0 || Unplaced() > 0) return others;  // one reading, or none complete
  Search search{*this, pad_id, {}, std::vector<std::vector<DerivedSpan>>(rows_.size()), {}, {}, true, borne_out_};
  for (const auto& doc : docs_) {
    search.placed.push_back(doc.empty());
    search.claimed.emplace_back();
  }
  search.others = &others;
  search.chosen = &spans_;
  search.limit = limit;
  search.RowFrom(0, 0, std::nullopt);
  if (left_) {
    std::vector<std::vector<DerivedSpan>> moved;
    for (auto& reading : others) reading = Shifted(reading, moved);
  }
  return others;
}

void TargetSlots(std::span<const Token> labels, std::optional<std::span<const double>> loss_mask, Token ignore_index,
                 std::vector<std::uint8_t>& out) {
  out.resize(labels.size());
  for (std::size_t k = 0; k < labels.size(); ++k) {
    out[k] = labels[k] != ignore_index && (!loss_mask || k >= loss_mask->size() || (*loss_mask)[k] != 0);
  }
}

}  // namespace packoracle::jobs
