#include "merge_command.h"

#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "packoracle/oracle/error.h"
#include "packoracle/jobs/summary.h"

namespace packoracle::cli {

using jobs::ReadSummary;
using jobs::Summary;
using jobs::SummaryEntry;
namespace {

using Json = nlohmann::ordered_json;

struct Located {
  const SummaryEntry* entry;
  const Summary* summary;
};

struct MergeViolation {
  std::int64_t step = -1, rank = -1, micro_step = -1;
  std::string file;  // the dump (or summary) it points at
  std::int64_t line = 0;
  std::string message;
  std::string expected, actual;
};

struct StepLine {
  std::int64_t step = 0;
  std::vector<std::int64_t> ranks;
  std::optional<double> valid_targets;  // over all ranks; nullopt when a rank is missing or unknown
  std::vector<double> global_denominators;
  bool checked = false;
};

std::string Number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

std::string RankList(const std::vector<std::int64_t>& ranks) {
  std::string out;
  for (auto r : ranks) out += (out.empty() ? "" : " ") + std::to_string(r);
  return out.empty() ? "none" : out;
}

}  // namespace

int RunMerge(const MergeOptions& options, std::ostream& out, std::ostream& err) {
  std::vector<std::unique_ptr<Summary>> summaries;
  std::map<std::int64_t, std::map<std::int64_t, Located>> steps;  // step → rank → entry
  try {
    if (options.summaries.empty()) throw InputError("no summary to merge");
    for (const auto& path : options.summaries) summaries.push_back(std::make_unique<Summary>(ReadSummary(path)));
    const Summary& first = *summaries.front();
    for (const auto& s : summaries) {
      if (s->dp_world_size != first.dp_world_size || s->grad_accum_steps != first.grad_accum_steps ||
          s->policy != first.policy || s->denominator != first.denominator || s->count_basis != first.count_basis) {
        throw InputError(s->path + ": a different run than " + first.path + " (dp_world_size " +
                         std::to_string(s->dp_world_size) + " vs " + std::to_string(first.dp_world_size) +
                         ", grad_accum_steps " + std::to_string(s->grad_accum_steps) + " vs " +
                         std::to_string(first.grad_accum_steps) + ", policy '" + s->policy + "' vs '" + first.policy +
                         "', denominator " + s->denominator + " vs " + first.denominator + ")");
      }
      for (const auto& e : s->entries) {
        auto [it, fresh] = steps[e.step].emplace(e.rank, Located{&e, s.get()});
        if (!fresh) {
          throw InputError(s->path + ": step " + std::to_string(e.step) + " of rank " + std::to_string(e.rank) +
                           " is also in " + it->second.summary->path +
                           " (each rank's steps belong in one summary; was a file given twice?)");
        }
      }
    }
  } catch (const InputError& e) {
    err << "packoracle merge: " << e.what() << "\n";
    return 2;
  }

  const std::int64_t world = summaries.front()->dp_world_size;
  // What a global denominator must equal: the count verify compares (summary.h, `counted`). Under
  // sequence_mean a denominator counts sequences, which verify does not compare either.
  const std::string& basis = summaries.front()->count_basis;
  const bool checkable = summaries.front()->denominator != "sequence_mean";
  const std::string what = basis == "positions" ? " (positions: denominator all_positions)"
                           : basis == "unshifted_labels" ? " (labels that are not ignore_index: count_basis unshifted_labels)"
                                                         : "";
  std::vector<MergeViolation> violations;
  std::vector<StepLine> lines;
  std::set<std::int64_t> ranks_seen;
  for (const auto& [step, ranks] : steps)
    for (const auto& [rank, located] : ranks) ranks_seen.insert(rank);

  for (const auto& [step, ranks] : steps) {
    StepLine line;
    line.step = step;
    bool complete = true;
    double total = 0;
    for (const auto& [rank, located] : ranks) {
      line.ranks.push_back(rank);
      if (rank < 0 || rank >= world) {
        violations.push_back({step, rank, -1, located.summary->path, 0,
                              "step " + std::to_string(step) + " has rank " + std::to_string(rank) +
                                  ", outside the run's dp_world_size " + std::to_string(world),
                              "rank in [0, " + std::to_string(world) + ")", std::to_string(rank)});
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
    for (std::int64_t r = 0; r < world; ++r) {
      if (ranks.count(r)) continue;
      complete = false;
      const bool rank_known = ranks_seen.count(r) > 0;
      violations.push_back({step, r, -1, "", 0,
                            rank_known ? "step " + std::to_string(step) + " is missing from rank " + std::to_string(r) +
                                             "'s summary (the other ranks have it): the step's global denominator cannot "
                                             "be checked"
                                       : "step " + std::to_string(step) + ": no summary holds rank " + std::to_string(r) +
                                             " (dp_world_size " + std::to_string(world) +
                                             "): the step's global denominator cannot be checked",
                            "ranks 0.." + std::to_string(world - 1), RankList(line.ranks)});
    }
    if (complete) line.valid_targets = total;
    for (const auto& [rank, located] : ranks) {
      for (const auto& m : located.entry->microbatches) {
        if (!m.denominator_scope || *m.denominator_scope != "global" || !m.denominator) continue;
        line.global_denominators.push_back(*m.denominator);
        if (!complete || !checkable) continue;
        line.checked = true;
        const bool empty_ok = total == 0 && (*m.denominator == 0 || *m.denominator == 1);  // max(1, n) clamps
        if (!empty_ok && std::fabs(*m.denominator - total) > 1e-9 * std::max(1.0, total)) {
          violations.push_back({step, rank, m.micro_step, m.file, m.line,
                                "step " + std::to_string(step) + ", micro_step " + std::to_string(m.micro_step) +
                                    ", rank " + std::to_string(rank) + ": the global-scope denominator " +
                                    Number(*m.denominator) + " is not the step's valid targets over all " +
                                    std::to_string(world) + " rank(s), " + Number(total) + what,
                                Number(total), Number(*m.denominator)});
        }
      }
    }
    lines.push_back(line);
  }

  if (options.format == "json") {
    Json j;
    j["verdict"] = violations.empty() ? "consistent" : "violations";
    j["summaries"] = options.summaries;
    j["dp_world_size"] = world;
    j["violations"] = Json::array();
    for (const auto& v : violations) {
      j["violations"].push_back({{"step", v.step}, {"rank", v.rank}, {"micro_step", v.micro_step},
                                 {"file", v.file}, {"line", v.line}, {"invariant", "denominator"},
                                 {"message", v.message}, {"expected", v.expected}, {"actual", v.actual}});
    }
    j["steps"] = Json::array();
    for (const auto& l : lines) {
      j["steps"].push_back({{"step", l.step}, {"ranks", l.ranks},
                            {"valid_targets", l.valid_targets ? Json(*l.valid_targets) : Json(nullptr)},
                            {"global_denominators", l.global_denominators}, {"checked", l.checked}});
    }
    out << j.dump(2) << "\n";
  } else {
    out << "packoracle merge: " << summaries.size() << " summar" << (summaries.size() == 1 ? "y" : "ies") << ", "
        << lines.size() << " step(s), dp_world_size " << world << "\n\n";
    for (const auto& v : violations) {
      out << "  denominator  ";
      if (!v.file.empty()) out << v.file << (v.line > 0 ? ":" + std::to_string(v.line) : "") << "  ";
      out << "step " << v.step << "\n    " << v.message << "\n";
      if (!v.expected.empty() || !v.actual.empty()) out << "    expected " << v.expected << ", actual " << v.actual << "\n";
    }
    if (!violations.empty()) out << "\n";
    out << "  step  ranks           valid targets (all ranks)  global denominators\n";
    for (const auto& l : lines) {
      std::string dens;
      std::set<double> distinct(l.global_denominators.begin(), l.global_denominators.end());
      for (double d : distinct) dens += (dens.empty() ? "" : " ") + Number(d);
      char text[256];
      std::snprintf(text, sizeof(text), "  %4lld  %-14.14s  %25s  %s\n", static_cast<long long>(l.step),
                    RankList(l.ranks).c_str(), l.valid_targets ? Number(*l.valid_targets).c_str() : "-",
                    dens.empty() ? "(none reported)" : dens.c_str());
      out << text;
    }
    out << "\n  verdict: " << (violations.empty() ? "consistent" : std::to_string(violations.size()) + " violation(s)")
        << "\n";
  }
  return violations.empty() ? 0 : 1;
}

Runner AddMergeCommand(CLI::App& app) {
  auto options = std::make_shared<MergeOptions>();
  auto* cmd = app.add_subcommand(
      "merge",
      "Check the global per-step denominator across per-rank summaries (written by `packoracle verify --summary "
      "FILE`, one per rank): every global-scope denominator of a step must equal the step's valid targets summed "
      "over all ranks; missing ranks and steps are reported. Exit 0 consistent, 1 violations, 2 unusable input.");
  cmd->add_option("summaries", options->summaries, "summary files (JSON), one per rank or group of ranks")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--format", options->format, "text (for people) or json (for machines)")
      ->check(CLI::IsMember({"text", "json"}));
  return [cmd, options] {
    if (!*cmd) return -1;
    return RunMerge(*options, std::cout, std::cerr);
  };
}

}  // namespace packoracle::cli
