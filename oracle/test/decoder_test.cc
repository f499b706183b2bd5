// The tiny reference decoder (decoder.h): its size, its portable weights, that it is a proper causal language
// model (probabilities sum to one, only allowed keys matter), and that it tells apart exactly what
// packing_invariance needs told apart: other documents in the context, shifted or wrapped positions.
#include "packoracle/oracle/decoder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "packoracle/oracle/error.h"

namespace packoracle {
namespace {

std::vector<std::int64_t> Arange(std::int64_t from, std::size_t n) {
  std::vector<std::int64_t> v(n);
  std::iota(v.begin(), v.end(), from);
  return v;
}

AttentionMatrix Causal(std::size_t n) { return CausalMaskWithin(std::vector<std::int64_t>(n, 0)); }

TEST(SplitMix64, MatchesThePublishedSequence) {
  // splitmix64 seeded with 0: the reference implementation's first outputs (Vigna, prng.di.unimi.it).
  std::uint64_t state = 0;
  EXPECT_EQ(SplitMix64(state), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(SplitMix64(state), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(SplitMix64(state), 0x06c45d188009454fULL);
}

TEST(SplitMix64, UniformDoublesLieInTheUnitInterval) {
  std::uint64_t state = 7;
  double lo = 1, hi = 0;
  for (int k = 0; k < 10000; ++k) {
    const double u = UniformDouble(state);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    lo = std::min(lo, u);
    hi = std::max(hi, u);
  }
  EXPECT_LT(lo, 0.01);
  EXPECT_GT(hi, 0.99);
}

TEST(TokenBucket, MapsEveryIdIntoTheVocabularyAndUsesAllBuckets) {
  std::vector<int> used(TinyDecoder::kVocabulary, 0);
  for (Token t : {Token{0}, Token{-1}, Token{-100}, std::numeric_limits<Token>::min(), std::numeric_limits<Token>::max(),
                  Token{1} << 40}) {
    const auto b = TokenBucket(t);
    ASSERT_GE(b, 0);
    ASSERT_LT(b, TinyDecoder::kVocabulary);
  }
  for (Token t = -50; t < 50; ++t) used[static_cast<std::size_t>(TokenBucket(t))] = 1;
  EXPECT_EQ(std::accumulate(used.begin(), used.end(), 0), TinyDecoder::kVocabulary);
}

TEST(TinyDecoder, HasTheDocumentedNumberOfParameters) {
  EXPECT_EQ(TinyDecoder::kParameters, 427);
  EXPECT_EQ(DefaultDecoder().ParameterCount(), TinyDecoder::kParameters);
}

TEST(TinyDecoder, LogProbabilitiesAreNormalisedAndFinite) {
  const std::vector<Token> ids = {5, -3, 1LL << 50, 0, 7};
  const auto logp = DefaultDecoder().LogProbabilities(ids, Arange(0, ids.size()), Causal(ids.size()));
  ASSERT_EQ(logp.size(), ids.size());
  for (const auto& row : logp) {
    double sum = 0;
    for (double x : row) {
      ASSERT_TRUE(std::isfinite(x));
      ASSERT_LE(x, 0.0);
      sum += std::exp(x);
    }
    EXPECT_NEAR(sum, 1.0, 1e-12);
  }
}

TEST(TinyDecoder, SameSeedSameModelOtherSeedOtherModel) {
  const std::vector<Token> ids = {11, 12, 13};
  const std::vector<Token> targets = {12, 13, 14};
  const auto a = TinyDecoder(1).Losses(ids, Arange(0, 3), Causal(3), targets);
  const auto b = TinyDecoder(1).Losses(ids, Arange(0, 3), Causal(3), targets);
  const auto c = TinyDecoder(2).Losses(ids, Arange(0, 3), Causal(3), targets);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

// The property packing_invariance rests on: a document after another, with the document mask and reset
// positions, has bit-identical losses to the document alone.
TEST(TinyDecoder, ADocumentPackedWithIsolationHasExactlyItsLossesAlone) {
  const std::vector<Token> a = {11, 12, 13}, b = {21, 22, 23, 24};
  const std::vector<Token> b_targets = {22, 23, 24, 25};
  const auto alone = DefaultDecoder().Losses(b, Arange(0, 4), Causal(4), b_targets);

  std::vector<Token> row = a;
  row.insert(row.end(), b.begin(), b.end());
  std::vector<std::int64_t> positions = {0, 1, 2, 0, 1, 2, 3};
  std::vector<Token> targets = {12, 13, 0, 22, 23, 24, 25};
  const auto isolated = DefaultDecoder().Losses(row, positions, CausalMaskWithin({0, 0, 0, 1, 1, 1, 1}), targets);
  for (std::size_t k = 0; k < 4; ++k) EXPECT_EQ(isolated[3 + k], alone[k]) << "slot " << 3 + k;

  // Attending across documents changes them (bugzoo MK-03/MK-04)...
  const auto leaky = DefaultDecoder().Losses(row, positions, Causal(7), targets);
  for (std::size_t k = 0; k < 4; ++k) EXPECT_NE(leaky[3 + k], alone[k]) << "slot " << 3 + k;
  // ... and so do positions counting on across the row (PO-01/PO-02).
  const auto continued = DefaultDecoder().Losses(row, Arange(0, 7), CausalMaskWithin({0, 0, 0, 1, 1, 1, 1}), targets);
  for (std::size_t k = 0; k < 4; ++k) EXPECT_NE(continued[3 + k], alone[k]) << "slot " << 3 + k;
}

// Positions up to 2^24 stay distinguishable, including from their value modulo a row length (PO-03) and from
// their neighbours.
TEST(TinyDecoder, LargePositionsStayDistinguishable) {
  const std::vector<Token> ids = {3, 4, 5, 6};
  const std::vector<Token> targets = {4, 5, 6, 7};
  const std::int64_t big = (std::int64_t{1} << 24) - 4;
  const auto at_big = DefaultDecoder().Losses(ids, Arange(big, 4), Causal(4), targets);
  for (std::int64_t modulus : {64, 4096, 1 << 20}) {
    const auto wrapped = DefaultDecoder().Losses(ids, Arange(big % modulus, 4), Causal(4), targets);
    for (std::size_t k = 0; k < 4; ++k) EXPECT_NE(at_big[k], wrapped[k]) << "mod " << modulus << " slot " << k;
  }
  const auto shifted = DefaultDecoder().Losses(ids, Arange(big - 1, 4), Causal(4), targets);
  for (std::size_t k = 0; k < 4; ++k) EXPECT_GT(std::fabs(at_big[k] - shifted[k]), 1e-9) << "slot " << k;
}

TEST(TinyDecoder, AQueryWithNoAllowedKeyGivesAFiniteLoss) {
  const AttentionMatrix none(2, std::vector<std::uint8_t>(2, 0));
  const auto losses = DefaultDecoder().Losses({1, 2}, {0, 1}, none, {2, 3});
  for (double x : losses) EXPECT_TRUE(std::isfinite(x));
}

TEST(TinyDecoder, BadInputIsRefusedWithAMessage) {
  const TinyDecoder& m = DefaultDecoder();
  EXPECT_THROW(m.LogProbabilities({1, 2}, {0}, Causal(2)), InputError);
  EXPECT_THROW(m.LogProbabilities({1, 2}, {0, 1}, Causal(3)), InputError);
  EXPECT_THROW(m.LogProbabilities({1, 2}, {0, 1}, AttentionMatrix{{1, 0}, {1}}), InputError);
  EXPECT_THROW(m.LogProbabilities({1, 2}, {0, 1}, AttentionMatrix{{1, 0}, {2, 1}}), InputError);
  EXPECT_THROW(m.LogProbabilities({1}, {(std::int64_t{1} << 53) + 1}, Causal(1)), InputError);
  EXPECT_THROW(m.Losses({1, 2}, {0, 1}, Causal(2), {2}), InputError);
  try {
    m.LogProbabilities({1, 2}, {0}, Causal(2));
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("1 position ids for 2 input ids"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace packoracle
