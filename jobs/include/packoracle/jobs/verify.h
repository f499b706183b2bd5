// The audit of packed-batch dumps (`packoracle verify`, DESIGN §5, §7) as a library call.
//
//   jobs::VerifyOptions options;
//   options.files = {"rank0.jsonl", "rank1.jsonl"};
//   options.preset = "torchtune-packed";
//   const jobs::AuditResult result = jobs::VerifyFiles(options);
//   std::cout << jobs::RenderAuditText(result, options.max_violations);   // what `packoracle verify` prints
//
// Records built in memory go through the same code (and give the same text) with VerifyReaders and a
// fastcheck::MemoryRecordReader per source. Unusable input (a file that cannot be read, records out of step
// order, a policy that does not parse) throws InputError naming the source, the line and the field.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "packoracle/fastcheck/jsonl_reader.h"
#include "packoracle/oracle/policy.h"
#include "packoracle/properties/invariants.h"

namespace packoracle::fastcheck {
class FastStepChecker;  // step_check.h
}  // namespace packoracle::fastcheck

namespace packoracle::jobs {

// How far an audit is (VerifyOptions::progress).
struct VerifyProgress {
  std::int64_t bytes_read = 0;  // of all the files together (0 for readers that cannot tell)
  std::int64_t steps = 0;       // checked so far
};

// The note of an audit of a window of a run (VerifyOptions::window).
inline constexpr std::string_view kWindowNote =
    "coverage over the run not checked: these batches are a window of a run (the guard's step), so a document's "
    "pieces before or after them, its tokens in no row, and a refusal its length demands are not known here";

struct VerifyOptions {
  std::vector<std::string> files;  // packed-batch .jsonl files (VerifyFiles only)
  // The policy the audit requires, instead of the one the headers declare: a preset name, a JSON policy file
  // (a preset and/or keys), or a Policy object; at most one of the three.
  std::string preset;
  std::string policy_file;
  std::optional<Policy> required_policy;
  std::int64_t row_length = 0;  // L; 0: the longest row of each step
  int max_violations = 20;      // violations printed in full by RenderAuditText (all are counted)
  bool partial = false;         // the dump stops mid-run: documents unfinished at its end are not violations
  // The records are a window of a run (one step of a training loop, as the guard sees it; or batches whose
  // documents were read from the rows themselves): a document may have pieces before and after them, so its
  // tiling over the run is not checked (its pieces within the window are), nor a refusal the policy demands
  // of the input (CheckOptions::whole_input), and the report's notes say so.
  bool window = false;
  bool decoder = false;         // also run packing_invariance (the tiny decoder: O(L²) per row, off for speed)
  bool oracle = false;          // the slow path only: nlohmann-json reader (files), CheckCase on every step
  std::string summary;          // write a per-rank summary (JSON) here, for `packoracle merge` (summary.h)
  // Threads reading the files (VerifyFiles, not under `oracle`): 1 reads on the calling thread, as before;
  // more parse ahead while the steps are checked (ParallelBatchReader: all of them on one file, one a file
  // when there are several). The results are the same whatever the number.
  int jobs = 1;
  // A file's step is streamed: its rows are checked by the fast verifier as they are read, and let go, so that
  // memory does not grow with the step. Its micro-batches are also held while they take about this many
  // bytes, so that a small step that fails is reported without a second read; a larger one is read again
  // from the file for its report (0: always read again).
  std::int64_t hold_step_bytes = std::int64_t{16} << 20;
  // Called after every step checked (on the calling thread): how far the audit is, for a progress display.
  std::function<void(const VerifyProgress&)> progress;
  // Where the audit hands back the micro-batch records it is done with (their rows' storage), for a caller
  // that audits again soon (check_batch on every training batch) to read its next rows into: no fresh pages
  // to fault in per call. Null: they are freed.
  std::vector<MicrobatchRecord>* spare_records = nullptr;
  // The fast verifier to check the steps with, for a caller that audits again soon (check_batch on every
  // training batch): its per-row and per-document buffers are reused call to call, not allocated and freed
  // per document. It must not be in use elsewhere while the audit runs. Null: the audit's own.
  fastcheck::FastStepChecker* checker = nullptr;
  // Documents the caller holds, alive and unchanged until the audit returns: read as document records right
  // after the first source's header (line 0, as records built in memory have), viewed where they are instead
  // of copied (check_batch's documents, read once per call). Null: the sources' records alone.
  const std::vector<DocumentRef>* documents = nullptr;
  // Per entry of `documents`, where its reader found no token below 0 (check_batch's id scans): the documents'
  // check then looks for no negative id (fastcheck::MayRefuse). Null: not known for any.
  const std::vector<bool>* documents_non_negative = nullptr;
};


// One violation, located in its source. Coverage findings of a whole document may lack a step (-1), a
// micro-batch (micro_step and rank -1), a row or a slot (-1); a document record in no row has line 0.
struct AuditViolation {
  std::string file;  // the source's name: the file path, or a MemoryRecordReader's name
  std::int64_t line = 0;  // the micro-batch record's line (in memory: its index + 1, unless the caller set it)
  std::int64_t step = -1, micro_step = -1, rank = -1;
  std::int64_t row = -1;  // within its micro-batch
  std::int64_t slot = -1;
  Invariant invariant = Invariant::kShape;
  std::string message;  // the sentence
  std::string expected, actual;
  std::string drawing;  // the row around the violation (the first violation of each row only), or ""
};

// What one optimizer step held and counted.
struct StepSummary {
  std::int64_t step = 0;
  std::int64_t microbatches = 0, rows = 0, slots = 0, tokens = 0;
  double valid_targets = 0;
  double counted = 0;  // what the producers' denominators are compared with: DenominatorCount (oracle/denominator.h)
  std::optional<double> declared_objective, token_mean;
  std::vector<double> reported_denominators;  // the producers', in micro_step, rank order
  // Checks the producers' totals did not allow in this step (a denominator alone checks the count, not the
  // loss): ProducerNotes, packoracle/properties/producer_totals.h.
  std::vector<std::string> notes;
  // Rows the fast verifier's clean-row path took whole (StepVerdict::clean_rows; 0 for a step checked by
  // CheckCase). Every row of a clean step taken so read only values a row of its documents can hold.
  std::int64_t clean_rows = 0;
  // Every document token those rows compared with a slot was >= 0 (StepVerdict::clean_tokens_non_negative).
  bool clean_tokens_non_negative = true;
};

// One sentence of the steps' notes, with how many steps it applies to.
struct AuditNote {
  std::string text;
  std::int64_t steps = 0;
};

struct AuditTotals {
  std::int64_t records = 0;  // records read after the headers
  std::int64_t rows = 0, slots = 0, tokens = 0;
  double valid_targets = 0;
  double utilization = 0;      // tokens / slots
  std::int64_t documents = 0;  // document records read
};

struct AuditResult {
  int exit_code = 0;               // 0 clean, 1 violations (unusable input throws instead)
  std::vector<std::string> files;  // the sources' names, in the order given
  Policy declared_policy;          // the headers'
  Policy required_policy;          // what the audit checked against (the declared one unless required)
  std::vector<std::string> policy_differences;  // "key: declared X, required Y", key by key
  std::vector<AuditViolation> violations;  // kMaxViolationsKept at most, in the order found
  std::map<Invariant, std::int64_t> not_kept;  // found past kMaxViolationsKept: counted by invariant, not kept
  std::vector<StepSummary> steps;
  std::vector<AuditNote> notes;  // the steps' notes, each once, in order of first appearance
  // Invariants not checked because the rows, which carry no doc_spans, can be read from the documents in more
  // than one way and the readings' verdicts differ on them (ReconcileReadings): their findings are left out.
  std::vector<Invariant> ambiguous;
  AuditTotals totals;

  bool clean() const { return violations.empty() && not_kept.empty(); }
  std::int64_t ViolationCount() const;  // every violation found, kept or only counted
  std::map<std::string, std::int64_t> ViolationsPerInvariant() const;  // by invariant name, kept or only counted
};

// Audits the files of options.files (one per rank, or ranks mixed), each read with the fast reader (or the
// nlohmann-json one under options.oracle).
AuditResult VerifyFiles(const VerifyOptions& options);

// Audits records from any readers (one per source, each starting with its header; options.files is not
// read): the same checks, results and text as VerifyFiles.
AuditResult VerifyReaders(std::vector<std::unique_ptr<fastcheck::RecordReader>> sources, const VerifyOptions& options);

// The audit of rows without doc_spans under the reading the derivation chose, held to the audits of the
// other readings the documents allow (jobs/span_derivation.h OtherReadings): an invariant found under some
// readings and not under others is not checked (AuditResult::ambiguous, a note), its findings taken out of
// `chosen`; an invariant every reading finds, or none, stands as `chosen` has it.
AuditResult ReconcileReadings(AuditResult chosen, const std::vector<AuditResult>& others);

// What `packoracle verify` prints, byte for byte: the text for people (the first `max_violations` violations
// in full), or --format json. Both end with a newline.
std::string RenderAuditText(const AuditResult& result, int max_violations);
std::string RenderAuditJson(const AuditResult& result);

}  // namespace packoracle::jobs
