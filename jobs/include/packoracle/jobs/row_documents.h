// The documents of a batch read from its rows alone, as pieces: what the guard checks a batch against when it
// has no documents (packoracle.guard: wrap_dataloader, check_step without documents=), and what ModelConsumer's
// feeds read boundaries by. The one owner of this reading; Python binds it (_core.documents_from_segments).
//
// One piece per segment of each row, the segments being what the row's encodings say (the caller's
// `RowSegments`: the declared boundary encoding as a backend reads it, else the first encoding the row
// carries). Each piece's tokens are the row's slots, delimiters as placed (audit them with delimiters
// included). Where the policy lets documents cross rows (overflow: split, stream windows):
//   - a row's first piece may continue a document: its doc_offset is what its positions count from the
//     document's start (doc_reset positions that go on), else 1 (a BOS-opened row starting without its BOS, a
//     row without positions), and stand-in tokens take the places of the tokens before it;
//   - its last piece may go on: the next token is the last pre-shifted label where that slot carries a target,
//     else a stand-in (unless an EOD closes it); where that next token opens a document (a BOS, after an EOD,
//     or where documents never cross rows) it is a one-token document of its own, `row<r>.next`.
// Padding: by the policy's side, the trailing run of pad ids whose labels are ignored (PadReading says what
// else may be padding), or where an encoding marks it (a doc id below 0, an attention_mask of 0). A token is
// supervised where the slot that targets it carries a target (its own slot under aligned labels, the one
// before it when pre-shifted; a label not ignored and a loss_mask not 0).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "packoracle/oracle/document.h"
#include "packoracle/oracle/policy.h"
#include "packoracle/oracle/segments.h"
#include "packoracle/properties/candidate.h"

namespace packoracle::jobs {

// Where a row's trailing pad ids are padding, where the rows alone cannot tell.
struct PadReading {
  // A pad slot may also be labelled with the pad id and carry no target (Megatron labels its pads so).
  bool pad_labelled_pad = false;
  // How many of the trailing segments made only of pad slots are padding (nullopt: all; torchtune's seq_lens
  // give padding a length of its own, and the segments before it may be documents of the pad id).
  std::optional<std::int64_t> pad_segments;
};

// The readings the guard tries, the common one first (a batch holds if one of them holds).
inline constexpr std::array<PadReading, 4> kPadReadings = {
    PadReading{}, PadReading{true, std::nullopt}, PadReading{false, 1}, PadReading{false, 0}};

// A row's segment starts and whether they were read from an encoding of the row (false: the row as one segment).
struct RowSegments {
  SegmentStarts starts;
  bool read = false;
};

// One row as read: its slots' fields (rows × slots arrays of the batch, row r). `loss_mask`, `positions`,
// `doc_ids` and `attention_mask` are empty where the batch has none (or none of the row's shape).
struct RowFields {
  std::span<const Token> input_ids, labels;
  std::span<const double> loss_mask;
  std::span<const std::int64_t> positions, doc_ids, attention_mask;
};

struct RowsRead {
  std::vector<Document> documents;            // as placed: check them with their delimiters included
  std::vector<std::vector<DocSpan>> spans;    // per row
};

// Every row's pieces under `reading`; `segments` one per row.
RowsRead DocumentsFromSegments(std::span<const RowFields> rows, std::span<const RowSegments> segments,
                               const Policy& policy, const PadReading& reading);

// A token id for the tokens the rows do not show: none of the ids the policy gives a meaning to.
Token StandIn(const Policy& policy);

}  // namespace packoracle::jobs
