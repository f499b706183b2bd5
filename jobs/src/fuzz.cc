// The property-based run (fuzz.h): batches of cases from one seed, sharded or bounded by time, the first
// failure shrunk and reported.
#include "packoracle/jobs/fuzz.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <memory>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "packoracle/exec/exec_candidate.h"
#include "packoracle/exec/exec_roles.h"
#include "packoracle/fastcheck/case_check.h"
#include "packoracle/jobs/fuzz_exec.h"
#include "packoracle/jobs/fuzz_options.h"
#include "packoracle/interchange/policy_json.h"
#include "packoracle/oracle.h"
#include "packoracle/properties/generators.h"
#include "packoracle/properties/regression.h"

namespace packoracle::jobs {
namespace {

using Clock = std::chrono::steady_clock;

std::uint64_t SplitMix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

std::uint64_t BatchSeed(std::uint64_t seed, int batch) {
  return batch == 0 ? seed : SplitMix64(seed + static_cast<std::uint64_t>(batch));
}

std::string Join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : ", ") + w;
  return out;
}

// "i/n" with 0 <= i < n: the shard to run; InputError for anything else.
std::pair<int, int> ParseShard(const std::string& text) {
  const auto slash = text.find('/');
  auto number = [](const std::string& digits, int& value) {
    if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos) return false;
    value = std::stoi(digits);
    return true;
  };
  int index = 0, count = 0;
  if (slash == std::string::npos || !number(text.substr(0, slash), index) || !number(text.substr(slash + 1), count) ||
      count < 1 || index >= count) {
    throw InputError("--shard must be i/n with 0 <= i < n (shard i of n, counted from 0), got '" + text + "'");
  }
  return {index, count};
}

std::string ReplayLine(const FuzzOptions& o, const std::string& reproduce) {
  return o.replay_command ? o.replay_command(reproduce) : std::string();
}

// A report's profiles ("packed,short,...") into the run's set.
void InsertProfiles(std::set<std::string>& into, const std::string& names) {
  std::size_t from = 0;
  while (from <= names.size()) {
    const auto comma = names.find(',', from);
    const std::string name = names.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    if (!name.empty()) into.insert(name);
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
}

// What every batch's Verify call shares.
packoracle::VerifyOptions BaseOptions(const FuzzOptions& o) {
  packoracle::VerifyOptions base;
  if (!o.profile.empty()) base.profile = o.profile;
  base.max_row_length = o.max_row_length;
  base.max_documents = o.max_documents;
  base.sft_masks = o.sft_masks;
  base.check.packing_invariance = !o.no_decoder;
  base.check.optimizer_steps = o.optimizer_steps;
  base.check.selection.top_fraction = o.select_top_fraction;
  base.collect_stats = o.stats;
  if (!o.oracle) {
    base.check_case = [](Candidate& c, const PackRequest& r, const CheckOptions& options) {
      return fastcheck::CheckCaseFast(c, r, options);
    };
  }
  return base;
}

// What the run has seen so far, batch by batch.
void Absorb(FuzzOutcome& out, const VerifyReport& report) {
  if (report.largest_gap &&
      (!out.gaps.largest_gap || std::fabs(report.largest_gap->gap()) > std::fabs(out.gaps.largest_gap->gap())))
    out.gaps.largest_gap = report.largest_gap;
  out.checked.insert(report.checked.begin(), report.checked.end());
  InsertProfiles(out.profiles, report.profile);
  if (report.generated) (out.generated ? *out.generated : out.generated.emplace()).Merge(*report.generated);
  if (report.contamination) {
    Accumulate(out.contamination ? *out.contamination : out.contamination.emplace(), *report.contamination);
  }
  if (report.consumer_work) (out.consumer_work ? *out.consumer_work : out.consumer_work.emplace()).Add(*report.consumer_work);
}

void ReplayOne(Candidate& candidate, const FuzzOptions& o, const FuzzHooks& hooks, FuzzOutcome& out) {
  packoracle::VerifyOptions options = BaseOptions(o);
  options.reproduce = o.reproduce;
  options.reproduce_command = ReplayLine(o, o.reproduce);
  if (hooks.batch) hooks.batch(0);
  VerifyReport report = Verify(candidate, options);
  out.cases_run = report.cases_run;
  out.checked = report.checked;
  InsertProfiles(out.profiles, report.profile);
  if (!report.passed) out.failure = report;
  out.replayed = true;
}

// Batch b of the unsharded run holds the cases [b·kFuzzBatch, (b+1)·kFuzzBatch) of `total`.
void RunBatches(Candidate& candidate, const FuzzOptions& o, const FuzzHooks& hooks, Clock::time_point start,
                FuzzOutcome& out) {
  const bool by_time = o.time > 0;
  const std::int64_t total = by_time && !o.cases_given ? std::numeric_limits<std::int64_t>::max() : o.cases;
  const packoracle::VerifyOptions base = BaseOptions(o);
  for (std::int64_t batch = out.shard_index; batch * kFuzzBatch < total; batch += out.shard_count) {
    if (hooks.interrupted && hooks.interrupted()) {
      out.stopped_by = "interrupt";
      break;
    }
    if (by_time && std::chrono::duration<double>(Clock::now() - start).count() >= o.time) {
      out.stopped_by = "time";
      break;
    }
    packoracle::VerifyOptions options = base;
    options.cases = static_cast<int>(std::min<std::int64_t>(kFuzzBatch, total - batch * kFuzzBatch));
    options.seed = BatchSeed(o.seed, static_cast<int>(batch));
    options.ramp_offset = batch * kFuzzBatch;
    options.ramp_cases = std::min<std::int64_t>(total, kFuzzRampCases);
    out.batches.push_back({batch, options.seed, options.cases});
    if (hooks.batch) hooks.batch(std::min<std::int64_t>(out.cases_run, std::numeric_limits<int>::max()));
    VerifyReport report = Verify(candidate, options);
    Absorb(out, report);
    if (!report.passed) {
      report.cases_to_failure = static_cast<int>(out.cases_run + report.cases_to_failure);  // counted over the run
      out.cases_run += report.cases_run;
      out.failure = report;
      out.stopped_by = "failure";
      break;
    }
    out.cases_run += report.cases_run;
  }
}

// The failure's full report, and its regression file when asked for.
void ReportFailure(const Candidate& candidate, const FuzzOptions& o, FuzzOutcome& out) {
  packoracle::VerifyOptions render;
  render.reproduce_command = ReplayLine(o, out.failure->reproduce);
  render.headline = o.headline;
  render.regression_draft = o.regression_draft;
  render.check = BaseOptions(o).check;  // the draft repeats a reducer's schedule and selection
  DescribeFailure(*out.failure, render);  // its sections and text, under the run's headline and replay line
  out.failure_text = out.failure->text;
  if (o.save_regressions.empty()) return;
  try {
    out.regression_path = SaveRegression(o.save_regressions, candidate.name, *out.failure, render.check);
  } catch (const std::exception& e) {
    out.regression_error = e.what();
  }
}

}  // namespace

void CheckFuzzOptions(const FuzzOptions& o, const std::function<void()>& more_checks) {
  if (!o.shard.empty()) {
    ParseShard(o.shard);
    if (!o.reproduce.empty()) throw InputError("--shard and --reproduce: a reproduce string replays alone, without --shard");
  }
  if (int(!o.preset.empty()) + int(!o.policy_file.empty()) + int(o.policy.has_value()) > 1) {
    throw InputError("give --preset or --policy, not both");
  }
  if (o.cases < 1) throw InputError("--cases must be at least 1, got " + std::to_string(o.cases));
  if (!(o.time >= 0)) throw InputError("--time must be a number of seconds >= 0");
  if (!(o.select_top_fraction > 0 && o.select_top_fraction <= 1)) {
    throw InputError("--select-top-fraction must be in (0, 1], got " + ShortestText(o.select_top_fraction));
  }
  if (o.max_row_length < 1 || o.max_row_length > kMaxFuzzRowLength) {
    throw InputError("--max-row-length must be in 1.." + std::to_string(kMaxFuzzRowLength) + ", got " +
                     std::to_string(o.max_row_length));
  }
  if (o.max_documents < 1 || o.max_documents > kMaxFuzzDocuments) {
    throw InputError("--max-documents must be in 1.." + std::to_string(kMaxFuzzDocuments) + ", got " +
                     std::to_string(o.max_documents));
  }
  if (more_checks) more_checks();
  if (!o.profile.empty()) {
    std::vector<std::string> known;
    for (const auto& p : gen::Profiles()) known.push_back(p.name);
    if (std::find(known.begin(), known.end(), o.profile) == known.end()) {
      throw InputError("unknown profile '" + o.profile + "' (known profiles: " + Join(known) + ")");
    }
  }
}

FuzzPolicies ResolveFuzzPolicies(const FuzzOptions& o) {
  if (o.policy) return {{*o.policy}, "the given policy"};
  if (!o.preset.empty()) return {{FindPreset(o.preset).policy}, "preset " + o.preset};
  if (o.policy_file.empty()) {
    FuzzPolicies all{{}, "every preset"};
    for (const auto& preset : Presets()) all.policies.push_back(preset.policy);
    return all;
  }
  std::ifstream in(o.policy_file);
  if (!in) throw InputError("cannot read the policy file " + o.policy_file);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(o.policy_file + ": not JSON: " + e.what());
  }
  if (!j.is_object()) throw InputError(o.policy_file + ": a policy file holds one JSON object");
  return {{PolicyFromJson(j, o.policy_file)}, "the policy of " + o.policy_file};
}

double FuzzOutcome::cases_per_second() const { return static_cast<double>(cases_run) / std::max(seconds, 1e-9); }

// The candidate with the roles options run as exec processes (FuzzOptions::exec_packer, exec_reducer,
// exec_consumer, exec_value_consumer), each
// started and checked first: InputError for a command that cannot start, or a role given twice.
Candidate WithExecRoles(const Candidate& candidate, const FuzzOptions& o) {
  Candidate out = candidate;
  ExecOptions exec;
  exec.policies = candidate.policies;
  exec.timeout = std::chrono::milliseconds(std::max<std::int64_t>(1, std::llround(o.exec_timeout * 1000.0)));
  auto started = [&](const std::string& flag, auto role) {
    if (auto problem = role->CheckStarts(std::chrono::milliseconds(300))) {
      throw InputError(flag + ": the command cannot start: `" + role->command() + "`: " + *problem);
    }
    return role;
  };
  if (!o.exec_reducer.empty()) {
    if (out.reducer) throw InputError("--exec-reducer: the candidate has a loss reducer already (give one of them)");
    out.reducer = started("--exec-reducer", std::make_shared<ExecReducer>(o.exec_reducer, exec));
  }
  EmittedSource emitted = o.emitted_records;
  if (!o.exec_packer.empty()) {
    if (out.packer) throw InputError("exec_packer: the candidate has a packer already (give one of them)");
    auto packer = started("exec_packer", std::make_shared<ExecPacker>(o.exec_packer, exec));
    if (o.on_emitted) packer->OnAnswer(o.on_emitted);
    emitted = [packer] { return &packer->emitted(); };
    out.packer = packer;
  }
  if (!o.exec_consumer.empty()) {
    if (out.consumer) throw InputError("--exec-consumer: the candidate has an attention consumer already (give one of them)");
    auto consumer = started("--exec-consumer", std::make_shared<ExecConsumer>(o.exec_consumer, exec));
    consumer->ReadEmitted(emitted);
    out.consumer = consumer;
  }
  if (!o.exec_value_consumer.empty()) {
    if (out.values) throw InputError("--exec-value-consumer: the candidate has a value consumer already (give one of them)");
    auto values = started("--exec-value-consumer", std::make_shared<ExecValueConsumer>(
                                                       o.exec_value_consumer, exec, o.exec_value_gradients,
                                                       o.exec_value_tolerance));
    values->ReadEmitted(emitted);
    out.values = values;
  }
  if (out.name.empty()) {
    for (const std::string* command : {&o.exec_packer, &o.exec_reducer, &o.exec_consumer, &o.exec_value_consumer})
      if (out.name.empty() && !command->empty()) out.name = NameFromCommand(*command);
  }
  return out;
}

FuzzOutcome RunFuzz(Candidate& given, const FuzzOptions& o, const FuzzPolicies& policies, const FuzzHooks& hooks) {
  CheckFuzzOptions(o);
  Candidate candidate = WithExecRoles(given, o);  // its exec processes stop when it goes
  const auto start = Clock::now();
  FuzzOutcome out;
  out.candidate = candidate.name;
  out.policy_label = policies.label;
  if (!o.shard.empty()) std::tie(out.shard_index, out.shard_count) = ParseShard(o.shard);
  if (!o.reproduce.empty()) {
    ReplayOne(candidate, o, hooks, out);
  } else {
    RunBatches(candidate, o, hooks, start, out);
  }
  out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (out.failure) ReportFailure(candidate, o, out);
  out.exit_code = out.failure ? 1 : out.stopped_by == "interrupt" ? 130 : 0;
  return out;
}

}  // namespace packoracle::jobs
