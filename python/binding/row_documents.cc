// packoracle._core.documents_from_segments: a batch's documents read from its rows alone
// (jobs/row_documents.h), for the guard without documents (packoracle.guard._segments binds it).
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "convert.h"
#include "packoracle/jobs/row_documents.h"
#include "packoracle/oracle/error.h"

namespace packoracle::python {
namespace {

using IntRows = nb::ndarray<const std::int64_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using FloatRows = nb::ndarray<const double, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

template <class T, class A>
std::span<const T> RowOf(const std::optional<A>& a, std::size_t r, std::size_t width, const char* name) {
  if (!a) return {};
  if (a->shape(0) <= r || a->shape(1) != width) {
    throw InputError(std::string("documents_from_segments: ") + name + " has another shape than input_ids");
  }
  return {a->data() + r * width, width};
}

nb::list DocumentsToPython(const std::vector<Document>& documents) {
  nb::list out;
  for (const Document& d : documents) {
    nb::dict one;
    one["doc_uid"] = d.uid;
    one["tokens"] = d.tokens;
    one["supervised"] = d.supervised;
    out.append(one);
  }
  return out;
}

nb::list SpansToPython(const std::vector<std::vector<DocSpan>>& rows) {
  nb::list out;
  for (const auto& spans : rows) {
    nb::list row;
    for (const DocSpan& s : spans) row.append(DocSpanToPython(s));
    out.append(row);
  }
  return out;
}

}  // namespace

void BindRowDocuments(nb::module_& m) {
  m.def(
      "documents_from_segments",
      [](const IntRows& input_ids, const IntRows& labels, std::optional<FloatRows> loss_mask,
         std::optional<IntRows> positions, std::optional<IntRows> doc_ids, std::optional<IntRows> attention_mask,
         nb::handle policy, bool pad_labelled_pad, std::optional<std::int64_t> pad_segments,
         const std::vector<std::pair<std::vector<std::int64_t>, bool>>& row_starts) {
        const Policy p = PolicyFromPython(policy, "policy");
        const std::size_t rows = input_ids.shape(0), width = input_ids.shape(1);
        if (labels.shape(0) != rows || labels.shape(1) != width || row_starts.size() != rows) {
          throw InputError("documents_from_segments: labels and row_starts must have input_ids' rows");
        }
        std::vector<jobs::RowFields> fields(rows);
        std::vector<jobs::RowSegments> segments(rows);
        for (std::size_t r = 0; r < rows; ++r) {
          jobs::RowFields& f = fields[r];
          f.input_ids = {input_ids.data() + r * width, width};
          f.labels = {labels.data() + r * width, width};
          f.loss_mask = RowOf<double>(loss_mask, r, width, "loss_mask");
          f.positions = RowOf<std::int64_t>(positions, r, width, "position_ids");
          f.doc_ids = RowOf<std::int64_t>(doc_ids, r, width, "doc_ids");
          f.attention_mask = RowOf<std::int64_t>(attention_mask, r, width, "attention_mask");
          segments[r] = {row_starts[r].first, row_starts[r].second};
        }
        const jobs::RowsRead read = jobs::DocumentsFromSegments(fields, segments, p, {pad_labelled_pad, pad_segments});
        return nb::make_tuple(DocumentsToPython(read.documents), SpansToPython(read.spans));
      },
      nb::arg("input_ids"), nb::arg("labels"), nb::arg("loss_mask").none(), nb::arg("position_ids").none(),
      nb::arg("doc_ids").none(), nb::arg("attention_mask").none(), nb::arg("policy"), nb::arg("pad_labelled_pad"),
      nb::arg("pad_segments").none(), nb::arg("row_starts"),
      "(documents, doc_spans per row): a batch's documents read from its rows alone, one piece per segment "
      "(jobs/row_documents.h). Rows x slots int64 arrays (loss_mask float64), each optional one of input_ids' "
      "shape or None; row_starts: per row (segment starts, read from an encoding).");
}

}  // namespace packoracle::python
