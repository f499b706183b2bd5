// packoracle._core.fuzz: jobs::RunFuzz, the run of `packoracle fuzz` (batches of cases with seeds derived from
// the run's, a profile per batch, the time budget, shrinking, the report, the regression file), against
// Python callables in-process instead of an exec candidate.
#include <memory>
#include <optional>
#include <utility>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>

#include "bindings.h"
#include "callables.h"
#include "convert.h"
#include "packoracle/jobs/fuzz.h"
#include "packoracle/jobs/fuzz_options.h"
#include "packoracle/jobs/generation_json.h"
#include "packoracle/jobs/report_json.h"
#include "packoracle/oracle/error.h"

namespace packoracle::python {
namespace {

nb::list Names(const std::set<Invariant>& invariants) {
  nb::list out;
  for (Invariant i : invariants) out.append(Name(i));
  return out;
}

std::string TypeOf(nb::handle value) { return nb::cast<std::string>(nb::type_name(value.type())); }

// The value as T, without Python's conversions (packoracle._fuzz hands over values of the right kind).
template <class T>
T As(nb::handle value, std::string_view name) {
  T out{};
  if (!nb::try_cast<T>(value, out, /*convert=*/false))
    throw InputError("fuzz: option '" + std::string(name) + "' cannot take " + TypeOf(value));
  return out;
}

// The options a dict of packoracle.fuzz's keywords gives, read by the table of the run's options
// (jobs::kFuzzOptions): None is an option's default (cases: as many as `time` allows when it is given), a
// keyword that negates its member (decoder) is turned round. InputError for a key the table does not hold.
// packoracle._fuzz validates each value at the door; CheckFuzzOptions checks the ranges again, as for the
// command line.
jobs::FuzzOptions FuzzOptionsFromPython(nb::handle keywords) {
  jobs::FuzzOptions options;
  if (!nb::isinstance<nb::dict>(keywords)) throw InputError("fuzz: options must be a dict, got " + TypeOf(keywords));
  for (const auto& [key, value] : nb::borrow<nb::dict>(keywords)) {
    const std::string name = As<std::string>(key, "(a key)");
    const jobs::FuzzOption* entry = jobs::FuzzOptionOfKeyword(name);
    if (!entry) throw InputError("fuzz: unknown option '" + name + "'");
    std::visit(
        [&](auto member) {
          using T = std::remove_reference_t<decltype(options.*member)>;
          T given = value.is_none() ? jobs::FuzzOptions{}.*member : As<T>(value, entry->keyword);
          if constexpr (std::is_same_v<T, bool>) given = given != (entry->keyword_negates && !value.is_none());
          options.*member = given;
        },
        entry->member);
    if (entry->member == jobs::FuzzMember(&jobs::FuzzOptions::cases)) options.cases_given = !value.is_none();
  }
  return options;
}

// The table as packoracle._fuzz reads it: each entry's keyword ("" where Python has none) and flag, whether the
// replay line repeats it, and its default in the keyword's sense.
nb::list FuzzOptionsTable() {
  nb::list out;
  for (const auto& entry : jobs::kFuzzOptions) {
    nb::dict d;
    d["keyword"] = std::string(entry.keyword);
    d["flag"] = std::string(entry.flag);
    d["replayed"] = entry.replayed;
    std::visit(
        [&](auto member) {
          const auto value = jobs::FuzzOptions{}.*member;
          if constexpr (std::is_same_v<decltype(value), const bool>) d["default"] = value != entry.keyword_negates;
          else d["default"] = value;
        },
        entry.member);
    out.append(d);
  }
  return out;
}

struct FuzzArgs {
  std::string name;
  nb::object packer, reducer, consumer;
  nb::object policy;
  nb::object options;  // packoracle.fuzz's keywords (jobs::kFuzzOptions)
  bool microbatch_consumer = false;
  ValueDriver values;  // value_consumer=, its tolerance, gradient=True
  nb::object emitted;  // fuzz(step_view=True)'s list of the packer's latest answer (None: no step view)
};

// The roles run as exec processes take what the in-process ones take from packoracle.fuzz's other arguments:
// the exec value consumer gradient=True and value_tolerance, the step view the exec packer's records, each parsed
// by Python's json (its own field names and nesting, as a Python packer's answer is kept).
void ForExecRoles(const FuzzArgs& a, bool tolerance_given, jobs::FuzzOptions& options) {
  if (!options.exec_value_consumer.empty()) {
    options.exec_value_gradients = a.values.gradients;
    if (tolerance_given) options.exec_value_tolerance = a.values.tolerance;
  }
  if (options.exec_packer.empty() || a.emitted.is_none()) return;
  options.on_emitted = [emitted = a.emitted](const std::vector<std::string>& records) {
    nb::gil_scoped_acquire gil;
    nb::object loads = nb::module_::import_("json").attr("loads");
    nb::list answer;
    for (const auto& record : records) answer.append(loads(nb::str(record.c_str(), record.size())));
    emitted.attr("clear")();  // the latest answer only, as _fuzz's packer driver keeps it
    emitted.attr("append")(answer);
  };
}

nb::dict RunFuzz(const FuzzArgs& a, bool tolerance_given) {
  auto state = std::make_shared<CallState>();
  Candidate candidate = CallableCandidate(a.name, a.packer, a.reducer, a.consumer, a.microbatch_consumer, state, a.values);
  jobs::FuzzOptions options = FuzzOptionsFromPython(a.options);
  ForExecRoles(a, tolerance_given, options);
  options.policy = PolicyFromPython(a.policy, "policy");
  options.regression_draft = false;  // a Python user replays the case; the C++ draft is for C++ users
  jobs::CheckFuzzOptions(options);
  const jobs::FuzzPolicies policies = jobs::ResolveFuzzPolicies(options);
  candidate.policies = policies.policies;
  jobs::FuzzHooks hooks;
  hooks.interrupted = [&state] { return state->interrupt.has_value(); };
  const jobs::FuzzOutcome outcome = jobs::RunFuzz(candidate, options, policies, hooks);
  if (state->interrupt) {  // Ctrl-C in a callable: the caller gets its KeyboardInterrupt
    state->interrupt->restore();
    throw nb::python_error();
  }
  nb::dict out;
  out["passed"] = !outcome.failure.has_value();
  out["cases"] = outcome.cases_run;
  out["seconds"] = outcome.seconds;
  out["stopped_by"] = outcome.stopped_by;
  nb::list profiles;
  for (const auto& p : outcome.profiles) profiles.append(p);
  out["profiles"] = profiles;
  out["checked"] = Names(outcome.checked);
  out["gap"] = DescribeGap(outcome.gaps);
  // What the attention consumer computed against what the declared rule needs (efficiency), where it said.
  if (const auto& w = outcome.consumer_work) {
    nb::dict work;
    work["computed"] = w->computed;
    work["required"] = w->required;
    work["utilization"] = w->utilization();
    out["consumer_work"] = work;
  } else {
    out["consumer_work"] = nb::none();
  }
  // What was generated (stats=True), as `fuzz --format json` holds it under "generated".
  out["generated"] = outcome.generated ? nb::object(nb::str(jobs::GenerationStatsJson(*outcome.generated).dump().c_str()))
                                       : nb::none();
  if (const auto& f = outcome.failure; f && f->counterexample) {
    out["text"] = outcome.failure_text;
    // The report as sections, for Counterexample's attributes, as `fuzz --format json` holds them.
    out["sections"] = f->sections ? nb::object(nb::str(jobs::ReportSectionsJson(*f->sections).dump().c_str())) : nb::none();
    out["reproduce"] = f->reproduce;
    out["invariant"] = f->broken() ? nb::object(nb::str(Name(*f->broken()))) : nb::none();
    out["cases_to_failure"] = f->cases_to_failure;
    out["shrinks"] = f->shrinks;
    out["not_applicable"] = Names(f->not_applicable);
    out["counterexample"] = RequestToPython(*f->counterexample);
    out["regression"] = outcome.regression_path.empty() ? nb::none() : nb::object(nb::str(outcome.regression_path.c_str()));
    if (!outcome.regression_error.empty()) throw InputError("save_regressions: " + outcome.regression_error);
  }
  return out;
}

}  // namespace

void BindFuzz(nb::module_& m) {
  m.def(
      "fuzz",
      [](std::string name, nb::object packer, nb::object reducer, nb::object consumer, nb::object policy,
         nb::dict options, bool microbatch_consumer, nb::object values, std::optional<std::pair<double, double>> tolerance,
         bool value_gradients, nb::object emitted) {
        ValueDriver driver{std::move(values), {}, value_gradients};
        if (tolerance) driver.tolerance = {tolerance->first, tolerance->second};
        return RunFuzz({std::move(name), std::move(packer), std::move(reducer), std::move(consumer), std::move(policy),
                        std::move(options), microbatch_consumer, std::move(driver), std::move(emitted)},
                       tolerance.has_value());
      },
      nb::arg("name"), nb::arg("packer").none(), nb::arg("reducer").none(), nb::arg("consumer").none(), nb::arg("policy"),
      nb::arg("options"), nb::arg("microbatch_consumer") = false, nb::arg("values").none() = nb::none(),
      nb::arg("value_tolerance").none() = nb::none(), nb::arg("value_gradients") = false,
      nb::arg("emitted").none() = nb::none(),
      "Runs the kit's generated cases against the drivers of packoracle.fuzz (use that function); `options`: its "
      "keywords (fuzz_options()); `emitted`: the step view's list, kept as the exec packer's latest answer.");
  m.def("fuzz_options", &FuzzOptionsTable,
        "The run's options (jobs::kFuzzOptions), each as {keyword, flag, replayed, default}: fuzz's `options` "
        "dict takes the keywords (\"\": none); `replayed`, a replay line repeats it away from its default.");
}

}  // namespace packoracle::python
