// The generator's distribution, pinned (issue 15's goals): most cases share rows, few are refused or empty,
// and a run's sizes grow to real training sizes while its first cases stay small.
#include <gtest/gtest.h>

#include <rapidcheck.h>

#include "packoracle/oracle.h"
#include "packoracle/properties/generation_stats.h"
#include "packoracle/properties/generators.h"

namespace packoracle {
namespace {

std::vector<Policy> AllPresets() {
  std::vector<Policy> out;
  for (const auto& p : Presets()) out.push_back(p.policy);
  return out;
}

// `cases` cases as a fuzz run of that many draws them: profiles in turn (large twice), sizes ramped from 10
// to 100 over `ramp` cases, rows up to 8192 slots and 512 documents.
GenerationStats Generate(const std::vector<Policy>& policies, int cases, int ramp) {
  const auto& profiles = gen::Profiles();
  const gen::Limits limits{8192, 512};
  GenerationStats stats;
  for (int k = 0; k < cases; ++k) {
    const std::size_t slot = static_cast<std::size_t>(k) % (profiles.size() + 1);
    const gen::Profile& profile = slot < profiles.size() ? profiles[slot] : profiles.back();
    const int size = std::min(100, 10 + k * 90 / ramp);
    const PackRequest r = gen::Request(profile, policies, limits)(rc::Random(0xC0FFEEu + static_cast<std::uint64_t>(k)), size).value();
    stats.Observe(r, profile.name);
  }
  return stats;
}

TEST(Generation, MostCasesShareRowsFewAreRefusedOrEmpty) {
  const GenerationStats s = Generate(AllPresets(), 1000, 1000);
  EXPECT_GE(s.Share(s.shared_row), 0.60) << RenderGenerationStats(s);
  EXPECT_LE(s.Share(s.refused), 0.10) << RenderGenerationStats(s);
  EXPECT_LE(s.Share(s.no_documents), 0.05) << RenderGenerationStats(s);
  EXPECT_GT(s.Share(s.refused), 0.0) << "refusals keep a share";
  EXPECT_GE(s.Share(s.empty_document), 0.02) << "empty documents keep a share (a blank line of a dataset)";
  EXPECT_LE(s.Share(s.empty_document), 0.10) << RenderGenerationStats(s);
  EXPECT_GT(s.Share(s.sft_masks), 0.10) << "SFT masks keep a share";
  EXPECT_LT(s.Share(s.sft_masks), 0.60) << "SFT masks do not dominate";
}

// A policy that refuses documents longer than the row gets documents that fit, most of the time.
TEST(Generation, AnOverflowErrorPolicyGetsDocumentsThatFit) {
  const GenerationStats s = Generate({FindPreset("reference").policy}, 1000, 1000);
  EXPECT_LE(s.Share(s.refused), 0.10) << RenderGenerationStats(s);
  EXPECT_GE(s.Share(s.shared_row), 0.60) << RenderGenerationStats(s);
}

TEST(Generation, SizesGrowToRealTrainingWithinARunsRamp) {
  const GenerationStats first = Generate(AllPresets(), 64, 2048);
  EXPECT_LE(first.row_length.Quantile(0.5), 64) << "a run starts small:\n" << RenderGenerationStats(first);
  const GenerationStats s = Generate(AllPresets(), 2048, 2048);
  EXPECT_GE(s.row_length.max(), 4096) << RenderGenerationStats(s);
  EXPECT_GE(s.most_in_a_row.max(), 256) << RenderGenerationStats(s);
  EXPECT_GE(s.tokens.max(), 32768) << RenderGenerationStats(s);
}

TEST(GenerationStats, QuantilesAndSharesAreExact) {
  Distribution d;
  for (int v : {1, 2, 2, 3, 10}) d.Add(v);
  EXPECT_EQ(d.Quantile(0.5), 2);
  EXPECT_EQ(d.Quantile(0.9), 10);
  EXPECT_EQ(d.max(), 10);
  EXPECT_DOUBLE_EQ(d.ShareAtLeast(3), 0.4);
  EXPECT_DOUBLE_EQ(d.mean(), 3.6);
}

}  // namespace
}  // namespace packoracle

namespace packoracle {
namespace {

// The refusal rule has one owner (PolicyDemandsRefusal, policy.h); the reference layout must refuse exactly
// the inputs it names, on every generated case (empty documents and mixed policies included).
TEST(Refusal, TheReferenceLayoutRefusesExactlyWhatThePolicyDemands) {
  const auto& profiles = gen::Profiles();
  const gen::Limits limits{64, 16};
  int refused = 0;
  for (int k = 0; k < 3000; ++k) {
    const gen::Profile& profile = profiles[static_cast<std::size_t>(k) % profiles.size()];
    const PackRequest r = gen::Request(profile, {}, limits)(rc::Random(0xBEEFu + static_cast<std::uint64_t>(k)), 100).value();
    std::vector<std::int64_t> lengths;
    for (const auto& d : Effective(r.documents, r.policy)) lengths.push_back(d.size());
    const bool demanded = PolicyDemandsRefusal(r.policy, r.row_length, lengths);
    bool threw = false;
    try {
      DefaultLayout(r.documents, r.policy, r.row_length);
    } catch (const InputError&) {
      threw = true;
    }
    refused += threw ? 1 : 0;
    ASSERT_EQ(threw, demanded) << "case " << k << ": " << r.policy.preset << ", row_length " << r.row_length;
  }
  EXPECT_GT(refused, 0) << "refusals occur";
}

}  // namespace
}  // namespace packoracle
