// Document tiling: the rule of tiling.h, element by element.
#include "packoracle/oracle/tiling.h"

#include <algorithm>

namespace packoracle {
namespace {

// Why the tail [next, size) may be missing, first reason first; kNone when it is a finding.
TailExemption ExemptTail(std::int64_t next, std::int64_t size, const Policy& policy, const TilingContext& context) {
  const bool stream = policy.stream_stride != StreamStride::kNone;
  // Stride L+1: the token after each window is its row-end target and never an input; it may be the
  // document's last token.
  if (policy.stream_stride == StreamStride::kLPlus1 && next == size - 1) return TailExemption::kWindowRowEndTarget;
  // Truncation keeps a document's first T tokens, T = TruncationLength (L, or ⌊L/k⌋·k under truncate_to:
  // pad_multiple); a shorter prefix drops tokens the row had room for.
  if (policy.overflow == Overflow::kTruncate && next >= TruncationLength(policy, context.row_length))
    return TailExemption::kTruncated;
  // Without padding a stream is cut into full windows only (llm.c): what follows the last one is dropped.
  if (stream && policy.padding == Padding::kNone) return TailExemption::kStreamRemainder;
  // Windows of stride L overlap by one (every token an input once) except the stream's very last token,
  // which is only the last window's row-end target.
  if (policy.row_end_target == RowEndTarget::kNextInStream && context.ends_stream && next == size - 1)
    return TailExemption::kStreamEnd;
  if (context.may_stop_early) return TailExemption::kStoppedEarly;
  return TailExemption::kNone;
}

}  // namespace

DocumentTiling TileDocument(std::int64_t effective_size, const std::vector<TilingPiece>& pieces, const Policy& policy,
                            const TilingContext& context) {
  // Under shift: document the last token is a label only: the pieces tile the inputs.
  const std::int64_t size = InputTokens(policy, effective_size);
  DocumentTiling out;
  if (DroppedDocument(policy, context.row_length, size)) {
    // overflow: drop: the document belongs in no row; every piece a row holds is a finding, its absence none.
    for (const TilingPiece& p : pieces)
      out.findings.push_back({TilingFault::kPlacedDropped, p.offset, p.offset + p.length, 0, p.offset, p.index});
    if (pieces.empty()) out.tail_exemption = TailExemption::kDropped;
    return out;
  }
  std::int64_t next = 0;  // the first token no piece walked so far reaches
  for (const TilingPiece& p : pieces) {
    // Stride L+1: the token before this piece was a window's row-end target, never an input.
    if (policy.stream_stride == StreamStride::kLPlus1 && p.offset == next + 1) next = p.offset;
    if (p.offset > next) out.findings.push_back({TilingFault::kGap, next, p.offset, next, p.offset, p.index});
    if (p.offset < next) {
      out.findings.push_back(
          {TilingFault::kOverlap, p.offset, std::min(next, p.offset + p.length), next, p.offset, p.index});
    }
    next = std::max(next, p.offset + p.length);
  }
  if (next >= size) return out;
  out.tail_exemption = ExemptTail(next, size, policy, context);
  if (out.tail_exemption == TailExemption::kNone) {
    std::optional<std::size_t> last;
    if (!pieces.empty()) last = pieces.back().index;
    out.findings.push_back({TilingFault::kMissingTail, next, size, next, size, last});
  }
  return out;
}

}  // namespace packoracle
