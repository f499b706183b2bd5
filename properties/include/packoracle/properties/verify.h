// Verification entry points: run a candidate against generated cases, shrink the first failure to a minimal
// counterexample, and report it in a form a person reads in ten seconds.
//
//   packoracle::VerifyReport report = packoracle::Verify(candidate, {.cases = 300});
//   if (!report.passed) std::cerr << report.text;
//
// With GoogleTest, prefer packoracle/gtest.h: EXPECT_TRUE(packoracle::VerifyPackerKeepsInvariants(packer)).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "packoracle/properties/candidate.h"
#include "packoracle/properties/generation_stats.h"
#include "packoracle/properties/invariants.h"
#include "packoracle/properties/report.h"

namespace packoracle {

// The longest row generated for a candidate whose attention consumer answers dense L × L masks (L² cells a
// row); one that answers runs (MaskRuns, mask_runs.h) gets max_row_length.
inline constexpr std::int64_t kRoleMaxRowLength = kDenseConsumerMaxRowLength;

// The bounds a run's cases grow to by default, for every entry point (Verify, the typed suite,
// `packoracle fuzz`, packoracle.fuzz): rows of 8,192 slots, 512 documents a case (steps of up to about
// 65,536 slots). A test that wants small cases says so: max_row_length = 16, max_documents = 8.
inline constexpr std::int64_t kDefaultMaxRowLength = 8192;
inline constexpr std::size_t kDefaultMaxDocuments = 512;

struct VerifyOptions {
  int cases = 400;                       // generated cases before declaring a pass
  std::uint64_t seed = 20261129;         // the run's seed: the same seed gives the same cases
  std::int64_t max_row_length = kDefaultMaxRowLength;
  std::size_t max_documents = kDefaultMaxDocuments;  // documents per case at full size
  // The generation size climbs from small to max_row_length / max_documents over the first ramp_cases
  // cases of the run (0: over `cases`); ramp_offset is the number of the run's cases before this call.
  std::int64_t ramp_cases = 0;
  std::int64_t ramp_offset = 0;
  // false: every generated token is supervised (no prompt/completion masks), for candidates that take no
  // per-token supervision (pretraining packers); a reproduce string depends on it
  bool sft_masks = true;
  std::optional<Invariant> only;         // fail only on this invariant (one gtest per invariant)
  std::optional<std::string> profile;    // a profile name (generators.h Profiles()); default: drawn per case
  bool shrink = true;
  int max_shrink_steps = 2000;           // candidate evaluations spent shrinking
  CheckOptions check;
  // How one case is checked: CheckCase when empty. packoracle fuzz installs fastcheck::CheckCaseFast (the fast
  // verifier first, CheckCase for every failure), which gives the same verdicts and reports.
  std::function<CaseResult(Candidate&, const PackRequest&, const CheckOptions&)> check_case;
  std::optional<std::string> reproduce;  // replay exactly the case of a reproduce string, then stop
  std::string reproduce_command;         // how a person reruns this run (shown in reports), e.g. a gtest filter
  // What the failure's first line names, as the person met the run: the Python call
  // (`packoracle.fuzz(pack, 'hf-flatten')`), the gtest test with its file:line. Empty: `Verify(<candidate>)`.
  std::string headline;
  bool regression_draft = true;          // end with a C++ regression test draft (false: front ends without C++)
  bool collect_stats = false;            // measure every generated case (VerifyReport::generated)
};

struct VerifyReport {
  std::string candidate;
  bool passed = true;
  int cases_run = 0;                     // cases generated and checked
  int cases_to_failure = 0;              // 1-based index of the first failing case (0: none)
  int shrinks = 0;                       // successful shrink steps
  std::string profile;                   // the profiles the cases were drawn from, comma-separated
  std::set<Invariant> checked;           // checked on at least one case
  std::set<Invariant> not_applicable;    // never applicable (a role the candidate lacks)
  std::optional<PackRequest> counterexample;  // the minimal failing case
  std::optional<CaseResult> failure;          // what it produced
  std::string reproduce;                 // the reproduce string of the minimal case
  std::string text;                      // the whole report (empty when passed): RenderReport(*sections)
  std::optional<ReportSections> sections;  // the same report as data (report.h), for front ends that pick
  Candidate::Source source;              // how C++ constructs the candidate checked (its regression draft's)
  // The largest gap seen between a producer's declared step objective and the global token mean Σwℓ/Σw of
  // the same step (a reducer: under every split it was checked on). Zero under global_targets; under
  // microbatch_mean, rank_mean or sequence_mean it is the price of the declared formula, shown to the user.
  struct ObjectiveGap {
    double declared = 0;
    double token_mean = 0;
    std::string split;     // how the step was split ("as packed", ...)
    int case_index = 0;    // 1-based
    Denominator formula = Denominator::kGlobalTargets;  // what the case's policy declared
    double gap() const { return declared - token_mean; }
  };
  std::optional<ObjectiveGap> largest_gap;
  // packing_invariance's measurement over every checked case: the relative change of the tiny decoder's losses
  // against each document alone (zero for an isolating producer; the contamination under row_causal).
  std::optional<Contamination> contamination;
  // What the attention consumer computed against what the declared rule needs, over every checked case whose
  // consumer said (ComputedWork, candidate.h; efficiency): its utilization, reported whatever the policy promises.
  std::optional<ConsumerWork> consumer_work;
  // What was generated (options.collect_stats): every case as drawn, before shrinking.
  std::optional<GenerationStats> generated;
  // The headline invariant of the failure.
  std::optional<Invariant> broken() const {
    if (!failure || failure->violations.empty()) return std::nullopt;
    return failure->violations.front().invariant;
  }
  // Documents and tokens of the counterexample.
  std::size_t counterexample_documents() const;
  std::size_t counterexample_tokens() const;
};

VerifyReport Verify(Candidate& candidate, const VerifyOptions& options = {});

// One sentence on a report's largest objective gap, e.g. "declares microbatch_mean: its step objective was
// 0.25 nats (20%) from the global token mean Σwℓ/Σw (case 17, split as packed)"; empty when there is none.
std::string DescribeGap(const VerifyReport& report);

// Checks one given case (e.g. a saved regression) and reports it the same way.
VerifyReport VerifyOne(Candidate& candidate, const PackRequest& request, const VerifyOptions& options = {});

// The report of a failing case as sections (report.h): the broken invariant in one sentence, the policy, the
// documents, the rows involved, the attention grid with disagreeing cells marked, denominators and losses, the
// reproduce string and a regression test draft (options.regression_draft), naming options.headline.
ReportSections BuildReportSections(const std::string& candidate, const PackRequest& request, const CaseResult& result,
                                   const VerifyReport& run, const VerifyOptions& options);

// Builds a failing report's sections and text under `options` (its headline, reproduce command, draft): what
// Verify does, and what a front end calls again to name itself (gtest.h: the test and its file:line).
void DescribeFailure(VerifyReport& report, const VerifyOptions& options);

// The same report as text: RenderReport(BuildReportSections(...)).
std::string RenderFailure(const std::string& candidate, const PackRequest& request, const CaseResult& result,
                          const VerifyReport& run, const VerifyOptions& options);

}  // namespace packoracle
