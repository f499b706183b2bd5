// When a missing or inconsistent encoding changes nothing for training (DESIGN §4: a violation is a difference
// in what training sees: context sets, targets, positions, counts), shared by CheckCase
// (properties/src/check.cc) and the fast verifier (fastcheck/src/step_rows.cc) so that both decide and say
// the same thing.
//
// A row dumped without the boundary encoding its policy declares (cu_seqlens, seq_lens, doc_ids, position ids)
// is read by a backend as one causal sequence: every position sees the whole row before it. That equals the
// declared doc_causal rule exactly when no real position has an earlier slot of another piece, or an earlier
// padding key the policy masks. A row holding one document (padding after it) is such a row: nothing crosses,
// and the missing encoding is a note. In the first row where it does change a context set, it is an
// `attention` violation.
//
// Likewise a 2-D attention_mask that marks padding visible (1) changes nothing when no real token comes after
// that padding (causal attention never looks forward).
#pragma once

#include <cstdint>
#include <string>

#include "packoracle/oracle/policy.h"
#include "packoracle/properties/candidate.h"

namespace packoracle {

// Does reading a row as one causal sequence change any real position's context set under the declared
// doc_causal rule? `piece_of(i)` is slot i's piece in the row (-1 for padding), for i in [0, n).
// C(i) = {j ≤ i : piece_j = piece_i} (padding keys excluded unless pad_keys: visible) against {j ≤ i}: they
// differ for some real i exactly when an earlier slot holds another piece, or padding the policy masks.
template <class PieceOf>
bool RowCausalChangesContexts(std::int64_t n, PieceOf piece_of, const Policy& policy) {
  const bool pads_visible = policy.pad_keys == PadKeys::kVisible;
  bool pad_seen = false;
  std::int64_t first_piece = -1;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t p = piece_of(i);
    if (p < 0) {
      pad_seen = true;
      continue;
    }
    if (pad_seen && !pads_visible) return true;  // a masked padding key before a real query
    if (first_piece >= 0 && p != first_piece) return true;  // a second piece: it would see the first
    first_piece = p;
  }
  return false;
}

// The boundary encoding a row needs under its policy's boundary_source ("cu_seqlens", "seq_lens", "doc_ids",
// "position_ids"), or "" when the source is read from the tokens or the spans themselves.
const char* RequiredBoundaryField(BoundarySource source);

// Whether the row carries the field RequiredBoundaryField names (true when the source needs none).
bool HasRequiredBoundaryField(const CandidateRow& row, BoundarySource source);
bool HasRequiredBoundaryField(const RowView& row, BoundarySource source);

// The note for rows that lack `field` (RequiredBoundaryField) where that changes no context set.
std::string MissingBoundaryEncodingNote(const std::string& field);

// The note for a 2-D attention_mask marking padding visible where no real token follows that padding.
std::string VisiblePaddingNote();

}  // namespace packoracle
