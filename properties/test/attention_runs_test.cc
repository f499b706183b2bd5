// The comparison over runs (attention_runs.h) pinned to the rule's owner, Attends (oracle/batch.h), element by
// element: on generated rows (pieces and padding anywhere), every policy's attention and pad_keys, and masks
// that are the rule's with random cells flipped, runs flipped, or whole queries replaced.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "packoracle/oracle.h"
#include "packoracle/properties/attention_runs.h"
#include "packoracle/properties/verify.h"

namespace packoracle {
namespace {

// A row of n slots: contiguous pieces (ids 0, 1, ...) with padding stretches between and around them.
OracleRow GeneratedRow() {
  OracleRow row;
  const int stretches = *rc::gen::inRange(0, 8);
  std::int64_t piece = 0;
  for (int s = 0; s < stretches; ++s) {
    const bool pad = *rc::gen::weightedOneOf<bool>({{1, rc::gen::just(true)}, {3, rc::gen::just(false)}});
    const int length = *rc::gen::inRange(1, 12);
    for (int k = 0; k < length; ++k) {
      Slot slot;
      if (!pad) slot = Slot{piece, k, piece, 7};
      row.slots.push_back(slot);
    }
    if (!pad) ++piece;
  }
  return row;
}

// The rule's mask, then some damage.
DenseMask DamagedRuleMask(const OracleRow& row, const Policy& policy) {
  const auto n = static_cast<std::size_t>(row.length());
  DenseMask mask(n, std::vector<std::uint8_t>(n, 0));
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) mask[i][j] = Attends(row, policy, static_cast<std::int64_t>(i), static_cast<std::int64_t>(j));
  if (n == 0) return mask;
  const int damage = *rc::gen::inRange(0, 4);
  for (int d = 0; d < damage; ++d) {
    const auto i = *rc::gen::inRange<std::size_t>(0, n), a = *rc::gen::inRange<std::size_t>(0, n);
    const auto b = *rc::gen::inRange<std::size_t>(a, n + 1);
    switch (*rc::gen::inRange(0, 3)) {
      case 0: mask[i][a] ^= 1; break;                                                   // one cell
      case 1: for (std::size_t j = a; j < b; ++j) mask[i][j] = 1; break;                // a run shown
      default: for (std::size_t j = a; j < b; ++j) mask[i][j] = static_cast<std::uint8_t>(j % 2); break;
    }
  }
  return mask;
}

Policy GeneratedPolicy() {
  Policy policy = FindPreset("reference").policy;
  policy.attention = *rc::gen::element(Attention::kDocCausal, Attention::kRowCausal);
  policy.pad_keys = *rc::gen::element(PadKeys::kMasked, PadKeys::kOwnSegment, PadKeys::kVisible);
  return policy;
}

TEST(AttentionRuns, DisagreeingQueriesAgreeWithAttendsCellByCell) {
  EXPECT_TRUE(rc::check("runs against Attends", [] {
    const OracleRow row = GeneratedRow();
    const Policy policy = GeneratedPolicy();
    const DenseMask mask = DamagedRuleMask(row, policy);
    const MaskRuns runs = RunsFromDense(mask);
    RC_ASSERT(!Malformed(runs, row.length()));
    std::vector<QueryDisagreement> want;
    for (std::int64_t i = 0; i < row.length(); ++i) {
      if (row.slots[static_cast<std::size_t>(i)].is_pad()) continue;  // never compared
      QueryDisagreement d{i, 0, -1};
      for (std::int64_t j = 0; j < row.length(); ++j) {
        RC_ASSERT(runs.Visible(i, j) == (mask[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] != 0));
        if ((mask[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] != 0) == Attends(row, policy, i, j)) continue;
        if (d.keys++ == 0) d.first_key = j;
      }
      if (d.keys > 0) want.push_back(d);
    }
    RC_ASSERT(DisagreeingQueries(runs, PieceIds(row), policy) == want);
  }));
}

TEST(AttentionRuns, AdjacentRunsAreOneRangeOfKeys) {
  // A consumer may split a visible range in two ([0, 2) and [2, 4)): the same keys, no disagreement.
  OracleRow row;
  for (std::int64_t k = 0; k < 4; ++k) row.slots.push_back(Slot{0, k, 0, 7});
  MaskRuns runs{4, {0, 1, 2, 3, 5}, {0, 0, 0, 0, 2}, {1, 2, 3, 2, 4}, MaskSource::kRuns};
  ASSERT_FALSE(Malformed(runs, 4));
  EXPECT_TRUE(DisagreeingQueries(runs, PieceIds(row), FindPreset("reference").policy).empty());
}

TEST(AttentionRuns, MalformedRunsAreNamed) {
  MaskRuns overlapping{2, {0, 1, 3}, {0, 0, 1}, {1, 2, 2}, MaskSource::kRuns};
  EXPECT_NE(Malformed(overlapping, 2)->find("query 1"), std::string::npos);
  EXPECT_EQ(*Malformed(overlapping, 3), "the consumer's mask is not 3 x 3");
  EXPECT_EQ(RunsFromDense({{1, 0}, {1}}).n, -1);  // not square
}

}  // namespace
}  // namespace packoracle

namespace packoracle {
namespace {

// Stubs that answer every row with no visible key, as runs or as a dense matrix: what matters here is which
// rows the run generates for them (the probe in Verify), not their verdicts.
struct RunsStub {
  std::vector<MaskRuns> ConsumeMicrobatchRuns(const CandidateMicrobatch& mb, const Policy&) {
    std::vector<MaskRuns> out;
    for (const auto& row : mb.rows) {
      const auto n = static_cast<std::int64_t>(row.input_ids.size());
      out.push_back(MaskRuns{n, std::vector<std::int64_t>(static_cast<std::size_t>(n + 1), 0), {}, {}, MaskSource::kRuns});
    }
    return out;
  }
};
struct DenseStub {
  DenseMask Consume(const CandidateRow& row, const Policy&) {
    return DenseMask(row.input_ids.size(), std::vector<std::uint8_t>(row.input_ids.size(), 0));
  }
};

std::int64_t LongestRowGenerated(Candidate candidate) {
  std::int64_t longest = 0;
  VerifyOptions options;
  options.cases = 60;
  options.profile = "large";
  options.max_row_length = 4096;
  options.check_case = [&](Candidate&, const PackRequest& request, const CheckOptions&) {
    longest = std::max(longest, request.row_length);
    return CaseResult{};
  };
  Verify(candidate, options);
  return longest;
}

TEST(AttentionRuns, AConsumerAnsweringRunsGetsLongRowsUnderEveryPresetADenseOneStaysAt512) {
  for (const auto& preset : Presets()) {
    EXPECT_GT(LongestRowGenerated(MakeCandidate("runs", RunsStub{}, {preset.policy})), kDenseConsumerMaxRowLength)
        << preset.name;
  }
}

// A dense consumer's rows stay at 512 slots but in one case of kFullSizeCaseEvery, which has rows of the run's
// full length (at least kFullSizeMinRowLength) one a micro-batch: a mask bug gated on size is reached whatever
// the consumer answers.
TEST(AttentionRuns, ADenseConsumerGetsFullSizeRowsOneAMicroBatchInOneCaseOf32) {
  for (const auto& preset : Presets()) {
    Candidate dense = MakeCandidate("dense", DenseStub{}, {preset.policy});
    VerifyOptions options;
    options.cases = 2 * kFullSizeCaseEvery;
    options.max_row_length = 8192;
    std::vector<std::pair<std::int64_t, std::int64_t>> seen;  // (row_length, micro_batch_rows) a case
    options.check_case = [&](Candidate&, const PackRequest& request, const CheckOptions&) {
      seen.emplace_back(request.row_length, request.micro_batch_rows);
      return CaseResult{};
    };
    Verify(dense, options);
    ASSERT_EQ(seen.size(), 2u * kFullSizeCaseEvery) << preset.name;
    for (std::size_t k = 0; k < seen.size(); ++k) {
      if (static_cast<int>(k) % kFullSizeCaseEvery == kFullSizeCaseEvery - 1) {
        EXPECT_GE(seen[k].first, kFullSizeMinRowLength) << preset.name << " case " << k;
        EXPECT_EQ(seen[k].second, 1) << preset.name << " case " << k;
      } else {
        EXPECT_LE(seen[k].first, kDenseConsumerMaxRowLength) << preset.name << " case " << k;
      }
    }
  }
}

// The probe hands a consumer what CheckCase hands it: its own packer's rows when it has a packer. A consumer that
// reads a field only its packer writes (as MK-02 reads the attention_mask its packer fills) answered the
// reference packer's rows before, and a dereferenced empty field could ask for gigabytes.
struct PackerWritesTheMask {
  std::shared_ptr<PackerRole> reference = ReferenceCandidate().packer;
  PackResult Pack(const PackRequest& request) {
    PackResult out = reference->Pack(request);
    for (auto& mb : out.microbatches)
      for (auto& row : mb.rows) row.attention_mask = std::vector<std::int64_t>(row.input_ids.size(), 1);
    return out;
  }
  std::vector<MaskRuns> ConsumeMicrobatchRuns(const CandidateMicrobatch& mb, const Policy& policy) {
    for (const auto& row : mb.rows) {
      if (!row.attention_mask) throw std::logic_error("this consumer reads the attention_mask its packer writes");
    }
    return RunsStub{}.ConsumeMicrobatchRuns(mb, policy);
  }
};

TEST(AttentionRuns, TheProbeHandsAConsumerItsOwnPackersRows) {
  const Policy reference = FindPreset("reference").policy;
  EXPECT_GT(LongestRowGenerated(MakeCandidate("packer-and-consumer", PackerWritesTheMask{}, {reference})),
            kDenseConsumerMaxRowLength);
}

}  // namespace
}  // namespace packoracle
