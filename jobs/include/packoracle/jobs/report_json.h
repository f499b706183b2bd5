// A failure report's sections (packoracle/properties/report.h) as JSON: the one mapping of section to key, for
// `fuzz --format json` (the failure's "sections") and the Python binding (Counterexample's attributes).
#pragma once

#include <nlohmann/json.hpp>

#include "packoracle/properties/report.h"

namespace packoracle::jobs {

// {"headline":..,"verdict":..,"violations":[{"invariant":..,"message":..},..],"minimal_case":..,"drawn":..,
//  "totals":..,"invariance":..,"reproduce":..,"reproduce_command":..,"regression_draft":..}: the drawn sections
// as printed ("" where the report has none), the violations the headline's first. The minimal case as a request
// is the failure's "request" (interchange::RequestToJson), not repeated here.
nlohmann::ordered_json ReportSectionsJson(const ReportSections& sections);

}  // namespace packoracle::jobs
