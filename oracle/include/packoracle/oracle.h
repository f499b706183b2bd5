// packoracle's reference oracle: include this to get all of it.
//
//   auto docs = packoracle::MakeDocuments({{11, 12, 13}, {21, 22, 23, 24, 25, 26}});
//   const auto& policy = packoracle::FindPreset("reference").policy;
//   auto layout = packoracle::SequentialLayout(docs, policy, /*row_length=*/8);
//   auto batch = packoracle::Materialize(docs, layout, policy);     // rows, labels, weights, positions, ...
//   auto counts = packoracle::Denominators(batch);                   // counts.global_targets == 7
#pragma once

#include "packoracle/oracle/batch.h"        // IWYU pragma: export
#include "packoracle/oracle/denominator.h"  // IWYU pragma: export
#include "packoracle/oracle/document.h"     // IWYU pragma: export
#include "packoracle/oracle/encoding.h"     // IWYU pragma: export
#include "packoracle/oracle/error.h"        // IWYU pragma: export
#include "packoracle/oracle/layout.h"       // IWYU pragma: export
#include "packoracle/oracle/policy.h"       // IWYU pragma: export
#include "packoracle/oracle/presets.h"      // IWYU pragma: export
#include "packoracle/oracle/segments.h"     // IWYU pragma: export
#include "packoracle/oracle/selection.h"    // IWYU pragma: export
