// packoracle._core.fuzz: the kit's generation, checks and shrinking run against Python callables in-process.
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "callables.h"
#include "convert.h"
#include "packoracle/fastcheck/case_check.h"
#include "packoracle/interchange/regression.h"
#include "packoracle/properties/verify.h"

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
  int cases = 400;
  std::uint64_t seed = VerifyOptions{}.seed;
  std::optional<std::string> reproduce;
  std::int64_t max_row_length = 16;
  std::optional<std::string> profile;
  bool decoder = true;
  std::string replay_hint;  // what a person types to replay; "{}" stands for the reproduce string
  std::optional<std::string> save_regressions;
};

std::string Replay(const std::string& hint, const std::string& reproduce) {
  std::string out = hint;
  if (auto at = out.find("{}"); at != std::string::npos) out.replace(at, 2, reproduce);
  return out;
}

nb::dict RunFuzz(const FuzzArgs& a) {
  auto state = std::make_shared<CallState>();
  Candidate candidate = CallableCandidate(a.name, a.packer, a.reducer, a.consumer, state);
  candidate.policies = {PolicyFromPython(a.policy, "policy")};
  VerifyOptions options;
  options.cases = a.cases;
  options.seed = a.seed;
  options.max_row_length = a.max_row_length;
  options.profile = a.profile;
  options.reproduce = a.reproduce;
  options.check.packing_invariance = a.decoder;
  // Only a packer goes through the fast verifier first (case_check.h); the other roles go to CheckCase.
  options.check_case = [](Candidate& c, const PackRequest& r, const CheckOptions& o) { return fastcheck::CheckCaseFast(c, r, o); };
  const auto start = std::chrono::steady_clock::now();
  VerifyReport report = Verify(candidate, options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (state->interrupt) {
    state->interrupt->restore();
    throw nb::python_error();
  }
  nb::dict out;
  out["passed"] = report.passed;
  out["cases"] = report.cases_run;
  out["seconds"] = seconds;
  out["profile"] = report.profile;
  out["checked"] = Names(report.checked);
  out["not_applicable"] = Names(report.not_applicable);
  out["gap"] = DescribeGap(report);
  if (!report.passed && report.counterexample && report.failure) {
    // The replay line ends the Counterexample's message (packoracle/_fuzz.py), not the kit's report.
    std::string text = RenderFailure(candidate.name, *report.counterexample, *report.failure, report, VerifyOptions{});
    // The report ends with a C++ regression test draft, for C++ users; a Python user replays the case instead.
    if (auto draft = text.find("=== Regression test draft"); draft != std::string::npos) text.resize(draft);
    out["text"] = text;
    out["reproduce"] = report.reproduce;
    out["replay"] = Replay(a.replay_hint, report.reproduce);
    out["invariant"] = report.broken() ? nb::object(nb::str(Name(*report.broken()))) : nb::none();
    out["cases_to_failure"] = report.cases_to_failure;
    out["shrinks"] = report.shrinks;
    out["counterexample"] = RequestToPython(*report.counterexample);
    out["regression"] = a.save_regressions ? nb::object(nb::str(SaveRegression(*a.save_regressions, candidate.name, report).c_str()))
                                           : nb::none();
  }
  return out;
}

}  // namespace

void BindFuzz(nb::module_& m) {
  m.def(
      "fuzz",
      [](std::string name, nb::object packer, nb::object reducer, nb::object consumer, nb::object policy, int cases,
         std::uint64_t seed, std::optional<std::string> reproduce, std::int64_t max_row_length,
         std::optional<std::string> profile, bool decoder, std::string replay_hint,
         std::optional<std::string> save_regressions) {
        return RunFuzz({std::move(name), std::move(packer), std::move(reducer), std::move(consumer), std::move(policy),
                        cases, seed, std::move(reproduce), max_row_length, std::move(profile), decoder,
                        std::move(replay_hint), std::move(save_regressions)});
      },
      nb::arg("name"), nb::arg("packer").none(), nb::arg("reducer").none(), nb::arg("consumer").none(), nb::arg("policy"),
      nb::arg("cases"), nb::arg("seed"), nb::arg("reproduce").none(), nb::arg("max_row_length"), nb::arg("profile").none(),
      nb::arg("decoder"), nb::arg("replay_hint"), nb::arg("save_regressions").none(),
      "Runs the kit's generated cases against the drivers of packoracle.fuzz (use that function).");
}

}  // namespace packoracle::python
