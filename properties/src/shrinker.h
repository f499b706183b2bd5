// The shrinker of Verify (verify.cc): from a failing generated case to a minimal one that breaks the same
// invariant, first by RapidCheck's shrinks of the generator (recorded as a path of choice indices), then by
// the case edits RapidCheck cannot make (case_edits.h, recorded by name). Both records go into the failure's
// reproduce string, so a replay walks the same way.
#pragma once

#include <rapidcheck.h>

#include <optional>
#include <string>
#include <vector>

#include "packoracle/properties/candidate.h"
#include "packoracle/properties/verify.h"

namespace packoracle::internal {

// Runs the check a Verify run asked for (its own check_case, else CheckCase).
CaseResult CheckWith(const VerifyOptions& options, Candidate& candidate, const PackRequest& request);

// Does this case fail in a way that counts for the run (any violation, or one of `options.only`)?
bool Fails(const CaseResult& result, const VerifyOptions& options);

// A failing case and the way it was reached from the generated one.
struct FailingCase {
  rc::Shrinkable<PackRequest> shrinkable;  // where RapidCheck's shrinks go on from
  PackRequest request;                     // the case itself (the shrinkable's value, then edited)
  CaseResult result;                       // its check
  std::vector<int> path;                   // RapidCheck's shrink choices taken
  std::vector<std::string> edits;          // case edits applied after them
};

class Shrinker {
 public:
  // Shrinks for `candidate` under the run's options; case_index is the id every tried case carries.
  Shrinker(Candidate& candidate, const VerifyOptions& options, int case_index);

  // Makes `failing` minimal: the first simpler case that still breaks the same invariant is taken, again
  // and again, until none does or the options' step budget is spent. Returns the number of steps taken.
  int Shrink(FailingCase& failing);

 private:
  void ShrinkByGenerator(FailingCase& failing);
  void EditAll(FailingCase& failing);
  bool TryEdit(FailingCase& failing, const std::string& edit);

  Candidate& candidate_;
  VerifyOptions shrinking_;  // the run's check, the determinism rerun left out unless it is what broke
  VerifyOptions same_;       // a smaller case counts when it breaks the headline invariant
  int case_index_;
  int budget_ = 0;
  int taken_ = 0;
};

}  // namespace packoracle::internal
