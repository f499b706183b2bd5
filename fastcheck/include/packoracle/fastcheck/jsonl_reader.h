// packed-batch JSON Lines (DESIGN §5) read with simdjson On-Demand: the records PackedBatchReader gives, at
// parse speed.
//
// The two readers accept the same files and give the same records. The fast one parses `document` and
// `microbatch` lines itself; anything it does not take in its stride (the header, `step` records, a wrong
// type, a missing field, a length mismatch, a repeated key, malformed JSON) is handed, line and all, to the
// nlohmann-json reader of interchange/ (ParsePackedBatchRecord). So every error message is the existing
// reader's, naming file:line, the record and the field, and an accepted line means the same record either way
// (fastcheck/test/reader_test.cc checks both on every dump in the repository and on broken lines).
//
//   FastBatchReader reader("rank0.jsonl");
//   PackedBatchRecord record;
//   while (reader.Next(record)) { ... }   // record's vectors are reused: no allocation per row once warm
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "packoracle/interchange/packed_batch.h"

namespace packoracle::fastcheck {

class LineParser;  // line_parser.h (internal)

// The interface verify reads through: either reader.
class RecordReader {
 public:
  virtual ~RecordReader() = default;
  virtual std::optional<PackedBatchRecord> Next() = 0;
  // The next record into `record`, reusing its storage where the reader can; false at the end.
  virtual bool Next(PackedBatchRecord& record) = 0;
  virtual const std::string& path() const = 0;
  // Bytes of the source consumed so far (for progress), 0 when the reader cannot tell.
  virtual std::int64_t bytes_read() const { return 0; }
  // Where the line of the record Next gave last starts in the source (bytes), -1 when the reader cannot
  // tell. verify reads a step again from there (FastBatchReader's resuming constructor) to report it.
  virtual std::int64_t record_offset() const { return -1; }
};

class FastBatchReader final : public RecordReader {
 public:
  explicit FastBatchReader(std::string path);  // InputError if it cannot be opened
  // Reads an open stream, which the reader then owns and closes; `name` stands for the file in messages;
  // at most `chunk` bytes are read at a time (default 1 MiB; clamped to [1 B, 1 GiB]). For the fuzz target fuzz/fast_batch_fuzzer.cc, which
  // reads from memory (fmemopen) in chunks of a few bytes so lines straddle them.
  FastBatchReader(std::FILE* file, std::string name, std::size_t chunk = kDefaultChunk);
  static constexpr std::size_t kDefaultChunk = std::size_t{1} << 20;
  // Resumes a file read before: from byte `offset`, where line `line` starts (the header already read).
  FastBatchReader(std::string path, std::int64_t offset, std::int64_t line);
  ~FastBatchReader() override;
  // The next record into `record` (its storage reused when it holds the same kind), false at the end.
  bool Next(PackedBatchRecord& record) override;
  std::optional<PackedBatchRecord> Next() override;
  const std::string& path() const override { return path_; }
  std::int64_t line() const { return line_; }
  std::int64_t bytes_read() const override { return bytes_; }
  std::int64_t record_offset() const override { return record_offset_; }
  std::int64_t fallbacks() const;  // lines handed to the nlohmann reader

 private:
  bool NextLine(const char*& begin, std::size_t& size);
  std::string path_;
  std::FILE* file_ = nullptr;
  std::vector<char> buffer_;  // [0, end_) read from the file, [begin_, end_) not yet consumed, padded
  std::size_t begin_ = 0, end_ = 0;
  std::size_t chunk_ = kDefaultChunk;  // bytes read from the file at a time, at most
  std::size_t scanned_ = 0;            // bytes from begin_ already searched for a newline
  bool eof_ = false;
  std::int64_t line_ = 0, bytes_ = 0;
  std::int64_t offset_ = 0, record_offset_ = -1;  // where the next line starts; where the last record's did
  std::unique_ptr<LineParser> parser_;
};

// The existing nlohmann-json reader behind the same interface (verify --oracle).
class OracleBatchReader final : public RecordReader {
 public:
  explicit OracleBatchReader(std::string path) : reader_(std::move(path)) {}
  std::optional<PackedBatchRecord> Next() override { return reader_.Next(); }
  bool Next(PackedBatchRecord& record) override {
    auto next = reader_.Next();
    if (next) record = std::move(*next);
    return next.has_value();
  }
  const std::string& path() const override { return reader_.path(); }

 private:
  PackedBatchReader reader_;
};

}  // namespace packoracle::fastcheck
