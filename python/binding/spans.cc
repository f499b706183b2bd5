// packoracle._core.SpanDerivation: doc_spans derived from the documents for batches that carry none
// (jobs/span_derivation.h states the reading; packoracle._batch.SpanMatcher wraps it for check_batch, check_step
// and the guard).
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

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

}  // namespace

void BindSpans(nb::module_& m) {
  nb::class_<jobs::SpanDerivation>(
      m, "SpanDerivation",
      "doc_spans derived from the documents, row by row (jobs/span_derivation.h); spans are tuples "
      "(document index, start, length, doc_offset).")
      .def(
          "__init__",
          [](jobs::SpanDerivation* self, nb::handle documents, nb::handle policy) {
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
            const std::optional<Token> pad = p.padding == Padding::kNone ? std::nullopt : std::optional<Token>(p.pad_id);
            if (!adds && &given != &refs) {
              std::vector<std::span<const Token>> views;
              views.reserve(given.size());
              for (const DocumentRef& d : given) {
                ValidateDocument(d, p);
                views.emplace_back(d.tokens, static_cast<std::size_t>(InputTokens(p, static_cast<std::int64_t>(d.size))));
              }
              new (self) jobs::SpanDerivation(std::move(views), p.overflow, pad);
              return;
            }
            docs.reserve(given.size());
            for (const DocumentRef& d : given) {
              std::vector<Token> tokens;
              if (adds) {
                tokens = std::move(Effective(d, p).tokens);
              } else {
                ValidateDocument(d, p);
                tokens.assign(d.tokens, d.tokens + d.size);
              }
              tokens.resize(static_cast<std::size_t>(InputTokens(p, static_cast<std::int64_t>(tokens.size()))));
              docs.push_back(std::move(tokens));
            }
            new (self) jobs::SpanDerivation(std::move(docs), p.overflow, pad);
          },
          nb::arg("documents"), nb::arg("policy"), nb::keep_alive<1, 2>(),
          "documents: [{doc_uid, tokens, supervised?}] as given to the packer; policy: a preset name or a dict.")
      .def(
          "match",
          [](jobs::SpanDerivation& self, const TokenArray& row, std::optional<FlagArray> targets) {
            std::span<const std::uint8_t> flags;
            if (targets) {
              if (targets->shape(0) != row.shape(0)) {
                throw InputError("SpanDerivation.match: targets has " + std::to_string(targets->shape(0)) +
                                 " entries, the row has " + std::to_string(row.shape(0)));
              }
              flags = {targets->data(), targets->shape(0)};
            }
            return SpansToPython(self.Match({row.data(), row.shape(0)}, flags));
          },
          nb::arg("row"), nb::arg("targets").none(), "The spans of the next row of the step.")
      .def_prop_ro("misses", &jobs::SpanDerivation::misses, "Rows whose rest is neither a document nor padding.")
      .def("unplaced", &jobs::SpanDerivation::Unplaced, "Documents never placed.")
      .def("solve", &jobs::SpanDerivation::Solve, nb::arg("pad_id"),
           "Search for a reading that places every document; True when the rows' spans were replaced.")
      .def(
          "rows",
          [](const jobs::SpanDerivation& self) {
            nb::list out;
            for (const auto& spans : self.rows()) out.append(SpansToPython(spans));
            return out;
          },
          "Every row's spans, in the order matched.");
}

}  // namespace packoracle::python
