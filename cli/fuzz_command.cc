// packoracle fuzz --exec CMD: the command line of jobs::RunExecFuzz (see fuzz_command.h): its options, Ctrl-C,
// the progress line on stderr and the report on stdout.
#include "fuzz_command.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>

#include "packoracle/jobs/fuzz_exec.h"
#include "packoracle/jobs/fuzz_options.h"
#include "packoracle/oracle.h"

namespace packoracle::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kProgressEvery = 2.0;       // seconds between progress lines

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
signal is named), no complete answer within --timeout seconds (after the candidate's first hang, within an
adaptive deadline: max(0.5 s, 20x its slowest answer, 20x its slowest answer per token x the case's tokens),
at most --timeout, so that a hanging case shrinks at about a second a step; before it, a slow answer is never
failed, it only raises the deadline), a line that is not JSON, a record for another
id or of an unknown type, a partial line at the end of the output, a line over 64 MiB, output between
answers, closing stdin early. The kit then kills the candidate's process group, starts a fresh candidate and
goes on shrinking. No candidate process outlives the kit.

Other roles (DESIGN §6): --exec-reducer CMD runs the candidate's loss reducer as such a process (it gets
{"record":"reduce_request",..,"microbatches":[..],"slot_losses":[..]} and answers {"record":"totals",
"id":N,"totals":[<producer object>,..]} then end), --exec-consumer CMD its attention consumer (it gets
{"record":"consume_request",..,"microbatch":{..},"layout":{..}} and answers one {"record":"mask","id":N,"row":r,
"runs":{..}} or {..,"mask":[[0/1,..],..]} per row, then optionally {"record":"work",..} with what it computes,
then end; with --exec, "emitted" holds the packer's own record), --exec-value-consumer CMD its value consumer
(it gets {"record":"value_request",..,"microbatch":{..},"layout":{..},"gradient":false} and answers one
{"record":"values","id":N,"row":r,"values":[[..],..]} per row, then end). Without --exec the kit's reference
packer makes the rows. Their faults fail the case under `loss`, `attention` and `packing_invariance`, with the
same deadlines and restarts.

The run: --cases cases (default 1000), or with --time and no --cases as many as fit in the time. Cases come
in batches of 32 (batch 0 uses --seed, batch b a seed derived from it; without --profile each case draws its
profile). Cases grow with the run: over its first 2048 cases (all of them in a shorter run) row lengths and
document counts climb, log-uniformly drawn, from at most 16 slots and 8 documents to --max-row-length (8192)
and --max-documents (512); --stats shows what was generated. --shard i/n runs only the batches b with b mod n == i (of --cases in all, or until
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
  packoracle fuzz --exec 'python3 exec/test/candidates/reference_packer.py' --preset reference --time 30)";

struct FuzzCommandOptions {
  jobs::ExecFuzzOptions job;
  std::string format = "text";
  CLI::Option* cases_option = nullptr;
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

std::string Fixed(double v, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", digits, v);
  return buffer;
}

// Progress on stderr, a line every kProgressEvery seconds once the run is that long. Fed by every request:
// the case count inside a batch is the highest case id seen (ids are case indices within the batch).
class Progress {
 public:
  explicit Progress(double budget) : start_(Clock::now()), last_(start_), budget_(budget) {}
  double Elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  void StartBatch(std::int64_t cases_before) {
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

int Unusable(const std::string& message) {
  std::cerr << "packoracle fuzz: " << message << "\n";
  return 2;
}

int RunFuzz(FuzzCommandOptions& o) {
  jobs::ExecFuzzOptions& job = o.job;
  job.fuzz.cases_given = o.cases_option && o.cases_option->count() > 0;
  job.fuzz.stats = job.fuzz.stats || o.format == "json";  // the JSON always says what was generated
  // Both start once the candidate has: Ctrl-C during the start kills the kit, and the clock counts the run.
  std::optional<InterruptGuard> interrupt_guard;
  std::optional<Progress> progress;
  jobs::ExecFuzzHooks hooks;
  hooks.started = [&] {
    g_interrupted.store(false);
    interrupt_guard.emplace();
    progress.emplace(job.fuzz.time);
  };
  hooks.run.interrupted = [] { return g_interrupted.load(); };
  hooks.run.batch = [&](std::int64_t cases_before) { progress->StartBatch(cases_before); };
  hooks.request = [&](std::int64_t id) { progress->Saw(id); };
  hooks.answered = [&](std::int64_t restarts) { progress->Tick(restarts); };
  jobs::ExecFuzzResult result;
  try {
    jobs::CheckExecFuzzOptions(job, [&] {
      if (o.format != "text" && o.format != "json") throw InputError("--format must be text or json, got '" + o.format + "'");
    });
    result = jobs::RunExecFuzz(job, hooks);
  } catch (const InputError& e) {
    return Unusable(e.what());
  }
  const jobs::FuzzOutcome& r = result.outcome;
  if (r.shard_count > 1 && r.batches.empty() && job.fuzz.reproduce.empty()) {
    std::cerr << "packoracle fuzz: shard " << r.shard_index << "/" << r.shard_count << " has no batch to run (--cases "
              << job.fuzz.cases << " makes " << (job.fuzz.cases + jobs::kFuzzBatch - 1) / jobs::kFuzzBatch
              << " batch(es) of " << jobs::kFuzzBatch << ")\n";
  }
  if (o.format == "json") {
    std::cout << jobs::RenderExecFuzzJson(job, result) << std::flush;
  } else {
    std::cout << jobs::RenderExecFuzzText(job, result);
    if (r.failure && !r.regression_error.empty()) {
      std::cerr << "packoracle fuzz: could not save the regression: " << r.regression_error << "\n";
    }
  }
  return r.exit_code;
}

// A flag per entry of the run's options that the command line takes (jobs::kFuzzOptions), setting its member of
// `fuzz`: a bool as a flag, a number with its default shown and its range where the table gives one.
void AddFuzzOptionFlags(CLI::App& command, jobs::FuzzOptions& fuzz) {
  for (const auto& entry : jobs::kFuzzOptions) {
    if (entry.flag.empty()) continue;
    const std::string flag(entry.flag), help(entry.help);
    std::visit(
        [&](auto member) {
          using T = std::remove_reference_t<decltype(fuzz.*member)>;
          if constexpr (std::is_same_v<T, bool>) {
            command.add_flag(flag, fuzz.*member, help);
          } else {
            CLI::Option* option = command.add_option(flag, fuzz.*member, help);
            if constexpr (std::is_arithmetic_v<T>) {
              option->capture_default_str();
              if (entry.most) option->check(CLI::Range(T{1}, static_cast<T>(entry.most)));
            }
          }
        },
        entry.member);
  }
}

}  // namespace

Runner AddFuzzCommand(CLI::App& app) {
  auto o = std::make_shared<FuzzCommandOptions>();
  auto* fuzz = app.add_subcommand(
      "fuzz",
      "Property-based run against an external candidate: generated cases go to CMD over the exec protocol (JSON "
      "Lines on its stdin and stdout), every answer is checked against the oracle, the first failure is shrunk to "
      "a minimal counterexample and printed with a command that replays it (exit 0 all passed, 1 a failure, 2 "
      "unusable input)");
  fuzz->footer(kFooter);
  fuzz->add_option("--exec", o->job.exec,
                   "the command that runs the candidate's packer (via /bin/sh -c); required unless --exec-reducer, "
                   "--exec-consumer or --exec-value-consumer is given");
  AddFuzzOptionFlags(*fuzz, o->job.fuzz);
  o->cases_option = fuzz->get_option("--cases");
  fuzz->add_option("--timeout", o->job.timeout, "seconds the candidate has for one answer")->capture_default_str();
  fuzz->add_option("--format", o->format, "text (for people) or json (for machines)")->capture_default_str();
  fuzz->add_option("--name", o->job.name, "the candidate's name in reports and regression files (default: from CMD)");
  return [o, fuzz] { return *fuzz ? RunFuzz(*o) : -1; };
}

}  // namespace packoracle::cli
