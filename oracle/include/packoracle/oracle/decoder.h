// The tiny reference decoder: a deterministic one-layer causal language model, small enough to read in one
// sitting, that turns a packed row (its input ids, its position ids, its attention) into per-target losses.
// DESIGN §4 `packing_invariance` runs it twice: on the candidate's own row, and on each document alone in a
// row of its own. Under document isolation the two must agree; any leak through attention, positions or ids
// shows as a changed loss.
//
//   const packoracle::TinyDecoder& model = packoracle::DefaultDecoder();
//   auto losses = model.Losses(input_ids, position_ids, mask, targets);  // −log p(target | context), nats
//
// The model (double precision, weights drawn once from a seeded splitmix64 stream, so every platform and
// compiler gets the same weights; only libm's sin/cos/exp/log may differ in the last bit):
//   bucket(x)   = splitmix64-mix(x) mod V                token ids are arbitrary int64 (negative, huge)
//   φ(p)        = [sin ω₀p, cos ω₀p, …, sin ω₂p, cos ω₂p]  ω = 1, √2/10, √3/1000: incommensurate, so no two
//                                                        positions ≤ 2^24 share features (a table indexed
//                                                        modulo something would hide a modulo bug)
//   h_i         = E[bucket(x_i)] + φ(p_i)·P              token embedding + projected position features
//   q,k,v_i     = h_i·W_q, h_i·W_k, h_i·W_v              one attention head of width D
//   α_ij        = softmax_{j : mask_ij = 1}(q_i·k_j / √D)  only keys the mask allows, in slot order
//   z_i         = h_i + Σ_j α_ij v_j                     residual (a query with no allowed key adds 0)
//   logp_i      = log_softmax(z_i·W_o + b_o)             over the V buckets
//   loss_i      = −logp_i[bucket(target_i)]
// Parameters: E V·D + P 2F·D + W_q,W_k,W_v 3·D² + W_o D·V + b_o V = 88 + 48 + 192 + 88 + 11 = 427 (V = 11,
// D = 8, F = 3), the size of the lesson's executable decoder (423).
//
// Equal inputs give bit-identical losses: a query's scores are summed over the allowed keys in slot order, so
// a document packed after others with a correct mask and correct positions reproduces its losses alone
// exactly, not merely to a tolerance.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "packoracle/oracle/document.h"

namespace packoracle {

// A dense [n][n] mask, 1 where query i may attend key j (the same type as the kit's DenseMask).
using AttentionMatrix = std::vector<std::vector<std::uint8_t>>;

// splitmix64 (Steele, Lea, Flood 2014): advances `state` and returns the next 64-bit output. Portable and fully
// specified, unlike std::normal_distribution whose output is implementation-defined.
std::uint64_t SplitMix64(std::uint64_t& state);

// A uniform double in [0, 1) from the top 53 bits of the next splitmix64 output.
double UniformDouble(std::uint64_t& state);

// The decoder's vocabulary bucket of a token id: splitmix64's output mixer on the id, modulo V.
std::int64_t TokenBucket(Token token);

// The largest |position| the decoder accepts: beyond 2^53 two positions can share a double.
inline constexpr std::int64_t kMaxDecoderPosition = std::int64_t{1} << 53;

class TinyDecoder {
 public:
  static constexpr std::int64_t kVocabulary = 11;   // V buckets
  static constexpr std::int64_t kWidth = 8;         // D, the residual and head width
  static constexpr std::int64_t kFrequencies = 3;   // F sinusoid frequencies (2F position features)
  static constexpr std::int64_t kParameters =
      kVocabulary * kWidth + 2 * kFrequencies * kWidth + 3 * kWidth * kWidth + kWidth * kVocabulary + kVocabulary;
  static constexpr std::uint64_t kDefaultSeed = 20261129;

  // Draws every weight from splitmix64 seeded with `seed`, in the order E, P, W_q, W_k, W_v, W_o, b_o, each
  // row-major, uniform in [−s, s) with s = 1/√(fan-in) (fan-in: 1 for E and b_o, 2F for P, D for the rest).
  explicit TinyDecoder(std::uint64_t seed = kDefaultSeed);
  ~TinyDecoder();
  TinyDecoder(TinyDecoder&&) noexcept;
  TinyDecoder& operator=(TinyDecoder&&) noexcept;

  // log p(bucket c | context of slot i) for every slot i and bucket c: [n][V]. Throws InputError when the
  // three inputs disagree in length, the mask is not n × n or holds values other than 0 and 1, or a position
  // is beyond ±kMaxDecoderPosition.
  std::vector<std::vector<double>> LogProbabilities(const std::vector<Token>& input_ids,
                                                    const std::vector<std::int64_t>& position_ids,
                                                    const AttentionMatrix& mask) const;

  // loss_i = −log p(bucket(targets[i]) | context of slot i) for every slot (targets as long as input_ids).
  std::vector<double> Losses(const std::vector<Token>& input_ids, const std::vector<std::int64_t>& position_ids,
                             const AttentionMatrix& mask, const std::vector<Token>& targets) const;

  // Counted from the weight tensors themselves (equals kParameters).
  std::int64_t ParameterCount() const;

 private:
  struct Weights;
  std::unique_ptr<Weights> weights_;
};

// The decoder with the default seed, built once (the kit's packing_invariance uses it).
const TinyDecoder& DefaultDecoder();

// A causal mask over n = segment.size() slots: mask_ij = 1[j ≤ i]·1[segment_j = segment_i].
AttentionMatrix CausalMaskWithin(const std::vector<std::int64_t>& segment);

}  // namespace packoracle
