#include "packoracle/properties/reproduce_string.h"

#include <cctype>
#include <charconv>
#include <limits>
#include <utility>

#include "packoracle/oracle/error.h"

namespace packoracle {
namespace {

std::vector<std::string> Split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string::size_type from = 0;
  for (;;) {
    const auto at = text.find(separator, from);
    parts.push_back(text.substr(from, at == std::string::npos ? std::string::npos : at - from));
    if (at == std::string::npos) return parts;
    from = at + 1;
  }
}

// A whole decimal number in [0, max]: digits only, nothing after them.
template <class T>
T Number(const std::string& text, const std::string& part, const std::string& whole, T max) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])) || ec != std::errc() || ptr != end ||
      value > max) {
    throw InputError("reproduce string '" + whole + "': its " + part + " '" + text +
                     "' is not a whole number in 0.." + std::to_string(max) +
                     " (the form is v1:<seed>:<case>:<size>:<profile>:<path>)");
  }
  return value;
}

}  // namespace

std::string ReproduceString::CaseString() const {
  return "v1:" + std::to_string(seed) + ":" + std::to_string(case_index) + ":" + std::to_string(size) + ":" +
         profile + ":";
}

std::string ReproduceString::ToString() const {
  std::string out = CaseString();
  bool first = true;
  for (int step : path) out += (std::exchange(first, false) ? "" : ".") + std::to_string(step);
  for (const auto& edit : edits) out += (std::exchange(first, false) ? "" : ".") + edit;
  return out;
}

ReproduceString ReproduceString::Parse(const std::string& text) {
  const std::vector<std::string> parts = Split(text, ':');
  if (parts.size() != 6 || parts[0] != "v1") {
    throw InputError("reproduce string '" + text + "' is not of the form v1:<seed>:<case>:<size>:<profile>:<path>");
  }
  ReproduceString r;
  r.seed = Number<std::uint64_t>(parts[1], "seed", text, std::numeric_limits<std::uint64_t>::max());
  r.case_index = Number<int>(parts[2], "case", text, std::numeric_limits<int>::max());
  r.size = Number<int>(parts[3], "size", text, 100);
  r.profile = parts[4];
  if (r.profile.empty()) throw InputError("reproduce string '" + text + "': its profile is empty");
  for (const std::string& element : Split(parts[5], '.')) {
    if (element.empty()) continue;  // "v1:...:" (no path), or a doubled dot
    if (std::isdigit(static_cast<unsigned char>(element[0])) && r.edits.empty()) {
      r.path.push_back(Number<int>(element, "shrink step", text, std::numeric_limits<int>::max()));
    } else {
      r.edits.push_back(element);  // an edit name: case_edits.h says which exist (an unknown one is refused there)
    }
  }
  return r;
}

}  // namespace packoracle
