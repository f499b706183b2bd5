// packoracle: the command-line tool.
//
//   packoracle lesson            the lesson's worked example: drawn row, targets, the three denominators
//   packoracle presets           the named presets and every key of their policies
//   packoracle presets --format json
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "packoracle/bugzoo.h"
#include "packoracle/interchange/policy_json.h"
#include "packoracle/interchange/regression.h"
#include "packoracle/oracle.h"
#include "packoracle/properties/verify.h"
#include "draw_command.h"
#include "fuzz_command.h"
#include "merge_command.h"
#include "verify_command.h"

namespace packoracle {
namespace {

constexpr const char* kVersion = "0.1.0";

std::string Cell(Token v, int width) {
  std::ostringstream os;
  os.width(width);
  os << v;
  return os.str();
}

// Draws one row: tokens, documents, positions, target marks, and the attention grid with '#' allowed.
void DrawRow(const OracleBatch& batch, const OracleRow& row, std::ostream& os) {
  const int w = 4;
  auto line = [&](const std::string& name, auto value_of) {
    os << "  " << name;
    for (std::size_t i = 0; i < row.slots.size(); ++i) os << value_of(i);
    os << "\n";
  };
  line("slot     ", [&](std::size_t i) { return Cell(static_cast<Token>(i), w); });
  line("input    ", [&](std::size_t i) { return Cell(row.input_ids[i], w); });
  line("document ", [&](std::size_t i) {
    const Slot& s = row.slots[i];
    const std::string name = s.is_pad() ? "." : batch.documents[static_cast<std::size_t>(s.doc)].uid;
    return std::string(static_cast<std::size_t>(std::max<int>(0, w - static_cast<int>(name.size()))), ' ') + name;
  });
  line("position ", [&](std::size_t i) {
    return row.position_ids[i] ? Cell(*row.position_ids[i], w) : std::string(static_cast<std::size_t>(w - 1), ' ') + "*";
  });
  line("target   ", [&](std::size_t i) {
    const Prediction& p = row.predictions[i];
    return p.has_target() ? Cell(p.target, w) : std::string(static_cast<std::size_t>(w - 1), ' ') + "-";
  });
  line("counted  ", [&](std::size_t i) {
    const Prediction& p = row.predictions[i];
    std::string mark = p.weight > 0 ? "1" : (p.kind == TargetKind::kBoundary ? "x" : "0");
    return std::string(static_cast<std::size_t>(w - 1), ' ') + mark;
  });
  os << "\n  attention A_ij = 1[j <= i]·1[d_j = d_i]   (# may attend, . masked)\n";
  os << "        key j:";
  for (std::int64_t j = 0; j < row.length(); ++j) os << " " << j % 10;
  os << "\n";
  for (std::int64_t i = 0; i < row.length(); ++i) {
    os << "    query " << Cell(i, 2) << ": ";
    for (std::int64_t j = 0; j < row.length(); ++j) os << (Attends(row, batch.policy, i, j) ? "# " : ". ");
    os << "\n";
  }
}

int RunLesson() {
  // reference/lesson.md: documents [11,12,13] and [21..26] in one pre-shifted row of 8 slots (a 9-token window).
  const std::vector<Document> docs = {{"a", {11, 12, 13}, {}}, {"b", {21, 22, 23, 24, 25, 26}, {}}};
  Policy policy = FindPreset("reference").policy;
  policy.row_end_target = RowEndTarget::kNextInDoc;  // the row's last slot predicts 26: a 9-token window
  policy.overflow = Overflow::kSplit;
  Layout layout{8, {RowLayout{8, {{0, 0, 0, 3}, {1, 0, 3, 5}}, 0, 0}}};
  const OracleBatch batch = Materialize(docs, layout, policy);
  const TargetLosses losses = {{0, 1, 3}, {0, 1, 1, 1, 1, 1}};

  std::cout << "The lesson: two documents packed into one row of 8 slots\n"
            << "  a = [11 12 13]   b = [21 22 23 24 25 26]   policy: reference, pre-shifted labels\n\n";
  DrawRow(batch, batch.rows[0], std::cout);
  std::cout << "\n  counted: 1 = a valid target, x = the boundary prediction 13 -> 21 (excluded), 0 = not a target\n"
            << "  losses (nats): a predicts 12, 13 with 1, 3; b predicts 22..26 with 1 each\n\n";

  const auto counts = Denominators(batch);
  const auto token_mean = Objective(batch, losses, Denominator::kGlobalTargets);
  const auto sequence_mean = Objective(batch, losses, Denominator::kSequenceMean);
  const auto per_slot = Objective(batch, losses, Denominator::kAllPositions);
  std::printf("  %-46s %-12s %s\n", "denominator", "value", "");
  std::printf("  %-46s 9/%-10.0f %.6f   <- the global token objective\n",
              "included targets (global_targets)", counts.global_targets, token_mean.value);
  std::printf("  %-46s %-12s %.6f   mean of (1+3)/2 and 5/5\n", "sequence means (sequence_mean)", "", sequence_mean.value);
  std::printf("  %-46s 9/%-10lld %.6f   understates the objective\n", "all 8 slots (all_positions)",
              static_cast<long long>(counts.all_positions), per_slot.value);
  std::cout << "\n  The denominator that preserves L = Σ m·ℓ / Σ m is the number of included targets: "
            << counts.global_targets << ".\n";
  return 0;
}

int RunPresets(const std::string& format) {
  if (format == "json") {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const auto& preset : Presets()) {
      out.push_back({{"name", preset.name}, {"system", preset.system}, {"summary", preset.summary},
                     {"notes", preset.notes}, {"policy", PolicyToJson(preset.policy)}});
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  // For each preset: what it describes, and the keys in which it differs from the reference policy.
  const auto ref_values = PolicyKeyValues(FindPreset("reference").policy);
  std::cout << "Presets: real systems mapped onto the policy (a policy file may start from one and override keys;\n"
            << "`packoracle presets --format json` prints every key of every preset).\n";
  for (const auto& preset : Presets()) {
    std::cout << "\n  " << preset.name << "\n      system:   " << preset.system << "\n      what:     "
              << preset.summary << "\n";
    if (!preset.notes.empty()) std::cout << "      note:     " << preset.notes << "\n";
    std::string diff;
    const auto values = PolicyKeyValues(preset.policy);
    for (std::size_t k = 1; k < values.size(); ++k) {
      if (values[k].second != ref_values[k].second) {
        diff += (diff.empty() ? "" : ", ") + values[k].first + "=" + ToString(values[k].second);
      }
    }
    std::cout << "      policy:   " << (diff.empty() ? std::string("(the reference policy)") : "reference with " + diff)
              << "\n";
  }
  return 0;
}

struct SelftestOptions {
  int cases = 400;
  std::uint64_t seed = 20261129;
  std::string only;            // run only candidates whose id or name contains this
  std::string show = "TG-02";  // the candidate whose full report is printed (the lesson's bug: a shifted row)
  std::string save_regressions;
  std::string format = "text";
};

// The kit against every bundled candidate: correct ones must pass, buggy ones must be caught by the invariant
// their bugzoo entry names. Exit 0 when all behave so, 1 otherwise.
int RunSelftest(const SelftestOptions& o) {
  struct Row {
    const BundledCandidate* bundled;
    VerifyReport report;
    double ms;
    bool as_expected;
  };
  std::vector<Row> rows;
  for (const auto& b : BundledCandidates()) {
    if (!o.only.empty() && b.id.find(o.only) == std::string::npos && b.name.find(o.only) == std::string::npos) continue;
    Candidate candidate = b.make();
    VerifyOptions options;
    options.cases = o.cases;
    options.seed = o.seed;
    options.reproduce_command = "packoracle selftest --only " + b.id + " --seed " + std::to_string(o.seed);
    const auto start = std::chrono::steady_clock::now();
    VerifyReport report = Verify(candidate, options);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    const bool ok = b.expected ? (!report.passed && report.broken() == b.expected) : report.passed;
    if (!o.save_regressions.empty() && !report.passed) SaveRegression(o.save_regressions, b.id, report);
    rows.push_back({&b, std::move(report), ms, ok});
  }
  int good = 0;
  for (const auto& r : rows) good += r.as_expected ? 1 : 0;

  if (o.format == "json") {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const auto& r : rows) {
      nlohmann::ordered_json j;
      j["id"] = r.bundled->id;
      j["name"] = r.bundled->name;
      j["expected"] = r.bundled->expected ? nlohmann::ordered_json(Name(*r.bundled->expected)) : nlohmann::ordered_json("pass");
      j["verdict"] = r.report.passed ? "pass" : "caught";
      j["invariant"] = r.report.broken() ? nlohmann::ordered_json(Name(*r.report.broken())) : nlohmann::ordered_json(nullptr);
      j["as_expected"] = r.as_expected;
      j["cases"] = r.report.passed ? r.report.cases_run : r.report.cases_to_failure;
      j["documents"] = r.report.counterexample_documents();
      j["tokens"] = r.report.counterexample_tokens();
      j["ms"] = r.ms;
      j["reproduce"] = r.report.reproduce;
      if (r.report.passed && r.report.largest_gap) j["objective_gap"] = DescribeGap(r.report);
      out.push_back(j);
    }
    std::cout << out.dump(2) << "\n";
    return good == static_cast<int>(rows.size()) ? 0 : 1;
  }

  std::printf("packoracle selftest: the kit against its %zu bundled candidates (%d cases each, seed %llu)\n\n",
              rows.size(), o.cases, static_cast<unsigned long long>(o.seed));
  std::printf("  %-46s %-12s %-8s %-12s %6s %5s %6s %9s\n", "candidate", "expected", "verdict", "invariant", "cases",
              "docs", "tokens", "time");
  for (const auto& r : rows) {
    const bool reference = r.bundled->id.rfind("REF-", 0) == 0;
    const std::string label = reference ? r.bundled->id : r.bundled->id + " " + r.bundled->name;
    const std::string expected = r.bundled->expected ? Name(*r.bundled->expected) : "pass";
    std::string verdict = r.report.passed ? "pass" : "caught";
    if (!r.as_expected) verdict = r.bundled->expected ? (r.report.passed ? "MISSED" : "WRONG") : "FAILED";
    const std::string invariant = r.report.broken() ? Name(*r.report.broken()) : "-";
    const int cases = r.report.passed ? r.report.cases_run : r.report.cases_to_failure;
    const std::string docs = r.report.passed ? "-" : std::to_string(r.report.counterexample_documents());
    const std::string tokens = r.report.passed ? "-" : std::to_string(r.report.counterexample_tokens());
    std::printf("  %-46.46s %-12s %-8s %-12s %6d %5s %6s %6.1f ms\n", label.c_str(), expected.c_str(), verdict.c_str(),
                invariant.c_str(), cases, docs.c_str(), tokens.c_str(), r.ms);
  }
  std::printf("\n  %d as expected, %d not\n", good, static_cast<int>(rows.size()) - good);
  // Correct producers declaring another objective than the global token mean are shown what it costs.
  bool gap_header = false;
  for (const auto& r : rows) {
    if (!r.report.passed || !r.as_expected || !r.report.largest_gap) continue;
    if (!gap_header) std::printf("\n  Declared objectives other than the global token mean (the price of the formula, not a bug):\n");
    gap_header = true;
    std::printf("    %-28s %s\n", r.bundled->id.c_str(), DescribeGap(r.report).c_str());
  }

  const Row* shown = nullptr;
  for (const auto& r : rows) {
    if (r.bundled->id == o.show || r.bundled->name == o.show) shown = &r;
  }
  for (const auto& r : rows) {
    if (!shown && !r.report.passed) shown = &r;  // the one asked for did not run: the first caught bug
  }
  for (const auto& r : rows)
    if (!r.as_expected && !r.report.passed) shown = &r;  // a surprise is what a person must see
  if (shown && !shown->report.passed) {
    std::cout << "\nOne counterexample in full (" << shown->bundled->id << ", " << shown->bundled->source << "):\n\n"
              << shown->report.text;
  }
  for (const auto& r : rows) {
    if (!r.as_expected) {
      std::cout << "\n" << r.bundled->id << " did not behave as expected: "
                << (r.bundled->expected ? std::string("it should be caught by ") + Name(*r.bundled->expected)
                                        : std::string("it should pass"))
                << (r.report.passed ? ", but it passed" : std::string(", but ") + Name(*r.report.broken()) + " broke") << "\n";
    }
  }
  return good == static_cast<int>(rows.size()) ? 0 : 1;
}

}  // namespace
}  // namespace packoracle

int main(int argc, char** argv) {
  CLI::App app{"packoracle: a correctness kit and reference oracle for sequence packing.\n"
               "The contract: L = Σ m·ℓ / Σ m and A_ij = 1[j <= i]·1[d_j = d_i]; every other policy declares its\n"
               "boundary semantics (see `packoracle presets`)."};
  app.set_version_flag("--version", packoracle::kVersion);
  app.require_subcommand(1);
  auto* lesson = app.add_subcommand("lesson", "Show the lesson's worked example: drawn row, targets, three denominators");
  std::string format = "text";
  auto* presets = app.add_subcommand("presets", "List the presets and every key of their policies");
  presets->add_option("--format", format, "text (a table for people) or json (for machines)")
      ->check(CLI::IsMember({"text", "json"}));
  packoracle::SelftestOptions selftest_options;
  auto* selftest = app.add_subcommand(
      "selftest", "Run the kit against its bundled candidates: every correct packer must pass, every buggy one "
                  "must be caught by the invariant its bugzoo entry names (exit 0 when all do)");
  selftest->add_option("--cases", selftest_options.cases, "generated cases per candidate")->check(CLI::Range(1, 1000000));
  selftest->add_option("--seed", selftest_options.seed, "the run's seed");
  selftest->add_option("--only", selftest_options.only, "run only candidates whose id or name contains this");
  selftest->add_option("--show", selftest_options.show, "print the full report of this candidate (id or name; default TG-02)");
  selftest->add_option("--save-regressions", selftest_options.save_regressions,
                       "write every counterexample found into this directory");
  selftest->add_option("--format", selftest_options.format, "text or json")->check(CLI::IsMember({"text", "json"}));
  std::vector<packoracle::cli::Runner> commands = {packoracle::cli::AddVerifyCommand(app),
                                                   packoracle::cli::AddFuzzCommand(app),
                                                   packoracle::cli::AddDrawCommand(app),
                                                   packoracle::cli::AddMergeCommand(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // DESIGN §7: bad arguments are unusable input
  }
  for (const auto& run : commands) {
    const int code = run();
    if (code >= 0) return code;
  }
  try {
    if (*lesson) return packoracle::RunLesson();
    if (*presets) return packoracle::RunPresets(format);
    if (*selftest) return packoracle::RunSelftest(selftest_options);
  } catch (const packoracle::InputError& e) {
    std::cerr << "packoracle: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
