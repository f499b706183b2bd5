// The audit's result as `packoracle verify` prints it (verify.h). The tests, the README and scripts read
// this text: change it only on purpose.
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "packoracle/interchange/policy_json.h"
#include "packoracle/jobs/verify.h"

namespace packoracle::jobs {
namespace {

using Json = nlohmann::ordered_json;

std::string PresetLabel(const Policy& policy) { return policy.preset.empty() ? "(custom)" : policy.preset; }

void RenderViolation(const AuditViolation& v, std::ostream& out) {
  out << "  " << Name(v.invariant) << "  " << v.file << ":" << v.line << "  step " << v.step;
  if (v.micro_step >= 0) out << ", micro_step " << v.micro_step << ", rank " << v.rank;
  if (v.row >= 0) out << ", row " << v.row;
  if (v.slot >= 0) out << ", slot " << v.slot;
  out << "\n    " << v.message << "\n";
  if (!v.expected.empty() || !v.actual.empty()) out << "    expected " << v.expected << ", actual " << v.actual << "\n";
  if (!v.drawing.empty()) out << v.drawing;
}

void RenderStepTable(const std::vector<StepSummary>& steps, std::ostream& out) {
  out << "  step  micro-batches  rows  valid targets  reported denominators      declared objective  global token mean\n";
  for (const auto& s : steps) {
    std::string dens;
    for (double d : s.reported_denominators) dens += (dens.empty() ? "" : " ") + std::to_string(static_cast<long long>(d));
    char line[256];
    std::snprintf(line, sizeof(line), "  %4lld  %13lld  %4lld  %13.0f  %-24.24s  %18s  %17s\n", static_cast<long long>(s.step),
                  static_cast<long long>(s.microbatches), static_cast<long long>(s.rows), s.valid_targets,
                  dens.empty() ? "-" : dens.c_str(),
                  s.declared_objective ? std::to_string(*s.declared_objective).c_str() : "-",
                  s.token_mean ? std::to_string(*s.token_mean).c_str() : "-");
    out << line;
  }
}

}  // namespace

std::string RenderAuditText(const AuditResult& r, int max_violations) {
  std::ostringstream out;
  out << "packoracle verify: " << r.files.size() << " file(s), " << r.steps.size() << " step(s), " << r.totals.rows
      << " rows\n";
  out << "  policy    " << PresetLabel(r.declared_policy) << " (declared)";
  if (r.required_policy != r.declared_policy) out << ", audited against " << PresetLabel(r.required_policy);
  out << "\n";
  for (const auto& d : r.policy_differences) out << "  differs   " << d << "\n";
  out << "\n";
  int shown = 0;
  for (const auto& v : r.violations) {
    if (shown++ >= max_violations) break;
    RenderViolation(v, out);
  }
  if (static_cast<int>(r.violations.size()) > max_violations) {
    out << "  … and " << r.violations.size() - static_cast<std::size_t>(max_violations)
        << " more (--max-violations to see them)\n";
  }
  RenderStepTable(r.steps, out);
  char totals[200];
  std::snprintf(totals, sizeof(totals), "\n  %lld tokens in %lld slots: utilization %.1f%%; %.0f valid targets\n",
                static_cast<long long>(r.totals.tokens), static_cast<long long>(r.totals.slots),
                100 * r.totals.utilization, r.totals.valid_targets);
  out << totals;
  if (r.clean()) {
    out << "  verdict: clean\n";
  } else {
    out << "  verdict: " << r.violations.size() << " violation(s):";
    for (const auto& [name, n] : r.ViolationsPerInvariant()) out << " " << name << " " << n;
    out << "\n";
  }
  return out.str();
}

std::string RenderAuditJson(const AuditResult& r) {
  Json j;
  j["verdict"] = r.clean() ? "clean" : "violations";
  j["files"] = r.files;
  j["declared_policy"] = PolicyToJson(r.declared_policy);
  j["required_policy"] = PolicyToJson(r.required_policy);
  j["policy_differences"] = r.policy_differences;
  j["violations_per_invariant"] = r.ViolationsPerInvariant();
  j["violations"] = Json::array();
  for (const auto& v : r.violations) {
    j["violations"].push_back({{"file", v.file}, {"line", v.line}, {"step", v.step}, {"micro_step", v.micro_step},
                               {"rank", v.rank}, {"row", v.row}, {"slot", v.slot}, {"invariant", Name(v.invariant)},
                               {"message", v.message}, {"expected", v.expected}, {"actual", v.actual}});
  }
  j["steps"] = Json::array();
  for (const auto& s : r.steps) {
    Json step = {{"step", s.step}, {"microbatches", s.microbatches}, {"rows", s.rows}, {"slots", s.slots},
                 {"tokens", s.tokens}, {"valid_targets", s.valid_targets},
                 {"reported_denominators", s.reported_denominators}};
    step["declared_objective"] = s.declared_objective ? Json(*s.declared_objective) : Json(nullptr);
    step["global_token_mean"] = s.token_mean ? Json(*s.token_mean) : Json(nullptr);
    j["steps"].push_back(step);
  }
  const AuditTotals& t = r.totals;
  j["totals"] = {{"records", t.records}, {"rows", t.rows}, {"slots", t.slots}, {"tokens", t.tokens},
                 {"valid_targets", t.valid_targets}, {"utilization", t.utilization}, {"documents", t.documents}};
  return j.dump(2) + "\n";
}

}  // namespace packoracle::jobs
