// packoracle selftest: the kit against its bundled candidates (jobs::RunSelftest, packoracle/jobs/selftest.h,
// with the bugzoo's candidates).
#pragma once

#include "command.h"

namespace packoracle::cli {

// Exit 0 when every candidate behaves as expected, 1 otherwise.
Runner AddSelftestCommand(CLI::App& app);

}  // namespace packoracle::cli
