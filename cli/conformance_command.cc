// packoracle conformance: finds the Python the package lives in and runs `python -m packoracle.conformance`
// there with the same arguments.
#include "conformance_command.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace packoracle::cli {
namespace {

// PACKORACLE_PYTHON if set; else the python3 next to this executable (pip installs the command into the
// environment's scripts folder, beside its interpreter); else python3 on PATH.
std::string PythonFor(const char* argv0) {
  if (const char* env = std::getenv("PACKORACLE_PYTHON"); env != nullptr && *env != '\0') return env;
  std::error_code error;
  const auto self = std::filesystem::canonical("/proc/self/exe", error);
  for (const auto& dir : {std::filesystem::path(argv0).parent_path(), self.parent_path()}) {
    const auto candidate = dir / "python3";
    if (!dir.empty() && std::filesystem::exists(candidate, error)) return candidate.string();
  }
  return "python3";
}

int RunConformance(const char* argv0, const std::vector<std::string>& args) {
  const std::string python = PythonFor(argv0);
  std::vector<std::string> command = {python, "-m", "packoracle.conformance"};
  command.insert(command.end(), args.begin(), args.end());
  std::vector<char*> raw;
  for (auto& a : command) raw.push_back(a.data());
  raw.push_back(nullptr);
  std::cout.flush();
  execvp(raw[0], raw.data());
  std::cerr << "packoracle conformance: cannot run " << python << " (" << std::strerror(errno)
            << "): the adapters are Python; install the package (pip install .) or set PACKORACLE_PYTHON\n";
  return 2;
}

}  // namespace

Runner AddConformanceCommand(CLI::App& app, const char* argv0) {
  auto* cmd = app.add_subcommand(
      "conformance",
      "Run the kit against the real libraries (transformers, TRL, torchtune, megatron-core, ...) installed in "
      "the package's Python and write the conformance matrix; every option is the Python module's (see "
      "`packoracle conformance --help`).");
  cmd->prefix_command();  // everything after the subcommand, --help included, is the module's
  cmd->set_help_flag();
  return [cmd, argv0] {
    if (!*cmd) return -1;
    return RunConformance(argv0, cmd->remaining());
  };
}

}  // namespace packoracle::cli
