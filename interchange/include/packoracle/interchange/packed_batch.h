// The `packed-batch` JSON Lines format, version 1 (DESIGN §5): a streaming, strict reader and a writer.
//
//   PackedBatchReader reader("rank0.jsonl");            // InputError if it cannot be opened
//   while (auto record = reader.Next()) {                // one line at a time: memory does not grow
//     if (auto* mb = std::get_if<MicrobatchRecord>(&*record)) ...
//   }
//
// Strict: a missing required field, a wrong type or a length mismatch is an InputError naming the file, the
// line, the record type and the field; unknown fields are ignored; blank lines are skipped. The header comes
// first, once.
#pragma once

#include <cstdint>
#include <fstream>
#include <istream>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "packoracle/properties/candidate.h"

namespace packoracle {

struct HeaderRecord {
  nlohmann::json producer;             // {system, component, version, ...} as written
  std::optional<Token> pad_id, bos_id, eos_id, eod_id;  // special_ids
  std::int64_t dp_world_size = 1;
  std::int64_t grad_accum_steps = 1;
  nlohmann::json policy_json;          // the policy object as written
  Policy policy;                       // resolved (preset applied, keys over it)
};

struct DocumentRecord {
  Document document;      // tokens with the producer's delimiters included
  std::int64_t line = 0;  // where it was read, for reports
};

struct MicrobatchRecord {
  CandidateMicrobatch microbatch;
  bool flattened = false;
  // Its rows carry no doc_spans (a dump written straight from a collator's output: DESIGN §5): verify derives
  // them from the documents (jobs/verify_derive.h) before anything reads them.
  bool spans_absent = false;
  std::int64_t line = 0;  // where it was read, for reports
  // Not empty: the rows, viewed where the record's maker holds them (check_batch: the training batch's own
  // arrays, for the length of the call), in place of microbatch.rows, which then only lends storage the views
  // may point into. verify checks a streamed step through them and copies them into microbatch.rows
  // (Materialize) only where it needs CandidateRows: a step that fails, a step checked whole. Empty for a
  // record read from a file.
  std::vector<RowView> views;
};

// The record's rows as views: its `views`, or views of microbatch.rows built in `scratch`.
std::span<const RowView> RowViews(const MicrobatchRecord& record, std::vector<RowView>& scratch);
// A record's views copied into microbatch.rows of its own (views cleared); nothing for one without views.
void Materialize(MicrobatchRecord& record);

struct StepRecord {
  std::int64_t step = 0;
  std::int64_t rank = 0;
  std::optional<double> num_items_in_batch;
  std::optional<double> loss;
};

using PackedBatchRecord = std::variant<HeaderRecord, DocumentRecord, MicrobatchRecord, StepRecord>;

class PackedBatchReader {
 public:
  explicit PackedBatchReader(std::string path);
  // Reads from `in` (which must outlive the reader); `name` stands for the file in messages. For tests and the
  // fuzz target fuzz/packed_batch_fuzzer.cc, which read from memory.
  PackedBatchReader(std::istream& in, std::string name);
  // The next record, or nullopt at the end of the file.
  std::optional<PackedBatchRecord> Next();
  const std::string& path() const { return path_; }
  std::int64_t line() const { return line_; }
  std::int64_t bytes_read() const { return bytes_; }

 private:
  std::string path_;
  std::ifstream file_;
  std::istream* in_ = &file_;
  std::int64_t line_ = 0;
  std::int64_t bytes_ = 0;
  bool seen_header_ = false;
};

// Parses one line's record (exposed for fuzzing and tests); `where` is "file:line".
PackedBatchRecord ParsePackedBatchRecord(const nlohmann::json& json, const std::string& where, bool first);

// Writes records, one JSON object per line.
class PackedBatchWriter {
 public:
  explicit PackedBatchWriter(std::ostream& out) : out_(out) {}
  void Header(const HeaderRecord& header);
  void Document(const packoracle::Document& document);
  void Microbatch(const CandidateMicrobatch& microbatch);

 private:
  std::ostream& out_;
};

}  // namespace packoracle
