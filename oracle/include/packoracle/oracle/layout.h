// Layouts: which piece of which document sits in which slots of which row, and which micro-batch and rank
// each row belongs to. A layout is the packer's decision; the oracle derives everything else from it.
#pragma once

#include <cstdint>
#include <vector>

#include "packoracle/oracle/document.h"
#include "packoracle/oracle/policy.h"

namespace packoracle {

// Tokens [doc_offset, doc_offset + length) of effective document `doc` occupy slots [start, start + length).
struct Piece {
  std::int64_t doc = 0;
  std::int64_t doc_offset = 0;
  std::int64_t start = 0;
  std::int64_t length = 0;
  bool operator==(const Piece& o) const {
    return doc == o.doc && doc_offset == o.doc_offset && start == o.start && length == o.length;
  }
};

// Limits that keep every computation in range (a longer row, or more micro-batches, is refused).
inline constexpr std::int64_t kMaxRowLength = std::int64_t{1} << 24;        // 16,777,216 slots
inline constexpr std::int64_t kMaxMicrobatchesPerStep = std::int64_t{1} << 20;  // ranks × micro-steps

// One row: `length` slots; slots covered by no piece are padding.
struct RowLayout {
  std::int64_t length = 0;
  std::vector<Piece> pieces;  // in any order; at most one piece of a document per row
  std::int64_t micro_step = 0;
  std::int64_t rank = 0;
};

// All rows of one optimizer step. `row_length` is L, the most slots a row may have.
struct Layout {
  std::int64_t row_length = 0;
  std::vector<RowLayout> rows;
};

// Throws InputError, naming the row and piece, when the layout is not a layout of these documents: a row
// length outside 1..kMaxRowLength, a row longer than L or of negative length, a piece of an unknown document,
// of no tokens, outside its document or outside its row, pieces that overlap, two pieces of one document in
// a row (the rule A_ij = 1[d_j = d_i] could not tell them apart), a token of a document placed twice, a
// micro_step or rank outside 0..kMaxMicrobatchesPerStep. A piece lies inside its document's inputs
// (InputTokens: under shift: document a document's last token is in no piece). Whether rows are padded as the
// policy says is an invariant of the candidate (`shape`), not a property of a layout.
void ValidateLayout(const std::vector<EffectiveDocument>& documents, const Layout& layout, const Policy& policy);

// ---- Reference layouts: what simple packers produce from the documents alone ---------------------------
// Each uses the policy's delimiters (documents are made Effective first), overflow and padding, and puts
// every row in micro-batch 0 of rank 0 (pad_to longest: every row as wide as the widest); AssignMicrobatches
// (with the policy) spreads them. Each places a document's input
// tokens (InputTokens: all of them, or all but the last under shift: document), and every length below
// (longer than L, truncated, the stream's N) counts those.

// Sequential greedy: documents in order, each into the current row if it fits in the space left, else into a
// new row; a row holds MergeCapacity tokens (L, or ⌊L/k⌋·k under pad_to multiple_of:k). A document longer
// than L: overflow error → InputError; truncate → its first TruncationLength tokens (L, or ⌊L/k⌋·k under
// truncate_to: pad_multiple); drop → in no row (DroppedDocument). Under split every row is filled to the
// end: any document that does not fit in the space left (not only one longer than L) is cut there and
// continues in the next row (torchtune split_across_pack).
Layout SequentialLayout(const std::vector<Document>& documents, const Policy& policy, std::int64_t row_length);

// First fit: documents in order, each into the first row whose content leaves room for it within
// MergeCapacity (L, or ⌊L/k⌋·k under pad_to multiple_of:k), else into a new row; overflow as in
// SequentialLayout (split is not first fit's: PolicyProblems refuses it with efficiency: no_mergeable_rows).
// No two rows could be merged: a row is opened only for a document that no earlier row could take.
Layout FirstFitLayout(const std::vector<Document>& documents, const Policy& policy, std::int64_t row_length);

// One document per row (HF padded batches). Overflow: error, truncate to TruncationLength, split into
// chunks of L, or drop (no row).
Layout OneDocumentPerRow(const std::vector<Document>& documents, const Policy& policy, std::int64_t row_length);

// Stream windows: the effective documents concatenated into one stream of N tokens; row r holds stream
// tokens [r·s, r·s + L) with s = L (stream_stride "L" or null) or L + 1 ("L+1"). With padding (right or left) the
// last, partial window is kept and padded (every token is an input; under row_end_target next_in_stream a
// window holding only the stream's last token, already the previous row's target, is not made, as Megatron's
// ceil((N-1)/L) samples); with padding none only full windows
// are kept, rows while r·s + L + 1 ≤ N (llm.c: the window and its last target), and a stream too short for
// one window is refused.
Layout StreamWindows(const std::vector<Document>& documents, const Policy& policy, std::int64_t row_length);

// The reference layout that fits the policy, as the golden fixtures use it: StreamWindows when the policy has
// a stream_stride, OneDocumentPerRow when it encodes no boundaries (boundary_source none), FirstFitLayout
// when it promises efficiency: no_mergeable_rows, else SequentialLayout.
Layout DefaultLayout(const std::vector<Document>& documents, const Policy& policy, std::int64_t row_length);

// Row k goes to micro-batch m = k / rows_per_microbatch, which goes to rank m % dp_world_size as its
// micro_step m / dp_world_size (round-robin over ranks, as a distributed sampler deals batches).
void AssignMicrobatches(Layout& layout, std::int64_t rows_per_microbatch, std::int64_t dp_world_size);

// Under pad_to longest (with padding right or left): every row of a micro-batch (micro_step, rank) gets as many
// slots as the widest content of that micro-batch, its padding on the declared side (under left the pieces move
// with the row's end). Nothing under any other pad_to. The reference layouts call it with every row in
// micro-batch 0; a layout spread over micro-batches needs it again, which the overload below does.
void FitToLongest(Layout& layout, const Policy& policy);

// AssignMicrobatches, then FitToLongest: the rows of each micro-batch padded to its longest under pad_to longest.
void AssignMicrobatches(Layout& layout, std::int64_t rows_per_microbatch, std::int64_t dp_world_size,
                        const Policy& policy);

}  // namespace packoracle
