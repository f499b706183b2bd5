// packoracle conformance: the kit against the real libraries (packoracle.adapters). The adapters are Python
// (they drive transformers, TRL, torchtune, ...), so this command hands its arguments to
// `python -m packoracle.conformance`, the Python interpreter the package is installed in.
#pragma once

#include "command.h"

namespace packoracle::cli {

// Exit codes are the Python module's: 0 every verdict explained, 1 unexplained or changed, 2 bad arguments
// (and 2 when no Python with the package is found).
Runner AddConformanceCommand(CLI::App& app, const char* argv0);

}  // namespace packoracle::cli
