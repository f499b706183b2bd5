// verify on rows without doc_spans (jobs/src/verify_derive.h): a dump written straight from a collator's output
// is audited with the spans derived from its documents, and gives the findings its doc_spans give.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "packoracle/jobs/verify.h"
#include "packoracle/oracle.h"

namespace packoracle::jobs {
namespace {

// The dump at `path` written again with every row's doc_spans taken out (`keep`: micro-batch records, counted
// from 0, that keep theirs).
std::string WithoutSpans(const std::string& path, const std::string& name, std::vector<int> keep = {}) {
  std::ifstream in(path);
  const std::string out_path = ::testing::TempDir() + name;
  std::ofstream out(out_path);
  std::string line;
  int microbatch = 0;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.value("record", "") == "microbatch" && j.contains("rows") && j["rows"].is_array()) {
      if (std::find(keep.begin(), keep.end(), microbatch) == keep.end())
        for (auto& row : j["rows"])
          if (row.is_object()) row.erase("doc_spans");
      ++microbatch;
    }
    out << j.dump() << "\n";
  }
  return out_path;
}

// Each violation where it is: invariant, step, micro-batch, rank, row.
std::vector<std::string> Findings(const AuditResult& r) {
  std::vector<std::string> out;
  for (const auto& v : r.violations) {
    out.push_back(std::string(Name(v.invariant)) + " " + std::to_string(v.step) + "/" + std::to_string(v.micro_step) +
                  "/" + std::to_string(v.rank) + "/" + std::to_string(v.row));
  }
  std::sort(out.begin(), out.end());
  return out;
}

AuditResult Verify(const std::string& path, bool oracle) {
  VerifyOptions options;
  options.files = {path};
  options.oracle = oracle;
  options.max_violations = 10000;
  return VerifyFiles(options);
}

bool DerivedNote(const AuditResult& r) {
  return std::any_of(r.notes.begin(), r.notes.end(),
                     [](const AuditNote& n) { return n.text.find("doc_spans derived") != std::string::npos; });
}

// The repository's example dumps (what HF, torchtune, Megatron and the kit's candidates wrote, right and wrong):
// without their doc_spans, both readers give the findings the spans give, and say the spans were derived.
std::vector<std::filesystem::path> RepositoryDumps() {
  std::vector<std::filesystem::path> paths;
  for (const char* dir : {"/examples/dumps", "/fuzz/corpus/packed_batch"})
    for (const auto& entry : std::filesystem::directory_iterator(std::string(PACKORACLE_SOURCE_DIR) + dir))
      if (entry.path().extension() == ".jsonl") paths.push_back(entry.path());
  std::sort(paths.begin(), paths.end());
  return paths;
}

bool Parses(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos && !nlohmann::json::accept(line)) return false;
  return true;
}

TEST(VerifyDerivedSpans, EveryRepositoryDumpWithoutItsSpansGivesTheFindingsOfItsSpans) {
  int compared = 0, failing = 0;
  for (const auto& file : RepositoryDumps()) {
    const std::string path = file.string();
    if (!Parses(path)) continue;  // the fuzz corpus's malformed lines
    SCOPED_TRACE(path);
    AuditResult truth;
    try {
      truth = Verify(path, false);
    } catch (const InputError&) {
      continue;  // a dump the audit refuses (its documents are not the policy's): nothing to compare
    }
    const std::string bare = WithoutSpans(path, "bare_" + file.filename().string());
    for (const bool oracle : {false, true}) {
      const AuditResult derived = Verify(bare, oracle);
      EXPECT_EQ(Findings(derived), Findings(truth)) << (oracle ? "--oracle" : "fast reader");
      EXPECT_TRUE(DerivedNote(derived));
    }
    EXPECT_FALSE(DerivedNote(truth));
    ++compared;
    failing += truth.clean() ? 0 : 1;
  }
  EXPECT_GT(compared, 10);
  EXPECT_GT(failing, 3);  // dumps with findings, which the derived spans must place where the truth does
}

TEST(VerifyDerivedSpans, AFileWithSpansOnSomeMicroBatchesOnlyIsAnInputErrorNamingTheLine) {
  const std::string dump = std::string(PACKORACLE_SOURCE_DIR) + "/examples/dumps/megatron_training_copy_buggy.jsonl";
  ASSERT_TRUE(std::filesystem::exists(dump));
  for (const std::vector<int>& keep : {std::vector<int>{0}, std::vector<int>{1}}) {
    const std::string mixed = WithoutSpans(dump, "mixed.jsonl", keep);
    for (const bool oracle : {false, true}) {
      try {
        Verify(mixed, oracle);
        ADD_FAILURE() << "no InputError";
      } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("doc_spans on every micro-batch of a file, or on none"), std::string::npos)
            << e.what();
        EXPECT_NE(std::string(e.what()).find("mixed.jsonl:"), std::string::npos) << e.what();
      }
    }
  }
}

TEST(VerifyDerivedSpans, AMicroBatchWithoutRowsDecidesNothing) {
  // A first micro-batch with no rows (a rank with nothing to pack), then rows without doc_spans: derived, not
  // refused as a mix.
  const std::string dump = std::string(PACKORACLE_SOURCE_DIR) + "/examples/dumps/hf_flatten_clean.jsonl";
  const std::string bare = WithoutSpans(dump, "empty_first.jsonl");
  std::ifstream in(bare);
  std::string text, line;
  bool inserted = false;
  while (std::getline(in, line)) {
    if (!inserted && line.find("\"microbatch\"") != std::string::npos) {
      text += R"({"record":"microbatch","step":0,"micro_step":0,"rank":0,"rows":[]})" "\n";
      inserted = true;
      nlohmann::json j = nlohmann::json::parse(line);
      j["micro_step"] = 1;
      line = j.dump();
    }
    text += line + "\n";
  }
  ASSERT_TRUE(inserted);
  const std::string path = ::testing::TempDir() + "empty_first_rows.jsonl";
  std::ofstream(path) << text;
  for (const bool oracle : {false, true}) {
    const AuditResult r = Verify(path, oracle);
    EXPECT_TRUE(r.clean()) << RenderAuditText(r, 20);
    EXPECT_TRUE(DerivedNote(r));
  }
}

TEST(VerifyDerivedSpans, InvariantsTheReadingsOfTheRowsJudgeDifferentlyAreNotChecked) {
  // trl-wrapped rows without doc_spans (reversed: [1 0] then [0 1]) of d0 = [0], d1 = [1] (supervised) and d2 =
  // [1] (not): the documents read into them two ways. The packer's reading (d2 in row 0) leaves d1's supervised
  // token untrained (targets) and a denominator of 0 for it (denominator); the greedy one (d1 in row 0) trains
  // nothing that should not be. Both read row 1 as two documents under row-causal attention (attention). So the
  // audit keeps attention and says targets and denominator are not checked, whichever reading it chose.
  const std::string path = ::testing::TempDir() + "ambiguous.jsonl";
  {
    std::ofstream out(path);
    out << R"({"record":"header","schema":"packed-batch","version":1,"producer":{"system":"t","component":"t"},)"
        << R"("dp_world_size":1,"policy":{"preset":"trl-wrapped"}})" << "\n"
        << R"({"record":"document","doc_uid":"d0","tokens":[0],"supervised":[1]})" << "\n"
        << R"({"record":"document","doc_uid":"d1","tokens":[1],"supervised":[1]})" << "\n"
        << R"({"record":"document","doc_uid":"d2","tokens":[1],"supervised":[0]})" << "\n";
    const auto mb = [&](int k, const char* row) {
      out << R"({"record":"microbatch","step":0,"micro_step":)" << k << R"(,"rank":0,"rows":[)" << row
          << R"(],"producer":{"loss_sum":0.0,"denominator":0,"denominator_scope":"global"}})" << "\n";
    };
    mb(0, R"({"input_ids":[1,0],"labels":[-100,-100],"position_ids":[0,0],"doc_ids":[0,-1]})");
    mb(1, R"({"input_ids":[0,1],"labels":[1,-100],"position_ids":[0,1],"doc_ids":[0,1]})");
  }
  for (const bool oracle : {false, true}) {
    const AuditResult r = Verify(path, oracle);
    EXPECT_EQ(Findings(r), (std::vector<std::string>{"attention 0/1/0/0"})) << oracle;
    EXPECT_EQ(r.ambiguous, (std::vector<Invariant>{Invariant::kTargets, Invariant::kDenominator})) << oracle;
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_TRUE(std::any_of(r.notes.begin(), r.notes.end(), [](const AuditNote& n) {
      return n.text.starts_with("not checked, ambiguous: targets, denominator");
    })) << RenderAuditText(r, 20);
  }
}

TEST(VerifyDerivedSpans, ReconcileReadingsKeepsWhatEveryReadingFinds) {
  AuditResult chosen, other;
  chosen.violations.push_back({.invariant = Invariant::kAttention});
  chosen.violations.push_back({.invariant = Invariant::kPositions});
  other.violations.push_back({.invariant = Invariant::kAttention});
  other.not_kept[Invariant::kTargets] = 2;
  const AuditResult r = ReconcileReadings(chosen, {other});
  EXPECT_EQ(Findings(r), (std::vector<std::string>{"attention -1/-1/-1/-1"}));
  EXPECT_EQ(r.ambiguous, (std::vector<Invariant>{Invariant::kPositions, Invariant::kTargets}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(ReconcileReadings(chosen, {chosen}).ambiguous.empty());
}

}  // namespace
}  // namespace packoracle::jobs
