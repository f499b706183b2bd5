// packoracle._core.batch_view: check_batch's common batch read by the core in one call (batch.h).
//
// canonical_microbatch in Python cost about a fifth of check_batch and of the guard (a dict and a numpy view
// per row and field, a numpy pass per token field for negative ids, the key-side comparison). This reader
// takes the batch dict as the producer wrote it and keeps views of its arrays; the rows are read from them
// once, when the audit reads the micro-batch. It takes exactly the batches canonical_microbatch would accept
// without changing anything, in the forms training batches come in, and answers None for every other
// batch, before reading any state (the span derivation is asked last): canonical_microbatch then reads it
// and names whatever is wrong.
#include "batch.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "convert.h"
#include "packoracle/fastcheck/clones.h"
#include "packoracle/jobs/span_derivation.h"
#include "packoracle/oracle/error.h"
#include "packoracle/properties/backend_attention.h"

namespace packoracle::python {
namespace {

using Array = nb::ndarray<nb::ro>;
using Code = nb::dlpack::dtype_code;

// The view's place for a field given under `name` (its JSON name or an alias, kRowFields), -1 for a name the
// view does not hold: unknown, loss_mask (a float field, left to canonical_microbatch), doc_spans (read apart).
int FieldOf(std::string_view name) {
  const RowField* field = FindRowField(name);
  if (field == nullptr || field->value == RowFieldValue::kReal || field->value == RowFieldValue::kSpan) return -1;
  return static_cast<int>(RowFieldIndex(field->name));
}
bool KeySide(std::string_view name) {
  return std::any_of(kKeySideFields.begin(), kKeySideFields.end(), [&](const auto& f) { return f.name == name; });
}
bool Derived(std::string_view name) {
  return std::find(kDerivedFields.begin(), kDerivedFields.end(), name) != kDerivedFields.end();
}

// torch.utils.dlpack.to_dlpack, looked up once and held for the interpreter's life (null where torch has none).
// Plain statics set under the GIL, not a C++ static's guarded initialiser: an import may release the GIL, and a
// second thread would then wait on the guard holding it.
PyObject* TorchToDlpack() {
  static PyObject* to_dlpack = nullptr;
  static bool looked_up = false;
  if (!looked_up) {
    PyObject* module = PyImport_ImportModule("torch.utils.dlpack");
    PyObject* f = module ? PyObject_GetAttrString(module, "to_dlpack") : nullptr;
    Py_XDECREF(module);
    if (!f) PyErr_Clear();
    if (!looked_up) {  // (another thread may have looked it up while the import let the GIL go)
      to_dlpack = f;
      looked_up = true;
    } else {
      Py_XDECREF(f);
    }
  }
  return to_dlpack;
}

// A torch tensor through torch's own DLPack export (to_dlpack: a third of what numpy() costs, and no numpy array
// made and freed), which torch refuses on another layout or without storage. Not a view with the negative bit
// set: its memory holds the values negated, and to_dlpack exports the memory (numpy() refuses it: the Python
// reader then names it). (A conjugate bit is a complex tensor's: no integer dtype.) False: read it otherwise.
bool TensorFromDlpack(nb::handle tensor, Array& a) {
  static PyObject* const is_neg = PyUnicode_InternFromString("is_neg");
  PyObject* const to_dlpack = TorchToDlpack();
  if (!to_dlpack) return false;
  const nb::object negative = nb::steal(PyObject_CallMethodNoArgs(tensor.ptr(), is_neg));
  const nb::object capsule = negative.ptr() == Py_False ? nb::steal(PyObject_CallOneArg(to_dlpack, tensor.ptr()))
                                                        : nb::object();
  if (!capsule.is_valid()) {
    PyErr_Clear();
    return false;
  }
  return nb::try_cast(capsule, a, false);
}

// An integer or bool array on the CPU whose every value fits an int64 (uint64, floats and anything that is
// not an array are left to the Python reader).
std::optional<Array> IntegerArray(nb::handle value) {
  Array a;
  // A torch tensor through its DLPack export (above), else through its numpy view, which torch refuses for a
  // tensor that requires grad, is on another device or has a dtype numpy has not: the Python reader then takes
  // the batch.
  // The method's name interned once, held for the interpreter's life: hasattr and attr by a C string made a str
  // per call (about 1 µs a batch).
  static PyObject* const numpy = PyUnicode_InternFromString("numpy");
  const bool tensor = std::strcmp(Py_TYPE(value.ptr())->tp_name, "Tensor") == 0;
  if (tensor && TensorFromDlpack(value, a)) {
    // read below, as any array
  } else if (tensor && PyObject_HasAttr(value.ptr(), numpy)) {
    const nb::object view = nb::steal(PyObject_CallMethodNoArgs(value.ptr(), numpy));
    if (!view.is_valid()) {
      PyErr_Clear();
      return std::nullopt;
    }
    if (!nb::try_cast(view, a, false)) return std::nullopt;
  } else if (!nb::try_cast(value, a, false)) {
    return std::nullopt;
  }
  if (a.device_type() != nb::device::cpu::value) return std::nullopt;
  const auto dt = a.dtype();
  const auto code = static_cast<Code>(dt.code);
  const bool ok = dt.lanes == 1 && ((code == Code::Int && (dt.bits == 8 || dt.bits == 16 || dt.bits == 32 || dt.bits == 64)) ||
                                    (code == Code::UInt && (dt.bits == 8 || dt.bits == 16 || dt.bits == 32)) ||
                                    (code == Code::Bool && dt.bits == 8));
  if (!ok || a.ndim() < 1 || a.ndim() > 2) return std::nullopt;
  return a;
}

// Row r of a rows × n array (or the one row of a 1-D one): where it starts, its length and its stride in bytes.
struct RowOf {
  const std::uint8_t* base;
  std::size_t n;
  std::int64_t stride;
  RowOf(const Array& a, std::int64_t r) {
    const std::int64_t item = a.dtype().bits / 8;
    const bool two = a.ndim() == 2;
    base = static_cast<const std::uint8_t*>(a.data()) + (two ? r * a.stride(0) * item : 0);
    n = two ? a.shape(1) : a.shape(0);
    stride = (two ? a.stride(1) : a.stride(0)) * item;
  }
};

// fn(k, value) for each value of row r, read at its own dtype.
template <class Fn>
void Visit(const Array& a, std::int64_t r, Fn&& fn) {
  const RowOf row(a, r);
  auto each = [&](auto tag) {
    using T = decltype(tag);
    for (std::size_t k = 0; k < row.n; ++k) fn(k, static_cast<std::int64_t>(*reinterpret_cast<const T*>(row.base + static_cast<std::int64_t>(k) * row.stride)));
  };
  const auto dt = a.dtype();
  if (static_cast<Code>(dt.code) == Code::Int) {
    switch (dt.bits) {
      case 8: each(std::int8_t{}); break;
      case 16: each(std::int16_t{}); break;
      case 32: each(std::int32_t{}); break;
      default: each(std::int64_t{}); break;
    }
  } else {
    switch (dt.bits) {  // UInt, or Bool (one byte)
      case 16: each(std::uint16_t{}); break;
      case 32: each(std::uint32_t{}); break;
      default: each(std::uint8_t{}); break;
    }
  }
}

void ReadRow(const Array& a, std::int64_t r, std::vector<std::int64_t>& out) {
  const RowOf row(a, r);
  out.resize(row.n);
  if (static_cast<Code>(a.dtype().code) == Code::Int && a.dtype().bits == 64 && row.stride == 8) {
    if (row.n) std::memcpy(out.data(), row.base, row.n * 8);  // the common case: int64 rows, one copy
    return;
  }
  Visit(a, r, [&](std::size_t k, std::int64_t v) { out[k] = v; });
}

// Row r of `a` as int64s: viewed where the array holds them so (int64, contiguous, aligned: the common training
// batch), else read into `storage` at their own width.
std::span<const std::int64_t> RowSpan(const Array& a, std::int64_t r, std::vector<std::int64_t>& storage) {
  const RowOf row(a, r);
  if (static_cast<Code>(a.dtype().code) == Code::Int && a.dtype().bits == 64 && (row.stride == 8 || row.n <= 1) &&
      reinterpret_cast<std::uintptr_t>(row.base) % alignof(std::int64_t) == 0) {
    return {reinterpret_cast<const std::int64_t*>(row.base), row.n};
  }
  ReadRow(a, r, storage);
  return storage;
}

std::optional<std::span<const std::int64_t>> OptionalSpan(const std::optional<Array>& a, std::int64_t r,
                                                          std::optional<std::vector<std::int64_t>>& storage) {
  if (!a) return std::nullopt;
  if (!storage) storage.emplace();
  return RowSpan(*a, a->ndim() == 2 ? r : 0, *storage);
}

// rows × slots of a per-token field (one flattened row: 1 × n), as packoracle._arrays.rows_of reads it.
std::pair<std::int64_t, std::int64_t> Shape(const Array& a) {
  if (a.ndim() == 1) return {1, static_cast<std::int64_t>(a.shape(0))};
  return {static_cast<std::int64_t>(a.shape(0)), static_cast<std::int64_t>(a.shape(1))};
}

// Whether any of n values is negative and none of the four allowed ones. Branch-free, so that the compiler
// vectorises it (this file is built at -O3: python/CMakeLists.txt), for AVX2 where the machine has it: numpy's
// own min over the same array, which the Python reader calls, is vectorised.
PACKORACLE_CLONES bool AnyOutside(const std::int64_t* values, std::size_t n,
                                                           const std::int64_t (&allowed)[4]) {
  std::int64_t bad = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const std::int64_t v = values[k];
    bad |= (v < 0) & (v != allowed[0]) & (v != allowed[1]) & (v != allowed[2]) & (v != allowed[3]);
  }
  return bad != 0;
}

// The same for the common policies' fields: no negative id allowed (input_ids: AnyNegative, convert.h), or one
// (labels: the ignore index). Fewer operations per value than the four compares: the scan reads the field
// from memory at about the speed memory gives it.
PACKORACLE_CLONES bool AnyOutsideOne(const std::int64_t* values, std::size_t n,
                                                              std::int64_t allowed) {
  std::int64_t bad = 0;
  for (std::size_t k = 0; k < n; ++k) bad |= (values[k] < 0) & (values[k] != allowed);
  return bad != 0;
}

// out[k] = values[k] != v over n values (the slots a label that is not the ignore index makes targets), built
// for AVX2 where the machine has it, as a function of its own: inlined into its caller, the loop stayed scalar
// (the byte stores may alias the caller's state, which it then reloads every slot).
PACKORACLE_CLONES void NotEqual(const std::int64_t* __restrict values, std::size_t n,
                                                         std::int64_t v, std::uint8_t* __restrict out) {
  for (std::size_t k = 0; k < n; ++k) out[k] = static_cast<std::uint8_t>(values[k] != v);
}

// Every negative value of a signed field is one `allowed` has (packoracle._args.non_negative_ids). A policy
// declares at most four negative ids (pad, eos, bos, the ignore index), padded here with 0, which no negative
// value equals.
bool IdsAllowed(const Array& a, std::int64_t rows, const std::vector<std::int64_t>& allowed) {
  if (static_cast<Code>(a.dtype().code) != Code::Int) return true;
  if (allowed.size() > 4) return false;  // not a policy's: left to the Python reader
  std::int64_t four[4] = {0, 0, 0, 0};
  std::copy(allowed.begin(), allowed.end(), four);
  std::vector<std::int64_t> copy;
  for (std::int64_t r = 0; r < rows; ++r) {
    const RowOf row(a, r);
    const std::int64_t* values = reinterpret_cast<const std::int64_t*>(row.base);
    if (a.dtype().bits != 64 || row.stride != 8) {  // read at its own width first
      ReadRow(a, r, copy);
      values = copy.data();
    }
    const bool outside = allowed.empty()      ? AnyNegative(values, row.n)
                         : allowed.size() == 1 ? AnyOutsideOne(values, row.n, allowed[0])
                                               : AnyOutside(values, row.n, four);
    if (outside) return false;
  }
  return true;
}

// Two per-row lists hold the same values (canonical_fields' np.array_equal of cu_seq_lens_k and _q).
bool SameValues(const Array& a, const Array& b) {
  if (a.ndim() != b.ndim() || Shape(a) != Shape(b)) return false;
  std::vector<std::int64_t> x, y;
  for (std::int64_t r = 0; r < Shape(a).first; ++r) {
    ReadRow(a, r, x);
    ReadRow(b, r, y);
    if (x != y) return false;
  }
  return true;
}

// The key-side copies of the query lengths equal them wherever canonical_fields compares them.
bool KeySideAgrees(nb::handle batch) {
  for (const auto& side : kKeySideFields) {
    const std::string key(side.name), query(side.query);
    PyObject* k = PyDict_GetItemString(batch.ptr(), key.c_str());  // borrowed
    if (!k || k == Py_None || !PyDict_GetItemString(batch.ptr(), query.c_str())) continue;
    const auto a = IntegerArray(k), b = IntegerArray(PyDict_GetItemString(batch.ptr(), query.c_str()));
    if (!a || !b || !SameValues(*a, *b)) return false;
  }
  return true;
}

// The batch's fields under their canonical names (canonical_fields), false where it would refuse one or the
// value is not an integer array. `spans`: the doc_spans value, when given.
bool ReadFields(nb::handle batch, const std::vector<std::string>& ignore, BatchView& view, nb::handle& spans) {
  PyObject *key = nullptr, *value = nullptr;
  Py_ssize_t pos = 0;
  while (PyDict_Next(batch.ptr(), &pos, &key, &value)) {
    if (!PyUnicode_CheckExact(key)) return false;
    Py_ssize_t size = 0;
    const char* utf8 = PyUnicode_AsUTF8AndSize(key, &size);
    if (!utf8) {
      PyErr_Clear();
      return false;
    }
    const std::string_view name(utf8, static_cast<std::size_t>(size));
    if (std::find(ignore.begin(), ignore.end(), name) != ignore.end() || Derived(name) || value == Py_None) continue;
    if (KeySide(name)) continue;
    if (name == "doc_spans") {
      spans = value;
      continue;
    }
    const int field = FieldOf(name);
    if (field < 0 || view.fields[field]) return false;  // unknown (or loss_mask), or given under two names
    view.fields[field] = IntegerArray(value);
    if (!view.fields[field]) return false;
  }
  return view.fields[BatchView::kInputIds] && view.fields[BatchView::kLabels] && KeySideAgrees(batch);
}

// Shapes as canonical_microbatch requires them: every per-token field rows × slots like input_ids (no empty
// batch: left to it), each per-row list one row (rows = 1) or one per row.
bool ShapesAgree(BatchView& view) {
  std::tie(view.rows, view.slots) = Shape(*view.fields[BatchView::kInputIds]);
  if (view.rows == 0 || view.slots == 0) return false;
  for (std::size_t f = 0; f < BatchView::kFields; ++f) {
    const auto& a = view.fields[f];
    if (!a) continue;
    if (kRowFields[f].shape == RowFieldShape::kPerToken && Shape(*a) != std::make_pair(view.rows, view.slots))
      return false;
    if (kRowFields[f].shape == RowFieldShape::kPerRowList &&
        (a->ndim() == 1 ? view.rows != 1 : static_cast<std::int64_t>(a->shape(0)) != view.rows))
      return false;
  }
  return true;
}

bool IsSpanTuple(nb::handle v) {
  return PyTuple_Check(v.ptr()) && PyTuple_GET_SIZE(v.ptr()) == 4 && PyUnicode_Check(PyTuple_GET_ITEM(v.ptr(), 0));
}

// doc_spans as given, one list per row (packoracle._batch._spans_per_row), read as the audit reads a row's
// (SpansFromPython); false for any form or value the Python reading refuses or leaves to the audit to name.
bool GivenSpans(nb::handle value, BatchView& view) {
  const auto sequence = [](PyObject* v) { return PyList_Check(v) || PyTuple_Check(v); };
  if (!sequence(value.ptr())) return false;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(value.ptr());
  PyObject* const* items = PySequence_Fast_ITEMS(value.ptr());
  std::vector<nb::handle> per_row;
  if (n && sequence(items[0]) && !IsSpanTuple(items[0]) && !(view.rows == 1 && n != 1)) {
    for (Py_ssize_t r = 0; r < n; ++r) per_row.push_back(items[r]);
  } else {
    per_row.push_back(value);
  }
  if (static_cast<std::int64_t>(per_row.size()) != view.rows) return false;
  view.spans.assign(per_row.size(), {});
  try {
    for (std::size_t r = 0; r < per_row.size(); ++r) {
      if (!sequence(per_row[r].ptr())) return false;
      SpansFromPython(per_row[r], "batch", view.spans[r]);
    }
  } catch (const InputError&) {
    return false;
  }
  return true;
}

// doc_spans derived from the documents, row by row (SpanMatcher.match: the slots a target sits on, a label
// that is not the ignore index, tell a run of pad ids from a document of them).
void DerivedSpans(PolicySpanDerivation& derivation, const std::vector<std::string>& uids,
                  std::optional<std::int64_t> ignore_index, BatchView& view) {
  std::vector<std::int64_t> token_storage, label_storage;  // rows not viewed in place (RowSpan)
  std::vector<std::uint8_t> targets;
  const auto read = [&uids](const std::vector<jobs::DerivedSpan>& derived, std::vector<DocSpan>& out) {
    out.clear();
    for (const auto& s : derived) {
      if (s.document < 0 || s.document >= static_cast<std::int64_t>(uids.size())) {
        throw InputError("batch_view: the span derivation names document " + std::to_string(s.document) + " of " +
                         std::to_string(uids.size()));
      }
      out.push_back({uids[static_cast<std::size_t>(s.document)], s.start, s.length, s.doc_offset});
    }
  };
  view.spans.assign(static_cast<std::size_t>(view.rows), {});
  for (std::int64_t r = 0; r < view.rows; ++r) {
    const std::span<const std::int64_t> tokens = RowSpan(*view.fields[BatchView::kInputIds], r, token_storage);
    std::span<const std::uint8_t> flags;
    if (ignore_index) {
      const std::span<const std::int64_t> labels = RowSpan(*view.fields[BatchView::kLabels], r, label_storage);
      targets.resize(labels.size());
      NotEqual(labels.data(), labels.size(), *ignore_index, targets.data());
      flags = targets;
    }
    // The row's own encodings, read only where two documents match at one of its slots.
    const auto starts = [&view, &derivation, r] {
      CandidateRow row;
      view.ReadRowFields(r, row);
      return jobs::EvidenceOf(row, derivation.policy);
    };
    // Rows read where the batch holds them (int64, contiguous) are viewed, the array kept alive with the
    // derivation; others were read into token_storage, which the next row reuses: copied.
    const bool in_place = tokens.data() != token_storage.data();
    if (in_place && r == 0) derivation.viewed.push_back(*view.fields[BatchView::kInputIds]);
    read(derivation.Match(tokens, flags, starts, in_place), view.spans[static_cast<std::size_t>(r)]);
  }
  // As check_step and verify read a step: where the greedy reading leaves the rows unexplained, the search
  // (SpanDerivation::Finish) replaces this batch's spans (the last view.rows rows it matched).
  if (derivation.Finish()) {
    const auto& all = derivation.rows();
    const std::size_t first = all.size() - static_cast<std::size_t>(view.rows);
    for (std::int64_t r = 0; r < view.rows; ++r)
      read(all[first + static_cast<std::size_t>(r)], view.spans[static_cast<std::size_t>(r)]);
  }
}

template <class T>
void ReadOptional(const std::optional<Array>& a, std::int64_t r, std::optional<std::vector<T>>& out) {
  if (!a) {
    out.reset();
    return;
  }
  std::vector<T> values = out ? std::move(*out) : std::vector<T>{};
  ReadRow(*a, a->ndim() == 2 ? r : 0, values);
  out = std::move(values);
}

}  // namespace

void BatchView::ReadRowFields(std::int64_t r, CandidateRow& row) const {
  ReadRow(*fields[kInputIds], r, row.input_ids);
  ReadRow(*fields[kLabels], r, row.labels);
  row.loss_mask.reset();
  ReadOptional(fields[kPositionIds], r, row.position_ids);
  ReadOptional(fields[kDocIds], r, row.doc_ids);
  ReadOptional(fields[kAttentionMask], r, row.attention_mask);
  ReadOptional(fields[kCuSeqlens], r, row.cu_seqlens);
  ReadOptional(fields[kSeqLens], r, row.seq_lens);
}

CandidateMicrobatch BatchView::Read(const std::string& where, CandidateMicrobatch reuse) const {
  CandidateMicrobatch mb;
  mb.step = step;
  mb.micro_step = micro_step;
  mb.rank = rank;
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto k = static_cast<std::size_t>(r);
    CandidateRow row = k < reuse.rows.size() ? std::move(reuse.rows[k]) : CandidateRow{};
    ReadRowFields(r, row);
    row.doc_spans = spans[k];
    mb.rows.push_back(std::move(row));
  }
  if (producer.is_valid() && !producer.is_none()) mb.producer = ProducerFromPython(producer, where + ": producer");
  return mb;
}

bool BatchView::IdsAllowed() const {
  return python::IdsAllowed(*fields[kInputIds], rows, input_ids_allowed) &&
         python::IdsAllowed(*fields[kLabels], rows, labels_allowed);
}

bool BatchView::Deferrable() const {
  for (int f : {kInputIds, kLabels}) {
    const auto dt = fields[f]->dtype();
    if (static_cast<Code>(dt.code) != Code::Int || dt.bits != 64) return false;
  }
  return true;
}

bool BatchView::FirstLabelsAllowed() const {
  const Array& labels = *fields[kLabels];
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t first = 0;  // int64 (Deferrable), maybe not aligned
    std::memcpy(&first, RowOf(labels, r).base, sizeof first);
    if (first < 0 && std::find(labels_allowed.begin(), labels_allowed.end(), first) == labels_allowed.end()) return false;
  }
  return true;
}

void BatchView::View(const std::string& where, MicrobatchRecord& record) const {
  CandidateMicrobatch& mb = record.microbatch;
  mb.step = step;
  mb.micro_step = micro_step;
  mb.rank = rank;
  mb.rows.resize(static_cast<std::size_t>(rows));  // storage for the fields not viewed in place
  record.views.resize(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto k = static_cast<std::size_t>(r);
    CandidateRow& storage = mb.rows[k];
    RowView& row = record.views[k];
    row.input_ids = RowSpan(*fields[kInputIds], r, storage.input_ids);
    row.labels = RowSpan(*fields[kLabels], r, storage.labels);
    row.loss_mask.reset();
    row.position_ids = OptionalSpan(fields[kPositionIds], r, storage.position_ids);
    row.doc_ids = OptionalSpan(fields[kDocIds], r, storage.doc_ids);
    row.attention_mask = OptionalSpan(fields[kAttentionMask], r, storage.attention_mask);
    row.cu_seqlens = OptionalSpan(fields[kCuSeqlens], r, storage.cu_seqlens);
    row.seq_lens = OptionalSpan(fields[kSeqLens], r, storage.seq_lens);
    row.doc_spans = spans[k];
  }
  mb.producer.reset();
  if (producer.is_valid() && !producer.is_none()) mb.producer = ProducerFromPython(producer, where + ": producer");
}

nb::object BatchViewOf(nb::handle batch, const std::vector<std::string>& ignore,
                       const std::vector<std::int64_t>& input_ids_allowed, const std::vector<std::int64_t>& labels_allowed,
                       std::optional<std::int64_t> ignore_index, nb::handle derivation, const std::vector<std::string>& uids,
                       std::int64_t step, std::int64_t micro_step, std::int64_t rank, nb::handle producer,
                       bool defer_ids) {
  if (!PyDict_CheckExact(batch.ptr())) return nb::none();
  BatchView view;
  nb::handle given;
  if (!ReadFields(batch, ignore, view, given) || !ShapesAgree(view)) return nb::none();
  view.input_ids_allowed = input_ids_allowed;
  view.labels_allowed = labels_allowed;
  view.ids_deferred = defer_ids && view.Deferrable();
  if (!view.ids_deferred && !view.IdsAllowed()) return nb::none();
  if (given) {
    if (!GivenSpans(given, view)) return nb::none();
  } else if (derivation.is_none()) {
    return nb::none();  // no spans and no documents to derive them from: canonical_microbatch says so
  } else {
    DerivedSpans(nb::cast<PolicySpanDerivation&>(derivation), uids, ignore_index, view);
  }
  view.step = step;
  view.micro_step = micro_step;
  view.rank = rank;
  view.producer = nb::borrow(producer);
  return nb::cast(std::move(view));
}

void BindBatch(nb::module_& m) {
  nb::class_<BatchView>(m, "BatchView",
                        "A batch read by the core (batch_view); audit_records and draw_records take it where they "
                        "take a canonical micro-batch.")
      .def(
          "read", [](const BatchView& v) { return MicrobatchToPython(v.Read("batch", {})); },
          "The micro-batch as the audit reads it (the canonical form's dict; for tests).");
  m.def("batch_view", &BatchViewOf,
      nb::arg("batch"), nb::arg("ignore"), nb::arg("input_ids_allowed"), nb::arg("labels_allowed"),
      nb::arg("ignore_index").none(), nb::arg("derivation").none(), nb::arg("uids"), nb::arg("step"),
      nb::arg("micro_step"), nb::arg("rank"), nb::arg("producer").none(), nb::arg("defer_ids") = false,
      "packoracle._batch.canonical_microbatch's common case in one call: a BatchView of `batch`, or None for any "
      "batch it does not take (canonical_microbatch then reads it). input_ids_allowed / labels_allowed: the "
      "negative values each may hold (packoracle._args.signed_ids); derivation, uids: a SpanDerivation and its "
      "documents' uids, for a batch without doc_spans; producer: as canonical_microbatch converts it. defer_ids: "
      "those values are not scanned here but by audit_records, and only where its audit does not prove them "
      "(audit_records then answers None for a batch with another negative value: canonical_microbatch's to read).");
  m.def(
      "read_microbatch", [](nb::handle microbatch) { return MicrobatchToPython(MicrobatchFromPython(microbatch, "batch")); },
      nb::arg("microbatch"), "A canonical micro-batch as the audit reads it, back as a dict (for tests).");
}

}  // namespace packoracle::python
