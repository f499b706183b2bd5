// The consumer forms that see more than a mask (candidate.h): a value consumer (per-position outputs and
// parameter gradients, packed against each document piece alone: value_invariance.cc) and an attention consumer
// that sees the step's layout (ConsumeMicrobatchInStep, StepLayout). Each mechanism is written as a C++
// candidate, caught by the typed suite's test of its invariant (conformance_probe.h), and its fixed twin passes;
// python/tests/test_value_consumers.py and test_step_view.py do the same through packoracle.fuzz.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include <gtest/gtest-spi.h>

#include "conformance_probe.h"
#include "packoracle/oracle.h"
#include "packoracle/properties/invariants.h"

namespace packoracle {
namespace {

// Two features per slot from the token; doc_ids (-1 padding) say where documents are, as a varlen kernel is told.
double Feature(Token token, std::int64_t f) { return f == 0 ? 0.1 * static_cast<double>(token % 17) : std::sin(static_cast<double>(token)); }

// Hidden states centred over every real slot of the row (kRow: a normalisation leak across documents) or over
// each document's own slots (kDocument: the fixed twin).
enum class Centre { kRow, kDocument };

template <Centre kCentre>
struct CentringConsumer {
  static std::vector<Policy> Policies() { return {FindPreset("reference").policy}; }
  ValueAnswer ConsumeValues(const CandidateMicrobatch& mb, const Policy&, const ValueRequest&) {
    ValueAnswer out;
    for (const auto& row : mb.rows) {
      const std::size_t n = row.input_ids.size();
      const auto& ids = *row.doc_ids;
      std::map<std::int64_t, std::pair<double, double>> sums;  // group → (Σ feature 0, count)
      auto group = [&](std::size_t i) { return kCentre == Centre::kRow ? 0 : ids[i]; };
      for (std::size_t i = 0; i < n; ++i)
        if (ids[i] >= 0) {
          sums[group(i)].first += Feature(row.input_ids[i], 0);
          sums[group(i)].second += 1;
        }
      SlotValues values{2, {}};
      for (std::size_t i = 0; i < n; ++i) {
        const double mean = ids[i] >= 0 ? sums[group(i)].first / sums[group(i)].second : 0.0;
        values.values.push_back(Feature(row.input_ids[i], 0) - mean);
        values.values.push_back(Feature(row.input_ids[i], 1));
      }
      out.rows.push_back(std::move(values));
    }
    return out;
  }
};

TEST(ValueConsumer, ANormalisationLeakAcrossDocumentsIsCaughtAndCentringPerDocumentPasses) {
  EXPECT_NONFATAL_FAILURE(ConformanceProbe<CentringConsumer<Centre::kRow>>().Check(Invariant::kPackingInvariance),
                          "alone in a row of its own");
  ConformanceProbe<CentringConsumer<Centre::kDocument>>().Check(Invariant::kPackingInvariance);
}

TEST(ValueConsumer, TheLeakIsNamedWithTheSlotAndBothValues) {
  PackRequest request;
  request.policy = FindPreset("reference").policy;
  request.row_length = 8;
  request.documents = {{"a", {11, 12, 13}, {}}, {"b", {21, 22, 23, 24}, {}}};
  Candidate leak = MakeCandidate("leak", CentringConsumer<Centre::kRow>{});
  const CaseResult result = CheckCase(leak, request);
  ASSERT_FALSE(result.violations.empty());
  const Violation& v = result.violations.front();
  EXPECT_EQ(v.invariant, Invariant::kPackingInvariance);
  EXPECT_EQ(v.row, 0);
  EXPECT_EQ(v.slot, 0);  // document a's first token: its output moved with b's tokens
  EXPECT_NE(v.sentence.find("document 'a'"), std::string::npos) << v.sentence;
  EXPECT_NE(v.expected, v.actual);
}

// out_i = θ[token mod 3] · feature(token) on document slots; the padding slots (past the last cu_seqlens) go
// through a "kernel" whose backward leaves NaN rows (kNan) or zeros them (kZero), which reach θ's gradient.
enum class PastLastSeqlen { kNan, kZero };

template <PastLastSeqlen kPad>
struct LinearConsumer {
  static std::vector<Policy> Policies() { return {FindPreset("reference").policy}; }
  std::vector<double> theta = {0.5, -1.25, 2.0};
  bool AnswersGradients() const { return true; }
  ValueAnswer ConsumeValues(const CandidateMicrobatch& mb, const Policy&, const ValueRequest& request) {
    ValueAnswer out;
    std::vector<double> gradient(theta.size(), 0.0);
    for (std::size_t r = 0; r < mb.rows.size(); ++r) {
      const auto& row = mb.rows[r];
      SlotValues values{1, {}};
      for (std::size_t i = 0; i < row.input_ids.size(); ++i) {
        const auto p = static_cast<std::size_t>(row.input_ids[i] % 3);
        const bool pad = (*row.doc_ids)[i] < 0;
        values.values.push_back(pad ? 0.0 : theta[p] * Feature(row.input_ids[i], 0));
        if (!request.gradient) continue;
        // d/dθ_p of u_i · c_0 · out_i; a padding row's gradient is what the kernel's backward leaves there
        if (pad) gradient[p] += kPad == PastLastSeqlen::kNan ? std::numeric_limits<double>::quiet_NaN() : 0.0;
        else gradient[p] += request.slot_weights[r][i] * ProbeFeatureWeight(0) * Feature(row.input_ids[i], 0);
      }
      out.rows.push_back(std::move(values));
    }
    if (request.gradient) out.parameter_gradient = gradient;
    return out;
  }
};

TEST(ValueConsumer, ANanGradientRowPastTheLastCuSeqlensIsCaughtUnderGradientAndZeroedRowsPass) {
  EXPECT_NONFATAL_FAILURE(ConformanceProbe<LinearConsumer<PastLastSeqlen::kNan>>().Check(Invariant::kGradient),
                          "a NaN packed");
  ConformanceProbe<LinearConsumer<PastLastSeqlen::kZero>>().Check(Invariant::kGradient);
  ConformanceProbe<LinearConsumer<PastLastSeqlen::kNan>>().Check(Invariant::kPackingInvariance);  // values are right
}

TEST(ValueConsumer, WithoutGradientsOnlyValuesAreChecked) {
  Candidate values = MakeCandidate("centring", CentringConsumer<Centre::kDocument>{});
  PackRequest request;
  request.policy = FindPreset("reference").policy;
  request.row_length = 8;
  request.documents = {{"a", {11, 12, 13}, {}}};
  const CaseResult result = CheckCase(values, request);
  EXPECT_TRUE(result.checked.count(Invariant::kPackingInvariance));
  EXPECT_TRUE(result.not_applicable.count(Invariant::kGradient));
}

// An attention consumer that sees the step (StepAttentionConsumer): each CP rank labels the slots it holds with
// local document indices and the group's row is assembled from them. kDivided: the rank's local cu_seqlens are
// cu_seqlens // cp (right only for per-document load balancing of lengths 2·cp divides); kHeld: the boundaries
// of the slots the rank really holds (StepLayout::cp_shards).
enum class LocalBoundaries { kDivided, kHeld };

// What a varlen kernel run causally on per-slot segment ids computes, as runs (rows of any length): query i sees
// the keys j ≤ i of its segment (-1: padding, seen by none), whose slots need not be contiguous.
MaskRuns SegmentRuns(const std::vector<std::int64_t>& segment) {
  MaskRuns out;
  out.n = static_cast<std::int64_t>(segment.size());
  out.row_offsets.push_back(0);
  std::map<std::int64_t, std::vector<std::pair<std::int64_t, std::int64_t>>> blocks;  // id → its blocks so far
  for (std::int64_t i = 0; i < out.n; ++i) {
    const std::int64_t s = segment[static_cast<std::size_t>(i)];
    if (s >= 0) {
      auto& mine = blocks[s];
      if (!mine.empty() && mine.back().second == i) ++mine.back().second;
      else mine.push_back({i, i + 1});
      for (const auto& [b, e] : mine) {
        out.run_begin.push_back(b);
        out.run_end.push_back(e);
      }
    }
    out.row_offsets.push_back(static_cast<std::int64_t>(out.run_begin.size()));
  }
  return out;
}

template <LocalBoundaries kHow>
struct ContextParallelConsumer {
  // It reads cu_seqlens and doc_ids, which the reference preset's rows carry.
  static std::vector<Policy> Policies() { return {FindPreset("reference").policy}; }
  std::vector<MaskRuns> ConsumeMicrobatchInStep(const CandidateMicrobatch& mb, const Policy&, const StepLayout& layout) {
    std::vector<MaskRuns> out;
    for (std::size_t r = 0; r < mb.rows.size(); ++r) {
      const auto& row = mb.rows[r];
      const auto& cu = *row.cu_seqlens;
      const std::size_t n = row.input_ids.size();
      auto document = [&](std::int64_t slot, const std::vector<std::int64_t>& bounds) {
        std::int64_t d = 0;
        while (d + 1 < static_cast<std::int64_t>(bounds.size()) && bounds[static_cast<std::size_t>(d + 1)] <= slot) ++d;
        return d;
      };
      std::vector<std::int64_t> divided;
      for (const auto c : cu) divided.push_back(c / layout.context_parallel_size);
      std::vector<std::int64_t> segment(n, -1);
      for (const auto& chunks : layout.cp_shards[r]) {
        std::int64_t local = 0;
        for (const CpChunk& c : chunks)
          for (std::int64_t g = c.start; g < c.end; ++g, ++local)
            if ((*row.doc_ids)[static_cast<std::size_t>(g)] >= 0)
              segment[static_cast<std::size_t>(g)] = kHow == LocalBoundaries::kHeld ? document(g, cu) : document(local, divided);
      }
      out.push_back(SegmentRuns(segment));
    }
    return out;
  }
};

TEST(StepLayout, PerRankBoundaryArithmeticUnderContextParallelismIsCaughtAndTheHeldShardsPass) {
  EXPECT_NONFATAL_FAILURE(
      ConformanceProbe<ContextParallelConsumer<LocalBoundaries::kDivided>>().Check(Invariant::kAttention), "attention");
  ConformanceProbe<ContextParallelConsumer<LocalBoundaries::kHeld>>().Check(Invariant::kAttention);
}

TEST(StepLayout, TheLayoutDealsEveryRowToTheDrawnContextParallelRanks) {
  StepLayout seen;
  struct Recorder {
    StepLayout* seen;
    std::vector<MaskRuns> ConsumeMicrobatchInStep(const CandidateMicrobatch& mb, const Policy&, const StepLayout& l) {
      *seen = l;
      std::vector<MaskRuns> out;
      for (const auto& row : mb.rows) out.push_back(SegmentRuns(std::vector<std::int64_t>(row.input_ids.size(), 0)));
      return out;
    }
  };
  Candidate c = MakeCandidate("recorder", Recorder{&seen});
  PackRequest request;
  request.policy = FindPreset("reference").policy;
  request.row_length = 8;
  request.documents = {{"a", {11, 12, 13}, {}}, {"b", {21, 22, 23, 24}, {}}};
  CheckCase(c, request);
  EXPECT_EQ(seen.microbatch, 0);
  EXPECT_TRUE(seen.context_parallel_size == 2 || seen.context_parallel_size == 4 || seen.context_parallel_size == 8);
  ASSERT_EQ(seen.cp_shards.size(), 1u);
  EXPECT_EQ(static_cast<std::int64_t>(seen.cp_shards[0].size()), seen.context_parallel_size);
  std::int64_t held = 0;
  for (const auto& chunks : seen.cp_shards[0])
    for (const CpChunk& c : chunks) held += c.end - c.start;
  EXPECT_EQ(held, 8);  // every slot held by exactly one rank
}

}  // namespace
}  // namespace packoracle
