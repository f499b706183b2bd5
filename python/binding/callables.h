// A Python callable as a candidate of the kit: packoracle.fuzz(packer, reducer=, consumer=) wraps each given
// callable in one of the roles of packoracle/properties/candidate.h, so that the kit's generation, checks and
// shrinking (all C++) drive Python code in-process, with no subprocess and no JSON.
//
// The Python side (packoracle/_fuzz.py) passes each user callable through a driver that catches what the
// callable raises and normalizes what it returns; the driver returns (kind, value):
//   ("ok", value)      the answer, already in canonical form (micro-batch dicts of 1-D arrays; totals; a uint8
//                      n × n mask per row, a list of them for a micro-batch consumer)
//   ("refuse", text)   the packer raised packoracle.Refuse(text)
//   ("fault", text)    the callable raised (text: its traceback) or returned something that is not an answer
// A fault is the failure of that case and is shrunk like any other. KeyboardInterrupt and SystemExit pass
// through the driver: the role remembers the first, answers every later call with a fault at once (so the
// run ends quickly) and CallableRoles::RethrowInterrupt raises it again once the kit returns.
#pragma once

#include <memory>
#include <optional>

#include <nanobind/nanobind.h>

#include "packoracle/properties/candidate.h"

namespace packoracle::python {

namespace nb = nanobind;

// What the roles of one run share: the interrupt, if any.
struct CallState {
  std::optional<nb::python_error> interrupt;
};

// A value consumer's driver (None: none given), its declared tolerance, and whether it answers gradients.
struct ValueDriver {
  nb::object driver = nb::none();
  ValueTolerance tolerance;
  bool gradients = false;
};

// Builds a candidate from the drivers (None for a role not given); `state` must outlive the candidate's use.
// `microbatch_consumer`: the consumer's driver takes a whole micro-batch and answers one mask per row.
Candidate CallableCandidate(const std::string& name, nb::object packer, nb::object reducer, nb::object consumer,
                            bool microbatch_consumer, std::shared_ptr<CallState> state,
                            const ValueDriver& values = {});

}  // namespace packoracle::python
