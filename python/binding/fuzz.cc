// packoracle._core.fuzz: jobs::RunFuzz, the run of `packoracle fuzz` (batches of cases with seeds derived from
// the run's, a profile per batch, the time budget, shrinking, the report, the regression file), against
// Python callables in-process instead of an exec candidate.
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

struct FuzzArgs {
  std::string name;
  nb::object packer, reducer, consumer;
  nb::object policy;
  std::optional<int> cases;     // none: kDefaultFuzzCases, or as many as `time` allows
  std::uint64_t seed = 0;
  double time = 0;              // seconds; 0: no budget
  std::optional<std::string> reproduce;
  std::int64_t max_row_length = jobs::kDefaultFuzzMaxRowLength;
  std::size_t max_documents = jobs::kDefaultFuzzMaxDocuments;
  bool decoder = true;
  std::optional<std::string> save_regressions;
  bool sft_masks = true;
  bool microbatch_consumer = false;
  bool stats = false;
  std::string headline;  // the user's call, which the failure's first line names
};

nb::dict RunFuzz(const FuzzArgs& a) {
  auto state = std::make_shared<CallState>();
  Candidate candidate = CallableCandidate(a.name, a.packer, a.reducer, a.consumer, a.microbatch_consumer, state);
  jobs::FuzzOptions options;
  options.policy = PolicyFromPython(a.policy, "policy");
  options.cases = a.cases.value_or(jobs::kDefaultFuzzCases);
  options.cases_given = a.cases.has_value();
  options.seed = a.seed;
  options.time = a.time;
  options.max_row_length = a.max_row_length;
  options.max_documents = a.max_documents;
  options.stats = a.stats;
  options.no_decoder = !a.decoder;
  options.sft_masks = a.sft_masks;
  options.headline = a.headline;
  options.regression_draft = false;  // a Python user replays the case; the C++ draft is for C++ users
  if (a.reproduce) options.reproduce = *a.reproduce;
  if (a.save_regressions) options.save_regressions = *a.save_regressions;
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
         std::optional<int> cases, std::uint64_t seed, double time, std::optional<std::string> reproduce,
         std::int64_t max_row_length, std::size_t max_documents, bool decoder,
         std::optional<std::string> save_regressions, bool sft_masks, bool microbatch_consumer, bool stats,
         std::string headline) {
        return RunFuzz({std::move(name), std::move(packer), std::move(reducer), std::move(consumer), std::move(policy),
                        cases, seed, time, std::move(reproduce), max_row_length, max_documents, decoder,
                        std::move(save_regressions), sft_masks, microbatch_consumer, stats, std::move(headline)});
      },
      nb::arg("name"), nb::arg("packer").none(), nb::arg("reducer").none(), nb::arg("consumer").none(), nb::arg("policy"),
      nb::arg("cases").none(), nb::arg("seed"), nb::arg("time"), nb::arg("reproduce").none(), nb::arg("max_row_length"),
      nb::arg("max_documents"), nb::arg("decoder"), nb::arg("save_regressions").none(), nb::arg("sft_masks") = true,
      nb::arg("microbatch_consumer") = false, nb::arg("stats") = false, nb::arg("headline") = "",
      "Runs the kit's generated cases against the drivers of packoracle.fuzz (use that function).");
}

}  // namespace packoracle::python
