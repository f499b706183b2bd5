// packoracle merge: the command line of jobs::MergeSummaryFiles.
#include "merge_command.h"

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "packoracle/jobs/merge.h"
#include "packoracle/oracle/error.h"

namespace packoracle::cli {
namespace {

struct MergeCommandOptions {
  std::vector<std::string> summaries;
  std::string format = "text";
};

int RunMerge(const MergeCommandOptions& options) {
  try {
    const jobs::MergeResult result = jobs::MergeSummaryFiles(options.summaries);
    std::cout << (options.format == "json" ? jobs::RenderMergeJson(result) : jobs::RenderMergeText(result));
    return result.exit_code;
  } catch (const InputError& e) {
    std::cerr << "packoracle merge: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace

Runner AddMergeCommand(CLI::App& app) {
  auto options = std::make_shared<MergeCommandOptions>();
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
    return RunMerge(*options);
  };
}

}  // namespace packoracle::cli
