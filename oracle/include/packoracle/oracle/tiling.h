// Document tiling (DESIGN §4 `coverage`): the one statement of how a document's pieces must cover its tokens,
// for CheckCase (one step, pieces in row order), the fast verifier (the same) and verify (a whole dump, pieces
// in offset order). Each caller gathers the pieces and words the findings; the rule lives here.
//
// A document of n tokens has N = InputTokens(policy, n) inputs (n, or n - 1 under shift: document: its last
// token is a label only and in no piece; callers reject a piece reaching past token N - 1 first). Its pieces
// p_1..p_k (offset o_i, length l_i) cover the inputs [0, N), walked in the order given, with
// `next` the first token no earlier piece reached (next_0 = 0, next_i = max(next_{i-1}, o_i + l_i)):
//   o_i > next   gap       tokens [next, o_i) are in no piece (dropped)
//   o_i < next   overlap   tokens [o_i, min(next, o_i + l_i)) are in an earlier piece too (repeated)
//   next_k < N   missing tail, tokens [next_k, N)
// with the policy's exemptions, each a token that the policy says is never an input:
//   stream_stride L+1         one token before a piece, or the last token: a window's row-end target
//                             (o_i = next + 1 is no gap; next_k = n - 1 is no missing tail)
//   overflow truncate         the tail past the first T tokens (next_k ≥ T, T = TruncationLength: L, or
//                             ⌊L/k⌋·k under truncate_to: pad_multiple)
//   stream windows, padding   the tail: only full windows are cut, the stream's remainder is dropped
//     none                    (any document's tail: which document the cut falls in is the caller's stream)
//   row_end_target            the stream's last token, a row-end target only (next_k = n - 1, and the
//     next_in_stream          document ends the stream)
//   the input may stop early  the tail (verify --partial: a dump cut mid-run)
// and one rule before them all: under overflow drop a document of N > L inputs (DroppedDocument) belongs in no
// row: it has no gap, overlap nor tail; each of its pieces is a finding (placed though dropped: tokens
// [o_i, o_i + l_i)), and with none it is exempt (kDropped).
// Walked in offset order (pieces sorted by o_i), every token t of the document covered c(t) times has
// max(0, c(t) − 1) overlaps and, when c(t) = 0, lies in exactly one gap or the missing tail unless exempt:
// tiling_test.cc pins this against that brute-force count. In the order a step's rows give, a piece that
// starts before its predecessor also reads as a gap then an overlap: CheckCase requires that order (DESIGN
// §4: "in order") and reports the first finding only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "packoracle/oracle/policy.h"

namespace packoracle {

struct TilingPiece {
  std::int64_t offset = 0;  // the document token the piece starts at
  std::int64_t length = 0;  // tokens, at least 1 (a caller rejects empty and out-of-range pieces first)
  std::size_t index = 0;    // the caller's: which row, span or record the piece came from
};

// What only the caller knows about the document.
struct TilingContext {
  std::int64_t row_length = 0;  // L: a truncated document keeps its first TruncationLength(policy, L) tokens;
                                // a document of more than L inputs is dropped under overflow: drop
  bool ends_stream = false;     // the document is the stream's last non-empty one (next_in_stream)
  bool may_stop_early = false;  // the input may end before every document is packed (verify --partial)
};

// kPlacedDropped: a piece of a document that overflow: drop leaves out of every row.
enum class TilingFault { kGap, kOverlap, kMissingTail, kPlacedDropped };

struct TilingFinding {
  TilingFault fault = TilingFault::kGap;
  std::int64_t begin = 0, end = 0;  // the document's tokens [begin, end) dropped, repeated or missing
  std::int64_t expected = 0;        // `next` when it was found: where the piece was expected to start
  std::int64_t piece_offset = 0;    // where the piece starts (the document's size for the missing tail)
  std::optional<std::size_t> piece;  // the index of the piece it was found at (the missing tail: the last
                                     // piece walked); none when the document has no piece
};

// Why a missing tail is no finding (kNone: nothing is missing, or the tail is a finding).
// kDropped: overflow: drop, a document longer than the row in no row (nothing of it is expected).
enum class TailExemption {
  kNone, kWindowRowEndTarget, kTruncated, kStreamRemainder, kStreamEnd, kStoppedEarly, kDropped };

struct DocumentTiling {
  std::vector<TilingFinding> findings;  // in the order the walk met them, the missing tail last
  TailExemption tail_exemption = TailExemption::kNone;
};

// The rule above, for one document of `size` effective tokens (its inputs: InputTokens(policy, size)) and its
// pieces in the order to walk them. Findings name the inputs: a missing tail ends at the inputs' end.
DocumentTiling TileDocument(std::int64_t effective_size, const std::vector<TilingPiece>& pieces, const Policy& policy,
                            const TilingContext& context);

}  // namespace packoracle
