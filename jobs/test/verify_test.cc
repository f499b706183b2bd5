// jobs::VerifyReaders over records held in memory gives what jobs::VerifyFiles gives for the same records in
// a file: the Python binding audits batches it built with no JSON in between.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "packoracle/fastcheck/jsonl_reader.h"
#include "packoracle/fastcheck/memory_reader.h"
#include "packoracle/jobs/summary.h"
#include "packoracle/fastcheck/step_check.h"
#include "packoracle/jobs/verify.h"
#include "packoracle/oracle.h"

namespace packoracle::jobs {
namespace {

const std::string kDumps = std::string(PACKORACLE_SOURCE_DIR) + "/examples/dumps/";

std::vector<PackedBatchRecord> ReadAll(const std::string& path) {
  fastcheck::OracleBatchReader reader(path);
  std::vector<PackedBatchRecord> records;
  while (auto record = reader.Next()) records.push_back(std::move(*record));
  return records;
}

AuditResult VerifyInMemory(std::vector<PackedBatchRecord> records, const std::string& name,
                           const VerifyOptions& options = {}) {
  std::vector<std::unique_ptr<fastcheck::RecordReader>> sources;
  sources.push_back(std::make_unique<fastcheck::MemoryRecordReader>(std::move(records), name));
  return VerifyReaders(std::move(sources), options);
}

class InMemory : public ::testing::TestWithParam<std::string> {};

TEST_P(InMemory, GivesTheFilesTextAndJson) {
  const std::string path = kDumps + GetParam();
  VerifyOptions options;
  options.files = {path};
  const AuditResult from_file = VerifyFiles(options);
  std::vector<PackedBatchRecord> records = ReadAll(path);
  for (auto& record : records)  // the reader's lines forgotten: a record's index + 1 is its line
    if (auto* m = std::get_if<MicrobatchRecord>(&record)) m->line = 0;
  const AuditResult in_memory = VerifyInMemory(std::move(records), path);
  EXPECT_EQ(RenderAuditText(in_memory, 20), RenderAuditText(from_file, 20));
  EXPECT_EQ(RenderAuditJson(in_memory), RenderAuditJson(from_file));
  EXPECT_EQ(in_memory.exit_code, from_file.exit_code);
}

INSTANTIATE_TEST_SUITE_P(ExampleDumps, InMemory,
                         ::testing::Values("hf_flatten_clean.jsonl", "megatron_training_copy_buggy.jsonl"));

// What verify prints, or the error it stops with.
std::string Outcome(const std::function<AuditResult()>& audit) {
  try {
    const AuditResult r = audit();
    return RenderAuditText(r, 20) + RenderAuditJson(r) + std::to_string(r.exit_code);
  } catch (const InputError& e) {
    return std::string("error: ") + e.what();
  }
}

std::vector<std::string> RepositoryDumps() {
  std::vector<std::string> paths;
  for (const char* dir : {"/examples/dumps", "/fuzz/corpus/packed_batch"})
    for (const auto& entry : std::filesystem::directory_iterator(std::string(PACKORACLE_SOURCE_DIR) + dir))
      if (entry.path().extension() == ".jsonl") paths.push_back(entry.path().string());
  std::sort(paths.begin(), paths.end());
  return paths;
}

// The repository's dumps the reader takes, each with its records.
std::vector<std::pair<std::string, std::vector<PackedBatchRecord>>> ReadableDumps() {
  std::vector<std::pair<std::string, std::vector<PackedBatchRecord>>> dumps;
  for (const auto& path : RepositoryDumps()) {
    try {
      dumps.emplace_back(path, ReadAll(path));
    } catch (const InputError&) {
      continue;  // not a dump the reader takes
    }
  }
  return dumps;
}

// A file's steps are streamed (checked row by row as read, then let go) and a step that fails is read again
// from the file for its report; a reader that cannot be read again (VerifyReaders) streams its steps and
// holds them. Both must give the audit of every step checked whole by CheckCase (VerifyReaders under
// `oracle`), byte for byte, on every dump of the repository, broken ones included, whether failing steps are
// read again (hold_step_bytes 0) or reported from the micro-batches held.
TEST(StreamedSteps, ReportAsStepsHeldWholeOnEveryDumpOfTheRepository) {
  const std::vector<std::string> paths = RepositoryDumps();
  ASSERT_GT(paths.size(), 20u);
  int failing = 0;
  for (const auto& path : paths) {
    SCOPED_TRACE(path);
    auto from_reader = [&](bool oracle) {
      std::vector<std::unique_ptr<fastcheck::RecordReader>> sources;
      sources.push_back(std::make_unique<fastcheck::FastBatchReader>(path));
      VerifyOptions options;
      options.oracle = oracle;
      return VerifyReaders(std::move(sources), options);
    };
    const std::string held = Outcome([&] { return from_reader(true); });
    EXPECT_EQ(Outcome([&] { return from_reader(false); }), held) << "a reader's steps streamed";
    for (const std::int64_t hold : {std::int64_t{0}, std::int64_t{16} << 20}) {
      VerifyOptions options;
      options.files = {path};
      options.hold_step_bytes = hold;
      EXPECT_EQ(Outcome([&] { return VerifyFiles(options); }), held) << "hold_step_bytes " << hold;
    }
    failing += held.back() == '1' ? 1 : 0;
  }
  EXPECT_GT(failing, 5);  // steps that fail, and are read again for their report
}

// VerifyOptions::checker (check_batch's fast verifier, kept per thread): one checker lent to audit after audit
// leaves nothing of one in the next. Every dump of the repository through one lent checker, in order and then in
// reverse (so that each follows dumps of other shapes and verdicts), against each audited with its own.
TEST(VerifyReaders, ALentCheckerAuditsEveryDumpAsItsOwnWould) {
  const std::vector<std::string> paths = RepositoryDumps();
  fastcheck::FastStepChecker lent;
  // What verify prints, and which path each step took: a step the fast verifier wrongly fails is reported by
  // CheckCase all the same, but its rows are then not counted as taken by the clean-row path.
  auto audit = [](const std::string& path, fastcheck::FastStepChecker* checker) {
    std::string taken;  // each step's rows taken by the clean-row path
    const std::string printed = Outcome([&] {
      std::vector<std::unique_ptr<fastcheck::RecordReader>> sources;
      sources.push_back(std::make_unique<fastcheck::FastBatchReader>(path));
      VerifyOptions options;
      options.checker = checker;
      AuditResult r = VerifyReaders(std::move(sources), options);
      for (const StepSummary& step : r.steps) taken += " " + std::to_string(step.clean_rows);
      return r;
    });
    return printed + taken;
  };
  std::vector<std::string> order = paths;
  order.insert(order.end(), paths.rbegin(), paths.rend());
  for (const auto& path : order) {
    SCOPED_TRACE(path);
    EXPECT_EQ(audit(path, &lent), audit(path, nullptr));
  }
}

// VerifyOptions::documents (check_batch's documents, viewed where the caller holds them) audits as the same
// documents given as records right after the header: on every dump of the repository whose documents all
// come before its first micro-batch, and that verify does not refuse as input.
TEST(VerifyReaders, BorrowedDocumentsAuditAsDocumentRecords) {
  int compared = 0, failing = 0;
  for (auto& [path, records] : ReadableDumps()) {
    SCOPED_TRACE(path);
    std::vector<PackedBatchRecord> rest;
    std::vector<Document> documents;
    bool documents_first = true, microbatch_seen = false;
    for (auto& record : records) {
      if (auto* d = std::get_if<DocumentRecord>(&record)) {
        documents_first = documents_first && !microbatch_seen;
        documents.push_back(std::move(d->document));
        continue;
      }
      microbatch_seen = microbatch_seen || std::holds_alternative<MicrobatchRecord>(record);
      rest.push_back(std::move(record));
    }
    if (!documents_first) continue;
    const std::string as_records = Outcome([&] { return VerifyInMemory(ReadAll(path), path); });
    if (as_records.rfind("error:", 0) == 0) continue;  // the message names a record's line
    std::vector<DocumentRef> refs;
    for (const Document& d : documents) refs.push_back(DocumentRef::Of(d));
    VerifyOptions options;
    options.documents = &refs;
    EXPECT_EQ(Outcome([&] { return VerifyInMemory(rest, path, options); }), as_records);
    ++compared;
    failing += as_records.back() == '1' ? 1 : 0;
  }
  EXPECT_GT(compared, 10);
  EXPECT_GT(failing, 3);
}

// MicrobatchRecord::views (check_batch's rows viewed in the training batch's own arrays) audit as the same rows
// held by the records: on every dump of the repository, streamed (a failing step's views copied for its
// report) and checked whole (`oracle`: the views copied as they are read), failing steps included.
TEST(VerifyReaders, ViewedRowsAuditAsRowsOfTheirOwn) {
  int compared = 0, failing = 0;
  for (const auto& [path, records] : ReadableDumps()) {
    SCOPED_TRACE(path);
    for (const bool oracle : {false, true}) {
      VerifyOptions options;
      options.oracle = oracle;
      const std::string as_rows = Outcome([&] { return VerifyInMemory(records, path, options); });
      std::vector<std::vector<CandidateRow>> held;  // the rows where the views point: alive for the audit
      held.reserve(records.size());
      std::vector<PackedBatchRecord> viewed = records;
      for (auto& record : viewed) {
        auto* m = std::get_if<MicrobatchRecord>(&record);
        if (!m) continue;
        held.push_back(std::move(m->microbatch.rows));
        m->microbatch.rows.clear();
        for (const CandidateRow& row : held.back()) m->views.push_back(RowView::Of(row));
      }
      EXPECT_EQ(Outcome([&] { return VerifyInMemory(std::move(viewed), path, options); }), as_rows) << "oracle " << oracle;
      ++compared;
      failing += as_rows.back() == '1' ? 1 : 0;
    }
  }
  EXPECT_GT(compared, 20);
  EXPECT_GT(failing, 6);
}

TEST(VerifyReaders, NamesTheInMemorySourceAndTheRecordInEachViolation) {
  const AuditResult r = VerifyInMemory(ReadAll(kDumps + "megatron_training_copy_buggy.jsonl"), "my batch");
  ASSERT_FALSE(r.clean());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.violations.front().file, "my batch");
  EXPECT_GT(r.violations.front().line, 0);
  EXPECT_NE(RenderAuditText(r, 20).find("  segments  my batch:4  step 0, micro_step 0"), std::string::npos) << RenderAuditText(r, 20);
}

TEST(VerifyReaders, TakesTheRequiredPolicyAsAnObject) {
  const auto records = ReadAll(kDumps + "hf_flatten_clean.jsonl");
  VerifyOptions by_name, by_object;
  by_name.preset = "reference";
  by_object.required_policy = FindPreset("reference").policy;
  EXPECT_EQ(RenderAuditText(VerifyInMemory(records, "b", by_object), 20),
            RenderAuditText(VerifyInMemory(records, "b", by_name), 20));
  by_object.preset = "reference";
  EXPECT_THROW(VerifyInMemory(records, "b", by_object), InputError);
}

TEST(MemoryRecordReader, SharesRecordsTheCallerKeepsAcrossAudits) {
  const auto records =
      std::make_shared<const std::vector<PackedBatchRecord>>(ReadAll(kDumps + "megatron_training_copy_buggy.jsonl"));
  std::string first;
  for (int audit = 0; audit < 2; ++audit) {
    std::vector<std::unique_ptr<fastcheck::RecordReader>> sources;
    sources.push_back(std::make_unique<fastcheck::MemoryRecordReader>(records, "kept"));
    const std::string text = RenderAuditText(VerifyReaders(std::move(sources), {}), 20);
    if (audit == 0) first = text;
    EXPECT_EQ(text, first);  // the records were copied out, not used up
  }
  EXPECT_NE(first.find("kept:4"), std::string::npos) << first;
}

TEST(MemoryRecordReader, RefusesRecordsThatDoNotStartWithTheirHeader) {
  auto records = ReadAll(kDumps + "hf_flatten_clean.jsonl");
  EXPECT_THROW(fastcheck::MemoryRecordReader(std::vector<PackedBatchRecord>{}, "empty"), InputError);
  records.push_back(records.front());
  EXPECT_THROW(fastcheck::MemoryRecordReader(records, "two headers"), InputError);
  records.erase(records.begin());
  EXPECT_THROW(fastcheck::MemoryRecordReader(records, "no header first"), InputError);
}

// ---- Producer totals as they come (issue 16) ----------------------------------------------------------

// python/README.md's HF example: the Trainer knows num_items_in_batch, not a loss sum, and writes
// producer={"denominator": int(num_items_in_batch), "denominator_scope": "global"}. The records are
// hf_flatten_clean.jsonl's (7 valid targets) with that producer.
std::string HfDump(const std::string& producer) {
  const std::string header = R"({"record":"header","schema":"packed-batch","version":1,"producer":{"system":"huggingface/transformers","component":"DataCollatorWithFlattening","version":"test"},"special_ids":{"separator":-100},"dp_world_size":1,"grad_accum_steps":1,"policy":{"preset":"hf-flatten"}})";
  const std::string docs = R"({"record":"document","doc_uid":"d0","tokens":[11,12,13]})" "\n"
                           R"({"record":"document","doc_uid":"d1","tokens":[21,22,23,24,25,26]})";
  const std::string mb = R"({"record":"microbatch","step":0,"micro_step":0,"rank":0,"rows":[{"input_ids":[11,12,13,21,22,23,24,25,26],"labels":[-100,12,13,-100,22,23,24,25,26],"position_ids":[0,1,2,0,1,2,3,4,5],"cu_seqlens":[0,3,9],"doc_spans":[{"doc_uid":"d0","start":0,"length":3,"doc_offset":0},{"doc_uid":"d1","start":3,"length":6,"doc_offset":0}]}],"producer":)" +
                         producer + "}";
  return header + "\n" + docs + "\n" + mb + "\n";
}

std::string WriteDump(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

// Both readers (simdjson with the fast verifier, and --oracle's nlohmann reader with CheckCase) give the same.
AuditResult VerifyBoth(const std::string& path, std::string* text = nullptr) {
  VerifyOptions fast, oracle;
  fast.files = oracle.files = {path};
  oracle.oracle = true;
  const AuditResult a = VerifyFiles(fast), b = VerifyFiles(oracle);
  EXPECT_EQ(RenderAuditText(a, 20), RenderAuditText(b, 20));
  EXPECT_EQ(RenderAuditJson(a), RenderAuditJson(b));
  if (text) *text = RenderAuditText(a, 20);
  return a;
}

// The InputError of both readers for a dump (they must word it the same), "" when neither throws.
std::string InputErrorOf(const std::string& path) {
  std::string messages[2];
  for (int oracle = 0; oracle < 2; ++oracle) {
    VerifyOptions options;
    options.files = {path};
    options.oracle = oracle == 1;
    try {
      VerifyFiles(options);
    } catch (const InputError& e) {
      messages[oracle] = e.what();
    }
  }
  EXPECT_EQ(messages[0], messages[1]);
  return messages[0];
}

TEST(VerifyProducerTotals, TheReadmeHfExampleWithADenominatorAloneVerifiesClean) {
  std::string text;
  const AuditResult r = VerifyBoth(WriteDump("hf_denominator_only.jsonl",
                                             HfDump(R"({"denominator": 7, "denominator_scope": "global"})")),
                                   &text);
  EXPECT_TRUE(r.clean()) << text;
  EXPECT_EQ(r.exit_code, 0);
  ASSERT_EQ(r.notes.size(), 1u) << text;
  EXPECT_EQ(r.notes.front().steps, 1);
  EXPECT_NE(text.find("  note: producer totals give a denominator alone (no loss_sum, no loss): the count was "
                      "checked, the loss and the step objective were not (1 of 1 steps)"),
            std::string::npos)
      << text;
  ASSERT_EQ(r.steps.size(), 1u);
  EXPECT_EQ(r.steps.front().reported_denominators, std::vector<double>{7});
  EXPECT_FALSE(r.steps.front().declared_objective);
}

TEST(VerifyProducerTotals, AWrongDenominatorAloneIsADenominatorViolation) {
  std::string text;
  const AuditResult r =
      VerifyBoth(WriteDump("hf_denominator_wrong.jsonl", HfDump(R"({"denominator": 9, "denominator_scope": "global"})")),
                 &text);
  ASSERT_EQ(r.violations.size(), 1u) << text;
  EXPECT_EQ(r.violations.front().invariant, Invariant::kDenominator);
  EXPECT_NE(r.violations.front().message.find("divided by 9, but its global has 7 valid targets"), std::string::npos);
}

// hf-flatten (boundary_source cu_seqlens) rows of one micro-batch; each row's text is given whole.
std::string HfRowsDump(const std::vector<std::string>& rows) {
  const std::string header = R"({"record":"header","schema":"packed-batch","version":1,"producer":{"system":"huggingface/transformers","component":"DataCollatorWithFlattening","version":"test"},"special_ids":{"separator":-100},"dp_world_size":1,"grad_accum_steps":1,"policy":{"preset":"hf-flatten"}})";
  std::string text = header + "\n" + R"({"record":"document","doc_uid":"d0","tokens":[11,12,13]})" "\n" +
                     R"({"record":"document","doc_uid":"d1","tokens":[21,22]})" "\n" +
                     R"({"record":"document","doc_uid":"d2","tokens":[31,32,33]})" "\n" +
                     R"({"record":"microbatch","step":0,"micro_step":0,"rank":0,"rows":[)";
  for (std::size_t k = 0; k < rows.size(); ++k) text += (k ? "," : "") + rows[k];
  return text + "]}\n";
}
const char* kD0Alone =
    R"({"input_ids":[11,12,13],"labels":[-100,12,13],"position_ids":[0,1,2],"doc_spans":[{"doc_uid":"d0","start":0,"length":3,"doc_offset":0}]})";

TEST(VerifyPolicy, AKeyTheRequiredPolicyNeverReadsIsNoDifference) {
  // The dump declares hf-flatten with pad_id 5; the user's policy gives pad_id null (padding: none reads none).
  std::string dump = HfDump(R"({"denominator": 7, "denominator_scope": "global"})");
  const std::string preset = R"("policy":{"preset":"hf-flatten"})";
  dump.replace(dump.find(preset), preset.size(), R"("policy":{"preset":"hf-flatten","pad_id":5})");
  VerifyOptions options;
  options.files = {WriteDump("hf_pad_id_5.jsonl", dump)};
  options.policy_file = WriteDump("pad_id_null.json", R"({"preset":"hf-flatten","pad_id":null})");
  EXPECT_TRUE(VerifyFiles(options).policy_differences.empty());
  options.policy_file = WriteDump("pad_id_null_included.json",
                                  R"({"preset":"hf-flatten","pad_id":null,"boundary_target":"included"})");
  const auto differences = VerifyFiles(options).policy_differences;
  ASSERT_EQ(differences.size(), 1u);
  EXPECT_EQ(differences.front(), "boundary_target: declared excluded, required included");
}

TEST(VerifyEncodings, ARowOfOneDocumentWithoutItsBoundaryEncodingIsANote) {
  std::string text;
  const AuditResult r = VerifyBoth(
      WriteDump("hf_one_doc_no_cu.jsonl",
                HfRowsDump({kD0Alone,
                            R"({"input_ids":[21,22,31,32,33],"labels":[-100,22,-100,32,33],"position_ids":[0,1,0,1,2],"cu_seqlens":[0,2,5],"doc_spans":[{"doc_uid":"d1","start":0,"length":2,"doc_offset":0},{"doc_uid":"d2","start":2,"length":3,"doc_offset":0}]})"})),
      &text);
  EXPECT_TRUE(r.clean()) << text;
  ASSERT_EQ(r.notes.size(), 1u) << text;
  EXPECT_NE(r.notes.front().text.find("rows without cu_seqlens"), std::string::npos) << text;
  EXPECT_NE(text.find("note: rows without cu_seqlens"), std::string::npos) << text;
}

TEST(VerifyEncodings, WithoutItInARowOfSeveralDocumentsIsAnAttentionViolationThere) {
  std::string text;
  const AuditResult r = VerifyBoth(
      WriteDump("hf_two_docs_no_cu.jsonl",
                HfRowsDump({kD0Alone,
                            R"({"input_ids":[21,22,31,32,33],"labels":[-100,22,-100,32,33],"position_ids":[0,1,0,1,2],"doc_spans":[{"doc_uid":"d1","start":0,"length":2,"doc_offset":0},{"doc_uid":"d2","start":2,"length":3,"doc_offset":0}]})"})),
      &text);
  ASSERT_EQ(r.violations.size(), 1u) << text;
  EXPECT_EQ(r.violations.front().invariant, Invariant::kAttention);
  EXPECT_EQ(r.violations.front().row, 1);  // the row where reading it as one sequence changes a context set
  ASSERT_EQ(r.notes.size(), 1u) << text;   // and the row it changed nothing in is noted
}

TEST(VerifyEncodings, A2DMaskShowingTrailingPaddingIsANoteAndMaskingATokenAViolation) {
  // hf-padded: one document per row, right padding; attention_mask 1 on the trailing pad changes nothing.
  const std::string header = R"({"record":"header","schema":"packed-batch","version":1,"producer":{"system":"test","component":"test","version":"test"},"special_ids":{"pad":0},"dp_world_size":1,"grad_accum_steps":1,"policy":{"preset":"hf-padded"}})";
  const std::string doc = R"({"record":"document","doc_uid":"d0","tokens":[11,12,13]})";
  auto dump = [&](const std::string& mask) {
    return header + "\n" + doc + "\n" +
           R"({"record":"microbatch","step":0,"micro_step":0,"rank":0,"rows":[{"input_ids":[11,12,13,0],"labels":[11,12,13,-100],"attention_mask":)" +
           mask + R"(,"doc_spans":[{"doc_uid":"d0","start":0,"length":3,"doc_offset":0}]}]})" + "\n";
  };
  std::string text;
  const AuditResult trailing = VerifyBoth(WriteDump("hf_padded_visible_pad.jsonl", dump("[1,1,1,1]")), &text);
  EXPECT_TRUE(trailing.clean()) << text;
  EXPECT_NE(text.find("note: the 2-D attention_mask marks trailing padding visible"), std::string::npos) << text;
  const AuditResult masked_token = VerifyBoth(WriteDump("hf_padded_masked_token.jsonl", dump("[1,0,1,0]")), &text);
  ASSERT_FALSE(masked_token.clean()) << text;
  EXPECT_EQ(masked_token.violations.front().invariant, Invariant::kSegments);
}

TEST(VerifyProducerTotals, ALossSumOrALossAloneIsAccepted) {
  std::string text;
  const AuditResult sum = VerifyBoth(WriteDump("hf_sum_only.jsonl", HfDump(R"({"loss_sum": 9.0})")), &text);
  EXPECT_TRUE(sum.clean()) << text;
  ASSERT_TRUE(sum.steps.front().token_mean);
  EXPECT_DOUBLE_EQ(*sum.steps.front().token_mean, 9.0 / 7.0);  // the producer's sum over the kit's count
  const AuditResult loss = VerifyBoth(WriteDump("hf_loss_only.jsonl", HfDump(R"({"loss": 1.2857142857142858})")), &text);
  EXPECT_TRUE(loss.clean()) << text;
  EXPECT_NE(text.find("note: producer totals give a loss alone"), std::string::npos) << text;
  // loss and denominator: the step objective is compared with the sum loss × denominator over the count.
  const AuditResult pair = VerifyBoth(
      WriteDump("hf_loss_den.jsonl", HfDump(R"({"denominator": 7, "denominator_scope": "global", "loss": 1.25})")),
      &text);
  EXPECT_TRUE(pair.clean()) << text;
  EXPECT_TRUE(pair.notes.empty()) << text;
  EXPECT_NEAR(*pair.steps.front().declared_objective, 1.25, 1e-12);
}

TEST(VerifyProducerTotals, AnEmptyProducerOrAScopeWithoutDenominatorIsAnInputErrorNamingFileLineAndField) {
  const std::string empty = WriteDump("hf_empty_producer.jsonl", HfDump("{}"));
  EXPECT_EQ(InputErrorOf(empty), empty + ":4: microbatch record: field 'producer' gives none of loss_sum, denominator, loss: give those "
                                         "the producer has, or no producer object at all");
  const std::string scope = WriteDump("hf_scope_only.jsonl", HfDump(R"({"loss_sum": 9.0, "denominator_scope": "global"})"));
  EXPECT_EQ(InputErrorOf(scope), scope + ":4: microbatch record: producer: field 'denominator_scope' is given without a denominator "
                                         "(the scope says what a denominator counts)");
  const std::string unscoped = WriteDump("hf_unscoped.jsonl", HfDump(R"({"denominator": 7})"));
  EXPECT_EQ(InputErrorOf(unscoped), unscoped + ":4: microbatch record: producer: field 'denominator_scope' is missing: a denominator "
                                               "needs its scope (microbatch, step or global)");
  const std::string nulls = WriteDump("hf_null_producer.jsonl", HfDump(R"({"loss_sum": null, "loss": null})"));
  EXPECT_NE(InputErrorOf(nulls).find("field 'producer' gives none of"), std::string::npos);
}


// ---- One doc_uid, one document (issue 27) ---------------------------------------------------------------

// A dump may repeat a document record (a multi-rank dump writes it on every rank that packs a piece of it):
// the same content changes nothing; other content under the same uid is unusable input, named by file and
// line, whether the first record is still held or its pieces already tiled it (retired).
TEST(VerifyDocuments, ARepeatedDocUidMustRepeatItsContent) {
  const std::string producer = R"({"denominator": 7, "denominator_scope": "global"})";
  const std::string dump = HfDump(producer);
  const std::size_t mb = dump.find(R"({"record":"microbatch")");
  const auto with_line_before_microbatch = [&](const std::string& line) {
    return dump.substr(0, mb) + line + "\n" + dump.substr(mb);
  };
  const std::string same = R"({"record":"document","doc_uid":"d0","tokens":[11,12,13],"supervised":[1,1,1]})";
  EXPECT_TRUE(VerifyBoth(WriteDump("repeat_same.jsonl", with_line_before_microbatch(same))).clean());

  const std::string held = WriteDump(
      "repeat_held.jsonl", with_line_before_microbatch(R"({"record":"document","doc_uid":"d0","tokens":[11,12,14]})"));
  EXPECT_EQ(InputErrorOf(held), held + ":4: document record: doc_uid 'd0' was given before with other content (token 2 "
                                       "is 14 where the earlier record has 13): one doc_uid names one document");

  // step 0 tiles d0 and d1 (they retire), step 1 packs d2; then d0 comes again, changed
  const std::string step1 =
      R"({"record":"document","doc_uid":"d2","tokens":[31,32,33]})" "\n"
      R"({"record":"microbatch","step":1,"micro_step":0,"rank":0,"rows":[{"input_ids":[31,32,33],"labels":[-100,32,33],"position_ids":[0,1,2],"cu_seqlens":[0,3],"doc_spans":[{"doc_uid":"d2","start":0,"length":3,"doc_offset":0}]}]})" "\n";
  EXPECT_TRUE(VerifyBoth(WriteDump("repeat_retired_same.jsonl", dump + step1 + same + "\n")).clean());
  const std::string retired = WriteDump(
      "repeat_retired.jsonl", dump + step1 + R"({"record":"document","doc_uid":"d0","tokens":[11,12,13],"supervised":[1,0,1]})" "\n");
  EXPECT_EQ(InputErrorOf(retired), retired + ":7: document record: doc_uid 'd0' was given before with other content (its "
                                             "tokens or supervised flags differ): one doc_uid names one document");
}

// ---- Tiling over the whole dump (TileDocument, issue 25) ------------------------------------------------

// A hand-written dump under `policy` (a JSON object): its document records, then one micro-batch per step,
// each given as its rows.
std::string TilingDump(const std::string& policy, const std::string& documents, const std::vector<std::string>& steps) {
  std::string dump = R"({"record":"header","schema":"packed-batch","version":1,"producer":{"system":"test","component":"hand-written","version":"test"},"dp_world_size":1,"grad_accum_steps":1,"policy":)" +
                     policy + "}\n" + documents;
  for (std::size_t s = 0; s < steps.size(); ++s)
    dump += R"({"record":"microbatch","step":)" + std::to_string(s) + R"(,"micro_step":0,"rank":0,"rows":)" + steps[s] +
            "}\n";
  return dump;
}

// The coverage sentences of a dump's audit, both readers agreeing; the dump's end first.
std::vector<std::string> CoverageSentences(const std::string& name, const std::string& dump) {
  std::vector<std::string> out;
  for (const auto& v : VerifyBoth(WriteDump(name, dump)).violations)
    if (v.invariant == Invariant::kCoverage) out.push_back(v.message);
  return out;
}

const std::string kDocument6 = R"({"record":"document","doc_uid":"d0","tokens":[11,12,13,14,15,16]})" "\n";

// Truncation keeps a document's first L tokens: a shorter prefix drops tokens its row had room for.
TEST(VerifyTiling, TruncationExcusesOnlyTheTailPastTheRow) {
  const std::string policy = R"({"preset":"reference","overflow":"truncate"})";
  const std::string full_row =
      R"([{"input_ids":[11,12,13,14],"labels":[12,13,14,-100],"doc_spans":[{"doc_uid":"d0","start":0,"length":4,"doc_offset":0}]}])";
  EXPECT_EQ(CoverageSentences("truncated_to_l.jsonl", TilingDump(policy, kDocument6, {full_row})),
            std::vector<std::string>{});
  const std::string short_prefix =
      R"([{"input_ids":[11,12,13,0],"labels":[12,13,-100,-100],"doc_spans":[{"doc_uid":"d0","start":0,"length":3,"doc_offset":0}]}])";
  EXPECT_EQ(CoverageSentences("truncated_short.jsonl", TilingDump(policy, kDocument6, {short_prefix})),
            std::vector<std::string>{
                "document 'd0': tokens [3, 6) are in no row of the dump (--partial if the dump stops mid-run)"});
}

// overflow: drop (axolotl's default excess_length_strategy): a document record longer than the row belongs in no
// row: absent it is no finding, its first L tokens in a row (a packer that truncated it) are named; without
// document records nothing says how long the document was: verify says it cannot check, never a violation.
TEST(VerifyTiling, DropLeavesADocumentLongerThanTheRowInNoRow) {
  const std::string policy = R"({"preset":"reference","overflow":"drop"})";
  const std::string documents = kDocument6 + R"({"record":"document","doc_uid":"d1","tokens":[21,22]})" "\n";
  const std::string kept_only =
      R"([{"input_ids":[21,22,0,0],"labels":[22,-100,-100,-100],"doc_spans":[{"doc_uid":"d1","start":0,"length":2,"doc_offset":0}]}])";
  EXPECT_EQ(CoverageSentences("drop_absent.jsonl", TilingDump(policy, documents, {kept_only})),
            std::vector<std::string>{});
  const std::string truncated =
      R"([{"input_ids":[11,12,13,14],"labels":[12,13,14,-100],"doc_spans":[{"doc_uid":"d0","start":0,"length":4,"doc_offset":0}]}])";
  EXPECT_EQ(CoverageSentences("drop_truncated.jsonl", TilingDump(policy, documents, {kept_only, truncated})),
            std::vector<std::string>{"document 'd0': tokens [0, 4) are packed, but the document has 6 tokens, more "
                                     "than the row holds, and the policy says overflow: drop (it belongs in no row)"});
  // Without document records verify checks nothing of the rows' content: it says so, never a violation.
  EXPECT_NE(InputErrorOf(WriteDump("drop_no_documents.jsonl", TilingDump(policy, "", {kept_only, truncated})))
                .find("no document records"),
            std::string::npos);
  // The same rows under overflow: truncate are whole: the policy, not the rows, says which reading holds.
  EXPECT_EQ(CoverageSentences("drop_as_truncate.jsonl",
                              TilingDump(R"({"preset":"reference","overflow":"truncate"})", documents,
                                         {kept_only, truncated})),
            std::vector<std::string>{});
}

// Under shift: document a document's last token is a label only: its pieces tile its other tokens, and a dump
// whose rows hold them all is whole; one short of that is named.
TEST(VerifyTiling, UnderThePerDocumentShiftTheLastTokenIsInNoRow) {
  const std::string policy = R"({"preset":"reference","shift":"document"})";
  const std::string documents = R"({"record":"document","doc_uid":"d0","tokens":[11,12,13,14]})" "\n";
  const std::string inputs =
      R"([{"input_ids":[11,12,13,0],"labels":[12,13,14,-100],"doc_spans":[{"doc_uid":"d0","start":0,"length":3,"doc_offset":0}]}])";
  EXPECT_EQ(CoverageSentences("shift_document_whole.jsonl", TilingDump(policy, documents, {inputs})),
            std::vector<std::string>{});
  const std::string short_by_one =
      R"([{"input_ids":[11,12,0,0],"labels":[12,13,-100,-100],"doc_spans":[{"doc_uid":"d0","start":0,"length":2,"doc_offset":0}]}])";
  EXPECT_EQ(CoverageSentences("shift_document_short.jsonl", TilingDump(policy, documents, {short_by_one})),
            std::vector<std::string>{
                "document 'd0': tokens [2, 3) are in no row of the dump (--partial if the dump stops mid-run)"});
}

// Pieces over several steps, walked by offset: a repeat names exactly the tokens packed twice, a gap and a
// missing tail the tokens in no row; a record in no row is named as such.
TEST(VerifyTiling, NamesTheTokensRepeatedDroppedAndMissingAcrossSteps) {
  const std::string policy = R"({"preset":"reference","overflow":"split"})";
  const std::string documents = kDocument6 + R"({"record":"document","doc_uid":"d9","tokens":[91,92]})" "\n";
  auto row = [](const std::string& ids, std::int64_t length, std::int64_t offset) {
    return R"([{"input_ids":[)" + ids + R"(],"labels":[-100,-100,-100,-100],"doc_spans":[{"doc_uid":"d0","start":0,"length":)" +
           std::to_string(length) + R"(,"doc_offset":)" + std::to_string(offset) + "}]}]";
  };
  const auto found = CoverageSentences(
      "tiling_across_steps.jsonl",
      TilingDump(policy, documents, {row("11,12,13,14", 4, 0), row("12,13,0,0", 2, 1), row("16,0,0,0", 1, 5)}));
  EXPECT_EQ(found, (std::vector<std::string>{
                       "document 'd9' (2 tokens) has a document record but is in no row of the dump (--partial if "
                       "the dump stops mid-run)",
                       "document 'd0': tokens [1, 3) are packed twice",
                       "document 'd0': tokens [4, 5) are in no row of the dump"}));
}

// Under row_end_target next_in_stream every token is an input once except the stream's last: a dump may have
// one document missing its last token, not two.
TEST(VerifyTiling, OnlyOneDocumentMayMissItsLastTokenToTheStreamsEnd) {
  const std::string policy =
      R"({"preset":"reference","overflow":"split","stream_stride":"L","row_end_target":"next_in_stream"})";
  const std::string documents = R"({"record":"document","doc_uid":"a","tokens":[1,2,3]})" "\n"
                                R"({"record":"document","doc_uid":"b","tokens":[4,5,6]})" "\n";
  const std::string a_whole_b_short =
      R"([{"input_ids":[1,2,3,4,5],"labels":[2,3,-100,5,6],"doc_spans":[{"doc_uid":"a","start":0,"length":3,"doc_offset":0},{"doc_uid":"b","start":3,"length":2,"doc_offset":0}]}])";
  const std::string both_short =
      R"([{"input_ids":[1,2,4,5,0],"labels":[2,3,-100,5,6],"doc_spans":[{"doc_uid":"a","start":0,"length":2,"doc_offset":0},{"doc_uid":"b","start":2,"length":2,"doc_offset":0}]}])";
  const std::string two = "2 documents ('a', 'b') each miss their last token, but under row_end_target: "
                          "next_in_stream only the stream's last token is never an input";
  const auto one_end = CoverageSentences("stream_one_end.jsonl", TilingDump(policy, documents, {a_whole_b_short}));
  EXPECT_EQ(std::count(one_end.begin(), one_end.end(), two), 0);
  const auto two_ends = CoverageSentences("stream_two_ends.jsonl", TilingDump(policy, documents, {both_short}));
  EXPECT_EQ(std::count(two_ends.begin(), two_ends.end(), two), 1);
}

TEST(SummaryEntryTotals, ALossSumIsTheStepsOnlyWhenEveryMicroBatchReportsOne) {
  SummaryEntry entry;
  entry.microbatches.resize(2);
  entry.microbatches[0].loss_sum = 4.0;
  entry.microbatches[1].denominator = 3.0;  // this one gives a count alone: the step's loss sum is unknown
  EXPECT_FALSE(entry.loss_sum());
  entry.microbatches[1].loss_sum = 5.0;
  ASSERT_TRUE(entry.loss_sum());
  EXPECT_DOUBLE_EQ(*entry.loss_sum(), 9.0);
  EXPECT_FALSE(SummaryEntry{}.loss_sum());
}

}  // namespace
}  // namespace packoracle::jobs
