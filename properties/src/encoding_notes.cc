// Encodings that change nothing (encoding_notes.h): the sentences both checkers put in a report's notes.
#include "packoracle/properties/encoding_notes.h"

namespace packoracle {

std::string RequiredBoundaryField(BoundarySource source) {
  switch (source) {
    case BoundarySource::kCuSeqlens: return "cu_seqlens";
    case BoundarySource::kSeqLens: return "seq_lens";
    case BoundarySource::kDocIds: return "doc_ids";
    case BoundarySource::kPositionReset:
    case BoundarySource::kPositionStep: return "position_ids";
    default: return "";
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
