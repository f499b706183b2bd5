// A failure report as data: the sections of FuzzTest's "=== BUG FOUND!" report (headline, the violations, the
// minimal case, the rows drawn, the totals, how to reproduce it, a regression test draft), built once by the
// runner (BuildReportSections, verify.h) and printed by each front end in its own mode:
//
//   packoracle::VerifyReport report = packoracle::Verify(candidate);
//   if (!report.passed) std::cerr << packoracle::RenderReport(*report.sections);   // == report.text
//   if (!report.passed) Log(report.sections->headline, report.sections->reproduce);    // a front end's own pick
//
// RenderReport is the one renderer of the whole text (the command line, gtest.h, Python's str(Counterexample)
// all print it); a front end that wants less (the conformance matrix drops the replay line, the pytest plugin
// its own summary) reads the fields it wants instead of cutting the text.
#pragma once

#include <string>
#include <vector>

#include "packoracle/properties/candidate.h"
#include "packoracle/properties/invariants.h"

namespace packoracle {

struct ReportSections {
  std::string candidate;              // its name
  // The first line: "<what the person ran> failed: <invariant>", where what the person ran is the Python call,
  // the gtest test with its file:line, or Verify(<candidate>) (VerifyOptions::headline).
  std::string headline;
  // Every violation of the minimal case, the headline's first (the run's only invariant when it was restricted
  // to one, else the checker's first), then the others in the checker's order. Never empty.
  std::vector<Violation> violations;
  PackRequest request;                // the minimal case (interchange::RequestToJson writes it as the exec protocol does)
  // The human print mode of the sections that are drawings, each as printed with its "=== " title line; empty
  // when the report has no such section.
  std::string minimal_case;           // "=== Minimal counterexample (after N cases and M shrinks; profile P)": policy, step, documents
  std::string drawn;                  // "=== Row r ..." for each row involved, then "=== Attention row r" (the grid)
  std::string totals;                 // "=== Denominator and loss": counts, what the producer reported, the objective
  std::string invariance;             // "=== Packing invariance": the tiny decoder's measurement
  std::string reproduce;              // the reproduce string ("v1:..."), or what replays a given case
  std::string reproduce_command;      // the line that reruns the case (a gtest filter, a command line); may be empty
  // C++ that replays the case in a gtest (#include lines, then a TEST that fails while the bug is there); empty
  // when not asked for (VerifyOptions::regression_draft). Compiles as printed where the candidate has a C++
  // expression that constructs it (Candidate::source); otherwise says "best effort" and leaves `candidate` to
  // the reader.
  std::string regression_draft;
};

// The whole report, every section in order: what Verify puts in VerifyReport::text.
std::string RenderReport(const ReportSections& sections);

// The lines under the headline: the headline violation's sentence, expected and actual, the other invariants
// broken, and the headline invariant's statement.
std::string RenderVerdict(const ReportSections& sections);

}  // namespace packoracle
