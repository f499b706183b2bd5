// The merge of per-rank summaries (merge.h): the summaries indexed by step and rank, then each step checked
// for missing ranks and for global denominators that are not the step's valid targets over all ranks.
#include "packoracle/jobs/merge.h"

#include <cmath>
#include <map>
#include <set>

#include "merge_format.h"
#include "packoracle/oracle/error.h"

namespace packoracle::jobs {
namespace {

using merge_format::Number;
using merge_format::RankList;

struct Located {
  const SummaryEntry* entry;
  const Summary* summary;
};

using StepIndex = std::map<std::int64_t, std::map<std::int64_t, Located>>;  // step → rank → entry

// Every entry by step and rank; InputError for summaries of different runs or a step of a rank given twice.
StepIndex Index(const std::vector<Summary>& summaries) {
  StepIndex steps;
  const Summary& first = summaries.front();
  for (const auto& s : summaries) {
    if (s.dp_world_size != first.dp_world_size || s.grad_accum_steps != first.grad_accum_steps ||
        s.policy != first.policy || s.denominator != first.denominator || s.count_basis != first.count_basis) {
      throw InputError(s.path + ": a different run than " + first.path + " (dp_world_size " +
                       std::to_string(s.dp_world_size) + " vs " + std::to_string(first.dp_world_size) +
                       ", grad_accum_steps " + std::to_string(s.grad_accum_steps) + " vs " +
                       std::to_string(first.grad_accum_steps) + ", policy '" + s.policy + "' vs '" + first.policy +
                       "', denominator " + s.denominator + " vs " + first.denominator + ")");
    }
    for (const auto& e : s.entries) {
      auto [it, fresh] = steps[e.step].emplace(e.rank, Located{&e, &s});
      if (!fresh) {
        throw InputError(s.path + ": step " + std::to_string(e.step) + " of rank " + std::to_string(e.rank) +
                         " is also in " + it->second.summary->path +
                         " (each rank's steps belong in one summary; was a file given twice?)");
      }
    }
  }
  return steps;
}

// What the run's summaries agree on, for checking each step.
struct Run {
  std::int64_t world = 1;
  bool checkable = true;  // under sequence_mean a denominator counts sequences, which verify does not compare
  std::string what;       // what the count counts, when not the valid targets
  std::set<std::int64_t> ranks_seen;
};

// One step: its ranks against the run's, and every global denominator against the step's count over them.
MergeStep CheckStep(std::int64_t step, const std::map<std::int64_t, Located>& ranks, const Run& run,
                    std::vector<MergeViolation>& violations) {
  MergeStep line;
  line.step = step;
  bool complete = true;
  double total = 0;
  for (const auto& [rank, located] : ranks) {
    line.ranks.push_back(rank);
    if (rank < 0 || rank >= run.world) {
      violations.push_back({step, rank, -1, located.summary->path, 0,
                            "step " + std::to_string(step) + " has rank " + std::to_string(rank) +
                                ", outside the run's dp_world_size " + std::to_string(run.world),
                            "rank in [0, " + std::to_string(run.world) + ")", std::to_string(rank)});
    }
    if (auto v = located.entry->counted()) {
      total += *v;
    } else {
      complete = false;
      violations.push_back({step, rank, -1, located.summary->path, 0,
                            "step " + std::to_string(step) + " rank " + std::to_string(rank) +
                                ": valid targets unknown (verify could not compute them for this rank's rows; see "
                                "its report): the global denominator of the step cannot be checked",
                            "", ""});
    }
  }
  for (std::int64_t r = 0; r < run.world; ++r) {
    if (ranks.count(r)) continue;
    complete = false;
    const bool rank_known = run.ranks_seen.count(r) > 0;
    violations.push_back({step, r, -1, "", 0,
                          rank_known ? "step " + std::to_string(step) + " is missing from rank " + std::to_string(r) +
                                           "'s summary (the other ranks have it): the step's global denominator cannot "
                                           "be checked"
                                     : "step " + std::to_string(step) + ": no summary holds rank " + std::to_string(r) +
                                           " (dp_world_size " + std::to_string(run.world) +
                                           "): the step's global denominator cannot be checked",
                          "ranks 0.." + std::to_string(run.world - 1), RankList(line.ranks)});
  }
  if (complete) line.valid_targets = total;
  for (const auto& [rank, located] : ranks) {
    for (const auto& m : located.entry->microbatches) {
      if (m.Scope() != DenominatorScope::kGlobal || !m.denominator) continue;
      line.global_denominators.push_back(*m.denominator);
      if (!complete || !run.checkable) continue;
      line.checked = true;
      const bool empty_ok = total == 0 && (*m.denominator == 0 || *m.denominator == 1);  // max(1, n) clamps
      if (!empty_ok && std::fabs(*m.denominator - total) > 1e-9 * std::max(1.0, total)) {
        violations.push_back({step, rank, m.micro_step, m.file, m.line,
                              "step " + std::to_string(step) + ", micro_step " + std::to_string(m.micro_step) +
                                  ", rank " + std::to_string(rank) + ": the global-scope denominator " +
                                  Number(*m.denominator) + " is not the step's valid targets over all " +
                                  std::to_string(run.world) + " rank(s), " + Number(total) + run.what,
                              Number(total), Number(*m.denominator)});
      }
    }
  }
  return line;
}

}  // namespace

MergeResult MergeSummaries(const std::vector<Summary>& summaries) {
  if (summaries.empty()) throw InputError("no summary to merge");
  const StepIndex steps = Index(summaries);
  MergeResult result;
  for (const auto& s : summaries) result.summaries.push_back(s.path);
  // What a global denominator must equal: the count verify compares (summary.h, `counted`).
  const std::string& basis = summaries.front().count_basis;
  Run run;
  run.world = summaries.front().dp_world_size;
  run.checkable = summaries.front().denominator != "sequence_mean";
  run.what = basis == "positions" ? " (positions: denominator all_positions)"
             : basis == "unshifted_labels" ? " (labels that are not ignore_index: count_basis unshifted_labels)"
                                           : "";
  for (const auto& [step, ranks] : steps)
    for (const auto& [rank, located] : ranks) run.ranks_seen.insert(rank);
  result.dp_world_size = run.world;
  for (const auto& [step, ranks] : steps) result.steps.push_back(CheckStep(step, ranks, run, result.violations));
  result.exit_code = result.violations.empty() ? 0 : 1;
  return result;
}

MergeResult MergeSummaryFiles(const std::vector<std::string>& paths) {
  if (paths.empty()) throw InputError("no summary to merge");
  std::vector<Summary> summaries;
  for (const auto& path : paths) summaries.push_back(ReadSummary(path));
  return MergeSummaries(summaries);
}

}  // namespace packoracle::jobs
