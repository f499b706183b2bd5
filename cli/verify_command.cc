// packoracle verify: the command line of jobs::VerifyFiles.
#include "verify_command.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "packoracle/jobs/verify.h"
#include "packoracle/jobs/verify_html.h"
#include "packoracle/oracle.h"

namespace packoracle::cli {
namespace {

struct VerifyCommandOptions {
  jobs::VerifyOptions job;
  std::string format = "text";
  std::string html;  // --html OUT: also write the audit as one page
};

// Progress for people watching a long audit: MiB read, steps, MiB/s on one stderr line, redrawn a few times
// a second once the audit has run a second. Only on a terminal: a log or a pipe gets nothing extra.
class ProgressLine {
 public:
  void Show(const jobs::VerifyProgress& p) {
    const auto now = Clock::now();
    if (now - start_ < after_ || (shown_ && now - last_ < std::chrono::milliseconds(250))) return;
    last_ = now;
    shown_ = true;
    const double mib = static_cast<double>(p.bytes_read) / (1 << 20);
    const double seconds = std::chrono::duration<double>(now - start_).count();
    std::fprintf(stderr, "\rpackoracle verify: %.0f MiB read, %lld steps, %.0f MiB/s ", mib,
                 static_cast<long long>(p.steps), mib / seconds);
    std::fflush(stderr);
  }
  // Wipes the line, so that what follows on the terminal starts clean.
  void Clear() {
    if (shown_) std::fprintf(stderr, "\r%*s\r", 72, "");
    shown_ = false;
  }

 private:
  using Clock = std::chrono::steady_clock;
  // PACKORACLE_PROGRESS_AFTER (seconds) is for the test that looks at the line on a pty (cli/test/verify_jobs.py).
  static Clock::duration After() {
    const char* text = std::getenv("PACKORACLE_PROGRESS_AFTER");
    const double seconds = text ? std::atof(text) : 1.0;
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }
  Clock::time_point start_ = Clock::now(), last_;
  Clock::duration after_ = After();
  bool shown_ = false;
};

int RunVerify(const VerifyCommandOptions& options) {
  ProgressLine progress;
  jobs::VerifyOptions job = options.job;
  if (::isatty(STDERR_FILENO)) job.progress = [&progress](const jobs::VerifyProgress& p) { progress.Show(p); };
  try {
    const jobs::AuditResult result = jobs::VerifyFiles(job);
    progress.Clear();
    std::cout << (options.format == "json" ? jobs::RenderAuditJson(result)
                                           : jobs::RenderAuditText(result, options.job.max_violations));
    // The page comes after the report, which it leaves as it is; a page that cannot be written is exit 2.
    if (!options.html.empty()) jobs::WriteAuditHtml(options.html, jobs::RenderAuditHtml(result));
    return result.exit_code;
  } catch (const InputError& e) {
    progress.Clear();
    std::cerr << "packoracle verify: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace

Runner AddVerifyCommand(CLI::App& app) {
  auto options = std::make_shared<VerifyCommandOptions>();
  jobs::VerifyOptions& job = options->job;
  auto* cmd = app.add_subcommand(
      "verify",
      "Audit packed-batch dumps (JSON Lines, DESIGN §5) against the policy their header declares, or the one "
      "required with --preset/--policy. Exit 0 clean, 1 violations, 2 unusable input.");
  cmd->add_option("files", job.files, "packed-batch .jsonl files (one per rank, or ranks mixed)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--preset", job.preset, "require this preset's policy (differences from the declared one are listed)");
  cmd->add_option("--policy", job.policy_file, "require the policy of this JSON file (a preset and/or keys)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--row-length", job.row_length, "the row length L (default: the longest row of each step)")
      ->check(CLI::Range(std::int64_t{1}, kMaxRowLength));
  cmd->add_option("--format", options->format, "text (for people) or json (the same facts for machines)")
      ->check(CLI::IsMember({"text", "json"}));
  cmd->add_option("--html", options->html,
                  "also write the audit as one self-contained HTML page: the step table, every violation with "
                  "its drawn row and picture, linked both ways");
  cmd->add_option("--max-violations", job.max_violations, "violations printed in full (all are counted)");
  cmd->add_flag("--oracle", job.oracle,
                "the slow path only: read with nlohmann-json and check every step with the oracle (CheckCase); by "
                "default a fast verifier checks each step and the oracle reports the steps it does not pass");
  cmd->add_option("--summary", job.summary,
                  "also write a per-rank summary (JSON: per step and rank the valid targets, loss sums, reported "
                  "denominators and scopes) for `packoracle merge`");
  cmd->add_flag("--partial", job.partial,
                "the dump stops mid-run: documents left unfinished at its end are not coverage violations");
  job.jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cmd->add_option("--jobs", job.jobs,
                  "threads reading the dumps: parse ahead while the steps are checked, one pool for all the "
                  "files (default: the cores available; 1: one thread; the report is the same)")
      ->check(CLI::Range(1, 256));
  cmd->add_flag("--decoder", job.decoder,
                "also check packing_invariance: the tiny decoder on every row and every document alone (slow on "
                "long rows)");
  return [cmd, options] {
    if (!*cmd) return -1;
    return RunVerify(*options);
  };
}

}  // namespace packoracle::cli
