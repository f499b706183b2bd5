// The tiny reference decoder (decoder.h), element by element. Every loop says which formula it computes; no
// xtensor expression templates beyond element access, so what runs is what is written.
#include "packoracle/oracle/decoder.h"

#include <cmath>
#include <limits>
#include <string>

#include <xtensor/xtensor.hpp>

#include "packoracle/oracle/error.h"

namespace packoracle {
namespace {

constexpr auto V = static_cast<std::size_t>(TinyDecoder::kVocabulary);
constexpr auto D = static_cast<std::size_t>(TinyDecoder::kWidth);
constexpr auto F2 = static_cast<std::size_t>(2 * TinyDecoder::kFrequencies);

// ω_k: 1, √2/10, √3/1000. Irrational ratios to each other and to π, so sin/cos(ω_k·p) never repeat exactly;
// the slowest still turns by about 0.0017 rad per position step, the fastest separates neighbours.
double Frequency(std::size_t k) {
  switch (k) {
    case 0: return 1.0;
    case 1: return std::sqrt(2.0) / 10.0;
    default: return std::sqrt(3.0) / 1000.0;
  }
}

// splitmix64's output function: a bijection of 64-bit words with good avalanche.
std::uint64_t Mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

std::uint64_t SplitMix64(std::uint64_t& state) {
  state += 0x9e3779b97f4a7c15ULL;
  return Mix(state);
}

double UniformDouble(std::uint64_t& state) {
  return static_cast<double>(SplitMix64(state) >> 11) * 0x1.0p-53;  // top 53 bits / 2^53
}

std::int64_t TokenBucket(Token token) {
  // Two's-complement reinterpretation of the id (defined for every int64), mixed, then reduced.
  return static_cast<std::int64_t>(Mix(static_cast<std::uint64_t>(token)) % V);
}

struct TinyDecoder::Weights {
  using Matrix = xt::xtensor<double, 2>;
  Matrix E = Matrix::from_shape({V, D});   // token embedding
  Matrix P = Matrix::from_shape({F2, D});  // position feature projection
  Matrix Wq = Matrix::from_shape({D, D});
  Matrix Wk = Matrix::from_shape({D, D});
  Matrix Wv = Matrix::from_shape({D, D});
  Matrix Wo = Matrix::from_shape({D, V});  // output projection
  xt::xtensor<double, 1> bo = xt::xtensor<double, 1>::from_shape({V});
};

TinyDecoder::TinyDecoder(std::uint64_t seed) : weights_(std::make_unique<Weights>()) {
  std::uint64_t state = seed;
  // w = s·(2u − 1), u uniform in [0, 1): uniform in [−s, s), s = 1/√fan_in; row-major, in declaration order.
  auto fill = [&state](auto& w, double fan_in) {
    const double s = 1.0 / std::sqrt(fan_in);
    for (auto& x : w) x = s * (2.0 * UniformDouble(state) - 1.0);
  };
  Weights& w = *weights_;
  fill(w.E, 1.0);
  fill(w.P, static_cast<double>(F2));
  fill(w.Wq, static_cast<double>(D));
  fill(w.Wk, static_cast<double>(D));
  fill(w.Wv, static_cast<double>(D));
  fill(w.Wo, static_cast<double>(D));
  fill(w.bo, 1.0);
}

TinyDecoder::~TinyDecoder() = default;
TinyDecoder::TinyDecoder(TinyDecoder&&) noexcept = default;
TinyDecoder& TinyDecoder::operator=(TinyDecoder&&) noexcept = default;

std::int64_t TinyDecoder::ParameterCount() const {
  const Weights& w = *weights_;
  return static_cast<std::int64_t>(w.E.size() + w.P.size() + w.Wq.size() + w.Wk.size() + w.Wv.size() +
                                   w.Wo.size() + w.bo.size());
}

std::vector<std::vector<double>> TinyDecoder::LogProbabilities(const std::vector<Token>& input_ids,
                                                               const std::vector<std::int64_t>& position_ids,
                                                               const AttentionMatrix& mask) const {
  const std::size_t n = input_ids.size();
  if (position_ids.size() != n) {
    throw InputError("decoder: " + std::to_string(position_ids.size()) + " position ids for " + std::to_string(n) +
                     " input ids");
  }
  if (mask.size() != n) {
    throw InputError("decoder: the attention mask has " + std::to_string(mask.size()) + " rows for " +
                     std::to_string(n) + " slots");
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (mask[i].size() != n) {
      throw InputError("decoder: row " + std::to_string(i) + " of the attention mask has " +
                       std::to_string(mask[i].size()) + " entries, not " + std::to_string(n));
    }
    for (std::size_t j = 0; j < n; ++j) {
      if (mask[i][j] > 1) {
        throw InputError("decoder: attention mask entry (" + std::to_string(i) + ", " + std::to_string(j) + ") is " +
                         std::to_string(mask[i][j]) + ", not 0 or 1");
      }
    }
    if (position_ids[i] > kMaxDecoderPosition || position_ids[i] < -kMaxDecoderPosition) {
      throw InputError("decoder: position " + std::to_string(position_ids[i]) + " at slot " + std::to_string(i) +
                       " is beyond ±2^53, where positions stop being distinct doubles");
    }
  }
  const Weights& w = *weights_;

  // h_i = E[bucket(x_i)] + Σ_f φ_f(p_i)·P[f]
  auto h = xt::xtensor<double, 2>::from_shape({n, D});
  for (std::size_t i = 0; i < n; ++i) {
    const auto b = static_cast<std::size_t>(TokenBucket(input_ids[i]));
    const auto p = static_cast<double>(position_ids[i]);
    double phi[F2];
    for (std::size_t k = 0; k < F2 / 2; ++k) {
      phi[2 * k] = std::sin(Frequency(k) * p);
      phi[2 * k + 1] = std::cos(Frequency(k) * p);
    }
    for (std::size_t a = 0; a < D; ++a) {
      double x = w.E(b, a);
      for (std::size_t f = 0; f < F2; ++f) x += phi[f] * w.P(f, a);
      h(i, a) = x;
    }
  }

  // q_i[a] = Σ_b h_i[b]·W_q[b][a], and likewise k_i, v_i
  auto q = xt::xtensor<double, 2>::from_shape({n, D});
  auto k = q, v = q;
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t a = 0; a < D; ++a) {
      double sq = 0, sk = 0, sv = 0;
      for (std::size_t b = 0; b < D; ++b) {
        sq += h(i, b) * w.Wq(b, a);
        sk += h(i, b) * w.Wk(b, a);
        sv += h(i, b) * w.Wv(b, a);
      }
      q(i, a) = sq;
      k(i, a) = sk;
      v(i, a) = sv;
    }
  }

  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<std::vector<double>> out(n, std::vector<double>(V));
  std::vector<double> score(n);
  for (std::size_t i = 0; i < n; ++i) {
    // s_ij = q_i·k_j / √D over the allowed keys j (slot order), m = max_j s_ij
    double m = -std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < n; ++j) {
      if (!mask[i][j]) continue;
      double s = 0;
      for (std::size_t a = 0; a < D; ++a) s += q(i, a) * k(j, a);
      score[j] = s * scale;
      if (score[j] > m) m = score[j];
    }
    // α_ij = exp(s_ij − m) / Σ_j' exp(s_ij' − m);  o_i = Σ_j α_ij v_j  (o_i = 0 without allowed keys)
    double z = 0;
    for (std::size_t j = 0; j < n; ++j)
      if (mask[i][j]) z += std::exp(score[j] - m);
    double o[D] = {};
    for (std::size_t j = 0; j < n; ++j) {
      if (!mask[i][j]) continue;
      const double alpha = std::exp(score[j] - m) / z;
      for (std::size_t a = 0; a < D; ++a) o[a] += alpha * v(j, a);
    }
    // logits_c = Σ_a (h_i[a] + o_i[a])·W_o[a][c] + b_o[c]
    double logits[V];
    double lmax = -std::numeric_limits<double>::infinity();
    for (std::size_t c = 0; c < V; ++c) {
      double x = w.bo(c);
      for (std::size_t a = 0; a < D; ++a) x += (h(i, a) + o[a]) * w.Wo(a, c);
      logits[c] = x;
      if (x > lmax) lmax = x;
    }
    // log_softmax_c = logits_c − (lmax + log Σ_c' exp(logits_c' − lmax))
    double sum = 0;
    for (std::size_t c = 0; c < V; ++c) sum += std::exp(logits[c] - lmax);
    const double log_z = lmax + std::log(sum);
    for (std::size_t c = 0; c < V; ++c) out[i][c] = logits[c] - log_z;
  }
  return out;
}

std::vector<double> TinyDecoder::Losses(const std::vector<Token>& input_ids,
                                        const std::vector<std::int64_t>& position_ids, const AttentionMatrix& mask,
                                        const std::vector<Token>& targets) const {
  if (targets.size() != input_ids.size()) {
    throw InputError("decoder: " + std::to_string(targets.size()) + " targets for " +
                     std::to_string(input_ids.size()) + " input ids");
  }
  const auto logp = LogProbabilities(input_ids, position_ids, mask);
  std::vector<double> out(logp.size());
  for (std::size_t i = 0; i < logp.size(); ++i) out[i] = -logp[i][static_cast<std::size_t>(TokenBucket(targets[i]))];
  return out;
}

const TinyDecoder& DefaultDecoder() {
  static const TinyDecoder decoder;
  return decoder;
}

AttentionMatrix CausalMaskWithin(const std::vector<std::int64_t>& segment) {
  const std::size_t n = segment.size();
  AttentionMatrix mask(n, std::vector<std::uint8_t>(n, 0));
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j <= i; ++j) mask[i][j] = segment[j] == segment[i] ? 1 : 0;
  return mask;
}

}  // namespace packoracle
