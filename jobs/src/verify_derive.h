// verify on rows without doc_spans (a dump written straight from a collator's output, DESIGN §5): the spans are
// derived from the dump's documents by SpanDerivation (jobs/span_derivation.h), the one reading that
// check_batch, check_step and the guard use, and the audit then runs as on any dump. Internal to verify.cc.
//
// A source whose first micro-batch carries doc_spans is passed through as it streams. One whose first
// micro-batch carries none is read whole (its documents and rows are held: memory grows with the file, unlike
// the streamed audit), its rows matched in record order as one run (a split document continues across
// micro-batches and steps), and replayed with the spans derived. Mixing the two in one file is an InputError.
#pragma once

#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "packoracle/fastcheck/jsonl_reader.h"
#include "packoracle/interchange/packed_batch.h"
#include "packoracle/oracle/document.h"
#include "packoracle/oracle/policy.h"

namespace packoracle::jobs::verify_internal {

// A document the audit holds, by uid, into `out`; false when it holds none under that uid.
using HeldDocument = std::function<bool(std::string_view uid, Document& out)>;

// The other readings of a derived source (SpanDerivation::OtherReadings), each as the source's records after
// its header (its document records included) with that reading's spans: what the audit is run on again, so
// that an invariant the readings judge differently is said ambiguous (ReconcileReadings), not decided by the
// reading that happened to be chosen.
struct OtherReadings {
  HeaderRecord header;  // the source's (the audit fills it in)
  std::string name;     // the source's path, as the chosen reading's findings name it
  std::vector<std::vector<PackedBatchRecord>> records;
};
// At most this many readings besides the chosen one are audited.
inline constexpr std::size_t kOtherReadings = 3;

// `source`: its header already read. `documents`: the caller's (VerifyOptions::documents), read before the
// source's own records; null for none. `held`: the audit's store, which holds every document the source gave
// before its first micro-batch (none is let go before a step is checked): those are fetched from it, not
// copied as they pass. All must outlive the reader returned.
std::unique_ptr<fastcheck::RecordReader> DeriveMissingSpans(std::unique_ptr<fastcheck::RecordReader> source,
                                                            const Policy& policy,
                                                            const std::vector<DocumentRef>* documents,
                                                            HeldDocument held, OtherReadings* others = nullptr);

// The note an audit whose spans were derived carries (AuditResult::notes).
inline constexpr const char* kDerivedSpansNote =
    "doc_spans derived from the documents (the rows carry none): where documents share tokens, the rows' own "
    "boundary encodings choose between readings that explain every row, which may not be the packer's (give "
    "doc_spans to remove any doubt)";

}  // namespace packoracle::jobs::verify_internal
