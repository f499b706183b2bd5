// RapidCheck generators of packing workloads, valid by construction (sizes derived from earlier draws,
// never discarded).
//
//   RC_GTEST_PROP(MyPacker, KeepsTargets, ()) {
//     const auto workload = *packoracle::gen::Workload();
//     ...
//   }
#pragma once

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

// A fuzzing profile (Csmith's swarm idea): drawn once per run, it skews every case of the run towards one
// corner of the input space, so that a run explores that corner deeply instead of averaging over all.
struct Profile {
  std::string name;            // for reports: "edges", "short", "long", "sft", "collide"
  int token_range = 24;        // token ids drawn from [0, token_range): small ranges collide with pad/eos/bos
  int sft_percent = 30;        // how often a document gets a prompt/completion supervision mask
  int length_mode = 0;         // 0 edges, 1 short (1..3), 2 long (L-1..2L+1), 3 anything
  std::size_t max_documents = 6;
};

// Every profile keeps some of everything (a bug that needs SFT masks or long documents is found whatever the
// seed); each leans hard one way.
inline const std::vector<Profile>& Profiles() {
  static const std::vector<Profile> profiles = {
      {"edges", 24, 30, 0, 6}, {"short", 24, 30, 1, 8}, {"long", 24, 30, 2, 4},
      {"sft", 24, 100, 3, 6},  {"collide", 3, 50, 0, 6}};
  return profiles;
}

inline rc::Gen<std::int64_t> ProfileLength(const Profile& profile, std::int64_t row_length) {
  const auto leaning = [&]() -> rc::Gen<std::int64_t> {
    switch (profile.length_mode) {
      case 1: return rc::gen::inRange<std::int64_t>(1, 4);
      case 2: return rc::gen::inRange<std::int64_t>(std::max<std::int64_t>(1, row_length / 2), 2 * row_length + 2);
      case 3: return rc::gen::inRange<std::int64_t>(1, 2 * row_length + 2);
      default: return DocumentLength(row_length);
    }
  }();
  return rc::gen::weightedOneOf<std::int64_t>({{3, leaning}, {1, DocumentLength(row_length)}});
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
    return p;
  });
}

// One case of a run: the exec protocol's request, sized from the profile.
inline rc::Gen<PackRequest> Request(const Profile& profile, std::vector<Policy> policies, std::int64_t max_row_length = 16) {
  return rc::gen::exec([profile, policies, max_row_length] {
    PackRequest r;
    r.policy = policies.empty() ? *rc::gen::weightedOneOf<Policy>({{4, PresetPolicy()}, {1, MixedPolicy()}})
                                : *rc::gen::elementOf(policies);
    r.row_length = *rc::gen::inRange<std::int64_t>(1, max_row_length + 1);

    const auto count = *rc::gen::inRange<std::size_t>(0, profile.max_documents + 1);
    for (std::size_t d = 0; d < count; ++d) {
      const std::int64_t n = *ProfileLength(profile, r.row_length);
      Document doc;
      doc.uid = "d" + std::to_string(d);
      doc.tokens = *rc::gen::container<std::vector<Token>>(static_cast<std::size_t>(n), rc::gen::inRange<Token>(0, profile.token_range));
      // Drawn so that shrinking (towards 0) heads for documents without a mask.
      doc.supervised = *rc::gen::inRange(0, 100) >= 100 - profile.sft_percent
                           ? *Supervision(n)
                           : std::vector<int>(static_cast<std::size_t>(n), 1);
      r.documents.push_back(std::move(doc));
    }
    AvoidReservedTokens(r.documents, r.policy);
    r.micro_batch_rows = *rc::gen::inRange<std::int64_t>(1, 4);
    r.dp_world_size = *rc::gen::inRange<std::int64_t>(1, 3);
    // Losses: exact binary fractions k/8, one per effective token (delimiters included).
    const std::int64_t extra = (r.policy.bos_id ? 1 : 0) + (r.policy.eos_id ? 1 : 0);
    for (const auto& doc : r.documents) {
      std::vector<double> l;
      for (std::int64_t k = 0; k < static_cast<std::int64_t>(doc.tokens.size()) + extra; ++k) l.push_back(*rc::gen::inRange(0, 64) / 8.0);
      r.target_losses[doc.uid] = l;
    }
    return r;
  });
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
