// Saved counterexamples (fixtures/regressions/): every failure found can be written as a file and replayed
// by a test suite forever after (FuzzTest's corpus replay). A file is one JSON object:
//   {"schema":"packoracle-regression","version":1,"kit_version":"0.1.0","candidate":"TG-02",
//    "invariant":"targets","reproduce":"v1:...","sentence":"...","request":{exec protocol request}}
// and, only where the run checked a loss reducer against a schedule or a selection (so that every file written
// before them is unchanged), "check":{"optimizer_steps":3,"select_top_fraction":0.2}: the case alone does not
// say what it was checked against, and a replay without them would check another objective.
#pragma once

#include <string>
#include <vector>

#include "packoracle/properties/verify.h"

namespace packoracle {

struct Regression {
  std::string path;
  std::string candidate;  // the candidate's name or bundled id
  Invariant invariant = Invariant::kShape;
  std::string reproduce;
  std::string sentence;
  PackRequest request;
  CheckOptions check;  // its optimizer_steps and selection as saved; the rest at their defaults
};

// Writes the report's minimal counterexample into `directory` (created if missing) as
// <candidate>-<invariant>-<hash>.json and returns the path; the same case gives the same file name.
// `check`: the run's options; its optimizer_steps and selection are saved where they are not at their defaults.
std::string SaveRegression(const std::string& directory, const std::string& candidate, const VerifyReport& report,
                           const CheckOptions& check = {});

// Reads one file; InputError names the file and the field on any problem.
Regression LoadRegression(const std::string& path);

// Every *.json file of a directory, sorted (none if the directory does not exist).
std::vector<Regression> LoadRegressions(const std::string& directory);

}  // namespace packoracle
