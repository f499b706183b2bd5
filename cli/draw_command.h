// packoracle draw FILE [--row R]: one row drawn on the terminal and as an SVG file; the drawing itself is
// jobs::Draw (packoracle/jobs/draw.h, which describes what is drawn).
#pragma once

#include "command.h"

namespace packoracle::cli {

// Adds the `draw` subcommand to `app`; the returned function, called once the command line is parsed, runs it
// and returns the exit code (0 drawn, 2 unusable input), or -1 when `draw` was not the subcommand given
// (command.h).
Runner AddDrawCommand(CLI::App& app);

}  // namespace packoracle::cli
