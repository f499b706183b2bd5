#include "packoracle/oracle/layout.h"

#include <algorithm>
#include <map>
#include <utility>
#include <string>

#include "packoracle/oracle/error.h"

namespace packoracle {
namespace {

std::string Where(std::size_t row, std::size_t piece) {
  return "row " + std::to_string(row) + ", piece " + std::to_string(piece);
}

std::string Span(std::int64_t begin, std::int64_t length) {
  // The message of an absurd span must not overflow either (UBSan found begin + length past INT64_MAX).
  std::int64_t end = 0;
  const std::string last = __builtin_add_overflow(begin, length, &end)
                               ? std::to_string(begin) + " + " + std::to_string(length)
                               : std::to_string(end);
  return "[" + std::to_string(begin) + ", " + last + ")";
}

void RequirePositiveRowLength(std::int64_t row_length) {
  if (row_length <= 0) throw InputError("row length must be positive, got " + std::to_string(row_length));
  if (row_length > kMaxRowLength) {
    throw InputError("row length " + std::to_string(row_length) + " is above the kit's limit of " +
                     std::to_string(kMaxRowLength) + " slots");
  }
}

// The slots of a row of `content` tokens under the policy's padding and pad_to: the content under padding
// none, L under pad_to row_len, the content rounded up to a multiple of k under multiple_of:k. Under longest
// the row keeps its content here; FitToLongest then widens it to its micro-batch's longest.
void SizeRow(RowLayout& row, std::int64_t content, std::int64_t row_length, const Policy& policy) {
  if (policy.padding == Padding::kNone || policy.pad_to.kind == PadTo::Kind::kLongest) {
    row.length = content;
  } else if (policy.pad_to.kind == PadTo::Kind::kRowLen) {
    row.length = row_length;
  } else {
    const std::int64_t k = policy.pad_to.multiple;
    row.length = (content + k - 1) / k * k;
    if (row.length > row_length) {
      throw InputError("pad_to: multiple_of:" + std::to_string(k) + " rounds a row of " + std::to_string(content) +
                       " tokens up to " + std::to_string(row.length) + " slots, more than the row length " +
                       std::to_string(row_length));
    }
  }
}

// Pads (or trims to content) every row according to the policy (SizeRow). The layouts place content from
// slot 0; under padding left the padding goes before it, so every piece moves right by the row's padding
// (length - content): the row's last token sits in its last slot.
void ApplyPadding(Layout& layout, const Policy& policy) {
  for (auto& row : layout.rows) {
    std::int64_t content = 0;
    for (const auto& piece : row.pieces) content = std::max(content, piece.start + piece.length);
    SizeRow(row, content, layout.row_length, policy);
    if (policy.padding == Padding::kLeft) {
      for (auto& piece : row.pieces) piece.start += row.length - content;
    }
  }
  FitToLongest(layout, policy);  // pad_to longest: every row is still in micro-batch 0 of rank 0
}

// The slots a row's content takes: from slot 0 to its last token under padding right (and none), from its first
// token to the row's end under padding left (a row without pieces takes none).
std::int64_t ContentOf(const RowLayout& row, const Policy& policy) {
  if (row.pieces.empty()) return 0;
  std::int64_t first = row.length, end = 0;
  for (const auto& piece : row.pieces) {
    first = std::min(first, piece.start);
    end = std::max(end, piece.start + piece.length);
  }
  return policy.padding == Padding::kLeft ? row.length - first : end;
}

// Each document's input tokens (InputTokens: under shift: document its last token is no input).
std::vector<std::int64_t> Lengths(const std::vector<EffectiveDocument>& docs, const Policy& policy) {
  std::vector<std::int64_t> out;
  for (const auto& d : docs) out.push_back(InputTokens(policy, d.size()));
  return out;
}

[[noreturn]] void Overlong(const EffectiveDocument& doc, std::size_t index, std::int64_t inputs, std::int64_t row_length) {
  throw InputError("document '" + doc.uid + "' (index " + std::to_string(index) + ") has " + std::to_string(inputs) +
                   (inputs == doc.size() ? " tokens" : " input tokens") + ", longer than the row length " +
                   std::to_string(row_length) + ", and the policy says overflow: error");
}

// The tokens of a document of n that overflow: truncate keeps, min(n, TruncationLength). None at all (rows
// padded to a multiple larger than L) is the refusal PolicyDemandsRefusal names (PadsBeyondTheRow).
std::int64_t Truncated(std::int64_t n, const Policy& policy, std::int64_t row_length) {
  const std::int64_t keep = std::min(n, TruncationLength(policy, row_length));
  if (keep == 0) {
    throw InputError("pad_to: multiple_of:" + std::to_string(policy.pad_to.multiple) +
                     " is larger than the row length " + std::to_string(row_length) + ": a row holds no token");
  }
  return keep;
}

}  // namespace

void ValidateLayout(const std::vector<EffectiveDocument>& documents, const Layout& layout, const Policy& policy) {
  RequirePositiveRowLength(layout.row_length);
  for (std::size_t r = 0; r < layout.rows.size(); ++r) {
    const RowLayout& row = layout.rows[r];
    const std::string where_row = "row " + std::to_string(r);
    if (row.length < 0) throw InputError(where_row + ": negative row length " + std::to_string(row.length));
    if (row.length > layout.row_length) {
      throw InputError(where_row + ": " + std::to_string(row.length) + " slots, more than the row length " +
                       std::to_string(layout.row_length));
    }
    if (row.micro_step < 0 || row.rank < 0 || row.micro_step >= kMaxMicrobatchesPerStep ||
        row.rank >= kMaxMicrobatchesPerStep) {
      throw InputError(where_row + ": micro_step " + std::to_string(row.micro_step) + " and rank " +
                       std::to_string(row.rank) + " must lie in 0.." + std::to_string(kMaxMicrobatchesPerStep - 1));
    }
    std::vector<const Piece*> by_start;
    for (std::size_t p = 0; p < row.pieces.size(); ++p) {
      const Piece& piece = row.pieces[p];
      if (piece.doc < 0 || piece.doc >= static_cast<std::int64_t>(documents.size())) {
        throw InputError(Where(r, p) + ": document index " + std::to_string(piece.doc) + " does not exist (" +
                         std::to_string(documents.size()) + " documents)");
      }
      const EffectiveDocument& doc = documents[static_cast<std::size_t>(piece.doc)];
      if (piece.length <= 0) {
        throw InputError(Where(r, p) + ": piece of document '" + doc.uid + "' has length " +
                         std::to_string(piece.length) + " (a piece holds at least one token)");
      }
      const std::int64_t inputs = InputTokens(policy, doc.size());  // shift: document: the last token is no input
      if (piece.doc_offset < 0 || piece.doc_offset > inputs - piece.length) {  // no sum: no overflow
        throw InputError(Where(r, p) + ": span " + Span(piece.doc_offset, piece.length) + " of document '" +
                         doc.uid + "' lies outside the document's " + std::to_string(inputs) +
                         (inputs == doc.size() ? " tokens" : " input tokens (shift: document: its last token is a "
                                                             "label only)"));
      }
      if (piece.start < 0 || piece.start > row.length - piece.length) {
        throw InputError(Where(r, p) + ": slots " + Span(piece.start, piece.length) + " lie outside the row's " +
                         std::to_string(row.length) + " slots");
      }
      for (const Piece* other : by_start) {
        if (other->doc == piece.doc) {
          throw InputError(where_row + ": two pieces of document '" + doc.uid + "' (tokens " +
                           Span(other->doc_offset, other->length) + " and " + Span(piece.doc_offset, piece.length) +
                           "): a row holds at most one piece of a document");
        }
      }
      by_start.push_back(&piece);
    }
    std::sort(by_start.begin(), by_start.end(), [](const Piece* a, const Piece* b) { return a->start < b->start; });
    for (std::size_t p = 1; p < by_start.size(); ++p) {
      const Piece& prev = *by_start[p - 1];
      const Piece& next = *by_start[p];
      if (next.start < prev.start + prev.length) {
        throw InputError(where_row + ": slots " + Span(prev.start, prev.length) + " (document '" +
                         documents[static_cast<std::size_t>(prev.doc)].uid + "') and " +
                         Span(next.start, next.length) + " (document '" +
                         documents[static_cast<std::size_t>(next.doc)].uid + "') overlap");
      }
    }
  }
  // No token of a document is placed twice anywhere in the step.
  std::vector<std::vector<std::pair<std::int64_t, std::size_t>>> placed(documents.size());  // (offset, row)
  for (std::size_t r = 0; r < layout.rows.size(); ++r)
    for (const Piece& piece : layout.rows[r].pieces)
      for (std::int64_t t = 0; t < piece.length; ++t) placed[static_cast<std::size_t>(piece.doc)].push_back({piece.doc_offset + t, r});
  for (std::size_t d = 0; d < placed.size(); ++d) {
    auto& tokens = placed[d];
    std::sort(tokens.begin(), tokens.end());
    for (std::size_t k = 1; k < tokens.size(); ++k) {
      if (tokens[k].first == tokens[k - 1].first) {
        throw InputError("token " + std::to_string(tokens[k].first) + " of document '" + documents[d].uid +
                         "' is placed twice (rows " + std::to_string(tokens[k - 1].second) + " and " +
                         std::to_string(tokens[k].second) + ")");
      }
    }
  }
}

Layout SequentialLayout(const std::vector<Document>& documents, const Policy& policy, std::int64_t row_length) {
  RequirePositiveRowLength(row_length);
  const auto docs = Effective(documents, policy);
  Layout layout{row_length, {}};
  // The tokens a row holds: L, or ⌊L/k⌋·k under pad_to multiple_of:k (a row of more would be padded past L).
  const std::int64_t capacity = MergeCapacity(policy, row_length);
  std::int64_t space = 0;  // slots left in the current row (0: no open row, or a full one)
  auto new_row = [&] {
    layout.rows.push_back(RowLayout{});
    space = capacity;
  };
  for (std::size_t d = 0; d < docs.size(); ++d) {
    std::int64_t n = InputTokens(policy, docs[d].size());
    if (n == 0) continue;  // an empty document (or one token under shift: document) occupies no slot
    if (n > row_length && policy.overflow == Overflow::kError) Overlong(docs[d], d, n, row_length);
    if (DroppedDocument(policy, row_length, n)) continue;  // overflow: drop: in no row
    if (policy.overflow == Overflow::kTruncate) n = Truncated(n, policy, row_length);
    if (policy.overflow == Overflow::kSplit) {
      // Fill the current row to its end, carry the rest of the document on (split_across_pack).
      std::int64_t offset = 0;
      while (offset < n) {
        if (space == 0) new_row();
        const std::int64_t take = std::min(n - offset, space);
        layout.rows.back().pieces.push_back({static_cast<std::int64_t>(d), offset, capacity - space, take});
        space -= take;
        offset += take;
      }
      continue;
    }
    if (n > space) new_row();
    layout.rows.back().pieces.push_back({static_cast<std::int64_t>(d), 0, capacity - space, n});
    space -= n;
  }
  ApplyPadding(layout, policy);
  return layout;
}

Layout FirstFitLayout(const std::vector<Document>& documents, const Policy& policy, std::int64_t row_length) {
  RequirePositiveRowLength(row_length);
  if (policy.overflow == Overflow::kSplit) throw InputError("first fit does not split documents (overflow: split)");
  const auto docs = Effective(documents, policy);
  const std::int64_t capacity = MergeCapacity(policy, row_length);
  Layout layout{row_length, {}};
  std::vector<std::int64_t> content;  // tokens in each row so far
  for (std::size_t d = 0; d < docs.size(); ++d) {
    std::int64_t n = InputTokens(policy, docs[d].size());
    if (n == 0) continue;  // an empty document (or one token under shift: document) occupies no slot
    if (n > row_length && policy.overflow == Overflow::kError) Overlong(docs[d], d, n, row_length);
    if (DroppedDocument(policy, row_length, n)) continue;  // overflow: drop: in no row
    if (policy.overflow == Overflow::kTruncate) n = Truncated(n, policy, row_length);
    std::size_t r = 0;
    while (r < content.size() && content[r] + n > capacity) ++r;
    if (r == content.size()) {
      layout.rows.push_back(RowLayout{});
      content.push_back(0);
    }
    layout.rows[r].pieces.push_back({static_cast<std::int64_t>(d), 0, content[r], n});
    content[r] += n;
  }
  ApplyPadding(layout, policy);
  return layout;
}

Layout OneDocumentPerRow(const std::vector<Document>& documents, const Policy& policy, std::int64_t row_length) {
  RequirePositiveRowLength(row_length);
  const auto docs = Effective(documents, policy);
  Layout layout{row_length, {}};
  for (std::size_t d = 0; d < docs.size(); ++d) {
    const std::int64_t n = InputTokens(policy, docs[d].size());
    if (n == 0) continue;
    if (n > row_length && policy.overflow == Overflow::kError) Overlong(docs[d], d, n, row_length);
    if (DroppedDocument(policy, row_length, n)) continue;  // overflow: drop: in no row
    const std::int64_t keep = policy.overflow == Overflow::kTruncate ? Truncated(n, policy, row_length) : n;
    for (std::int64_t offset = 0; offset < keep; offset += row_length) {
      RowLayout row;
      row.pieces.push_back({static_cast<std::int64_t>(d), offset, 0, std::min(row_length, keep - offset)});
      layout.rows.push_back(row);
    }
  }
  ApplyPadding(layout, policy);
  return layout;
}

Layout StreamWindows(const std::vector<Document>& documents, const Policy& policy, std::int64_t row_length) {
  RequirePositiveRowLength(row_length);
  const auto docs = Effective(documents, policy);
  const auto lengths = Lengths(docs, policy);
  std::int64_t total = 0;
  for (auto n : lengths) total += n;
  const std::int64_t stride = policy.stream_stride == StreamStride::kLPlus1 ? row_length + 1 : row_length;
  const bool keep_partial = policy.padding != Padding::kNone;
  // Under next_in_stream a window's last token is the previous window's row-end target: a partial window
  // must hold at least one prediction with a target (Megatron makes ceil((N-1)/L) samples); otherwise every
  // remaining token is kept as an input (TRL wrapped).
  const std::int64_t partial_limit = policy.row_end_target == RowEndTarget::kNextInStream ? total - 1 : total;

  // A full window is L inputs, plus the token after them when the last slot predicts it (next_in_stream).
  const std::int64_t window = row_length + (policy.row_end_target == RowEndTarget::kNextInStream ? 1 : 0);

  Layout layout{row_length, {}};
  for (std::int64_t s = 0; s < total; s += stride) {
    const bool full_window = total - s >= window;  // no sum: no overflow
    if (!(full_window || (keep_partial && s < partial_limit))) break;
    // Cut stream tokens [s, min(s + L, N)) into pieces of the documents they belong to.
    RowLayout row;
    const std::int64_t end = total - s > row_length ? s + row_length : total;
    std::int64_t doc_begin = 0;  // stream index of document d's first token
    for (std::size_t d = 0; d < docs.size(); doc_begin += lengths[d], ++d) {
      const std::int64_t lo = std::max(s, doc_begin);
      const std::int64_t hi = std::min(end, doc_begin + lengths[d]);
      if (lo < hi) row.pieces.push_back({static_cast<std::int64_t>(d), lo - doc_begin, lo - s, hi - lo});
    }
    layout.rows.push_back(row);
  }
  if (layout.rows.empty() && total > 0) {
    throw InputError("the stream of " + std::to_string(total) + " tokens is shorter than one window of " +
                     std::to_string(row_length) + " inputs" +
                     (window > row_length ? " and the target after them (" + std::to_string(window) + " tokens)" : "") +
                     (policy.padding != Padding::kNone
                          ? ", and a partial window must hold a prediction with its target: no row can be cut"
                          : ", and padding is none: no full row can be cut"));
  }
  ApplyPadding(layout, policy);
  return layout;
}

Layout DefaultLayout(const std::vector<Document>& documents, const Policy& policy, std::int64_t row_length) {
  if (policy.stream_stride != StreamStride::kNone) return StreamWindows(documents, policy, row_length);
  if (policy.boundary_source == BoundarySource::kNone) return OneDocumentPerRow(documents, policy, row_length);
  if (policy.efficiency == Efficiency::kNoMergeableRows) return FirstFitLayout(documents, policy, row_length);
  return SequentialLayout(documents, policy, row_length);
}

void FitToLongest(Layout& layout, const Policy& policy) {
  if (policy.padding == Padding::kNone || policy.pad_to.kind != PadTo::Kind::kLongest) return;
  std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> longest;  // (micro_step, rank) → its widest content
  for (const auto& row : layout.rows) {
    std::int64_t& width = longest[{row.micro_step, row.rank}];
    width = std::max(width, ContentOf(row, policy));
  }
  for (auto& row : layout.rows) {
    const std::int64_t width = longest[{row.micro_step, row.rank}];
    // Under padding left the content ends at the row's last slot: it moves with the row's end.
    if (policy.padding == Padding::kLeft)
      for (auto& piece : row.pieces) piece.start += width - row.length;
    row.length = width;
  }
}

void AssignMicrobatches(Layout& layout, std::int64_t rows_per_microbatch, std::int64_t dp_world_size,
                        const Policy& policy) {
  AssignMicrobatches(layout, rows_per_microbatch, dp_world_size);
  FitToLongest(layout, policy);
}

void AssignMicrobatches(Layout& layout, std::int64_t rows_per_microbatch, std::int64_t dp_world_size) {
  if (rows_per_microbatch <= 0) {
    throw InputError("rows per micro-batch must be positive, got " + std::to_string(rows_per_microbatch));
  }
  if (dp_world_size <= 0) {
    throw InputError("data-parallel world size must be positive, got " + std::to_string(dp_world_size));
  }
  for (std::size_t k = 0; k < layout.rows.size(); ++k) {
    const std::int64_t m = static_cast<std::int64_t>(k) / rows_per_microbatch;
    layout.rows[k].rank = m % dp_world_size;
    layout.rows[k].micro_step = m / dp_world_size;
  }
}

}  // namespace packoracle
