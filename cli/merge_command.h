// packoracle merge SUMMARY...: the global per-step denominator across the per-rank summaries that
// `packoracle verify --summary FILE` writes; the merge itself is jobs::MergeSummaryFiles
// (packoracle/jobs/merge.h).
#pragma once

#include "command.h"

namespace packoracle::cli {

// Exit codes like verify: 0 consistent, 1 violations, 2 unusable input.
Runner AddMergeCommand(CLI::App& app);

}  // namespace packoracle::cli
