// Candidate output quoted in the exec protocol's messages (the channel's faults, the answer lines' faults).
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace packoracle::exec_text {

// Candidate output made printable for messages: control bytes escaped, cut after `max` bytes.
inline std::string Printable(std::string_view text, std::size_t max) {
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < max; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > max) out += "…";
  return out;
}

// 'text' quoted for a message, with its length when it was cut.
inline std::string Quote(std::string_view text, std::size_t max = 160) {
  std::string out = "'" + Printable(text, max) + "'";
  if (text.size() > max) out += " (" + std::to_string(text.size()) + " bytes)";
  return out;
}

}  // namespace packoracle::exec_text
