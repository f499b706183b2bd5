// The merge's result as `packoracle merge` prints it (merge.h).
#include <cstdio>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "merge_format.h"
#include "packoracle/jobs/merge.h"

namespace packoracle::jobs {
namespace {

using merge_format::Number;
using merge_format::RankList;
using Json = nlohmann::ordered_json;

}  // namespace

std::string RenderMergeText(const MergeResult& r) {
  std::ostringstream out;
  out << "packoracle merge: " << r.summaries.size() << " summar" << (r.summaries.size() == 1 ? "y" : "ies") << ", "
      << r.steps.size() << " step(s), dp_world_size " << r.dp_world_size << "\n\n";
  for (const auto& v : r.violations) {
    out << "  denominator  ";
    if (!v.file.empty()) out << v.file << (v.line > 0 ? ":" + std::to_string(v.line) : "") << "  ";
    out << "step " << v.step << "\n    " << v.message << "\n";
    if (!v.expected.empty() || !v.actual.empty()) out << "    expected " << v.expected << ", actual " << v.actual << "\n";
  }
  if (!r.violations.empty()) out << "\n";
  out << "  step  ranks           valid targets (all ranks)  global denominators\n";
  for (const auto& l : r.steps) {
    std::string dens;
    std::set<double> distinct(l.global_denominators.begin(), l.global_denominators.end());
    for (double d : distinct) dens += (dens.empty() ? "" : " ") + Number(d);
    char text[256];
    std::snprintf(text, sizeof(text), "  %4lld  %-14.14s  %25s  %s\n", static_cast<long long>(l.step),
                  RankList(l.ranks).c_str(), l.valid_targets ? Number(*l.valid_targets).c_str() : "-",
                  dens.empty() ? "(none reported)" : dens.c_str());
    out << text;
  }
  out << "\n  verdict: " << (r.violations.empty() ? "consistent" : std::to_string(r.violations.size()) + " violation(s)")
      << "\n";
  return out.str();
}

std::string RenderMergeJson(const MergeResult& r) {
  Json j;
  j["verdict"] = r.violations.empty() ? "consistent" : "violations";
  j["summaries"] = r.summaries;
  j["dp_world_size"] = r.dp_world_size;
  j["violations"] = Json::array();
  for (const auto& v : r.violations) {
    j["violations"].push_back({{"step", v.step}, {"rank", v.rank}, {"micro_step", v.micro_step}, {"file", v.file},
                               {"line", v.line}, {"invariant", "denominator"}, {"message", v.message},
                               {"expected", v.expected}, {"actual", v.actual}});
  }
  j["steps"] = Json::array();
  for (const auto& l : r.steps) {
    j["steps"].push_back({{"step", l.step}, {"ranks", l.ranks},
                          {"valid_targets", l.valid_targets ? Json(*l.valid_targets) : Json(nullptr)},
                          {"global_denominators", l.global_denominators}, {"checked", l.checked}});
  }
  return j.dump(2) + "\n";
}

}  // namespace packoracle::jobs
