// `packoracle selftest` as a library call: the kit against bundled candidates. Correct ones must pass, buggy
// ones must be caught by the invariant their bugzoo entry names.
//
// The candidates come from the caller (the command line passes the bugzoo's, fixtures/bugs/bugzoo.h, which
// is the kit's own test material and not installed), so that this library stays installable.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "packoracle/properties/candidate.h"
#include "packoracle/properties/invariants.h"
#include "packoracle/properties/verify.h"

namespace packoracle::jobs {

struct SelftestCandidate {
  std::string id;      // "TG-02", or "REF-<preset>" for a correct one
  std::string name;    // "torchtune-packed-label-shift"
  std::string source;  // where the bug comes from
  std::optional<Invariant> expected;  // the invariant that must catch it; nullopt: it must pass
  std::function<Candidate()> make;    // a fresh candidate
};

inline constexpr std::int64_t kSelftestMaxRowLength = 8192;
inline constexpr std::size_t kSelftestMaxDocuments = 512;

struct SelftestOptions {
  int cases = 400;  // generated cases per candidate
  std::uint64_t seed = 20261129;
  std::string only;            // run only candidates whose id or name contains this
  std::string show = "TG-02";  // the candidate whose full report is printed (the lesson's bug: a shifted row)
  std::string save_regressions;  // write every counterexample found into this directory
  bool stats = false;            // measure what was generated (SelftestResult::generated, per row in JSON)
};

struct SelftestRow {
  SelftestCandidate candidate;
  VerifyReport report;
  double ms = 0;
  bool as_expected = false;
};

struct SelftestResult {
  int exit_code = 0;  // 0 when every candidate behaved as expected, 1 otherwise
  SelftestOptions options;
  std::vector<SelftestRow> rows;  // in the candidates' order
  std::optional<GenerationStats> generated;  // options.stats: every candidate's cases together
  int as_expected() const;
};

SelftestResult RunSelftest(const std::vector<SelftestCandidate>& candidates, const SelftestOptions& options);

// What `packoracle selftest` prints, byte for byte: the table and one counterexample in full, or
// --format json. Both end with a newline.
std::string RenderSelftestText(const SelftestResult& result);
std::string RenderSelftestJson(const SelftestResult& result);

}  // namespace packoracle::jobs
