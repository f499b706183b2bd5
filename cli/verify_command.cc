// packoracle verify: the command line of jobs::VerifyFiles.
#include "verify_command.h"

#include <iostream>
#include <memory>
#include <string>

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

int RunVerify(const VerifyCommandOptions& options) {
  try {
    const jobs::AuditResult result = jobs::VerifyFiles(options.job);
    std::cout << (options.format == "json" ? jobs::RenderAuditJson(result)
                                           : jobs::RenderAuditText(result, options.job.max_violations));
    // The page comes after the report, which it leaves as it is; a page that cannot be written is exit 2.
    if (!options.html.empty()) jobs::WriteAuditHtml(options.html, jobs::RenderAuditHtml(result));
    return result.exit_code;
  } catch (const InputError& e) {
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
  cmd->add_flag("--decoder", job.decoder,
                "also check packing_invariance: the tiny decoder on every row and every document alone (slow on "
                "long rows)");
  return [cmd, options] {
    if (!*cmd) return -1;
    return RunVerify(*options);
  };
}

}  // namespace packoracle::cli
