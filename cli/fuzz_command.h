// `packoracle fuzz --exec CMD`: the property-based run against an external candidate process (DESIGN §6–§7).
//
//   packoracle fuzz --exec 'python3 my_packer.py' --preset reference --time 60
//
// Generates cases, sends each to the candidate over the exec protocol (packoracle/exec/exec_candidate.h),
// checks every answer against the oracle, shrinks the first failure to a minimal counterexample and prints it
// with its reproduce string and a command line that replays it (the run: jobs::RunExecFuzz,
// packoracle/jobs/fuzz_exec.h). Exit 0: every case passed; 1: a failure was found; 2: unusable input (bad
// arguments, an unreadable policy file, a command that cannot start).
#pragma once

#include "command.h"

namespace packoracle::cli {

// Adds the `fuzz` subcommand to `app`; the returned function, called once the command line is parsed, runs it
// and returns the exit code, or -1 when `fuzz` was not the subcommand given (command.h).
Runner AddFuzzCommand(CLI::App& app);

}  // namespace packoracle::cli
