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
//
// Streamed (verify, a step of many micro-batches): the same checks and the same verdict, rows checked as each
// micro-batch is added; the property test checks it too, with L and the documents known only at the end.
//   in.row_length = 0;  docs.resolve = ...;  docs.uid_order = true;
//   checker.Begin(in);  for (each micro-batch read) checker.Add(mb);  const auto& v = checker.Finish();
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "packoracle/fastcheck/uid_table.h"
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
  double counted = 0;                        // what the producer's denominator is compared with (DenominatorCount)
  double utilization = 1.0;                  // non-pad slots / slots
  std::optional<double> declared_objective;  // as CaseResult
  std::optional<double> token_mean;          // as CaseResult
  std::vector<std::string> notes;            // as CaseResult (ProducerNotes of the step's totals)
  std::int64_t clean_rows = 0;  // rows the clean-row path took whole (the others: the generic per-row passes)
  // Every document token the clean-row path compared with a slot (each input token of each span it took) was
  // >= 0: with every row clean and every document tiled, no input token of any document is negative.
  bool clean_tokens_non_negative = true;
};

// One effective document as the checker reads it: its tokens (int64, or int32 where a holder packs them) and
// its supervised flags (ints, bits, or none: all ones). A view: the storage is the holder's, and must stay
// put until the step's verdict (FastStepChecker::Finish).
struct DocumentView {
  std::string_view uid;
  std::int64_t size = 0;
  const Token* wide = nullptr;           // tokens as int64; else `narrow`
  const std::int32_t* narrow = nullptr;
  const int* ints = nullptr;             // supervised flags as ints (EffectiveDocument::supervised)
  const std::uint64_t* bits = nullptr;   // or as bits; neither: every token supervised
  Token token(std::int64_t k) const { return wide ? wide[k] : narrow[k]; }
  int supervised(std::int64_t k) const {
    if (ints) return ints[k];
    return bits ? static_cast<int>((bits[k / 64] >> (k % 64)) & 1) : 1;
  }
  static DocumentView Of(const EffectiveDocument& d);
};

// The documents of a case, in the order CheckCase sees them (request.documents, made effective), with a
// lookup by uid. `losses[d]`, when the losses are known, are request.target_losses of document d (missing
// entries count 1 nat, as CheckCase fills them).
//
// A streamed step (verify) does not know its documents before its rows: `resolve` is then asked for each
// uid a row names that is not yet among `docs`, and the documents are the ones it found, in uid order
// (`uid_order`), as verify's request.documents (a std::set of the step's uids) has them.
struct StepDocuments {
  std::vector<DocumentView> docs;
  std::vector<const std::vector<double>*> losses;  // same size as docs, or empty when losses are unknown
  // Streaming: the view of a document by uid, false when there is none (the uid is then unknown to the step).
  std::function<bool(std::string_view uid, DocumentView& view)> resolve;
  bool uid_order = false;  // the step's documents are ordered by uid, not by their index in `docs`
  // Index of a uid in `docs`, -1 when unknown (the last of equal uids, as CheckCase's std::map keeps).
  // The look-up table is built once by Index() for a step given whole, and filled by Find itself for a
  // streamed one (each uid `resolve` finds); the checker looks each span up once.
  std::int64_t Find(std::string_view uid);
  void Index();
  // Room for `documents` documents (a streamed step whose caller knows about how many it names).
  void Reserve(std::size_t documents) {
    docs.reserve(documents);
    by_uid_.Reserve(documents);
  }
  // The effective documents of a request with their target losses (a request's `target_losses`), indexed.
  static StepDocuments Of(const std::vector<EffectiveDocument>& effective,
                          const std::map<std::string, std::vector<double>>& target_losses);

 private:
  UidTable by_uid_;  // ids: indices in docs
};

struct StepInput {
  const Policy* policy = nullptr;  // validated by the caller (ValidatePolicy)
  // L; 0 under Begin: the longest row of the step (verify's default), known once every row was added.
  std::int64_t row_length = 0;
  std::int64_t dp_world_size = 1;
  // The packer's answer: its micro-batches in order (pointers, so that a caller holding them elsewhere, as
  // verify does, copies nothing), or its refusal or fault.
  std::vector<const CandidateMicrobatch*> microbatches;
  const std::string* refusal = nullptr;
  const std::string* fault = nullptr;
  StepDocuments* documents = nullptr;
  CheckOptions options;  // determinism is the caller's (it needs the packer); the rest as CheckCase

  void SetPacked(const PackResult& packed);
  // One generated case's step: the request's policy, L and ranks, the packer's answer and the documents (all
  // held by the caller for as long as the input is used).
  static StepInput Of(const PackRequest& request, const PackResult& packed, StepDocuments& documents,
                      const CheckOptions& options);
};

// Check(input) checks a whole step at once. A step too large to hold (gradient accumulation over a hundred
// micro-batches) is streamed instead: Begin(input) (its micro-batches are ignored), Add each micro-batch in
// order (its rows are checked then, and need not outlive the call), Finish for the verdict. What crosses rows
// is kept as small running state: per row a few sums, per document its pieces, per micro-batch its totals.
// Check is exactly Begin, Add for each micro-batch, Finish.
class FastStepChecker {
 public:
  FastStepChecker();
  ~FastStepChecker();
  const StepVerdict& Check(const StepInput& input);
  void Begin(const StepInput& input);
  void Add(const CandidateMicrobatch& microbatch);
  // The same with the micro-batch's rows viewed where the caller holds them (its `rows` are not read): the
  // views need not outlive the call.
  void Add(const CandidateMicrobatch& microbatch, std::span<const RowView> rows);
  const StepVerdict& Finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace packoracle::fastcheck
