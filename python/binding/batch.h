// packoracle._core.BatchView: a training batch in the producer's field names, read by the core in one call
// for check_batch and the guard (python/binding/batch.cc says which forms it takes).
//
// packoracle._batch.canonical_microbatch is the public reading of a batch, and the only one that writes
// errors: the core's reader takes the common form (a dict of CPU integer tensors or arrays, the fields
// canonical_microbatch knows, nothing it would refuse) and answers None for anything else, which then goes
// through canonical_microbatch as before. python/tests/test_batch_view.py pins the two by Hypothesis: where
// the core reads a batch, it reads the rows canonical_microbatch gives.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "packoracle/interchange/packed_batch.h"
#include "packoracle/jobs/span_derivation.h"
#include "packoracle/properties/candidate.h"
#include "packoracle/properties/row_fields.h"

namespace packoracle::python {

namespace nb = nanobind;

struct BatchView {
  // The fields the view holds, indexed as kRowFields (properties/row_fields.h) lists them; loss_mask (a float
  // field, left to canonical_microbatch) and doc_spans (held as `spans`) are never held here.
  enum Field : std::size_t {
    kInputIds = RowFieldIndex("input_ids"),
    kLabels = RowFieldIndex("labels"),
    kPositionIds = RowFieldIndex("position_ids"),
    kCuSeqlens = RowFieldIndex("cu_seqlens"),
    kSeqLens = RowFieldIndex("seq_lens"),
    kDocIds = RowFieldIndex("doc_ids"),
    kAttentionMask = RowFieldIndex("attention_mask"),
    kFields = kRowFields.size()
  };
  // Views of the caller's arrays (a torch tensor through DLPack, kept alive by the view): per-token fields
  // rows × slots or one flattened row, per-row lists one row or rows × k.
  std::array<std::optional<nb::ndarray<nb::ro>>, kFields> fields;
  std::int64_t rows = 0, slots = 0;
  std::vector<std::vector<DocSpan>> spans;  // per row: given (doc_spans), or derived from the documents
  std::int64_t step = 0, micro_step = 0, rank = 0;
  nb::object producer;  // as canonical_microbatch's `producer` (a dict of numbers, or None): read by Read
  // The negative values input_ids and labels may hold (packoracle._args.signed_ids). `ids_deferred`: not yet
  // scanned for others (batch_view's defer_ids): the audit proves them or scans (IdsAllowed).
  std::vector<std::int64_t> input_ids_allowed, labels_allowed;
  bool ids_deferred = false;
  // Every negative value of input_ids and labels is one the policy allows (else canonical_microbatch refuses
  // the batch, naming the field and the index).
  bool IdsAllowed() const;
  // Whether the audit can leave the scan out: input_ids and labels both int64 rows (a scan of any other width
  // reads them at that width anyway).
  bool Deferrable() const;
  // The first label of each row allowed: the one slot the clean-row path does not read under aligned labels.
  bool FirstLabelsAllowed() const;

  // Row r's fields (not its spans) read into `row`'s storage.
  void ReadRowFields(std::int64_t r, CandidateRow& row) const;
  // The micro-batch, its rows read into `reuse`'s storage: what MicrobatchFromPython gives for the
  // canonical micro-batch of the same batch (the producer read as it reads it, errors named at `where`).
  CandidateMicrobatch Read(const std::string& where, CandidateMicrobatch reuse) const;
  // The same micro-batch as `record`'s views (MicrobatchRecord::views): each row's int64 fields viewed where
  // the caller's arrays hold them, the others read into the record's rows (their storage reused). The views
  // are valid while this view and the record are.
  void View(const std::string& where, MicrobatchRecord& record) const;
};

// packoracle._core.SpanDerivation: the core's derivation (jobs/span_derivation.h) with the policy it reads the
// rows' own encodings by where two documents match at a slot (EncodedSegments).
struct PolicySpanDerivation : jobs::SpanDerivation {
  PolicySpanDerivation(std::vector<std::vector<Token>> documents, const Policy& p)
      : jobs::SpanDerivation(std::move(documents), p.overflow, jobs::DerivationPad(p),
                             jobs::DerivationLeftPadded(p)),
        policy(p) {}
  PolicySpanDerivation(std::vector<std::span<const Token>> documents, const Policy& p)
      : jobs::SpanDerivation(std::move(documents), p.overflow, jobs::DerivationPad(p),
                             jobs::DerivationLeftPadded(p)),
        policy(p) {}
  // Finish under this derivation's own policy (the pad id it reads padding by).
  bool Finish() { return jobs::SpanDerivation::Finish(policy.pad_id); }
  Policy policy;
  // The batch arrays whose rows Match viewed in place (BatchViewOf), kept alive while the derivation may read
  // them again (Solve).
  std::vector<nb::ndarray<nb::ro>> viewed;
};

// packoracle._core.batch_view: a BatchView of `batch`, or None for any batch canonical_microbatch is left to read
// (the binding's docstring says which arguments mean what).
nb::object BatchViewOf(nb::handle batch, const std::vector<std::string>& ignore,
                       const std::vector<std::int64_t>& input_ids_allowed, const std::vector<std::int64_t>& labels_allowed,
                       std::optional<std::int64_t> ignore_index, nb::handle derivation, const std::vector<std::string>& uids,
                       std::int64_t step, std::int64_t micro_step, std::int64_t rank, nb::handle producer,
                       bool defer_ids);

}  // namespace packoracle::python
