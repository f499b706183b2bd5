// packoracle verify FILE... [--preset P | --policy F]: audits packed-batch dumps (DESIGN §5, §7); the audit
// itself is jobs::VerifyFiles (packoracle/jobs/verify.h).
#pragma once

#include "command.h"

namespace packoracle::cli {

// Exit codes: 0 clean, 1 violations, 2 unusable input (the message names the file, line, record and field).
Runner AddVerifyCommand(CLI::App& app);

}  // namespace packoracle::cli
