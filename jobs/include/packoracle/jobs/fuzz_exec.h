// `packoracle fuzz --exec CMD`: the property-based run (fuzz.h) against an external candidate process over
// the exec protocol (packoracle/exec/exec_candidate.h), and the report the command line prints.
//
//   packoracle fuzz --exec 'python3 my_packer.py' --preset reference --time 60
//
// A failure's report carries the command line that replays it (ExecReplayCommand). Unusable input (bad
// options, an unreadable policy file, a command that cannot start) throws InputError.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "packoracle/exec/exec_candidate.h"
#include "packoracle/jobs/fuzz.h"

namespace packoracle::jobs {

inline constexpr double kDefaultExecTimeout = 10.0;  // seconds per case

struct ExecFuzzOptions {
  std::string exec;  // the command, run with /bin/sh -c
  double timeout = kDefaultExecTimeout;  // seconds the candidate has for one answer
  std::string name;  // the candidate's name in reports; empty: from the command (NameFromCommand)
  FuzzOptions fuzz;  // replay_command: ExecReplayCommand when empty
};

// InputError for options no exec run can use: no command, CheckFuzzOptions, a timeout outside (0, 86400]
// seconds; `more_checks` as in CheckFuzzOptions, after the timeout's.
void CheckExecFuzzOptions(const ExecFuzzOptions& options, const std::function<void()>& more_checks = {});

// A short candidate name from the command: the script it runs ("python3 tools/my_packer.py -v" →
// "exec:my_packer").
std::string NameFromCommand(const std::string& command);

// `packoracle fuzz --exec 'CMD' --reproduce 'v1:...' [the same --preset/--policy/--timeout/--name]`.
std::string ExecReplayCommand(const ExecFuzzOptions& options, const std::string& reproduce);

struct ExecFuzzHooks {
  FuzzHooks run;
  std::function<void()> started;  // the candidate has started: the run begins
  std::function<void(std::int64_t case_id)> request;      // a request goes to the candidate
  std::function<void(std::int64_t restarts)> answered;    // its answer came back
};

struct ExecFuzzResult {
  FuzzOutcome outcome;
  ExecPacker::Stats stats;  // the candidate's starts, faults and refusals
};

// Starts the candidate (InputError when it cannot start), runs, stops it.
ExecFuzzResult RunExecFuzz(const ExecFuzzOptions& options, const ExecFuzzHooks& hooks = {});

// What `packoracle fuzz` prints on stdout: text for people, or --format json. A regression that could not be
// saved is in outcome.regression_error (the text leaves it to the caller's stderr; the JSON holds it).
std::string RenderExecFuzzText(const ExecFuzzOptions& options, const ExecFuzzResult& result);
std::string RenderExecFuzzJson(const ExecFuzzOptions& options, const ExecFuzzResult& result);

}  // namespace packoracle::jobs
