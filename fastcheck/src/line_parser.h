// One packed-batch line into one record (internal to fastcheck/): the simdjson parse of `document` and
// `microbatch` lines, and the nlohmann-json reader of interchange/ for every other line, with its messages.
// FastBatchReader reads lines one after another through one LineParser; each worker of a ReadPool has one,
// with which it parses blocks of lines of every file far ahead (after each file's header, read first).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "packoracle/interchange/packed_batch.h"

namespace packoracle::fastcheck {

class LineParser {
 public:
  // `path` names the file in messages; `seen_header`: the header was already read (a later header is then
  // refused, as PackedBatchReader refuses it).
  LineParser(std::string path, bool seen_header);
  ~LineParser();
  // Line number `line`, [data, data + size) readable up to data + capacity (simdjson's padding), into
  // `record` (its storage reused when it holds the same kind). False for a blank line, which is no record.
  // InputError naming path:line, the record and the field for a line that is not a valid record.
  bool Parse(const char* data, std::size_t size, std::size_t capacity, std::int64_t line, PackedBatchRecord& record);
  bool seen_header() const { return seen_header_; }
  void set_path(const std::string& path) {  // a worker of a ReadPool parses blocks of every file
    if (path != path_) path_ = path;
  }
  std::int64_t fallbacks() const { return fallbacks_; }  // lines handed to the nlohmann reader

 private:
  struct Simd;
  std::string path_;
  bool seen_header_;
  std::int64_t fallbacks_ = 0;
  std::unique_ptr<Simd> simd_;
};

}  // namespace packoracle::fastcheck
