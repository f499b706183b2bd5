// RapidCheck generators of packing workloads, valid by construction (sizes derived from earlier draws,
// never discarded).
//
//   RC_GTEST_PROP(MyPacker, KeepsTargets, ()) {
//     const auto workload = *packoracle::gen::Workload();
//     ...
//   }
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "packoracle/oracle/document.h"
#include "packoracle/oracle/policy.h"
#include "packoracle/oracle/presets.h"
#include "packoracle/properties/candidate.h"

namespace packoracle {

// Documents, a row length and a policy: the input of a packer.
struct Workload {
  std::vector<Document> documents;
  std::int64_t row_length = 1;
  Policy policy;
};

namespace gen {

// A document length that hits the edges of a row of length L: 1, L-1, L, L+1, 2L+1, or anything in between
// (0 only when `allow_empty`).
inline rc::Gen<std::int64_t> DocumentLength(std::int64_t row_length, bool allow_empty = false) {
  const std::int64_t L = row_length;
  std::vector<std::int64_t> edges = {1, L, L + 1, 2 * L + 1};
  if (L > 1) edges.push_back(L - 1);
  if (allow_empty) edges.push_back(0);
  return rc::gen::oneOf(rc::gen::elementOf(edges), rc::gen::inRange<std::int64_t>(1, 2 * L + 2));
}

// Token ids drawn from a small range, so that they collide with pad (0), the delimiters and each other.
inline rc::Gen<Token> TokenId() { return rc::gen::inRange<Token>(0, 24); }

// A supervision mask: all supervised, a prompt (unsupervised) then a completion, an assistant turn then a
// user turn, or random turns.
inline rc::Gen<std::vector<int>> Supervision(std::int64_t length) {
  const auto n = static_cast<std::size_t>(length);
  return rc::gen::oneOf(
      rc::gen::just(std::vector<int>(n, 1)),
      rc::gen::map(rc::gen::inRange<std::size_t>(0, n + 1),
                   [n](std::size_t prompt) {
                     std::vector<int> mask(n, 1);
                     for (std::size_t k = 0; k < prompt; ++k) mask[k] = 0;
                     return mask;
                   }),
      // an assistant turn first, then a user turn (bugzoo §7: 1-token spans, assistant first)
      rc::gen::map(rc::gen::inRange<std::size_t>(0, n + 1),
                   [n](std::size_t reply) {
                     std::vector<int> mask(n, 0);
                     for (std::size_t k = 0; k < reply; ++k) mask[k] = 1;
                     return mask;
                   }),
      // random turns; drawn as "unsupervised?" so that shrinking heads for supervised tokens
      rc::gen::container<std::vector<int>>(n, rc::gen::map(rc::gen::inRange(0, 2), [](int x) { return 1 - x; })));
}

// `count` documents with uids d0, d1, ... for rows of length L.
inline rc::Gen<std::vector<Document>> Documents(std::int64_t row_length, std::size_t max_documents = 6,
                                                bool allow_empty = false) {
  return rc::gen::mapcat(rc::gen::inRange<std::size_t>(0, max_documents + 1), [=](std::size_t count) {
    return rc::gen::exec([=] {
      std::vector<Document> docs;
      for (std::size_t d = 0; d < count; ++d) {
        const std::int64_t n = *DocumentLength(row_length, allow_empty);
        Document doc;
        doc.uid = "d" + std::to_string(d);
        doc.tokens = *rc::gen::container<std::vector<Token>>(static_cast<std::size_t>(n), TokenId());
        doc.supervised = *Supervision(n);
        docs.push_back(std::move(doc));
      }
      return docs;
    });
  });
}

// Under eod_closes / bos_opens a delimiter id inside a document is itself a boundary: such data cannot be
// encoded whatever the packer does (the oracle refuses it), so generated documents never contain it; every
// other collision (pad id, ignore-free ids equal to delimiters of other policies) is kept.
inline void AvoidReservedTokens(std::vector<Document>& docs, const Policy& policy) {
  std::optional<Token> reserved;
  if (policy.boundary_source == BoundarySource::kEodCloses) reserved = policy.eos_id;
  if (policy.boundary_source == BoundarySource::kBosOpens) reserved = policy.bos_id;
  for (auto& doc : docs)
    for (auto& t : doc.tokens)
      if ((reserved && t == *reserved) || t == policy.ignore_index) t = (reserved ? *reserved : 0) + 1000;
}

// One of the named presets.
inline rc::Gen<Policy> PresetPolicy() {
  std::vector<Policy> policies;
  for (const auto& preset : Presets()) policies.push_back(preset.policy);
  return rc::gen::elementOf(policies);
}

// A row length from 1 to `max_row_length`.
inline rc::Gen<std::int64_t> RowLength(std::int64_t max_row_length = 12) {
  return rc::gen::inRange<std::int64_t>(1, max_row_length + 1);
}

// A preset policy, a row length and documents sized against it.
inline rc::Gen<Workload> PresetWorkload(std::int64_t max_row_length = 12, std::size_t max_documents = 6) {
  return rc::gen::mapcat(RowLength(max_row_length), [=](std::int64_t row_length) {
    return rc::gen::exec([=] {
      Workload w;
      w.row_length = row_length;
      w.policy = *PresetPolicy();
      w.documents = *Documents(row_length, max_documents);
      AvoidReservedTokens(w.documents, w.policy);
      return w;
    });
  });
}

// Per-target losses as exact binary fractions (k/8, 0 ≤ k < 64), so that sums taken in any order are equal.
inline rc::Gen<std::vector<std::vector<double>>> ExactLosses(const std::vector<std::int64_t>& document_sizes) {
  return rc::gen::exec([document_sizes] {
    std::vector<std::vector<double>> losses;
    for (auto n : document_sizes) {
      std::vector<double> l;
      for (std::int64_t k = 0; k < n; ++k) l.push_back(*rc::gen::inRange(0, 64) / 8.0);
      losses.push_back(l);
    }
    return losses;
  });
}

// A fuzzing profile (Csmith's swarm idea): it skews a case towards one corner of the input space, so that a
// run explores that corner deeply instead of averaging over all. Verify draws one per case (a run sees every
// corner whatever its seed); --profile fixes one for every case.
struct Profile {
  std::string name;            // for reports: "packed", "edges", "short", "long", "sft", "collide", "large"
  int token_range = 24;        // token ids drawn from [0, token_range): small ranges collide with pad/eos/bos
  int sft_percent = 30;        // how often a document gets a prompt/completion supervision mask
  int length_mode = 0;         // 0 around the row's share, 1 short (1..3), 2 long (L/2..L), 3 anything up to L
  int edge_percent = 12;       // cases whose documents hit the row's edges (1, L-1, L, L+1, exact fits)
  bool large = false;          // sizes of real training from the first case: L ≥ max/32, many documents
  std::size_t max_documents = 0;  // 0: the run's bound (VerifyOptions::max_documents, default 512)
};

// Every profile keeps some of everything (a bug that needs SFT masks or long documents is found whatever the
// profile); each leans hard one way.
inline const std::vector<Profile>& Profiles() {
  static const std::vector<Profile> profiles = {
      {"packed", 24, 30, 0, 12, false, 0}, {"edges", 24, 30, 0, 45, false, 0},   {"short", 24, 30, 1, 12, false, 0},
      {"long", 24, 30, 2, 20, false, 0},   {"sft", 24, 100, 0, 12, false, 0},    {"collide", 5, 50, 0, 20, false, 0},
      {"large", 24, 30, 0, 8, true, 0}};
  return profiles;
}

// The bounds of a run's cases. A case's size s (RapidCheck's size, 0..100: Verify ramps it over the run) sets
// how far towards them it may go: row lengths and document counts are drawn log-uniformly up to
// max^(s/100), never below 16 slots and 8 documents (CI-sized runs stay small and fast; a long session
// reaches the bounds).
struct Limits {
  std::int64_t max_row_length = 16;
  std::int64_t max_documents = 8;
  std::int64_t min_row_length = 1;         // rows at least this long (a full-size case of a capped consumer)
  std::int64_t max_micro_batch_rows = 0;   // 0: as drawn (up to 8)
};

namespace detail {

// splitmix64: bulk values (tokens of a long document, per-target losses) from one drawn seed, so that a
// case of 60,000 tokens costs one RapidCheck pick instead of 60,000.
inline std::uint64_t Mix(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// An integer in [lo, hi], log-uniform, from a pick that shrinks towards lo.
inline std::int64_t LogUniform(std::int64_t lo, std::int64_t hi) {
  if (hi <= lo) return lo;
  const int u = *rc::gen::inRange(0, 1001);
  const double v = static_cast<double>(lo) * std::pow(static_cast<double>(hi) / static_cast<double>(lo), u / 1000.0);
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(std::llround(v)), lo, hi);
}

// At most this many tokens in a case are drawn one pick each (shrinkable one by one); beyond, from a seed.
inline constexpr std::int64_t kShrinkableTokens = 512;

inline std::vector<Token> Tokens(std::int64_t n, int token_range, bool bulk) {
  if (!bulk) return *rc::gen::container<std::vector<Token>>(static_cast<std::size_t>(n), rc::gen::inRange<Token>(0, token_range));
  std::uint64_t state = static_cast<std::uint64_t>(*rc::gen::inRange(0, 1 << 30));
  std::vector<Token> out(static_cast<std::size_t>(n));
  for (auto& t : out) t = static_cast<Token>(Mix(state) % static_cast<std::uint64_t>(token_range));
  return out;
}

inline std::vector<int> SupervisionOf(std::int64_t n, bool bulk) {
  if (!bulk) return *Supervision(n);
  // a prompt then a completion, or random turns of a few hundred tokens
  const auto kind = *rc::gen::inRange(0, 2);
  std::vector<int> mask(static_cast<std::size_t>(n), 1);
  if (kind == 0) {
    const auto prompt = *rc::gen::inRange<std::int64_t>(0, n + 1);
    for (std::int64_t k = 0; k < prompt; ++k) mask[static_cast<std::size_t>(k)] = 0;
  } else {
    std::uint64_t state = static_cast<std::uint64_t>(*rc::gen::inRange(0, 1 << 30));
    int value = 0;
    for (std::int64_t k = 0; k < n; ++k) {
      if (Mix(state) % 200 == 0) value = 1 - value;
      mask[static_cast<std::size_t>(k)] = value;
    }
  }
  return mask;
}

// Lengths that hit the row's edges: 1, L-1, L, L+1 (when the policy accepts a longer document), and
// documents that fill a row exactly.
inline std::vector<std::int64_t> EdgeLengths(std::int64_t L, std::size_t count, bool overlong_ok) {
  std::vector<std::int64_t> edges = {1, L};
  if (L > 1) edges.push_back(L - 1);
  if (overlong_ok) {
    edges.push_back(L + 1);
    edges.push_back(2 * L + 1);
  }
  std::vector<std::int64_t> out;
  while (out.size() < count) {
    if (*rc::gen::inRange(0, 3) == 0 && L >= 2) {  // an exact fit: two documents summing to L
      const auto a = *rc::gen::inRange<std::int64_t>(1, L);
      out.push_back(a);
      if (out.size() < count) out.push_back(L - a);
    } else {
      out.push_back(*rc::gen::elementOf(edges));
    }
  }
  return out;
}

// Document lengths that share rows: `count` documents over about `rows` rows of L, each drawn in [1, 2μ]
// with μ the row share, or as the profile leans.
inline std::vector<std::int64_t> PackedLengths(const Profile& profile, std::int64_t L, std::size_t count, std::int64_t rows) {
  const std::int64_t share = std::max<std::int64_t>(1, L * rows / static_cast<std::int64_t>(std::max<std::size_t>(count, 1)));
  const std::int64_t hi = std::clamp<std::int64_t>(2 * share, 1, L);
  std::vector<std::int64_t> out;
  for (std::size_t d = 0; d < count; ++d) {
    switch (profile.length_mode) {
      case 1: out.push_back(*rc::gen::inRange<std::int64_t>(1, std::min<std::int64_t>(L, 3) + 1)); break;
      case 2: out.push_back(*rc::gen::inRange<std::int64_t>(std::max<std::int64_t>(1, L / 2), L + 1)); break;
      case 3: out.push_back(*rc::gen::inRange<std::int64_t>(1, L + 1)); break;
      default: out.push_back(*rc::gen::inRange<std::int64_t>(1, hi + 1));
    }
  }
  return out;
}

// The most slots a case's step should hold (8 rows of 8192): what the checks and a candidate handle in
// milliseconds.
inline constexpr std::int64_t kMaxSlots = 65536;

// The reference layout of a policy without boundaries is one document per row (DefaultLayout).
inline bool OneDocumentPerRow(const Policy& p) {
  return p.boundary_source == BoundarySource::kNone && p.stream_stride == StreamStride::kNone;
}

// Can this policy refuse an input, and can it take a document longer than the row?
inline bool OverlongAccepted(const Policy& p) { return p.overflow != Overflow::kError; }
inline bool OnlyFullWindows(const Policy& p) { return p.stream_stride != StreamStride::kNone && p.padding == Padding::kNone; }

// An empty document (a dataset's blank line, a filtered-out sample) in about one case of 20 that has documents:
// one document, drawn, loses its tokens (its losses keep the delimiters' entries). Drawn last in a case, so
// that every earlier pick, and every reproduce string written before it existed, is unchanged; drawn as
// "empty?" high, so that shrinking (towards 0) heads for a case without one.
inline constexpr int kEmptyDocumentPercent = 5;
inline void EmptyOneDocumentNowAndThen(PackRequest& r, std::int64_t delimiters) {
  if (r.documents.empty() || *rc::gen::inRange(0, 100) < 100 - kEmptyDocumentPercent) return;
  Document& doc = r.documents[*rc::gen::inRange<std::size_t>(0, r.documents.size())];
  doc.tokens.clear();
  doc.supervised.clear();
  r.target_losses[doc.uid].resize(static_cast<std::size_t>(delimiters));
}

}  // namespace detail

// shift: document on a coherent policy, with the keys it contradicts repaired (PolicyProblems): labels
// pre-shifted, no boundary target, a row end that predicts within its document, windows of stride L,
// boundaries not read from EODs (never an input).
inline void ShiftPerDocument(Policy& p) {
  p.shift = Shift::kDocument;
  p.label_alignment = LabelAlignment::kPreShifted;
  p.boundary_target = BoundaryTarget::kExcluded;
  if (p.row_end_target == RowEndTarget::kNextInStream) p.row_end_target = RowEndTarget::kNextInDoc;
  if (p.stream_stride == StreamStride::kLPlus1) p.stream_stride = StreamStride::kL;
  if (p.boundary_source == BoundarySource::kEodCloses) p.boundary_source = BoundarySource::kSpans;
}

// overflow: drop on a coherent policy, with the keys it contradicts repaired (PolicyProblems): no stream windows
// (a stream splits documents; the row end they give, next_in_stream, goes with them), no row end carried into
// the next row (next_in_doc), truncation cut where it always was (truncate_to: row_len).
inline void DropOverlong(Policy& p) {
  p.overflow = Overflow::kDrop;
  if (p.stream_stride != StreamStride::kNone) p.stream_stride = StreamStride::kNone;
  if (p.row_end_target != RowEndTarget::kNone) p.row_end_target = RowEndTarget::kNone;
  p.truncate_to = TruncateTo::kRowLen;
}

// Random valid combinations of policy keys: a preset with some keys redrawn, contradictions repaired (never
// discarded): the repair sets the key the contradiction names to a value that makes the policy coherent.
inline rc::Gen<Policy> MixedPolicy() {
  return rc::gen::exec([] {
    Policy p = *PresetPolicy();
    p.preset.clear();
    if (*rc::gen::arbitrary<bool>()) p.label_alignment = *rc::gen::element(LabelAlignment::kAligned, LabelAlignment::kPreShifted);
    if (*rc::gen::arbitrary<bool>()) p.attention = *rc::gen::element(Attention::kDocCausal, Attention::kRowCausal);
    if (*rc::gen::arbitrary<bool>()) p.boundary_target = *rc::gen::element(BoundaryTarget::kExcluded, BoundaryTarget::kIncluded);
    if (*rc::gen::arbitrary<bool>()) p.positions = *rc::gen::element(Positions::kDocReset, Positions::kRowContinuous);
    if (*rc::gen::arbitrary<bool>()) p.position_base = *rc::gen::inRange<std::int64_t>(0, 3);
    if (*rc::gen::arbitrary<bool>()) p.pad_positions = *rc::gen::element(PadPositions::kZero, PadPositions::kContinue, PadPositions::kAny);
    if (*rc::gen::arbitrary<bool>()) p.overflow = *rc::gen::element(Overflow::kError, Overflow::kTruncate, Overflow::kSplit);
    if (*rc::gen::arbitrary<bool>()) p.denominator = *rc::gen::element(Denominator::kGlobalTargets, Denominator::kRankMean, Denominator::kMicrobatchMean, Denominator::kAllPositions);
    if (*rc::gen::arbitrary<bool>()) p.eos_id = *rc::gen::element<std::optional<Token>>(std::nullopt, Token{0}, Token{2});
    // Repairs: each contradiction of PolicyProblems, resolved.
    if (p.boundary_source == BoundarySource::kEodCloses && !p.eos_id) p.eos_id = 2;
    if (p.boundary_source == BoundarySource::kBosOpens && !p.bos_id) p.bos_id = 1;
    if (p.boundary_source == BoundarySource::kBosOpens && p.eos_id && p.bos_id && *p.eos_id == *p.bos_id) p.eos_id.reset();
    if ((p.boundary_source == BoundarySource::kPositionReset || p.boundary_source == BoundarySource::kPositionStep) &&
        p.positions != Positions::kDocReset) p.positions = Positions::kDocReset;
    if (p.attention == Attention::kDocCausal && p.boundary_source == BoundarySource::kNone) p.boundary_source = BoundarySource::kSpans;
    if (p.row_end_target == RowEndTarget::kNextInDoc && p.overflow != Overflow::kSplit) p.overflow = Overflow::kSplit;
    if (p.stream_stride != StreamStride::kNone && p.overflow != Overflow::kSplit) p.overflow = Overflow::kSplit;
    if (p.loss_mask && p.label_alignment == LabelAlignment::kAligned) p.loss_mask = false;
    if (p.row_end_target != RowEndTarget::kNone && p.label_alignment == LabelAlignment::kAligned) {
      p.label_alignment = LabelAlignment::kPreShifted;
    }
    // Drawn after every other pick, so that those (and the reproduce strings that replay them) stay as they
    // were; repaired where rows do not hold whole documents (PolicyProblems).
    if (*rc::gen::inRange(0, 4) == 0) p.efficiency = Efficiency::kNoMergeableRows;
    if (p.overflow == Overflow::kSplit || p.boundary_source == BoundarySource::kNone) p.efficiency = Efficiency::kReported;
    // truncate_to: pad_multiple (TRL pack_dataset with seq_length = L//k*k), drawn after efficiency for the same
    // reason, where a padded policy can truncate (no stream windows, no document carried into the next row):
    // rows padded to a multiple of k, a long document cut after ⌊L/k⌋·k tokens.
    if (p.padding != Padding::kNone && p.stream_stride == StreamStride::kNone &&
        p.row_end_target != RowEndTarget::kNextInDoc && *rc::gen::inRange(0, 4) == 0) {
      p.overflow = Overflow::kTruncate;
      p.pad_to = PadTo{PadTo::Kind::kMultipleOf, *rc::gen::inRange<std::int64_t>(2, 5)};
      p.truncate_to = TruncateTo::kPadMultiple;
    }
    // segment_encodings: rows (TRL 'wrapped' rows through the padding-free collator), drawn last, where the
    // attention is row_causal and no boundary is read from the encodings that then name rows.
    if (p.attention == Attention::kRowCausal && p.boundary_source != BoundarySource::kCuSeqlens &&
        p.boundary_source != BoundarySource::kSeqLens && p.boundary_source != BoundarySource::kDocIds &&
        *rc::gen::inRange(0, 4) == 0)
      p.segment_encodings = SegmentEncodings::kRows;
    // shift: document (torchtitan's HuggingFaceTextDataset, NeMo's packed collate), drawn after every other pick
    // for the same reason, the keys it contradicts repaired.
    if (*rc::gen::inRange(0, 4) == 0) ShiftPerDocument(p);
    // count_basis: unshifted_labels (HF Trainer before #46204: labels != ignore_index counted before the shift),
    // drawn last for the same reason; it contradicts no key.
    if (*rc::gen::inRange(0, 6) == 0) p.count_basis = CountBasis::kUnshiftedLabels;
    // padding: left (generation and RL rollout batches: every row's content ends at its last slot), drawn last
    // for the same reason, on a padded policy; it contradicts no key, but pad_keys: visible then lets every real
    // query see the padding before it (packed ≠ alone: packing_invariance), so the keys stay masked.
    if (p.padding == Padding::kRight && *rc::gen::inRange(0, 5) == 0) {
      p.padding = Padding::kLeft;
      if (p.pad_keys == PadKeys::kVisible) p.pad_keys = PadKeys::kMasked;
    }
    // overflow: drop (axolotl's default excess_length_strategy, LLaMA-Factory's cutoff_len filter), a value
    // added after version 1, drawn last for the same reason, where documents are never carried into the next
    // row (no stream windows, no next_in_doc) and truncation has no cut to state (truncate_to: row_len).
    if (p.stream_stride == StreamStride::kNone && p.row_end_target != RowEndTarget::kNextInDoc &&
        p.truncate_to == TruncateTo::kRowLen && *rc::gen::inRange(0, 5) == 0)
      p.overflow = Overflow::kDrop;
    // pad_to: longest (LitGPT's get_sft_collate_fn, HF padding="longest": every row of a micro-batch as wide as
    // its widest content), drawn last for the same reason, on a padded policy padded to the row length (a
    // multiple of k stays: truncate_to pad_multiple needs it); it contradicts no other key.
    if (p.padding != Padding::kNone && p.pad_to.kind == PadTo::Kind::kRowLen && *rc::gen::inRange(0, 5) == 0)
      p.pad_to = PadTo{PadTo::Kind::kLongest, 0};
    return p;
  });
}

// One case of a run: the exec protocol's request. Its shape (weights in percent, the profile's edge share
// taken from the first):
//   packed (the rest)  2 or more documents sized to share rows (what every packing bug needs)
//   edges              lengths 1, L-1, L, L+1, exact fits
//   one document       alone in its rows (3)
//   no document        an empty step (2)
//   refusal            an input the policy must refuse, where it can refuse one (4)
// and, in any of them, one document empty now and then (EmptyOneDocumentNowAndThen).
// Micro-batch rows (1..3, up to 8 at size) and data-parallel ranks (1..2, up to 4 at size) are drawn
// independently, so that empty ranks and partly filled micro-batches occur; SFT masks and colliding token
// ids follow the profile. A policy with `overflow: error` gets documents that fit outside the refusal share,
// a policy that keeps full stream windows only gets a stream long enough for one.
inline rc::Gen<PackRequest> Request(const Profile& profile, std::vector<Policy> policies, Limits limits = {}) {
  return rc::gen::withSize([profile, policies, limits](int size) {
    // Every pick inside sees RapidCheck's nominal size (its inRange narrows ranges at small sizes); the
    // case's size acts once, through `grow`.
    return rc::gen::resize(100, rc::gen::exec([profile, policies, limits, size] {
      PackRequest r;
      r.policy = policies.empty() ? *rc::gen::weightedOneOf<Policy>({{4, PresetPolicy()}, {1, MixedPolicy()}})
                                  : *rc::gen::elementOf(policies);
      const Policy& policy = r.policy;
      const double grow = profile.large ? 1.0 : std::clamp(size, 0, 100) / 100.0;
      const std::int64_t max_L = std::max<std::int64_t>(1, limits.max_row_length);
      const std::int64_t max_N = std::max<std::int64_t>(
          1, profile.max_documents ? static_cast<std::int64_t>(profile.max_documents) : limits.max_documents);
      const auto cap = [grow](std::int64_t bound, std::int64_t floor) {
        return std::min(bound, std::max(floor, static_cast<std::int64_t>(std::llround(std::pow(static_cast<double>(bound), grow)))));
      };
      const std::int64_t cap_L = cap(max_L, 16), cap_N = cap(max_N, 8);
      const std::int64_t floor_L = profile.large ? std::max<std::int64_t>(2, max_L / 32) : 2;

      // 0 packed, 1 edges, 2 one document, 3 no document, 4 refusal (drawn so that shrinking heads for packed)
      const int roll = *rc::gen::inRange(0, 100);
      const int shape = roll < 100 - profile.edge_percent - 9 ? 0 : roll < 91 ? 1 : roll < 94 ? 2 : roll < 96 ? 3 : 4;
      // The large profile's packed cases lean three ways: a row of hundreds of documents, a step of tens of
      // thousands of slots (long rows, several per micro-batch), or neither.
      const int large_mode = profile.large && shape == 0 ? *rc::gen::inRange(0, 3) : 2;  // 0 many, 1 long step
      const std::int64_t low_L = large_mode == 1 ? std::max<std::int64_t>(floor_L, max_L / 4) : floor_L;
      r.row_length = shape == 1 ? *rc::gen::inRange<std::int64_t>(1, std::min<std::int64_t>(cap_L, 16) + 1)
                                : detail::LogUniform(std::min(low_L, cap_L), cap_L);
      r.row_length = std::clamp(r.row_length, std::min(limits.min_row_length, max_L), max_L);
      if (PadsBeyondTheRow(policy, r.row_length) && shape != 4) r.row_length = policy.pad_to.multiple;
      const std::int64_t L = r.row_length;

      std::vector<std::int64_t> lengths;
      if (shape == 0) {
        // long documents (half a row or more) come a few at a time; a policy that gives each document a row
        // of its own gets no more documents than kMaxSlots allows
        std::int64_t most = profile.length_mode == 2 ? std::min<std::int64_t>(cap_N, 16) : cap_N;
        if (detail::OneDocumentPerRow(policy)) most = std::min(most, std::max<std::int64_t>(2, detail::kMaxSlots / 4 / L));
        const std::int64_t fewest = large_mode == 0 ? std::max<std::int64_t>(2, std::min(most, L) / 2) : 2;
        const auto count = static_cast<std::size_t>(detail::LogUniform(fewest, std::max<std::int64_t>(fewest, most)));
        const std::int64_t rows =
            large_mode == 0 ? 1
            : large_mode == 1 ? *rc::gen::inRange<std::int64_t>(4, 9)
                              : detail::LogUniform(1, std::clamp<std::int64_t>(static_cast<std::int64_t>(count) / 2, 1, 8));
        lengths = detail::PackedLengths(profile, L, count, rows);
        // one document longer than the row now and then, where the policy splits or truncates it
        if (detail::OverlongAccepted(policy) && *rc::gen::inRange(0, 10) == 0) lengths.back() = *rc::gen::inRange<std::int64_t>(L + 1, 2 * L + 2);
      } else if (shape == 1) {
        lengths = detail::EdgeLengths(L, *rc::gen::inRange<std::size_t>(1, 7), detail::OverlongAccepted(policy));
      } else if (shape == 2) {
        lengths = {*rc::gen::inRange<std::int64_t>(1, (detail::OverlongAccepted(policy) ? 2 * L + 1 : L) + 1)};
      } else if (shape == 4) {
        lengths = detail::PackedLengths(profile, L, static_cast<std::size_t>(*rc::gen::inRange(1, 4)), 1);
        if (policy.overflow == Overflow::kError) lengths.back() = L + 1 + *rc::gen::inRange<std::int64_t>(0, L + 1);
      }
      // A stream that keeps full windows only must hold one window and its last target (else it is refused).
      std::int64_t total = 0;
      for (auto n : lengths) total += n;
      const std::int64_t window = L + 1;
      if (detail::OnlyFullWindows(policy) && shape != 4 && shape != 3 && total < window) lengths.back() += window - total;
      if (shape == 4 && detail::OnlyFullWindows(policy)) lengths = {std::max<std::int64_t>(1, L / 2)};

      total = 0;
      for (auto n : lengths) total += n;
      const bool bulk = total > detail::kShrinkableTokens;
      // SFT masks are a property of the case (a dataset has them or not), then of each of its documents.
      const bool sft_case = *rc::gen::inRange(0, 100) >= 100 - profile.sft_percent;
      for (std::size_t d = 0; d < lengths.size(); ++d) {
        const std::int64_t n = lengths[d];
        Document doc;
        doc.uid = "d" + std::to_string(d);
        doc.tokens = detail::Tokens(n, profile.token_range, bulk);
        // Drawn so that shrinking (towards 0) heads for documents without a mask.
        doc.supervised = sft_case && *rc::gen::inRange(0, 4) != 0 ? detail::SupervisionOf(n, bulk)
                                                                  : std::vector<int>(static_cast<std::size_t>(n), 1);
        r.documents.push_back(std::move(doc));
      }
      AvoidReservedTokens(r.documents, r.policy);
      const bool big = grow > 0.5;
      r.micro_batch_rows = large_mode == 1 ? *rc::gen::inRange<std::int64_t>(4, 9) : *rc::gen::inRange<std::int64_t>(1, big ? 9 : 4);
      if (limits.max_micro_batch_rows > 0) r.micro_batch_rows = std::min(r.micro_batch_rows, limits.max_micro_batch_rows);
      r.dp_world_size = *rc::gen::inRange<std::int64_t>(1, big ? 5 : 3);
      // Losses: exact binary fractions k/8, one per effective token (delimiters included), from one seed.
      const std::int64_t extra = (r.policy.bos_id ? 1 : 0) + (r.policy.eos_id ? 1 : 0);
      std::uint64_t state = static_cast<std::uint64_t>(*rc::gen::inRange(0, 1 << 30));
      for (const auto& doc : r.documents) {
        std::vector<double> l(doc.tokens.size() + static_cast<std::size_t>(extra));
        for (auto& v : l) v = static_cast<double>(detail::Mix(state) % 64) / 8.0;
        r.target_losses[doc.uid] = std::move(l);
      }
      detail::EmptyOneDocumentNowAndThen(r, extra);
      return r;
    }));
  });
}

// The former signature: rows up to `max_row_length`, the profile's documents (or 8).
inline rc::Gen<PackRequest> Request(const Profile& profile, std::vector<Policy> policies, std::int64_t max_row_length) {
  return Request(profile, std::move(policies), Limits{max_row_length, 8});
}

}  // namespace gen
}  // namespace packoracle

namespace rc {
template <>
struct Arbitrary<packoracle::Workload> {
  static Gen<packoracle::Workload> arbitrary() { return packoracle::gen::PresetWorkload(); }
};
}  // namespace rc

namespace packoracle {
// RapidCheck prints counterexamples with showValue.
inline void showValue(const Workload& w, std::ostream& os) {
  os << "policy " << (w.policy.preset.empty() ? "(custom)" : w.policy.preset) << ", row_length " << w.row_length
     << ", documents:";
  for (const auto& d : w.documents) {
    os << " " << d.uid << "=[";
    for (std::size_t k = 0; k < d.tokens.size(); ++k) {
      os << (k ? " " : "") << d.tokens[k];
      if (!d.supervised.empty() && d.supervised[k] == 0) os << "'";  // ' marks an unsupervised token
    }
    os << "]";
  }
}
}  // namespace packoracle
