// `packoracle merge SUMMARY...` as a library call: the global per-step denominator across the per-rank
// summaries that verify writes (VerifyOptions::summary, summary.h).
//
// Checks, per step: every rank 0..dp_world_size-1 is present in some summary (a missing rank, or a rank
// missing a step the others have, is a violation: the step cannot be checked); every denominator of scope
// "global" equals the step's valid targets summed over all ranks. Unusable input (a file that is not a
// summary, the same step of a rank in two summaries, summaries of different runs) throws InputError.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "packoracle/jobs/summary.h"

namespace packoracle::jobs {

struct MergeViolation {  // always under the invariant `denominator`
  std::int64_t step = -1, rank = -1, micro_step = -1;
  std::string file;  // the dump (or summary) it points at; "" when none holds it
  std::int64_t line = 0;
  std::string message;
  std::string expected, actual;
};

struct MergeStep {
  std::int64_t step = 0;
  std::vector<std::int64_t> ranks;
  std::optional<double> valid_targets;  // over all ranks; nullopt when a rank is missing or unknown
  std::vector<double> global_denominators;
  bool checked = false;
};

struct MergeResult {
  int exit_code = 0;                   // 0 consistent, 1 violations
  std::vector<std::string> summaries;  // the summaries' paths, in the order given
  std::int64_t dp_world_size = 1;
  std::vector<MergeViolation> violations;
  std::vector<MergeStep> steps;
};

// Reads the summary files and merges them.
MergeResult MergeSummaryFiles(const std::vector<std::string>& paths);
// Merges summaries held in memory (SummaryCollector::summary(), ReadSummary); Summary::path names each.
MergeResult MergeSummaries(const std::vector<Summary>& summaries);

// What `packoracle merge` prints, byte for byte: text for people, or --format json. Both end with a newline.
std::string RenderMergeText(const MergeResult& result);
std::string RenderMergeJson(const MergeResult& result);

}  // namespace packoracle::jobs
