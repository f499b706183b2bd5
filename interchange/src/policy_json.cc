#include "packoracle/interchange/policy_json.h"

#include <algorithm>

#include "packoracle/oracle/error.h"

namespace packoracle {
namespace {

bool IsPolicyKey(const std::string& key) {
  if (key == "preset") return true;
  for (const auto& [k, value] : PolicyKeyValues(Policy{}))
    if (k == key) return true;
  return false;
}

PolicyValue ToValue(const nlohmann::json& v, const std::string& where, const std::string& key) {
  if (v.is_null()) return nullptr;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_string()) return v.get<std::string>();
  if (!IsPolicyKey(key)) {  // an unknown key is the first thing wrong with it: SetPolicyKey says so, listing the keys
    Policy scratch;
    SetPolicyKey(scratch, key, nullptr);
  }
  throw InputError(where + ": policy key '" + key + "' has a " + v.type_name() +
                   " value; expected a string, an integer, a boolean or null");
}

void SetKey(Policy& policy, const std::string& key, const nlohmann::json& value, const std::string& where) {
  try {
    SetPolicyKey(policy, key, ToValue(value, where, key));
  } catch (const InputError& e) {
    const std::string message = e.what();
    if (message.rfind(where, 0) == 0) throw;
    throw InputError(where + ": " + message);
  }
}

// A key given as null where it means nothing takes its default value, the one a policy built key by key has.
void SetNullKeyToDefault(Policy& policy, const std::string& key) {
  for (const auto& [k, value] : PolicyKeyValues(Policy{}))
    if (k == key) SetPolicyKey(policy, key, value);
}

}  // namespace

Policy ApplyPolicyOverrides(Policy policy, const nlohmann::json& overrides, const std::string& where) {
  if (!overrides.is_object()) {
    throw InputError(where + ": a policy must be a JSON object, got " + std::string(overrides.type_name()));
  }
  if (auto preset = overrides.find("preset"); preset != overrides.end() && !preset->is_null()) {
    SetKey(policy, "preset", *preset, where);
  }
  // A null for a key that only some policies read is decided once every key is set: whether it means
  // something depends on the others (padding: none makes pad_id meaningless), in whatever order they come.
  std::vector<std::string> nulled;
  const auto& nullable = KeysNullWhenMeaningless();
  for (const auto& [key, value] : overrides.items()) {
    if (key == "preset") continue;
    if (value.is_null() && std::find(nullable.begin(), nullable.end(), key) != nullable.end()) {
      nulled.push_back(key);
      continue;
    }
    SetKey(policy, key, value, where);
  }
  for (const auto& key : nulled) {
    if (auto why = WhyKeyMatters(policy, key)) {
      throw InputError(where + ": policy key '" + key + "' is null, but " + *why +
                       " (null is accepted only where the rest of the policy makes the key mean nothing)");
    }
    SetNullKeyToDefault(policy, key);
  }
  try {
    ValidatePolicy(policy);
  } catch (const InputError& e) {
    throw InputError(where + ": " + e.what());
  }
  return policy;
}

Policy PolicyFromJson(const nlohmann::json& object, const std::string& where) {
  return ApplyPolicyOverrides(Policy{}, object, where);
}

namespace {
bool AtDefaultAfterVersionOne(const std::string& key, const PolicyValue& value) {
  for (const auto& [later, fallback] : KeysAfterVersionOne())
    if (key == later) return ToString(value) == fallback;
  return false;
}
}  // namespace

nlohmann::ordered_json PolicyToJson(const Policy& policy) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& [key, value] : PolicyKeyValues(policy)) {
    // efficiency and truncate_to came after version 1's keys: each left out at its default, so that every
    // dump, request and preset written before it stays byte for byte the same.
    if (AtDefaultAfterVersionOne(key, value)) continue;
    std::visit([&out, &k = key](const auto& v) { out[k] = v; }, value);
  }
  return out;
}

}  // namespace packoracle
