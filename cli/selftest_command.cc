// packoracle selftest: the command line of jobs::RunSelftest over the bugzoo (fixtures/bugs).
#include "selftest_command.h"

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "packoracle/bugzoo.h"
#include "packoracle/jobs/selftest.h"

namespace packoracle::cli {
namespace {

struct SelftestCommandOptions {
  jobs::SelftestOptions job;
  std::string format = "text";
};

std::vector<jobs::SelftestCandidate> Bugzoo() {
  std::vector<jobs::SelftestCandidate> out;
  for (const auto& b : BundledCandidates()) out.push_back({b.id, b.name, b.source, b.expected, b.make});
  return out;
}

int RunSelftest(const SelftestCommandOptions& o) {
  const jobs::SelftestResult result = jobs::RunSelftest(Bugzoo(), o.job);
  std::cout << (o.format == "json" ? jobs::RenderSelftestJson(result) : jobs::RenderSelftestText(result));
  return result.exit_code;
}

}  // namespace

Runner AddSelftestCommand(CLI::App& app) {
  auto o = std::make_shared<SelftestCommandOptions>();
  auto* selftest = app.add_subcommand(
      "selftest", "Run the kit against its bundled candidates: every correct packer must pass, every buggy one "
                  "must be caught by the invariant its bugzoo entry names (exit 0 when all do)");
  selftest->add_option("--cases", o->job.cases, "generated cases per candidate")->check(CLI::Range(1, 1000000));
  selftest->add_option("--seed", o->job.seed, "the run's seed");
  selftest->add_option("--only", o->job.only, "run only candidates whose id or name contains this");
  selftest->add_option("--show", o->job.show, "print the full report of this candidate (id or name; default TG-02)");
  selftest->add_option("--save-regressions", o->job.save_regressions,
                       "write every counterexample found into this directory");
  selftest->add_flag("--stats", o->job.stats,
                     "say what was generated (all candidates' cases together; with --format json, per candidate)");
  selftest->add_option("--format", o->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  return [selftest, o] { return *selftest ? RunSelftest(*o) : -1; };
}

}  // namespace packoracle::cli
