// The audit (verify.h): the dump's micro-batches are replayed, step by step, through the same checks as a
// generated case (CheckCase in dump mode: documents with their delimiters, partial coverage, the producer's
// loss sums taken as given), and each document's pieces are followed across steps.
//
// By default the dump is read with simdjson and each step checked by the fast verifier (fastcheck/); a step
// it does not pass is re-run through CheckCase, which writes the report. --oracle uses CheckCase only.
// Memory stays bounded: a document is kept only while pieces of it may still come, packed (DocumentStore),
// and unpacked only for the step being checked.
#include "packoracle/jobs/verify.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "packoracle/fastcheck/document_check.h"
#include "packoracle/fastcheck/jsonl_reader.h"
#include "packoracle/fastcheck/parallel_reader.h"
#include "packoracle/fastcheck/step_check.h"
#include "packoracle/interchange/packed_batch.h"
#include "packoracle/interchange/policy_json.h"
#include "packoracle/jobs/summary.h"
#include "packoracle/oracle.h"
#include "packoracle/properties/invariants.h"
#include "verify_derive.h"
#include "packoracle/fastcheck/memory_reader.h"
#include "verify_internal.h"

namespace packoracle::jobs {
namespace {

using namespace verify_internal;

// Replays one step's dumped micro-batches as a packer's answer.
struct Replay {
  std::vector<CandidateMicrobatch> microbatches;
  PackResult Pack(const PackRequest&) {
    PackResult r;
    r.microbatches = microbatches;
    return r;
  }
};

// One file, read a record ahead.
struct Source {
  std::unique_ptr<fastcheck::RecordReader> reader;
  HeaderRecord header;
  std::optional<MicrobatchRecord> next;  // the next micro-batch, not yet used
  std::int64_t next_offset = -1;         // where its line starts (-1: the reader cannot tell)
  bool done = false;
  PackedBatchRecord scratch;             // what the reader reads into (its storage is reused)
};

// Opens source k of the audit (0 <= k < count). Sources open one after another, each reading its header
// before the next opens, so that the first unusable one is the one reported.
struct SourceOpener {
  std::size_t count = 0;
  std::function<std::unique_ptr<fastcheck::RecordReader>(std::size_t)> open;
  // Source k read again from byte `offset`, where line `line` starts; null when sources cannot be read again
  // (verify then holds each step whole, as it always did).
  std::function<std::unique_ptr<fastcheck::RecordReader>(std::size_t, std::int64_t offset, std::int64_t line)> reopen;
};

class Verifier {
 public:
  // `others`: where the other readings of a source whose spans are derived go (one source only), or null.
  Verifier(const VerifyOptions& options, SourceOpener opener, OtherReadings* others = nullptr)
      : options_(options), opener_(std::move(opener)), others_(others),
        fast_(options.checker ? *options.checker : own_fast_.emplace()) {}
  AuditResult Run();

 private:
  void Open();
  std::optional<Policy> RequiredPolicy() const;
  const std::string& FirstSource() const { return sources_.front().reader->path(); }
  void Advance(Source& s);  // fills s.next with the next micro-batch (documents on the way are kept)
  void HoldDocument(const std::string& path, std::int64_t line, const DocumentRef& document, const Document* owned,
                    bool non_negative);
  void CheckStep(std::int64_t step, StepMicrobatches& microbatches);
  bool Streams() const;
  void StreamStep(std::int64_t step);
  bool StreamMicrobatch(std::int64_t step, MicrobatchRecord& m, StepSummary& summary, std::int64_t& longest);
  StepMicrobatches ReadStepAgain(std::int64_t step, std::int64_t offset, std::int64_t line);
  void CheckGathered(std::int64_t step, StepMicrobatches& mbs);
  bool ResolveDocument(std::string_view uid, fastcheck::DocumentView& view);
  std::uint32_t next_resolved_ = 0;  // the id after the last resolved: the likely next (UidInterner::Find)
  void Report() const;  // options_.progress
  [[noreturn]] void NoDocuments(std::int64_t step) const;
  AuditResult Result();

  const VerifyOptions& options_;
  SourceOpener opener_;
  OtherReadings* others_;
  std::vector<Source> sources_;
  std::vector<std::string> names_;  // the sources' (file paths, or in-memory names)
  Policy declared_, policy_;
  std::vector<std::string> policy_differences_;
  DocumentStore documents_;             // the documents held while pieces of them may still come
  Document expanded_;                   // one held document unpacked, storage reused
  std::vector<AuditViolation> findings_;
  std::map<Invariant, std::int64_t> not_kept_;  // findings past kMaxViolationsKept, counted
  std::vector<StepSummary> steps_;
  DocumentPieces pieces_;
  bool CheckStepFast(const PackRequest& request, const std::set<std::string>& uids,
                     const StepMicrobatches& mbs, StepSummary& summary);
  std::optional<fastcheck::FastStepChecker> own_fast_;  // none where the caller lends one (VerifyOptions::checker)
  fastcheck::FastStepChecker& fast_;
  std::vector<EffectiveDocument> effective_;  // the step's documents, storage reused step to step
  std::int64_t documents_seen_ = 0;           // document records read (documents_ forgets finished ones)
  // Checked micro-batch records, their storage reused by Advance: up to 64 of them and about 16 MiB (a reader
  // that moves its micro-batches out, ParallelBatchReader, never takes them back, and 64 micro-batches of 8
  // rows of 8,192 slots would be 150 MiB).
  std::vector<MicrobatchRecord> spare_;
  std::int64_t spare_bytes_ = 0;
  void Recycle(MicrobatchRecord&& m);
  std::int64_t dp_world_size_ = 1;
  std::int64_t records_ = 0;
  bool spans_derived_ = false;  // some rows came without doc_spans (verify_derive.h)
  std::unique_ptr<SummaryCollector> summary_;  // --summary
  // A streamed step: its documents as the fast verifier found them, and whether it can still pass there (a
  // step that cannot, or that fails, is read again and checked whole).
  fastcheck::StepDocuments step_documents_;
  bool streamable_ = true;
  std::vector<RowView> row_views_;  // a streamed micro-batch's rows as views (RowViews), storage reused
};

// The policy options_ require instead of the declared one, if any.
std::optional<Policy> Verifier::RequiredPolicy() const {
  if (options_.required_policy) return options_.required_policy;
  if (!options_.preset.empty()) return FindPreset(options_.preset).policy;
  if (options_.policy_file.empty()) return std::nullopt;
  std::ifstream in(options_.policy_file);
  if (!in) throw InputError(options_.policy_file + ": cannot open the policy file");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {  // out_of_range too: a number beyond double
    throw InputError(options_.policy_file + ": not JSON (" + e.what() + ")");
  }
  return PolicyFromJson(j, options_.policy_file);
}

void Verifier::Open() {
  for (std::size_t k = 0; k < opener_.count; ++k) {
    Source s;
    s.reader = opener_.open(k);
    if (!s.reader) throw InputError("source " + std::to_string(k) + " is no reader (null)");
    auto first = s.reader->Next();
    s.header = std::get<HeaderRecord>(*first);  // the reader guarantees the header comes first
    names_.push_back(s.reader->path());
    sources_.push_back(std::move(s));
  }
  declared_ = sources_.front().header.policy;
  dp_world_size_ = sources_.front().header.dp_world_size;
  for (std::size_t k = 1; k < sources_.size(); ++k) {
    if (sources_[k].header.policy != declared_) {
      throw InputError(names_[k] + ": its header declares a different policy than " + names_[0] +
                       " (all files of one audit are one run)");
    }
  }
  policy_ = declared_;
  if (auto required = RequiredPolicy()) {
    policy_ = *required;
    // What the dump declares and what the audit requires may differ: say how, key by key.
    const auto have = PolicyKeyValues(declared_);
    const auto want = PolicyKeyValues(policy_);
    for (std::size_t k = 1; k < have.size(); ++k) {
      // A key the required policy never reads (pad_id under padding: none, ...) differs in nothing audited.
      if (have[k].second != want[k].second && WhyKeyMatters(policy_, have[k].first)) {
        policy_differences_.push_back(have[k].first + ": declared " + ToString(have[k].second) + ", required " +
                                      ToString(want[k].second));
      }
    }
  }
  if (!options_.summary.empty()) summary_ = std::make_unique<SummaryCollector>(names_, sources_.front().header, policy_);
  // Rows without doc_spans get them from the documents (the caller's with the first source: Run reads them there).
  // The other readings of one source's rows are audited again (Audit); of several ranks' files, not yet.
  OtherReadings* others = sources_.size() == 1 ? others_ : nullptr;
  if (others) {
    others->header = sources_.front().header;
    others->name = names_.front();
  }
  for (std::size_t k = 0; k < sources_.size(); ++k)
    sources_[k].reader = DeriveMissingSpans(std::move(sources_[k].reader), policy_, k == 0 ? options_.documents : nullptr,
                                            [this](std::string_view uid, Document& out) { return documents_.Expand(uid, out); },
                                            others);
}

// About the bytes a micro-batch record's rows take (six arrays of 8 B a slot).
std::int64_t RecordBytes(const MicrobatchRecord& m) {
  std::int64_t slots = 0;
  for (const auto& row : m.microbatch.rows) slots += static_cast<std::int64_t>(row.input_ids.capacity());
  return 48 * slots;
}

void Verifier::Recycle(MicrobatchRecord&& m) {
  m.views.clear();  // its maker's storage is not the spare record's
  const std::int64_t bytes = RecordBytes(m);
  if (spare_.size() >= 64 || spare_bytes_ + bytes > (std::int64_t{16} << 20)) return;
  spare_bytes_ += bytes;
  spare_.push_back(std::move(m));
}

// A document record: held until its pieces tile it. A repeated doc_uid must repeat the content (a
// multi-rank dump writes a document on each rank that packs a piece of it); two documents under one uid
// make the dump unusable, since which of them a piece belongs to cannot be told.
// `owned`: a record's document, copied (the reader keeps its storage); null: the caller's (VerifyOptions::
// documents), viewed where it is. `non_negative`: its reader found no token below 0.
void Verifier::HoldDocument(const std::string& path, std::int64_t line, const DocumentRef& document,
                            const Document* owned, bool non_negative) {
  const auto refuse = [&](const std::string& what) {
    throw InputError(path + ":" + std::to_string(line) + ": document record: doc_uid '" + std::string(document.uid) +
                     "' was given before with other content (" + what + "): one doc_uid names one document");
  };
  const std::uint32_t id = documents_.Id(document.uid);
  if (const auto retired = documents_.Retired(id)) {
    // its pieces were all seen: a repeated record changes nothing, if it is the same document
    if (*retired != ContentFingerprint(document)) refuse("its tokens or supervised flags differ");
    return;
  }
  switch (owned ? documents_.Put(id, *owned) : documents_.Borrow(id, document)) {
    case DocumentStore::PutResult::kNew:
      ++documents_seen_;
      if (Streams()) {
        // Validated once, as CheckCase's Effective would (its message is CheckCase's to give: a step naming
        // the document is then checked whole), not on every step that names it.
        try {
          fastcheck::ValidateDocumentFast(document, policy_, Delimiters::kIncluded, non_negative);
        } catch (const InputError&) {
          documents_.MarkUnusable(id);
        }
      }
      break;
    case DocumentStore::PutResult::kSame: break;
    case DocumentStore::PutResult::kDiffers:
      refuse(owned ? documents_.Difference(*owned) : documents_.Difference(document.Copy()));
  }
}

void Verifier::Advance(Source& s) {
  s.next.reset();
  s.next_offset = -1;
  for (;;) {
    // A micro-batch record already checked lends its storage to the next one: no allocation per row.
    // (A document line keeps it aside in the reader for the micro-batch line that follows.)
    auto* held = std::get_if<MicrobatchRecord>(&s.scratch);
    if ((!held || held->microbatch.rows.empty()) && !spare_.empty()) {
      spare_bytes_ -= RecordBytes(spare_.back());
      s.scratch = std::move(spare_.back());
      spare_.pop_back();
    }
    if (!s.reader->Next(s.scratch)) break;
    auto* record = &s.scratch;
    ++records_;
    if (auto* d = std::get_if<DocumentRecord>(&*record)) {
      HoldDocument(s.reader->path(), d->line, DocumentRef::Of(d->document), &d->document, false);
    } else if (auto* m = std::get_if<MicrobatchRecord>(&*record)) {
      spans_derived_ = spans_derived_ || m->spans_absent;
      if (!Streams()) Materialize(*m);  // its steps are checked whole, from CandidateRows
      s.next = std::move(*m);
      s.next_offset = s.reader->record_offset();
      return;
    }
  }
  s.done = true;
}

// The fast verifier on one step; true when it passes (the summary is then complete). Anything else (a
// violation, a case it defers, a document CheckCase would refuse) goes to CheckCase for the report.
bool Verifier::CheckStepFast(const PackRequest& request, const std::set<std::string>& uids,
                             const StepMicrobatches& mbs, StepSummary& summary) {
  try {
    ValidatePolicy(request.policy);
    // The step's known documents in uid order, as CheckCase receives them (request.documents).
    std::size_t k = 0;
    for (const auto& uid : uids) {
      if (!documents_.Expand(uid, expanded_)) continue;
      if (k == effective_.size()) effective_.emplace_back();
      effective_[k++] = fastcheck::EffectiveFast(DocumentRef::Of(expanded_), request.policy, Delimiters::kIncluded);
    }
    effective_.resize(k);
  } catch (const InputError&) {
    return false;  // CheckCase throws the same error
  }
  fastcheck::StepDocuments docs;
  for (const auto& d : effective_) docs.docs.push_back(fastcheck::DocumentView::Of(d));
  docs.Index();
  fastcheck::StepInput in;
  in.policy = &request.policy;
  in.row_length = request.row_length;
  in.dp_world_size = request.dp_world_size;
  for (const auto& [m, file] : mbs) in.microbatches.push_back(&m.microbatch);
  in.documents = &docs;
  in.options = DumpStepOptions();
  in.options.whole_input = !options_.window;
  const fastcheck::StepVerdict& v = fast_.Check(in);
  if (v.outcome != fastcheck::Outcome::kPassed) return false;
  summary.valid_targets = v.valid_targets;
  summary.counted = v.counted;
  summary.declared_objective = v.declared_objective;
  summary.token_mean = v.token_mean;
  summary.notes = v.notes;
  summary.clean_rows = v.clean_rows;
  summary.clean_tokens_non_negative = v.clean_tokens_non_negative;
  steps_.push_back(summary);
  return true;
}

void Verifier::CheckStep(std::int64_t step, StepMicrobatches& mbs) {
  std::stable_sort(mbs.begin(), mbs.end(), [](const auto& a, const auto& b) {
    return std::make_pair(a.first.microbatch.micro_step, a.first.microbatch.rank) <
           std::make_pair(b.first.microbatch.micro_step, b.first.microbatch.rank);
  });
  StepSummary summary;
  summary.step = step;
  Replay replay;
  std::set<std::string> uids;
  std::int64_t longest = 0;
  for (const auto& [m, file] : mbs) {
    ++summary.microbatches;
    if (m.microbatch.producer && m.microbatch.producer->denominator)
      summary.reported_denominators.push_back(*m.microbatch.producer->denominator);
    for (const auto& row : m.microbatch.rows) {
      ++summary.rows;
      summary.slots += static_cast<std::int64_t>(row.input_ids.size());
      longest = std::max<std::int64_t>(longest, static_cast<std::int64_t>(row.input_ids.size()));
      for (const auto& span : row.doc_spans) {
        uids.insert(span.doc_uid);
        summary.tokens += span.length;
      }
    }
  }
  pieces_.Follow(step, mbs, documents_);

  PackRequest request;
  request.id = step;
  request.row_length = options_.row_length > 0 ? options_.row_length : std::max<std::int64_t>(1, longest);
  request.dp_world_size = dp_world_size_;
  request.policy = policy_;
  request.delimiters = Delimiters::kIncluded;
  // The fast verifier has no decoder and writes no per-rank summary: with --decoder or --summary every step
  // goes through CheckCase.
  if (!options_.oracle && !options_.decoder && !summary_ && CheckStepFast(request, uids, mbs, summary)) return;
  for (const auto& uid : uids)
    if (documents_.Expand(uid, expanded_)) request.documents.push_back(expanded_);
  for (const auto& [m, file] : mbs) replay.microbatches.push_back(m.microbatch);
  CheckOptions check = DumpStepOptions();
  check.whole_input = !options_.window;
  // The decoder costs O(L²) per row (about 18 ms at L = 2048): 25× slower audits, so it runs on request only.
  check.packing_invariance = options_.decoder;
  std::set<std::int64_t> ranks;
  for (const auto& [m, file] : mbs) ranks.insert(m.microbatch.rank);
  check.partial_ranks = static_cast<std::int64_t>(ranks.size()) < dp_world_size_;  // one rank's dump: see merge
  Candidate candidate = MakeCandidate("dump", std::move(replay));
  const CaseResult result = CheckCase(candidate, request, check);

  if (result.oracle) {
    for (const auto& row : result.oracle->rows) {
      summary.valid_targets += WeightSum(row);
      summary.counted += RowDenominatorCount(row, request.policy);
    }
  }
  summary.declared_objective = result.declared_objective;
  summary.token_mean = result.token_mean;
  summary.notes = result.notes;
  steps_.push_back(summary);
  if (summary_) summary_->AddStep(step, mbs, result);

  // Map each violation's flat row back to its micro-batch and file.
  std::set<std::int64_t> drawn;
  for (const auto& v : result.violations) {
    std::int64_t flat = v.row, mb = -1, row_in_mb = -1;
    if (flat >= 0) {
      std::int64_t k = 0;
      for (std::size_t m = 0; m < mbs.size() && mb < 0; ++m) {
        const auto n = static_cast<std::int64_t>(mbs[m].first.microbatch.rows.size());
        if (flat < k + n) {
          mb = static_cast<std::int64_t>(m);
          row_in_mb = flat - k;
        }
        k += n;
      }
    }
    const auto& [m, file] = mbs[static_cast<std::size_t>(std::max<std::int64_t>(mb, 0))];
    Where where{file, m.line, step, mb >= 0 ? m.microbatch.micro_step : -1, mb >= 0 ? m.microbatch.rank : -1};
    std::string drawing;
    if (flat >= 0 && drawn.insert(flat).second) drawing = DrawViolationRow(result, flat, policy_);
    if (findings_.size() >= kMaxViolationsKept) {
      ++not_kept_[v.invariant];  // counted, not kept: a huge bad dump reports rather than exhausts memory
      continue;
    }
    findings_.push_back(Finding(where, row_in_mb, v.slot, v, drawing));
  }
  for (const auto& [invariant, n] : result.not_kept) not_kept_[invariant] += n;
}

// Streaming needs one source (rank files are merged whole, step by step) and the fast verifier (--oracle,
// --decoder and --summary check every step whole through CheckCase). A source that cannot be read again (the
// records check_batch and check_step build in memory) has its steps held whole as they stream, so a step
// that fails is checked from what was held; its documents are still validated once and viewed where the store
// holds them, not copied out and made effective on every step.
bool Verifier::Streams() const {
  return sources_.size() == 1 && !options_.oracle && !options_.decoder && !summary_;
}

// A streamed step's document, viewed where the store holds it, unpacked by no one; none when Effective
// refuses it (HoldDocument validated it: the step is then checked whole, and CheckCase gives the message).
bool Verifier::ResolveDocument(std::string_view uid, fastcheck::DocumentView& view) {
  const std::uint32_t id = documents_.uids().Find(uid, next_resolved_);
  next_resolved_ = id + 1;
  return documents_.View(id, view);
}

// One step of the single source, streamed: each micro-batch checked by the fast verifier as it is read, then
// let go, so that memory does not grow with the step (gradient accumulation over a hundred micro-batches).
// A small step's micro-batches are also held, so that one that fails needs no second read. A step the fast
// verifier does not pass, or cannot take streamed (micro-batches out of (micro_step, rank) order, a document
// record replaced mid-step), is checked whole by CheckStep, exactly as before: from the held micro-batches,
// or read again from where the step starts.
void Verifier::StreamStep(std::int64_t step) {
  Source& s = sources_.front();
  const std::int64_t first_offset = s.next_offset, first_line = s.next->line;
  streamable_ = true;
  try {
    ValidatePolicy(policy_);
  } catch (const InputError&) {
    streamable_ = false;  // CheckCase throws it
  }
  step_documents_ = fastcheck::StepDocuments{};
  // The caller's documents (check_batch, check_step): all of them held, most of them the step's.
  if (options_.documents) step_documents_.Reserve(options_.documents->size());
  step_documents_.uid_order = true;  // request.documents: the step's uids, a std::set
  step_documents_.resolve = [this](std::string_view uid, fastcheck::DocumentView& view) { return ResolveDocument(uid, view); };
  fastcheck::StepInput in;
  in.policy = &policy_;
  in.row_length = std::max<std::int64_t>(0, options_.row_length);  // 0: the longest row, as CheckStep's request
  in.dp_world_size = dp_world_size_;
  in.documents = &step_documents_;
  in.options = DumpStepOptions();
  in.options.whole_input = !options_.window;
  fast_.Begin(in);
  StepSummary summary;
  summary.step = step;
  StepMicrobatches held;
  std::int64_t held_bytes = 0;
  bool holding = true, places_a_document = false;
  std::pair<std::int64_t, std::int64_t> last{std::numeric_limits<std::int64_t>::min(), 0};
  while (s.next && s.next->microbatch.step == step) {
    MicrobatchRecord m = std::move(*s.next);
    const auto& mb = m.microbatch;
    const std::span<const RowView> rows = RowViews(m, row_views_);
    const std::pair<std::int64_t, std::int64_t> key{mb.micro_step, mb.rank};
    if (key < last) streamable_ = false;  // CheckStep's stable sort would reorder the step
    last = key;
    ++summary.microbatches;
    if (mb.producer && mb.producer->denominator) summary.reported_denominators.push_back(*mb.producer->denominator);
    for (const auto& row : rows) {
      ++summary.rows;
      summary.slots += static_cast<std::int64_t>(row.input_ids.size());
      held_bytes += 48 * static_cast<std::int64_t>(row.input_ids.size());  // about: six arrays of 8 B
      places_a_document = places_a_document || !row.doc_spans.empty();
      for (const auto& span : row.doc_spans) summary.tokens += span.length;
    }
    if (streamable_) {
      pieces_.Follow(step, m, rows, s.reader->path(), documents_);
      fast_.Add(mb, rows);
    }
    if (holding) {
      held.push_back({std::move(m), s.reader->path()});
      if (held_bytes > options_.hold_step_bytes && first_offset >= 0 && opener_.reopen) {  // read again if it fails
        holding = false;
        for (auto& [h, file] : held) Recycle(std::move(h));
        held.clear();
      }
    } else {
      Recycle(std::move(m));
    }
    Advance(s);
  }
  if (s.next && s.next->microbatch.step < step) {
    throw InputError(s.reader->path() + ":" + std::to_string(s.next->line) + ": microbatch record: step " +
                     std::to_string(s.next->microbatch.step) + " comes after step " + std::to_string(step) +
                     " (records must be in step order)");
  }
  if (documents_seen_ == 0 && places_a_document) NoDocuments(step);
  const fastcheck::StepVerdict* v = streamable_ ? &fast_.Finish() : nullptr;
  if (v && v->outcome == fastcheck::Outcome::kPassed) {
    summary.valid_targets = v->valid_targets;
    summary.counted = v->counted;
    summary.declared_objective = v->declared_objective;
    summary.token_mean = v->token_mean;
    summary.notes = v->notes;
    summary.clean_rows = v->clean_rows;
    summary.clean_tokens_non_negative = v->clean_tokens_non_negative;
    steps_.push_back(std::move(summary));
    step_documents_ = fastcheck::StepDocuments{};  // its views go before their documents may
    // Retiring keeps each finished document's fingerprint for a later record of its uid; after the last step
    // none can come (CheckTiling finds a whole tiling clean), so the one step check_batch audits skips it.
    if (s.next) pieces_.RetireFinished(documents_, policy_);
    for (auto& [h, file] : held) Recycle(std::move(h));
    return;
  }
  StepMicrobatches mbs = holding ? std::move(held) : ReadStepAgain(step, first_offset, first_line);
  for (auto& [m, file] : mbs) Materialize(m);  // CheckStep reads CandidateRows
  pieces_.Unfollow(step, mbs, documents_);
  CheckGathered(step, mbs);
}

// The micro-batches of `step` read again from the source, from where the step's first one starts (document
// records on the way were put when first read).
StepMicrobatches Verifier::ReadStepAgain(std::int64_t step, std::int64_t offset, std::int64_t line) {
  const std::string& path = sources_.front().reader->path();
  auto reader = opener_.reopen(0, offset, line);
  StepMicrobatches mbs;
  PackedBatchRecord record;
  while (reader->Next(record)) {
    auto* m = std::get_if<MicrobatchRecord>(&record);
    if (!m) continue;
    if (m->microbatch.step != step) break;
    mbs.push_back({std::move(*m), path});
  }
  return mbs;
}

AuditResult Verifier::Run() {
  Open();
  if (options_.documents) {  // as document records right after the first source's header, not copied
    documents_.Reserve(options_.documents->size());
    const std::vector<bool>* non_negative = options_.documents_non_negative;
    for (std::size_t k = 0; k < options_.documents->size(); ++k) {
      ++records_;
      HoldDocument(FirstSource(), 0, (*options_.documents)[k], nullptr, non_negative && (*non_negative)[k]);
    }
  }
  for (auto& s : sources_) Advance(s);
  for (;;) {
    std::optional<std::int64_t> step;
    for (const auto& s : sources_)
      if (s.next && (!step || s.next->microbatch.step < *step)) step = s.next->microbatch.step;
    if (!step) break;
    if (Streams()) {
      StreamStep(*step);
      if (options_.progress) Report();
      continue;
    }
    StepMicrobatches mbs;
    for (auto& s : sources_) {
      while (s.next && s.next->microbatch.step == *step) {
        mbs.push_back({std::move(*s.next), s.reader->path()});
        Advance(s);
      }
      if (s.next && s.next->microbatch.step < *step) {
        throw InputError(s.reader->path() + ":" + std::to_string(s.next->line) + ": microbatch record: step " +
                         std::to_string(s.next->microbatch.step) + " comes after step " + std::to_string(*step) +
                         " (records must be in step order)");
      }
    }
    // A step that places no document (padding only, or no rows) needs none; one that does needs their records.
    auto places_a_document = [&] {
      for (const auto& [m, file] : mbs)
        for (const auto& row : m.microbatch.rows)
          if (!row.doc_spans.empty()) return true;
      return false;
    };
    if (documents_seen_ == 0 && places_a_document()) NoDocuments(*step);
    CheckGathered(*step, mbs);
    if (options_.progress) Report();
  }
  // In a window of the run, a document's life over the run is not known.
  if (!options_.window) {
    pieces_.CheckTiling(documents_, policy_, options_.partial, options_.row_length, FirstSource(), findings_);
    // Past kMaxViolationsKept the tiling's findings are counted too, not kept (a document placed 100,000 times).
    for (std::size_t k = kMaxViolationsKept; k < findings_.size(); ++k) ++not_kept_[findings_[k].invariant];
    if (findings_.size() > kMaxViolationsKept) findings_.resize(kMaxViolationsKept);
  }
  if (summary_) summary_->Write(options_.summary);
  return Result();
}

void Verifier::NoDocuments(std::int64_t step) const {
  throw InputError(FirstSource() + ": no document records before step " + std::to_string(step) +
                   "'s micro-batches: verify needs the documents to check content and targets (the dumpers in "
                   "python/ write them)");
}

// A step whose micro-batches are all at hand: checked whole (CheckStep), its finished documents let go.
void Verifier::CheckGathered(std::int64_t step, StepMicrobatches& mbs) {
  CheckStep(step, mbs);
  pieces_.RetireFinished(documents_, policy_);
  for (auto& [m, file] : mbs) Recycle(std::move(m));
}

void Verifier::Report() const {
  VerifyProgress p;
  p.steps = static_cast<std::int64_t>(steps_.size());
  for (const auto& s : sources_) p.bytes_read += s.reader->bytes_read();
  options_.progress(p);
}

AuditResult Verifier::Result() {
  if (options_.spare_records) {  // the records done with, including the one a source read into last
    for (auto& s : sources_)
      if (auto* m = std::get_if<MicrobatchRecord>(&s.scratch); m && !m->microbatch.rows.empty()) Recycle(std::move(*m));
    for (auto& m : spare_) options_.spare_records->push_back(std::move(m));
    spare_.clear();
  }
  AuditResult r;
  r.files = names_;
  r.declared_policy = declared_;
  r.required_policy = policy_;
  r.policy_differences = policy_differences_;
  r.violations = std::move(findings_);
  r.not_kept = std::move(not_kept_);
  r.steps = std::move(steps_);
  r.exit_code = r.clean() ? 0 : 1;
  AuditTotals& t = r.totals;
  for (const auto& s : r.steps) {
    for (const auto& text : s.notes) {
      auto it = std::find_if(r.notes.begin(), r.notes.end(), [&](const AuditNote& n) { return n.text == text; });
      if (it == r.notes.end()) it = r.notes.insert(r.notes.end(), AuditNote{text, 0});
      ++it->steps;
    }
    t.rows += s.rows;
    t.slots += s.slots;
    t.tokens += s.tokens;
    t.valid_targets += s.valid_targets;
  }
  if (spans_derived_) r.notes.push_back(AuditNote{kDerivedSpansNote, static_cast<std::int64_t>(r.steps.size())});
  if (options_.window) r.notes.push_back(AuditNote{std::string(kWindowNote), static_cast<std::int64_t>(r.steps.size())});
  t.utilization = t.slots > 0 ? static_cast<double>(t.tokens) / static_cast<double>(t.slots) : 0;
  t.records = records_;
  t.documents = documents_seen_;
  return r;
}

// The checks every entry point makes before a source is opened.
AuditResult Audit(const VerifyOptions& options, SourceOpener opener) {
  if (!options.preset.empty() && !options.policy_file.empty()) {
    throw InputError("--preset and --policy both given: require one policy");
  }
  if (options.required_policy && (!options.preset.empty() || !options.policy_file.empty())) {
    throw InputError("a required policy and --preset or --policy both given: require one policy");
  }
  OtherReadings others;
  AuditResult chosen = Verifier(options, std::move(opener), &others).Run();
  if (others.records.empty()) return chosen;
  // The rows read otherwise: each reading audited as the chosen one was (its own records, the caller's
  // documents), without the caller's progress, summary or reused buffers.
  VerifyOptions again = options;
  again.progress = nullptr;
  again.summary.clear();
  again.spare_records = nullptr;
  again.checker = nullptr;
  std::vector<AuditResult> audits;
  for (auto& records : others.records) {
    records.insert(records.begin(), others.header);
    auto reader = std::make_shared<std::unique_ptr<fastcheck::RecordReader>>(
        std::make_unique<fastcheck::MemoryRecordReader>(std::move(records), others.name));
    audits.push_back(Verifier(again, {1, [reader](std::size_t) { return std::move(*reader); }, nullptr}).Run());
  }
  return ReconcileReadings(std::move(chosen), audits);
}

}  // namespace

std::map<std::string, std::int64_t> AuditResult::ViolationsPerInvariant() const {
  std::map<std::string, std::int64_t> per_invariant;
  for (const auto& v : violations) per_invariant[Name(v.invariant)]++;
  for (const auto& [invariant, n] : not_kept) per_invariant[Name(invariant)] += n;
  return per_invariant;
}

std::int64_t AuditResult::ViolationCount() const {
  std::int64_t n = static_cast<std::int64_t>(violations.size());
  for (const auto& [invariant, count] : not_kept) n += count;
  return n;
}

AuditResult VerifyFiles(const VerifyOptions& options) {
  if (options.files.empty()) throw InputError("no file to verify");
  if (options.jobs < 1) throw InputError("--jobs must be at least 1, got " + std::to_string(options.jobs));
  const bool oracle = options.oracle;
  const auto& files = options.files;
  // Several threads: every file parsed ahead by one pool of `jobs` workers, all of one audit's blocks within
  // kParseAhead bytes of JSON, whatever the number of files, so that eight rank files take the threads of one
  // and no more blocks ahead.
  constexpr std::int64_t kParseAhead = std::int64_t{8} << 20;
  auto pool = options.jobs > 1 && !oracle ? std::make_shared<fastcheck::ReadPool>(kParseAhead, options.jobs) : nullptr;
  SourceOpener opener{files.size(), [&](std::size_t k) -> std::unique_ptr<fastcheck::RecordReader> {
                        if (oracle) return std::make_unique<fastcheck::OracleBatchReader>(files[k]);
                        if (!pool) return std::make_unique<fastcheck::FastBatchReader>(files[k]);
                        return std::make_unique<fastcheck::ParallelBatchReader>(files[k], pool);
                      }, nullptr};
  opener.reopen = [&](std::size_t k, std::int64_t offset, std::int64_t line) -> std::unique_ptr<fastcheck::RecordReader> {
    return std::make_unique<fastcheck::FastBatchReader>(files[k], offset, line);
  };
  return Audit(options, std::move(opener));
}

AuditResult VerifyReaders(std::vector<std::unique_ptr<fastcheck::RecordReader>> sources, const VerifyOptions& options) {
  if (sources.empty()) throw InputError("no source to verify");
  return Audit(options, {sources.size(), [&sources](std::size_t k) { return std::move(sources[k]); }, nullptr});
}

}  // namespace packoracle::jobs
