// row_documents.h: a batch's documents read from its rows alone, as pieces.
#include "packoracle/jobs/row_documents.h"

#include <algorithm>
#include <string>

namespace packoracle::jobs {
namespace {

// Whether a slot is a target as the producer wrote it: a label that is not ignored, and a loss_mask that is
// not 0 where there is one.
bool Target(const RowFields& row, std::size_t i, Token ignore_index) {
  return row.labels[i] != ignore_index && (row.loss_mask.empty() || row.loss_mask[i] != 0);
}

// The slots that may be padding, read from the pad ids: pad_id and an ignored label; under
// `reading.pad_labelled_pad` also those labelled with the pad id itself that carry no target (Megatron's pads; a
// slot labelled with another token predicts it: a document's, such as an EOD that is also the pad id).
std::vector<bool> PadSlots(const RowFields& row, const Policy& policy, const PadReading& reading) {
  const std::size_t n = row.input_ids.size();
  std::vector<bool> pad(n);
  for (std::size_t i = 0; i < n; ++i) {
    const bool ignored = row.labels[i] == policy.ignore_index;
    pad[i] = row.input_ids[i] == policy.pad_id &&
             (reading.pad_labelled_pad ? !Target(row, i, policy.ignore_index) && (ignored || row.labels[i] == policy.pad_id)
                                       : ignored);
  }
  return pad;
}

// Whether an encoding of the row marks slot i as padding (a doc id below 0, an attention_mask of 0).
bool MarkedPad(const RowFields& row, std::size_t i) {
  return (!row.doc_ids.empty() && row.doc_ids[i] < 0) || (!row.attention_mask.empty() && row.attention_mask[i] == 0);
}

bool PaddingMarked(const RowFields& row) { return !row.doc_ids.empty() || !row.attention_mask.empty(); }

// Where a row's leading padding ends under `padding: left` (0 under any other padding): the leading run of
// slots an encoding marks as padding where the row has one, else of pad slots (PadSlots). Left padding puts
// every pad slot before the row's first document token (DESIGN §3, PaddingOutOfPlace), so the row's trailing
// slots are never read as padding under it.
std::size_t LeadingPadding(const RowFields& row, const Policy& policy, const PadReading& reading) {
  if (policy.padding != Padding::kLeft) return 0;
  const std::size_t n = row.input_ids.size();
  std::size_t lead = 0;
  if (PaddingMarked(row)) {
    while (lead < n && MarkedPad(row, lead)) ++lead;
    return lead;
  }
  const std::vector<bool> pad = PadSlots(row, policy, reading);
  while (lead < n && pad[lead]) ++lead;
  return lead;
}

// Where a row's trailing padding starts, when the policy pads on the right (PadSlots say which slots may be
// padding). Trailing segments made only of such slots are padding (the encoding gave padding segments of its
// own; at most `reading.pad_segments` of them), and the segment before them ends where they start, even if its
// last tokens look like padding (a document may end with the pad id). Where the encoding was read, that is all (padding
// folded into the last segment stays in it, as its backend reads it), but for Megatron's pads: under
// eod_closes with the pad id as the EOD id every pad is a segment of its own, and the document's closing EOD
// stays in its segment. Where no encoding was read (the row is one segment), padding is the tail of such slots.
std::size_t UnpaddedLength(const RowFields& row, const RowSegments& segments, const Policy& policy,
                           const PadReading& reading) {
  const std::size_t n = row.input_ids.size();
  if (policy.padding == Padding::kNone || policy.padding == Padding::kLeft) return n;
  const std::vector<bool> pad = PadSlots(row, policy, reading);
  std::size_t cut = n;
  std::int64_t k = 0;
  for (auto s = segments.starts.rbegin(); s != segments.starts.rend(); ++s, ++k) {
    const auto start = static_cast<std::size_t>(std::clamp<std::int64_t>(*s, 0, static_cast<std::int64_t>(cut)));
    const bool all_pad = std::all_of(pad.begin() + static_cast<std::ptrdiff_t>(start),
                                     pad.begin() + static_cast<std::ptrdiff_t>(cut), [](bool p) { return p; });
    if (!all_pad || (reading.pad_segments && k >= *reading.pad_segments)) break;
    cut = start;
  }
  if (cut == n && !segments.read) {
    while (cut > 0 && pad[cut - 1]) --cut;
  } else if (cut == n && reading.pad_labelled_pad) {
    // Megatron's padding (the pad id labelled with itself, no target), which its cu_seqlens fold into the last
    // segment
    while (cut > 0 && pad[cut - 1] && row.labels[cut - 1] == policy.pad_id) --cut;
    // the pad id is the EOD id: the run's first slot is the closing EOD of the document before it
    if (cut < n && cut > 0 && policy.eos_id == policy.pad_id && row.input_ids[cut - 1] != policy.pad_id) ++cut;
  }
  return cut;
}

// One policy's reading of rows (the module comment says what it reads).
class RowReader {
 public:
  RowReader(const Policy& policy, const PadReading& reading)
      : policy_(policy),
        reading_(reading),
        stand_in_(StandIn(policy)),
        crosses_(policy.overflow == Overflow::kSplit || policy.stream_stride != StreamStride::kNone),
        pre_shifted_(policy.label_alignment == LabelAlignment::kPreShifted),
        eod_(policy.boundary_source == BoundarySource::kEodCloses ? policy.eos_id : std::nullopt),
        bos_(policy.boundary_source == BoundarySource::kBosOpens ? policy.bos_id : std::nullopt) {}

  void Row(std::size_t r, const RowFields& row, const RowSegments& segments, RowsRead& out) const;

 private:
  std::int64_t ContinuedOffset(const RowFields& row, std::size_t first_slot) const;
  std::optional<Token> NextToken(const RowFields& row, std::size_t e) const;
  bool OpensDocument(const std::vector<Token>& tokens, Token after) const;

  const Policy& policy_;
  PadReading reading_;
  Token stand_in_;
  bool crosses_, pre_shifted_;
  std::optional<Token> eod_, bos_;
};

// 0 where the row's first piece (at `first_slot`, after any left padding) starts its document; else the tokens
// of it before the row (what its positions say where they count on from the document's start, else 1).
std::int64_t RowReader::ContinuedOffset(const RowFields& row, std::size_t first_slot) const {
  if (!crosses_ || first_slot >= row.input_ids.size()) return 0;
  if (bos_) return row.input_ids[first_slot] == *bos_ ? 0 : 1;
  const bool counted = policy_.positions == Positions::kDocReset && !row.positions.empty();
  if (counted) {
    const std::int64_t first = row.positions[first_slot] - policy_.position_base;
    if (first == 0 || (first < 0 && policy_.split_positions != SplitPositions::kRestart)) return 0;
    if (policy_.split_positions != SplitPositions::kRestart) return first;
  }
  return eod_ && !counted ? 0 : 1;
}

// The token after a row that ends inside a document, when the row shows it: its last slot's label under
// pre-shifted labels where that slot carries a target; a stand-in where the policy lets documents cross rows and
// nothing closes the piece (the next row's first token is not in this row).
std::optional<Token> RowReader::NextToken(const RowFields& row, std::size_t e) const {
  if (e == 0) return std::nullopt;
  const bool closed = eod_ && row.input_ids[e - 1] == *eod_;
  if (pre_shifted_ && Target(row, e - 1, policy_.ignore_index)) return row.labels[e - 1];
  if (crosses_ && !closed) return stand_in_;
  return std::nullopt;
}

// Whether the token after the row starts the next document rather than going on with this one.
bool RowReader::OpensDocument(const std::vector<Token>& tokens, Token after) const {
  if (bos_ && after == *bos_) return true;
  if (eod_ && !tokens.empty() && tokens.back() == *eod_) return true;
  return !crosses_;
}

void RowReader::Row(std::size_t r, const RowFields& row, const RowSegments& segments, RowsRead& out) const {
  const std::size_t width = row.input_ids.size();
  std::size_t n = UnpaddedLength(row, segments, policy_, reading_);
  // An encoding that marks padding (a doc id below 0, an attention_mask of 0) says where padding starts: no
  // reading of the pad ids is needed.
  if (policy_.padding == Padding::kRight && PaddingMarked(row)) {
    n = width;
    while (n > 0 && MarkedPad(row, n - 1)) --n;
  }
  // Under left padding the row's documents start where its leading padding ends: a segment the encoding starts
  // inside that padding (positions counting over it) starts there instead.
  const std::size_t lead = LeadingPadding(row, policy_, reading_);
  std::vector<std::size_t> starts;
  for (const std::int64_t s : segments.starts)
    if (s >= 0 && static_cast<std::size_t>(s) >= lead && static_cast<std::size_t>(s) < n)
      starts.push_back(static_cast<std::size_t>(s));
  if (lead < n && (starts.empty() || (lead > 0 && starts.front() != lead))) starts.insert(starts.begin(), lead);
  auto& spans = out.spans.emplace_back();
  const std::string prefix = "row" + std::to_string(r);
  for (std::size_t k = 0; k < starts.size(); ++k) {
    const std::size_t s = starts[k], e = k + 1 < starts.size() ? starts[k + 1] : n;
    Document piece;
    piece.uid = prefix + ".seg" + std::to_string(k);
    const std::int64_t offset = k == 0 ? ContinuedOffset(row, s) : 0;
    piece.tokens.assign(static_cast<std::size_t>(offset), stand_in_);
    piece.supervised.assign(static_cast<std::size_t>(offset), 1);
    for (std::size_t i = s; i < e; ++i) {
      piece.tokens.push_back(row.input_ids[i]);
      // the slot that targets token i: i itself (aligned), or i - 1 (pre-shifted; a row's first token: none)
      const bool targeted = pre_shifted_ ? (i == 0 || Target(row, i - 1, policy_.ignore_index))
                                         : Target(row, i, policy_.ignore_index);
      piece.supervised.push_back(targeted ? 1 : 0);
    }
    const std::optional<Token> after = k + 1 == starts.size() && e == width ? NextToken(row, e) : std::nullopt;
    const bool opens_next = after && OpensDocument(piece.tokens, *after);
    if (after && !opens_next) {
      piece.tokens.push_back(*after);
      // a target the row shows (its last label) is supervised; a stand-in is no target of the row
      piece.supervised.push_back(*after != stand_in_ || Target(row, e - 1, policy_.ignore_index) ? 1 : 0);
    }
    spans.push_back({piece.uid, static_cast<std::int64_t>(s), static_cast<std::int64_t>(e - s), offset});
    out.documents.push_back(std::move(piece));
    if (opens_next) out.documents.push_back(Document{prefix + ".next", {*after}, {1}});
  }
}

}  // namespace

Token StandIn(const Policy& policy) {
  for (Token t = 1; t < 8; ++t) {
    const bool special = t == policy.eos_id || t == policy.bos_id || t == policy.ignore_index ||
                         (policy.padding != Padding::kNone && t == policy.pad_id);
    if (!special) return t;
  }
  return 8;  // (four special ids cannot cover 1..7)
}

RowsRead DocumentsFromSegments(std::span<const RowFields> rows, std::span<const RowSegments> segments,
                               const Policy& policy, const PadReading& reading) {
  const RowReader reader(policy, reading);
  RowsRead out;
  for (std::size_t r = 0; r < rows.size(); ++r) reader.Row(r, rows[r], segments[r], out);
  return out;
}

}  // namespace packoracle::jobs
