// A reproduce string, built and parsed in one place:
//
//   v1:<seed>:<case>:<size>:<profile>:<path>
//
// the run's seed, the 0-based case index, the generation size (0..100), the profile the case was drawn from,
// and the path from the generated case to the minimal one: RapidCheck's shrink indices, then the case edits
// (case_edits.h), dot-separated ("1.1.3.0.x2.t0,4.d"). Replaying it makes exactly that case without storing it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace packoracle {

struct ReproduceString {
  std::uint64_t seed = 0;
  int case_index = 0;
  int size = 0;
  std::string profile;
  std::vector<int> path;           // RapidCheck's shrink indices, in order
  std::vector<std::string> edits;  // case edits, in order, after the shrink indices

  // "v1:..." as above; Parse(ToString()) gives the same value.
  std::string ToString() const;
  // The case alone, without its path ("v1:<seed>:<case>:<size>:<profile>:"), to name a generated case.
  std::string CaseString() const;
  // Throws InputError naming the text and the part that is wrong: every number must be all digits and in range
  // ("12abc" and "-1" are refused), the profile non-empty, a path element a shrink index or an edit name.
  static ReproduceString Parse(const std::string& text);
};

}  // namespace packoracle
