#include "packoracle/fastcheck/memory_reader.h"

#include <utility>
#include <variant>

#include "packoracle/oracle/error.h"

namespace packoracle::fastcheck {

MemoryRecordReader::MemoryRecordReader(std::vector<PackedBatchRecord> records, std::string name)
    : records_(std::move(records)), name_(std::move(name)) {
  if (records_.empty() || !std::holds_alternative<HeaderRecord>(records_.front())) {
    throw InputError(name_ + ": the records must start with a header record (its policy, dp_world_size, ...)");
  }
  for (std::size_t k = 0; k < records_.size(); ++k) {
    if (k > 0 && std::holds_alternative<HeaderRecord>(records_[k])) {
      throw InputError(name_ + ": record " + std::to_string(k) + " is a second header record (one per source)");
    }
    if (auto* m = std::get_if<MicrobatchRecord>(&records_[k]); m && m->line == 0) {
      m->line = static_cast<std::int64_t>(k) + 1;
    }
  }
}

std::optional<PackedBatchRecord> MemoryRecordReader::Next() {
  if (next_ == records_.size()) return std::nullopt;
  return std::move(records_[next_++]);  // each record is given once, as a file's line is read once
}

bool MemoryRecordReader::Next(PackedBatchRecord& record) {
  auto next = Next();
  if (next) record = std::move(*next);
  return next.has_value();
}

}  // namespace packoracle::fastcheck
