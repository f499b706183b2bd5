#include "convert.h"
#include "batch.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <optional>

#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nlohmann/json.hpp>

#include "packoracle/interchange/policy_json.h"
#include "packoracle/oracle/error.h"
#include "packoracle/properties/row_members.h"

namespace packoracle::python {
namespace {

[[noreturn]] void Bad(const std::string& where, const std::string& field, const std::string& what) {
  throw InputError(where + ": field '" + field + "' " + what);
}

std::string TypeName(nb::handle h) { return nb::cast<std::string>(nb::str(nb::handle(h.type().ptr()).attr("__name__"))); }

// A Python str as UTF-8: InputError naming the field for one that has none (a lone surrogate, "\ud800"),
// where nb::cast would throw std::bad_cast.
std::string Utf8(nb::handle v, const std::string& where, const std::string& field) {
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(v.ptr(), &size);
  if (!data) {
    PyErr_Clear();
    Bad(where, field, "is not valid text (a lone surrogate cannot be written as UTF-8)");
  }
  return std::string(data, static_cast<std::size_t>(size));
}

// One element of a CPU array of any integer or bool dtype, as a 64-bit signed integer; false when it does
// not fit (a uint64 above INT64_MAX: 2^64 - 100 is not -100).
bool IntegerElement(const std::uint8_t* p, nb::dlpack::dtype dt, std::int64_t& out) {
  using Code = nb::dlpack::dtype_code;
  switch (static_cast<Code>(dt.code)) {
    case Code::Bool: out = *p != 0; return true;
    case Code::Int:
      switch (dt.bits) {
        case 8: out = *reinterpret_cast<const std::int8_t*>(p); return true;
        case 16: out = *reinterpret_cast<const std::int16_t*>(p); return true;
        case 32: out = *reinterpret_cast<const std::int32_t*>(p); return true;
        default: out = *reinterpret_cast<const std::int64_t*>(p); return true;
      }
    default:  // UInt
      switch (dt.bits) {
        case 8: out = *p; return true;
        case 16: out = *reinterpret_cast<const std::uint16_t*>(p); return true;
        case 32: out = *reinterpret_cast<const std::uint32_t*>(p); return true;
        default: {
          const std::uint64_t v = *reinterpret_cast<const std::uint64_t*>(p);
          if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return false;
          out = static_cast<std::int64_t>(v);
          return true;
        }
      }
  }
}

// Whether v fits T (any double does: loss_mask's integers).
template <class T>
bool Fits(std::int64_t v) {
  if constexpr (std::is_integral_v<T> && sizeof(T) < sizeof(std::int64_t)) {
    return v >= std::numeric_limits<T>::min() && v <= std::numeric_limits<T>::max();
  }
  return true;
}

// An integer read from Python, as T: InputError naming the entry when it does not fit T.
template <class T>
T Narrow(std::int64_t v, const std::string& where, const std::string& at) {
  if constexpr (std::is_integral_v<T> && sizeof(T) < sizeof(std::int64_t)) {
    if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) {
      Bad(where, at, "is " + std::to_string(v) + ", out of range");
    }
  }
  return static_cast<T>(v);
}

// A 1-D array (numpy, torch on the CPU, anything with the buffer protocol or DLPack) or a Python sequence, as
// a vector of T. Integer and bool dtypes are read in place; floats only where `numbers` (loss_mask).
std::int64_t Int(nb::handle v, const std::string& where, const std::string& field);

// A numpy array whose dtype is not in the machine's byte order, as a copy in it; an invalid object for
// anything else.
nb::object NativeByteOrder(nb::handle value) {
  PyObject* dtype = PyObject_GetAttrString(value.ptr(), "dtype");
  if (!dtype) {
    PyErr_Clear();
    return {};
  }
  nb::object type = nb::steal(dtype);
  if (!nb::hasattr(type, "isnative") || !nb::hasattr(value, "astype") || nb::cast<bool>(type.attr("isnative"))) return {};
  return value.attr("astype")(type.attr("newbyteorder")("="));
}

// `storage`: a vector whose capacity is reused (every element is overwritten).
template <class T>
std::vector<T> ReadArray(nb::handle value, const std::string& where, const std::string& field, bool numbers = false,
                         std::vector<T> storage = {}) {
  nb::ndarray<nb::ro> array;
  if (!nb::isinstance<nb::list>(value) && !nb::isinstance<nb::tuple>(value) && nb::try_cast(value, array, false)) {
    if (array.device_type() != nb::device::cpu::value) Bad(where, field, "is not on the CPU (move it with .cpu())");
    if (array.ndim() != 1) {
      Bad(where, field, "must be one-dimensional here, got " + std::to_string(array.ndim()) + " dimensions");
    }
    const auto dt = array.dtype();
    using Code = nb::dlpack::dtype_code;
    const auto code = static_cast<Code>(dt.code);
    const bool integral = code == Code::Int || code == Code::UInt || code == Code::Bool;
    const bool floating = code == Code::Float && (dt.bits == 32 || dt.bits == 64);
    if (dt.lanes != 1 || !(integral || (numbers && floating)) || (integral && code != Code::Bool && dt.bits > 64)) {
      Bad(where, field, std::string("has an unsupported dtype (") + (floating ? "floating point" : "code " + std::to_string(dt.code)) +
                            ", " + std::to_string(dt.bits) + " bits): " + (numbers ? "numbers" : "integers or bools") +
                            " are expected");
    }
    const std::size_t n = array.shape(0);
    const std::int64_t stride = array.stride(0) * static_cast<std::int64_t>(dt.bits / 8);
    const auto* base = static_cast<const std::uint8_t*>(array.data());
    std::vector<T> out = std::move(storage);
    out.resize(n);
    if (code == Code::Int && dt.bits == 64 && stride == 8 && sizeof(T) == 8 && std::is_integral_v<T>) {
      if (n) std::memcpy(out.data(), base, n * 8);  // the common case: int64 contiguous, one copy
    } else if (floating) {
      for (std::size_t k = 0; k < n; ++k) {
        const auto* p = base + static_cast<std::int64_t>(k) * stride;
        out[k] = static_cast<T>(dt.bits == 32 ? *reinterpret_cast<const float*>(p) : *reinterpret_cast<const double*>(p));
      }
    } else {
      for (std::size_t k = 0; k < n; ++k) {
        std::int64_t v = 0;
        if (!IntegerElement(base + static_cast<std::int64_t>(k) * stride, dt, v)) {
          Bad(where, field + "[" + std::to_string(k) + "]",
              "is " + std::to_string(*reinterpret_cast<const std::uint64_t*>(base + static_cast<std::int64_t>(k) * stride)) +
                  " (uint64), which does not fit a signed 64-bit integer: ids and labels are int64 values");
        }
        // the entry's name is built only for an error (a string per element cost 100 ns a token)
        out[k] = Fits<T>(v) ? static_cast<T>(v) : Narrow<T>(v, where, field + "[" + std::to_string(k) + "]");
      }
    }
    return out;
  }
  if (!nb::isinstance<nb::list>(value) && !nb::isinstance<nb::tuple>(value)) {
    // numpy's other byte order, which nanobind does not import: read in the native one, as the Python reader
    // does (packoracle._arrays._native)
    if (nb::object native = NativeByteOrder(value); native.is_valid()) {
      return ReadArray<T>(native, where, field, numbers, std::move(storage));
    }
    Bad(where, field, "must be an array, a tensor or a list, got " + TypeName(value));
  }
  // A list or tuple's items read in place (an iterator's reference per item cost about as much as the rest).
  PyObject* const* items = PySequence_Fast_ITEMS(value.ptr());
  const auto size = static_cast<std::size_t>(PySequence_Fast_GET_SIZE(value.ptr()));
  std::vector<T> out = std::move(storage);
  out.resize(size);
  for (std::size_t index = 0; index < size; ++index) {
    const nb::handle item(items[index]);
    if (PyLong_CheckExact(item.ptr())) {  // the common entry (a tokenizer's int), its name built only for an error
      int overflow = 0;
      const long long v = PyLong_AsLongLongAndOverflow(item.ptr(), &overflow);
      if (!overflow && !(v == -1 && PyErr_Occurred()) && Fits<T>(v)) {
        out[index] = static_cast<T>(v);
        continue;
      }
      PyErr_Clear();
    }
    const std::string at = field + "[" + std::to_string(index) + "]";
    if (nb::isinstance<nb::bool_>(item)) {
      out[index] = static_cast<T>(nb::cast<bool>(item));
    } else if (PyIndex_Check(item.ptr())) {
      out[index] = Narrow<T>(Int(item, where, at), where, at);
    } else if (numbers && PyFloat_Check(item.ptr())) {
      out[index] = static_cast<T>(PyFloat_AsDouble(item.ptr()));
    } else {
      Bad(where, at, std::string("must be ") + (numbers ? "a number" : "an integer") + ", got " + TypeName(item));
    }
  }
  return out;
}

nb::handle Get(nb::handle dict, const char* key) {
  PyObject* v = PyDict_GetItemString(dict.ptr(), key);  // borrowed; null when absent
  return v && v != Py_None ? nb::handle(v) : nb::handle();
}

nb::handle Required(nb::handle dict, const char* key, const std::string& where) {
  if (!nb::isinstance<nb::dict>(dict)) Bad(where, key, "cannot be read: expected a dict, got " + TypeName(dict));
  nb::handle v = Get(dict, key);
  if (!v) Bad(where, key, "is missing");
  return v;
}

// A value as the message shows it: its repr (cut at 40 characters) and its type.
std::string Shown(nb::handle v) {
  std::string repr;
  if (PyObject* r = PyObject_Repr(v.ptr())) {
    Py_ssize_t size = 0;
    if (const char* data = PyUnicode_AsUTF8AndSize(r, &size)) repr.assign(data, static_cast<std::size_t>(size));
    Py_DECREF(r);
  }
  PyErr_Clear();
  if (repr.size() > 40) repr = repr.substr(0, 37) + "...";
  return repr + " (" + TypeName(v) + ")";
}

// An integer: a Python int or anything with __index__ (a numpy integer); never a bool, a float or a str.
std::int64_t Int(nb::handle v, const std::string& where, const std::string& field) {
  if (nb::isinstance<nb::bool_>(v) || !PyIndex_Check(v.ptr())) Bad(where, field, "must be an integer, got " + Shown(v));
  PyObject* index = PyNumber_Index(v.ptr());
  if (!index) {
    PyErr_Clear();
    Bad(where, field, "must be an integer, got " + Shown(v));
  }
  int overflow = 0;
  const long long out = PyLong_AsLongLongAndOverflow(index, &overflow);
  Py_DECREF(index);
  if (overflow || (out == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    Bad(where, field, "is " + Shown(v) + ", out of the signed 64-bit range");
  }
  return out;
}

// A real number: an int, a float or a numpy number; never a bool or a str.
double Number(nb::handle v, const std::string& where, const std::string& field) {
  if (nb::isinstance<nb::bool_>(v) || nb::isinstance<nb::str>(v) || !PyNumber_Check(v.ptr()) ||
      PyComplex_Check(v.ptr())) {
    Bad(where, field, "must be a number, got " + Shown(v));
  }
  const double out = PyFloat_AsDouble(v.ptr());
  if (out == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    Bad(where, field, "must be a number, got " + Shown(v));
  }
  return out;
}

std::string String(nb::handle v, const std::string& where, const std::string& field) {
  if (!nb::isinstance<nb::str>(v)) Bad(where, field, "must be a string, got " + Shown(v));
  return Utf8(v, where, field);
}

template <class T>
std::optional<std::vector<T>> Optional(nb::handle row, const char* field, const std::string& where, std::size_t n,
                                       bool numbers = false, std::optional<std::vector<T>> storage = std::nullopt) {
  nb::handle v = Get(row, field);
  if (!v) return std::nullopt;
  auto out = ReadArray<T>(v, where, field, numbers, storage ? std::move(*storage) : std::vector<T>{});
  if (n != static_cast<std::size_t>(-1) && out.size() != n) {
    Bad(where, field, "has " + std::to_string(out.size()) + " entries, input_ids has " + std::to_string(n));
  }
  return out;
}

// Python value → JSON, for policies (small: a flat dict of scalars).
nlohmann::json ToJson(nb::handle v, const std::string& where) {
  if (v.is_none()) return nullptr;
  if (nb::isinstance<nb::bool_>(v)) return nb::cast<bool>(v);
  if (PyIndex_Check(v.ptr())) return Int(v, where, "value");  // an int, or a numpy integer
  if (nb::isinstance<nb::float_>(v)) return nb::cast<double>(v);
  if (nb::isinstance<nb::str>(v)) return Utf8(v, where, "value");
  if (nb::isinstance<nb::dict>(v)) {
    nlohmann::json out = nlohmann::json::object();
    for (auto [key, value] : nb::borrow<nb::dict>(v)) {
      const std::string name = String(key, where, "key");
      out[name] = ToJson(value, where + "." + name);
    }
    return out;
  }
  throw InputError(where + ": a policy value must be null, a bool, an integer or a string, got " + TypeName(v));
}

nb::object FromJson(const nlohmann::ordered_json& j) {
  if (j.is_null()) return nb::none();
  if (j.is_boolean()) return nb::bool_(j.get<bool>());
  if (j.is_number_integer()) return nb::int_(j.get<std::int64_t>());
  if (j.is_number()) return nb::float_(j.get<double>());
  return nb::str(j.get<std::string>().c_str());
}

template <class T>
nb::object Array(const std::vector<T>& values) {
  // An owned copy handed to numpy (the kit's vectors die with the call).
  auto* copy = new std::vector<T>(values);
  nb::capsule owner(copy, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::cast(nb::ndarray<nb::numpy, T, nb::ndim<1>>(copy->data(), {copy->size()}, owner));
}

nb::list IntList(const std::vector<Token>& values) {
  nb::list out;
  for (Token t : values) out.append(nb::int_(t));
  return out;
}

}  // namespace

namespace {

// A flat dict of plain values (exact str keys; None, bool, int of 64 bits, float or str values: a resolved
// policy's form) as a string that holds each item's key, type and value, in order; nullopt for any other dict
// (PolicyFromPython then reads it as before). Equal strings are dicts of the same keys holding values of the
// same types and values, which ToJson reads alike (True and 1 are not the same here: ToJson tells them apart).
std::optional<std::string> PlainPolicyKey(nb::handle policy) {
  if (!PyDict_CheckExact(policy.ptr())) return std::nullopt;
  std::string key;
  key.reserve(640);
  auto text = [&key](PyObject* s) {
    Py_ssize_t size = 0;
    const char* data = PyUnicode_AsUTF8AndSize(s, &size);
    if (!data) {
      PyErr_Clear();
      return false;
    }
    key.append(reinterpret_cast<const char*>(&size), sizeof size).append(data, static_cast<std::size_t>(size));
    return true;
  };
  auto bytes = [&key](char tag, const auto& value) {
    key.push_back(tag);
    key.append(reinterpret_cast<const char*>(&value), sizeof value);
  };
  PyObject *k = nullptr, *v = nullptr;
  Py_ssize_t pos = 0;
  while (PyDict_Next(policy.ptr(), &pos, &k, &v)) {
    if (!PyUnicode_CheckExact(k) || !text(k)) return std::nullopt;
    if (v == Py_None) {
      key.push_back('N');
    } else if (v == Py_True || v == Py_False) {
      key.push_back(v == Py_True ? 'T' : 'F');
    } else if (PyLong_CheckExact(v)) {
      int overflow = 0;
      const long long value = PyLong_AsLongLongAndOverflow(v, &overflow);
      if (overflow || (value == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return std::nullopt;
      }
      bytes('I', value);
    } else if (PyFloat_CheckExact(v)) {
      bytes('D', PyFloat_AS_DOUBLE(v));
    } else if (PyUnicode_CheckExact(v)) {
      key.push_back('S');
      if (!text(v)) return std::nullopt;
    } else {
      return std::nullopt;
    }
  }
  return key;
}

// PolicyFromPython's reading: the JSON form of the policy, resolved and validated (the last valid ones kept).
Policy ResolvedPolicy(nb::handle policy, const std::string& where) {
  nlohmann::json spec;
  if (nb::isinstance<nb::str>(policy)) {
    spec = nlohmann::json{{"preset", Utf8(policy, where, "preset")}};
  } else if (nb::isinstance<nb::dict>(policy)) {
    spec = ToJson(policy, where);
  } else {
    throw InputError(where + ": a policy is a preset name or a dict of policy keys, got " + TypeName(policy));
  }
  // The last policies read, by their JSON (a policy is a function of it): check_batch reads the same policy
  // three times a call (resolve, the spans, the audit), and the guard on every batch; resolving and
  // validating one cost about 50 us each time. Only policies that were valid are kept. Looked up by the JSON's
  // text, not by json ==, which holds -1 and -1.0 equal: a key that refuses a float (pad_id) took -1.0 once -1
  // had been read (python/tests/test_policy_cache.py).
  thread_local std::vector<std::pair<std::string, Policy>> recent;
  std::string text = spec.dump();
  for (const auto& [known, resolved] : recent)
    if (known == text) return resolved;
  Policy resolved = PolicyFromJson(spec, where);
  if (recent.size() >= 8) recent.erase(recent.begin());
  recent.emplace_back(std::move(text), resolved);
  return resolved;
}

}  // namespace

Policy PolicyFromPython(nb::handle policy, const std::string& where) {
  // The last valid policies read from a plain dict, by PlainPolicyKey: a check reads the same resolved dict
  // twice (the spans, the audit), and the guard on every batch; building its JSON to look it up cost about
  // 80,000 instructions, its key about 5,000. A miss reads it as before.
  thread_local std::vector<std::pair<std::string, Policy>> plain;
  const std::optional<std::string> key = PlainPolicyKey(policy);
  if (key) {
    for (const auto& [known, resolved] : plain)
      if (known == *key) return resolved;
  }
  Policy resolved = ResolvedPolicy(policy, where);
  if (key) {
    if (plain.size() >= 8) plain.erase(plain.begin());
    plain.emplace_back(*key, resolved);
  }
  return resolved;
}

nb::dict PolicyToPython(const Policy& policy) {
  nb::dict out;
  const nlohmann::ordered_json json = PolicyToJson(policy);  // items() refers into it: keep it alive
  for (const auto& [key, value] : json.items()) out[key.c_str()] = FromJson(value);
  return out;
}

const std::vector<DocumentRef>& DocumentRefsOf(nb::handle documents, const std::string& where,
                                               std::vector<Document>& read, std::vector<DocumentRef>& refs) {
  DocumentSet* set = nullptr;
  if (nb::try_cast<DocumentSet*>(documents, set, false) && set) return set->refs();
  read = DocumentsFromPython(documents, where);
  refs.clear();
  for (const Document& d : read) refs.push_back(DocumentRef::Of(d));
  return refs;
}

std::vector<Document> DocumentsFromPython(nb::handle documents, const std::string& where) {
  DocumentSet* set = nullptr;
  if (nb::try_cast<DocumentSet*>(documents, set, false) && set) return set->documents();
  if (!nb::isinstance<nb::list>(documents)) throw InputError(where + ": expected a list of documents");
  std::vector<Document> out;
  std::size_t k = 0;
  for (nb::handle d : nb::borrow<nb::list>(documents)) {
    const std::string at = where + "[" + std::to_string(k++) + "]";
    Document doc;
    doc.uid = String(Required(d, "doc_uid", at), at, "doc_uid");
    doc.tokens = ReadArray<Token>(Required(d, "tokens", at), at, "tokens");
    if (nb::handle s = Get(d, "supervised")) {
      doc.supervised = ReadArray<int>(s, at, "supervised");
      if (doc.supervised.size() != doc.tokens.size()) {
        Bad(at, "supervised", "has " + std::to_string(doc.supervised.size()) + " entries, tokens has " +
                                  std::to_string(doc.tokens.size()));
      }
    }
    out.push_back(std::move(doc));
  }
  return out;
}

std::vector<std::int64_t> IntegersFromPython(nb::handle value, const std::string& where, const std::string& field) {
  nb::ndarray<nb::ro> array;
  if (!nb::isinstance<nb::list>(value) && !nb::isinstance<nb::tuple>(value) && nb::try_cast(value, array, false) &&
      array.ndim() != 1) {
    return ReadArray<std::int64_t>(value.attr("reshape")(-1), where, field);  // [1, n] as a tokenizer returns it
  }
  return ReadArray<std::int64_t>(value, where, field);
}

ProducerTotals ProducerFromPython(nb::handle p, const std::string& at) {
  if (!nb::isinstance<nb::dict>(p)) throw InputError(at + ": expected a dict of producer totals, got " + TypeName(p));
  // Any non-empty subset of loss_sum, denominator, loss (None = not given), with denominator_scope exactly
  // when a denominator is given: MicrobatchFromJson's rule (DESIGN §5).
  ProducerTotals t;
  for (const auto& field : kProducerTotalsFields) {  // the numbers first, then the scope (named first)
    const std::string name(field.name);
    if (nb::handle v = field.number ? Get(p, name.c_str()) : nb::handle()) t.*field.number = Number(v, at, name);
  }
  const std::string scope_name(kDenominatorScopeField);
  nb::handle scope = Get(p, scope_name.c_str());
  if (scope) t.denominator_scope = String(scope, at, scope_name);
  if (const auto problem = ProducerTotalsProblem(t, static_cast<bool>(scope))) {
    if (problem->field == "producer") throw InputError(at + ": " + problem->sentence);
    Bad(at, problem->field, problem->sentence);
  }
  return t;
}

namespace {

// A span dict in its common form, read without building its location or a key object per lookup: an exact
// dict whose four keys hold an exact str of valid UTF-8 and three exact ints in the int64 range. False for
// anything else, which the named reading below then reads (and refuses, naming the span and the field), so
// the two agree on every value this one takes.
bool PlainSpan(PyObject* span, DocSpan& out) {
  static const std::array<PyObject*, kSpanFields.size()> keys = [] {  // kSpanFields' names, interned once
    std::array<PyObject*, kSpanFields.size()> interned{};
    for (std::size_t k = 0; k < kSpanFields.size(); ++k)
      interned[k] = PyUnicode_InternFromString(kSpanFields[k].name.data());
    return interned;
  }();
  static_assert(kSpanFields.size() == 4 && !kSpanFields[0].number, "the uid, then three integers");
  if (!PyDict_CheckExact(span)) return false;
  PyObject* values[4];
  for (std::size_t k = 0; k < 4; ++k) {
    values[k] = PyDict_GetItemWithError(span, keys[k]);  // borrowed; an exact str key hashes without Python code
    if (!values[k]) {
      PyErr_Clear();
      return false;
    }
  }
  if (!PyUnicode_CheckExact(values[0])) return false;
  Py_ssize_t size = 0;
  const char* uid = PyUnicode_AsUTF8AndSize(values[0], &size);
  if (!uid) {
    PyErr_Clear();
    return false;
  }
  std::int64_t ints[3];
  for (int k = 0; k < 3; ++k) {
    if (!PyLong_CheckExact(values[k + 1])) return false;  // a bool is not exact: the named reading refuses it
    int overflow = 0;
    ints[k] = PyLong_AsLongLongAndOverflow(values[k + 1], &overflow);
    if (overflow) return false;
  }
  out.doc_uid.assign(uid, static_cast<std::size_t>(size));
  for (std::size_t k = 1; k < kSpanFields.size(); ++k) out.*kSpanFields[k].number = ints[k - 1];
  return true;
}

}  // namespace

void SpansFromPython(nb::handle spans, const std::string& at, std::vector<DocSpan>& out) {
  if (!nb::isinstance<nb::list>(spans) && !nb::isinstance<nb::tuple>(spans)) {
    Bad(at, "doc_spans", "must be a list, got " + TypeName(spans));
  }
  std::size_t s = 0;
  // An exact list or tuple's size, read without calling Python (a subclass's __len__ could raise or lie).
  const Py_ssize_t count = PyList_CheckExact(spans.ptr())    ? PyList_GET_SIZE(spans.ptr())
                           : PyTuple_CheckExact(spans.ptr()) ? PyTuple_GET_SIZE(spans.ptr())
                                                             : 0;
  out.reserve(out.size() + static_cast<std::size_t>(count));
  for (nb::handle span : nb::borrow<nb::sequence>(spans)) {
    if (PlainSpan(span.ptr(), out.emplace_back())) {  // read in place: its uid copied once
      ++s;
      continue;
    }
    out.pop_back();
    const std::string sat = at + ": doc_spans[" + std::to_string(s++) + "]";
    const bool dict = nb::isinstance<nb::dict>(span);
    if (dict || (nb::isinstance<nb::tuple>(span) && nb::len(span) == kSpanFields.size())) {
      DocSpan read;  // kSpanFields in order, by name from a dict, by place from a tuple
      for (std::size_t k = 0; k < kSpanFields.size(); ++k) {
        const std::string name(kSpanFields[k].name);
        nb::object value = dict ? nb::borrow(Required(span, name.c_str(), sat)) : nb::object(span[k]);
        if (kSpanFields[k].number) read.*kSpanFields[k].number = Int(value, sat, name);
        else read.doc_uid = String(value, sat, name);
      }
      out.push_back(std::move(read));
    } else {
      throw InputError(sat + ": a span is a dict {doc_uid, start, length, doc_offset}, got " + TypeName(span));
    }
  }
}

// Every field of a row but its spans, in kRowFields' order (row_members.h): a required one must be there, an
// optional one absent (or None) is not given, a per-token one has as many entries as input_ids (the first), and
// a real field takes floats (loss_mask) where the others take integers or bools.
void RowFieldsFromPython(nb::handle r, const std::string& at, CandidateRow& row, CandidateRow& reuse) {
  std::size_t n = static_cast<std::size_t>(-1);
  ForEachRowField([&](auto i) {
    constexpr std::size_t I = decltype(i)::value;
    constexpr RowField field = kRowFields[I];
    if constexpr (I != kRowSpansField) {
      const std::string name(field.name);
      const std::size_t length = field.shape == RowFieldShape::kPerToken ? n : static_cast<std::size_t>(-1);
      auto& member = RowMember<I>(row);
      if constexpr (field.required) {
        using T = typename std::remove_cvref_t<decltype(member)>::value_type;
        member = ReadArray<T>(Required(r, name.c_str(), at), at, name, std::is_floating_point_v<T>,
                              std::move(RowMember<I>(reuse)));
        if (length != static_cast<std::size_t>(-1) && member.size() != length)
          Bad(at, name, "has " + std::to_string(member.size()) + " entries, input_ids has " + std::to_string(n));
      } else {
        using T = typename std::remove_cvref_t<decltype(*member)>::value_type;
        member = Optional<T>(r, name.c_str(), at, length, std::is_floating_point_v<T>, std::move(RowMember<I>(reuse)));
      }
      if constexpr (I == kRowLengthField) n = member.size();
    }
  });
}

CandidateRow RowFromPython(nb::handle r, const std::string& at, bool spans_required, CandidateRow reuse) {
  CandidateRow row;  // every field read afresh; only `reuse`'s storage is kept
  RowFieldsFromPython(r, at, row, reuse);
  const char* spans = kRowFields[kRowSpansField].name.data();  // a literal's view: NUL-terminated
  if (!spans_required && !Get(r, spans)) return row;
  SpansFromPython(Required(r, spans, at), at, RowMember<kRowSpansField>(row));
  return row;
}

CandidateMicrobatch MicrobatchFromPython(nb::handle j, const std::string& where, CandidateMicrobatch reuse) {
  if (nb::isinstance<BatchView>(j)) return nb::cast<const BatchView&>(j).Read(where, std::move(reuse));
  CandidateMicrobatch mb;
  if (!nb::isinstance<nb::dict>(j)) throw InputError(where + ": a micro-batch must be a dict, got " + TypeName(j));
  if (nb::handle s = Get(j, "step")) mb.step = Int(s, where, "step");
  mb.micro_step = Int(Required(j, "micro_step", where), where, "micro_step");
  mb.rank = Int(Required(j, "rank", where), where, "rank");
  nb::handle rows = Required(j, "rows", where);
  if (!nb::isinstance<nb::list>(rows)) Bad(where, "rows", "must be a list of rows, got " + TypeName(rows));
  std::size_t k = 0;
  for (nb::handle r : nb::borrow<nb::list>(rows)) {
    const std::string at = where + ": rows[" + std::to_string(k) + "]";
    mb.rows.push_back(RowFromPython(r, at, true, k < reuse.rows.size() ? std::move(reuse.rows[k]) : CandidateRow{}));
    ++k;
  }
  if (nb::handle p = Get(j, "producer")) mb.producer = ProducerFromPython(p, where + ": producer");
  return mb;
}

nb::dict RequestToPython(const PackRequest& request) {
  nb::dict out;
  out["id"] = request.id;
  out["row_length"] = request.row_length;
  out["micro_batch_rows"] = request.micro_batch_rows;
  out["dp_world_size"] = request.dp_world_size;
  out["policy"] = PolicyToPython(request.policy);
  nb::list docs;
  for (const auto& d : request.documents) {
    nb::dict doc;
    doc["doc_uid"] = d.uid;
    doc["tokens"] = IntList(d.tokens);
    nb::list supervised;
    if (d.supervised.empty()) {
      for (std::size_t k = 0; k < d.tokens.size(); ++k) supervised.append(1);
    } else {
      for (int s : d.supervised) supervised.append(s);
    }
    doc["supervised"] = supervised;
    docs.append(doc);
  }
  out["documents"] = docs;
  nb::dict losses;
  for (const auto& [uid, values] : request.target_losses) {
    nb::list l;
    for (double v : values) l.append(v);
    losses[uid.c_str()] = l;
  }
  out["target_losses"] = losses;
  return out;
}

nb::dict DocumentToPython(const EffectiveDocument& d) {
  nb::dict out;
  out["doc_uid"] = d.uid;
  out["tokens"] = Array(d.tokens);
  out["supervised"] = Array(d.supervised);
  return out;
}

// A row as a dict: its fields in kRowFields' order, an optional one only when given.
nb::dict RowToPython(const CandidateRow& row) {
  nb::dict out;
  ForEachGivenRowField(
      row, [&](std::string_view name, const auto& values) { out[std::string(name).c_str()] = Array(values); },
      [&](std::string_view name, const std::vector<DocSpan>& spans) {
        nb::list list;
        for (const auto& s : spans) list.append(DocSpanToPython(s));
        out[std::string(name).c_str()] = list;
      });
  return out;
}

nb::dict DocSpanToPython(const DocSpan& span) {
  nb::dict out;
  for (const auto& field : kSpanFields) {
    const std::string name(field.name);
    if (field.number) out[name.c_str()] = span.*field.number;
    else out[name.c_str()] = span.doc_uid;
  }
  return out;
}

nb::dict ProducerToPython(const ProducerTotals& t) {
  nb::dict out;
  // Every key present, None where the producer gave nothing (its totals are any non-empty subset).
  auto given = [](const std::optional<double>& v) { return v ? nb::object(nb::float_(*v)) : nb::none(); };
  for (const auto& field : kProducerTotalsFields) {
    const std::string name(field.name);
    out[name.c_str()] = field.number                  ? given(t.*field.number)
                        : t.denominator_scope.empty() ? nb::none()
                                                      : nb::object(nb::str(t.denominator_scope.c_str()));
  }
  return out;
}

nb::dict MicrobatchToPython(const CandidateMicrobatch& mb) {
  nb::dict out;
  out["step"] = mb.step;
  out["micro_step"] = mb.micro_step;
  out["rank"] = mb.rank;
  nb::list rows;
  for (const auto& r : mb.rows) rows.append(RowToPython(r));
  out["rows"] = rows;
  out["producer"] = mb.producer ? nb::object(ProducerToPython(*mb.producer)) : nb::none();
  return out;
}

}  // namespace packoracle::python
