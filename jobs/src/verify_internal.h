// The parts of the audit (verify.h) shared by its files: where a finding points, the document tiling over
// the whole dump (verify_pieces.cc) and the row drawn under a violation (verify_render.cc). Internal.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "packoracle/interchange/packed_batch.h"
#include "packoracle/jobs/verify.h"
#include "packoracle/oracle.h"
#include "packoracle/oracle/tiling.h"
#include "packoracle/properties/invariants.h"
#include "verify_documents.h"

namespace packoracle::jobs::verify_internal {

// One step's micro-batch records, each with the name of its source.
using StepMicrobatches = std::vector<std::pair<MicrobatchRecord, std::string>>;

struct Where {
  std::string file;
  std::int64_t line;
  std::int64_t step, micro_step, rank;
};

AuditViolation Finding(const Where& where, std::int64_t row, std::int64_t slot, const Violation& v,
                       std::string drawing);

// Every piece of every document over the whole dump (small: five numbers a piece), so that coverage is
// checked across steps: a document's pieces must tile its tokens exactly once.
class DocumentPieces {
 public:
  DocumentPieces();  // takes the thread's spare lists
  DocumentPieces(const DocumentPieces&) = delete;
  DocumentPieces& operator=(const DocumentPieces&) = delete;
  ~DocumentPieces();  // its short lists go to spare_lists_
  // Each span's document by its id in `documents` (given there when the uid has none yet).
  void Follow(std::int64_t step, const StepMicrobatches& mbs, DocumentStore& documents);
  // `rows`: the record's rows as views (RowViews), which its caller has already.
  void Follow(std::int64_t step, const MicrobatchRecord& m, std::span<const RowView> rows, const std::string& file,
              DocumentStore& documents);
  // Forgets the pieces of `step` (the last followed) of the documents these micro-batches name: a streamed
  // step that did not pass is followed again, from its records read again, in CheckStep's order.
  void Unfollow(std::int64_t step, const StepMicrobatches& mbs, const DocumentStore& documents);
  // Documents followed since the last call whose pieces now tile them exactly, with no gap or overlap, are
  // done: their tiling is final (any later piece is a repeat, which the step that carries it reports: its
  // document is no longer known), so they are forgotten and retired from `documents`. This keeps verify's
  // memory to the documents still in flight.
  void RetireFinished(DocumentStore& documents, const Policy& policy);
  // At the end of the dump: the coverage findings of every document still followed.
  // row_length: L as given (0: the longest row of the dump), which a truncated document fills.
  void CheckTiling(const DocumentStore& documents, const Policy& policy, bool partial, std::int64_t row_length,
                   const std::string& first_source, std::vector<AuditViolation>& findings);

 private:
  struct Piece {
    std::int64_t offset, length;
    std::int64_t line, step, micro_step, rank;  // where: as Where, its file an index into files_
    std::int64_t row, slot;
    std::uint32_t file;
  };
  Where At(const Piece& p) const { return {files_[p.file], p.line, p.step, p.micro_step, p.rank}; }
  AuditViolation TilingViolation(const std::string& uid, std::int64_t size, const std::vector<Piece>& list,
                                 const TilingFinding& finding) const;
  void RetireIfTiled(std::uint32_t id, DocumentStore& documents, const Policy& policy);
  // The pieces of document `id` (null: none followed), and a list for them (taken from the lists let go).
  std::vector<Piece>* Pieces(std::uint32_t id) {
    return id < list_of_.size() && list_of_[id] != UidInterner::kNone ? &lists_[list_of_[id]] : nullptr;
  }
  std::vector<Piece>& NewList(std::uint32_t id);
  void Release(std::uint32_t id);
  // Per id, a list index only (4 bytes: it grows with every document of the dump); the lists themselves are
  // those of the documents in flight, each reused once its document is let go (no allocation per document).
  std::vector<std::uint32_t> list_of_;      // by uid id (DocumentStore::Id): its list in lists_, kNone: none
  std::vector<std::vector<Piece>> lists_;   // never empty while in use
  std::vector<std::uint32_t> free_lists_;
  // Lists of audits that ended on this thread, emptied, for the next one's documents: check_batch audits every
  // training batch, and would otherwise allocate a list per document and free it on every call. At most
  // kSpareLists lists with room for at most kSpareRoom pieces are kept (about 300 KiB a thread at most);
  // Release keeps lists of up to kShortList pieces within an audit.
  static constexpr std::size_t kSpareLists = 1024, kSpareRoom = 4, kShortList = 16;
  static thread_local std::vector<std::vector<Piece>> spare_lists_;
  std::vector<std::vector<Piece>> spare_;  // this audit's: the thread's, taken by the constructor
  std::vector<RowView> rows_;                // the step Follow's views of a record's rows, storage reused
  std::vector<std::uint32_t> followed_;     // ids followed since the last RetireFinished (repeats allowed)
  std::vector<std::string> files_;          // the pieces' files (a few)
  std::uint32_t next_id_ = 0;               // the id after the last span's: the likely next (UidInterner::Find)
  std::int64_t longest_row_ = 0;  // the longest row followed: L when verify is not given it
};

// The first 32 slots of a violation's row (its flat index among the step's rows): inputs, documents, the
// oracle's targets and the dumped ones, `!` where they differ; "" when the oracle has no such row.
std::string DrawViolationRow(const CaseResult& result, std::int64_t flat_row, const Policy& policy);

}  // namespace packoracle::jobs::verify_internal
