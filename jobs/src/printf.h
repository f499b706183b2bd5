// printf into a std::string: the jobs render the tables the command line used to printf.
#pragma once

#include <cstdarg>
#include <cstdio>
#include <string>

namespace packoracle::jobs {

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
inline std::string Printf(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list again;
  va_copy(again, args);
  const int size = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string out(size > 0 ? static_cast<std::size_t>(size) : 0, '\0');
  if (size > 0) std::vsnprintf(out.data(), out.size() + 1, format, again);
  va_end(again);
  return out;
}

}  // namespace packoracle::jobs
