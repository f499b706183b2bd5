// CpShards: a row's slots dealt to the ranks of its context-parallel group (context_parallel.h).
#include "packoracle/properties/context_parallel.h"

#include <algorithm>

namespace packoracle {
namespace {

// Appends [start, end) to a rank's chunks, merged with the last one when they touch.
void Hold(std::vector<CpChunk>& chunks, std::int64_t start, std::int64_t end) {
  if (start >= end) return;
  if (!chunks.empty() && chunks.back().end == start) {
    chunks.back().end = end;
    return;
  }
  chunks.push_back({start, end});
}

// The row's documents as runs of slots: each doc_span, and each run of slots no span covers (padding).
std::vector<CpChunk> Segments(const CandidateRow& row) {
  const auto n = static_cast<std::int64_t>(row.input_ids.size());
  std::vector<DocSpan> spans = row.doc_spans;
  std::sort(spans.begin(), spans.end(), [](const DocSpan& a, const DocSpan& b) { return a.start < b.start; });
  std::vector<CpChunk> out;
  std::int64_t at = 0;
  for (const auto& span : spans) {
    const std::int64_t start = std::clamp<std::int64_t>(span.start, at, n);
    const std::int64_t end = std::clamp<std::int64_t>(span.start + span.length, start, n);
    if (start > at) out.push_back({at, start});  // padding (or slots no span claims) before the span
    if (end > start) out.push_back({start, end});
    at = std::max(at, end);
  }
  if (at < n) out.push_back({at, n});
  return out;
}

}  // namespace

std::vector<std::vector<CpChunk>> CpShards(const CandidateRow& row, std::int64_t cp, CpScheme scheme) {
  cp = std::max<std::int64_t>(1, cp);
  std::vector<std::vector<CpChunk>> shards(static_cast<std::size_t>(cp));
  const auto n = static_cast<std::int64_t>(row.input_ids.size());
  if (scheme == CpScheme::kContiguous) {
    const std::int64_t c = (n + cp - 1) / cp;  // ⌈n / cp⌉
    for (std::int64_t k = 0; k < cp; ++k) Hold(shards[static_cast<std::size_t>(k)], std::min(n, k * c), std::min(n, (k + 1) * c));
    return shards;
  }
  // load_balanced: chunk j of a document of ℓ slots is [⌊jℓ/2cp⌋, ⌊(j+1)ℓ/2cp⌋); chunks j and 2cp−1−j go to
  // rank min(j, 2cp−1−j). Walking the chunks in slot order keeps each rank's list in slot order.
  const std::int64_t parts = 2 * cp;
  for (const CpChunk& doc : Segments(row)) {
    const std::int64_t length = doc.end - doc.start;
    for (std::int64_t j = 0; j < parts; ++j) {
      const std::int64_t rank = std::min(j, parts - 1 - j);
      Hold(shards[static_cast<std::size_t>(rank)], doc.start + j * length / parts, doc.start + (j + 1) * length / parts);
    }
  }
  return shards;
}

}  // namespace packoracle
