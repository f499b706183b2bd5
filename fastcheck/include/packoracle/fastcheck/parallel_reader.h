// FastBatchReader's records, parsed ahead on worker threads while the caller checks the ones it has.
//
// The file is cut into blocks of whole lines (about `block_bytes` each, or one line when a line is longer);
// each worker takes the next block, parses it into records with its own LineParser, and the caller's Next()
// hands the records out strictly in file order. So the records, and the InputError of the first bad line
// (file:line, record, field), are exactly FastBatchReader's: an error found ahead is delivered when the
// caller reaches that line, after every record before it (reader_test.cc checks both readers agree).
//
// Memory is bounded: at most workers + 3 blocks are claimed and not yet handed out, and a block's JSON is
// let go once parsed. Its records go to the caller; a caller that reads into the same record gives its last
// document back into the block (a worker parses into its storage again: no allocation per document), at most
// four times the block's JSON bytes (HandOut). The readers of one audit (one per file) can share a
// ReadBudget, which bounds their blocks together; each reader may still always hold one block, so a caller
// waiting on any file never waits for the budget. Each waits on what holds it back (a worker: its reader's
// window, or the budget; the caller: its next block), so a block's steps wake one reader's threads, not all.
//
//   auto budget = std::make_shared<fastcheck::ReadBudget>(8 << 20);
//   fastcheck::ParallelBatchReader reader("rank0.jsonl", /*workers=*/2, budget);
//   PackedBatchRecord record;
//   while (reader.Next(record)) { ... }
// The destructor stops the workers and joins them (also when the caller leaves on an exception).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "packoracle/fastcheck/jsonl_reader.h"

namespace packoracle::fastcheck {

// Bytes of blocks claimed and not yet handed out, over every reader sharing it.
struct ReadBudget {
  explicit ReadBudget(std::int64_t bytes) : limit(bytes) {}
  const std::int64_t limit;
  std::mutex mutex;
  std::condition_variable released;  // a reader's claimed bytes went down (or its window emptied, or it stops)
  std::int64_t claimed = 0;
};

class ParallelBatchReader final : public RecordReader {
 public:
  // Small enough that the parsed blocks in flight stay a few MiB even of short lines (a block of document
  // records takes several times its JSON once parsed), large enough that the lock is taken rarely.
  static constexpr std::size_t kDefaultBlock = std::size_t{128} << 10;
  // InputError if the file cannot be opened. workers >= 1; `budget` may be shared with other readers (null:
  // this reader's own, of workers + 3 blocks).
  ParallelBatchReader(std::string path, int workers, std::shared_ptr<ReadBudget> budget = nullptr,
                      std::size_t block_bytes = kDefaultBlock);
  ~ParallelBatchReader() override;
  ParallelBatchReader(const ParallelBatchReader&) = delete;
  ParallelBatchReader& operator=(const ParallelBatchReader&) = delete;

  bool Next(PackedBatchRecord& record) override;
  std::optional<PackedBatchRecord> Next() override;
  const std::string& path() const override { return path_; }
  std::int64_t bytes_read() const override { return bytes_handed_; }
  std::int64_t record_offset() const override { return record_offset_; }

 private:
  struct Block {
    std::vector<char> text;  // whole lines, then simdjson's padding
    std::size_t size = 0;    // bytes of lines in text
    std::int64_t first_line = 0;
    std::int64_t first_offset = 0;          // where its first line starts in the file
    std::vector<std::int64_t> offsets;      // per record: where its line starts in the block
    std::vector<PackedBatchRecord> records;  // parsed: [0, count), storage reused from block to block
    std::size_t count = 0;
    std::size_t given_back = 0;  // bytes of the caller's records taken back into records since it was claimed
    std::exception_ptr error;  // the first bad line's, after records[0, count)
    bool end = false;          // no block: the file ended before it
    bool ready = false;
  };
  void ReadHeader();
  bool ReadBlock(Block& block, std::size_t target);  // the next lines; false at the end of the file
  static void ParseBlock(Block& block, LineParser& parser);
  void Work();
  bool WithinBudget() const;  // with budget_->mutex held
  bool WaitToClaim(std::unique_lock<std::mutex>& lock);  // false: leave
  void WakeWorkers();
  void Release(std::unique_ptr<Block> block);
  void HandOut(Block& block, PackedBatchRecord& record);  // the block's next record into record

  std::string path_;
  std::FILE* file_ = nullptr;
  std::size_t block_bytes_;
  std::shared_ptr<ReadBudget> budget_;  // its mutex guards every member below but the caller's own
  // Under budget_->mutex:
  std::vector<char> carry_;  // bytes read past the last cut
  bool file_ended_ = false;  // fread found the end
  bool stop_claiming_ = false;  // the end or an error was claimed: nothing after it is needed
  bool stop_ = false;           // the destructor: leave now
  std::int64_t next_line_ = 1;
  std::int64_t next_offset_ = 0;  // where the next block starts in the file
  std::deque<std::unique_ptr<Block>> window_;  // claimed, in file order
  std::vector<std::unique_ptr<Block>> spare_;  // handed out, their storage kept
  std::size_t max_window_;
  std::condition_variable room_;   // this reader's workers: a block left the window, or stop
  std::condition_variable ready_;  // the caller: a block of the window was parsed
  // The caller's own:
  std::unique_ptr<Block> current_;  // being handed out
  std::size_t next_record_ = 0;
  bool started_ = false;
  bool finished_ = false;  // the end or an error was handed out
  std::int64_t bytes_handed_ = 0;
  std::int64_t record_offset_ = -1;
  std::optional<PackedBatchRecord> header_;
  int worker_count_;
  std::vector<std::thread> workers_;
};

}  // namespace packoracle::fastcheck
