// What `packoracle fuzz --exec` prints (fuzz_exec.h). Tests and the README read this text: change it only on
// purpose.
#include <cstdio>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "packoracle/interchange/request_json.h"
#include "packoracle/jobs/fuzz_exec.h"
#include "packoracle/jobs/generation_json.h"
#include "packoracle/jobs/report_json.h"

namespace packoracle::jobs {
namespace {

using Json = nlohmann::ordered_json;

std::string Fixed(double v, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", digits, v);
  return buffer;
}

std::vector<std::string> Names(const std::set<Invariant>& invariants) {
  std::vector<std::string> out;
  for (auto inv : invariants) out.push_back(Name(inv));
  return out;
}

std::string Join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : ", ") + w;
  return out;
}

std::string Plural(std::int64_t n, const std::string& word, const std::string& plural) {
  return std::to_string(n) + " " + (n == 1 ? word : plural);
}

std::string CandidateStats(const ExecPacker::Stats& stats) {
  return Plural(stats.starts, "start", "starts") + ", " + Plural(stats.faults, "fault", "faults") + ", " +
         Plural(stats.refusals, "refusal", "refusals");
}

void RenderFailureText(const FuzzOutcome& r, const ExecPacker::Stats& stats, std::ostream& out) {
  out << r.failure_text;  // its Reproduce section holds the reproduce string and the replay command
  if (!r.regression_path.empty()) out << "=== Saved as a regression\n  " << r.regression_path << "\n";
  out << "\npackoracle fuzz: FAIL (" << Name(*r.failure->broken()) << ") " << r.candidate << ": case "
      << r.failure->cases_to_failure << " failed, shrunk in " << r.failure->shrinks << " step"
      << (r.failure->shrinks == 1 ? "" : "s") << "; " << r.cases_run << " case" << (r.cases_run == 1 ? "" : "s")
      << " run in " << Fixed(r.seconds, 1) << " s; candidate: " << CandidateStats(stats) << "\n";
}

void RenderPassText(const ExecFuzzOptions& o, const FuzzOutcome& r, const ExecPacker::Stats& stats, std::ostream& out) {
  const bool interrupted = r.stopped_by == "interrupt";
  out << "packoracle fuzz: " << (interrupted ? "INTERRUPTED " : "PASS ") << r.candidate << ": " << r.cases_run << " case"
      << (r.cases_run == 1 ? "" : "s") << " passed in " << Fixed(r.seconds, 1) << " s ("
      << Fixed(r.cases_per_second(), 0) << " cases/s)";
  if (r.stopped_by == "time") out << ", stopped by the time budget of " << Fixed(o.fuzz.time, 1) << " s";
  if (interrupted) out << ", interrupted";
  out << "\n  policies  " << r.policy_label << "\n  seed      " << o.fuzz.seed;
  if (r.shard_count > 1) {
    out << ", shard " << r.shard_index << "/" << r.shard_count << " (" << r.batches.size() << " batch"
        << (r.batches.size() == 1 ? "" : "es") << " of the run's, from batch " << r.shard_index << " every "
        << r.shard_count << ")";
  }
  out << " (profiles " << Join(std::vector<std::string>(r.profiles.begin(), r.profiles.end())) << ")\n  checked   "
      << Join(Names(r.checked)) << "\n  candidate " << CandidateStats(stats) << "\n";
  if (r.gaps.largest_gap) out << "  objective " << DescribeGap(r.gaps) << "\n";
  if (r.contamination) {
    out << "  decoder   losses against each document alone over " << r.contamination->targets
        << " targets: max relative change " << r.contamination->max_relative << ", mean "
        << r.contamination->mean_relative << "\n";
  }
}

Json FailureJson(const ExecFuzzOptions& o, const FuzzOutcome& r) {
  Json f;
  f["invariant"] = Name(*r.failure->broken());
  f["sentence"] = r.failure->failure->violations.front().sentence;
  f["cases_to_failure"] = r.failure->cases_to_failure;
  f["shrinks"] = r.failure->shrinks;
  f["reproduce"] = r.failure->reproduce;
  f["replay"] = ExecReplayCommand(o, r.failure->reproduce);
  f["regression"] = r.regression_path.empty() ? Json(nullptr) : Json(r.regression_path);
  if (!r.regression_error.empty()) f["regression_error"] = r.regression_error;
  f["request"] = RequestToJson(*r.failure->counterexample);
  f["report"] = r.failure_text;
  if (r.failure->sections) f["sections"] = ReportSectionsJson(*r.failure->sections);  // the report as data
  return f;
}

}  // namespace

std::string RenderExecFuzzText(const ExecFuzzOptions& o, const ExecFuzzResult& result) {
  const FuzzOutcome& r = result.outcome;
  std::ostringstream out;
  if (r.failure) {
    RenderFailureText(r, result.stats, out);
  } else if (r.replayed) {
    out << "packoracle fuzz: PASS " << r.candidate << ": the case " << o.fuzz.reproduce << " passes (" << r.policy_label
        << ")\n";
  } else {
    RenderPassText(o, r, result.stats, out);
  }
  if (r.generated) out << "\n" << RenderGenerationStats(*r.generated);
  return out.str();
}

std::string RenderExecFuzzJson(const ExecFuzzOptions& o, const ExecFuzzResult& result) {
  const FuzzOutcome& r = result.outcome;
  Json out;
  out["command"] = "fuzz";
  out["exec"] = o.exec;
  out["candidate"] = r.candidate;
  out["verdict"] = r.failure ? "fail" : (r.stopped_by == "interrupt" ? "interrupted" : "pass");
  out["cases"] = r.cases_run;
  out["stopped_by"] = r.stopped_by;
  out["seconds"] = r.seconds;
  out["cases_per_second"] = r.cases_per_second();
  out["seed"] = o.fuzz.seed;
  out["shard"] = {{"index", r.shard_index}, {"count", r.shard_count}};
  out["batches"] = Json::array();
  for (const auto& b : r.batches) out["batches"].push_back({{"batch", b.index}, {"seed", b.seed}, {"cases", b.cases}});
  out["policies"] = r.policy_label;
  out["profiles"] = std::vector<std::string>(r.profiles.begin(), r.profiles.end());
  out["checked"] = Names(r.checked);
  out["candidate_starts"] = result.stats.starts;
  out["candidate_faults"] = result.stats.faults;
  out["refusals"] = result.stats.refusals;
  if (!r.failure && r.gaps.largest_gap) out["objective_gap"] = DescribeGap(r.gaps);
  if (r.contamination) {
    out["packing_invariance"] = {{"targets", r.contamination->targets},
                                 {"max_relative_change", r.contamination->max_relative},
                                 {"mean_relative_change", r.contamination->mean_relative}};
  }
  if (r.generated) out["generated"] = GenerationStatsJson(*r.generated);
  if (r.failure) out["failure"] = FailureJson(o, r);
  return out.dump(2) + "\n";
}

}  // namespace packoracle::jobs
