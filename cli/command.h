// The packoracle command line is one CLI11 app; each larger command lives in a file of its own and adds its
// subcommand here. A command returns the function that runs it once the command line is parsed: it returns
// the process's exit code (DESIGN §7: 0 clean, 1 violations, 2 unusable input), or -1 when its subcommand
// was not the one given.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace packoracle::cli {

using Runner = std::function<int()>;

}  // namespace packoracle::cli
