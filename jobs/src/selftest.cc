// `packoracle selftest` (selftest.h): each candidate verified, its verdict against the one expected, and
// the table and counterexample the command prints.
#include "packoracle/jobs/selftest.h"

#include <chrono>
#include <sstream>

#include <nlohmann/json.hpp>

#include "packoracle/fastcheck/case_check.h"
#include "packoracle/jobs/generation_json.h"
#include "packoracle/properties/regression.h"
#include "printf.h"

namespace packoracle::jobs {
namespace {

using Json = nlohmann::ordered_json;

bool Selected(const SelftestCandidate& c, const std::string& only) {
  return only.empty() || c.id.find(only) != std::string::npos || c.name.find(only) != std::string::npos;
}

SelftestRow RunOne(const SelftestCandidate& c, const SelftestOptions& o) {
  Candidate candidate = c.make();
  VerifyOptions options;
  options.cases = o.cases;
  options.seed = o.seed;
  options.collect_stats = o.stats;
  // Real sizes (the `large` profile reaches them; the bundled size bugs need them), checked on the fast
  // verifier first as fuzz does (same verdicts; the oracle reports every failure).
  options.max_row_length = kSelftestMaxRowLength;
  options.max_documents = kSelftestMaxDocuments;
  options.check_case = [](Candidate& checked, const PackRequest& r, const CheckOptions& check) {
    return fastcheck::CheckCaseFast(checked, r, check);
  };
  options.reproduce_command = "packoracle selftest --only " + c.id + " --seed " + std::to_string(o.seed);
  const auto start = std::chrono::steady_clock::now();
  VerifyReport report = Verify(candidate, options);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const bool ok = c.expected ? (!report.passed && report.broken() == c.expected) : report.passed;
  if (!o.save_regressions.empty() && !report.passed) SaveRegression(o.save_regressions, c.id, report);
  return {c, std::move(report), ms, ok};
}

// The row whose report is printed in full: a surprise if there is one (a person must see it), else the one
// asked for, else the first caught bug.
const SelftestRow* Shown(const SelftestResult& r) {
  const SelftestRow* shown = nullptr;
  for (const auto& row : r.rows) {
    if (row.candidate.id == r.options.show || row.candidate.name == r.options.show) shown = &row;
  }
  for (const auto& row : r.rows) {
    if (!shown && !row.report.passed) shown = &row;
  }
  for (const auto& row : r.rows)
    if (!row.as_expected && !row.report.passed) shown = &row;
  return shown;
}

void RenderTable(const SelftestResult& r, std::ostream& out) {
  out << Printf("packoracle selftest: the kit against its %zu bundled candidates (%d cases each, seed %llu)\n\n",
                r.rows.size(), r.options.cases, static_cast<unsigned long long>(r.options.seed));
  out << Printf("  %-46s %-12s %-8s %-12s %6s %5s %6s %9s\n", "candidate", "expected", "verdict", "invariant", "cases",
                "docs", "tokens", "time");
  for (const auto& row : r.rows) {
    const SelftestCandidate& c = row.candidate;
    const VerifyReport& report = row.report;
    const bool reference = c.id.rfind("REF-", 0) == 0;
    const std::string label = reference ? c.id : c.id + " " + c.name;
    const std::string expected = c.expected ? Name(*c.expected) : "pass";
    std::string verdict = report.passed ? "pass" : "caught";
    if (!row.as_expected) verdict = c.expected ? (report.passed ? "MISSED" : "WRONG") : "FAILED";
    const std::string invariant = report.broken() ? Name(*report.broken()) : "-";
    const int cases = report.passed ? report.cases_run : report.cases_to_failure;
    const std::string docs = report.passed ? "-" : std::to_string(report.counterexample_documents());
    const std::string tokens = report.passed ? "-" : std::to_string(report.counterexample_tokens());
    out << Printf("  %-46.46s %-12s %-8s %-12s %6d %5s %6s %6.1f ms\n", label.c_str(), expected.c_str(),
                  verdict.c_str(), invariant.c_str(), cases, docs.c_str(), tokens.c_str(), row.ms);
  }
  out << Printf("\n  %d as expected, %d not\n", r.as_expected(), static_cast<int>(r.rows.size()) - r.as_expected());
}

// Correct producers declaring another objective than the global token mean are shown what it costs.
void RenderGaps(const SelftestResult& r, std::ostream& out) {
  bool header = false;
  for (const auto& row : r.rows) {
    if (!row.report.passed || !row.as_expected || !row.report.largest_gap) continue;
    if (!header) out << "\n  Declared objectives other than the global token mean (the price of the formula, not a bug):\n";
    header = true;
    out << Printf("    %-28s %s\n", row.candidate.id.c_str(), DescribeGap(row.report).c_str());
  }
}

void RenderSurprises(const SelftestResult& r, std::ostream& out) {
  for (const auto& row : r.rows) {
    if (row.as_expected) continue;
    const SelftestCandidate& c = row.candidate;
    out << "\n" << c.id << " did not behave as expected: "
        << (c.expected ? std::string("it should be caught by ") + Name(*c.expected) : std::string("it should pass"))
        << (row.report.passed ? ", but it passed" : std::string(", but ") + Name(*row.report.broken()) + " broke") << "\n";
  }
}

}  // namespace

int SelftestResult::as_expected() const {
  int good = 0;
  for (const auto& row : rows) good += row.as_expected ? 1 : 0;
  return good;
}

SelftestResult RunSelftest(const std::vector<SelftestCandidate>& candidates, const SelftestOptions& options) {
  SelftestResult result;
  result.options = options;
  for (const auto& c : candidates)
    if (Selected(c, options.only)) result.rows.push_back(RunOne(c, options));
  for (const auto& row : result.rows)
    if (row.report.generated) {
      (result.generated ? *result.generated : result.generated.emplace()).Merge(*row.report.generated);
    }
  result.exit_code = result.as_expected() == static_cast<int>(result.rows.size()) ? 0 : 1;
  return result;
}

std::string RenderSelftestText(const SelftestResult& r) {
  std::ostringstream out;
  RenderTable(r, out);
  RenderGaps(r, out);
  const SelftestRow* shown = Shown(r);
  if (shown && !shown->report.passed) {
    out << "\nOne counterexample in full (" << shown->candidate.id << ", " << shown->candidate.source << "):\n\n"
        << shown->report.text;
  }
  RenderSurprises(r, out);
  if (r.generated) out << "\n" << RenderGenerationStats(*r.generated);
  return out.str();
}

std::string RenderSelftestJson(const SelftestResult& r) {
  Json out = Json::array();
  for (const auto& row : r.rows) {
    const SelftestCandidate& c = row.candidate;
    const VerifyReport& report = row.report;
    Json j;
    j["id"] = c.id;
    j["name"] = c.name;
    j["expected"] = c.expected ? Json(Name(*c.expected)) : Json("pass");
    j["verdict"] = report.passed ? "pass" : "caught";
    j["invariant"] = report.broken() ? Json(Name(*report.broken())) : Json(nullptr);
    j["as_expected"] = row.as_expected;
    j["cases"] = report.passed ? report.cases_run : report.cases_to_failure;
    j["documents"] = report.counterexample_documents();
    j["tokens"] = report.counterexample_tokens();
    j["ms"] = row.ms;
    j["reproduce"] = report.reproduce;
    if (report.passed && report.largest_gap) j["objective_gap"] = DescribeGap(report);
    if (report.generated) j["generated"] = GenerationStatsJson(*report.generated);
    out.push_back(j);
  }
  return out.dump(2) + "\n";
}

}  // namespace packoracle::jobs
