// packoracle merge SUMMARY...: the global per-step denominator across the per-rank summaries that
// `packoracle verify --summary FILE` writes (see summary.h).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "command.h"

namespace packoracle::cli {

struct MergeOptions {
  std::vector<std::string> summaries;
  std::string format = "text";
};

// Checks, per step: every rank 0..dp_world_size-1 is present in some summary (a missing rank, or a rank
// missing a step the others have, is a violation: the step cannot be checked); every denominator of scope
// "global" equals the step's valid targets summed over all ranks.
// Exit codes like verify: 0 consistent, 1 violations, 2 unusable input (a file that is not a summary, the
// same step of a rank in two summaries, summaries of different runs).
int RunMerge(const MergeOptions& options, std::ostream& out, std::ostream& err);

Runner AddMergeCommand(CLI::App& app);

}  // namespace packoracle::cli
