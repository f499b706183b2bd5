// In-process candidates for the jobs' tests: as a Python callable behind a PackerRole would be.
#pragma once

#include "packoracle/oracle.h"
#include "packoracle/properties/candidate.h"
#include "packoracle/properties/invariants.h"

namespace packoracle::jobs::testing {

// The reference packer, with each row's first target weighted when it should not be: the lesson's boundary
// bug, caught by `targets`.
struct WeightsTheFirstSlot {
  Candidate reference = ReferenceCandidate();
  PackResult Pack(const PackRequest& request) {
    PackResult result = reference.packer->Pack(request);
    for (auto& mb : result.microbatches)
      for (auto& row : mb.rows)
        if (!row.labels.empty() && row.labels[0] == request.policy.ignore_index) row.labels[0] = row.input_ids[0];
    return result;
  }
};

}  // namespace packoracle::jobs::testing
