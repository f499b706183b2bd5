// A RecordReader over records built in memory (no JSON): verify, draw and the Python binding audit them with
// exactly the code and text that a dump file gets.
//
//   std::vector<PackedBatchRecord> records = {header, document_a, document_b, microbatch};
//   auto source = std::make_unique<fastcheck::MemoryRecordReader>(std::move(records), "batch");
//
// `name` stands for the file in messages. A micro-batch record whose `line` is 0 is given as at line
// index + 1, so that a report points at it as at a line of a file.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "packoracle/fastcheck/jsonl_reader.h"

namespace packoracle::fastcheck {

class MemoryRecordReader final : public RecordReader {
 public:
  // Both: InputError (naming `name`) unless the records start with their header and hold no other, as a file
  // read the same way would be refused.
  // Owns the records and gives each away once (moved out, as a file's line is read once).
  MemoryRecordReader(std::vector<PackedBatchRecord> records, std::string name);
  // Shares records the caller keeps (to verify and then draw the same batch, say) and gives copies.
  MemoryRecordReader(std::shared_ptr<const std::vector<PackedBatchRecord>> records, std::string name);

  std::optional<PackedBatchRecord> Next() override;
  bool Next(PackedBatchRecord& record) override;
  const std::string& path() const override { return name_; }

 private:
  const std::vector<PackedBatchRecord>& records() const { return shared_ ? *shared_ : owned_; }
  void Check() const;
  std::vector<PackedBatchRecord> owned_;
  std::shared_ptr<const std::vector<PackedBatchRecord>> shared_;
  std::string name_;
  std::size_t next_ = 0;
};

}  // namespace packoracle::fastcheck
