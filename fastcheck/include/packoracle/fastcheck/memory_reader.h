// A RecordReader over records built in memory (no JSON): verify, draw and the Python binding audit them with
// exactly the code and text that a dump file gets.
//
//   std::vector<PackedBatchRecord> records = {header, document_a, document_b, microbatch};
//   auto source = std::make_unique<fastcheck::MemoryRecordReader>(std::move(records), "batch");
//
// `name` stands for the file in messages. A micro-batch record whose `line` is 0 gets its index + 1, so
// that a report points at it as at a line of a file.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "packoracle/fastcheck/jsonl_reader.h"

namespace packoracle::fastcheck {

class MemoryRecordReader final : public RecordReader {
 public:
  // InputError (naming `name`) unless the records start with their header and hold no other: a file read
  // the same way would be refused so.
  MemoryRecordReader(std::vector<PackedBatchRecord> records, std::string name);
  std::optional<PackedBatchRecord> Next() override;
  bool Next(PackedBatchRecord& record) override;
  const std::string& path() const override { return name_; }

 private:
  std::vector<PackedBatchRecord> records_;
  std::string name_;
  std::size_t next_ = 0;
};

}  // namespace packoracle::fastcheck
