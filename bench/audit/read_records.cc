// read_records: what `packoracle verify` spends before checking anything: the file read through the kit's
// own PackedBatchReader (std::getline, nlohmann::json parse, strict conversion into HeaderRecord /
// DocumentRecord / MicrobatchRecord), every record dropped at once. verify's time minus this is its
// checking (CheckCase per step, piece tiling, copies); this minus raw_parse is the record conversion.
//
//   read_records FILE
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <variant>

#include <benchmark/benchmark.h>

#include "packoracle/interchange/packed_batch.h"
#include "packoracle/oracle/error.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: read_records FILE\n";
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  std::int64_t records[4] = {0, 0, 0, 0}, rows = 0;
  std::int64_t bytes = 0;
  try {
    packoracle::PackedBatchReader reader(argv[1]);
    while (auto record = reader.Next()) {
      ++records[record->index()];
      if (auto* m = std::get_if<packoracle::MicrobatchRecord>(&*record)) rows += static_cast<std::int64_t>(m->microbatch.rows.size());
      benchmark::DoNotOptimize(*record);
    }
    bytes = reader.bytes_read();
  } catch (const packoracle::InputError& e) {
    std::cerr << "read_records: " << e.what() << "\n";
    return 2;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("read_records: %lld bytes, %lld documents, %lld micro-batches, %lld rows, %.3f s, %.1f MiB/s\n",
              static_cast<long long>(bytes), static_cast<long long>(records[1]), static_cast<long long>(records[2]),
              static_cast<long long>(rows), seconds, static_cast<double>(bytes) / (1 << 20) / seconds);
  return 0;
}
