// ParallelBatchReader (parallel_reader.h): blocks of whole lines claimed in file order by the workers, parsed
// outside the lock, handed out in order by the caller's Next().
#include "packoracle/fastcheck/parallel_reader.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <variant>

#include <simdjson.h>
#if defined(__linux__)
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "line_parser.h"
#include "packoracle/oracle/error.h"

namespace packoracle::fastcheck {

namespace {

// The caller checks what the workers parse, and three threads on two cores share them evenly unless told
// otherwise, so the caller, the slower stage, ran two thirds of the time. A worker yields to it (nice + 10:
// on Linux each thread has its own) and takes the cycles it leaves: verify --jobs 2 on short documents
// 0.48–0.54 s → 0.44–0.46 s, the other shapes unchanged (bench/README.md). Failure costs only that speed.
// The trade: a worker cuts its block (fread, memchr) under the pool's lock, and on a loaded machine a worker
// at nice + 10 descheduled there holds the caller up until it runs again; correctness is untouched.
void LowerThisThreadsPriority() {
#if defined(__linux__)
  const auto thread = static_cast<id_t>(syscall(SYS_gettid));  // (gettid() itself needs glibc 2.30)
  setpriority(PRIO_PROCESS, thread, std::min(getpriority(PRIO_PROCESS, thread) + 10, 19));
#endif
}

}  // namespace

ReadPool::ReadPool(std::int64_t bytes, int workers) : limit_(bytes) {
  try {
    for (int k = 0; k < std::max(workers, 1); ++k) threads_.emplace_back([this] { Work(); });
  } catch (...) {  // a thread that could not start: those that did are stopped and joined, not left running
    Stop();
    throw;
  }
}

ReadPool::~ReadPool() { Stop(); }

void ReadPool::Stop() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  work_.notify_all();
  for (auto& thread : threads_) thread.join();
}

std::int64_t ReadPool::claimed() const {
  std::lock_guard lock(mutex_);
  return claimed_;
}

// The reader whose caller waits with nothing claimed (a block already being parsed for it is no reason to
// hold the others back), else the one with the fewest blocks ahead (the file the audit drains is refilled
// first), among those that may claim.
ParallelBatchReader* ReadPool::NextToClaim() const {
  ParallelBatchReader* best = nullptr;
  bool best_urgent = false;
  for (ParallelBatchReader* reader : readers_) {
    if (!reader->MayClaim()) continue;
    const bool urgent = reader->waiting_ && reader->window_.empty();
    if (!best || urgent > best_urgent || (urgent == best_urgent && reader->window_.size() < best->window_.size())) {
      best = reader;
      best_urgent = urgent;
    }
  }
  return best;
}

// One parser for every file: it names the file of the block it parses in its messages.
void ReadPool::Work() {
  LowerThisThreadsPriority();
  LineParser parser("", true);
  std::unique_lock lock(mutex_);
  for (;;) {
    if (stop_) return;
    if (ParallelBatchReader* reader = NextToClaim()) {
      reader->ClaimAndParse(lock, parser);
    } else {
      work_.wait(lock);
    }
  }
}

ParallelBatchReader::ParallelBatchReader(std::string path, int workers, std::size_t block_bytes)
    : ParallelBatchReader(std::move(path),
                          std::make_shared<ReadPool>(
                              static_cast<std::int64_t>((static_cast<std::size_t>(std::max(workers, 1)) + 3) *
                                                        std::max<std::size_t>(block_bytes, 1)),
                              workers),
                          block_bytes) {}

ParallelBatchReader::ParallelBatchReader(std::string path, std::shared_ptr<ReadPool> pool, std::size_t block_bytes)
    : path_(std::move(path)),
      block_bytes_(std::max<std::size_t>(block_bytes, 1)),
      pool_(std::move(pool)),
      max_window_(pool_ ? static_cast<std::size_t>(pool_->workers()) + 3 : 0) {
  if (!pool_) throw std::invalid_argument("ParallelBatchReader: pool is null (the other constructor makes one)");
  file_ = std::fopen(path_.c_str(), "rb");
  if (!file_) throw InputError(path_ + ": cannot open the file");
}

ParallelBatchReader::~ParallelBatchReader() {
  {
    // No block is claimed for it any more; the one a worker may be parsing is waited for; the bytes it holds
    // go back to the readers sharing the pool.
    std::unique_lock lock(pool_->mutex_);
    stop_ = true;
    ready_.wait(lock, [&] { return in_flight_ == 0; });
    std::erase(pool_->readers_, this);
    for (const auto& block : window_) pool_->claimed_ -= static_cast<std::int64_t>(block->size);
    if (current_) pool_->claimed_ -= static_cast<std::int64_t>(current_->size);
  }
  pool_->work_.notify_all();
  if (file_) std::fclose(file_);
}

// The next lines: at least `target` bytes, cut just after a newline (or at the end of the file); one line
// when a line is longer. The caller holds pool_->mutex_, or no worker may claim for this reader yet.
bool ParallelBatchReader::ReadBlock(Block& block, std::size_t target) {
  std::vector<char>& text = block.text;
  text.assign(carry_.begin(), carry_.end());
  carry_.clear();
  std::size_t scanned = 0, cut = 0;
  for (;;) {
    if (text.size() >= target) {
      const std::size_t from = std::max(scanned, target - 1);
      const void* nl = from < text.size() ? std::memchr(text.data() + from, '\n', text.size() - from) : nullptr;
      if (nl) {
        cut = static_cast<std::size_t>(static_cast<const char*>(nl) - text.data()) + 1;
        break;
      }
      scanned = text.size();
    }
    if (file_ended_) {
      cut = text.size();  // the last line, without its newline
      break;
    }
    const std::size_t had = text.size();
    text.resize(had + block_bytes_);
    const std::size_t got = std::fread(text.data() + had, 1, block_bytes_, file_);
    text.resize(had + got);
    if (got == 0) file_ended_ = true;
  }
  if (cut == 0) return false;
  carry_.assign(text.begin() + static_cast<std::ptrdiff_t>(cut), text.end());
  block.size = cut;
  text.resize(cut + simdjson::SIMDJSON_PADDING);
  block.first_line = next_line_;
  block.first_offset = next_offset_;
  next_offset_ += static_cast<std::int64_t>(cut);
  // Lines are long (a micro-batch is kilobytes to megabytes): memchr from newline to newline is far faster
  // than a byte loop, and this runs under the lock.
  for (const char* at = text.data(); (at = static_cast<const char*>(std::memchr(at, '\n', text.data() + cut - at)));) {
    ++next_line_;
    ++at;
  }
  return true;
}

// Every line of the block into its records; the first bad line's error kept, as FastBatchReader would throw it.
void ParallelBatchReader::ParseBlock(Block& block, LineParser& parser, const std::string& path) {
  block.count = 0;
  block.error = nullptr;
  try {
    parser.set_path(path);
    std::size_t at = 0;
    std::int64_t line = block.first_line;
    while (at < block.size) {
      const char* start = block.text.data() + at;
      const void* nl = std::memchr(start, '\n', block.size - at);
      const std::size_t length = nl ? static_cast<std::size_t>(static_cast<const char*>(nl) - start) : block.size - at;
      if (block.count == block.records.size()) block.records.emplace_back();
      if (parser.Parse(start, length, block.text.size() - at, line, block.records[block.count])) {
        if (block.offsets.size() <= block.count) block.offsets.resize(block.count + 1);
        block.offsets[block.count++] = block.first_offset + static_cast<std::int64_t>(at);
      }
      at += length + 1;
      ++line;
    }
  } catch (...) {
    block.error = std::current_exception();
  }
}

// The header first, on the caller's thread: its errors (an empty file too) are thrown by the first Next(),
// as FastBatchReader throws them; the workers then parse knowing it was read.
void ParallelBatchReader::ReadHeader() {
  LineParser parser(path_, false);
  Block block;
  while (ReadBlock(block, 1)) {  // one line at a time, blank ones skipped
    ParseBlock(block, parser, path_);
    if (block.error) std::rethrow_exception(block.error);
    bytes_handed_ += static_cast<std::int64_t>(block.size);
    if (block.count > 0) {
      header_ = std::move(block.records[0]);
      record_offset_ = block.offsets[0];
      return;
    }
  }
  throw InputError(path_ + ": empty (a packed-batch file starts with its header record)");
}

bool ParallelBatchReader::MayClaim() const {
  // (Only readers in pool_->readers_ are asked: their header was read.)
  if (stop_ || stop_claiming_ || window_.size() >= max_window_) return false;
  if (window_.empty()) return true;  // one block always: a caller waiting on this file must not wait for others
  return pool_->claimed_ + static_cast<std::int64_t>(block_bytes_) <= pool_->limit_;
}

// The next block claimed (cut under the lock: blocks are cut in file order), parsed outside it, made ready.
void ParallelBatchReader::ClaimAndParse(std::unique_lock<std::mutex>& lock, LineParser& parser) {
  std::unique_ptr<Block> owned;
  if (!spare_.empty()) {
    owned = std::move(spare_.back());
    spare_.pop_back();
  } else {
    owned = std::make_unique<Block>();
  }
  Block& block = *owned;
  block.ready = block.end = false;
  block.error = nullptr;
  block.given_back = 0;
  block.count = 0;
  bool got = false;
  try {
    got = ReadBlock(block, block_bytes_);
  } catch (...) {
    block.error = std::current_exception();
    block.size = 0;
    got = true;
  }
  window_.push_back(std::move(owned));
  if (!got || block.error) {
    block.end = !got;
    block.size = 0;
    block.ready = true;
    stop_claiming_ = true;
    ready_.notify_all();
    return;
  }
  pool_->claimed_ += static_cast<std::int64_t>(block.size);
  ++in_flight_;
  lock.unlock();
  ParseBlock(block, parser, path_);
  // Slots past this pass's records let go what an earlier pass left in them: what HandOut gave back stays
  // within this pass's bound.
  if (block.records.size() > block.count) block.records.resize(block.count);
  std::vector<char>().swap(block.text);  // the records hold what is needed: the JSON is let go at once
  lock.lock();
  --in_flight_;
  block.ready = true;
  if (block.error) stop_claiming_ = true;  // nothing after the first bad line is read
  ready_.notify_all();  // the caller, if it waits for this block; the destructor, if it waits for in_flight_
}

void ParallelBatchReader::Release(std::unique_ptr<Block> block) {
  {
    std::lock_guard lock(pool_->mutex_);
    pool_->claimed_ -= static_cast<std::int64_t>(block->size);
    block->size = 0;
    if (spare_.size() < kSpareBlocks) spare_.push_back(std::move(block));  // its storage serves the next block
  }
  pool_->work_.notify_all();
}

namespace {

// Bytes a document record's storage holds.
std::size_t HeldBytes(const Document& d) {
  return d.uid.capacity() + sizeof(Token) * d.tokens.capacity() + sizeof(int) * d.supervised.capacity();
}

}  // namespace

// The block's next record goes to the caller; the caller's last record, where it is a document, goes back
// into its slot, where a worker parses a later block's document into it. Without that, every document a
// worker parses is allocated afresh and freed by the caller, and glibc frees a chunk into the arena of the
// thread that allocated it, under that arena's lock: on short documents the three threads spent a fifth of
// their time in malloc, free and the futexes of its locks (verify --jobs 2: 0.75 s; 0.48 s with this).
// Bounded: a block takes back at most kGiveBack times its JSON's bytes a pass (a document's tokens take up
// to four times their JSON), so its slots hold no more than that once the caller has passed it. Micro-batch
// records are moved out as before (verify keeps spare ones of its own; their blocks are a line or a few).
void ParallelBatchReader::HandOut(Block& block, PackedBatchRecord& record) {
  constexpr std::size_t kGiveBack = 4;
  PackedBatchRecord& slot = block.records[next_record_++];
  auto* given = std::get_if<DocumentRecord>(&record);
  auto* parsed = std::get_if<DocumentRecord>(&slot);
  if (given && parsed) {
    const std::size_t bytes = HeldBytes(given->document);
    if (block.given_back + bytes <= kGiveBack * block.size) {
      block.given_back += bytes;
      std::swap(*given, *parsed);
      return;
    }
  }
  record = std::move(slot);
}

bool ParallelBatchReader::Next(PackedBatchRecord& record) {
  if (!started_) {
    started_ = true;
    finished_ = true;  // until the header is read: a reader whose header was refused gives nothing more
    ReadHeader();
    finished_ = false;
    record = std::move(*header_);
    header_.reset();
    {
      std::lock_guard lock(pool_->mutex_);
      pool_->readers_.push_back(this);  // the pool's workers may now claim for it
    }
    pool_->work_.notify_all();
    return true;
  }
  for (;;) {
    if (current_) {
      if (next_record_ < current_->count) {
        record_offset_ = current_->offsets[next_record_];
        HandOut(*current_, record);
        return true;
      }
      if (current_->error) {
        finished_ = true;
        std::rethrow_exception(std::exchange(current_->error, nullptr));
      }
      if (current_->end) finished_ = true;
      Release(std::move(current_));
    }
    if (finished_) return false;
    std::unique_lock lock(pool_->mutex_);
    if (window_.empty() || !window_.front()->ready) {
      waiting_ = true;  // the pool's workers claim for this reader first
      lock.unlock();
      pool_->work_.notify_all();
      lock.lock();
      ready_.wait(lock, [&] { return !window_.empty() && window_.front()->ready; });
      waiting_ = false;
    }
    current_ = std::move(window_.front());
    window_.pop_front();
    next_record_ = 0;
    bytes_handed_ += static_cast<std::int64_t>(current_->size);
    lock.unlock();
    pool_->work_.notify_all();  // room in the window for one more block
  }
}

std::optional<PackedBatchRecord> ParallelBatchReader::Next() {
  PackedBatchRecord record;
  if (!Next(record)) return std::nullopt;
  return record;
}

}  // namespace packoracle::fastcheck
