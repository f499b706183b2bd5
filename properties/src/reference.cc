// The reference packer: the oracle's rows encoded as a correct producer emits them.
#include <map>

#include "packoracle/oracle.h"
#include "packoracle/oracle/error.h"
#include "packoracle/properties/invariants.h"
#include "packoracle/properties/producer_totals.h"

namespace packoracle {
namespace {

// Σ over a micro-batch's rows of what the policy counts: slots (all_positions), labels != ignore_index
// (unshifted_labels) or weights.
double CountOf(const OracleRow& row, const Policy& policy) {
  if (policy.denominator == Denominator::kAllPositions) return static_cast<double>(row.length());
  double n = 0;
  if (policy.count_basis == CountBasis::kUnshiftedLabels) {
    for (Token label : row.labels) n += label != policy.ignore_index ? 1 : 0;
    return n;
  }
  for (const auto& p : row.predictions) n += p.weight;
  return n;
}

// A micro-batch's share of the sequence-mean objective: Σ over its weighted predictions p of w·ℓ / (N_d · D),
// with N_d the weighted predictions of p's document over the step and D the documents that have any.
double SequenceShare(const OracleBatch& batch, const std::vector<const OracleRow*>& rows, const TargetLosses& losses) {
  std::map<std::int64_t, double> per_doc;
  for (const auto& row : batch.rows)
    for (std::size_t i = 0; i < row.predictions.size(); ++i)
      if (row.predictions[i].weight > 0) per_doc[row.slots[i].doc] += row.predictions[i].weight;
  double share = 0;
  for (const OracleRow* row : rows) {
    for (std::size_t i = 0; i < row->predictions.size(); ++i) {
      const Prediction& p = row->predictions[i];
      if (p.weight == 0) continue;
      const double l = losses[static_cast<std::size_t>(p.target_doc)][static_cast<std::size_t>(p.target_offset)];
      share += p.weight * l / (per_doc[row->slots[i].doc] * static_cast<double>(per_doc.size()));
    }
  }
  return share;
}

CandidateRow EncodeRow(const OracleBatch& batch, const OracleRow& row) {
  const Policy& policy = batch.policy;
  CandidateRow out;
  out.input_ids = row.input_ids;
  out.labels = row.labels;
  if (policy.loss_mask) out.loss_mask = row.loss_mask;
  std::vector<std::int64_t> positions;
  for (const auto& p : row.position_ids) positions.push_back(p.value_or(0));  // "any": 0 will do
  out.position_ids = positions;
  if (policy.attention == Attention::kDocCausal || policy.segment_encodings == SegmentEncodings::kRows) {
    // The boundary encodings a backend isolates documents by; a row-causal producer emits none of them (its
    // attention crosses documents), unless they name rows (segment_encodings: rows, one sequence per row).
    out.cu_seqlens = row.cu_seqlens;
    out.seq_lens = row.seq_lens;
    out.doc_ids = row.doc_ids;
  }
  if (policy.boundary_source == BoundarySource::kNone && policy.padding != Padding::kNone) {
    // HF padded batches: a 2-D mask of the real tokens (the only boundary a backend sees is padding).
    std::vector<std::int64_t> mask;
    for (const auto& s : row.slots) mask.push_back(s.is_pad() ? 0 : 1);
    out.attention_mask = mask;
  }
  // doc_spans: the truth, from the slots (one span per piece).
  for (std::size_t i = 0; i < row.slots.size(); ++i) {
    const Slot& s = row.slots[i];
    if (s.is_pad()) continue;
    if (i == 0 || row.slots[i - 1].is_pad() || row.slots[i - 1].piece != s.piece) {
      out.doc_spans.push_back({batch.documents[static_cast<std::size_t>(s.doc)].uid, static_cast<std::int64_t>(i), 0, s.offset});
    }
    out.doc_spans.back().length += 1;
  }
  return out;
}

}  // namespace

TargetLosses LossesOf(const PackRequest& request, const std::vector<EffectiveDocument>& docs) {
  TargetLosses losses;
  for (const auto& doc : docs) {
    auto it = request.target_losses.find(doc.uid);
    losses.push_back(it == request.target_losses.end() ? std::vector<double>() : it->second);
  }
  return losses;
}

std::vector<CandidateMicrobatch> ReferenceMicrobatches(const OracleBatch& batch, const PackRequest& request) {
  const Policy& policy = batch.policy;
  const TargetLosses losses = LossesOf(request, batch.documents);
  // Group rows by (rank, micro_step), keeping the order in which micro-batches first appear.
  std::vector<std::pair<std::int64_t, std::int64_t>> order;
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<const OracleRow*>> groups;
  for (const auto& row : batch.rows) {
    const auto key = std::make_pair(row.rank, row.micro_step);
    if (!groups.count(key)) order.push_back(key);
    groups[key].push_back(&row);
  }
  // Counts per scope, for the producer totals.
  double global = 0;
  std::map<std::int64_t, double> per_rank;
  for (const auto& row : batch.rows) {
    global += CountOf(row, policy);
    per_rank[row.rank] += CountOf(row, policy);
  }
  std::vector<CandidateMicrobatch> out;
  for (const auto& key : order) {
    CandidateMicrobatch mb;
    mb.rank = key.first;
    mb.micro_step = key.second;
    double count = 0, loss_sum = 0;
    for (const OracleRow* row : groups[key]) {
      mb.rows.push_back(EncodeRow(batch, *row));
      count += CountOf(*row, policy);
      for (const auto& p : row->predictions) {
        if (p.weight > 0) {
          // A request whose target_losses are short of a document (ASan found a test reading past them).
          const auto& doc_losses = losses[static_cast<std::size_t>(p.target_doc)];
          if (p.target_offset < 0 || static_cast<std::size_t>(p.target_offset) >= doc_losses.size()) {
            const auto& doc = batch.documents[static_cast<std::size_t>(p.target_doc)];
            throw InputError("target_losses of document '" + doc.uid + "' has " + std::to_string(doc_losses.size()) +
                             " entries, but its token " + std::to_string(p.target_offset) + " is a target (the document has " +
                             std::to_string(doc.size()) + " tokens with the policy's delimiters)");
          }
          loss_sum += p.weight * doc_losses[static_cast<std::size_t>(p.target_offset)];
        }
      }
    }
    ProducerTotals totals;
    totals.loss_sum = loss_sum;
    // The scope the policy implies, and its count (under sequence_mean, not a single number: the micro-batch's).
    const DenominatorScope scope = ImpliedScope(policy.denominator);
    const double denominator = CountOfScope(scope, count, per_rank[key.first], global);
    totals.denominator_scope = ToString(scope);
    totals.denominator = denominator;
    // Zero valid targets: reported as a zero denominator and a zero loss, never divided.
    totals.loss = denominator > 0 ? loss_sum / denominator : 0.0;
    if (policy.denominator == Denominator::kSequenceMean) totals.loss = SequenceShare(batch, groups[key], losses);
    mb.producer = totals;
    out.push_back(std::move(mb));
  }
  return out;
}

namespace {

struct ReferencePacker {
  PackResult Pack(const PackRequest& request) {
    try {
      return PackWithLayout(request, DefaultLayout(request.documents, request.policy, request.row_length));
    } catch (const InputError& e) {
      return PackResult::Refuse(e.what());  // the policy refuses these documents (overflow: error, ...)
    }
  }
};

}  // namespace

PackResult PackWithLayout(const PackRequest& request, Layout layout) {
  try {
    AssignMicrobatches(layout, request.micro_batch_rows, request.dp_world_size, request.policy);
    const OracleBatch batch = Materialize(request.documents, layout, request.policy, request.delimiters);
    PackResult result;
    result.microbatches = ReferenceMicrobatches(batch, request);
    return result;
  } catch (const InputError& e) {
    return PackResult::Refuse(e.what());
  }
}

Candidate ReferenceCandidate() { return MakeCandidate("reference-packer", ReferencePacker{}); }

Layout LayoutFromSpans(const std::vector<CandidateMicrobatch>& microbatches, const std::vector<EffectiveDocument>& docs,
                       std::int64_t row_length) {
  std::map<std::string, std::int64_t> index;
  for (std::size_t d = 0; d < docs.size(); ++d) index[docs[d].uid] = static_cast<std::int64_t>(d);
  Layout layout{row_length, {}};
  for (std::size_t m = 0; m < microbatches.size(); ++m) {
    const auto& mb = microbatches[m];
    for (std::size_t r = 0; r < mb.rows.size(); ++r) {
      RowLayout row;
      row.length = static_cast<std::int64_t>(mb.rows[r].input_ids.size());
      row.micro_step = mb.micro_step;
      row.rank = mb.rank;
      for (std::size_t s = 0; s < mb.rows[r].doc_spans.size(); ++s) {
        const DocSpan& span = mb.rows[r].doc_spans[s];
        auto it = index.find(span.doc_uid);
        if (it == index.end()) {
          throw InputError("micro-batch " + std::to_string(m) + ", row " + std::to_string(r) + ", doc_spans[" +
                           std::to_string(s) + "]: unknown document '" + span.doc_uid + "'");
        }
        row.pieces.push_back({it->second, span.doc_offset, span.start, span.length});
      }
      layout.rows.push_back(row);
    }
  }
  return layout;
}

}  // namespace packoracle
