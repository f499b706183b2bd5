// packoracle._core: the C++ kit as a Python extension module (nanobind). Nothing is reimplemented here: every
// function converts its arguments, calls the library the command line calls, and converts the result back.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "convert.h"
#include "packoracle/jobs/fuzz.h"
#include "packoracle/oracle/layout.h"
#include "packoracle/oracle/presets.h"
#include "packoracle/properties/backend_attention.h"
#include "packoracle/jobs/span_derivation.h"
#include "packoracle/properties/invariants.h"

namespace packoracle::python {

namespace {

nb::object PolicyValueToPython(const PolicyValue& value) {
  if (std::holds_alternative<std::nullptr_t>(value)) return nb::none();
  if (const auto* b = std::get_if<bool>(&value)) return nb::bool_(*b);
  if (const auto* i = std::get_if<std::int64_t>(&value)) return nb::int_(*i);
  return nb::str(std::get<std::string>(value).c_str());
}

// The policy keys' table (oracle/src/policy.cc Keys()), which which_policy's search walks.
void BindPolicyKeys(nb::module_& m) {
  m.def(
      "policy_key_domains",
      [] {
        nb::list out;
        for (const PolicyKeyDomain& domain : PolicyKeyDomains()) {
          nb::dict d;
          d["key"] = domain.key;
          nb::list values;
          for (const PolicyValue& v : domain.values) values.append(PolicyValueToPython(v));
          d["values"] = values;
          d["open"] = domain.open;
          d["takes"] = domain.takes;
          d["after_version_one"] = domain.after_version_one;
          d["default"] = PolicyValueToPython(domain.default_value);
          out.append(d);
        }
        return out;
      },
      "Every policy key in canonical order, with what it takes (oracle/src/policy.cc's key table): key, values "
      "(the closed set, or the values named ahead of an open one), open (other values allowed too: any integer, "
      "multiple_of:k), takes (as an error message says it), after_version_one, default (its value in a policy built "
      "key by key, which a resolved policy's JSON leaves out for a later key).");
}

}  // namespace

void BindPolicies(nb::module_& m) {
  BindPolicyKeys(m);
  m.def(
      "presets",
      [] {
        nb::list out;
        for (const Preset& p : Presets()) {
          nb::dict d;
          d["name"] = p.name;
          d["system"] = p.system;
          d["summary"] = p.summary;
          d["notes"] = p.notes;
          d["policy"] = PolicyToPython(p.policy);
          out.append(d);
        }
        return out;
      },
      "Every preset: name, system, summary, notes and its fully resolved policy.");
  m.def(
      "resolve_policy", [](nb::handle policy) { return PolicyToPython(PolicyFromPython(policy, "policy")); },
      nb::arg("policy"), "A preset name or a dict of policy keys, resolved: every key present (ValueError if invalid).");
  m.def(
      "invariants",
      [] {
        nb::list out;
        for (Invariant i : CheckedInvariants()) out.append(Name(i));
        return out;
      },
      "The invariants the kit checks, in report order (DESIGN §4).");
  m.def(
      "effective_documents",
      [](nb::handle documents, nb::handle policy) {
        const Policy p = PolicyFromPython(policy, "policy");
        nb::list out;
        for (const Document& d : DocumentsFromPython(documents, "documents")) out.append(DocumentToPython(Effective(d, p)));
        return out;
      },
      nb::arg("documents"), nb::arg("policy"),
      "The documents as the packer places them: the policy's delimiters added, every token's supervision filled in.");
  m.def(
      "segments",
      [](nb::handle row, nb::handle policy, bool as_fed) {
        const Policy p = PolicyFromPython(policy, "policy");
        const CandidateRow r = RowFromPython(row, "row", /*spans_required=*/false);
        return as_fed ? DeclaredSegmentsAsFed(r, p) : DeclaredSegments(r, p);
      },
      nb::arg("row"), nb::arg("policy"), nb::kw_only(), nb::arg("as_fed") = false,
      "The segment starts of one canonical row (a dict of 1-D arrays: input_ids, labels and the boundary fields; "
      "doc_spans optional) read from the encoding its policy declares, as the backend reading that encoding "
      "does (properties/backend_attention.h DeclaredSegments). ValueError when the declared encoding is missing "
      "or malformed; with as_fed=True a row without the declared field is one sequence, [0].");
  m.def(
      "segments_as_fed",
      [](nb::handle row, nb::handle policy) {
        const Policy p = PolicyFromPython(policy, "policy");
        const CandidateRow r = RowFromPython(row, "row", /*spans_required=*/false);
        return nb::make_tuple(DeclaredSegmentsAsFed(r, p), ReadsDeclaredEncoding(r, p));
      },
      nb::arg("row"), nb::arg("policy"),
      "(starts, read): the segment starts of one canonical row as a backend fed it reads them (segments with "
      "as_fed=True), and whether they were read from the row's own encoding (properties/backend_attention.h "
      "ReadsDeclaredEncoding; False: the row as one sequence, or the spans). ValueError when the encoding is "
      "malformed.");
  m.def(
      "declared_attention",
      [](nb::handle row, nb::handle policy) {
        const Policy p = PolicyFromPython(policy, "policy");
        const CandidateRow r = RowFromPython(row, "row", /*spans_required=*/true);
        const DenseMask mask = DeclaredAttention(r, p);
        const std::size_t n = mask.size();
        auto* bytes = new std::vector<std::uint8_t>(n * n);
        for (std::size_t i = 0; i < n; ++i)
          std::copy(mask[i].begin(), mask[i].end(), bytes->begin() + static_cast<std::ptrdiff_t>(i * n));
        nb::capsule owner(bytes, [](void* q) noexcept { delete static_cast<std::vector<std::uint8_t>*>(q); });
        return nb::ndarray<nb::numpy, bool, nb::ndim<2>>(reinterpret_cast<bool*>(bytes->data()), {n, n}, owner);
      },
      nb::arg("row"), nb::arg("policy"),
      "The policy's attention rule over one canonical row (a dict of 1-D arrays with doc_spans) as its spans lay "
      "it out, n x n booleans (query, key): properties/backend_attention.h DeclaredAttention, the oracle's "
      "Attends cell by cell.");
  m.def(
      "encoded_segments",
      [](nb::handle row, nb::handle policy) -> std::optional<std::pair<std::vector<std::int64_t>, std::string>> {
        const Policy p = PolicyFromPython(policy, "policy");
        const CandidateRow r = RowFromPython(row, "row", /*spans_required=*/false);
        const auto found = EncodedSegments(r, p);
        if (!found) return std::nullopt;
        return std::make_pair(found->first, std::string(Name(found->second)));
      },
      nb::arg("row"), nb::arg("policy"),
      "(starts, boundary_source) of one canonical row read from its own encodings without its documents: the "
      "declared boundary_source where the row carries it, else the first of cu_seqlens, seq_lens, doc_ids and "
      "position resets it carries that reads (properties/backend_attention.h EncodedSegments); None where none "
      "does.");
  m.def(
      "row_evidence",
      [](nb::handle row, nb::handle policy)
          -> std::tuple<std::vector<std::int64_t>, std::optional<std::int64_t>, std::int64_t> {
        const Policy p = PolicyFromPython(policy, "policy");
        jobs::RowEvidence evidence = jobs::EvidenceOf(RowFromPython(row, "row", /*spans_required=*/false), p);
        return {std::move(evidence.starts), evidence.padding_from, evidence.padding_until};
      },
      nb::arg("row"), nb::arg("policy"),
      "(starts, padding_from, padding_until) of one canonical row: where its encodings start segments "
      "(encoded_segments' starts, [] where none reads), where its marks of padding (a doc id below 0, an "
      "attention_mask of 0) start its trailing run (None: no marks) and where their leading run ends (0: none; "
      "read under padding: left). The evidence SpanDerivation.match chooses between readings by "
      "(jobs/span_derivation.h EvidenceOf).");
  m.def(
      "read_microbatches",
      [](nb::handle microbatches) {
        std::int64_t slots = 0;
        std::size_t k = 0;
        for (nb::handle mb : nb::borrow<nb::list>(microbatches)) {
          for (const auto& row : MicrobatchFromPython(mb, "microbatches[" + std::to_string(k++) + "]").rows)
            slots += static_cast<std::int64_t>(row.input_ids.size());
        }
        return slots;
      },
      nb::arg("microbatches"),
      "Reads canonical micro-batches as the checks read them and returns their slot count: the conversion alone "
      "(bench/python times the binding's own cost with it).");
}

}  // namespace packoracle::python

NB_MODULE(_core, m) {
  m.doc() = "The packoracle C++ kit (oracle, checks, generation, shrinking); use the packoracle package.";
  m.attr("__version__") = "0.1.0";
  // The bounds the Python layer checks arguments against (packoracle/_args.py): the core's, not copies.
  m.attr("MAX_ROW_LENGTH") = packoracle::kMaxRowLength;               // row_length: 1..this
  m.attr("MAX_FUZZ_ROW_LENGTH") = packoracle::jobs::kMaxFuzzRowLength;  // fuzz(max_row_length=): 1..this
  m.attr("MAX_FUZZ_DOCUMENTS") = packoracle::jobs::kMaxFuzzDocuments;   // fuzz(max_documents=): 1..this
  // fuzz's bounds, as `packoracle fuzz` has them: the cases every entry point draws
  m.attr("DEFAULT_FUZZ_MAX_ROW_LENGTH") = packoracle::jobs::kDefaultFuzzMaxRowLength;
  m.attr("DEFAULT_FUZZ_MAX_DOCUMENTS") = packoracle::jobs::kDefaultFuzzMaxDocuments;
  packoracle::python::BindPolicies(m);
  packoracle::python::BindFuzz(m);
  packoracle::python::BindAudit(m);
  packoracle::python::BindSpans(m);
  packoracle::python::BindDocuments(m);
  packoracle::python::BindBatch(m);
  packoracle::python::BindRowDocuments(m);
}
