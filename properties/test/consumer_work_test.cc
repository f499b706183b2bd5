// efficiency of what an attention consumer computes (DESIGN §4, §12 "Work"): a consumer says, beside its masks,
// the (query, key) pairs its kernel evaluates (ComputedWork: per row, and the rows it builds beyond the
// micro-batch's); the oracle states the least the declared rule needs (RequiredAttentionPairs); under
// `efficiency: reported` the consumer's utilization is reported only, and under the policy's promise
// `consumer_overhead: p` a micro-batch computing more than (1 + p/100) times that is an `efficiency` finding.
// Two mechanisms, each with its fixed twin:
//   - alignment padding turned into a dense dummy row (the micro-batch's tokens padded to a multiple of 8 for
//     the kernel, the padding attended as a dense a × a block): the masks are right, the compute doubles unseen;
//   - a dense causal kernel over the whole padded row (SDPA with a padding mask): every padding query's keys
//     computed and thrown away.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "packoracle/gtest.h"
#include "packoracle/oracle.h"
#include "packoracle/properties/generators.h"

namespace packoracle {
namespace {

// The runs of a row where query i computes keys [begin(i), end(i)) (an empty range: nothing).
template <class Range>
MaskRuns RunsOf(std::int64_t n, Range range) {
  MaskRuns out;
  out.n = n;
  out.row_offsets.push_back(0);
  for (std::int64_t i = 0; i < n; ++i) {
    const auto [begin, end] = range(i);
    if (end > begin) {
      out.run_begin.push_back(begin);
      out.run_end.push_back(end);
    }
    out.row_offsets.push_back(static_cast<std::int64_t>(out.run_begin.size()));
  }
  return out;
}

// Query i of a piece sees [piece start, i]; padding sees nothing: the declared doc_causal rule, as a varlen
// kernel over the row's pieces computes it.
MaskRuns PieceCausal(const CandidateRow& row) {
  const auto n = static_cast<std::int64_t>(row.input_ids.size());
  std::vector<std::int64_t> start(static_cast<std::size_t>(n), -1);
  for (const DocSpan& span : row.doc_spans)
    for (std::int64_t t = 0; t < span.length; ++t) start[static_cast<std::size_t>(span.start + t)] = span.start;
  return RunsOf(n, [&](std::int64_t i) {
    const auto s = start[static_cast<std::size_t>(i)];
    return std::pair<std::int64_t, std::int64_t>{s < 0 ? 0 : s, s < 0 ? 0 : i + 1};
  });
}

std::int64_t Tokens(const CandidateMicrobatch& mb) {
  std::int64_t tokens = 0;
  for (const auto& row : mb.rows)
    for (const DocSpan& span : row.doc_spans) tokens += span.length;
  return tokens;
}

// A varlen consumer that pads the micro-batch's tokens to a multiple of 8 for its kernel (alignment padding). The
// buggy one turns that padding into a dense dummy row of a slots, attended a × a; its twin leaves it out of
// cu_seqlens, where the kernel computes nothing. Both attend exactly the declared rule.
struct AlignmentPadding {
  bool dense_dummy_row = false;
  ConsumerAnswer ConsumeMicrobatchWithWork(const CandidateMicrobatch& mb, const Policy&, const StepLayout&) const {
    ConsumerAnswer out;
    for (const auto& row : mb.rows) out.masks.push_back(PieceCausal(row));
    out.work.emplace();  // rows: each computes what it attends
    const std::int64_t a = (8 - Tokens(mb) % 8) % 8;
    if (dense_dummy_row && a > 0)
      out.work->extra_rows.push_back(RunsOf(a, [a](std::int64_t) { return std::pair<std::int64_t, std::int64_t>{0, a}; }));
    return out;
  }
};

// An SDPA-style consumer: masks right, but its kernel runs causal over the whole padded row, padding queries
// included ([0, i] for every slot). Its twin unpads the row first: only the tokens' queries, causal.
struct CausalOverPaddedRow {
  bool over_padding = true;
  ConsumerAnswer ConsumeMicrobatchWithWork(const CandidateMicrobatch& mb, const Policy&, const StepLayout&) const {
    ConsumerAnswer out;
    out.work.emplace();
    for (const auto& row : mb.rows) {
      out.masks.push_back(PieceCausal(row));
      std::int64_t used = 0;
      for (const DocSpan& span : row.doc_spans) used = std::max(used, span.start + span.length);
      const bool all = over_padding;
      out.work->rows.push_back(RunsOf(static_cast<std::int64_t>(row.input_ids.size()), [used, all](std::int64_t i) {
        return std::pair<std::int64_t, std::int64_t>{0, all || i < used ? i + 1 : 0};
      }));
    }
    return out;
  }
};

Policy Promising(const char* preset, std::int64_t overhead) {
  Policy p = FindPreset(preset).policy;
  p.consumer_overhead = overhead;
  return p;
}

PackRequest Request(const Policy& policy, std::vector<std::vector<Token>> tokens, std::int64_t L = 8) {
  PackRequest r;
  r.row_length = L;
  r.micro_batch_rows = 2;
  r.dp_world_size = 1;
  r.policy = policy;
  r.documents = MakeDocuments(tokens);
  return r;
}

std::string First(const CaseResult& result) { return result.violations.empty() ? "" : result.violations[0].sentence; }

TEST(ConsumerWork, TheOracleStatesTheLeastWorkOfTheDeclaredRule) {
  const auto docs = MakeDocuments({{1, 2, 3}, {4, 5}});
  Layout layout;
  layout.row_length = 8;
  layout.rows.push_back({8, {{0, 0, 0, 3}, {1, 0, 3, 2}}, 0, 0});
  Policy doc_causal = FindPreset("reference").policy;
  const OracleBatch batch = Materialize(docs, layout, doc_causal);
  EXPECT_EQ(RequiredAttentionPairs(batch.rows[0], doc_causal), 3 * 4 / 2 + 2 * 3 / 2);  // Σ k(k+1)/2 over pieces
  Policy row_causal = doc_causal;
  row_causal.attention = Attention::kRowCausal;
  row_causal.boundary_source = BoundarySource::kNone;
  EXPECT_EQ(RequiredAttentionPairs(Materialize(docs, layout, row_causal).rows[0], row_causal), 5 * 6 / 2);
  Policy visible = doc_causal;
  visible.pad_keys = PadKeys::kVisible;  // right padding trails every query: still no pad key before one
  EXPECT_EQ(RequiredAttentionPairs(Materialize(docs, layout, visible).rows[0], visible), 9);
}

TEST(ConsumerWork, ADenseDummyRowIsReportedAndBreaksThePromise) {
  Candidate dummy = MakeCandidate("dense-dummy-row", AlignmentPadding{true});
  Candidate twin = MakeCandidate("alignment-padding-skipped", AlignmentPadding{false});
  const auto request = [](const Policy& p) { return Request(p, {{11}}); };  // 1 token: 7 slots of alignment padding
  // Reported only: passes, the consumer's work measured (49 pairs of the dummy row beside the 1 needed).
  const auto reported = CheckCase(dummy, request(FindPreset("reference").policy));
  EXPECT_TRUE(reported.passed()) << First(reported);
  ASSERT_TRUE(reported.consumer_work.has_value());
  EXPECT_EQ(reported.consumer_work->computed, 50);
  EXPECT_EQ(reported.consumer_work->required, 1);
  EXPECT_FALSE(reported.checked.count(Invariant::kEfficiency));
  // Promised: a finding naming the micro-batch, the pairs and the promise; the twin passes, checked.
  const auto promised = CheckCase(dummy, request(Promising("reference", 0)));
  ASSERT_FALSE(promised.passed());
  EXPECT_EQ(promised.violations[0].invariant, Invariant::kEfficiency);
  EXPECT_EQ(First(promised),
            "micro-batch 0: the attention consumer computes 50 (query, key) pairs (row 0: 1, 1 extra row: 49), the "
            "declared attention needs 1: 4900% more than needed, but the policy promises consumer_overhead: 0 (at "
            "most 0% more)");
  const auto fixed = CheckCase(twin, request(Promising("reference", 0)));
  EXPECT_TRUE(fixed.passed()) << First(fixed);
  EXPECT_TRUE(fixed.checked.count(Invariant::kEfficiency));
  EXPECT_EQ(fixed.consumer_work->computed, fixed.consumer_work->required);
}

TEST(ConsumerWork, ACausalKernelOverThePaddedRowBreaksThePromiseItsUnpaddedTwinKeeps) {
  Candidate padded = MakeCandidate("causal-over-padding", CausalOverPaddedRow{true});
  Candidate unpadded = MakeCandidate("unpadded", CausalOverPaddedRow{false});
  const PackRequest r = Request(Promising("hf-padded", 100), {{11, 12}, {21, 22, 23, 24, 25, 26, 27}});
  const auto got = CheckCase(padded, r);
  ASSERT_FALSE(got.passed());
  EXPECT_EQ(got.violations[0].invariant, Invariant::kEfficiency) << First(got);
  // rows of 8 slots: 36 pairs each, against 3 + 28 needed
  EXPECT_NE(First(got).find("computes 72 (query, key) pairs (row 0: 36, row 1: 36), the declared attention needs 31"),
            std::string::npos)
      << First(got);
  const auto fixed = CheckCase(unpadded, r);
  EXPECT_TRUE(fixed.passed()) << First(fixed);
}

TEST(ConsumerWork, TheRunnerShrinksTheDummyRowToAMinimalCounterexample) {
  VerifyOptions options;
  options.cases = 100;
  options.max_row_length = 32;
  Candidate dummy = MakeCandidate("dense-dummy-row", AlignmentPadding{true}, {Promising("reference", 0)});
  const auto report = Verify(dummy, options);
  ASSERT_FALSE(report.passed);
  EXPECT_EQ(report.broken(), Invariant::kEfficiency) << report.text;
  EXPECT_EQ(report.counterexample_documents(), 1u) << report.text;
  EXPECT_EQ(report.counterexample_tokens(), 1u) << report.text;
  EXPECT_NE(report.text.find("consumer_overhead: 0"), std::string::npos) << report.text;
  Candidate twin = MakeCandidate("alignment-padding-skipped", AlignmentPadding{false}, {Promising("reference", 0)});
  const auto passed = Verify(twin, options);
  EXPECT_TRUE(passed.passed) << passed.text;
  EXPECT_TRUE(passed.checked.count(Invariant::kEfficiency));
  ASSERT_TRUE(passed.consumer_work.has_value());
  EXPECT_EQ(passed.consumer_work->utilization(), 1.0);
}

// A work report that does not fit the micro-batch is a finding whatever the policy promises.
struct WrongRowCount {
  ConsumerAnswer ConsumeMicrobatchWithWork(const CandidateMicrobatch& mb, const Policy&, const StepLayout&) const {
    ConsumerAnswer out;
    for (const auto& row : mb.rows) out.masks.push_back(PieceCausal(row));
    out.work.emplace();
    out.work->rows.resize(mb.rows.size() + 1);
    return out;
  }
};

TEST(ConsumerWork, AMalformedWorkReportIsAFinding) {
  Candidate wrong = MakeCandidate("wrong-row-count", WrongRowCount{});
  const auto got = CheckCase(wrong, Request(FindPreset("reference").policy, {{11, 12}}));
  ASSERT_FALSE(got.passed());
  EXPECT_EQ(got.violations[0].invariant, Invariant::kEfficiency);
  EXPECT_EQ(First(got), "micro-batch 0: the attention consumer reported the work of 2 rows for a micro-batch of 1 rows");
}

// The older forms keep working unchanged: a consumer that says nothing of its work is measured on nothing.
TEST(ConsumerWork, AConsumerWithoutTheWorkFormReportsNoWork) {
  struct Runs {
    std::vector<MaskRuns> ConsumeMicrobatchRuns(const CandidateMicrobatch& mb, const Policy&) const {
      std::vector<MaskRuns> out;
      for (const auto& row : mb.rows) out.push_back(PieceCausal(row));
      return out;
    }
  };
  Candidate runs = MakeCandidate("runs", Runs{});
  const auto got = CheckCase(runs, Request(Promising("reference", 0), {{11}}));
  EXPECT_TRUE(got.passed()) << First(got);
  EXPECT_FALSE(got.consumer_work.has_value());
}

}  // namespace
}  // namespace packoracle
