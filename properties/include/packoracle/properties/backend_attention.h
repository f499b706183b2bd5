// The kit's reference attention consumer: the dense mask a backend really uses for a row, derived from the
// row's *declared* boundary encoding exactly as the backend reading that encoding derives it, then combined
// with causality and the policy's pad_keys:
//
//   cu_seqlens      flash-attention varlen blocks (repeated values are empty segments)
//   seq_lens        torchtune's block mask / FlexAttention document ids from lengths
//   position_reset  HF flash path (prepare_fa_kwargs_from_position_ids): a segment starts where position == base
//   position_step   HF SDPA / flex (find_packed_sequence_indices): a segment starts where positions do not step by 1
//   doc_ids         FlexAttention document mask: same id run, same document (DESIGN §5 lets ids repeat between
//                   non-neighbouring segments, so runs, not raw ids, are compared)
//   eod_closes      Megatron reset_attention_mask: attention_mask[(i+1):, :(i+1)] = 0 after each EOD
//   bos_opens       a BOS/EOT token opens a segment (llm.c's delimiter read as a boundary)
//   spans / none    the doc_spans themselves (and each padding run)
// Padding keys come from the 2-D per-token `attention_mask` when the row has one (0 = padding), else from the
// slots no doc_span covers. For a query i that is not padding:
//   A_ij = 1[j ≤ i] · (pad(j) ? 1[pad_keys = visible] : (row_causal ? 1 : 1[seg(j) = seg(i)]))
// and a padding query sees its own padding run (it reaches no loss), as the oracle's Attends says.
//
// A missing declared encoding is an error, never a silent fallback to attending across documents (bugzoo MK-10).
// A correct packer's rows under any preset give exactly the oracle's attention rule (properties test).
#pragma once

#include <optional>
#include <utility>

#include <vector>

#include "packoracle/oracle/policy.h"
#include "packoracle/oracle/segments.h"
#include "packoracle/properties/candidate.h"

namespace packoracle {

// The segment starts (segments.h) of one row read from its declared encoding, as in the list above (spans /
// none: the doc_spans and each padding run). Under row_causal a backend reads no encoding, but the segments are
// what the encoding says all the same. Throws InputError when the declared encoding is missing or malformed
// (naming it). The one reading of a row's encoding under a policy: the reference consumer uses it, and so does
// the Python guard (packoracle._core.segments) for batches without documents.
SegmentStarts DeclaredSegments(const CandidateRow& row, const Policy& policy);

// The segments a backend runs the row with when it is fed the row as dumped: DeclaredSegments, or, when the row
// lacks the declared encoding's field (encoding_notes.h RequiredBoundaryField), the row as one sequence ({0}),
// as BackendAttentionAsFed reads it.
SegmentStarts DeclaredSegmentsAsFed(const CandidateRow& row, const Policy& policy);

// Whether DeclaredSegmentsAsFed reads the row's own encoding: the policy's boundary_source is one a row carries
// (not spans, not none) and the row has its field. Where it is false the segments are the row as one sequence
// (or the spans), not evidence of where documents start (the guard says which checks it could run).
bool ReadsDeclaredEncoding(const CandidateRow& row, const Policy& policy);

// Where the row's own encodings start segments, read without its documents (the spans derived for rows
// without doc_spans, and the guard): by the policy's declared boundary_source where the row carries it, else
// by the first of cu_seqlens, seq_lens, doc_ids and position resets (at the policy's position_base) that the
// row carries and that reads; with the source read. nullopt where none does (a malformed encoding is skipped:
// the checks report it).
std::optional<std::pair<SegmentStarts, BoundarySource>> EncodedSegments(const CandidateRow& row, const Policy& policy);

// The policy's attention rule (Attends, oracle/batch.h) over a row as its doc_spans lay it out, each span a
// piece and padding as a backend is told it (the 2-D attention_mask, else the slots no span covers): the answer
// for a row a consumer was not fed (packoracle.adapters.transformers_models.rule_masks), which the checks then
// find equal to the rule.
DenseMask DeclaredAttention(const CandidateRow& row, const Policy& policy);

// The mask of one row. Throws InputError when the declared encoding is missing or malformed (naming it).
DenseMask BackendAttention(const CandidateRow& row, const Policy& policy);

// The mask a backend really runs a row with when it is fed the row as dumped: BackendAttention, or, when the
// row lacks the declared encoding (encoding_notes.h RequiredBoundaryField), the row as one causal sequence (what
// flash-attention without cu_seqlens, or SDPA without a block mask, computes). packing_invariance feeds the
// decoder this, so a row of one document without the encoding runs as declared, and a row of several shows
// its contamination. (The reference consumer itself still refuses the missing encoding: MK-10.)
DenseMask BackendAttentionAsFed(const CandidateRow& row, const Policy& policy);

// The kit's reference attention consumer (both forms of the role; the micro-batch form is row by row, as a
// correct backend does not depend on the batch size). `policies`: the policies it claims (empty: all).
struct ReferenceAttentionConsumer {
  DenseMask Consume(const CandidateRow& row, const Policy& policy) { return BackendAttention(row, policy); }
};
Candidate ReferenceAttentionConsumerCandidate(std::vector<Policy> policies = {});

}  // namespace packoracle
