// FastBatchReader against PackedBatchReader: the same records from the same files, and the same error (file,
// line, record, field) from the same broken lines, including lines broken at random. ParallelBatchReader
// against both, on the same files, with blocks of a few lines and two workers (errors found ahead must come
// after every record before them).
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <random>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "packoracle/fastcheck/jsonl_reader.h"
#include "packoracle/fastcheck/parallel_reader.h"
#include "packoracle/oracle.h"
#include "packoracle/properties/generators.h"
#include "packoracle/properties/invariants.h"
#include "packoracle/properties/row_members.h"

namespace packoracle::fastcheck {
namespace {

bool Equal(const PackedBatchRecord& a, const PackedBatchRecord& b) {
  if (a.index() != b.index()) return false;
  if (auto* x = std::get_if<HeaderRecord>(&a)) {
    const auto& y = std::get<HeaderRecord>(b);
    return x->policy == y.policy && x->dp_world_size == y.dp_world_size && x->pad_id == y.pad_id;
  }
  if (auto* x = std::get_if<DocumentRecord>(&a)) {
    const auto& y = std::get<DocumentRecord>(b);
    return x->document.uid == y.document.uid && x->document.tokens == y.document.tokens &&
           x->document.supervised == y.document.supervised;
  }
  if (auto* x = std::get_if<MicrobatchRecord>(&a)) {
    const auto& y = std::get<MicrobatchRecord>(b);
    return x->microbatch == y.microbatch && x->flattened == y.flattened && x->line == y.line;
  }
  const auto& x = std::get<StepRecord>(a);
  const auto& y = std::get<StepRecord>(b);
  return x.step == y.step && x.rank == y.rank && x.num_items_in_batch == y.num_items_in_batch && x.loss == y.loss;
}

// Every record of both readers, or the message each threw.
struct Outcome {
  std::vector<PackedBatchRecord> records;
  std::string error;
};

template <class Reader>
Outcome ReadAll(const std::string& path) {
  Outcome out;
  try {
    Reader reader(path);
    while (auto r = reader.Next()) out.records.push_back(std::move(*r));
  } catch (const std::exception& e) {  // InputError, and the odd nlohmann type_error both readers let through
    out.error = e.what();
  }
  return out;
}

// The parallel reader with blocks of about one line (64 bytes) and of a few (300): many blocks in flight at once.
template <std::size_t kBlock>
struct SmallBlocks {
  explicit SmallBlocks(std::string path) : reader(std::move(path), 2, kBlock) {}
  std::optional<PackedBatchRecord> Next() { return reader.Next(); }
  ParallelBatchReader reader;
};

// A reader read as verify reads it: into one record, whose storage each line is parsed into again (the
// parallel reader gives its documents back into the blocks, HandOut); each record kept is a copy.
template <class Reader>
struct OneRecord {
  template <class... Args>
  explicit OneRecord(Args&&... args) : reader(std::forward<Args>(args)...) {}
  std::optional<PackedBatchRecord> Next() {
    if (!reader.Next(record)) return std::nullopt;
    return record;
  }
  Reader reader;
  PackedBatchRecord record;
};
template <std::size_t kBlock>
struct SmallBlocksOneRecord : OneRecord<ParallelBatchReader> {
  explicit SmallBlocksOneRecord(std::string path) : OneRecord(std::move(path), 2, kBlock) {}
};
using FastOneRecord = OneRecord<FastBatchReader>;

void ExpectSameOutcome(const std::string& path) {
  const Outcome want = ReadAll<OracleBatchReader>(path);
  for (const Outcome& got : {ReadAll<FastBatchReader>(path), ReadAll<SmallBlocks<64>>(path), ReadAll<SmallBlocks<300>>(path),
                             ReadAll<FastOneRecord>(path), ReadAll<SmallBlocksOneRecord<300>>(path),
                             ReadAll<SmallBlocksOneRecord<4096>>(path)}) {
    RC_ASSERT(got.error == want.error);
    RC_ASSERT(got.records.size() == want.records.size());
    for (std::size_t k = 0; k < want.records.size(); ++k) RC_ASSERT(Equal(got.records[k], want.records[k]));
  }
}

// The same, as gtest expectations (outside a property).
void ExpectReadersAgree(const std::string& path) {
  const Outcome want = ReadAll<OracleBatchReader>(path);
  for (const Outcome& got : {ReadAll<FastBatchReader>(path), ReadAll<SmallBlocks<64>>(path), ReadAll<SmallBlocks<300>>(path),
                             ReadAll<FastOneRecord>(path), ReadAll<SmallBlocksOneRecord<300>>(path),
                             ReadAll<SmallBlocksOneRecord<4096>>(path)}) {
    EXPECT_EQ(got.error, want.error);
    ASSERT_EQ(got.records.size(), want.records.size());
    for (std::size_t k = 0; k < want.records.size(); ++k) EXPECT_TRUE(Equal(got.records[k], want.records[k])) << k;
  }
}

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("fastcheck_reader_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

// A dump of one generated case as the reference packer writes it.
std::vector<std::string> DumpLines(const PackRequest& request) {
  std::ostringstream os;
  PackedBatchWriter writer(os);
  HeaderRecord header;
  header.policy = request.policy;
  header.dp_world_size = request.dp_world_size;
  writer.Header(header);
  for (const auto& d : Effective(request.documents, request.policy)) writer.Document({d.uid, d.tokens, d.supervised});
  Candidate reference = ReferenceCandidate();
  const PackResult out = reference.packer->Pack(request);
  for (const auto& mb : out.microbatches) writer.Microbatch(mb);
  std::vector<std::string> lines;
  std::istringstream in(os.str());
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

void Write(const std::string& path, const std::vector<std::string>& lines, bool final_newline = true) {
  std::ofstream out(path, std::ios::binary);
  for (std::size_t k = 0; k < lines.size(); ++k) out << lines[k] << (k + 1 < lines.size() || final_newline ? "\n" : "");
}

TEST(FastBatchReader, SameRecordsAsTheNlohmannReaderOnGeneratedDumps) {
  const std::string path = TempPath("generated.jsonl");
  EXPECT_TRUE(rc::check("generated dumps", [&] {
    const PackRequest request = *gen::Request(*rc::gen::elementOf(gen::Profiles()), {});
    Write(path, DumpLines(request), *rc::gen::arbitrary<bool>());
    ExpectSameOutcome(path);
  }));
  std::filesystem::remove(path);
}

// Lines broken at random (a byte replaced, inserted or removed): the same records or the same message.
TEST(FastBatchReader, SameOutcomeAsTheNlohmannReaderOnBrokenLines) {
  const std::string path = TempPath("broken.jsonl");
  EXPECT_TRUE(rc::check("broken dumps", [&] {
    const PackRequest request = *gen::Request(*rc::gen::elementOf(gen::Profiles()), {});
    auto lines = DumpLines(request);
    std::string& line = lines[*rc::gen::inRange<std::size_t>(0, lines.size())];
    const std::string alphabet = "{}[],:\"0123456789-.eE ntrufalsx\\";
    const std::size_t at = *rc::gen::inRange<std::size_t>(0, line.size());
    const char c = alphabet[*rc::gen::inRange<std::size_t>(0, alphabet.size())];
    switch (*rc::gen::inRange(0, 3)) {
      case 0: line[at] = c; break;
      case 1: line.insert(line.begin() + static_cast<std::ptrdiff_t>(at), c); break;
      default: line.erase(at, 1); break;
    }
    Write(path, lines);
    ExpectSameOutcome(path);
  }));
  std::filesystem::remove(path);
}

TEST(FastBatchReader, SameOutcomeOnHandWrittenEdgeCases) {
  const std::string header =
      R"({"record":"header","schema":"packed-batch","version":1,"policy":"reference","dp_world_size":1})";
  const std::string row = R"("rows":[{"input_ids":[1,2],"labels":[2,-100],"doc_spans":[{"doc_uid":"a","start":0,"length":2,"doc_offset":0}]}])";
  const std::vector<std::string> cases = {
      R"({"record":"document","doc_uid":"a","tokens":[1,2]})",
      R"({"record":"document","doc_uid":"a","tokens":[1,2],"supervised":null})",
      R"({"record":"document","doc_uid":"a","tokens":[1,2],"supervised":[1]})",
      R"({"record":"document","doc_uid":"a","tokens":[1,2.0]})",
      R"({"record":"document","doc_uid":"a","tokens":[1,18446744073709551615]})",
      R"({"record":"document","doc_uid":"a","tokens":[1,2]} x)",
      R"({"record":"document","doc_uid":"a","tokens":[1,2],"tokens":[3]})",
      R"({"doc_uid":"a","record":"document","tokens":[1,2]})",
      R"({"record":"document","doc_uid":"a","tokens":[1,2],"extra":[1,,2]})",
      R"({"record":"document","doc_uid":"a\u0062","tokens":[1,2]})",
      R"({"record":"microbatch","step":0,"micro_step":0,"rank":0,)" + row + "}",
      R"({"record":"microbatch","micro_step":0,"rank":0,)" + row + R"(,"producer":null,"flattened":true})",
      R"({"record":"microbatch","micro_step":0,"rank":0,)" + row + R"(,"flattened":1})",
      R"({"record":"microbatch","micro_step":0,)" + row + "}",
      R"({"record":"microbatch","micro_step":0,"rank":0,"rows":[{"input_ids":[1,2],"labels":[2],"doc_spans":[]}]})",
      R"({"record":"microbatch","micro_step":0,"rank":0,"rows":[{"input_ids":[1,2],"labels":[2,3],"doc_spans":[],"position_ids":null,"loss_mask":[1,0.5]}]})",
      R"({"record":"microbatch","micro_step":0,"rank":0,)" + row + R"(,"producer":{"loss_sum":1,"denominator":2}})",
      R"({"record":"microbatch","micro_step":0,"rank":0,)" + row + R"(,"producer":{"loss_sum":1,"denominator":2,"denominator_scope":"global","loss":null}})",
      R"({"record":"step","step":0,"loss":1.5})",
      R"({"record":"unknown"})",
      // Found by fuzz/fast_batch_fuzzer.cc: a number beyond double (nlohmann's out_of_range, once uncaught),
      // a malformed `null` that simdjson's type() calls null, a non-array doc_spans and a repeated rows
      // (a default simdjson array iterated: undefined behaviour).
      R"({"record":"document","doc_uid":"a","tokens":[1,2],"extra":1e999})",
      R"({"record":"document","doc_uid":"a","tokens":[1,2],"extra":{"eos":nulx}})",
      R"({"record":"document","doc_uid":"a","tokens":[1,2],"supervised":nul})",
      R"({"record":"document","doc_uid":"a","tokens":[1,2],"extra":[{"doc\ui":1}]})",
      R"({"record":"microbatch","micro_step":0,"rank":0,"rows":[{"input_ids":[1,2],"labels":[2,3],"doc_spans":[],"loss_mask":nulll}]})",
      R"({"record":"microbatch","micro_step":0,"rank":0,"rows":[{"input_ids":[1,2],"labels":[2,3],"doc_spans":5}]})",
      R"({"record":"microbatch","micro_step":0,"rank":0,)" + row + "," + row + "}",
      "   ",
      "[1,2]",
  };
  const std::string path = TempPath("edge.jsonl");
  for (const auto& line : cases) {
    SCOPED_TRACE(line);
    Write(path, {header, line, R"({"record":"document","doc_uid":"z","tokens":[]})"});
    ExpectReadersAgree(path);
  }
  std::filesystem::remove(path);
}

// Lines whose optional fields come and go, read into one record over and over: nothing of an earlier line
// may stay in it (a document's supervised flags, a row's loss_mask or position_ids, a longer line's tail).
TEST(FastBatchReader, ARecordReadIntoAgainKeepsNothingOfAnEarlierLine) {
  const std::string header =
      R"({"record":"header","schema":"packed-batch","version":1,"policy":"reference","dp_world_size":1})";
  const std::string spans = R"("doc_spans":[{"doc_uid":"a","start":0,"length":2,"doc_offset":0}])";
  std::vector<std::string> lines = {header};
  for (int k = 0; k < 40; ++k) {
    const std::string uid = "\"d" + std::to_string(k);
    lines.push_back(R"({"record":"document","doc_uid":)" + uid + R"(a","tokens":[1,2,3,4,5],"supervised":[1,0,1,1,0]})");
    lines.push_back(R"({"record":"document","doc_uid":)" + uid + R"(b","tokens":[6]})");
    lines.push_back(R"({"record":"document","doc_uid":)" + uid + R"(c","tokens":[7,8],"supervised":null})");
    lines.push_back(R"({"record":"microbatch","micro_step":0,"rank":0,"rows":[{"input_ids":[1,2],"labels":[2,-100],)" +
                    spans + R"(,"position_ids":[0,1],"loss_mask":[1,0]},{"input_ids":[3],"labels":[3],"doc_spans":[]}]})");
    lines.push_back(R"({"record":"microbatch","micro_step":1,"rank":0,"rows":[{"input_ids":[1,2],"labels":[2,-100],)" +
                    spans + "}]}");
    lines.push_back(R"({"record":"document","doc_uid":)" + uid + R"(e","tokens":[]})");
  }
  const std::string path = TempPath("reused.jsonl");
  Write(path, lines);
  ExpectReadersAgree(path);
  std::filesystem::remove(path);
}

// Every field of the row table (row_fields.h, row_members.h), each row giving one optional field and the
// last all of them, and every field of the producer table (kProducerTotalsFields): written by the writer, read
// back by both readers as it was (a field a reader or the writer skipped would come back absent or empty).
TEST(FastBatchReader, EveryFieldOfTheRowAndProducerTablesIsWrittenAndReadBack) {
  CandidateMicrobatch mb;
  CandidateRow full;
  ForEachRowField([&](auto i) {
    constexpr std::size_t I = decltype(i)::value;
    auto& member = RowMember<I>(full);
    if constexpr (I == kRowSpansField) member = {{"a", 0, 3, 7}};
    else if constexpr (kRowFields[I].required) member = {1, 2, 3 + static_cast<Token>(I)};
    else member = typename std::remove_cvref_t<decltype(member)>::value_type{0, 1, 1};
  });
  ForEachRowField([&](auto i) {
    constexpr std::size_t I = decltype(i)::value;
    if constexpr (!kRowFields[I].required) {
      CandidateRow one = full;
      ForEachRowField([&](auto j) {
        if constexpr (!kRowFields[decltype(j)::value].required && decltype(j)::value != I)
          RowMember<decltype(j)::value>(one).reset();
      });
      mb.rows.push_back(one);
    }
  });
  mb.rows.push_back(full);
  mb.producer = ProducerTotals{4.0, 3.0, "global", 4.0 / 3.0, std::nullopt};
  std::ostringstream os;
  PackedBatchWriter writer(os);
  writer.Header(HeaderRecord{});
  writer.Document({"a", {1, 2, 3}, {1, 1, 1}});
  writer.Microbatch(mb);
  const std::string path = TempPath("every_field.jsonl");
  {
    std::ofstream out(path);
    out << os.str();
  }
  for (const Outcome& got : {ReadAll<OracleBatchReader>(path), ReadAll<FastBatchReader>(path)}) {
    ASSERT_EQ(got.error, "");
    ASSERT_EQ(got.records.size(), 3u);
    EXPECT_EQ(std::get<MicrobatchRecord>(got.records[2]).microbatch.rows, mb.rows);
    EXPECT_EQ(std::get<MicrobatchRecord>(got.records[2]).microbatch.producer, mb.producer);
  }
  std::filesystem::remove(path);
}

TEST(FastBatchReader, SameRecordsOnTheExampleDumps) {
  for (const auto& entry : std::filesystem::directory_iterator(PACKORACLE_EXAMPLE_DUMPS)) {
    SCOPED_TRACE(entry.path().string());
    ExpectReadersAgree(entry.path().string());
    // And the fast path really read them: only the header and step records go to nlohmann (were the fast
    // parser to refuse every line, every comparison above would still hold).
    FastBatchReader reader(entry.path().string());
    std::int64_t slow = 0;
    while (auto r = reader.Next()) slow += std::holds_alternative<HeaderRecord>(*r) || std::holds_alternative<StepRecord>(*r);
    EXPECT_EQ(reader.fallbacks(), slow);
  }
}

// Found in review: a nesting deeper than the stack (an ignored field of 200,000 `[`) goes to nlohmann, which
// parses it without recursion, instead of overflowing the stack in the fast reader's validation.
TEST(FastBatchReader, DeepNestingInAnIgnoredFieldIsReadLikeTheNlohmannReader) {
  const std::string header =
      R"({"record":"header","schema":"packed-batch","version":1,"policy":"reference","dp_world_size":1})";
  const std::size_t depth = 200000;
  const std::string deep = std::string(depth, '[') + std::string(depth, ']');
  const std::string path = TempPath("deep.jsonl");
  Write(path, {header, R"({"record":"document","doc_uid":"a","tokens":[1,2],"extra":)" + deep + "}"});
  ExpectReadersAgree(path);
  std::filesystem::remove(path);
}

// Found in review: nlohmann reads the integer `-0` as 0, hence +0.0; simdjson's get_double gives -0.0. The sign
// must be the nlohmann reader's (== cannot tell them apart, signbit can); `-0.0` written as a float stays -0.0.
TEST(FastBatchReader, NegativeZeroHasTheNlohmannReadersSign) {
  const std::string header =
      R"({"record":"header","schema":"packed-batch","version":1,"policy":"reference","dp_world_size":1})";
  const std::string path = TempPath("zero.jsonl");
  Write(path, {header,
               R"({"record":"microbatch","micro_step":0,"rank":0,"rows":[{"input_ids":[1,2],"labels":[2,-100],"loss_mask":[-0,-0.0],)"
               R"("doc_spans":[{"doc_uid":"a","start":0,"length":2,"doc_offset":0}]}],)"
               R"("producer":{"loss_sum":-0,"denominator":1,"denominator_scope":"global","loss":-0.0}})"});
  const Outcome want = ReadAll<OracleBatchReader>(path);
  const Outcome got = ReadAll<FastBatchReader>(path);
  ASSERT_EQ(want.error, "");
  ASSERT_EQ(got.error, "");
  ASSERT_EQ(got.records.size(), 2u);
  const auto& a = std::get<MicrobatchRecord>(want.records[1]).microbatch;
  const auto& b = std::get<MicrobatchRecord>(got.records[1]).microbatch;
  for (std::size_t i = 0; i < 2; ++i) EXPECT_EQ(std::signbit((*b.rows[0].loss_mask)[i]), std::signbit((*a.rows[0].loss_mask)[i])) << i;
  EXPECT_FALSE(std::signbit((*b.rows[0].loss_mask)[0]));
  EXPECT_TRUE(std::signbit((*b.rows[0].loss_mask)[1]));
  EXPECT_EQ(std::signbit(b.producer->loss_sum.value()), std::signbit(a.producer->loss_sum.value()));
  EXPECT_EQ(std::signbit(*b.producer->loss), std::signbit(*a.producer->loss));
  std::filesystem::remove(path);
}

// Reads of a few bytes at a time (the fuzz target's mode): a dump whose lines straddle every read, and a line
// much longer than a read, give the same records as one read of the whole file.
TEST(FastBatchReader, SmallReadsGiveTheSameRecords) {
  for (const auto& entry : std::filesystem::directory_iterator(PACKORACLE_EXAMPLE_DUMPS)) {
    SCOPED_TRACE(entry.path().string());
    const Outcome want = ReadAll<FastBatchReader>(entry.path().string());
    for (std::size_t chunk : {1, 2, 7, 61, 4096}) {
      SCOPED_TRACE(chunk);
      Outcome got;
      try {
        FastBatchReader reader(std::fopen(entry.path().string().c_str(), "rb"), entry.path().string(), chunk);
        while (auto r = reader.Next()) got.records.push_back(std::move(*r));
      } catch (const std::exception& e) {
        got.error = e.what();
      }
      EXPECT_EQ(got.error, want.error);
      ASSERT_EQ(got.records.size(), want.records.size());
      for (std::size_t k = 0; k < want.records.size(); ++k) EXPECT_TRUE(Equal(got.records[k], want.records[k]));
    }
  }
}

// A reader left early (the audit stopped on an error elsewhere) waits for the block a worker may be parsing
// for it and leaves the pool: no hang, and the pool's bytes are whole again for the readers that remain.
TEST(ParallelBatchReader, LeftEarlyLeavesThePoolAndReturnsItsBytes) {
  auto pool = std::make_shared<ReadPool>(1 << 10, 2);
  for (const auto& entry : std::filesystem::directory_iterator(PACKORACLE_EXAMPLE_DUMPS)) {
    SCOPED_TRACE(entry.path().string());
    ParallelBatchReader reader(entry.path().string(), pool, 16);
    ASSERT_TRUE(reader.Next().has_value());  // the header
    reader.Next();
  }
  EXPECT_EQ(pool->claimed(), 0);
}

// Readers of several files sharing one pool (its workers parse for all of them, its bytes bound them together),
// read in a random order one record at a time as an audit reads them, some left early: each gives its own
// file's records and error, as the nlohmann reader does; the pool's bytes are whole again at the end.
TEST(ReadPool, ReadersSharingItEachGiveTheirOwnFilesRecords) {
  EXPECT_TRUE(rc::check("files sharing a pool", [&] {
    const std::size_t files = *rc::gen::inRange<std::size_t>(1, 5);
    std::vector<std::string> paths;
    for (std::size_t f = 0; f < files; ++f) {
      auto lines = DumpLines(*gen::Request(*rc::gen::elementOf(gen::Profiles()), {}));
      if (*rc::gen::inRange(0, 3) == 0) {  // a broken line: an error after some records
        std::string& line = lines[*rc::gen::inRange<std::size_t>(1, lines.size())];
        line.erase(*rc::gen::inRange<std::size_t>(0, line.size()), 1);
      }
      paths.push_back(TempPath("pool" + std::to_string(f) + ".jsonl"));
      Write(paths.back(), lines);
    }
    const auto pool = std::make_shared<ReadPool>(*rc::gen::inRange<std::int64_t>(1, 4096), *rc::gen::inRange(1, 4));
    const auto block = *rc::gen::inRange<std::size_t>(16, 600);
    std::vector<std::unique_ptr<ParallelBatchReader>> readers;
    std::vector<Outcome> got(files);
    std::vector<bool> open(files, true);
    std::vector<std::size_t> leave_after(files, SIZE_MAX);
    for (std::size_t f = 0; f < files; ++f) {
      readers.push_back(std::make_unique<ParallelBatchReader>(paths[f], pool, block));
      if (*rc::gen::inRange(0, 4) == 0) leave_after[f] = *rc::gen::inRange<std::size_t>(0, 6);
    }
    PackedBatchRecord record;
    std::mt19937 order(*rc::gen::arbitrary<std::uint32_t>());  // which reader is read next (rapidcheck draws
                                                               // are kept for shrinking: too many here)
    for (std::size_t left = files; left > 0;) {
      const std::size_t f = std::uniform_int_distribution<std::size_t>(0, files - 1)(order);
      if (!open[f]) continue;
      bool more = false;
      try {
        more = got[f].records.size() < leave_after[f] && readers[f]->Next(record);
        if (more) got[f].records.push_back(record);
      } catch (const std::exception& e) {
        got[f].error = e.what();
      }
      if (!more) {
        readers[f].reset();  // a reader left early joins nothing of the pool's, and gives its bytes back
        open[f] = false;
        --left;
      }
    }
    RC_ASSERT(pool->claimed() == 0);
    for (std::size_t f = 0; f < files; ++f) {
      const Outcome want = ReadAll<OracleBatchReader>(paths[f]);
      if (leave_after[f] == SIZE_MAX) RC_ASSERT(got[f].error == want.error);
      RC_ASSERT(got[f].records.size() <= want.records.size());
      // Read to its end, a reader gives every record before the error too (an error found ahead waits its turn).
      if (leave_after[f] == SIZE_MAX) RC_ASSERT(got[f].records.size() == want.records.size());
      for (std::size_t k = 0; k < got[f].records.size(); ++k) RC_ASSERT(Equal(got[f].records[k], want.records[k]));
      std::filesystem::remove(paths[f]);
    }
  }));
}

// An empty file and one of blank lines: FastBatchReader's message, from the first Next().
TEST(ParallelBatchReader, EmptyFileIsRefusedLikeTheFastReader) {
  const std::string path = TempPath("empty.jsonl");
  for (const std::vector<std::string>& lines : {std::vector<std::string>{}, std::vector<std::string>{"", "  ", ""}}) {
    Write(path, lines);
    EXPECT_EQ(ReadAll<SmallBlocks<64>>(path).error, ReadAll<FastBatchReader>(path).error);
    EXPECT_NE(ReadAll<FastBatchReader>(path).error, "");
  }
  std::filesystem::remove(path);
}

// verify reads a failing step again to report it: each record's offset is where its line starts (blank lines
// and all), in both readers, and a reader resumed there gives the same records from that one on.
TEST(RecordOffsets, EachRecordsLineStartAndAReaderResumedThereGivesTheSameRecords) {
  for (const auto& entry : std::filesystem::directory_iterator(PACKORACLE_EXAMPLE_DUMPS)) {
    const std::string path = entry.path().string();
    SCOPED_TRACE(path);
    std::ifstream in(path, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::int64_t> line_start{0};  // line k + 1 starts at line_start[k]
    for (std::size_t k = 0; k < text.size(); ++k)
      if (text[k] == '\n') line_start.push_back(static_cast<std::int64_t>(k + 1));
    FastBatchReader fast(path);
    ParallelBatchReader parallel(path, 2, 64);
    std::vector<std::pair<std::int64_t, PackedBatchRecord>> records;  // (offset, record)
    for (PackedBatchRecord r; fast.Next(r);) {
      PackedBatchRecord same;
      ASSERT_TRUE(parallel.Next(same));
      EXPECT_EQ(fast.record_offset(), parallel.record_offset());
      records.emplace_back(fast.record_offset(), std::move(r));
    }
    for (std::size_t k = 1; k < records.size(); ++k) {
      const auto* m = std::get_if<MicrobatchRecord>(&records[k].second);
      if (!m) continue;
      ASSERT_LT(static_cast<std::size_t>(m->line - 1), line_start.size());
      EXPECT_EQ(records[k].first, line_start[static_cast<std::size_t>(m->line - 1)]);
      FastBatchReader resumed(path, records[k].first, m->line);
      for (std::size_t j = k; j < records.size(); ++j) {
        auto r = resumed.Next();
        ASSERT_TRUE(r.has_value());
        EXPECT_TRUE(Equal(*r, records[j].second)) << j;
      }
      EXPECT_FALSE(resumed.Next().has_value());
    }
  }
}

}  // namespace
}  // namespace packoracle::fastcheck
