// Private to fastcheck/src: the state of one FastStepChecker::Check call, shared by step_check.cc (the flow,
// shape, coverage, the layout), step_rows.cc (the per-row pass) and step_totals.cc (producer totals).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <optional>
#include <span>
#include <vector>

#include "packoracle/fastcheck/step_check.h"
#include "packoracle/oracle/tiling.h"
#include "packoracle/properties/tolerance.h"

namespace packoracle::fastcheck::internal {

// The comparisons of numbers are CheckCase's own (properties/tolerance.h).
using packoracle::Close;
using packoracle::LossClose;

// One prediction as PredictionOf (oracle/src/batch.cc) defines it; has_target stands for kind != kNone (the
// kind itself is only needed for the oracle's messages).
struct Pred {
  bool has_target = false;
  Token target = 0;
  std::int64_t doc = -1, offset = -1;
  double weight = 0;
};

}  // namespace packoracle::fastcheck::internal

namespace packoracle::fastcheck {

using internal::Close;
using internal::Pred;

// The state of one step between Begin and Finish. Everything per slot is per row and reused; what crosses
// rows is small: per row its sums and length, per document its pieces, per micro-batch its totals.
struct FastStepChecker::Impl {
  // Begin's input (the documents are the caller's, alive until Finish).
  const Policy* policy_ptr = nullptr;
  std::int64_t given_row_length = 0;  // 0: the longest row of the step
  std::int64_t dp_world_size = 1;
  CheckOptions options;
  const std::string* refusal = nullptr;
  const std::string* fault = nullptr;
  StepDocuments* docs_ptr = nullptr;
  StepVerdict v;

  const Policy& policy() const { return *policy_ptr; }
  StepDocuments& docs() const { return *docs_ptr; }
  const DocumentView& Doc(std::int64_t d) const { return docs_ptr->docs[static_cast<std::size_t>(d)]; }
  double Loss(std::int64_t d, std::int64_t k) const {
    if (docs_ptr->losses.empty()) return 1.0;  // losses unknown: the sums that use them are not used
    const auto* l = docs_ptr->losses[static_cast<std::size_t>(d)];
    return l && static_cast<std::size_t>(k) < l->size() ? (*l)[static_cast<std::size_t>(k)] : 1.0;
  }
  // A note once per step, in the order CheckCase adds them (rows first, then the totals).
  void AddNote(std::string note) {
    if (std::find(v.notes.begin(), v.notes.end(), note) == v.notes.end()) v.notes.push_back(std::move(note));
  }

  // ---- per micro-batch ----
  struct Microbatch {
    std::int64_t micro_step = 0, rank = 0, rows = 0;
    std::optional<ProducerTotals> producer;  // without its gradient (the totals never read it)
  };
  std::vector<Microbatch> mbs;

  // ---- per row (flat index over the step) ----
  struct RowSums {
    double weight = 0, count = 0, loss = 0;  // count on the policy's basis
    double labels = 0;                       // the oracle's labels != ignore_index
    std::int64_t length = 0;
    std::int64_t used = 0;  // non-pad slots (efficiency: no_mergeable_rows)
  };
  std::vector<RowSums> sums;
  std::vector<std::int32_t> row_microbatch;
  std::vector<std::int32_t> row_shape;  // Checker::CheckShape's findings of the row that do not need L
  std::int64_t longest = 0;

  // ---- per document: [0, doc_count) are this step's; the storage beyond is kept for the next ----
  std::int64_t doc_count = 0;
  std::vector<std::vector<TilingPiece>> pieces;  // rows in order (index: the row)
  std::vector<std::int64_t> last_row;            // the last row holding a piece
  std::vector<std::pair<double, double>> per_doc;  // sequence_mean: (Σwℓ, Σw) by input document
  std::vector<std::int64_t> next_nonempty;         // at Finish: the next document of the stream with tokens
  std::vector<double> mb_loss;                     // CheckTotals' s per micro-batch, prediction by prediction

  // ---- findings so far, by the pass CheckCase would report them from ----
  std::vector<Finding> coverage;  // Checker::CheckCoverage's per-row findings
  std::vector<Finding> row_findings;  // segments, positions, targets, attention: row by row
  bool layout_invalid = false;     // ValidateLayout would throw: defer
  bool defer = false;              // the step is outside what the fast path reproduces
  std::optional<Finding> targets;  // CheckTargets stops at the step's first wrong prediction: at most one
  // A row's last slot whose target under row_end_target next_in_stream is the next document of the stream,
  // which is known only once the step's documents are (Finish).
  struct Pending {
    std::int64_t row, slot, doc;
    Token got_target;
    double got_weight;
  };
  std::vector<Pending> pending;
  bool visible_padding = false, missing_encoding = false;
  std::int64_t slots = 0, used = 0;
  // L is the longest row when not given, known only at Finish; a row's positions are read with the longest
  // so far. The smallest such L that changed a position (a capped padding position, a modulo split): Finish
  // defers unless it is the step's L (0: none did). A smaller L that changed nothing reads as the step's.
  std::int64_t length_read = 0;

  // ---- row buffers, reused ----
  std::vector<std::int32_t> slot_doc;     // effective document index, -1 for padding
  std::vector<std::int64_t> slot_offset;  // token offset in the document
  std::vector<std::int32_t> slot_piece;   // index of the span in the row's doc_spans
  std::vector<std::int64_t> piece_base;   // doc_offset of each span (split_positions: restart)
  std::vector<std::uint8_t> covered;      // spans claiming the slot (saturating)
  std::vector<std::uint8_t> derived;      // segment starts derived from an encoding
  std::vector<std::int32_t> span_doc;     // per span of the row: its document, -1 unknown
  std::vector<RowView> row_views;        // Add(CandidateMicrobatch): its rows as views

  void Begin(const StepInput& in);
  void Add(const CandidateMicrobatch& mb, std::span<const RowView> rows);
  void Finish();

  std::int64_t RowLength() const { return given_row_length > 0 ? given_row_length : std::max<std::int64_t>(1, longest); }
  void EnsureDocument(std::int64_t d);
  std::int32_t ShapeRow(const RowView& row) const;  // the findings that do not need L
  std::int32_t ShapeWithLength(std::int64_t n) const;   // those that do
  std::int64_t LongestCovered(std::span<const RowView> rows);  // pad_to longest: the micro-batch's width
  std::vector<std::pair<std::int64_t, std::int64_t>> intervals;  // LongestCovered's spans of a row, reused
  bool CoverageRow(const RowView& row, std::int64_t R);
  void LayoutRow(const CandidateMicrobatch& mb, std::int64_t R);
  void FillSlots(const RowView& row);
  Pred PredictionAt(std::size_t i, std::size_t n) const;
  bool RowEndWaitsForStream(std::size_t i, std::size_t n) const;
  // A real segment start (TrueSegmentStarts, padding excluded): a non-pad slot after padding or another piece.
  bool TrueStart(std::size_t i) const {
    return i == 0 || slot_doc[i - 1] < 0 || slot_piece[i - 1] != slot_piece[i];
  }
  void MarkCuSeqlens(std::span<const std::int64_t> cu, std::size_t n);
  void MarkSeqLens(std::span<const std::int64_t> lens, std::size_t n);
  void AddPrediction(const Pred& p, std::int64_t R, std::size_t m, std::int64_t input_doc);
  // The step's documents in CheckCase's order: sorted once, when Finish first asks (no document is found
  // after the rows), instead of on each of its three uses (a short-document step sorted its uids three times).
  const std::vector<std::int64_t>& StepOrder() const;
  mutable std::vector<std::int64_t> step_order;  // as many as the step's documents once sorted
  void RowPass(const RowView& row, std::int64_t R, std::size_t m);
  // The clean-row path (step_clean_row.cc): the common row in flat passes; false hands it to the above.
  bool CleanRow(const CandidateMicrobatch& mb, const RowView& row, std::int64_t R, std::size_t m);
  bool TileSpans(const RowView& row, std::int64_t& used);
  // Which per-slot encodings the token pass reads in its own loop (one pass over five arrays reads them from
  // memory faster than three passes): position_ids where they step by 1 through a span, doc_ids per span.
  struct Fused {
    bool positions = false, doc_ids = false;
  };
  bool SegmentsClean(const RowView& row, std::int64_t used, bool positions_matched, Fused fused) const;
  std::optional<std::int64_t> FirstPosition(const DocSpan& span) const;
  bool PositionsClean(const RowView& row, std::int64_t used, bool& capped, Fused fused) const;
  Pred SpanEndPrediction(const RowView& row, std::size_t p, bool& waits) const;
  bool TokensAndTargetsClean(const RowView& row, std::int64_t used, std::int64_t& weighted, Fused fused,
                             std::uint64_t& token_bits) const;
  bool AttentionClean(const RowView& row, std::int64_t used, bool& visible) const;
  void AddCleanSums(const RowView& row, std::int64_t R, std::size_t m, std::int64_t weighted);
  void TargetsAndSums(const RowView& row, std::int64_t R, std::size_t m);
  void AttentionRow(const RowView& row, std::int64_t R);
  void SegmentsRow(const RowView& row, std::int64_t R, std::int64_t truth_count);
  void PositionsRow(const RowView& row, std::int64_t R);
  void ReadWithLength(std::int64_t L, bool known) {
    if (!known) length_read = length_read == 0 ? L : std::min(length_read, L);
  }
  bool PolicyDemandsRefusal() const;
  bool Tiling(std::vector<Finding>& out) const;
  bool PiecesOverlap();
  void ResolvePending();
  void Totals();
  class TotalsPass;  // Totals' state and parts (step_totals.cc)
  void MergeableRows();  // efficiency: no_mergeable_rows
  void Decide();  // Finish's flow: which pass's findings are the step's
};

}  // namespace packoracle::fastcheck
