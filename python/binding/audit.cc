// packoracle._core.audit_records / verify_files / draw_*: the audits of `packoracle verify` and `packoracle
// draw`. check_batch and check_step build a dump's records in memory (a header with the policy, the
// micro-batches) and read them through fastcheck::MemoryRecordReader, the documents handed to the audit where
// they are held (VerifyOptions::documents, read as the document records after the header): the same code,
// verdicts and text as a dump file.
#include <algorithm>
#include <memory>
#include <set>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "batch.h"
#include "convert.h"
#include "packoracle/oracle/error.h"
#include "packoracle/fastcheck/document_check.h"
#include "packoracle/fastcheck/memory_reader.h"
#include "packoracle/fastcheck/step_check.h"
#include "packoracle/jobs/draw.h"
#include "packoracle/jobs/verify.h"
#include "packoracle/properties/producer_totals.h"

namespace packoracle::python {
namespace {

// Micro-batch records audit_records keeps for its next call (check_step's many micro-batches need not all
// stay: a step of gradient accumulation would hold them all).
constexpr std::size_t kSpareMicrobatches = 4;

struct InMemory {
  std::string name;
  Policy policy;
  // The documents, delimiters included (the effective documents): read or made effective here (`owned`), or
  // the caller's `_core.Documents` as they are (`given`, alive for the call: the audit views them, and their
  // arrays where they view them).
  std::vector<Document> owned;
  std::vector<DocumentRef> owned_refs;
  const DocumentSet* given = nullptr;
  std::vector<MicrobatchRecord> microbatches;  // their lines are set by Reader
  std::int64_t dp_world_size = 1;
  const std::vector<Document>& documents() const { return given ? given->documents() : owned; }
  const std::vector<DocumentRef>& refs() const { return given ? given->refs() : owned_refs; }
};

// `delimiters_included`: the documents already carry the policy's delimiters (as a dump's do); otherwise they
// are the packer's input and get them here, as the packer adds them. `spare`: micro-batches done with, whose
// rows' storage the new ones are read into. `view`: a micro-batch the core read (a BatchView) is viewed where
// the caller's arrays hold it (MicrobatchRecord::views), for an audit within this call; else copied.
InMemory ReadInMemory(const std::string& name, nb::handle policy, nb::handle documents, nb::handle microbatches,
                      std::int64_t dp_world_size, bool delimiters_included,
                      std::vector<MicrobatchRecord>* spare = nullptr, bool view = false) {
  InMemory in{name, PolicyFromPython(policy, name + ": policy"), {}, {}, nullptr, {}, dp_world_size};
  std::vector<Document> read;
  std::vector<DocumentRef> refs;
  const std::vector<DocumentRef>& given = DocumentRefsOf(documents, name + ": documents", read, refs);
  // Documents that get no delimiters are already as placed: the audit checks them (Effective, kIncluded) once.
  if (!delimiters_included && AddsDelimiters(in.policy)) {
    in.owned.reserve(given.size());
    const DocumentSet* set = &given == &refs ? nullptr : nb::cast<const DocumentSet*>(documents);
    for (std::size_t k = 0; k < given.size(); ++k) {
      // A drawing (not `view`) reads a viewed document as it is now: what its reader found is not assumed.
      const bool non_negative = set && view && set->non_negative()[k];
      EffectiveDocument e = fastcheck::EffectiveFast(given[k], in.policy, Delimiters::kAdd, non_negative);
      in.owned.push_back(Document{std::move(e.uid), std::move(e.tokens), std::move(e.supervised)});
    }
    for (const Document& d : in.owned) in.owned_refs.push_back(DocumentRef::Of(d));
  } else if (&given == &refs) {
    in.owned = std::move(read);  // the refs view its documents, which the move leaves where they are
    in.owned_refs = std::move(refs);
  } else {
    in.given = nb::cast<const DocumentSet*>(documents);  // stays its owner's (Report.svg reads it again): viewed
  }
  if (!nb::isinstance<nb::list>(microbatches)) throw InputError(name + ": expected a list of micro-batches");
  std::size_t k = 0;
  for (nb::handle mb : nb::borrow<nb::list>(microbatches)) {
    const std::string where = name == "batch" ? name : name + ": microbatches[" + std::to_string(k) + "]";
    MicrobatchRecord record;
    if (spare && !spare->empty()) {
      record = std::move(spare->back());
      spare->pop_back();
    }
    record.views.clear();
    if (view && nb::isinstance<BatchView>(mb)) {
      nb::cast<const BatchView&>(mb).View(where, record);
    } else {
      record.microbatch = MicrobatchFromPython(mb, where, std::move(record.microbatch));
    }
    in.microbatches.push_back(std::move(record));
    ++k;
  }
  return in;
}

// The records a dumper would write: header, documents, micro-batches (line = index + 1 among the records).
// `with_documents` false: the document records left out, for an audit that is handed the documents
// themselves (VerifyOptions::documents); the micro-batches' lines are the same either way.
std::unique_ptr<fastcheck::RecordReader> Reader(InMemory& in, bool with_documents) {
  std::vector<PackedBatchRecord> records;
  HeaderRecord header;
  header.producer = {{"system", "python"}, {"component", in.name}};
  header.dp_world_size = in.dp_world_size;
  header.policy = in.policy;  // policy_json ("as written") left null: nothing was written, and no audit reads it
  const std::size_t documents = in.refs().size();  // (documents() would copy the viewed ones)
  records.reserve(1 + (with_documents ? documents : 0) + in.microbatches.size());
  records.emplace_back(std::move(header));
  if (with_documents)
    for (const auto& d : in.documents()) records.emplace_back(DocumentRecord{d});
  std::int64_t line = 1 + static_cast<std::int64_t>(documents);
  for (auto& mb : in.microbatches) {
    mb.line = ++line;
    records.emplace_back(std::move(mb));
  }
  return std::make_unique<fastcheck::MemoryRecordReader>(std::move(records), in.name);
}

// Each row with a violation as (step, row counted over the step's micro-batches in order): what draw's
// --step S --row R selects.
// Per violation, its row counted over its step's micro-batches (-1: no row).
std::vector<std::int64_t> FlatRows(const jobs::AuditResult& result, const std::vector<CandidateMicrobatch>* microbatches) {
  std::vector<std::int64_t> out;
  for (const auto& v : result.violations) {
    if (v.row < 0 || v.step < 0) {
      out.push_back(-1);
      continue;
    }
    std::int64_t flat = v.row;
    if (microbatches) {
      std::int64_t before = 0;
      for (const auto& mb : *microbatches) {
        if (mb.step != v.step) continue;
        if (mb.micro_step == v.micro_step && mb.rank == v.rank) break;
        before += static_cast<std::int64_t>(mb.rows.size());
      }
      flat = before + v.row;
    }
    out.push_back(flat);
  }
  return out;
}

// The rows the violations name, (step, row counted over the step), each once, in order.
nb::list ViolationRows(const jobs::AuditResult& result, const std::vector<std::int64_t>& flat) {
  nb::list out;
  std::set<std::pair<std::int64_t, std::int64_t>> seen;
  for (std::size_t k = 0; k < result.violations.size(); ++k) {
    if (flat[k] < 0) continue;
    if (seen.insert({result.violations[k].step, flat[k]}).second) out.append(nb::make_tuple(result.violations[k].step, flat[k]));
  }
  return out;
}

nb::list ViolationsToPython(const jobs::AuditResult& result) {
  nb::list violations;
  for (const auto& v : result.violations) {
    nb::dict d;
    d["invariant"] = Name(v.invariant);
    d["step"] = v.step;
    d["micro_step"] = v.micro_step;
    d["rank"] = v.rank;
    d["row"] = v.row;
    d["slot"] = v.slot;
    d["expected"] = v.expected;
    d["actual"] = v.actual;
    d["message"] = v.message;
    d["file"] = v.file;
    d["line"] = v.line;
    violations.append(d);
  }
  return violations;
}

// What an audit found, kept in C++: the report's text and JSON are rendered only when asked for.
struct Audit {
  jobs::AuditResult result;
  int max_violations = 20;
  nb::list violations, violation_rows;
  std::vector<std::int64_t> flat_rows;  // per violation (FlatRows)
};

Audit MakeAudit(jobs::AuditResult result, int max_violations, std::vector<std::int64_t> flat_rows) {
  Audit a;
  a.violations = ViolationsToPython(result);
  a.violation_rows = ViolationRows(result, flat_rows);
  a.flat_rows = std::move(flat_rows);
  a.result = std::move(result);
  a.max_violations = max_violations;
  return a;
}

Audit MakeAudit(jobs::AuditResult result, int max_violations, const std::vector<CandidateMicrobatch>* microbatches) {
  std::vector<std::int64_t> flat = FlatRows(result, microbatches);
  return MakeAudit(std::move(result), max_violations, std::move(flat));
}

// packoracle._core.reconcile_readings: jobs::ReconcileReadings on audits of one batch's readings.
Audit ReconcileAudits(const Audit& chosen, const std::vector<const Audit*>& others) {
  std::vector<jobs::AuditResult> results;
  for (const Audit* other : others) results.push_back(other->result);
  jobs::AuditResult reconciled = jobs::ReconcileReadings(chosen.result, results);
  // The violations kept are those of the invariants that stand, in their order: their rows as they were.
  std::vector<std::int64_t> flat;
  for (std::size_t k = 0; k < chosen.result.violations.size(); ++k) {
    const Invariant i = chosen.result.violations[k].invariant;
    if (std::find(reconciled.ambiguous.begin(), reconciled.ambiguous.end(), i) == reconciled.ambiguous.end())
      flat.push_back(chosen.flat_rows[k]);
  }
  return MakeAudit(std::move(reconciled), chosen.max_violations, std::move(flat));
}

// check_batch's id scans, deferred to the audit (BatchView::ids_deferred). A clean audit whose every row the
// clean-row path took has compared every input id with a document's token or the pad id, and every label with
// a target or the ignore index, but the first label of a row under aligned labels (no prediction reads it): the
// documents were read with the same allowed ids, so only those first labels need a look. Anything else scans
// the rows. False: a value the policy does not allow is there (the batch is canonical_microbatch's to read,
// which names it). `result`: null when the audit threw.
bool DeferredIdsAllowed(nb::handle microbatches, const jobs::AuditResult* result) {
  if (!nb::isinstance<nb::list>(microbatches)) return true;  // refused as it is (ReadInMemory)
  bool proven = result && result->clean();
  if (proven) {
    for (const auto& s : result->steps) proven = proven && s.clean_rows == s.rows;
  }
  for (nb::handle mb : nb::borrow<nb::list>(microbatches)) {
    if (!nb::isinstance<BatchView>(mb)) continue;
    const auto& view = nb::cast<const BatchView&>(mb);
    if (!view.ids_deferred) continue;
    if (!(proven ? view.FirstLabelsAllowed() : view.IdsAllowed())) return false;
  }
  return true;
}

// check_plain_batch's scan of the documents for negative tokens, deferred (PlainDocuments' defer_scan). A clean
// audit whose every row the clean-row path took has compared each token its spans place with a slot, and found
// none negative (StepSummary::clean_tokens_non_negative); if those spans place as many tokens as the documents
// it audited hold (`refs`: as audited, delimiters added), they place every token of every document (a clean step
// places none twice), so none is negative. Where they place fewer (a truncated tail, a stream's last token read
// only as a target, a document in no row that the policy excuses, the last token under shift: document), or
// anything else, the documents are scanned. False: one holds a negative token (the documents are then the Python
// readers' to read, which name what is wrong, or take the ids the policy allows). `result`, `refs`: null when
// the audit threw.
bool DeferredDocumentsAllowed(nb::handle documents, const jobs::AuditResult* result,
                              const std::vector<DocumentRef>* refs) {
  DocumentSet* set = nullptr;
  if (!nb::try_cast<DocumentSet*>(documents, set, false) || !set || !set->has_deferred()) return true;
  bool proven = result && refs && result->clean();
  std::int64_t placed = 0, held = 0;
  if (proven) {
    for (const auto& s : result->steps) {
      proven = proven && s.clean_rows == s.rows && s.clean_tokens_non_negative;
      placed += s.tokens;
    }
    for (const DocumentRef& d : *refs) held += static_cast<std::int64_t>(d.size);
  }
  return (proven && placed == held) || set->ScanDeferred();
}

// audit_records: the records read (the core's batch views viewed, `spare` lending its storage) and audited;
// None where a deferred id scan finds an id the policy does not allow.
nb::object AuditInMemory(const std::string& name, nb::handle policy, nb::handle documents, nb::handle microbatches,
                         std::int64_t dp_world_size, std::int64_t row_length, bool decoder, bool delimiters_included,
                         bool window, std::vector<MicrobatchRecord>& spare) {
  InMemory in = ReadInMemory(name, policy, documents, microbatches, dp_world_size, delimiters_included, &spare,
                             /*view=*/true);
  // Where each micro-batch sits (step, micro_step, rank, rows): what the violations' rows are counted over.
  std::vector<CandidateMicrobatch> shapes;
  for (const auto& record : in.microbatches) {
    const auto& mb = record.microbatch;
    CandidateMicrobatch shape{mb.step, mb.micro_step, mb.rank, {}, std::nullopt};
    shape.rows.resize(record.views.empty() ? mb.rows.size() : record.views.size());
    shapes.push_back(std::move(shape));
  }
  std::vector<std::unique_ptr<fastcheck::RecordReader>> sources;
  sources.push_back(Reader(in, false));
  jobs::VerifyOptions options;
  options.documents = &in.refs();  // viewed by the audit, not copied into records
  if (in.given) options.documents_non_negative = &in.given->non_negative();
  options.row_length = row_length;
  options.decoder = decoder;
  options.window = window;
  spare.clear();
  options.spare_records = &spare;
  // The fast verifier's buffers, kept per thread like `spare`: its per-document lists are not allocated and
  // freed per document on every call (an audit nested in this one, were the audit ever to call Python, would
  // use one of its own). They keep the size of the largest step the thread checked (a few words a row and a
  // document, and one row's slots), for as long as the thread lives.
  thread_local fastcheck::FastStepChecker checker;
  thread_local bool checker_in_use = false;
  struct Lent {  // the checker given back however the audit ends
    bool lent;
    ~Lent() { if (lent) checker_in_use = false; }
  } lent{!checker_in_use};
  if (lent.lent) options.checker = &checker;
  checker_in_use = true;
  jobs::AuditResult result = jobs::VerifyReaders(std::move(sources), options);
  if (spare.size() > kSpareMicrobatches) spare.resize(kSpareMicrobatches);
  if (!DeferredIdsAllowed(microbatches, &result) || !DeferredDocumentsAllowed(documents, &result, &in.refs()))
    return nb::none();
  return nb::cast(MakeAudit(std::move(result), options.max_violations, &shapes));
}

// packoracle._core.audit_records.
nb::object AuditRecords(const std::string& name, nb::handle policy, nb::handle documents, nb::handle microbatches,
                        std::int64_t dp_world_size, std::int64_t row_length, bool decoder, bool delimiters_included,
                        bool window) {
  // The last audits' micro-batch records, kept per thread: check_batch on every training batch reads its rows
  // into the same storage (8 rows of 8,192 slots: no 2 MiB of fresh pages to fault in each call).
  thread_local std::vector<MicrobatchRecord> spare;
  try {
    return AuditInMemory(name, policy, documents, microbatches, dp_world_size, row_length, decoder,
                         delimiters_included, window, spare);
  } catch (const InputError&) {
    // The Python reader may have stopped first at an id the policy does not allow: its reading says.
    if (!DeferredIdsAllowed(microbatches, nullptr) || !DeferredDocumentsAllowed(documents, nullptr, nullptr)) {
      return nb::none();
    }
    throw;
  }
}

// packoracle._core.check_plain_batch: check_batch's common form (a dict of arrays with doc_spans, documents
// {uid: tokens}) read and audited in one call, as plain_documents, batch_view (defer_ids) and audit_records read
// and audit it one after the other: (audit, documents, batch view), or None where any of the three leaves it to
// the Python readers or raises (check_batch then takes the batch through them, and they name what is wrong).
nb::object CheckPlainBatch(nb::handle batch, nb::handle documents, nb::handle policy,
                           const std::vector<std::int64_t>& input_ids_allowed,
                           const std::vector<std::int64_t>& labels_allowed, const std::vector<std::string>& ignore,
                           std::int64_t step, std::int64_t micro_step, std::int64_t rank, nb::handle producer,
                           std::int64_t dp_world_size, std::int64_t row_length, bool decoder) {
  // The documents' allowed ids are input_ids'; their scan is the audit's (DeferredDocumentsAllowed). Documents
  // the core already read (the guard's documents_from_features) are taken as they are.
  nb::object docs = nb::isinstance<DocumentSet>(documents) ? nb::borrow(documents)
                                                           : PlainDocuments(documents, input_ids_allowed, /*defer_scan=*/true);
  if (docs.is_none()) return nb::none();
  // A batch without doc_spans (a collator's output): derived from the documents in the same call
  // (_core.SpanDerivation, the reading SpanMatcher binds), the rows' own encodings choosing between documents
  // that both match.
  nb::object derivation = nb::none();
  std::vector<std::string> uids;
  std::optional<std::int64_t> ignore_index;
  if (PyDict_CheckExact(batch.ptr())) {
    PyObject* spans = PyDict_GetItemString(batch.ptr(), "doc_spans");  // borrowed; null when absent
    if (spans == nullptr || spans == Py_None) {
      try {
        derivation = nb::type<PolicySpanDerivation>()(docs, policy);
      } catch (const nb::python_error&) {
        return nb::none();  // documents or a policy the derivation refuses: the Python readers name it
      }
      for (const DocumentRef& d : nb::cast<const DocumentSet&>(docs).refs()) uids.emplace_back(d.uid);
      ignore_index = nb::cast<const PolicySpanDerivation&>(derivation).policy.ignore_index;
    }
  }
  nb::object view = BatchViewOf(batch, ignore, input_ids_allowed, labels_allowed, ignore_index, derivation, uids, step,
                                micro_step, rank, producer, /*defer_ids=*/true);
  if (view.is_none()) return nb::none();
  // Rows the documents can be read into otherwise: check_batch's Python path audits every reading.
  if (!derivation.is_none()) {
    const auto& d = nb::cast<const PolicySpanDerivation&>(derivation);
    if (!d.OtherReadings(d.policy.pad_id, 1).empty()) return nb::none();
  }
  nb::list microbatches;
  microbatches.append(view);
  nb::object audit;
  try {
    audit = AuditRecords("batch", policy, docs, microbatches, dp_world_size, row_length, decoder,
                         /*delimiters_included=*/false, /*window=*/false);
  } catch (const InputError&) {
    return nb::none();
  }
  if (audit.is_none()) return nb::none();
  return nb::make_tuple(audit, docs, view);
}

}  // namespace

void BindAudit(nb::module_& m) {
  nb::class_<Audit>(m, "Audit", "What an audit found (packoracle.Report wraps it).")
      .def_ro("violations", &Audit::violations)
      .def_ro("violation_rows", &Audit::violation_rows)
      .def_prop_ro("exit_code", [](const Audit& a) { return a.result.exit_code; })
      .def("text", [](const Audit& a) { return jobs::RenderAuditText(a.result, a.max_violations); },
           "What `packoracle verify` prints.")
      .def("json", [](const Audit& a) { return jobs::RenderAuditJson(a.result); },
           "What `packoracle verify --format json` prints.");
  m.def("reconcile_readings", &ReconcileAudits, nb::arg("chosen"), nb::arg("others"),
        "The audit of rows without doc_spans under the reading chosen, held to the audits of the other readings "
        "the documents allow (SpanDerivation.other_readings): the invariants their verdicts differ on are not "
        "checked (the JSON's `ambiguous`, a note), their violations left out (jobs::ReconcileReadings).");
  m.def("audit_records", &AuditRecords, nb::arg("name"), nb::arg("policy"), nb::arg("documents"),
        nb::arg("microbatches"), nb::arg("dp_world_size"), nb::arg("row_length"), nb::arg("decoder"),
        nb::arg("delimiters_included"), nb::arg("window") = false,
      "check_batch / check_step: records built in memory, audited as a dump (window: a window of a run, "
      "jobs::VerifyOptions::window). None where a batch read with "
      "defer_ids (batch_view) holds an id the policy does not allow: canonical_microbatch's to read.");
  m.def("check_plain_batch", &CheckPlainBatch,
        nb::sig("def check_plain_batch(batch: object, documents: object, policy: object, "
                "input_ids_allowed: collections.abc.Sequence[int], labels_allowed: collections.abc.Sequence[int], "
                "ignore: collections.abc.Sequence[str], step: int, micro_step: int, rank: int, "
                "producer: object | None, dp_world_size: int, row_length: int, decoder: bool) "
                "-> tuple[Audit, Documents, BatchView] | None"),
        nb::arg("batch"), nb::arg("documents"), nb::arg("policy"),
        nb::arg("input_ids_allowed"), nb::arg("labels_allowed"), nb::arg("ignore"), nb::arg("step"),
        nb::arg("micro_step"), nb::arg("rank"), nb::arg("producer").none(), nb::arg("dp_world_size"),
        nb::arg("row_length"), nb::arg("decoder"),
        "check_batch's common form (a dict of arrays, with doc_spans or derived from the documents; documents "
        "{uid: tokens} or a Documents) read and audited in one call, as plain_documents, batch_view (defer_ids) "
        "and audit_records do one after the other: (audit, documents, batch view), or None where any of them "
        "leaves it to the Python readers or raises.");
  m.def(
      "verify_files",
      [](std::vector<std::string> files, nb::handle required, std::int64_t row_length, bool partial, bool decoder,
         bool oracle, std::string summary, int max_violations) {
        jobs::VerifyOptions options;
        options.files = std::move(files);
        if (!required.is_none()) options.required_policy = PolicyFromPython(required, "policy");
        options.row_length = row_length;
        options.partial = partial;
        options.decoder = decoder;
        options.oracle = oracle;
        options.summary = std::move(summary);
        options.max_violations = max_violations;
        return MakeAudit(jobs::VerifyFiles(options), max_violations, nullptr);
      },
      nb::arg("files"), nb::arg("required").none(), nb::arg("row_length"), nb::arg("partial"), nb::arg("decoder"),
      nb::arg("oracle"), nb::arg("summary"), nb::arg("max_violations"), "packoracle verify FILE... as a function.");
  m.def(
      "draw_records",
      [](std::string name, nb::handle policy, nb::handle documents, nb::handle microbatches, std::int64_t dp_world_size,
         bool delimiters_included, std::int64_t row, std::optional<std::int64_t> step) {
        InMemory in = ReadInMemory(name, policy, documents, microbatches, dp_world_size, delimiters_included);
        jobs::DrawOptions options;
        options.row = row;
        options.step = step;
        auto reader = Reader(in, true);
        return jobs::DrawReader(*reader, options).svg;
      },
      nb::arg("name"), nb::arg("policy"), nb::arg("documents"), nb::arg("microbatches"), nb::arg("dp_world_size"),
      nb::arg("delimiters_included"), nb::arg("row"), nb::arg("step").none(), "Report.svg: a row of records built in memory, drawn as an SVG.");
  m.def(
      "draw_file",
      [](std::string file, std::int64_t row, std::optional<std::int64_t> step, std::string svg, bool write_svg,
         nb::handle required) {
        jobs::DrawOptions options;
        options.file = std::move(file);
        options.row = row;
        options.step = step;
        options.svg = std::move(svg);
        options.write_svg = true;  // the SVG is always drawn for the caller; written only when asked
        if (!required.is_none()) options.policy = PolicyFromPython(required, "policy");
        jobs::DrawResult result = jobs::Draw(options);
        if (write_svg) {
          jobs::WriteSvg(result);
        } else {
          result.svg_path.clear();
        }
        return nb::make_tuple(result.text, result.svg, result.svg_path);
      },
      nb::arg("file"), nb::arg("row"), nb::arg("step").none(), nb::arg("svg"), nb::arg("write_svg"),
      nb::arg("required").none(), "packoracle draw FILE --row R as a function: (text, svg, path written or '').");
  m.def(
      "denominator_weighting",
      [](nb::handle policy, const std::vector<std::tuple<std::int64_t, std::size_t, double, double>>& divisions,
         const std::string& where) {
        const Policy p = PolicyFromPython(policy, "policy");
        std::vector<MicrobatchDivision> in;
        for (const auto& [rank, index, counted, denominator] : divisions) in.push_back({rank, index, counted, denominator});
        nb::dict out;
        Weighting w = DenominatorWeighting(p.denominator, in, where);
        out["problems"] = w.problems;
        out["notes"] = w.notes;
        return out;
      },
      nb::arg("policy"), nb::arg("divisions"), nb::arg("where"),
      "guard.check_step: the step's denominators against the policy's, by the core's weighting rule "
      "(properties/producer_totals.h DenominatorWeighting). divisions: (rank, micro-batch, counted, denominator) "
      "for each micro-batch that reported one; counted is what check_batch's step reports as `counted` (the "
      "core's DenominatorCount: valid targets, unshifted labels or positions, as the policy says). {'problems': [...], 'notes': [...]}.");
}

}  // namespace packoracle::python
