// packoracle._core.fuzz: jobs::RunFuzz, the run of `packoracle fuzz` (batches of cases with seeds derived from
// the run's, a profile per batch, the time budget, shrinking, the report, the regression file), against
// Python callables in-process instead of an exec candidate.
#include <algorithm>
#include <iterator>
#include <memory>
#include <optional>
#include <string>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "callables.h"
#include "convert.h"
#include "packoracle/jobs/fuzz.h"
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

// packoracle.fuzz's keywords as they set jobs::FuzzOptions, each once: the Python name (the public signature's;
// `decoder` is FuzzOptions::no_decoder turned round) and how a value sets its field. packoracle._fuzz validates
// each value at the door and hands them over as one dict; CheckFuzzOptions checks the ranges again, as for the
// command line. A new option is its FuzzOptions field, its entry here and its keyword in packoracle.fuzz
// (python/tests/test_fuzz_options.py holds the keywords and this table the same).
struct FuzzKeyword {
  const char* name;
  void (*set)(jobs::FuzzOptions&, nb::handle);
};

std::string TypeOf(nb::handle value) { return nb::cast<std::string>(nb::type_name(value.type())); }

// The value as T, without Python's conversions (packoracle._fuzz hands over values of the right kind).
template <class T>
T As(nb::handle value, const char* name) {
  T out{};
  if (!nb::try_cast<T>(value, out, /*convert=*/false))
    throw InputError(std::string("fuzz: option '") + name + "' cannot take " + TypeOf(value));
  return out;
}

constexpr FuzzKeyword kFuzzKeywords[] = {
    {"cases",
     [](jobs::FuzzOptions& o, nb::handle v) {  // None: kDefaultFuzzCases, or as many as `time` allows
       o.cases_given = !v.is_none();
       o.cases = v.is_none() ? jobs::kDefaultFuzzCases : As<int>(v, "cases");
     }},
    {"seed", [](jobs::FuzzOptions& o, nb::handle v) { o.seed = As<std::uint64_t>(v, "seed"); }},
    {"time", [](jobs::FuzzOptions& o, nb::handle v) { o.time = v.is_none() ? 0.0 : As<double>(v, "time"); }},
    {"reproduce",
     [](jobs::FuzzOptions& o, nb::handle v) { o.reproduce = v.is_none() ? "" : As<std::string>(v, "reproduce"); }},
    {"max_row_length",
     [](jobs::FuzzOptions& o, nb::handle v) { o.max_row_length = As<std::int64_t>(v, "max_row_length"); }},
    {"max_documents",
     [](jobs::FuzzOptions& o, nb::handle v) { o.max_documents = As<std::size_t>(v, "max_documents"); }},
    {"decoder", [](jobs::FuzzOptions& o, nb::handle v) { o.no_decoder = !As<bool>(v, "decoder"); }},
    {"save_regressions",
     [](jobs::FuzzOptions& o, nb::handle v) {
       o.save_regressions = v.is_none() ? "" : As<std::string>(v, "save_regressions");
     }},
    {"sft_masks", [](jobs::FuzzOptions& o, nb::handle v) { o.sft_masks = As<bool>(v, "sft_masks"); }},
    {"stats", [](jobs::FuzzOptions& o, nb::handle v) { o.stats = As<bool>(v, "stats"); }},
    {"headline", [](jobs::FuzzOptions& o, nb::handle v) { o.headline = As<std::string>(v, "headline"); }},
};

// The options a dict of packoracle.fuzz's keywords gives (each absent one at FuzzOptions' default); InputError
// for a key the table does not hold.
jobs::FuzzOptions FuzzOptionsFromPython(nb::handle keywords) {
  jobs::FuzzOptions options;
  if (!nb::isinstance<nb::dict>(keywords)) throw InputError("fuzz: options must be a dict, got " + TypeOf(keywords));
  for (const auto& [key, value] : nb::borrow<nb::dict>(keywords)) {
    const std::string name = As<std::string>(key, "(a key)");
    const auto* entry = std::find_if(std::begin(kFuzzKeywords), std::end(kFuzzKeywords),
                                     [&](const FuzzKeyword& k) { return name == k.name; });
    if (entry == std::end(kFuzzKeywords)) throw InputError("fuzz: unknown option '" + name + "'");
    entry->set(options, value);
  }
  return options;
}

struct FuzzArgs {
  std::string name;
  nb::object packer, reducer, consumer;
  nb::object policy;
  nb::object options;  // packoracle.fuzz's keywords (kFuzzKeywords)
  bool microbatch_consumer = false;
};

nb::dict RunFuzz(const FuzzArgs& a) {
  auto state = std::make_shared<CallState>();
  Candidate candidate = CallableCandidate(a.name, a.packer, a.reducer, a.consumer, a.microbatch_consumer, state);
  jobs::FuzzOptions options = FuzzOptionsFromPython(a.options);
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
         nb::dict options, bool microbatch_consumer) {
        return RunFuzz({std::move(name), std::move(packer), std::move(reducer), std::move(consumer), std::move(policy),
                        std::move(options), microbatch_consumer});
      },
      nb::arg("name"), nb::arg("packer").none(), nb::arg("reducer").none(), nb::arg("consumer").none(), nb::arg("policy"),
      nb::arg("options"), nb::arg("microbatch_consumer") = false,
      "Runs the kit's generated cases against the drivers of packoracle.fuzz (use that function); `options`: its "
      "keywords (fuzz_keywords()).");
  m.def(
      "fuzz_keywords",
      [] {
        nb::list out;
        for (const auto& k : kFuzzKeywords) out.append(k.name);
        return out;
      },
      "The names fuzz's `options` dict takes: packoracle.fuzz's keywords that set the run's options.");
}

}  // namespace packoracle::python
