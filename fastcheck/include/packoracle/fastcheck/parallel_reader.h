// FastBatchReader's records, parsed ahead on worker threads while the caller checks the ones it has.
//
// The file is cut into blocks of whole lines (about `block_bytes` each, or one line when a line is longer);
// a worker takes the next block, parses it into records with its own LineParser, and the caller's Next()
// hands the records out strictly in file order. So the records, and the InputError of the first bad line
// (file:line, record, field), are exactly FastBatchReader's: an error found ahead is delivered when the
// caller reaches that line, after every record before it (reader_test.cc checks both readers agree).
//
// The readers of one audit (one per file) share a ReadPool: its threads parse for all of them, and its bytes
// bound what they claim ahead together, so eight rank files take the threads and the memory of one file.
// A free worker claims for the reader whose caller waits, else for the one with the fewest blocks ahead:
// the audit takes a step's micro-batches file by file, and the file it drains is the one refilled first.
// Memory is bounded: each reader has at most pool workers + 3 blocks claimed and not yet handed out (the
// pool's bytes bound their JSON, all readers together), and a block's JSON is let go once parsed. Its records
// go to the caller; a caller that reads into the same record gives its last document back into the block (a
// worker parses into its storage again: no allocation per document), at most four times the block's JSON
// bytes a pass (HandOut). That storage is the reader's own, outside the pool's bytes: at most four times the
// JSON of each block it holds (claimed, the one handed out, and kSpareBlocks kept). Each reader may always
// hold one block, so a caller waiting on any file never waits for the bytes.
//
//   auto pool = std::make_shared<fastcheck::ReadPool>(/*bytes=*/8 << 20, /*workers=*/2);
//   fastcheck::ParallelBatchReader reader("rank0.jsonl", pool);
//   PackedBatchRecord record;
//   while (reader.Next(record)) { ... }
// A reader's destructor waits for the block a worker may be parsing for it (also when the caller leaves on
// an exception); the pool's joins its threads, once the last reader holding it is gone.
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

class ParallelBatchReader;

// The threads that parse for the readers sharing it, and the bytes of blocks they may have claimed and not yet
// handed out, all readers together.
class ReadPool {
 public:
  ReadPool(std::int64_t bytes, int workers);  // workers >= 1
  ~ReadPool();                                 // stops and joins the workers
  ReadPool(const ReadPool&) = delete;
  ReadPool& operator=(const ReadPool&) = delete;
  int workers() const { return static_cast<int>(threads_.size()); }
  std::int64_t claimed() const;

 private:
  friend class ParallelBatchReader;
  void Work();
  void Stop();
  ParallelBatchReader* NextToClaim() const;  // with mutex_ held; null: none may claim now
  const std::int64_t limit_;
  mutable std::mutex mutex_;  // guards every member here, and each reader's shared state
  std::condition_variable work_;  // a reader may claim: one registered, room in a window, bytes let go, a
                                  // caller waits; or stop
  std::int64_t claimed_ = 0;
  std::vector<ParallelBatchReader*> readers_;  // those whose header was read, until their destructor
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

class ParallelBatchReader final : public RecordReader {
 public:
  // Small enough that the parsed blocks in flight stay a few MiB even of short lines (a block of document
  // records takes several times its JSON once parsed), large enough that the lock is taken rarely.
  static constexpr std::size_t kDefaultBlock = std::size_t{128} << 10;
  static constexpr std::size_t kSpareBlocks = 2;  // handed-out blocks kept for their storage
  // InputError if the file cannot be opened. With a pool of its own (workers >= 1, workers + 3 blocks), or
  // one shared with other readers.
  ParallelBatchReader(std::string path, int workers, std::size_t block_bytes = kDefaultBlock);
  ParallelBatchReader(std::string path, std::shared_ptr<ReadPool> pool, std::size_t block_bytes = kDefaultBlock);
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
  friend class ReadPool;
  void ReadHeader();
  bool ReadBlock(Block& block, std::size_t target);  // the next lines; false at the end of the file
  static void ParseBlock(Block& block, LineParser& parser, const std::string& path);
  bool MayClaim() const;  // with pool_->mutex_ held
  void ClaimAndParse(std::unique_lock<std::mutex>& lock, LineParser& parser);  // a worker, with the lock
  void Release(std::unique_ptr<Block> block);
  void HandOut(Block& block, PackedBatchRecord& record);  // the block's next record into record

  std::string path_;
  std::FILE* file_ = nullptr;
  std::size_t block_bytes_;
  std::shared_ptr<ReadPool> pool_;  // its mutex guards every member below but the caller's own
  // Under pool_->mutex_:
  std::vector<char> carry_;  // bytes read past the last cut
  bool file_ended_ = false;  // fread found the end
  bool stop_claiming_ = false;  // the end or an error was claimed: nothing after it is needed
  bool stop_ = false;           // the destructor: leave now
  std::int64_t next_line_ = 1;
  std::int64_t next_offset_ = 0;  // where the next block starts in the file
  std::deque<std::unique_ptr<Block>> window_;  // claimed, in file order
  std::vector<std::unique_ptr<Block>> spare_;  // handed out, their storage kept
  std::size_t max_window_;
  int in_flight_ = 0;       // blocks a worker is parsing
  bool waiting_ = false;    // the caller waits for the front block
  std::condition_variable ready_;  // the caller: a block was parsed (also its destructor: in_flight_ fell)
  // The caller's own:
  std::unique_ptr<Block> current_;  // being handed out
  std::size_t next_record_ = 0;
  bool started_ = false;
  bool finished_ = false;  // the end or an error was handed out
  std::int64_t bytes_handed_ = 0;
  std::int64_t record_offset_ = -1;
  std::optional<PackedBatchRecord> header_;
};

}  // namespace packoracle::fastcheck
