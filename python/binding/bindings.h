// The parts of the extension module packoracle._core, each bound by a function of its own (module.cc calls
// them). The Python package (packoracle/) is the public API; _core is its engine and not meant to be used
// directly.
#pragma once

#include <nanobind/nanobind.h>

namespace packoracle::python {

namespace nb = nanobind;

void BindPolicies(nb::module_& m);  // presets, policy resolution
void BindFuzz(nb::module_& m);      // packoracle.fuzz
void BindAudit(nb::module_& m);     // check_batch, check_step, verify, draw
void BindSpans(nb::module_& m);     // doc_spans derived from the documents
void BindDocuments(nb::module_& m); // the guard's documents, read from the features in one call
void BindBatch(nb::module_& m);     // check_batch's batch, read in one call
void BindRowDocuments(nb::module_& m);  // the documents read from rows alone (the guard without documents)

}  // namespace packoracle::python
