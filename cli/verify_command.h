// packoracle verify FILE... [--preset P | --policy F]: audits packed-batch dumps (DESIGN §5, §7).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "command.h"

namespace packoracle::cli {

struct VerifyCommandOptions {
  std::vector<std::string> files;
  std::string preset;        // required policy: a preset name ...
  std::string policy_file;   // ... or a JSON policy file (a preset and/or keys)
  std::int64_t row_length = 0;  // L; 0: the longest row of each step
  std::string format = "text";
  int max_violations = 20;   // violations printed in full (all are counted)
  bool partial = false;      // the dump stops mid-run: documents unfinished at its end are not violations
  bool decoder = false;      // also run packing_invariance (the tiny decoder: O(L²) per row, off for speed)
  bool oracle = false;       // the slow path only: nlohmann-json reader, CheckCase on every step
  std::string summary;       // write a per-rank summary (JSON) here, for `packoracle merge` (summary.h)
};

// Exit codes: 0 clean, 1 violations, 2 unusable input (the message names the file, line, record and field).
int RunVerify(const VerifyCommandOptions& options, std::ostream& out, std::ostream& err);

Runner AddVerifyCommand(CLI::App& app);

}  // namespace packoracle::cli
