// efficiency: no_mergeable_rows, the policy's promise of first-fit quality (DESIGN §3, §4): checked by
// CheckCase (and by the fast verifier, pinned to it in fastcheck/test/differential_test.cc).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <gtest/gtest-spi.h>

#include "conformance_probe.h"
#include "packoracle/gtest.h"
#include "packoracle/oracle.h"
#include "packoracle/properties/generators.h"

namespace packoracle {
namespace {

// A correct producer's rows for a layout of its own: one document per row (the needless rows of a packer
// that opens a new row per document), or documents in order, a new row when the current one is full.
// A layout the policy refuses (a document longer than the row under overflow: error) is the packer's refusal.
template <class MakeLayout>
PackResult PackOrRefuse(const PackRequest& r, MakeLayout make) {
  try {
    return PackWithLayout(r, make(r.documents, r.policy, r.row_length));
  } catch (const InputError& e) {
    return PackResult::Refuse(e.what());
  }
}
struct OneRowPerDocument {
  PackResult Pack(const PackRequest& r) { return PackOrRefuse(r, OneDocumentPerRow); }
};
struct Sequential {
  PackResult Pack(const PackRequest& r) { return PackOrRefuse(r, SequentialLayout); }
};

Policy Promised(const char* preset = "reference") {
  Policy p = FindPreset(preset).policy;
  p.efficiency = Efficiency::kNoMergeableRows;
  return p;
}

PackRequest Request(const Policy& policy, std::vector<std::vector<Token>> tokens, std::int64_t L = 8,
                    std::int64_t rows_per_microbatch = 4, std::int64_t ranks = 1) {
  PackRequest r;
  r.row_length = L;
  r.micro_batch_rows = rows_per_microbatch;
  r.dp_world_size = ranks;
  r.policy = policy;
  r.documents = MakeDocuments(tokens);
  return r;
}

std::vector<std::string> EfficiencySentences(const CaseResult& result) {
  std::vector<std::string> out;
  for (const auto& v : result.violations)
    if (v.invariant == Invariant::kEfficiency) out.push_back(v.sentence);
  return out;
}

TEST(Efficiency, ANewRowPerDocumentPassesWhenReportedAndBreaksThePromise) {
  Candidate c = MakeCandidate("one-row-per-document", OneRowPerDocument{});
  const auto reported = CheckCase(c, Request(FindPreset("reference").policy, {{5, 6}, {7}, {8, 9, 10}}));
  EXPECT_TRUE(reported.passed());
  EXPECT_FALSE(reported.checked.count(Invariant::kEfficiency));

  const auto promised = CheckCase(c, Request(Promised(), {{5, 6}, {7}, {8, 9, 10}}));
  ASSERT_FALSE(promised.passed());
  EXPECT_TRUE(promised.checked.count(Invariant::kEfficiency));
  ASSERT_EQ(promised.violations.size(), 1u);  // one per rank: the pair with the fewest used slots
  EXPECT_EQ(promised.violations[0].invariant, Invariant::kEfficiency);
  EXPECT_EQ(promised.violations[0].row, 1);
  EXPECT_EQ(promised.violations[0].sentence,
            "micro-batch 0 row 0 (2 non-pad slots) and micro-batch 0 row 1 (1) could be one row: 2 + 1 = 3 ≤ the "
            "row length 8, but the policy promises efficiency: no_mergeable_rows");
}

TEST(Efficiency, SequentialRowsThatCouldMergeBreakItAndFirstFitKeepsIt) {
  // Lengths 2, 7, 2 in rows of 8: sequential opens a row for each (2 + 7 > 8, 7 + 2 > 8), and rows 0 and 2
  // could be one; first fit puts the third document beside the first.
  const auto request = Request(Promised(), {{1, 2}, {1, 2, 3, 4, 5, 6, 7}, {3, 4}});
  Candidate sequential = MakeCandidate("sequential", Sequential{});
  const auto broken = CheckCase(sequential, request);
  ASSERT_EQ(EfficiencySentences(broken).size(), 1u);
  EXPECT_EQ(EfficiencySentences(broken)[0],
            "micro-batch 0 row 0 (2 non-pad slots) and micro-batch 0 row 2 (2) could be one row: 2 + 2 = 4 ≤ the "
            "row length 8, but the policy promises efficiency: no_mergeable_rows");
  Candidate reference = ReferenceCandidate();  // DefaultLayout: first fit under the promise
  const auto kept = CheckCase(reference, request);
  EXPECT_TRUE(kept.passed()) << (kept.violations.empty() ? "" : kept.violations[0].sentence);
  EXPECT_TRUE(kept.checked.count(Invariant::kEfficiency));
  ASSERT_TRUE(kept.oracle.has_value());
  EXPECT_EQ(kept.oracle->rows.size(), 2u);
}

TEST(Efficiency, DelimitersCountAndPaddingToAMultipleLowersTheCapacity) {
  // eos_id appended: documents of 3 and 4 effective tokens, one row each; 3 + 4 = 7 ≤ 8 merges.
  Policy eos = Promised();
  eos.eos_id = 0;
  Candidate c = MakeCandidate("one-row-per-document", OneRowPerDocument{});
  const auto with_eos = CheckCase(c, Request(eos, {{5, 6}, {7, 8, 9}}));
  ASSERT_EQ(EfficiencySentences(with_eos).size(), 1u);
  EXPECT_NE(EfficiencySentences(with_eos)[0].find("3 + 4 = 7"), std::string::npos);
  // Rows of 10 padded to multiples of 4: a merged row of 9 tokens would take 12 slots, so 4 + 5 cannot merge,
  // and 4 + 4 can (8 ≤ 8).
  Policy multiple = Promised();
  multiple.pad_to = PadTo{PadTo::Kind::kMultipleOf, 4};
  EXPECT_TRUE(CheckCase(c, Request(multiple, {{1, 2, 3, 4}, {1, 2, 3, 4, 5}}, 10)).passed());
  const auto fits = CheckCase(c, Request(multiple, {{1, 2, 3, 4}, {5, 6, 7, 8}}, 10));
  ASSERT_EQ(EfficiencySentences(fits).size(), 1u);
  EXPECT_EQ(EfficiencySentences(fits)[0],
            "micro-batch 0 row 0 (4 non-pad slots) and micro-batch 0 row 1 (4) could be one row: 4 + 4 = 8 ≤ 8, "
            "the most tokens a row of length 10 holds padded to multiple_of:4, but the policy promises "
            "efficiency: no_mergeable_rows");
}

TEST(Efficiency, RowsOfDifferentRanksAreNotCompared) {
  Candidate c = MakeCandidate("one-row-per-document", OneRowPerDocument{});
  // One row per micro-batch, micro-batches dealt round-robin to two ranks: each rank holds one row.
  EXPECT_TRUE(CheckCase(c, Request(Promised(), {{5, 6}, {7}}, 8, 1, 2)).passed());
  const auto four = CheckCase(c, Request(Promised(), {{5, 6}, {7}, {8}, {9, 9, 9}}, 8, 1, 2));
  const auto sentences = EfficiencySentences(four);
  ASSERT_EQ(sentences.size(), 2u);  // rank 0: rows 0 and 2; rank 1: rows 1 and 3
  EXPECT_EQ(sentences[0],
            "micro-batch 0 row 0 (2 non-pad slots) and micro-batch 2 row 0 (1) on rank 0 could be one row: 2 + 1 "
            "= 3 ≤ the row length 8, but the policy promises efficiency: no_mergeable_rows");
  EXPECT_NE(sentences[1].find("on rank 1"), std::string::npos);
}

TEST(Efficiency, TheRunnerFindsAndShrinksASequentialPackerAndPassesTheReference) {
  VerifyOptions options;
  options.cases = 150;
  Candidate reference = ReferenceCandidate();
  reference.policies = {Promised(), Promised("trl-padding-free"), Promised("megatron-sft-thd")};
  const auto passed = Verify(reference, options);
  EXPECT_TRUE(passed.passed) << passed.text;
  EXPECT_TRUE(passed.checked.count(Invariant::kEfficiency));
  Candidate sequential = MakeCandidate("sequential", Sequential{}, {Promised()});
  const auto report = Verify(sequential, options);
  ASSERT_FALSE(report.passed);
  EXPECT_EQ(report.broken(), Invariant::kEfficiency) << report.text;
  EXPECT_LE(report.counterexample_documents(), 3u);
}

// The typed suite's efficiency test (packoracle/gtest.h), generated from the invariants' list: under a policy
// that promises no_mergeable_rows it catches a packer that opens a row per document, and passes the reference.
struct OneRowPerDocumentPromising : OneRowPerDocument {
  static std::vector<Policy> Policies() { return {Promised()}; }
};
struct ReferencePromising {
  static std::vector<Policy> Policies() { return {Promised()}; }
  PackResult Pack(const PackRequest& r) { return ReferenceCandidate().packer->Pack(r); }
};

TEST(Efficiency, TheTypedSuitesEfficiencyTestCatchesARowPerDocumentAndPassesTheReference) {
  EXPECT_NONFATAL_FAILURE(ConformanceProbe<OneRowPerDocumentPromising>().Check(Invariant::kEfficiency), "efficiency");
  ConformanceProbe<ReferencePromising>().Check(Invariant::kEfficiency);
}

}  // namespace
}  // namespace packoracle
