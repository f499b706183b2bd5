// How the checks compare numbers, stated once for CheckCase (properties/src/check.cc) and the fast verifier
// (fastcheck/src/step_totals.cc).
#pragma once

#include <algorithm>
#include <cmath>

namespace packoracle {

// Counts and denominators: equal up to double rounding (1e-12 relative).
inline bool Close(double a, double b) { return std::fabs(a - b) <= 1e-12 * std::max({1.0, std::fabs(a), std::fabs(b)}); }

// Losses come from float32 kernels (ForCausalLMLoss upcasts to float32; TRL's fused LM head and most fused
// cross-entropies accumulate in float32), so loss sums, losses and the step objective are compared at float32
// precision over a few hundred terms: 1e-5 relative. A target miscounted in a step of 10,000 still moves the
// sum by about 1e-4. Counts and denominators stay exact (Close).
inline bool LossClose(double a, double b) {
  return std::fabs(a - b) <= 1e-5 * std::max({1.0, std::fabs(a), std::fabs(b)});
}

}  // namespace packoracle
