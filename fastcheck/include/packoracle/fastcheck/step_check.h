// The fast verifier: one step's packed rows checked against every packer invariant in one pass per row.
//
// It is a second implementation of what CheckCase (properties/src/check.cc) does for a packer's answer,
// written for speed: O(L) per row (the dense-mask check of dense_mask.h is the only O(L²) part), no
// materialized oracle rows, and every per-row buffer owned by the FastStepChecker and reused, so that the
// steady state allocates nothing per row. The oracle stays the specification; this is a candidate of the
// kit like any other, property-tested against it (fastcheck/test/differential_test.cc).
//
// What "agree" means, precisely: for the same case, the fast verifier's `findings` equal CheckCase's
// `violations` projected onto (invariant, row, slot), as a sequence: same length, same order (CheckCase
// sorts by invariant, stably), same flat row (micro-batches flattened in order; -1 for none) and same slot
// (-1 for the whole row or step). It therefore also reproduces CheckCase's gating: nothing is checked after
// a shape or coverage violation, and `targets` stops at the first wrong prediction of the step. The messages
// are not reproduced: when the fast path finds a violation, the caller re-runs CheckCase for the report.
//
// Some inputs make CheckCase throw InputError from deep inside the oracle (two pieces of one document in a
// row, a token placed twice in a step, a rank outside the step's shape, ...). The fast verifier does not
// reproduce those messages: it answers kDefer, and the caller runs CheckCase, which throws as it always did.
//
//   fastcheck::FastStepChecker checker;                   // keep it: its buffers are reused
//   fastcheck::StepInput in{&policy, row_length, dp_world_size};
//   in.SetPacked(pack_result); in.documents = &docs; in.options = options;
//   const fastcheck::StepVerdict& v = checker.Check(in);
//   if (v.outcome != fastcheck::Outcome::kPassed) { /* run CheckCase for the full report */ }
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "packoracle/oracle/document.h"
#include "packoracle/oracle/policy.h"
#include "packoracle/properties/candidate.h"
#include "packoracle/properties/invariants.h"

namespace packoracle::fastcheck {

// One reported slot: the projection of a Violation that the differential property compares.
struct Finding {
  Invariant invariant = Invariant::kShape;
  std::int64_t row = -1;   // flat row of the step, -1: none
  std::int64_t slot = -1;  // -1: the whole row or step
  bool operator==(const Finding&) const = default;
};

enum class Outcome {
  kPassed,    // no violation: CheckCase would pass this step
  kViolated,  // `findings` is exactly CheckCase's projection
  kDefer,     // CheckCase would throw (or the input is outside what the fast path reproduces): run it
};

struct StepVerdict {
  Outcome outcome = Outcome::kPassed;
  std::vector<Finding> findings;
  double valid_targets = 0;                  // Σ w over the step's rows (as the oracle's predictions)
  double utilization = 1.0;                  // non-pad slots / slots
  std::optional<double> declared_objective;  // as CaseResult
  std::optional<double> token_mean;          // as CaseResult
  std::vector<std::string> notes;            // as CaseResult (ProducerNotes of the step's totals)
};

// The documents of a case, in the order CheckCase sees them (request.documents, made effective), with a
// lookup by uid. `losses[d]`, when the losses are known, are request.target_losses of document d (missing
// entries count 1 nat, as CheckCase fills them).
struct StepDocuments {
  std::vector<const EffectiveDocument*> docs;
  std::vector<const std::vector<double>*> losses;  // same size as docs, or empty when losses are unknown
  // Index of a uid in `docs`, -1 when unknown (the last of equal uids, as CheckCase's std::map keeps).
  // Built once per step by Index(); the checker looks each span up once.
  std::int64_t Find(std::string_view uid) const;
  void Index();
  // The effective documents of a request with their target losses (a request's `target_losses`), indexed.
  static StepDocuments Of(const std::vector<EffectiveDocument>& effective,
                          const std::map<std::string, std::vector<double>>& target_losses);

 private:
  std::unordered_map<std::string_view, std::int64_t> by_uid_;
};

struct StepInput {
  const Policy* policy = nullptr;  // validated by the caller (ValidatePolicy)
  std::int64_t row_length = 0;
  std::int64_t dp_world_size = 1;
  // The packer's answer: its micro-batches in order (pointers, so that a caller holding them elsewhere, as
  // verify does, copies nothing), or its refusal or fault.
  std::vector<const CandidateMicrobatch*> microbatches;
  const std::string* refusal = nullptr;
  const std::string* fault = nullptr;
  const StepDocuments* documents = nullptr;
  CheckOptions options;  // determinism is the caller's (it needs the packer); the rest as CheckCase

  void SetPacked(const PackResult& packed);
};

class FastStepChecker {
 public:
  const StepVerdict& Check(const StepInput& input);

 private:
  struct Impl;
  struct Buffers {
    std::vector<std::int32_t> slot_doc;     // effective document index, -1 for padding
    std::vector<std::int64_t> slot_offset;  // token offset in the document
    std::vector<std::int32_t> slot_piece;   // index of the span in the row's doc_spans
    std::vector<std::int64_t> piece_base;   // doc_offset of each span (split_positions: restart)
    std::vector<std::uint8_t> covered;      // spans claiming the slot (saturating)
    std::vector<std::uint8_t> derived;      // segment starts derived from an encoding
    std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> pieces;  // per document: (offset, length)
    std::vector<std::int64_t> next_nonempty;  // per document: the next document of the stream with tokens
    std::vector<std::int64_t> last_row;       // per document: the last row holding a piece of it
    std::vector<std::int32_t> span_doc;       // per span of the step (rows in order): its document, -1 unknown
    std::vector<std::size_t> row_spans;       // per row: where its spans start in span_doc
  };
  Buffers buffers_;
  StepVerdict verdict_;
};

}  // namespace packoracle::fastcheck
