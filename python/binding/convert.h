// Python objects ↔ the kit's C++ types, for the extension module packoracle._core.
//
// The Python layer (packoracle/_batch.py) hands over micro-batches already in the canonical field names of
// DESIGN §5, one dict per row of 1-D arrays (numpy views of the caller's tensors: nothing is copied before
// this point). Here each array is read through its buffer, whatever its integer or bool dtype, straight into
// the kit's row vectors. Every problem is an InputError (ValueError in Python) naming where and the field:
// "batch: rows[2]: field 'labels' has 7 entries, input_ids has 8".
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>

#include "packoracle/oracle/document.h"
#include "packoracle/oracle/policy.h"
#include "packoracle/properties/candidate.h"

namespace packoracle::python {

namespace nb = nanobind;

// A policy from a preset name, or a dict of §3 keys (a "preset" key first applied, every other key over it).
Policy PolicyFromPython(nb::handle policy, const std::string& where);
// The fully resolved policy as a dict (every key, canonical order).
nb::dict PolicyToPython(const Policy& policy);

// A buffer export held open (PyObject_GetBuffer until destruction): its exporter can neither free nor resize
// the memory while a DocumentRef views it.
struct BufferRelease {
  void operator()(Py_buffer* buffer) const noexcept {
    PyBuffer_Release(buffer);
    delete buffer;
  }
};
using HeldBuffer = std::unique_ptr<Py_buffer, BufferRelease>;

// Documents already read into C++ in one call (packoracle._core.Documents): the guard's features (read without
// a dict or an array per document in Python, into storage of the set's own), or check_batch's {uid: tokens}
// (plain_documents: each contiguous int64 numpy array viewed where the caller holds it, the set holding its
// buffer export and its uid; token lists and other forms read into the set's storage). The audit reads refs();
// what needs Documents (to_list, effective_documents) reads documents(), which copies the viewed ones as they are
// then. A viewed document is the caller's memory: a Report kept after check_batch draws what the arrays hold
// when it draws (as it draws the batch's rows), and keeps the arrays alive while it lives.
class DocumentSet {
 public:
  DocumentSet() = default;
  DocumentSet(DocumentSet&&) = default;
  DocumentSet& operator=(DocumentSet&&) = default;
  DocumentSet(const DocumentSet&) = delete;  // its buffers are held once
  DocumentSet& operator=(const DocumentSet&) = delete;

  // `non_negative`: no token below 0 (the reader scanned them: non_negative()).
  void Add(Document document, bool non_negative = false);
  // A document viewed in `tokens` (a 1-D buffer of int64) under `uid` (a str): both held for the set's life.
  // `deferred`: its tokens not scanned yet, taken as non-negative until ScanDeferred says (plain_documents'
  // defer_scan).
  void AddView(nb::handle uid, HeldBuffer tokens, bool non_negative = false, bool deferred = false);
  // No viewed document whose scan was deferred holds a negative token (one pass over each): false where one does,
  // and what was read of the set taking them as non-negative is void.
  bool ScanDeferred() const;
  bool has_deferred() const;
  std::size_t size() const { return order_.size(); }
  // Room for `documents` viewed documents (plain_documents knows the count: no reallocation per document).
  void ReserveViews(std::size_t documents) {
    order_.reserve(documents);
    uids_.reserve(documents);
    buffers_.reserve(documents);
  }
  // Every document, in order, as the audit reads it.
  const std::vector<DocumentRef>& refs() const;
  // Per document of refs(), whether its reader found no token below 0: the documents' check then looks for no
  // negative id (fastcheck::MayRefuse, VerifyOptions::documents_non_negative).
  const std::vector<bool>& non_negative() const;
  // Every document as Documents of the set's own (the viewed ones copied on each call: their memory is the
  // caller's, which may have changed since the last).
  const std::vector<Document>& documents() const;

 private:
  static constexpr std::size_t kViewed = static_cast<std::size_t>(-1);
  struct Entry {
    std::size_t owned = kViewed;  // an index into owned_, or kViewed (`view` then)
    DocumentRef view;
    bool non_negative = false;
    bool deferred = false;  // AddView's
  };
  std::vector<Entry> order_;
  std::vector<Document> owned_;
  std::vector<nb::object> uids_;        // the viewed documents' uids (str: their UTF-8 is viewed)
  std::vector<HeldBuffer> buffers_;     // the viewed documents' tokens (none: every document its own)
  mutable std::vector<DocumentRef> refs_;  // made on first use (owned_'s uids move while it grows)
  mutable std::vector<bool> non_negative_;  // made with refs_
  mutable std::vector<Document> copies_;   // documents(), where some are viewed
  mutable bool refs_made_ = false;
};

// packoracle._core.plain_documents: canonical_documents' common form, a dict {uid: tokens} of str uids and token
// lists or 1-D signed integer arrays, as a DocumentSet (contiguous int64 numpy arrays viewed where they lie);
// None for any other form or a value canonical_documents refuses. `allowed`: the negative ids the tokens may hold.
// `defer_scan`: the contiguous int64 arrays are not scanned for negative tokens here but taken as non-negative
// (DocumentSet::AddView's `deferred`): the caller proves them (a clean audit's token pass read each of them) or
// scans them (DocumentSet::ScanDeferred) before it trusts anything read of them.
nb::object PlainDocuments(nb::handle documents, const std::vector<std::int64_t>& allowed, bool defer_scan = false);

// Documents from a list of {"doc_uid", "tokens", "supervised"?} dicts (packoracle/_batch.py normalizes
// {uid: tokens} mappings and Document objects to this form), or a DocumentSet.
std::vector<Document> DocumentsFromPython(nb::handle documents, const std::string& where);
// The same documents as refs: a DocumentSet's refs() (its viewed documents not copied); any other form read
// into `read`, viewed in `refs`.
const std::vector<DocumentRef>& DocumentRefsOf(nb::handle documents, const std::string& where,
                                               std::vector<Document>& read, std::vector<DocumentRef>& refs);

// A sequence of integers (a list, or an array or tensor of any integer or bool dtype, of any number of
// dimensions: read flat) as int64 values; InputError naming `where` and `field` otherwise.
std::vector<std::int64_t> IntegersFromPython(nb::handle value, const std::string& where, const std::string& field);

// One micro-batch: {"step"?, "micro_step", "rank", "rows": [row, ...], "producer"?}, each row a dict of 1-D
// arrays (input_ids, labels; optionally loss_mask, position_ids, cu_seqlens, seq_lens, doc_ids,
// attention_mask) and "doc_spans": a list of (doc_uid, start, length, doc_offset).
// `reuse`: a micro-batch done with, whose rows' storage the new one is read into (audit_records).
CandidateMicrobatch MicrobatchFromPython(nb::handle microbatch, const std::string& where, CandidateMicrobatch reuse = {});
// One row of a micro-batch, as above; `spans_required` false lets doc_spans be absent (no spans).
CandidateRow RowFromPython(nb::handle row, const std::string& where, bool spans_required = true, CandidateRow reuse = {});

// Whether any of n ids is negative: their bits ORed, the sign bit set exactly when one is (documents.cc; the
// readers of the batch's token fields and of the documents scan with it).
bool AnyNegative(const std::int64_t* ids, std::size_t n);

// A row's doc_spans: a list (or tuple) of {doc_uid, start, length, doc_offset} dicts or 4-tuples, appended
// to `out`; InputError naming `at` and the span otherwise.
void SpansFromPython(nb::handle spans, const std::string& at, std::vector<DocSpan>& out);

// Producer totals from any non-empty subset of {"loss_sum", "denominator", "loss"} (None = not given), with
// "denominator_scope" exactly when "denominator" is given; InputError naming the field otherwise.
ProducerTotals ProducerFromPython(nb::handle producer, const std::string& where);

// C++ → Python, for the callables the kit drives (packer requests, reducer and consumer inputs).
nb::dict RequestToPython(const PackRequest& request);
nb::dict DocumentToPython(const EffectiveDocument& document);  // {"doc_uid", "tokens": array, "supervised": array}
nb::dict RowToPython(const CandidateRow& row);
nb::dict DocSpanToPython(const DocSpan& span);  // {"doc_uid", "start", "length", "doc_offset"}
nb::dict MicrobatchToPython(const CandidateMicrobatch& microbatch);
nb::dict ProducerToPython(const ProducerTotals& totals);

}  // namespace packoracle::python
