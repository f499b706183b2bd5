// Encodings that change nothing (encoding_notes.h): the sentences both checkers put in a report's notes.
#include "packoracle/properties/encoding_notes.h"

namespace packoracle {

const char* RequiredBoundaryField(BoundarySource source) {
  switch (source) {
    case BoundarySource::kCuSeqlens: return "cu_seqlens";
    case BoundarySource::kSeqLens: return "seq_lens";
    case BoundarySource::kDocIds: return "doc_ids";
    case BoundarySource::kPositionReset:
    case BoundarySource::kPositionStep: return "position_ids";
    default: return "";
  }
}

bool HasRequiredBoundaryField(const CandidateRow& row, BoundarySource source) {
  return HasRequiredBoundaryField(RowView::Of(row), source);
}

bool HasRequiredBoundaryField(const RowView& row, BoundarySource source) {
  switch (source) {
    case BoundarySource::kCuSeqlens: return row.cu_seqlens.has_value();
    case BoundarySource::kSeqLens: return row.seq_lens.has_value();
    case BoundarySource::kDocIds: return row.doc_ids.has_value();
    case BoundarySource::kPositionReset:
    case BoundarySource::kPositionStep: return row.position_ids.has_value();
    default: return true;
  }
}

std::string MissingBoundaryEncodingNote(const std::string& field) {
  return "rows without " + field + " (the policy's boundary encoding) hold a single document each: read as one "
         "causal sequence they attend as declared, so nothing crosses there (a row of several documents "
         "without it is an attention violation)";
}

std::string VisiblePaddingNote() {
  return "the 2-D attention_mask marks trailing padding visible (1): no real token comes after it, so no "
         "context set changes";
}

}  // namespace packoracle
