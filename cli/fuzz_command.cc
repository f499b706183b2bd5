// packoracle fuzz --exec CMD: see fuzz_command.h.
//
// The run is a sequence of Verify calls of kBatch cases each: batch 0 uses the run's seed, batch b a seed
// derived from it, so that a run is reproducible from its seed and case count, a time budget can stop it
// between batches, and progress can be shown. Every reproduce string carries its batch's seed.
//
// --shard i/n runs the batches b with b mod n == i of that same sequence (each with its own derived seed):
// the n shards together run exactly the batches of the unsharded run, each once, so a CI matrix or a Slurm
// array splits a run without changing what is checked; a shard's reproduce strings replay alone.
#include "fuzz_command.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "packoracle/fastcheck/case_check.h"
#include "packoracle/interchange/policy_json.h"
#include "packoracle/interchange/regression.h"
#include "packoracle/interchange/request_json.h"
#include "packoracle/oracle.h"
#include "packoracle/interchange/exec_candidate.h"
#include "packoracle/properties/generators.h"
#include "packoracle/properties/verify.h"

namespace packoracle::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kBatch = 32;                   // cases per Verify call
constexpr int kDefaultCases = 1000;
constexpr double kDefaultTimeout = 10.0;     // seconds per case
constexpr double kProgressEvery = 2.0;       // seconds between progress lines
constexpr auto kStartGrace = std::chrono::milliseconds(300);  // a command that dies this fast cannot start
constexpr int kInterrupted = 130;

constexpr const char* kFooter = R"(
The candidate is a long-lived process, started once with /bin/sh -c CMD (a simple command is exec'd, so the
candidate owns its pipes). For each case the kit writes one line to its stdin,
  {"record":"request","id":N,"row_length":..,"micro_batch_rows":..,"dp_world_size":..,"policy":{..},
   "documents":[{"doc_uid":..,"tokens":[..],"supervised":[..]}],"target_losses":{..}}
and reads the answer from its stdout: zero or more {"record":"microbatch",...} lines (DESIGN §5, doc_spans
required), then {"record":"end","id":N}; or {"record":"error","id":N,"message":"..."} to refuse the input.
One JSON object per line; flush stdout after every answer. stderr is free text: it is drained all the time
and its last lines are quoted in reports.

Policies: the candidate claims the --preset, or the policy of --policy FILE (one JSON object: a "preset"
and the keys it overrides; `packoracle presets` lists both), or, with neither, every preset. Each case draws
one of the claimed policies. A refusal must come exactly when the policy demands one (a document longer than
the row under overflow: error; a stream shorter than one window when only full windows are kept); any other
refusal fails the case under `coverage`.

Faults fail the case (under `shape`, quoting the candidate's last stderr lines): an exit or a crash (the
signal is named), no complete answer within --timeout seconds, a line that is not JSON, a record for another
id or of an unknown type, a partial line at the end of the output, a line over 64 MiB, output between
answers, closing stdin early. The kit then kills the candidate's process group, starts a fresh candidate and
goes on shrinking. No candidate process outlives the kit.

The run: --cases cases (default 1000), or with --time and no --cases as many as fit in the time. Cases come
in batches of 32 (batch 0 uses --seed, batch b a seed derived from it; without --profile each batch draws its
profile from its seed). --shard i/n runs only the batches b with b mod n == i (of --cases in all, or until
--time): n jobs with the same --seed and --cases and shards 0/n .. n-1/n run together exactly the cases of
one unsharded run, each once; a failure's replay command needs no --shard. --time is checked between batches: it stops the generation of new cases (a failure
already found is still shrunk), and the report says how many cases ran. A run longer than 2 s prints a
progress line on stderr every 2 s (cases done, cases per second).

A failure prints the minimal counterexample, its reproduce string and the command line that replays it:
  packoracle fuzz --exec 'CMD' --reproduce 'v1:<seed>:<case>:<size>:<profile>:<path>' [same --preset/--policy]
(the policy flags must be the same: they decide what is generated). --save-regressions DIR also writes the
counterexample as a regression file (the fixtures/regressions/ format, replayed by the test suites).

Exit status: 0 every case passed; 1 a failure was found; 2 unusable input (bad arguments, an unreadable
policy file, a command that cannot start); 130 interrupted (Ctrl-C; a second one stops at once).

Example:
  packoracle fuzz --exec 'python3 properties/test/exec/reference_packer.py' --preset reference --time 30)";

struct FuzzOptions {
  std::string exec;
  std::string preset;
  std::string policy_file;
  int cases = kDefaultCases;
  std::uint64_t seed = VerifyOptions{}.seed;
  double time = 0;  // seconds; 0: no budget
  double timeout = kDefaultTimeout;
  std::string profile;
  std::string save_regressions;
  std::string reproduce;
  std::string format = "text";
  std::string name;
  bool oracle = false;  // check every case with CheckCase alone (the slow path)
  bool no_decoder = false;  // skip packing_invariance (the tiny decoder): every passing case on the fast path
  std::string shard;  // "i/n"
  CLI::Option* cases_option = nullptr;
  CLI::Option* time_option = nullptr;
};

std::atomic<bool> g_interrupted{false};

extern "C" void OnInterrupt(int) {
  g_interrupted.store(true);
  signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the kit at once (its candidates die with it: PDEATHSIG)
  signal(SIGTERM, SIG_DFL);
}

// Installs OnInterrupt for the run's lifetime (no SA_RESTART: a waiting poll() wakes up).
class InterruptGuard {
 public:
  InterruptGuard() {
    struct sigaction action {};
    action.sa_handler = OnInterrupt;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~InterruptGuard() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

std::uint64_t SplitMix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

std::uint64_t BatchSeed(std::uint64_t seed, int batch) {
  return batch == 0 ? seed : SplitMix64(seed + static_cast<std::uint64_t>(batch));
}

// 'text' for a POSIX shell (left bare when that is safe, unless `always`).
std::string ShellQuote(const std::string& text, bool always = false) {
  if (!always && !text.empty() && text.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=@,+") ==
                           std::string::npos) {
    return text;
  }
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string Fixed(double v, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", digits, v);
  return buffer;
}

// A short candidate name from the command: the script it runs ("python3 tools/my_packer.py -v" → "my_packer").
std::string NameFromCommand(const std::string& command) {
  std::vector<std::string> words;
  std::istringstream in(command);
  for (std::string w; in >> w;) {
    w.erase(std::remove(w.begin(), w.end(), '\''), w.end());
    w.erase(std::remove(w.begin(), w.end(), '"'), w.end());
    if (!w.empty()) words.push_back(w);
  }
  std::string pick;
  for (std::size_t k = 0; k < words.size() && pick.empty(); ++k) {
    const std::string& w = words[k];
    if (w == "-m" && k + 1 < words.size()) pick = words[k + 1];
    else if (w[0] != '-' && w.find('=') == std::string::npos && w.find('/') != std::string::npos && k > 0) pick = w;
    else if (w[0] != '-' && w.size() > 3 && w.find('.') != std::string::npos && k > 0) pick = w;
  }
  if (pick.empty()) pick = words.empty() ? std::string("candidate") : words[0];
  if (const auto slash = pick.rfind('/'); slash != std::string::npos) pick = pick.substr(slash + 1);
  if (const auto dot = pick.rfind('.'); dot != std::string::npos && dot > 0) pick = pick.substr(0, dot);
  return "exec:" + pick;
}

// Progress on stderr, a line every kProgressEvery seconds once the run is that long. Fed by every request:
// the case count inside a batch is the highest case id seen (ids are case indices within the batch).
class Progress {
 public:
  explicit Progress(double budget) : start_(Clock::now()), last_(start_), budget_(budget) {}
  double Elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  void StartBatch(int cases_before) {
    before_ = cases_before;
    in_batch_ = 0;
  }
  void Saw(std::int64_t id) { in_batch_ = std::max<std::int64_t>(in_batch_, id); }
  void Tick(std::int64_t restarts) {
    const auto now = Clock::now();
    if (std::chrono::duration<double>(now - last_).count() < kProgressEvery) return;
    last_ = now;
    const double elapsed = Elapsed();
    const std::int64_t done = before_ + in_batch_;
    std::string line = "packoracle fuzz: " + std::to_string(done) + " cases, " +
                       Fixed(static_cast<double>(done) / std::max(elapsed, 1e-9), 0) + " cases/s, " + Fixed(elapsed, 1) +
                       " s";
    if (budget_ > 0) line += " of " + Fixed(budget_, 0) + " s";
    if (restarts > 0) line += ", " + std::to_string(restarts) + " candidate restart" + (restarts == 1 ? "" : "s");
    std::cerr << line << std::endl;
  }

 private:
  Clock::time_point start_, last_;
  double budget_;
  std::int64_t before_ = 0, in_batch_ = 0;
};

// Thrown through Verify (deliberately not a std::exception, which CheckCase would turn into a fault) when the
// candidate fails before it has ever read a request: the command cannot start, no case can be checked.
struct CannotStart {
  std::string message;
};

// The exec packer seen through the progress meter.
class ProgressPacker final : public PackerRole {
 public:
  ProgressPacker(std::shared_ptr<ExecPacker> inner, Progress& progress) : inner_(std::move(inner)), progress_(progress) {}
  PackResult Pack(const PackRequest& request) override {
    progress_.Saw(request.id);
    PackResult result = inner_->Pack(request);
    if (result.fault && !inner_->took_a_request()) throw CannotStart{*result.fault};
    progress_.Tick(inner_->stats().starts - 1);
    return result;
  }

 private:
  std::shared_ptr<ExecPacker> inner_;
  Progress& progress_;
};

int Unusable(const std::string& message) {
  std::cerr << "packoracle fuzz: " << message << "\n";
  return 2;
}

std::vector<std::string> Names(const std::set<Invariant>& invariants) {
  std::vector<std::string> out;
  for (auto inv : invariants) out.push_back(Name(inv));
  return out;
}

std::string Join(const std::vector<std::string>& words, const std::string& separator = ", ") {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : separator) + w;
  return out;
}

// "i/n" with 0 <= i < n: the shard to run. nullopt (with `error` set) for anything else.
std::optional<std::pair<int, int>> ParseShard(const std::string& text, std::string& error) {
  const auto slash = text.find('/');
  auto number = [](const std::string& digits, int& value) {
    if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos) return false;
    value = std::stoi(digits);
    return true;
  };
  int index = 0, count = 0;
  if (slash == std::string::npos || !number(text.substr(0, slash), index) || !number(text.substr(slash + 1), count) ||
      count < 1 || index >= count) {
    error = "--shard must be i/n with 0 <= i < n (shard i of n, counted from 0), got '" + text + "'";
    return std::nullopt;
  }
  return std::make_pair(index, count);
}

int RunFuzz(const FuzzOptions& o) {
  // ---- arguments ----
  if (o.exec.empty()) return Unusable("--exec CMD is required: the command that runs the candidate (see --help)");
  int shard_index = 0, shard_count = 1;
  if (!o.shard.empty()) {
    std::string error;
    const auto shard = ParseShard(o.shard, error);
    if (!shard) return Unusable(error);
    std::tie(shard_index, shard_count) = *shard;
    if (!o.reproduce.empty()) return Unusable("--shard and --reproduce: a reproduce string replays alone, without --shard");
  }
  if (!o.preset.empty() && !o.policy_file.empty()) return Unusable("give --preset or --policy, not both");
  if (o.cases < 1) return Unusable("--cases must be at least 1, got " + std::to_string(o.cases));
  if (!(o.time >= 0)) return Unusable("--time must be a number of seconds >= 0");
  if (!(o.timeout > 0) || o.timeout > 86400) return Unusable("--timeout must be a number of seconds in (0, 86400]");
  if (o.format != "text" && o.format != "json") return Unusable("--format must be text or json, got '" + o.format + "'");
  if (!o.profile.empty()) {
    std::vector<std::string> known;
    for (const auto& p : gen::Profiles()) known.push_back(p.name);
    if (std::find(known.begin(), known.end(), o.profile) == known.end()) {
      return Unusable("unknown profile '" + o.profile + "' (known profiles: " + Join(known) + ")");
    }
  }

  std::vector<Policy> policies;
  std::string policy_label;
  try {
    if (!o.preset.empty()) {
      policies = {FindPreset(o.preset).policy};
      policy_label = "preset " + o.preset;
    } else if (!o.policy_file.empty()) {
      std::ifstream in(o.policy_file);
      if (!in) return Unusable("cannot read the policy file " + o.policy_file);
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(in);
      } catch (const nlohmann::json::exception& e) {
        return Unusable(o.policy_file + ": not JSON: " + e.what());
      }
      if (!j.is_object()) return Unusable(o.policy_file + ": a policy file holds one JSON object");
      policies = {PolicyFromJson(j, o.policy_file)};
      policy_label = "the policy of " + o.policy_file;
    } else {
      for (const auto& preset : Presets()) policies.push_back(preset.policy);
      policy_label = "every preset";
    }
  } catch (const InputError& e) {
    return Unusable(e.what());
  }

  ExecOptions exec_options;
  exec_options.name = o.name.empty() ? NameFromCommand(o.exec) : o.name;
  exec_options.policies = policies;
  exec_options.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(o.timeout * 1000.0 + 0.5));
  if (exec_options.timeout.count() < 1) exec_options.timeout = std::chrono::milliseconds(1);
  auto exec = std::make_shared<ExecPacker>(o.exec, exec_options);

  // The replay command line: the same candidate and policies, the reproduce string.
  std::string replay_prefix = "packoracle fuzz --exec " + ShellQuote(o.exec, true);
  std::string replay_suffix;
  if (!o.preset.empty()) replay_suffix += " --preset " + ShellQuote(o.preset);
  if (!o.policy_file.empty()) replay_suffix += " --policy " + ShellQuote(o.policy_file);
  if (o.timeout != kDefaultTimeout) replay_suffix += " --timeout " + ShellQuote(Fixed(o.timeout, 3));
  if (!o.name.empty()) replay_suffix += " --name " + ShellQuote(o.name);
  auto replay = [&](const std::string& reproduce) {
    return replay_prefix + " --reproduce " + ShellQuote(reproduce, true) + replay_suffix;
  };

  if (auto problem = exec->CheckStarts(kStartGrace)) {
    return Unusable("the candidate cannot start: `" + o.exec + "`: " + *problem);
  }

  // ---- the run ----
  g_interrupted.store(false);
  InterruptGuard interrupt_guard;
  const bool by_time = o.time > 0;
  const bool cases_given = o.cases_option && o.cases_option->count() > 0;
  const std::int64_t total = by_time && !cases_given ? std::numeric_limits<std::int64_t>::max() : o.cases;
  Progress progress(o.time);
  Candidate candidate;
  candidate.name = exec_options.name;
  candidate.policies = policies;
  candidate.packer = std::make_shared<ProgressPacker>(exec, progress);

  VerifyOptions base;
  if (!o.profile.empty()) base.profile = o.profile;
  base.check.packing_invariance = !o.no_decoder;
  if (!o.oracle) {
    base.check_case = [](Candidate& c, const PackRequest& r, const CheckOptions& options) {
      return fastcheck::CheckCaseFast(c, r, options);
    };
  }
  std::int64_t cases_run = 0;
  std::optional<VerifyReport> failure;
  std::optional<VerifyReport> replayed;  // --reproduce: the one report
  std::set<Invariant> checked;
  std::set<std::string> profiles;
  std::optional<Contamination> contamination;  // packing_invariance's measurement over the run
  auto measure = [&contamination](const VerifyReport& r) {
    if (r.contamination) Accumulate(contamination ? *contamination : contamination.emplace(), *r.contamination);
  };
  nlohmann::ordered_json batches = nlohmann::ordered_json::array();  // this shard's: index, seed, cases
  std::string stopped_by = "cases";
  VerifyReport gaps;  // the largest gap between the declared objective and the global token mean, over the run
  auto keep_gap = [&gaps](const VerifyReport& report) {
    if (report.largest_gap && (!gaps.largest_gap || std::fabs(report.largest_gap->gap()) > std::fabs(gaps.largest_gap->gap())))
      gaps.largest_gap = report.largest_gap;
  };
  try {
    if (!o.reproduce.empty()) {
      VerifyOptions options = base;
      options.reproduce = o.reproduce;
      options.reproduce_command = replay(o.reproduce);
      progress.StartBatch(0);
      VerifyReport report = Verify(candidate, options);
      cases_run = report.cases_run;
      checked = report.checked;
      profiles.insert(report.profile);
      if (!report.passed) failure = report;
      replayed = report;
    } else {
      // Batch b of the unsharded run holds the cases [b·kBatch, (b+1)·kBatch) of `total`.
      for (std::int64_t batch = shard_index; batch * kBatch < total; batch += shard_count) {
        if (g_interrupted.load()) {
          stopped_by = "interrupt";
          break;
        }
        if (by_time && progress.Elapsed() >= o.time) {
          stopped_by = "time";
          break;
        }
        VerifyOptions options = base;
        options.cases = static_cast<int>(std::min<std::int64_t>(kBatch, total - batch * kBatch));
        options.seed = BatchSeed(o.seed, static_cast<int>(batch));
        batches.push_back({{"batch", batch}, {"seed", options.seed}, {"cases", options.cases}});
        progress.StartBatch(static_cast<int>(std::min<std::int64_t>(cases_run, std::numeric_limits<int>::max())));
        VerifyReport report = Verify(candidate, options);
        keep_gap(report);
        checked.insert(report.checked.begin(), report.checked.end());
        profiles.insert(report.profile);
        measure(report);
        if (!report.passed) {
          report.cases_to_failure = static_cast<int>(cases_run + report.cases_to_failure);  // counted over the run
          cases_run += report.cases_run;
          failure = report;
          stopped_by = "failure";
          break;
        }
        cases_run += report.cases_run;
      }
    }
  } catch (const InputError& e) {
    return Unusable(e.what());
  } catch (const CannotStart& e) {
    return Unusable("the candidate cannot start: `" + o.exec + "` failed before it read its first request: " + e.message);
  }
  if (shard_count > 1 && batches.empty() && o.reproduce.empty()) {
    std::cerr << "packoracle fuzz: shard " << shard_index << "/" << shard_count << " has no batch to run (--cases "
              << o.cases << " makes " << (o.cases + kBatch - 1) / kBatch << " batch(es) of " << kBatch << ")\n";
  }
  const double seconds = progress.Elapsed();
  const double rate = static_cast<double>(cases_run) / std::max(seconds, 1e-9);
  const auto& stats = exec->stats();

  std::string regression_path, regression_error;
  std::string failure_text;
  if (failure) {
    VerifyOptions render;
    render.reproduce_command = replay(failure->reproduce);
    failure_text = RenderFailure(candidate.name, *failure->counterexample, *failure->failure, *failure, render);
    if (!o.save_regressions.empty()) {
      try {
        regression_path = SaveRegression(o.save_regressions, candidate.name, *failure);
      } catch (const std::exception& e) {
        regression_error = e.what();
      }
    }
  }
  exec->Stop();

  // ---- output ----
  if (o.format == "json") {
    nlohmann::ordered_json out;
    out["command"] = "fuzz";
    out["exec"] = o.exec;
    out["candidate"] = candidate.name;
    out["verdict"] = failure ? "fail" : (stopped_by == "interrupt" ? "interrupted" : "pass");
    out["cases"] = cases_run;
    out["stopped_by"] = stopped_by;
    out["seconds"] = seconds;
    out["cases_per_second"] = rate;
    out["seed"] = o.seed;
    out["shard"] = {{"index", shard_index}, {"count", shard_count}};
    out["batches"] = batches;
    out["policies"] = policy_label;
    out["profiles"] = std::vector<std::string>(profiles.begin(), profiles.end());
    out["checked"] = Names(checked);
    out["candidate_starts"] = stats.starts;
    out["candidate_faults"] = stats.faults;
    out["refusals"] = stats.refusals;
    if (!failure && gaps.largest_gap) out["objective_gap"] = DescribeGap(gaps);
    if (contamination) {
      out["packing_invariance"] = {{"targets", contamination->targets},
                                   {"max_relative_change", contamination->max_relative},
                                   {"mean_relative_change", contamination->mean_relative}};
    }
    if (failure) {
      nlohmann::ordered_json f;
      f["invariant"] = Name(*failure->broken());
      f["sentence"] = failure->failure->violations.front().sentence;
      f["cases_to_failure"] = failure->cases_to_failure;
      f["shrinks"] = failure->shrinks;
      f["reproduce"] = failure->reproduce;
      f["replay"] = replay(failure->reproduce);
      f["regression"] = regression_path.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(regression_path);
      if (!regression_error.empty()) f["regression_error"] = regression_error;
      f["request"] = RequestToJson(*failure->counterexample);
      f["report"] = failure_text;
      out["failure"] = f;
    }
    std::cout << out.dump(2) << std::endl;
  } else {
    const std::string restarts = std::to_string(stats.starts) + " start" + (stats.starts == 1 ? "" : "s") +
                                 ", " + std::to_string(stats.faults) + " fault" + (stats.faults == 1 ? "" : "s") +
                                 ", " + std::to_string(stats.refusals) + " refusal" + (stats.refusals == 1 ? "" : "s");
    if (failure) {
      std::cout << failure_text;  // its Reproduce section holds the reproduce string and the replay command
      if (!regression_path.empty()) std::cout << "=== Saved as a regression\n  " << regression_path << "\n";
      std::cout << "\npackoracle fuzz: FAIL (" << Name(*failure->broken()) << ") " << candidate.name << ": case "
                << failure->cases_to_failure << " failed, shrunk in " << failure->shrinks << " step"
                << (failure->shrinks == 1 ? "" : "s") << "; " << cases_run << " case" << (cases_run == 1 ? "" : "s")
                << " run in " << Fixed(seconds, 1) << " s; candidate: " << restarts << "\n";
      if (!regression_error.empty()) std::cerr << "packoracle fuzz: could not save the regression: " << regression_error << "\n";
    } else if (replayed) {
      std::cout << "packoracle fuzz: PASS " << candidate.name << ": the case " << o.reproduce << " passes (" << policy_label
                << ")\n";
    } else {
      std::cout << "packoracle fuzz: " << (stopped_by == "interrupt" ? "INTERRUPTED " : "PASS ") << candidate.name << ": "
                << cases_run << " case" << (cases_run == 1 ? "" : "s") << " passed in " << Fixed(seconds, 1) << " s ("
                << Fixed(rate, 0) << " cases/s)";
      if (stopped_by == "time") std::cout << ", stopped by the time budget of " << Fixed(o.time, 1) << " s";
      if (stopped_by == "interrupt") std::cout << ", interrupted";
      std::cout << "\n  policies  " << policy_label << "\n  seed      " << o.seed;
      if (shard_count > 1) {
        std::cout << ", shard " << shard_index << "/" << shard_count << " (" << batches.size() << " batch"
                  << (batches.size() == 1 ? "" : "es") << " of the run's, from batch " << shard_index << " every "
                  << shard_count << ")";
      }
      std::cout << " (profiles "
                << Join(std::vector<std::string>(profiles.begin(), profiles.end())) << ")\n  checked   "
                << Join(Names(checked)) << "\n  candidate " << restarts << "\n";
      if (gaps.largest_gap) std::cout << "  objective " << DescribeGap(gaps) << "\n";
      if (contamination) {
        std::cout << "  decoder   losses against each document alone over " << contamination->targets
                  << " targets: max relative change " << contamination->max_relative << ", mean "
                  << contamination->mean_relative << "\n";
      }
    }
  }
  if (failure) return 1;
  return stopped_by == "interrupt" ? kInterrupted : 0;
}

}  // namespace

Runner AddFuzzCommand(CLI::App& app) {
  auto o = std::make_shared<FuzzOptions>();
  auto* fuzz = app.add_subcommand(
      "fuzz",
      "Property-based run against an external candidate: generated cases go to CMD over the exec protocol (JSON "
      "Lines on its stdin and stdout), every answer is checked against the oracle, the first failure is shrunk to "
      "a minimal counterexample and printed with a command that replays it (exit 0 all passed, 1 a failure, 2 "
      "unusable input)");
  fuzz->footer(kFooter);
  fuzz->add_option("--exec", o->exec, "the command that runs the candidate (via /bin/sh -c); required");
  fuzz->add_option("--preset", o->preset, "the preset the candidate implements (see `packoracle presets`)");
  fuzz->add_option("--policy", o->policy_file,
                   "a JSON file holding the policy the candidate implements: {\"preset\":..., key: value, ...}");
  o->cases_option = fuzz->add_option("--cases", o->cases, "cases to generate (default 1000; with --time and no --cases: "
                                                          "as many as the time allows)");
  fuzz->add_option("--seed", o->seed, "the run's seed: the same seed gives the same cases")->capture_default_str();
  o->time_option = fuzz->add_option("--time", o->time, "time budget in seconds: no new case is generated after it");
  fuzz->add_option("--timeout", o->timeout, "seconds the candidate has for one answer")->capture_default_str();
  fuzz->add_option("--profile", o->profile,
                   "one fuzzing profile for every case (edges, short, long, sft, collide); default: drawn per batch");
  fuzz->add_option("--save-regressions", o->save_regressions, "write the minimal counterexample into this directory");
  fuzz->add_option("--reproduce", o->reproduce, "replay exactly the case of a reproduce string (v1:...) and stop");
  fuzz->add_option("--format", o->format, "text (for people) or json (for machines)")->capture_default_str();
  fuzz->add_flag("--oracle", o->oracle,
                 "check every case with the oracle alone (CheckCase); by default the fast verifier checks each case "
                 "and the oracle reports the failures (with the decoder on, the oracle checks every case)");
  fuzz->add_flag("--no-decoder", o->no_decoder,
                 "skip packing_invariance (the tiny reference decoder run on every row and every document alone): "
                 "the structural invariants stay, on the fast verifier");
  fuzz->add_option("--shard", o->shard,
                   "i/n: run shard i of n (batches b with b mod n == i; same --seed and --cases in every shard)");
  fuzz->add_option("--name", o->name, "the candidate's name in reports and regression files (default: from CMD)");
  return [o, fuzz] { return *fuzz ? RunFuzz(*o) : -1; };
}

}  // namespace packoracle::cli
