// BackendAttention (backend_attention.h): segments from the declared encoding, then the mask rule.
#include "packoracle/properties/backend_attention.h"

#include <algorithm>
#include <string>

#include "packoracle/oracle/batch.h"
#include "packoracle/oracle/error.h"
#include "packoracle/oracle/segments.h"
#include "packoracle/properties/encoding_notes.h"

namespace packoracle {
namespace {

// Padding as the backend is told: the 2-D attention_mask when present (0 = padding), else the slots no
// doc_span covers (the key-padding information every backend is given).
std::vector<bool> PaddingOf(const CandidateRow& row) {
  const std::size_t n = row.input_ids.size();
  std::vector<bool> pad(n, true);
  if (row.attention_mask) {
    if (row.attention_mask->size() != n) {
      throw InputError("attention_mask has " + std::to_string(row.attention_mask->size()) + " entries for " +
                       std::to_string(n) + " slots");
    }
    for (std::size_t i = 0; i < n; ++i) pad[i] = (*row.attention_mask)[i] == 0;
    return pad;
  }
  for (const DocSpan& s : row.doc_spans) {
    for (std::int64_t k = 0; k < s.length; ++k) {
      const std::int64_t i = s.start + k;
      if (i >= 0 && static_cast<std::size_t>(i) < n) pad[static_cast<std::size_t>(i)] = false;
    }
  }
  return pad;
}

// Where the row's leading padding ends under padding: left (0 otherwise): an EOD/BOS reading starts a segment
// there, as the row's first token (FromEodCloses' first_token; check.cc reads the rows' truth so).
std::size_t FirstToken(const std::vector<bool>& pad, const Policy& policy) {
  std::size_t first = 0;
  while (policy.padding == Padding::kLeft && first < pad.size() && pad[first]) ++first;
  return first;
}

SegmentStarts SegmentsOf(const CandidateRow& row, const Policy& policy, const std::vector<bool>& pad) {
  const auto n = static_cast<std::int64_t>(row.input_ids.size());
  auto need = [&](bool present, const char* what) {
    if (!present) {
      throw InputError(std::string("the row has no ") + what + ", its declared boundary source (" +
                       Name(policy.boundary_source) + "): a backend would attend across documents");
    }
  };
  switch (policy.boundary_source) {
    case BoundarySource::kCuSeqlens:
      need(row.cu_seqlens.has_value(), "cu_seqlens");
      return FromCuSeqlens(*row.cu_seqlens, n);
    case BoundarySource::kSeqLens:
      need(row.seq_lens.has_value(), "seq_lens");
      return FromSeqLens(*row.seq_lens, n);
    case BoundarySource::kPositionReset:
      need(row.position_ids.has_value(), "position_ids");
      return FromPositionReset(*row.position_ids, policy.position_base);
    case BoundarySource::kPositionStep:
      need(row.position_ids.has_value(), "position_ids");
      return FromPositionStep(*row.position_ids);
    case BoundarySource::kDocIds:
      need(row.doc_ids.has_value(), "doc_ids");
      return FromDocIds(*row.doc_ids);
    case BoundarySource::kEodCloses:
      need(policy.eos_id.has_value(), "eos_id in its policy");
      return FromEodCloses(row.input_ids, *policy.eos_id, FirstToken(pad, policy));
    case BoundarySource::kBosOpens:
      need(policy.bos_id.has_value(), "bos_id in its policy");
      return FromBosOpens(row.input_ids, *policy.bos_id, FirstToken(pad, policy));
    case BoundarySource::kSpans:
    case BoundarySource::kNone: {
      // The spans (and the padding runs between them) are the segmentation.
      std::vector<bool> span_start(pad.size(), false);
      for (const DocSpan& s : row.doc_spans)
        if (s.start >= 0 && static_cast<std::size_t>(s.start) < pad.size()) span_start[static_cast<std::size_t>(s.start)] = true;
      SegmentStarts starts;
      for (std::size_t i = 0; i < pad.size(); ++i)
        if (i == 0 || span_start[i] || pad[i] != pad[i - 1]) starts.push_back(static_cast<std::int64_t>(i));
      return starts;
    }
  }
  return {};
}

}  // namespace

SegmentStarts DeclaredSegments(const CandidateRow& row, const Policy& policy) {
  return SegmentsOf(row, policy, PaddingOf(row));
}

bool ReadsDeclaredEncoding(const CandidateRow& row, const Policy& policy) {
  const BoundarySource source = policy.boundary_source;
  return source != BoundarySource::kSpans && source != BoundarySource::kNone && HasRequiredBoundaryField(row, source);
}

SegmentStarts DeclaredSegmentsAsFed(const CandidateRow& row, const Policy& policy) {
  if (HasRequiredBoundaryField(row, policy.boundary_source)) return DeclaredSegments(row, policy);
  return row.input_ids.empty() ? SegmentStarts{} : SegmentStarts{0};  // read as one sequence
}

DenseMask DeclaredAttention(const CandidateRow& row, const Policy& policy) {
  const std::size_t n = row.input_ids.size();
  const std::vector<bool> pad = PaddingOf(row);
  OracleRow layout;
  layout.slots.assign(n, Slot{});
  for (std::size_t k = 0; k < row.doc_spans.size(); ++k) {
    const DocSpan& span = row.doc_spans[k];
    for (std::int64_t i = std::max<std::int64_t>(span.start, 0); i < span.start + span.length && i < static_cast<std::int64_t>(n); ++i) {
      if (pad[static_cast<std::size_t>(i)]) continue;
      Slot& slot = layout.slots[static_cast<std::size_t>(i)];
      slot.doc = static_cast<std::int64_t>(k);  // the piece's own id: only is_pad() and the piece are read
      slot.piece = static_cast<std::int64_t>(k);
    }
  }
  DenseMask mask(n, std::vector<std::uint8_t>(n, 0));
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j <= i; ++j)
      mask[i][j] = Attends(layout, policy, static_cast<std::int64_t>(i), static_cast<std::int64_t>(j)) ? 1 : 0;
  return mask;
}

std::optional<std::pair<SegmentStarts, BoundarySource>> EncodedSegments(const CandidateRow& row, const Policy& policy) {
  // The sources a row carries as fields, in the order they are read where the declared one is missing.
  static constexpr BoundarySource kCarried[] = {BoundarySource::kCuSeqlens, BoundarySource::kSeqLens,
                                                BoundarySource::kDocIds, BoundarySource::kPositionReset};
  std::vector<BoundarySource> sources;
  if (policy.boundary_source != BoundarySource::kSpans && policy.boundary_source != BoundarySource::kNone)
    sources.push_back(policy.boundary_source);
  for (const BoundarySource s : kCarried)
    if (s != policy.boundary_source) sources.push_back(s);
  Policy reading = policy;
  for (const BoundarySource s : sources) {
    if (!HasRequiredBoundaryField(row, s)) continue;
    reading.boundary_source = s;
    try {
      return std::make_pair(DeclaredSegments(row, reading), s);
    } catch (const InputError&) {
      continue;  // malformed: the checks name it
    }
  }
  return std::nullopt;
}

DenseMask BackendAttention(const CandidateRow& row, const Policy& policy) {
  const std::size_t n = row.input_ids.size();
  const auto pad = PaddingOf(row);
  // seg(i): the segment ordinal of slot i; under row_causal every slot is in segment 0 (no encoding is read).
  std::vector<std::int64_t> seg(n, 0);
  if (policy.attention == Attention::kDocCausal) {
    seg = SegmentIds(SegmentsOf(row, policy, pad), static_cast<std::int64_t>(n));
  }
  DenseMask mask(n, std::vector<std::uint8_t>(n, 0));
  std::size_t run_start = 0;  // first slot of the padding run holding i (when i is padding)
  for (std::size_t i = 0; i < n; ++i) {
    if (pad[i] && (i == 0 || !pad[i - 1])) run_start = i;
    for (std::size_t j = 0; j <= i; ++j) {  // causal: 1[j ≤ i]
      bool allowed;
      if (pad[i]) {  // a padding query sees its own padding run: every slot j..i is padding
        allowed = j >= run_start;
      } else if (pad[j]) {
        allowed = policy.pad_keys == PadKeys::kVisible;
      } else {
        allowed = policy.attention == Attention::kRowCausal || seg[i] == seg[j];
      }
      mask[i][j] = allowed ? 1 : 0;
    }
  }
  return mask;
}

DenseMask BackendAttentionAsFed(const CandidateRow& row, const Policy& policy) {
  if (HasRequiredBoundaryField(row, policy.boundary_source) || policy.attention == Attention::kRowCausal)
    return BackendAttention(row, policy);
  Policy one_sequence = policy;
  one_sequence.attention = Attention::kRowCausal;  // no segment encoding read: the whole row before i
  return BackendAttention(row, one_sequence);
}

Candidate ReferenceAttentionConsumerCandidate(std::vector<Policy> policies) {
  return MakeCandidate("reference-attention-consumer", ReferenceAttentionConsumer{}, std::move(policies));
}

}  // namespace packoracle
