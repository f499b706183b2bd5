// How the merge writes numbers and rank lists, in its messages (merge.cc) and its table (merge_render.cc).
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace packoracle::jobs::merge_format {

inline std::string Number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

inline std::string RankList(const std::vector<std::int64_t>& ranks) {
  std::string out;
  for (auto r : ranks) out += (out.empty() ? "" : " ") + std::to_string(r);
  return out.empty() ? "none" : out;
}

}  // namespace packoracle::jobs::merge_format
