// The determinism invariant's probe (DESIGN §4: "the same input gives the same output, whatever was packed
// before"), stated once for CheckCase and the fast path (fastcheck::CheckCaseFast): between the case and its
// repeat, the packer is handed this decoy, the same documents in reverse order under the next request id, so
// that a packer whose output depends on what it packed before (a cache keyed wrongly, a shuffle seeded by its
// call count, a buffer carried over) answers the repeat differently.
#pragma once

#include <algorithm>

#include "packoracle/properties/candidate.h"

namespace packoracle {

inline PackRequest DeterminismDecoy(const PackRequest& request) {
  PackRequest decoy = request;
  std::reverse(decoy.documents.begin(), decoy.documents.end());
  decoy.id = request.id + 1;
  return decoy;
}

}  // namespace packoracle
