// packoracle: the command-line tool. Each command parses its arguments here (CLI11) and calls the library
// under it, packoracle::jobs (jobs/README.md), which does the work and renders what is printed.
//
//   packoracle lesson            the lesson's worked example: drawn row, targets, the three denominators
//   packoracle presets           the named presets and every key of their policies
//   packoracle presets --format json
//   packoracle invariants        every invariant stated, with a common way to break it
//   packoracle schema            the formats' tables as JSON (policy keys, presets, row fields)
//   packoracle conformance ...   the real libraries' matrix (python -m packoracle.conformance)
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "conformance_command.h"
#include "draw_command.h"
#include "fuzz_command.h"
#include "merge_command.h"
#include "packoracle/jobs/lesson.h"
#include "packoracle/jobs/schema.h"
#include "packoracle/oracle.h"
#include "selftest_command.h"
#include "verify_command.h"

namespace packoracle::cli {
namespace {

constexpr const char* kVersion = "0.1.0";

Runner AddLessonCommand(CLI::App& app) {
  auto* lesson = app.add_subcommand("lesson", "Show the lesson's worked example: drawn row, targets, three denominators");
  return [lesson] {
    if (!*lesson) return -1;
    std::cout << jobs::LessonText();
    return 0;
  };
}

Runner AddPresetsCommand(CLI::App& app) {
  auto format = std::make_shared<std::string>("text");
  auto* presets = app.add_subcommand("presets", "List the presets and every key of their policies");
  presets->add_option("--format", *format, "text (a table for people) or json (for machines)")
      ->check(CLI::IsMember({"text", "json"}));
  return [presets, format] {
    if (!*presets) return -1;
    std::cout << (*format == "json" ? jobs::RenderPresetsJson() : jobs::RenderPresetsText());
    return 0;
  };
}

Runner AddInvariantsCommand(CLI::App& app) {
  auto format = std::make_shared<std::string>("text");
  auto* invariants = app.add_subcommand("invariants", "State every invariant, with a common way to break it");
  invariants->add_option("--format", *format, "text (for people) or markdown (the README's list)")
      ->check(CLI::IsMember({"text", "markdown"}));
  return [invariants, format] {
    if (!*invariants) return -1;
    std::cout << (*format == "markdown" ? jobs::RenderInvariantsMarkdown() : jobs::RenderInvariantsText());
    return 0;
  };
}

Runner AddSchemaCommand(CLI::App& app) {
  auto* schema = app.add_subcommand(
      "schema", "Print the formats' tables as JSON: policy keys and their values, presets, row fields");
  return [schema] {
    if (!*schema) return -1;
    std::cout << jobs::RenderSchemaJson();
    return 0;
  };
}

}  // namespace
}  // namespace packoracle::cli

int main(int argc, char** argv) {
  using namespace packoracle::cli;
  CLI::App app{"packoracle: a correctness kit and reference oracle for sequence packing.\n"
               "The contract: L = Σ m·ℓ / Σ m and A_ij = 1[j <= i]·1[d_j = d_i]; every other policy declares its\n"
               "boundary semantics (see `packoracle presets`)."};
  app.set_version_flag("--version", kVersion);
  app.footer("Every failure names one invariant: " + packoracle::jobs::InvariantNames() +
             ".\n`packoracle invariants` states each, with a common way to break it.");
  app.require_subcommand(1);
  // In the order `packoracle --help` lists them.
  std::vector<Runner> commands = {AddLessonCommand(app),  AddPresetsCommand(app), AddSelftestCommand(app),
                                  AddVerifyCommand(app),  AddFuzzCommand(app),    AddDrawCommand(app),
                                  AddMergeCommand(app),   AddConformanceCommand(app, argv[0]),
                                  AddInvariantsCommand(app),  AddSchemaCommand(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // DESIGN §7: bad arguments are unusable input
  }
  try {
    for (const auto& run : commands) {
      const int code = run();
      if (code >= 0) return code;
    }
  } catch (const packoracle::InputError& e) {
    std::cerr << "packoracle: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
