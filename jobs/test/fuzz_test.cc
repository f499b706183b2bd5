// jobs::RunFuzz drives an in-process candidate (as the Python binding's callables are) with the same batches,
// seeds, shrinking and report as the exec path, and shows the caller's replay line; the table of the run's
// options (fuzz_options.h) gives the replay line its flags.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

#include "packoracle/jobs/fuzz.h"
#include "packoracle/jobs/fuzz_exec.h"
#include "packoracle/jobs/fuzz_options.h"
#include "packoracle/oracle.h"
#include "packoracle/properties/invariants.h"
#include "test_candidates.h"

namespace packoracle::jobs {
namespace {

using testing::WeightsTheFirstSlot;

FuzzOptions Reference(int cases) {
  FuzzOptions options;
  options.preset = "reference";
  options.cases = cases;
  options.no_decoder = true;
  return options;
}

TEST(RunFuzz, PassesTheReferenceInBatchesOfTheRun) {
  const FuzzOptions options = Reference(70);
  const FuzzPolicies policies = ResolveFuzzPolicies(options);
  Candidate candidate = ReferenceCandidate();
  candidate.policies = policies.policies;
  std::vector<std::int64_t> batches;
  FuzzHooks hooks;
  hooks.batch = [&](std::int64_t before) { batches.push_back(before); };
  const FuzzOutcome outcome = RunFuzz(candidate, options, policies, hooks);
  EXPECT_EQ(outcome.exit_code, 0);
  EXPECT_FALSE(outcome.failure);
  EXPECT_EQ(outcome.cases_run, 70);
  EXPECT_EQ(outcome.policy_label, "preset reference");
  ASSERT_EQ(outcome.batches.size(), 3u);
  EXPECT_EQ(outcome.batches[0].seed, options.seed);
  EXPECT_EQ(outcome.batches[2].cases, 70 - 2 * kFuzzBatch);
  EXPECT_EQ(batches, (std::vector<std::int64_t>{0, kFuzzBatch, 2 * kFuzzBatch}));
}

TEST(RunFuzz, ReportsAFailureWithTheCallersReplayLine) {
  FuzzOptions options = Reference(200);
  options.replay_command = [](const std::string& r) { return "packoracle.fuzz(packer, reproduce=\"" + r + "\")"; };
  const FuzzPolicies policies = ResolveFuzzPolicies(options);
  Candidate candidate = MakeCandidate("in-process", WeightsTheFirstSlot{}, policies.policies);
  const FuzzOutcome outcome = RunFuzz(candidate, options, policies);
  ASSERT_TRUE(outcome.failure);
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_EQ(outcome.stopped_by, "failure");
  EXPECT_EQ(outcome.candidate, "in-process");
  const std::string replay = "packoracle.fuzz(packer, reproduce=\"" + outcome.failure->reproduce + "\")";
  EXPECT_NE(outcome.failure_text.find(replay), std::string::npos) << outcome.failure_text;
  // What the command line and the binding print is the rendering of the sections they hand on as data.
  ASSERT_TRUE(outcome.failure->sections);
  EXPECT_EQ(RenderReport(*outcome.failure->sections), outcome.failure_text);
  EXPECT_EQ(outcome.failure->sections->reproduce_command, replay);
  EXPECT_EQ(outcome.failure->sections->reproduce, outcome.failure->reproduce);
  EXPECT_EQ(outcome.failure->sections->violations.front().invariant, outcome.failure->broken());

  FuzzOptions again = options;  // the reproduce string replays the shrunk case alone
  again.reproduce = outcome.failure->reproduce;
  const FuzzOutcome replayed = RunFuzz(candidate, again, policies);
  EXPECT_TRUE(replayed.replayed);
  ASSERT_TRUE(replayed.failure);
  EXPECT_EQ(replayed.failure->broken(), outcome.failure->broken());
}

TEST(CheckFuzzOptions, RefusesWhatNoRunCanUse) {
  FuzzOptions options = Reference(1);
  options.shard = "3/3";
  EXPECT_THROW(CheckFuzzOptions(options), InputError);
  options.shard.clear();
  options.profile = "nope";
  EXPECT_THROW(CheckFuzzOptions(options), InputError);
  options.profile.clear();
  options.policy = FindPreset("reference").policy;
  EXPECT_THROW(CheckFuzzOptions(options), InputError);  // a preset and a policy object
  options.policy.reset();
  for (double q : {0.0, -0.5, 1.5}) {
    options.select_top_fraction = q;
    EXPECT_THROW(CheckFuzzOptions(options), InputError) << q;
  }
  options.select_top_fraction = 0.2;
  EXPECT_NO_THROW(CheckFuzzOptions(options));
  ExecFuzzOptions exec;
  exec.fuzz = options;
  exec.exec = "true";
  EXPECT_THROW(CheckExecFuzzOptions(exec), InputError) << "a selection without --exec-reducer states nothing";
  exec.fuzz.exec_reducer = "true";
  EXPECT_NO_THROW(CheckExecFuzzOptions(exec));
  exec.fuzz.select_top_fraction = 1;
  exec.fuzz.optimizer_steps = 2;
  exec.fuzz.exec_reducer.clear();
  try {
    CheckExecFuzzOptions(exec);
    ADD_FAILURE() << "a schedule without --exec-reducer states nothing: the packer is never told of it";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--optimizer-steps 2"), std::string::npos) << e.what();
  }
  exec.fuzz.exec_reducer = "true";
  EXPECT_NO_THROW(CheckExecFuzzOptions(exec));
}


// The replay line repeats, from the table of the run's options (fuzz_options.h), each option marked replayed
// that the command line has a flag for, once set away from its default, and nothing at its default.
TEST(FuzzOptionsTable, TheReplayLineRepeatsEveryReplayedFlagAwayFromItsDefault) {
  EXPECT_EQ(ReplayedFlags(FuzzOptions{}), "");
  FuzzOptions changed;
  changed.cases = 7;  // not replayed: the reproduce string is the case
  changed.profile = "short";
  for (const auto& entry : kFuzzOptions) {
    if (!entry.replayed || entry.flag.empty()) continue;
    std::visit(
        [&](auto member) {
          using T = std::remove_reference_t<decltype(changed.*member)>;
          if constexpr (std::is_same_v<T, bool>) changed.*member = !(FuzzOptions{}.*member);
          else if constexpr (std::is_same_v<T, std::string>) changed.*member = "x y";  // quoted for the shell
          else changed.*member = 3;
        },
        entry.member);
  }
  changed.policy_file.clear();  // a preset or a policy file: one of them
  EXPECT_EQ(ReplayedFlags(changed), " --preset 'x y' --max-row-length 3 --max-documents 3 --no-decoder --exec-reducer 'x y' "
                                    "--exec-consumer 'x y' --exec-value-consumer 'x y' --exec-value-gradients "
                                    "--optimizer-steps 3 --select-top-fraction 3");
  FuzzOptions fraction;
  fraction.select_top_fraction = 0.123456789;  // replayed exactly, not as std::to_string's 0.123457
  EXPECT_EQ(ReplayedFlags(fraction), " --select-top-fraction 0.123456789");
}

// Every keyword and every flag names one entry (a front end reads an option by either).
TEST(FuzzOptionsTable, NamesEachOptionOnce) {
  std::set<std::string_view> keywords, flags;
  for (const auto& entry : kFuzzOptions) {
    EXPECT_FALSE(entry.keyword.empty() && entry.flag.empty());
    if (!entry.keyword.empty()) {
      EXPECT_TRUE(keywords.insert(entry.keyword).second) << entry.keyword;
      EXPECT_EQ(FuzzOptionOfKeyword(entry.keyword), &entry);
    }
    if (!entry.flag.empty()) {
      EXPECT_TRUE(flags.insert(entry.flag).second) << entry.flag;
    }
  }
  EXPECT_EQ(FuzzOptionOfKeyword("max_rows"), nullptr);
}

}  // namespace
}  // namespace packoracle::jobs
