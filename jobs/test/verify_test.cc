// jobs::VerifyReaders over records held in memory gives what jobs::VerifyFiles gives for the same records in
// a file: the Python binding audits batches it built with no JSON in between.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "packoracle/fastcheck/memory_reader.h"
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

}  // namespace
}  // namespace packoracle::jobs
