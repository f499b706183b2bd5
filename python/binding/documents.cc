// packoracle._core.Documents and documents_from_features: the documents a collator was handed, read from its
// features in one call. The guard checks every training batch; reading each feature in Python (np.asarray of
// a token list, a dict per document, then canonical_documents and the core reading them again) cost more
// than the collator itself (bench/README.md, "A fourth pair"). packoracle.guard.documents_from_features
// states the same reading in Python (the public form, a list of dicts); a Hypothesis test pins the two.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "convert.h"
#include "packoracle/fastcheck/clones.h"
#include "packoracle/oracle/error.h"

namespace packoracle::python {

// One pass with no compare, which SSE2 vectorises (it has no 64-bit compare: a running minimum stayed scalar,
// and min_element's iterator waited on a load through the last one: 5 cycles a token), and AVX2 twice as wide
// where the machine has it (this file is built at -O3: python/CMakeLists.txt).
PACKORACLE_CLONES bool AnyNegative(const std::int64_t* ids, std::size_t n) {
  std::uint64_t bits = 0;
  for (std::size_t k = 0; k < n; ++k) bits |= static_cast<std::uint64_t>(ids[k]);
  return (bits >> 63) != 0;
}

void DocumentSet::Add(Document document, bool non_negative) {
  order_.push_back({owned_.size(), {}, non_negative});
  owned_.push_back(std::move(document));
  refs_made_ = false;
}

void DocumentSet::AddView(nb::handle uid, HeldBuffer tokens, bool non_negative, bool deferred) {
  Py_ssize_t size = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(uid.ptr(), &size);  // kept by the str (held below)
  if (!utf8) throw nb::python_error();
  DocumentRef ref;
  ref.uid = std::string_view(utf8, static_cast<std::size_t>(size));
  ref.tokens = static_cast<const Token*>(tokens->buf);
  ref.size = static_cast<std::size_t>(tokens->shape[0]);
  uids_.push_back(nb::borrow(uid));
  buffers_.push_back(std::move(tokens));
  order_.push_back({kViewed, ref, non_negative || deferred, deferred});
  refs_made_ = false;
}

bool DocumentSet::has_deferred() const {
  return std::any_of(order_.begin(), order_.end(), [](const Entry& e) { return e.deferred; });
}

bool DocumentSet::ScanDeferred() const {
  for (const Entry& e : order_)
    if (e.deferred && AnyNegative(e.view.tokens, e.view.size)) return false;
  return true;
}

const std::vector<DocumentRef>& DocumentSet::refs() const {
  if (!refs_made_) {
    refs_.clear();
    refs_.reserve(order_.size());
    non_negative_.clear();
    for (const Entry& e : order_) {
      refs_.push_back(e.owned == kViewed ? e.view : DocumentRef::Of(owned_[e.owned]));
      non_negative_.push_back(e.non_negative);
    }
    refs_made_ = true;
  }
  return refs_;
}

const std::vector<bool>& DocumentSet::non_negative() const {
  refs();  // made with them
  return non_negative_;
}

const std::vector<Document>& DocumentSet::documents() const {
  if (buffers_.empty()) return owned_;  // all of its own, in order
  copies_.clear();
  copies_.reserve(order_.size());
  for (const DocumentRef& d : refs()) copies_.push_back(d.Copy());
  return copies_;
}

namespace {

// A feature's field (None and absent alike: an empty object); a dict read directly, any other Mapping (a
// BatchEncoding) through its get().
// `key`: an interned str (FieldKey), whose hash is kept: a str made from the name on every lookup cost more than
// the lookup.
nb::object Field(nb::handle feature, PyObject* key) {
  if (PyDict_Check(feature.ptr())) {
    PyObject* v = PyDict_GetItem(feature.ptr(), key);  // borrowed; errors suppressed, as PyDict_GetItemString's
    return v && v != Py_None ? nb::borrow(v) : nb::object();
  }
  nb::object got = feature.attr("get")(nb::handle(key));
  return got.is_none() ? nb::object() : got;
}

// The field names, interned once and held for the interpreter's life (as IsMapping's Mapping).
PyObject* FieldKey(const char* name) { return PyUnicode_InternFromString(name); }

bool IsMapping(nb::handle feature) {
  if (PyDict_Check(feature.ptr())) return true;
  // held for the interpreter's life (a static nb::object would be released after it has gone)
  static PyObject* mapping = nb::object(nb::module_::import_("collections.abc").attr("Mapping")).release().ptr();
  return PyObject_IsInstance(feature.ptr(), mapping) == 1;
}

// A token id is >= 0, or one of the negative ids the policy declares (packoracle._args.signed_ids).
// True when none is negative (DocumentSet::non_negative).
bool TokenIds(const std::vector<Token>& ids, const std::set<std::int64_t>& allowed, const std::string& where) {
  if (!AnyNegative(ids.data(), ids.size())) return true;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= 0 || allowed.count(ids[i])) continue;
    std::string allows = "this policy declares no negative id";
    if (!allowed.empty()) {
      allows = "the only negative values this policy allows here are ";
      for (auto it = allowed.begin(); it != allowed.end(); ++it) allows += (it == allowed.begin() ? "" : ", ") + std::to_string(*it);
    }
    throw InputError(where + ": field 'input_ids[" + std::to_string(i) + "]' is " + std::to_string(ids[i]) +
                     ": a token id is >= 0 (" + allows + ")");
  }
  return false;
}

// An int of the interpreter's compact form (|v| < 2^30 on 3.11) read from its one digit, without a call: the
// tokens of a feature are nearly all such ints, and a call per token cost as much as the rest of the check.
inline bool CompactInt(PyObject* item, std::int64_t& out) {
#if PY_VERSION_HEX >= 0x030C0000
  if (!PyUnstable_Long_IsCompact(reinterpret_cast<PyLongObject*>(item))) return false;
  out = PyUnstable_Long_CompactValue(reinterpret_cast<PyLongObject*>(item));
#else
  const Py_ssize_t size = Py_SIZE(item);
  if (size < -1 || size > 1) return false;
  out = size * static_cast<std::int64_t>(reinterpret_cast<PyLongObject*>(item)->ob_digit[0]);
#endif
  return true;
}

// A feature's field as IntegersFromPython reads it, with its common form (a list of ints, as a tokenizer gives
// it) read in place here. Any entry that is not an int of 64 bits (a bool, a numpy integer, a float, 2^64)
// sends the whole list to IntegersFromPython, which reads it or names the entry: the two readings are the
// same wherever this one answers (python/tests/test_core_documents.py pins them).
std::vector<std::int64_t> Integers(nb::handle value, const std::string& where, const char* field) {
  if (PyList_CheckExact(value.ptr())) {
    const Py_ssize_t n = PyList_GET_SIZE(value.ptr());
    PyObject* const* items = reinterpret_cast<PyListObject*>(value.ptr())->ob_item;
    std::vector<std::int64_t> out(static_cast<std::size_t>(n));
    Py_ssize_t k = 0;
    for (; k < n; ++k) {
      PyObject* item = items[k];
      if (!PyLong_CheckExact(item)) break;
      std::int64_t& v = out[static_cast<std::size_t>(k)];
      if (CompactInt(item, v)) continue;
      int overflow = 0;
      const long long big = PyLong_AsLongLongAndOverflow(item, &overflow);
      if (overflow || (big == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        break;
      }
      v = big;
    }
    if (k == n) return out;
  }
  return IntegersFromPython(value, where, field);
}

// One feature's documents: its input_ids whole, or cut by seq_lengths (a packed feature); a token is
// supervised where its label is not ignore_index, and a document's first token always (its label says
// nothing: no target is read there).
void ReadFeature(nb::handle f, std::size_t k, std::int64_t ignore_index, const std::set<std::int64_t>& allowed,
                 DocumentSet& out) {
  static PyObject* const input_ids_key = FieldKey("input_ids");
  static PyObject* const labels_key = FieldKey("labels");
  static PyObject* const seq_lengths_key = FieldKey("seq_lengths");
  const std::string where = "features[" + std::to_string(k) + "]";
  nb::object input_ids = IsMapping(f) ? Field(f, input_ids_key) : nb::object();
  if (!input_ids) {
    throw nb::type_error(("guard: feature " + std::to_string(k) +
                          " has no 'input_ids': the guard reads the documents from the features").c_str());
  }
  std::vector<Token> ids = Integers(input_ids, where, "input_ids");
  const bool non_negative = TokenIds(ids, allowed, where);
  std::vector<int> supervised;  // empty: every token supervised (a feature without labels), no flags to carry
  if (nb::object labels = Field(f, labels_key)) {
    supervised.resize(ids.size());
    const std::vector<std::int64_t> l = Integers(labels, where, "labels");
    if (l.size() != ids.size()) {
      throw InputError(where + ": field 'labels' has " + std::to_string(l.size()) + " entries, its input_ids has " +
                       std::to_string(ids.size()));
    }
    for (std::size_t i = 0; i < l.size(); ++i) supervised[i] = l[i] != ignore_index;
  }
  std::vector<std::int64_t> lengths{static_cast<std::int64_t>(ids.size())};
  const nb::object seq = Field(f, seq_lengths_key);
  if (seq) lengths = Integers(seq, where, "seq_lengths");
  std::int64_t sum = 0;
  for (std::size_t j = 0; j < lengths.size(); ++j) {
    if (lengths[j] < 0) {
      throw InputError(where + ": field 'seq_lengths[" + std::to_string(j) + "]' is " + std::to_string(lengths[j]) +
                       ": a length is >= 0");
    }
    sum += lengths[j];
  }
  if (sum != static_cast<std::int64_t>(ids.size())) {
    throw InputError("guard: " + where + ": field 'seq_lengths' sums to " + std::to_string(sum) +
                     ", but its input_ids has " + std::to_string(ids.size()) + " tokens");
  }
  std::size_t start = 0;
  for (std::size_t j = 0; j < lengths.size(); ++j) {
    const auto n = static_cast<std::size_t>(lengths[j]);
    Document d;
    d.uid = "f" + std::to_string(k) + (lengths.size() == 1 ? "" : "." + std::to_string(j));
    if (lengths.size() == 1) {
      d.tokens = std::move(ids);
      d.supervised = std::move(supervised);
    } else {
      d.tokens.assign(ids.begin() + static_cast<std::ptrdiff_t>(start), ids.begin() + static_cast<std::ptrdiff_t>(start + n));
      if (!supervised.empty()) {
        d.supervised.assign(supervised.begin() + static_cast<std::ptrdiff_t>(start),
                            supervised.begin() + static_cast<std::ptrdiff_t>(start + n));
      }
    }
    if (!d.supervised.empty()) d.supervised[0] = 1;
    out.Add(std::move(d), non_negative);
    start += n;
  }
}

// A contiguous 1-D array of native int64 through the buffer protocol: numpy's common form of a document,
// viewed where it lies, its export held open so that it stays there. Null for anything else (not a numpy.ndarray
// itself, another dtype or byte order, strides, more dimensions), which the ndarray cast reads and copies.
// (Reading each array through the buffer protocol costs a fraction of the ndarray cast: bench/README.md, "A
// ninth pair"; viewing them saved check_batch their copy: "An eleventh pair".)
HeldBuffer ContiguousInt64(PyObject* value) {
  // numpy.ndarray itself: any other exporter (array.array, mmap) would be pinned while the Documents live.
  static PyObject* const ndarray = nb::object(nb::module_::import_("numpy").attr("ndarray")).release().ptr();
  if (Py_TYPE(value) != reinterpret_cast<PyTypeObject*>(ndarray)) return nullptr;
  HeldBuffer held(new Py_buffer);
  if (PyObject_GetBuffer(value, held.get(), PyBUF_RECORDS_RO) != 0) {
    delete held.release();  // nothing to release
    PyErr_Clear();
    return nullptr;
  }
  const Py_buffer& view = *held;
  const std::string_view format = view.format ? view.format : "B";
  const bool int64 = view.ndim == 1 && view.itemsize == 8 && view.strides[0] == 8 &&
                     reinterpret_cast<std::uintptr_t>(view.buf) % alignof(Token) == 0 &&
                     (format == "l" || format == "q" || format == "=l" || format == "=q" || format == "@l" ||
                      format == "@q");
  return int64 ? std::move(held) : nullptr;
}

// No token negative (`non_negative` then), or each negative one an id `allowed` has.
bool TokenIdsAllowed(const Token* tokens, std::size_t n, const std::set<std::int64_t>& allowed, bool& non_negative) {
  non_negative = !AnyNegative(tokens, n);
  if (non_negative) return true;  // the common answer
  for (std::size_t k = 0; k < n; ++k)
    if (tokens[k] < 0 && !allowed.count(tokens[k])) return false;
  return true;
}

// A document's tokens in the common forms, read without Python: a contiguous int64 numpy array viewed (`view`),
// or into `out`: a list of ints, a 1-D CPU array or tensor of any other signed integer form. False for anything
// else, and for a negative value `allowed` has not: the caller then reads the documents in Python
// (canonical_documents), which names what is wrong.
bool PlainTokens(nb::handle value, const std::set<std::int64_t>& allowed, std::vector<Token>& out, HeldBuffer& view,
                 bool& non_negative, bool defer_scan) {
  if (!PyList_CheckExact(value.ptr()) && (view = ContiguousInt64(value.ptr()))) {
    if (defer_scan) return true;  // PlainDocuments' caller scans it or proves it (DocumentSet::ScanDeferred)
    return TokenIdsAllowed(static_cast<const Token*>(view->buf), static_cast<std::size_t>(view->shape[0]), allowed,
                           non_negative);
  }
  if (PyList_CheckExact(value.ptr())) {
    const Py_ssize_t n = PyList_GET_SIZE(value.ptr());
    out.resize(static_cast<std::size_t>(n));
    for (Py_ssize_t k = 0; k < n; ++k) {
      PyObject* item = PyList_GET_ITEM(value.ptr(), k);
      if (!PyLong_CheckExact(item)) return false;
      if (CompactInt(item, out[static_cast<std::size_t>(k)])) continue;  // nearly every token: no call
      int overflow = 0;
      const long long v = PyLong_AsLongLongAndOverflow(item, &overflow);
      if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return false;
      }
      out[static_cast<std::size_t>(k)] = v;
    }
  } else {
    nb::ndarray<nb::ro> array;
    if (!nb::try_cast(value, array, false) || array.device_type() != nb::device::cpu::value || array.ndim() != 1 ||
        array.dtype().code != static_cast<std::uint8_t>(nb::dlpack::dtype_code::Int) || array.dtype().lanes != 1) {
      return false;
    }
    const std::size_t n = array.shape(0), bits = array.dtype().bits;
    const std::int64_t stride = array.stride(0);
    out.resize(n);
    auto read = [&](const auto* p) {
      for (std::size_t k = 0; k < n; ++k) out[k] = p[static_cast<std::int64_t>(k) * stride];
    };
    if (bits == 64 && stride == 1) {
      if (n) std::memcpy(out.data(), array.data(), n * sizeof(Token));  // the common case: one copy
    } else switch (bits) {
      case 8: read(static_cast<const std::int8_t*>(array.data())); break;
      case 16: read(static_cast<const std::int16_t*>(array.data())); break;
      case 32: read(static_cast<const std::int32_t*>(array.data())); break;
      case 64: read(static_cast<const std::int64_t*>(array.data())); break;
      default: return false;
    }
  }
  return TokenIdsAllowed(out.data(), out.size(), allowed, non_negative);
}

template <class T>
nb::object Copy(const std::vector<T>& values) {
  auto* copy = new std::vector<T>(values);
  nb::capsule owner(copy, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::cast(nb::ndarray<nb::numpy, T, nb::ndim<1>>(copy->data(), {copy->size()}, owner));
}

}  // namespace

nb::object PlainDocuments(nb::handle documents, const std::vector<std::int64_t>& allowed, bool defer_scan) {
  if (!PyDict_CheckExact(documents.ptr())) return nb::none();
  const std::set<std::int64_t> signed_ids(allowed.begin(), allowed.end());
  DocumentSet out;
  out.ReserveViews(static_cast<std::size_t>(PyDict_GET_SIZE(documents.ptr())));
  PyObject *key = nullptr, *value = nullptr;
  Py_ssize_t pos = 0;
  while (PyDict_Next(documents.ptr(), &pos, &key, &value)) {
    if (!PyUnicode_CheckExact(key)) return nb::none();
    Py_ssize_t size = 0;
    const char* uid = PyUnicode_AsUTF8AndSize(key, &size);
    if (!uid || size == 0) {
      PyErr_Clear();
      return nb::none();
    }
    Document d;
    HeldBuffer view;
    bool non_negative = false;
    if (!PlainTokens(value, signed_ids, d.tokens, view, non_negative, defer_scan)) return nb::none();
    if (view) {
      out.AddView(key, std::move(view), non_negative, defer_scan);
    } else {
      d.uid.assign(uid, static_cast<std::size_t>(size));
      out.Add(std::move(d), non_negative);
    }
  }
  return nb::cast(std::move(out));
}

void BindDocuments(nb::module_& m) {
  nb::class_<DocumentSet>(m, "Documents",
                          "Documents read into the core once (documents_from_features); check_batch, SpanDerivation "
                          "and audit_records take them where they take a list of document dicts.")
      .def("__len__", [](const DocumentSet& s) { return s.size(); })
      .def(
          "uids",
          [](const DocumentSet& s) {
            nb::list out;
            for (const DocumentRef& d : s.refs()) out.append(nb::str(d.uid.data(), d.uid.size()));
            return out;
          },
          "The documents' uids, in order.")
      .def(
          "to_list",
          [](const DocumentSet& s) {
            nb::list out;
            for (const Document& d : s.documents()) {
              nb::dict doc;
              doc["doc_uid"] = d.uid;
              doc["tokens"] = Copy(d.tokens);
              std::vector<std::int8_t> flags(d.tokens.size(), 1);  // none kept: every token supervised
              if (!d.supervised.empty()) flags.assign(d.supervised.begin(), d.supervised.end());
              doc["supervised"] = Copy(flags);
              out.append(doc);
            }
            return out;
          },
          "The documents as guard.documents_from_features gives them: [{doc_uid, tokens, supervised}] (copies).");
  m.def(
      "documents_from_features",
      [](nb::handle features, std::int64_t ignore_index, const std::vector<std::int64_t>& allowed) {
        if (!PySequence_Check(features.ptr()) || PyUnicode_Check(features.ptr()) || PyBytes_Check(features.ptr())) {
          throw nb::type_error("guard: the collator's features must be a list of dicts");
        }
        const std::set<std::int64_t> signed_ids(allowed.begin(), allowed.end());
        DocumentSet out;
        nb::sequence seq = nb::borrow<nb::sequence>(features);
        std::size_t k = 0;
        for (nb::handle f : seq) ReadFeature(f, k++, ignore_index, signed_ids, out);
        return out;
      },
      nb::arg("features"), nb::arg("ignore_index"), nb::arg("allowed_negative_ids"),
      "guard.documents_from_features read in C++, as Documents; token ids checked (negative only where "
      "allowed_negative_ids has them).");
  m.def("plain_documents", [](nb::handle documents, const std::vector<std::int64_t>& allowed) {
        return PlainDocuments(documents, allowed);
      },
      nb::arg("documents"), nb::arg("allowed_negative_ids"),
      "canonical_documents' common form read in C++: a dict {uid: tokens} of str uids and token lists or 1-D "
      "signed integer arrays, as Documents (contiguous int64 numpy arrays viewed where they lie, held for the "
      "Documents' life; the rest copied); None for any other form or a value canonical_documents refuses "
      "(it then reads them, and names the problem).");
}

}  // namespace packoracle::python
