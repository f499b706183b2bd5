#include "packoracle/oracle/batch.h"

#include <algorithm>

namespace packoracle {
namespace {

bool IsSupervised(const EffectiveDocument& doc, std::int64_t k) {
  return doc.supervised[static_cast<std::size_t>(k)] == 1;
}

Prediction TargetIn(const std::vector<EffectiveDocument>& docs, TargetKind kind, std::int64_t d, std::int64_t k,
                    double weight) {
  Prediction p;
  p.kind = kind;
  p.target_doc = d;
  p.target_offset = k;
  p.target = docs[static_cast<std::size_t>(d)].tokens[static_cast<std::size_t>(k)];
  p.weight = weight;
  return p;
}

// Weight of a boundary target (input in one document, target = first token of the next): counted only when
// the policy includes boundary targets, and then only if that token is supervised.
double BoundaryWeight(const EffectiveDocument& next, const Policy& policy) {
  return policy.boundary_target == BoundaryTarget::kIncluded && IsSupervised(next, 0) ? 1.0 : 0.0;
}

// Segment boundaries of a row: every piece is a segment, and so is every maximal run of padding.
// Returns, per slot, the ordinal of its segment (pieces and padding runs numbered together, left to right).
// The segment of each slot as the encodings cut the row: a new segment where padding starts or ends and, under
// segment_encodings: documents, where a piece starts (under rows the pieces of a run of tokens are one
// sequence: the row).
std::vector<std::int64_t> SegmentOrdinals(const std::vector<Slot>& slots, const Policy& policy) {
  const bool rows = policy.segment_encodings == SegmentEncodings::kRows;
  std::vector<std::int64_t> out(slots.size());
  std::int64_t ordinal = -1;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const bool starts = i == 0 || slots[i].is_pad() != slots[i - 1].is_pad() ||
                        (!rows && slots[i].piece != slots[i - 1].piece);
    if (starts) ++ordinal;
    out[i] = ordinal;
  }
  return out;
}

}  // namespace

const char* Name(TargetKind kind) {
  switch (kind) {
    case TargetKind::kNone: return "none";
    case TargetKind::kWithinDocument: return "within_document";
    case TargetKind::kBoundary: return "boundary";
    case TargetKind::kRowEndInDocument: return "row_end_in_document";
    case TargetKind::kRowEndNextDocument: return "row_end_next_document";
    case TargetKind::kDocumentEnd: return "document_end";
  }
  return "?";
}

std::vector<Slot> SlotsOf(const RowLayout& row, const std::vector<EffectiveDocument>& documents) {
  std::vector<Slot> slots(static_cast<std::size_t>(row.length));
  for (std::size_t p = 0; p < row.pieces.size(); ++p) {
    const Piece& piece = row.pieces[p];
    const EffectiveDocument& doc = documents[static_cast<std::size_t>(piece.doc)];
    for (std::int64_t t = 0; t < piece.length; ++t) {
      Slot& slot = slots[static_cast<std::size_t>(piece.start + t)];
      slot.doc = piece.doc;
      slot.offset = piece.doc_offset + t;
      slot.piece = static_cast<std::int64_t>(p);
      slot.token = doc.tokens[static_cast<std::size_t>(slot.offset)];
    }
  }
  return slots;
}

Prediction PredictionOf(const std::vector<Slot>& slots, std::size_t i, const std::vector<EffectiveDocument>& docs,
                        const Policy& policy) {
  const Slot& here = slots[i];
  if (here.is_pad()) return {};  // padding is never an input of a trained prediction
  const std::int64_t d = here.doc;
  const std::int64_t k = here.offset;
  const EffectiveDocument& doc = docs[static_cast<std::size_t>(d)];
  // Whether the document's inputs go on after token k (under shift: document its last token is no input).
  const bool doc_goes_on = k + 1 < InputTokens(policy, doc.size());
  const bool per_document = policy.shift == Shift::kDocument;

  if (i + 1 < slots.size()) {
    const Slot& next = slots[i + 1];
    // Rule 1: the next slot continues the same document.
    if (!next.is_pad() && next.doc == d && next.offset == k + 1) {
      return TargetIn(docs, TargetKind::kWithinDocument, d, k + 1, IsSupervised(doc, k + 1) ? 1.0 : 0.0);
    }
  }
  // Rule 5 (shift: document): the document's last input predicts its last token, which no slot holds.
  if (per_document && !doc_goes_on) {
    return TargetIn(docs, TargetKind::kDocumentEnd, d, k + 1, IsSupervised(doc, k + 1) ? 1.0 : 0.0);
  }
  if (i + 1 < slots.size()) {
    const Slot& next = slots[i + 1];
    // Rule 2: the next slot starts another document: a boundary target (under shift: row only).
    if (!per_document && !next.is_pad() && next.offset == 0 && next.doc != d) {
      return TargetIn(docs, TargetKind::kBoundary, next.doc, 0,
                      BoundaryWeight(docs[static_cast<std::size_t>(next.doc)], policy));
    }
    // Rule 4: followed by padding or by an unrelated piece.
    return {};
  }

  // Rule 3: the row's last slot.
  switch (policy.row_end_target) {
    case RowEndTarget::kNone:
      return {};
    case RowEndTarget::kNextInDoc:
      if (doc_goes_on) {
        return TargetIn(docs, TargetKind::kRowEndInDocument, d, k + 1, IsSupervised(doc, k + 1) ? 1.0 : 0.0);
      }
      return {};
    case RowEndTarget::kNextInStream:
      if (doc_goes_on) {
        return TargetIn(docs, TargetKind::kRowEndInDocument, d, k + 1, IsSupervised(doc, k + 1) ? 1.0 : 0.0);
      }
      // The stream goes on with the next document that has tokens (empty documents add nothing to a stream).
      for (std::size_t e = static_cast<std::size_t>(d) + 1; e < docs.size(); ++e) {
        if (docs[e].size() > 0) {
          return TargetIn(docs, TargetKind::kRowEndNextDocument, static_cast<std::int64_t>(e), 0,
                          BoundaryWeight(docs[e], policy));
        }
      }
      return {};  // end of the stream
  }
  return {};
}

std::vector<Token> LabelsOf(const std::vector<Slot>& slots, const std::vector<Prediction>& predictions,
                            const std::vector<EffectiveDocument>& docs, const Policy& policy) {
  const std::size_t n = slots.size();
  std::vector<Token> labels(n, policy.ignore_index);
  if (policy.label_alignment == LabelAlignment::kPreShifted) {
    for (std::size_t i = 0; i < n; ++i) {
      const Prediction& p = predictions[i];
      // With a loss mask the label carries the target and the mask carries the weight (Megatron);
      // without one, an ignored label is the only way to give weight 0.
      const bool write = policy.loss_mask ? p.has_target() : p.weight > 0;
      if (write) labels[i] = p.target;
    }
    return labels;
  }
  // aligned: labels[i] is the label of the token at slot i, the target of prediction i-1.
  for (std::size_t i = 1; i < n; ++i) {
    const Prediction& p = predictions[i - 1];
    if (p.weight > 0) labels[i] = p.target;
  }
  if (n > 0 && !slots[0].is_pad()) {
    const Slot& first = slots[0];
    const EffectiveDocument& doc = docs[static_cast<std::size_t>(first.doc)];
    const bool reachable = first.offset > 0 || policy.boundary_target == BoundaryTarget::kIncluded;
    if (IsSupervised(doc, first.offset) && reachable) labels[0] = first.token;
  }
  return labels;
}

std::vector<std::optional<std::int64_t>> PositionsOf(const RowLayout& row, const std::vector<Slot>& slots,
                                                     const Policy& policy, std::int64_t row_length) {
  const std::int64_t base = policy.position_base;
  std::vector<std::optional<std::int64_t>> pos(slots.size());
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const Slot& s = slots[i];
    if (s.is_pad()) {
      switch (policy.pad_positions) {
        case PadPositions::kZero:
          pos[i] = 0;
          break;
        case PadPositions::kContinue: {
          // previous position + 1, clamped to base + L - 1 (torchtune clamps to max_seq_len - 1)
          const std::int64_t prev = i == 0 || !pos[i - 1] ? base - 1 : *pos[i - 1];
          pos[i] = std::min(prev + 1, base + row_length - 1);
          break;
        }
        case PadPositions::kAny:
          pos[i] = std::nullopt;
          break;
      }
      continue;
    }
    if (policy.positions == Positions::kRowContinuous) {
      pos[i] = base + static_cast<std::int64_t>(i);  // position = slot index + base
      continue;
    }
    // doc_reset: position = offset in the document + base, for a continued piece as split_positions says.
    switch (policy.split_positions) {
      case SplitPositions::kContinue:
        pos[i] = base + s.offset;
        break;
      case SplitPositions::kModulo:
        pos[i] = base + s.offset % row_length;
        break;
      case SplitPositions::kRestart:
        pos[i] = base + s.offset - row.pieces[static_cast<std::size_t>(s.piece)].doc_offset;
        break;
    }
  }
  return pos;
}

bool Attends(const OracleRow& row, const Policy& policy, std::int64_t i, std::int64_t j) {
  if (j > i || j < 0 || i >= row.length()) return false;  // causal: 1[j ≤ i]
  const Slot& query = row.slots[static_cast<std::size_t>(i)];
  const Slot& key = row.slots[static_cast<std::size_t>(j)];
  if (query.is_pad()) {
    // A padding query reaches no loss; by convention it sees its own padding run.
    for (std::int64_t t = j; t <= i; ++t)
      if (!row.slots[static_cast<std::size_t>(t)].is_pad()) return false;
    return true;
  }
  if (key.is_pad()) return policy.pad_keys == PadKeys::kVisible;
  if (policy.attention == Attention::kRowCausal) return true;
  return key.piece == query.piece;  // doc_causal: 1[d_j = d_i], documents told apart piece by piece
}

std::vector<std::int64_t> ContextSet(const OracleRow& row, const Policy& policy, std::int64_t i) {
  std::vector<std::int64_t> out;
  for (std::int64_t j = 0; j < row.length(); ++j)
    if (Attends(row, policy, i, j)) out.push_back(j);
  return out;
}

std::int64_t RequiredAttentionPairs(const OracleRow& row, const Policy& policy) {
  std::int64_t pairs = 0;
  for (std::int64_t i = 0; i < row.length(); ++i) {
    if (row.slots[static_cast<std::size_t>(i)].is_pad()) continue;  // reaches no loss: nothing needed
    for (std::int64_t j = 0; j <= i; ++j) pairs += Attends(row, policy, i, j) ? 1 : 0;  // |C(i)|, j ≤ i by causality
  }
  return pairs;
}

OracleBatch Materialize(const std::vector<Document>& documents, const Layout& layout, const Policy& policy,
                        Delimiters delimiters) {
  ValidatePolicy(policy);
  OracleBatch batch;
  batch.policy = policy;
  batch.row_length = layout.row_length;
  batch.documents = Effective(documents, policy, delimiters);
  ValidateLayout(batch.documents, layout, policy);

  for (const RowLayout& row_layout : layout.rows) {
    OracleRow row;
    row.micro_step = row_layout.micro_step;
    row.rank = row_layout.rank;
    row.slots = SlotsOf(row_layout, batch.documents);
    for (std::size_t i = 0; i < row.slots.size(); ++i) {
      row.input_ids.push_back(row.slots[i].is_pad() ? policy.pad_id : row.slots[i].token);
      row.predictions.push_back(PredictionOf(row.slots, i, batch.documents, policy));
    }
    row.labels = LabelsOf(row.slots, row.predictions, batch.documents, policy);
    if (policy.loss_mask) {
      for (const Prediction& p : row.predictions) row.loss_mask.push_back(p.weight);
    }
    row.position_ids = PositionsOf(row_layout, row.slots, policy, layout.row_length);

    // Segments: doc_ids number the pieces 0, 1, ... (padding -1); cu_seqlens / seq_lens cut the row at every
    // segment boundary, a padding run being a segment of its own. Under segment_encodings: rows the segments
    // are the row's runs of tokens (one, before the right padding): doc_ids 0, cu_seqlens [0, tokens, L].
    const auto ordinals = SegmentOrdinals(row.slots, policy);
    std::vector<std::int64_t> ordinal_of_piece(row_layout.pieces.size(), kPad);
    std::int64_t next_ordinal = 0;
    for (std::size_t i = 0; i < row.slots.size(); ++i) {
      const Slot& s = row.slots[i];
      if (s.is_pad()) {
        row.doc_ids.push_back(kPad);
        continue;
      }
      const bool same_run = i > 0 && ordinals[i] == ordinals[i - 1];
      if (policy.segment_encodings == SegmentEncodings::kRows) {
        row.doc_ids.push_back(same_run ? row.doc_ids.back() : next_ordinal++);
        continue;
      }
      auto& ordinal = ordinal_of_piece[static_cast<std::size_t>(s.piece)];
      if (ordinal == kPad) ordinal = next_ordinal++;
      row.doc_ids.push_back(ordinal);
    }
    row.cu_seqlens.push_back(0);
    for (std::size_t i = 1; i <= row.slots.size(); ++i) {
      if (i == row.slots.size() || ordinals[i] != ordinals[i - 1]) {
        row.seq_lens.push_back(static_cast<std::int64_t>(i) - row.cu_seqlens.back());
        row.cu_seqlens.push_back(static_cast<std::int64_t>(i));
      }
    }
    batch.rows.push_back(std::move(row));
  }
  return batch;
}

}  // namespace packoracle
