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

// A supervision mask: all supervised, or a prompt (unsupervised) then a completion, or random turns.
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
      rc::gen::container<std::vector<int>>(n, rc::gen::inRange(0, 2)));
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
