// Named presets: real systems mapped onto the policy (evidence: reference/conventions.md §2–§4).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "packoracle/oracle/policy.h"

namespace packoracle {

struct Preset {
  std::string name;
  std::string system;   // the system and version it describes
  std::string summary;  // one line: what the convention is
  std::string notes;    // where the preset had to decide something the system leaves open
  Policy policy;        // fully resolved, policy.preset == name
};

// All presets, in a stable order (reference first).
const std::vector<Preset>& Presets();

// The preset called `name`; throws InputError naming it and listing the known presets.
const Preset& FindPreset(std::string_view name);

}  // namespace packoracle
