// Every document's pieces over a whole dump (verify_internal.h): followed step by step, retired once they
// tile their document, and checked for gaps and overlaps at the end.
#include <algorithm>

#include "verify_internal.h"

namespace packoracle::jobs::verify_internal {

AuditViolation Finding(const Where& where, std::int64_t row, std::int64_t slot, const Violation& v,
                       std::string drawing) {
  return {where.file, where.line, where.step, where.micro_step, where.rank, row, slot, v.invariant, v.sentence,
          v.expected, v.actual, std::move(drawing)};
}

void DocumentPieces::Follow(std::int64_t step, const StepMicrobatches& mbs) {
  for (const auto& [m, file] : mbs) Follow(step, m, file);
}

void DocumentPieces::Follow(std::int64_t step, const MicrobatchRecord& m, const std::string& file) {
  for (std::size_t r = 0; r < m.microbatch.rows.size(); ++r) {
    for (const auto& span : m.microbatch.rows[r].doc_spans) {
      pieces_[span.doc_uid].push_back(
          {span.doc_offset, span.length, {file, m.line, step, m.microbatch.micro_step, m.microbatch.rank},
           static_cast<std::int64_t>(r), span.start});
    }
  }
}

void DocumentPieces::Unfollow(std::int64_t step, const StepMicrobatches& mbs) {
  for (const auto& [m, file] : mbs) {
    for (const auto& row : m.microbatch.rows) {
      for (const auto& span : row.doc_spans) {
        auto list = pieces_.find(span.doc_uid);
        if (list == pieces_.end()) continue;
        while (!list->second.empty() && list->second.back().where.step == step) list->second.pop_back();
        if (list->second.empty()) pieces_.erase(list);
      }
    }
  }
}

// Every document's pieces over the whole dump tile its tokens exactly once. Order across rows and steps is
// not required (samplers shuffle packs and windows); a gap is a dropped token, an overlap a repeated one.
void DocumentPieces::CheckTiling(const DocumentStore& documents, const Policy& policy,
                                 bool partial, const std::string& first_source,
                                 std::vector<AuditViolation>& findings) {
  // A document record whose document is in no row was dropped (unless the dump stops mid-run).
  const bool stream_drops_tail = policy.stream_stride != StreamStride::kNone && policy.padding == Padding::kNone;
  if (!partial && !stream_drops_tail) {
    documents.ForEach([&](const std::string& uid, std::int64_t size) {
      if (pieces_.count(uid) || size == 0) return;
      Violation v;
      v.invariant = Invariant::kCoverage;
      v.sentence = "document '" + uid + "' (" + std::to_string(size) + " token" + (size == 1 ? "" : "s") +
                   ") has a document record but is in no row of the dump (--partial if the dump stops mid-run)";
      findings.push_back(Finding({first_source, 0, -1, -1, -1}, -1, -1, v, ""));
    });
  }
  for (auto& [uid, list] : pieces_) {
    const std::int64_t size = documents.Size(uid);
    if (size < 0) continue;  // reported by the step's coverage check
    TileDocument(uid, list, size, policy, partial, findings);
  }
}

// One document's pieces against its tokens: gaps, overlaps and (unless the dump may stop early) a missing
// tail become coverage findings.
void DocumentPieces::TileDocument(const std::string& uid, std::vector<Piece>& list, std::int64_t size,
                                  const Policy& policy, bool partial, std::vector<AuditViolation>& findings) {
  std::sort(list.begin(), list.end(), [](const Piece& a, const Piece& b) { return a.offset < b.offset; });
  // Windows of stride L+1 never make an input of a window's row-end target; under next_in_stream the
  // stream's last token is only a row-end target.
  const bool skips = policy.stream_stride == StreamStride::kLPlus1;
  std::int64_t next = 0;
  for (const Piece& p : list) {
    if (skips && p.offset == next + 1) next = p.offset;
    if (p.offset != next) {
      Violation v;
      v.invariant = Invariant::kCoverage;
      v.sentence = "document '" + uid + "': tokens [" + std::to_string(std::min(p.offset, next)) + ", " +
                   std::to_string(std::max(p.offset, next)) + ") " +
                   (p.offset > next ? "are in no row of the dump" : "are packed twice");
      v.expected = "token " + std::to_string(next);
      v.actual = "token " + std::to_string(p.offset);
      findings.push_back(Finding(p.where, p.row, p.slot, v, ""));
    }
    next = std::max(next, p.offset + p.length);
  }
  const bool truncation = policy.overflow == Overflow::kTruncate;
  const bool dropped_tail = policy.stream_stride != StreamStride::kNone && policy.padding == Padding::kNone;
  const bool last_is_target = (policy.row_end_target == RowEndTarget::kNextInStream || skips) && next == size - 1;
  if (next < size && !partial && !truncation && !dropped_tail && !last_is_target) {
    Violation v;
    v.invariant = Invariant::kCoverage;
    v.sentence = "document '" + uid + "': tokens [" + std::to_string(next) + ", " + std::to_string(size) +
                 ") are in no row of the dump (--partial if the dump stops mid-run)";
    v.expected = std::to_string(size) + " tokens";
    v.actual = std::to_string(next);
    findings.push_back(Finding(list.back().where, list.back().row, -1, v, ""));
  }
}

void DocumentPieces::RetireFinished(const StepMicrobatches& mbs, DocumentStore& documents) {
  for (const auto& [m, file] : mbs)
    for (const auto& row : m.microbatch.rows)
      for (const auto& span : row.doc_spans) RetireIfTiled(span.doc_uid, documents);
}

void DocumentPieces::RetireFinished(const std::vector<std::string>& uids, DocumentStore& documents) {
  for (const auto& uid : uids) RetireIfTiled(uid, documents);
}

void DocumentPieces::RetireIfTiled(const std::string& uid, DocumentStore& documents) {
  const std::int64_t size = documents.Size(uid);
  auto list = pieces_.find(uid);
  if (size < 0 || list == pieces_.end()) return;
  std::int64_t covered = 0;
  for (const Piece& p : list->second) covered += p.length;
  if (covered != size) return;  // cheap test first; the sort below only when it may be complete
  auto& pieces = list->second;
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.offset < b.offset; });
  std::int64_t next = 0;
  bool exact = true;
  for (const Piece& p : pieces) {
    exact = exact && p.offset == next;
    next = p.offset + p.length;
  }
  if (!exact) return;  // left for CheckTiling at the end, which reports it
  retired_.emplace(uid, documents.Fingerprint(uid));
  pieces_.erase(list);
  documents.Erase(uid);
}

}  // namespace packoracle::jobs::verify_internal
