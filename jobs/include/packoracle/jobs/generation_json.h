// GenerationStats (packoracle/properties/generation_stats.h) as JSON, for `fuzz --format json` and
// `selftest --format json --stats`.
#pragma once

#include <nlohmann/json.hpp>

#include "packoracle/properties/generation_stats.h"

namespace packoracle::jobs {

// {"cases":..,"documents":{"median":..,"p90":..,"max":..,"mean":..},...,"shares":{"shared_row":..,...}}
nlohmann::ordered_json GenerationStatsJson(const GenerationStats& stats);

}  // namespace packoracle::jobs
