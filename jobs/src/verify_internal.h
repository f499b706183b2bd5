// The parts of the audit (verify.h) shared by its files: where a finding points, the document tiling over
// the whole dump (verify_pieces.cc) and the row drawn under a violation (verify_render.cc). Internal.
#pragma once

#include <cstdint>
#include <map>
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
  void Follow(std::int64_t step, const StepMicrobatches& mbs);
  void Follow(std::int64_t step, const MicrobatchRecord& m, const std::string& file);
  // Forgets the pieces of `step` (the last followed) of the documents these micro-batches name: a streamed
  // step that did not pass is followed again, from its records read again, in CheckStep's order.
  void Unfollow(std::int64_t step, const StepMicrobatches& mbs);
  // Documents of this step whose pieces now tile them exactly, with no gap or overlap, are done: their tiling
  // is final (any later piece is a repeat, which the step that carries it reports: its document is no longer
  // known), so they are forgotten, from `documents` too. This keeps verify's memory to the documents still
  // in flight.
  void RetireFinished(const StepMicrobatches& mbs, DocumentStore& documents, const Policy& policy);
  void RetireFinished(const std::vector<std::string>& uids, DocumentStore& documents, const Policy& policy);
  // A retired document's content fingerprint (ContentFingerprint), nullopt when it is not retired.
  std::optional<std::uint64_t> Retired(const std::string& uid) const {
    auto it = retired_.find(uid);
    return it == retired_.end() ? std::nullopt : std::optional<std::uint64_t>(it->second);
  }
  // At the end of the dump: the coverage findings of every document still followed.
  // row_length: L as given (0: the longest row of the dump), which a truncated document fills.
  void CheckTiling(const DocumentStore& documents, const Policy& policy, bool partial, std::int64_t row_length,
                   const std::string& first_source, std::vector<AuditViolation>& findings);

 private:
  struct Piece {
    std::int64_t offset, length;
    Where where;
    std::int64_t row, slot;
  };
  static AuditViolation TilingViolation(const std::string& uid, std::int64_t size, const std::vector<Piece>& list,
                                        const TilingFinding& finding);
  void RetireIfTiled(const std::string& uid, DocumentStore& documents, const Policy& policy);
  std::map<std::string, std::vector<Piece>> pieces_;
  std::int64_t longest_row_ = 0;  // the longest row followed: L when verify is not given it
  // documents whose pieces tiled them: uid -> content fingerprint (small), so a later record of the uid is
  // still compared with what was checked
  std::unordered_map<std::string, std::uint64_t> retired_;
};

// The first 32 slots of a violation's row (its flat index among the step's rows): inputs, documents, the
// oracle's targets and the dumped ones, `!` where they differ; "" when the oracle has no such row.
std::string DrawViolationRow(const CaseResult& result, std::int64_t flat_row, const Policy& policy);

}  // namespace packoracle::jobs::verify_internal
