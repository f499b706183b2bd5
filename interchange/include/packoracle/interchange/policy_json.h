// Policies in JSON (DESIGN.md §3): one flat object; "preset" (if present) is applied first, then every other
// key overrides it. Unknown keys are errors here: a misspelt key would otherwise silently keep the preset's
// value.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "packoracle/oracle/policy.h"

namespace packoracle {

// Parses a policy object. `where` names its place in error messages (e.g. "fixtures/x.json: cases[2].policy").
// Throws InputError naming `where`, the key and what is allowed; the result is validated (ValidatePolicy).
Policy PolicyFromJson(const nlohmann::json& object, const std::string& where);

// Applies the keys of `overrides` (a JSON object) on top of `base`; same errors as PolicyFromJson.
Policy ApplyPolicyOverrides(Policy base, const nlohmann::json& overrides, const std::string& where);

// The fully resolved form: every key present, in canonical order.
nlohmann::ordered_json PolicyToJson(const Policy& policy);

}  // namespace packoracle
