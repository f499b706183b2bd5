// The canonical model of a packed batch (DESIGN.md §2), computed element by element from documents, a
// layout and a policy. This is the specification in executable form: no cleverness, one function per rule,
// each commented with the rule it implements. Fast paths live elsewhere and are tested against this.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "packoracle/oracle/document.h"
#include "packoracle/oracle/layout.h"
#include "packoracle/oracle/policy.h"

namespace packoracle {

inline constexpr std::int64_t kPad = -1;

// What one slot holds: token `offset` of effective document `doc`, inside piece `piece` of the row; or
// padding (doc == kPad).
struct Slot {
  std::int64_t doc = kPad;
  std::int64_t offset = -1;
  std::int64_t piece = -1;
  Token token = 0;
  bool is_pad() const { return doc == kPad; }
};

// Why a prediction has the target it has (the numbered rules of Prediction below).
enum class TargetKind {
  kNone,              // no target: padding, a row end without a row-end target, followed by padding
  kWithinDocument,    // rule 1: the next slot holds the next token of the same document
  kBoundary,          // rule 2: the next slot holds the first token of another document
  kRowEndInDocument,  // rule 3: last slot of the row, the document goes on (next_in_doc / next_in_stream)
  kRowEndNextDocument,// rule 3: last slot of the row, the next document of the stream starts
  kDocumentEnd,       // rule 5: shift: document, the document's last input; the target is its last token
};
const char* Name(TargetKind kind);

// Prediction (r, i): the model's output at slot i scored against `target` with weight `weight`.
// `target_doc`/`target_offset` locate the target token in its effective document (they index the
// per-target losses); all three are meaningful only when kind != kNone.
struct Prediction {
  TargetKind kind = TargetKind::kNone;
  Token target = 0;
  std::int64_t target_doc = kPad;
  std::int64_t target_offset = -1;
  double weight = 0.0;
  bool has_target() const { return kind != TargetKind::kNone; }
};

// One row as a correct producer under the policy encodes it.
struct OracleRow {
  std::int64_t micro_step = 0;
  std::int64_t rank = 0;
  std::vector<Slot> slots;
  std::vector<Prediction> predictions;            // indexed by input slot i
  std::vector<Token> input_ids;
  std::vector<Token> labels;                      // under the policy's label_alignment and ignore_index
  std::vector<double> loss_mask;                  // indexed like the targets; empty unless policy.loss_mask
  std::vector<std::optional<std::int64_t>> position_ids;  // nullopt: any value is accepted (pad_positions any)
  std::vector<std::int64_t> doc_ids;              // segment ordinal in the row, kPad for padding
  std::vector<std::int64_t> cu_seqlens;           // row-local: 0, end of each segment, ..., row length
  std::vector<std::int64_t> seq_lens;             // differences of cu_seqlens (a padding run is a segment)
  std::int64_t length() const { return static_cast<std::int64_t>(slots.size()); }
};

// Everything the oracle knows of one optimizer step.
struct OracleBatch {
  Policy policy;
  std::int64_t row_length = 0;
  std::vector<EffectiveDocument> documents;
  std::vector<OracleRow> rows;
};

// Validates the policy, the documents and the layout (InputError on any problem), then computes every row.
OracleBatch Materialize(const std::vector<Document>& documents, const Layout& layout, const Policy& policy,
                        Delimiters delimiters = Delimiters::kAdd);

// ---- The rules, one by one (Materialize calls these; exposed so tests and reports can too) -------------

// Slot i of a row: which document token (or padding) the layout puts there.
std::vector<Slot> SlotsOf(const RowLayout& row, const std::vector<EffectiveDocument>& documents);

// Prediction i of a row (slot i holds token k of document d):
//  1. slot i+1 holds token k+1 of d → target d[k+1], weight supervised_d[k+1];
//  2. slot i+1 holds token 0 of another document d' → boundary target d'[0], weight supervised_d'[0] under
//     boundary_target included, else 0;
//  3. i is the row's last slot → row_end_target none: no target; next_in_doc: d[k+1] if d goes on;
//     next_in_stream: d[k+1] if d goes on, else the first token of document d+1 (a boundary target, rule 2's
//     weight);
//  4. otherwise (followed by padding, or by an unrelated piece): no target.
// Padding has no target.
// Under shift: document (a document of n tokens places its inputs d[0..n-2]; d[n-1] is a label only) no
// prediction crosses a document boundary: rule 2 never applies, and
//  5. slot i holds the document's last input d[n-2] → target d[n-1], weight supervised_d[n-1], whatever
//     follows it (another document, padding, the row's end);
// rule 3 applies to a row's last slot whose document's inputs go on in a later row (next_in_doc: d[k+1]).
Prediction PredictionOf(const std::vector<Slot>& slots, std::size_t i, const std::vector<EffectiveDocument>& docs,
                        const Policy& policy);

// labels[i]: pre_shifted without loss_mask: target of prediction i if its weight is positive, else
// ignore_index. pre_shifted with loss_mask: the target wherever prediction i has one (the loss mask zeroes
// it), else ignore_index. aligned: the target of prediction i-1 if its weight is positive, else
// ignore_index; for i = 0 the label the token would carry after a predecessor: the token if it is not
// padding, is supervised, and is either not a document's first token or boundary targets are included.
std::vector<Token> LabelsOf(const std::vector<Slot>& slots, const std::vector<Prediction>& predictions,
                            const std::vector<EffectiveDocument>& docs, const Policy& policy);

// position_ids[i]: see Policy (positions, position_base, split_positions, pad_positions).
std::vector<std::optional<std::int64_t>> PositionsOf(const RowLayout& row, const std::vector<Slot>& slots,
                                                     const Policy& policy, std::int64_t row_length);

// The attention rule A_ij for any (i, j) of a row:
//   a non-padding query i sees key j iff j ≤ i and (row_causal, or d_j = d_i: the same piece, since a row
//   holds at most one piece of a document);
//   a padding key is seen only under pad_keys visible (subject to causality);
//   a padding query sees j ≤ i in its own padding run (never compared: it reaches no loss).
bool Attends(const OracleRow& row, const Policy& policy, std::int64_t i, std::int64_t j);

// C(i) = { j : Attends(row, policy, i, j) }.
std::vector<std::int64_t> ContextSet(const OracleRow& row, const Policy& policy, std::int64_t i);

// The least attention work the declared rule demands of a row (DESIGN §4 efficiency, consumer_overhead): the
// (query, key) pairs a consumer must compute, those the rule makes visible to a query that reaches a loss,
//   W_min(row) = Σ_{i non-pad} |C(i)| = Σ_{i non-pad} Σ_j A_ij.
// Under doc_causal with pad keys masked it is Σ over the row's pieces of k(k+1)/2 (a piece of k tokens); under
// row_causal, u(u+1)/2 for the row's u tokens when padding trails them; pad keys visible add the padding before
// each query. A padding query's pairs are never needed (its output reaches no loss), so a consumer that computes
// them (a dense causal kernel over the whole padded row, a dense dummy row of alignment padding) computes more.
std::int64_t RequiredAttentionPairs(const OracleRow& row, const Policy& policy);

}  // namespace packoracle
