#include "packoracle/properties/regression.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include "packoracle/interchange/request_json.h"
#include "packoracle/oracle/error.h"

namespace packoracle {
namespace {

namespace fs = std::filesystem;

std::string FileSafe(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '-';
  return out;
}

// The options a replay must repeat (a loss reducer's schedule and selection), written only where they are not
// at their defaults.
nlohmann::ordered_json SavedCheck(const CheckOptions& check) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  if (check.optimizer_steps != 1) out["optimizer_steps"] = check.optimizer_steps;
  if (check.selection.active()) out["select_top_fraction"] = check.selection.top_fraction;
  return out;
}

CheckOptions LoadedCheck(const nlohmann::json& j, const std::string& path) {
  CheckOptions check;
  if (!j.is_object()) throw InputError(path + ": field 'check' is not an object: " + j.dump());
  for (const auto& [key, value] : j.items()) {
    if (key == "optimizer_steps" && value.is_number_integer() && value.get<std::int64_t>() >= 1) {
      check.optimizer_steps = value.get<std::int64_t>();
    } else if (key == "select_top_fraction" && value.is_number() && value.get<double>() > 0 &&
               value.get<double>() <= 1) {
      check.selection.top_fraction = value.get<double>();
    } else {
      throw InputError(path + ": field 'check' holds " + key + " = " + value.dump() +
                       " (it takes optimizer_steps, an integer >= 1, and select_top_fraction, in (0, 1])");
    }
  }
  return check;
}

}  // namespace

std::string SaveRegression(const std::string& directory, const std::string& candidate, const VerifyReport& report,
                           const CheckOptions& check) {
  if (report.passed || !report.counterexample || !report.broken()) {
    throw InputError("SaveRegression: the report of '" + candidate + "' holds no failure to save");
  }
  nlohmann::ordered_json j;
  j["schema"] = "packoracle-regression";
  j["version"] = 1;
  j["kit_version"] = "0.1.0";
  j["candidate"] = candidate;
  j["invariant"] = Name(*report.broken());
  j["reproduce"] = report.reproduce;
  j["sentence"] = report.failure->violations.front().sentence;
  j["request"] = RequestToJson(*report.counterexample);
  if (auto saved = SavedCheck(check); !saved.empty()) j["check"] = std::move(saved);
  const std::string body = j.dump(1);
  const auto hash = std::hash<std::string>{}(RequestToJson(*report.counterexample).dump()) % 0xFFFFFF;
  char suffix[16];
  std::snprintf(suffix, sizeof(suffix), "%06zx", static_cast<std::size_t>(hash));
  fs::create_directories(directory);
  const fs::path path = fs::path(directory) / (FileSafe(candidate) + "-" + Name(*report.broken()) + "-" + suffix + ".json");
  std::ofstream out(path);
  if (!out) throw InputError("cannot write " + path.string());
  out << body << "\n";
  return path.string();
}

Regression LoadRegression(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError("cannot open " + path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {  // out_of_range too: a number beyond double
    throw InputError(path + ": not JSON: " + e.what());
  }
  auto field = [&](const char* name) -> const nlohmann::json& {
    if (!j.is_object() || !j.contains(name)) throw InputError(path + ": field '" + std::string(name) + "' is missing");
    return j.at(name);
  };
  if (field("schema") != "packoracle-regression") throw InputError(path + ": field 'schema' is not packoracle-regression");
  Regression r;
  r.path = path;
  r.candidate = field("candidate").get<std::string>();
  const auto invariant = ParseInvariant(field("invariant").get<std::string>());
  if (!invariant) throw InputError(path + ": field 'invariant' names no invariant: " + field("invariant").dump());
  r.invariant = *invariant;
  r.reproduce = j.value("reproduce", "");
  r.sentence = j.value("sentence", "");
  r.request = RequestFromJson(field("request"), path + ": request");
  if (j.contains("check")) r.check = LoadedCheck(j.at("check"), path);
  return r;
}

std::vector<Regression> LoadRegressions(const std::string& directory) {
  std::vector<std::string> paths;
  if (fs::is_directory(directory)) {
    for (const auto& entry : fs::directory_iterator(directory))
      if (entry.path().extension() == ".json") paths.push_back(entry.path().string());
  }
  std::sort(paths.begin(), paths.end());
  std::vector<Regression> out;
  for (const auto& p : paths) out.push_back(LoadRegression(p));
  return out;
}

}  // namespace packoracle
