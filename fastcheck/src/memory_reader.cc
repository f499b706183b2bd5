#include "packoracle/fastcheck/memory_reader.h"

#include <utility>
#include <variant>

#include "packoracle/oracle/error.h"

namespace packoracle::fastcheck {

MemoryRecordReader::MemoryRecordReader(std::vector<PackedBatchRecord> records, std::string name)
    : owned_(std::move(records)), name_(std::move(name)) {
  Check();
}

MemoryRecordReader::MemoryRecordReader(std::shared_ptr<const std::vector<PackedBatchRecord>> records, std::string name)
    : shared_(std::move(records)), name_(std::move(name)) {
  if (!shared_) throw InputError(name_ + ": no records (null)");
  Check();
}

void MemoryRecordReader::Check() const {
  const auto& all = records();
  if (all.empty() || !std::holds_alternative<HeaderRecord>(all.front())) {
    throw InputError(name_ + ": the records must start with a header record (its policy, dp_world_size, ...)");
  }
  for (std::size_t k = 1; k < all.size(); ++k) {
    if (std::holds_alternative<HeaderRecord>(all[k])) {
      throw InputError(name_ + ": record " + std::to_string(k) + " is a second header record (one per source)");
    }
  }
}

bool MemoryRecordReader::Next(PackedBatchRecord& record) {
  if (next_ == records().size()) return false;
  const std::size_t index = next_++;
  if (shared_) {
    record = (*shared_)[index];  // a copy (into record's storage where it holds the same kind)
  } else {
    record = std::move(owned_[index]);
  }
  if (auto* m = std::get_if<MicrobatchRecord>(&record); m && m->line == 0) m->line = static_cast<std::int64_t>(index) + 1;
  return true;
}

std::optional<PackedBatchRecord> MemoryRecordReader::Next() {
  PackedBatchRecord record;
  if (!Next(record)) return std::nullopt;
  return record;
}

}  // namespace packoracle::fastcheck
