// raw_parse: the floor under `packoracle verify` on the same file: read it line by line (std::getline, as
// PackedBatchReader does) and parse every line with nlohmann::json (the library verify uses), checking
// nothing. Prints bytes, lines, seconds and MiB/s; the run.sh table divides verify's throughput by this.
//
//   raw_parse FILE
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: raw_parse FILE\n";
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  std::ifstream in(argv[1]);
  if (!in) {
    std::cerr << "raw_parse: cannot open " << argv[1] << "\n";
    return 2;
  }
  std::int64_t bytes = 0, lines = 0;
  std::string text;
  while (std::getline(in, text)) {
    bytes += static_cast<std::int64_t>(text.size()) + 1;
    ++lines;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      nlohmann::json j = nlohmann::json::parse(text);
      benchmark::DoNotOptimize(j);
    } catch (const nlohmann::json::parse_error& e) {
      std::cerr << "raw_parse: " << argv[1] << ":" << lines << ": " << e.what() << "\n";
      return 2;
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double mib = static_cast<double>(bytes) / (1 << 20);
  std::printf("raw_parse: %lld bytes, %lld lines, %.3f s, %.1f MiB/s\n", static_cast<long long>(bytes),
              static_cast<long long>(lines), seconds, mib / seconds);
  return 0;
}
