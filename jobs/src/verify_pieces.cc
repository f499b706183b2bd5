// Every document's pieces over a whole dump (verify_internal.h): followed step by step, retired once they
// tile their document, and checked for gaps and overlaps at the end.
#include <algorithm>
#include <utility>

#include "verify_internal.h"

namespace packoracle::jobs::verify_internal {

AuditViolation Finding(const Where& where, std::int64_t row, std::int64_t slot, const Violation& v,
                       std::string drawing) {
  return {where.file, where.line, where.step, where.micro_step, where.rank, row, slot, v.invariant, v.sentence,
          v.expected, v.actual, std::move(drawing)};
}

void DocumentPieces::Follow(std::int64_t step, const StepMicrobatches& mbs, DocumentStore& documents) {
  for (const auto& [m, file] : mbs) Follow(step, m, RowViews(m, rows_), file, documents);
}

void DocumentPieces::Follow(std::int64_t step, const MicrobatchRecord& m, std::span<const RowView> rows,
                            const std::string& file, DocumentStore& documents) {
  auto f = std::find(files_.rbegin(), files_.rend(), file);  // the last one, almost always
  const auto file_index = static_cast<std::uint32_t>(f == files_.rend() ? files_.size() : files_.rend() - f - 1);
  if (f == files_.rend()) files_.push_back(file);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    longest_row_ = std::max(longest_row_, static_cast<std::int64_t>(rows[r].input_ids.size()));
    for (const auto& span : rows[r].doc_spans) {
      const std::uint32_t id = documents.Id(span.doc_uid, next_id_);
      next_id_ = id + 1;
      std::vector<Piece>* list = Pieces(id);
      if (!list) list = &NewList(id);
      list->push_back({span.doc_offset, span.length, m.line, step, m.microbatch.micro_step, m.microbatch.rank,
                       static_cast<std::int64_t>(r), span.start, file_index});
      followed_.push_back(id);
    }
  }
}

void DocumentPieces::Unfollow(std::int64_t step, const StepMicrobatches& mbs, const DocumentStore& documents) {
  for (const auto& [m, file] : mbs) {
    for (const auto& row : m.microbatch.rows) {
      for (const auto& span : row.doc_spans) {
        const std::uint32_t id = documents.uids().Find(span.doc_uid);
        std::vector<Piece>* list = Pieces(id);
        if (!list) continue;
        while (!list->empty() && list->back().step == step) list->pop_back();
        if (list->empty()) Release(id);
      }
    }
  }
}

// Every document's pieces over the whole dump tile its tokens exactly once, as TileDocument (tiling.h) states.
// Order across rows and steps is not required (samplers shuffle packs and windows), so the pieces are walked
// by offset; a gap is a dropped token, an overlap a repeated one.
void DocumentPieces::CheckTiling(const DocumentStore& documents, const Policy& policy, bool partial,
                                 std::int64_t row_length, const std::string& first_source,
                                 std::vector<AuditViolation>& findings) {
  // L as CheckStep takes it: given, else the longest row (here of the dump).
  const std::int64_t L = row_length > 0 ? row_length : longest_row_;
  // A dump's stream order is shuffled away: any document may be the stream's last, but only one is (below).
  const TilingContext context{L, /*ends_stream=*/true, /*may_stop_early=*/partial};
  std::vector<std::string> stream_ends;  // documents missing only their last token under next_in_stream
  const UidInterner& uids = documents.uids();
  // The held documents in uid order, as the findings go: those in no row first, then the pieces of the others
  // (a followed document that is not held is reported by the step's coverage check).
  const std::vector<std::uint32_t> held = documents.HeldInUidOrder();
  // A document record whose document is in no row was dropped (unless the dump stops mid-run).
  for (const std::uint32_t id : held) {
    if (Pieces(id)) continue;
    const std::int64_t size = documents.Size(id);
    const DocumentTiling tiling = TileDocument(size, {}, policy, context);
    if (tiling.tail_exemption == TailExemption::kStreamEnd) stream_ends.emplace_back(uids.Uid(id));
    if (tiling.findings.empty()) continue;
    const std::string uid(uids.Uid(id));
    Violation v;
    v.invariant = Invariant::kCoverage;
    v.sentence = "document '" + uid + "' (" + std::to_string(size) + " token" + (size == 1 ? "" : "s") +
                 ") has a document record but is in no row of the dump (--partial if the dump stops mid-run)";
    findings.push_back(Finding({first_source, 0, -1, -1, -1}, -1, -1, v, ""));
  }
  std::vector<TilingPiece> walk;  // storage reused document to document
  for (const std::uint32_t id : held) {
    std::vector<Piece>* list = Pieces(id);
    if (!list) continue;
    const std::int64_t size = documents.Size(id);
    std::sort(list->begin(), list->end(), [](const Piece& a, const Piece& b) { return a.offset < b.offset; });
    walk.clear();
    for (std::size_t k = 0; k < list->size(); ++k) walk.push_back({(*list)[k].offset, (*list)[k].length, k});
    const DocumentTiling tiling = TileDocument(size, walk, policy, context);
    if (tiling.tail_exemption == TailExemption::kStreamEnd) stream_ends.emplace_back(uids.Uid(id));
    if (tiling.findings.empty()) continue;
    const std::string uid(uids.Uid(id));
    for (const TilingFinding& f : tiling.findings) findings.push_back(TilingViolation(uid, size, *list, f));
  }
  if (!partial && stream_ends.size() > 1) {
    // The stream has one last token; every other document's last token is the next window's first input.
    Violation v;
    v.invariant = Invariant::kCoverage;
    v.sentence = std::to_string(stream_ends.size()) + " documents ('" + stream_ends[0] + "', '" + stream_ends[1] +
                 "'" + (stream_ends.size() > 2 ? ", ..." : "") +
                 ") each miss their last token, but under row_end_target: next_in_stream only the stream's last "
                 "token is never an input";
    v.expected = "at most 1";
    v.actual = std::to_string(stream_ends.size());
    findings.push_back(Finding({first_source, 0, -1, -1, -1}, -1, -1, v, ""));
  }
}

// One tiling finding of a document's pieces (sorted by offset) in verify's words, at the piece it was found.
AuditViolation DocumentPieces::TilingViolation(const std::string& uid, std::int64_t size,
                                               const std::vector<Piece>& list, const TilingFinding& f) const {
  Violation v;
  v.invariant = Invariant::kCoverage;
  const std::string tokens = "document '" + uid + "': tokens [" + std::to_string(f.begin) + ", " +
                             std::to_string(f.end) + ") ";
  if (f.fault == TilingFault::kMissingTail) {
    v.sentence = tokens + "are in no row of the dump (--partial if the dump stops mid-run)";
    // f.end: the inputs' end (under shift: document `size` less the label-only last token)
    v.expected = std::to_string(f.end) + (f.end < size ? " input tokens" : " tokens");
    v.actual = std::to_string(f.begin);
  } else if (f.fault == TilingFault::kPlacedDropped) {
    v.sentence = tokens + "are packed, but the document has " + std::to_string(size) +
                 " tokens, more than the row holds, and the policy says overflow: drop (it belongs in no row)";
    v.expected = "in no row";
    v.actual = "token " + std::to_string(f.piece_offset);
  } else {
    v.sentence = tokens + (f.fault == TilingFault::kGap ? "are in no row of the dump" : "are packed twice");
    v.expected = "token " + std::to_string(f.expected);
    v.actual = "token " + std::to_string(f.piece_offset);
  }
  const Piece& at = list[*f.piece];  // a document with pieces: every finding names one
  return Finding(At(at), at.row, f.fault == TilingFault::kMissingTail ? -1 : at.slot, v, "");
}

void DocumentPieces::RetireFinished(DocumentStore& documents, const Policy& policy) {
  // Each document once (a step may follow many pieces of one: a repeated id would sum its pieces again each
  // time, quadratic in them: 100,000 spans of one document took 45 s).
  std::sort(followed_.begin(), followed_.end());
  followed_.erase(std::unique(followed_.begin(), followed_.end()), followed_.end());
  for (const std::uint32_t id : followed_) RetireIfTiled(id, documents, policy);
  followed_.clear();
}

void DocumentPieces::RetireIfTiled(std::uint32_t id, DocumentStore& documents, const Policy& policy) {
  // Tiled: its inputs (InputTokens: under shift: document all but the last token) each in one piece.
  const std::int64_t stored = documents.Size(id);
  const std::int64_t size = stored < 0 ? stored : InputTokens(policy, stored);
  if (size < 0 || !Pieces(id)) return;
  auto& pieces = *Pieces(id);
  std::int64_t covered = 0;
  for (const Piece& p : pieces) covered += p.length;
  if (covered != size) return;  // cheap test first; the sort below only when it may be complete
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.offset < b.offset; });
  std::int64_t next = 0;
  bool exact = true;
  for (const Piece& p : pieces) {
    exact = exact && p.offset == next;
    next = p.offset + p.length;
  }
  if (!exact) return;  // left for CheckTiling at the end, which reports it
  Release(id);
  documents.Retire(id);
}

thread_local std::vector<std::vector<DocumentPieces::Piece>> DocumentPieces::spare_lists_;

// The thread's spare lists taken whole (one thread-local access, not one a document), given back whole.
DocumentPieces::DocumentPieces() : spare_(std::exchange(spare_lists_, {})) {}

DocumentPieces::~DocumentPieces() {
  for (std::vector<Piece>& list : lists_) {
    if (spare_.size() == kSpareLists) break;
    if (list.capacity() == 0 || list.capacity() > kSpareRoom) continue;
    list.clear();
    spare_.push_back(std::move(list));
  }
  std::vector<std::vector<Piece>>& spare = spare_lists_;
  if (spare.size() < spare_.size()) spare.swap(spare_);  // (an audit nested in this one gave back fewer)
}

std::vector<DocumentPieces::Piece>& DocumentPieces::NewList(std::uint32_t id) {
  if (list_of_.size() <= id) list_of_.resize(std::size_t{id} + 1, UidInterner::kNone);
  if (free_lists_.empty()) {
    list_of_[id] = static_cast<std::uint32_t>(lists_.size());
    if (spare_.empty()) return lists_.emplace_back();
    lists_.push_back(std::move(spare_.back()));  // an earlier audit's, empty
    spare_.pop_back();
    return lists_.back();
  }
  list_of_[id] = free_lists_.back();
  free_lists_.pop_back();
  return lists_[list_of_[id]];
}

void DocumentPieces::Release(std::uint32_t id) {
  std::vector<Piece>& list = lists_[list_of_[id]];
  list.clear();
  if (list.capacity() > kShortList) std::vector<Piece>().swap(list);  // a long document's: not kept for a short one
  free_lists_.push_back(list_of_[id]);
  list_of_[id] = UidInterner::kNone;
}

}  // namespace packoracle::jobs::verify_internal
