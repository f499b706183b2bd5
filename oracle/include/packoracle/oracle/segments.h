// Segments re-derived from each boundary encoding, exactly as the backends that read them do.
//
// A segmentation of a row is the sorted list of slots where a segment starts (0 first, for a non-empty
// row). The kit derives one from every encoding a producer emits and checks that all agree with the truth
// (the oracle's pieces and padding runs): DESIGN §4 `segments`. Each function names the backend rule.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "packoracle/oracle/batch.h"
#include "packoracle/oracle/document.h"
#include "packoracle/oracle/policy.h"

namespace packoracle {

using SegmentStarts = std::vector<std::int64_t>;

// The segment ordinal of each of a row's n slots under a segmentation (0, 1, 2, ... left to right; slots
// before the first start count as segment 0): what a backend compares to decide A_ij = 1[d_j = d_i].
std::vector<std::int64_t> SegmentIds(const SegmentStarts& starts, std::int64_t n);

// The truth: a segment starts at every piece and at every run of padding.
SegmentStarts TrueSegmentStarts(const OracleRow& row);

// Whether the policy's segment_encodings governs this encoding: cu_seqlens, seq_lens and doc_ids, the
// encodings a backend isolates sequences by (position resets, position steps, EOD and BOS always mark
// documents).
bool NamedBySegmentEncodings(std::string_view encoding);

// The segment starts an encoding must give: the truth (TrueSegmentStarts), except under segment_encodings:
// rows for the encodings it governs, which name the row: one segment per run of its tokens, as the oracle's
// own cu_seqlens of the row cut it (Materialize). The check and `packoracle draw` both ask this.
SegmentStarts ExpectedSegmentStarts(const OracleRow& row, const Policy& policy, std::string_view encoding);

// flash-attention varlen: cu_seqlens [0, c1, ..., L]; repeated values are zero-length segments and mean
// nothing. Throws InputError unless it starts at 0, never decreases and ends at the row length.
SegmentStarts FromCuSeqlens(const std::vector<std::int64_t>& cu_seqlens, std::int64_t row_length);

// torchtune: seq_lens summing to the row length (zero lengths are skipped). Throws InputError otherwise.
SegmentStarts FromSeqLens(const std::vector<std::int64_t>& seq_lens, std::int64_t row_length);

// HF flash path (prepare_fa_kwargs_from_position_ids): a segment starts where position == base.
SegmentStarts FromPositionReset(const std::vector<std::int64_t>& positions, std::int64_t base);

// HF SDPA / flex (find_packed_sequence_indices): a segment starts where position[i] - position[i-1] != 1.
SegmentStarts FromPositionStep(const std::vector<std::int64_t>& positions);

// FlexAttention document_id / HF seq_idx: a segment starts where the id changes.
SegmentStarts FromDocIds(const std::vector<std::int64_t>& doc_ids);

// Consumers read doc_ids by equality (FlexAttention's document mask: q and k attend when their ids are
// equal), so an id must name one segment of the row (DESIGN §5). The first id ≥ 0 that comes back after a
// different id, as {slot of its first segment, slot where it comes back}; nullopt when every id names one
// segment (-1, padding, may repeat: padding is never a target).
std::optional<std::pair<std::int64_t, std::int64_t>> ReusedDocId(const std::vector<std::int64_t>& doc_ids);
// The same over n ids where a caller views them (the fast verifier's rows).
std::optional<std::pair<std::int64_t, std::int64_t>> ReusedDocId(const std::int64_t* doc_ids, std::size_t n);

// Megatron / torchtitan: the token after an EOD starts a segment (the EOD closes its document). So does the
// row's first token at `first_token`, where a left padding run ends (padding: left; 0 otherwise): no delimiter
// marks it, as none marks slot 0.
SegmentStarts FromEodCloses(const std::vector<Token>& input_ids, Token eod_id, std::size_t first_token = 0);

// llm.c: a BOS/EOT token opens a segment (and the row's first token at `first_token`, as above).
SegmentStarts FromBosOpens(const std::vector<Token>& input_ids, Token bos_id, std::size_t first_token = 0);

}  // namespace packoracle
