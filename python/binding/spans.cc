// packoracle._core.SpanDerivation: doc_spans derived from the documents for batches that carry none
// (jobs/span_derivation.h states the reading; packoracle._batch.SpanMatcher wraps it for check_batch, check_step
// and the guard).
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "batch.h"
#include "packoracle/fastcheck/document_check.h"
#include "bindings.h"
#include "convert.h"
#include "packoracle/jobs/span_derivation.h"
#include "packoracle/oracle/error.h"

namespace packoracle::python {
namespace {

using TokenArray = nb::ndarray<const std::int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using FlagArray = nb::ndarray<const std::uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

nb::list SpansToPython(const std::vector<jobs::DerivedSpan>& spans) {
  nb::list out;
  for (const auto& s : spans) out.append(nb::make_tuple(s.document, s.start, s.length, s.doc_offset));
  return out;
}

// Per document, its kind (SpanDerivation::Interchangeable: placing one or another document of the same tokens
// and kind is the same reading): the derivation compares tokens itself, so the kind tells supervision apart, a
// hash of the document's flags (0: none given, every token supervised). Empty where no document has flags.
std::vector<std::int64_t> KindsOf(const std::vector<DocumentRef>& documents) {
  std::vector<std::int64_t> kinds;
  if (std::none_of(documents.begin(), documents.end(), [](const DocumentRef& d) { return d.supervised != nullptr; }))
    return kinds;
  kinds.reserve(documents.size());
  for (const DocumentRef& d : documents) {
    std::uint64_t h = d.supervised ? 1469598103934665603ULL : 0;  // FNV-1a over the flags
    for (std::size_t k = 0; d.supervised && k < d.supervised_size; ++k)
      h = (h ^ static_cast<std::uint64_t>(d.supervised[k])) * 1099511628211ULL;
    kinds.push_back(static_cast<std::int64_t>(h));
  }
  return kinds;
}

}  // namespace

void BindSpans(nb::module_& m) {
  nb::class_<PolicySpanDerivation>(
      m, "SpanDerivation",
      "doc_spans derived from the documents, row by row (jobs/span_derivation.h); spans are tuples "
      "(document index, start, length, doc_offset).")
      .def(
          "__init__",
          [](PolicySpanDerivation* self, nb::handle documents, nb::handle policy) {
            // The documents as the packer places them (the policy's delimiters added: the core's Effective), their
            // inputs only (InputTokens: under shift: document a document's last token is in no row).
            const Policy p = PolicyFromPython(policy, "policy");
            std::vector<std::vector<Token>> docs;
            std::vector<Document> read;
            std::vector<DocumentRef> refs;
            // Where the policy adds no delimiter a document's effective tokens are its own (AddsDelimiters):
            // checked as Effective checks them, and copied without its per-token supervision flags; or, for a
            // _core.Documents (kept alive with the derivation: keep_alive below), viewed where it holds them.
            const bool adds = AddsDelimiters(p);
            const std::vector<DocumentRef>& given = DocumentRefsOf(documents, "documents", read, refs);
            // A _core.Documents' readers say which documents hold no token below 0 (DocumentSet::non_negative).
            const std::vector<bool>* scanned =
                &given != &refs ? &nb::cast<const DocumentSet&>(documents).non_negative() : nullptr;
            const auto non_negative = [&](std::size_t k) { return scanned && (*scanned)[k]; };
            if (!adds && &given != &refs) {
              std::vector<std::span<const Token>> views;
              views.reserve(given.size());
              for (std::size_t k = 0; k < given.size(); ++k) {
                const DocumentRef& d = given[k];
                fastcheck::ValidateDocumentFast(d, p, Delimiters::kAdd, non_negative(k));
                views.emplace_back(d.tokens, static_cast<std::size_t>(InputTokens(p, static_cast<std::int64_t>(d.size))));
              }
              new (self) PolicySpanDerivation(std::move(views), p);
              self->Interchangeable(KindsOf(given));
              return;
            }
            docs.reserve(given.size());
            for (std::size_t k = 0; k < given.size(); ++k) {
              const DocumentRef& d = given[k];
              std::vector<Token> tokens;
              if (adds) {
                tokens = std::move(fastcheck::EffectiveFast(d, p, Delimiters::kAdd, non_negative(k)).tokens);
              } else {
                fastcheck::ValidateDocumentFast(d, p, Delimiters::kAdd, non_negative(k));
                tokens.assign(d.tokens, d.tokens + d.size);
              }
              tokens.resize(static_cast<std::size_t>(InputTokens(p, static_cast<std::int64_t>(tokens.size()))));
              docs.push_back(std::move(tokens));
            }
            new (self) PolicySpanDerivation(std::move(docs), p);
            self->Interchangeable(KindsOf(given));
          },
          nb::arg("documents"), nb::arg("policy"), nb::keep_alive<1, 2>(),
          "documents: [{doc_uid, tokens, supervised?}] as given to the packer; policy: a preset name or a dict.")
      .def(
          "match",
          [](PolicySpanDerivation& self, const TokenArray& row, std::optional<FlagArray> targets,
             std::optional<std::vector<std::int64_t>> starts, std::optional<std::int64_t> padding_from,
             std::int64_t padding_until) {
            std::span<const std::uint8_t> flags;
            if (targets) {
              if (targets->shape(0) != row.shape(0)) {
                throw InputError("SpanDerivation.match: targets has " + std::to_string(targets->shape(0)) +
                                 " entries, the row has " + std::to_string(row.shape(0)));
              }
              flags = {targets->data(), targets->shape(0)};
            }
            jobs::SpanDerivation::StartsOf of;
            if (starts) {
              of = [&starts, padding_from, padding_until] {
                jobs::RowEvidence evidence(*starts);
                evidence.padding_from = padding_from;
                evidence.padding_until = padding_until;
                return evidence;
              };
            }
            return SpansToPython(self.Match({row.data(), row.shape(0)}, flags, of));
          },
          nb::arg("row"), nb::arg("targets").none(), nb::arg("starts").none() = nb::none(),
          nb::arg("padding_from").none() = nb::none(), nb::arg("padding_until") = 0,
          "The spans of the next row of the step. starts, padding_from, padding_until: the row's evidence "
          "(row_evidence); "
          "starts: where the row's own encodings start segments "
          "(encoded_segments), which choose between documents that both match at a slot; None: unknown.")
      .def("finish", [](PolicySpanDerivation& self) { return self.Finish(); },
           "Once the step's rows are matched: where the greedy reading leaves them unexplained, solve under the "
           "derivation's policy (the rule check_step, check_batch and verify share); True when the rows' spans "
           "were replaced.")
      .def_prop_ro("misses", [](const PolicySpanDerivation& self) { return self.misses(); }, "Rows whose rest is neither a document nor padding.")
      .def("unplaced", [](const PolicySpanDerivation& self) { return self.Unplaced(); }, "Documents never placed.")
      .def("solve", [](PolicySpanDerivation& self, Token pad_id) { return self.Solve(pad_id); }, nb::arg("pad_id"),
           "Search for a reading that places every document; True when the rows' spans were replaced.")
      .def(
          "other_readings",
          [](const PolicySpanDerivation& self, std::size_t limit) {
            nb::list out;
            for (const auto& reading : self.OtherReadings(self.policy.pad_id, limit)) {
              nb::list rows;
              for (const auto& spans : reading) rows.append(SpansToPython(spans));
              out.append(rows);
            }
            return out;
          },
          nb::arg("limit"),
          "Up to `limit` other readings of every row matched that place every document (each a list of rows' "
          "spans), where the derivation met a choice: what an audit must also hold the rows to.")
      .def(
          "rows",
          [](const PolicySpanDerivation& self) {
            nb::list out;
            for (const auto& spans : self.rows()) out.append(SpansToPython(spans));
            return out;
          },
          "Every row's spans, in the order matched.");
}

}  // namespace packoracle::python
