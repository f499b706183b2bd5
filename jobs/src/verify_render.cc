// The audit's result as `packoracle verify` prints it (verify.h), and the row drawn under a violation. The
// tests, the README and scripts read this text: change it only on purpose.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "packoracle/interchange/policy_json.h"
#include "packoracle/jobs/verify.h"
#include "verify_internal.h"

namespace packoracle::jobs {
namespace {

using Json = nlohmann::ordered_json;

// 9999000 as "9,999,000": counts of violations not kept run to millions.
std::string Thousands(std::int64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t k = 0; k < digits.size(); ++k) {
    if (k > 0 && (digits.size() - k) % 3 == 0) out += ',';
    out += digits[k];
  }
  return out;
}

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

namespace verify_internal {

std::string DrawViolationRow(const CaseResult& result, std::int64_t flat_row, const Policy& policy) {
  if (!result.oracle || flat_row < 0 || flat_row >= static_cast<std::int64_t>(result.oracle->rows.size())) return "";
  const OracleRow& want = result.oracle->rows[static_cast<std::size_t>(flat_row)];
  const CandidateRow* got = nullptr;
  std::int64_t k = 0;
  for (const auto& mb : result.packed->microbatches)
    for (const auto& row : mb.rows)
      if (k++ == flat_row) got = &row;
  std::vector<DecodedTarget> decoded;
  try {
    decoded = DecodeTargets(got->labels, got->loss_mask ? &*got->loss_mask : nullptr, policy);
  } catch (const InputError&) {
  }
  std::ostringstream os;
  const std::size_t n = std::min<std::size_t>(want.slots.size(), 32);
  auto cell = [](const std::string& s) { return std::string(s.size() < 5 ? 5 - s.size() : 1, ' ') + s; };
  os << "      slot     ";
  for (std::size_t i = 0; i < n; ++i) os << cell(std::to_string(i));
  os << "\n      input    ";
  for (std::size_t i = 0; i < n; ++i) os << cell(std::to_string(got->input_ids[i]));
  os << "\n      document ";
  for (std::size_t i = 0; i < n; ++i) {
    const Slot& s = want.slots[i];
    os << cell(s.is_pad() ? "." : result.oracle->documents[static_cast<std::size_t>(s.doc)].uid);
  }
  os << "\n      target   ";
  for (std::size_t i = 0; i < n; ++i) {
    const auto& p = want.predictions[i];
    os << cell(p.weight > 0 ? std::to_string(p.target) : "-");
  }
  if (decoded.size() == want.predictions.size()) {
    os << "\n      dumped   ";
    for (std::size_t i = 0; i < n; ++i) {
      const auto& p = want.predictions[i];
      const bool bad = decoded[i].weight != p.weight || (p.weight > 0 && decoded[i].target != p.target);
      os << cell((decoded[i].weight > 0 ? std::to_string(decoded[i].target) : "-") + (bad ? "!" : ""));
    }
  }
  if (want.slots.size() > n) os << "  …";
  os << "\n";
  return os.str();
}

}  // namespace verify_internal

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
  const std::int64_t not_shown = r.ViolationCount() - std::min<std::int64_t>(max_violations, static_cast<std::int64_t>(r.violations.size()));
  if (not_shown > 0) {
    out << "  … and " << Thousands(not_shown) << " more";
    if (!r.not_kept.empty()) {
      out << " (the first " << kMaxViolationsKept << " kept in full, the rest counted";
      out << (static_cast<int>(r.violations.size()) > max_violations ? "; --max-violations to see the kept ones)" : ")");
    } else {
      out << " (--max-violations to see them)";
    }
    out << "\n";
  }
  RenderStepTable(r.steps, out);
  char totals[200];
  std::snprintf(totals, sizeof(totals), "\n  %lld tokens in %lld slots: utilization %.1f%%; %.0f valid targets\n",
                static_cast<long long>(r.totals.tokens), static_cast<long long>(r.totals.slots),
                100 * r.totals.utilization, r.totals.valid_targets);
  out << totals;
  // What the producers' totals did not allow (a count alone is checked as a count): said, never implied.
  for (const auto& n : r.notes)
    out << "  note: " << n.text << " (" << n.steps << " of " << r.steps.size() << " steps)\n";
  if (r.clean()) {
    out << "  verdict: clean\n";
  } else {
    out << "  verdict: " << r.ViolationCount() << " violation(s):";
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
  j["violations_not_kept"] = r.ViolationCount() - static_cast<std::int64_t>(r.violations.size());  // counted only
  j["violations"] = Json::array();
  for (const auto& v : r.violations) {
    j["violations"].push_back({{"file", v.file}, {"line", v.line}, {"step", v.step}, {"micro_step", v.micro_step},
                               {"rank", v.rank}, {"row", v.row}, {"slot", v.slot}, {"invariant", Name(v.invariant)},
                               {"message", v.message}, {"expected", v.expected}, {"actual", v.actual}});
  }
  j["steps"] = Json::array();
  for (const auto& s : r.steps) {
    Json step = {{"step", s.step}, {"microbatches", s.microbatches}, {"rows", s.rows}, {"slots", s.slots},
                 {"tokens", s.tokens}, {"valid_targets", s.valid_targets}, {"counted", s.counted},
                 {"reported_denominators", s.reported_denominators}};
    step["declared_objective"] = s.declared_objective ? Json(*s.declared_objective) : Json(nullptr);
    step["global_token_mean"] = s.token_mean ? Json(*s.token_mean) : Json(nullptr);
    step["notes"] = s.notes;
    j["steps"].push_back(step);
  }
  j["notes"] = Json::array();
  for (const auto& n : r.notes) j["notes"].push_back({{"note", n.text}, {"steps", n.steps}});
  j["ambiguous"] = Json::array();  // invariants not checked: the readings of rows without doc_spans differ on them
  for (const Invariant i : r.ambiguous) j["ambiguous"].push_back(Name(i));
  const AuditTotals& t = r.totals;
  j["totals"] = {{"records", t.records}, {"rows", t.rows}, {"slots", t.slots}, {"tokens", t.tokens},
                 {"valid_targets", t.valid_targets}, {"utilization", t.utilization}, {"documents", t.documents}};
  return j.dump(2) + "\n";
}

}  // namespace packoracle::jobs
