// FastStepChecker's per-row pass (see step_check.cc).
#include <algorithm>

#include "packoracle/oracle/segments.h"
#include "packoracle/properties/encoding_notes.h"
#include "step_impl.h"

namespace packoracle::fastcheck {

// CheckSegments, CheckPositions, CheckTargets and CheckBoundaryEncodingPresent, row by row in one pass
// (their findings are per row and sorted by invariant afterwards, so interleaving them keeps CheckCase's
// order), plus the sums the totals need.
void FastStepChecker::Impl::Rows() {
  const bool attention_doc = policy.attention == Attention::kDocCausal;
  bool targets_stopped = false;  // CheckTargets returns at the first wrong prediction of the step
  // Encodings that changed nothing (encoding_notes.h), noted after the rows in CheckCase's order: its segments
  // pass (visible padding) runs over every row before its attention pass (missing encodings).
  bool visible_padding = false, missing_encoding = false;
  std::int64_t slots = 0, used = 0;
  sums.assign(rows.size(), {});
  mb_loss.assign(in.microbatches.size(), 0.0);
  per_doc.assign(policy.denominator == Denominator::kSequenceMean ? docs.docs.size() : 0, {0.0, 0.0});
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const CandidateRow& row = *rows[r];
    const auto R = static_cast<std::int64_t>(r);
    const std::size_t n = row.input_ids.size();
    FillSlots(r);
    const auto* sd = b.slot_doc.data();
    const auto* sp = b.slot_piece.data();
    // A real segment start (TrueSegmentStarts, padding excluded): a non-pad slot after padding or another piece.
    auto truth = [&](std::size_t i) { return i == 0 || sd[i - 1] < 0 || sp[i - 1] != sp[i]; };
    std::int64_t truth_count = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (sd[i] < 0) continue;
      ++used;
      truth_count += truth(i) ? 1 : 0;
    }
    slots += static_cast<std::int64_t>(n);

    // ---- segments ----
    // Does the derived predicate agree with the truth at every non-pad slot?
    auto agrees = [&](auto derived) {
      for (std::size_t i = 0; i < n; ++i)
        if (sd[i] >= 0 && derived(i) != truth(i)) return false;
      return true;
    };
    auto real_count = [&](auto derived) {
      std::int64_t c = 0;
      for (std::size_t i = 0; i < n; ++i) c += sd[i] >= 0 && derived(i) ? 1 : 0;
      return c;
    };
    auto mark_cu = [&](const std::vector<std::int64_t>& cu) {
      b.derived.assign(n, 0);
      for (std::size_t k = 0; k + 1 < cu.size(); ++k)
        if (cu[k + 1] > cu[k]) b.derived[static_cast<std::size_t>(cu[k])] = 1;
    };
    auto mark_seq = [&](const std::vector<std::int64_t>& lens) {
      b.derived.assign(n, 0);
      std::int64_t at = 0;
      for (auto len : lens) {
        if (len > 0) b.derived[static_cast<std::size_t>(at)] = 1;
        at += len;
      }
    };
    auto marked = [&](std::size_t i) { return b.derived[i] != 0; };
    if (row.cu_seqlens) {
      mark_cu(*row.cu_seqlens);
      if (!agrees(marked)) Add(Invariant::kSegments, R);
    }
    if (row.seq_lens) {
      mark_seq(*row.seq_lens);
      if (!agrees(marked)) Add(Invariant::kSegments, R);
    }
    if (row.doc_ids) {
      const auto* ids = row.doc_ids->data();
      if (!agrees([&](std::size_t i) { return i == 0 || ids[i] != ids[i - 1]; })) Add(Invariant::kSegments, R);
      if (ReusedDocId(*row.doc_ids)) Add(Invariant::kSegments, R);  // one id, two segments (read by equality)
    }
    if (row.position_ids) {
      const auto* pos = row.position_ids->data();
      if (policy.boundary_source == BoundarySource::kPositionReset &&
          !agrees([&](std::size_t i) { return i == 0 || pos[i] == policy.position_base; }))
        Add(Invariant::kSegments, R);
      if (policy.boundary_source == BoundarySource::kPositionStep &&
          !agrees([&](std::size_t i) { return i == 0 || pos[i] - pos[i - 1] != 1; }))
        Add(Invariant::kSegments, R);
    }
    const auto* ids_in = row.input_ids.data();
    if (policy.boundary_source == BoundarySource::kEodCloses && policy.eos_id) {
      const Token eod = *policy.eos_id;
      if (!agrees([&](std::size_t i) { return i == 0 || ids_in[i - 1] == eod; })) Add(Invariant::kSegments, R);
    }
    if (policy.boundary_source == BoundarySource::kBosOpens && policy.bos_id) {
      const Token bos = *policy.bos_id;
      if (!agrees([&](std::size_t i) { return i == 0 || ids_in[i] == bos; })) Add(Invariant::kSegments, R);
    }
    if (row.attention_mask) {
      const auto& am = *row.attention_mask;
      bool zeros = false;
      for (std::size_t i = 0; i < n; ++i) zeros = zeros || am[i] == 0;
      std::size_t real_end = 0;  // padding from here on is a key no real query sees
      for (std::size_t i = 0; i < n; ++i)
        if (sd[i] >= 0) real_end = i + 1;
      for (std::size_t i = 0; i < n; ++i) {
        if (sd[i] < 0 && i >= real_end && am[i] == 1) {
          visible_padding = true;
          continue;
        }
        if (am[i] != (sd[i] < 0 ? 0 : 1)) {
          Add(Invariant::kSegments, R, static_cast<std::int64_t>(i));
          break;
        }
      }
      if (zeros && attention_doc && truth_count > 1 && !row.cu_seqlens) Add(Invariant::kSegments, R);
    }

    // ---- positions ----
    if (!row.position_ids) {
      if (policy.positions == Positions::kDocReset || policy.position_base != 0) {
        bool single = true;
        for (std::size_t i = 0; i < n && single; ++i)
          if (sd[i] >= 0 && (sp[i] != (sd[0] < 0 ? -1 : sp[0]) || sd[0] < 0 || b.slot_offset[0] != 0)) single = false;
        if (!(single && policy.position_base == 0 && policy.split_positions != SplitPositions::kModulo))
          Add(Invariant::kPositions, R);
      }
    } else {
      const auto* got = row.position_ids->data();
      const std::int64_t base = policy.position_base;
      std::int64_t prev = base - 1;  // PositionsOf's previous position; "none" only under pad_positions any
      bool prev_known = false;
      for (std::size_t i = 0; i < n; ++i) {
        std::int64_t want;
        if (sd[i] < 0) {
          if (policy.pad_positions == PadPositions::kAny) {
            prev_known = false;
            continue;
          }
          want = policy.pad_positions == PadPositions::kZero
                     ? 0
                     : std::min((i == 0 || !prev_known ? base - 1 : prev) + 1, base + in.row_length - 1);
        } else if (policy.positions == Positions::kRowContinuous) {
          want = base + static_cast<std::int64_t>(i);
        } else if (policy.split_positions == SplitPositions::kContinue) {
          want = base + b.slot_offset[i];
        } else if (policy.split_positions == SplitPositions::kModulo) {
          want = base + b.slot_offset[i] % in.row_length;
        } else {
          want = base + b.slot_offset[i] - b.piece_base[static_cast<std::size_t>(sp[i])];
        }
        prev = want;
        prev_known = true;
        if (got[i] != want) {
          Add(Invariant::kPositions, R, static_cast<std::int64_t>(i));
          break;
        }
      }
    }

    // ---- targets (and the sums) ----
    if (!targets_stopped && row.loss_mask) {
      for (std::size_t i = 0; i < n; ++i) {
        const double m = (*row.loss_mask)[i];
        if (m != 0.0 && m != 1.0) {
          Add(Invariant::kTargets, R, static_cast<std::int64_t>(i));
          targets_stopped = true;
          break;
        }
      }
    }
    const bool aligned = policy.label_alignment == LabelAlignment::kAligned;
    const Token ignore = policy.ignore_index;
    const auto* labels = row.labels.data();
    const double* lm = row.loss_mask ? row.loss_mask->data() : nullptr;
    RowSums& s = sums[r];
    s.length = static_cast<std::int64_t>(n);
    Pred prev_p;
    for (std::size_t i = 0; i < n; ++i) {
      const Pred p = PredictionAt(i, n);
      s.weight += p.weight;
      if (p.weight > 0) {
        s.loss += p.weight * Loss(p.doc, p.offset);
        mb_loss[row_microbatch[r]] += p.weight * Loss(p.doc, p.offset);
        if (!per_doc.empty()) {
          per_doc[static_cast<std::size_t>(sd[i])].first += p.weight * Loss(p.doc, p.offset);
          per_doc[static_cast<std::size_t>(sd[i])].second += p.weight;
        }
      }
      // LabelsOf: the oracle's label count, for count_basis unshifted_labels.
      if (!aligned) s.labels += (policy.loss_mask ? p.has_target : p.weight > 0) ? 1 : 0;
      else if (i > 0) s.labels += prev_p.weight > 0 ? 1 : 0;
      prev_p = p;
      if (targets_stopped) continue;
      double got_weight;
      Token got_target;
      if (aligned) {
        got_target = i + 1 < n ? labels[i + 1] : 0;
        got_weight = i + 1 < n && labels[i + 1] != ignore ? 1.0 : 0.0;
      } else {
        got_target = labels[i];
        got_weight = labels[i] != ignore ? 1.0 : 0.0;
        if (policy.loss_mask) got_weight *= lm[i];
      }
      if (got_weight != p.weight || (p.weight > 0 && got_target != p.target)) {
        Add(Invariant::kTargets, R, static_cast<std::int64_t>(i));
        targets_stopped = true;
      }
    }
    if (aligned && n > 0 && sd[0] >= 0) {
      const EffectiveDocument& first = Doc(sd[0]);
      const std::int64_t k = b.slot_offset[0];
      const bool reachable = k > 0 || policy.boundary_target == BoundaryTarget::kIncluded;
      if (first.supervised[static_cast<std::size_t>(k)] == 1 && reachable) s.labels += 1;
    }
    s.count = policy.count_basis == CountBasis::kTargets ? s.weight : s.labels;

    // ---- attention: the boundary encoding the policy relies on ----
    if (policy.attention == Attention::kRowCausal) {
      bool isolates = false;
      if (row.cu_seqlens) {
        mark_cu(*row.cu_seqlens);
        isolates = real_count(marked) > 1;
      }
      if (!isolates && row.seq_lens) {
        mark_seq(*row.seq_lens);
        isolates = real_count(marked) > 1;
      }
      if (!isolates && row.doc_ids) {
        const auto* ids = row.doc_ids->data();
        isolates = real_count([&](std::size_t i) { return i == 0 || ids[i] != ids[i - 1]; }) > 1;
      }
      if (isolates) Add(Invariant::kAttention, R);
    } else {
      // Read as one causal sequence: a violation only where that changes a context set (encoding_notes.h).
      if (!HasRequiredBoundaryField(row, policy.boundary_source)) {
        const auto piece_of = [&](std::int64_t i) { return sd[i] < 0 ? std::int64_t{-1} : std::int64_t{sp[i]}; };
        if (RowCausalChangesContexts(static_cast<std::int64_t>(n), piece_of, policy))
          Add(Invariant::kAttention, R);
        else
          missing_encoding = true;
      }
    }
  }
  if (visible_padding) AddNote(VisiblePaddingNote());
  if (missing_encoding) AddNote(MissingBoundaryEncodingNote(RequiredBoundaryField(policy.boundary_source)));
  v.utilization = slots > 0 ? static_cast<double>(used) / static_cast<double>(slots) : 1.0;
  for (const auto& s : sums) v.valid_targets += s.weight;
}

}  // namespace packoracle::fastcheck
