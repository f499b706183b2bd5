// FastStepChecker's per-row pass (see step_check.cc).
#include <algorithm>

#include "packoracle/oracle/segments.h"
#include "packoracle/properties/encoding_notes.h"
#include "step_impl.h"

namespace packoracle::fastcheck {

// CheckSegments, CheckPositions, CheckTargets and CheckBoundaryEncodingPresent on one row (their findings are
// per row and sorted by invariant afterwards, so interleaving them keeps CheckCase's order), plus the sums
// the totals need. The row passed shape and coverage.
void FastStepChecker::Impl::RowPass(const RowView& row, std::int64_t R, std::size_t m) {
  const std::size_t n = row.input_ids.size();
  FillSlots(row);
  const auto* sd = slot_doc.data();
  std::int64_t truth_count = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (sd[i] < 0) continue;
    ++sums[static_cast<std::size_t>(R)].used;
    truth_count += TrueStart(i) ? 1 : 0;
  }
  used += sums[static_cast<std::size_t>(R)].used;
  slots += static_cast<std::int64_t>(n);
  SegmentsRow(row, R, truth_count);
  PositionsRow(row, R);
  TargetsAndSums(row, R, m);
  AttentionRow(row, R);
}

// Checker::CheckSegments on one row.
void FastStepChecker::Impl::SegmentsRow(const RowView& row, std::int64_t R, std::int64_t truth_count) {
  const std::size_t n = row.input_ids.size();
  const auto* sd = slot_doc.data();
  auto add = [&](std::int64_t slot = -1) { row_findings.push_back({Invariant::kSegments, R, slot}); };
  // Does the derived predicate agree with the truth at every non-pad slot?
  auto agrees = [&](auto starts) {
    for (std::size_t i = 0; i < n; ++i)
      if (sd[i] >= 0 && starts(i) != TrueStart(i)) return false;
    return true;
  };
  auto marked = [&](std::size_t i) { return derived[i] != 0; };
  // cu_seqlens, seq_lens and doc_ids against the documents' starts, or under segment_encodings: rows against
  // the starts of the row's runs of tokens (Materialize's row-named encoding).
  const bool rows = policy().segment_encodings == SegmentEncodings::kRows;
  auto agrees_named = [&](auto starts) {
    if (!rows) return agrees(starts);
    for (std::size_t i = 0; i < n; ++i)
      if (sd[i] >= 0 && starts(i) != (i == 0 || sd[i - 1] < 0)) return false;
    return true;
  };
  if (row.cu_seqlens) {
    MarkCuSeqlens(*row.cu_seqlens, n);
    if (!agrees_named(marked)) add();
  }
  if (row.seq_lens) {
    MarkSeqLens(*row.seq_lens, n);
    if (!agrees_named(marked)) add();
  }
  if (row.doc_ids) {
    const auto* ids = row.doc_ids->data();
    if (!agrees_named([&](std::size_t i) { return i == 0 || ids[i] != ids[i - 1]; })) add();
    if (const auto reused = ReusedDocId(row.doc_ids->data(), row.doc_ids->size())) add(reused->second);  // one id, two segments (by equality)
  }
  if (row.position_ids) {
    const auto* pos = row.position_ids->data();
    if (policy().boundary_source == BoundarySource::kPositionReset &&
        !agrees([&](std::size_t i) { return i == 0 || pos[i] == policy().position_base; }))
      add();
    if (policy().boundary_source == BoundarySource::kPositionStep &&
        !agrees([&](std::size_t i) { return i == 0 || pos[i] - pos[i - 1] != 1; }))
      add();
  }
  const auto* ids_in = row.input_ids.data();
  std::size_t first = 0;  // FromEodCloses' first_token: where a left padding run ends
  while (policy().padding == Padding::kLeft && first < n && sd[first] < 0) ++first;
  if (policy().boundary_source == BoundarySource::kEodCloses && policy().eos_id) {
    const Token eod = *policy().eos_id;
    if (!agrees([&](std::size_t i) { return i == 0 || i == first || ids_in[i - 1] == eod; })) add();
  }
  if (policy().boundary_source == BoundarySource::kBosOpens && policy().bos_id) {
    const Token bos = *policy().bos_id;
    if (!agrees([&](std::size_t i) { return i == 0 || i == first || ids_in[i] == bos; })) add();
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
        add(static_cast<std::int64_t>(i));
        break;
      }
    }
    if (zeros && policy().attention == Attention::kDocCausal && truth_count > 1 && !row.cu_seqlens) add();
  }
}

void FastStepChecker::Impl::MarkCuSeqlens(std::span<const std::int64_t> cu, std::size_t n) {
  derived.assign(n, 0);
  for (std::size_t k = 0; k + 1 < cu.size(); ++k)
    if (cu[k + 1] > cu[k]) derived[static_cast<std::size_t>(cu[k])] = 1;
}

void FastStepChecker::Impl::MarkSeqLens(std::span<const std::int64_t> lens, std::size_t n) {
  derived.assign(n, 0);
  std::int64_t at = 0;
  for (auto len : lens) {
    if (len > 0) derived[static_cast<std::size_t>(at)] = 1;
    at += len;
  }
}

// Checker::CheckPositions on one row. L, when it is the step's longest row, is known only at Finish: what a
// position read with the rows so far is kept, for Finish to defer when the step's L differs.
void FastStepChecker::Impl::PositionsRow(const RowView& row, std::int64_t R) {
  const std::size_t n = row.input_ids.size();
  const auto* sd = slot_doc.data();
  const auto* sp = slot_piece.data();
  if (!row.position_ids) {
    if (policy().positions == Positions::kDocReset || policy().position_base != 0) {
      bool single = true;
      for (std::size_t i = 0; i < n && single; ++i)
        if (sd[i] >= 0 && (sp[i] != (sd[0] < 0 ? -1 : sp[0]) || sd[0] < 0 || slot_offset[0] != 0)) single = false;
      if (!(single && policy().position_base == 0 && policy().split_positions != SplitPositions::kModulo))
        row_findings.push_back({Invariant::kPositions, R, -1});
    }
    return;
  }
  const bool known_length = given_row_length > 0;
  const std::int64_t L = known_length ? given_row_length : std::max(longest, std::int64_t{1});
  const auto* got = row.position_ids->data();
  const std::int64_t base = policy().position_base;
  std::int64_t prev = base - 1;  // PositionsOf's previous position; "none" only under pad_positions any
  bool prev_known = false;
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t want;
    if (sd[i] < 0) {
      if (policy().pad_positions == PadPositions::kAny) {
        prev_known = false;
        continue;
      }
      if (policy().pad_positions == PadPositions::kZero) {
        want = 0;
      } else {
        const std::int64_t uncapped = (i == 0 || !prev_known ? base - 1 : prev) + 1;
        want = std::min(uncapped, base + L - 1);
        if (want != uncapped) ReadWithLength(L, known_length);
      }
    } else if (policy().positions == Positions::kRowContinuous) {
      want = base + static_cast<std::int64_t>(i);
    } else if (policy().split_positions == SplitPositions::kContinue) {
      want = base + slot_offset[i];
    } else if (policy().split_positions == SplitPositions::kModulo) {
      if (slot_offset[i] >= L) ReadWithLength(L, known_length);
      want = base + slot_offset[i] % L;
    } else {
      want = base + slot_offset[i] - piece_base[static_cast<std::size_t>(sp[i])];
    }
    prev = want;
    prev_known = true;
    if (got[i] != want) {
      row_findings.push_back({Invariant::kPositions, R, static_cast<std::int64_t>(i)});
      break;
    }
  }
}

// Checker::CheckTargets on one row, and the row's sums for the totals.
void FastStepChecker::Impl::TargetsAndSums(const RowView& row, std::int64_t R, std::size_t m) {
  const std::size_t n = row.input_ids.size();
  const auto* sd = slot_doc.data();
  auto stop = [&](std::size_t i) { targets = Finding{Invariant::kTargets, R, static_cast<std::int64_t>(i)}; };
  if (!targets && row.loss_mask) {
    for (std::size_t i = 0; i < n; ++i) {
      const double mask = (*row.loss_mask)[i];
      if (mask != 0.0 && mask != 1.0) {
        stop(i);
        break;
      }
    }
  }
  const bool aligned = policy().label_alignment == LabelAlignment::kAligned;
  const Token ignore = policy().ignore_index;
  const auto* labels = row.labels.data();
  const double* lm = row.loss_mask ? row.loss_mask->data() : nullptr;
  RowSums& s = sums[static_cast<std::size_t>(R)];
  Pred prev_p;
  for (std::size_t i = 0; i < n; ++i) {
    double got_weight;
    Token got_target;
    if (aligned) {
      got_target = i + 1 < n ? labels[i + 1] : 0;
      got_weight = i + 1 < n && labels[i + 1] != ignore ? 1.0 : 0.0;
    } else {
      got_target = labels[i];
      got_weight = labels[i] != ignore ? 1.0 : 0.0;
      if (policy().loss_mask) got_weight *= lm[i];
    }
    if (RowEndWaitsForStream(i, n)) {  // the last slot: its sums and its check wait for Finish
      pending.push_back({R, static_cast<std::int64_t>(i), sd[i], got_target, got_weight});
      if (aligned && i > 0) s.labels += prev_p.weight > 0 ? 1 : 0;
      break;
    }
    const Pred p = PredictionAt(i, n);
    AddPrediction(p, R, m, sd[i]);
    // LabelsOf: the oracle's label count, for count_basis unshifted_labels.
    if (aligned && i > 0) s.labels += prev_p.weight > 0 ? 1 : 0;
    prev_p = p;
    if (targets) continue;
    if (got_weight != p.weight || (p.weight > 0 && got_target != p.target)) stop(i);
  }
  if (aligned && n > 0 && sd[0] >= 0) {
    const DocumentView& first = Doc(sd[0]);
    const std::int64_t k = slot_offset[0];
    const bool reachable = k > 0 || policy().boundary_target == BoundaryTarget::kIncluded;
    if (first.supervised(k) == 1 && reachable) s.labels += 1;
  }
}

// One prediction into the sums of row R (micro-batch m; the input slot's document `input_doc`).
void FastStepChecker::Impl::AddPrediction(const Pred& p, std::int64_t R, std::size_t m, std::int64_t input_doc) {
  RowSums& s = sums[static_cast<std::size_t>(R)];
  s.weight += p.weight;
  if (p.weight > 0) {
    const double wl = p.weight * Loss(p.doc, p.offset);
    s.loss += wl;
    mb_loss[m] += wl;
    if (policy().denominator == Denominator::kSequenceMean) {
      per_doc[static_cast<std::size_t>(input_doc)].first += wl;
      per_doc[static_cast<std::size_t>(input_doc)].second += p.weight;
    }
  }
  if (policy().label_alignment != LabelAlignment::kAligned)
    s.labels += (policy().loss_mask ? p.has_target : p.weight > 0) ? 1 : 0;
}

// The row ends that waited for the step's stream, now that its documents are known: their predictions into
// the sums, and the first wrong one is CheckTargets' finding when it comes before the one found meanwhile.
void FastStepChecker::Impl::ResolvePending() {
  for (const Pending& w : pending) {
    const std::int64_t e = next_nonempty[static_cast<std::size_t>(w.doc)];
    Pred p;
    if (e >= 0) {
      const DocumentView& next = Doc(e);
      const double weight = policy().boundary_target == BoundaryTarget::kIncluded && next.supervised(0) == 1 ? 1.0 : 0.0;
      p = Pred{true, next.token(0), e, 0, weight};
    }
    AddPrediction(p, w.row, static_cast<std::size_t>(row_microbatch[static_cast<std::size_t>(w.row)]), w.doc);
    const bool earlier = !targets || std::make_pair(w.row, w.slot) < std::make_pair(targets->row, targets->slot);
    if (earlier && (w.got_weight != p.weight || (p.weight > 0 && w.got_target != p.target)))
      targets = Finding{Invariant::kTargets, w.row, w.slot};
  }
}

// Checker::CheckBoundaryEncodingPresent on one row: the boundary encoding the policy relies on.
void FastStepChecker::Impl::AttentionRow(const RowView& row, std::int64_t R) {
  const std::size_t n = row.input_ids.size();
  const auto* sd = slot_doc.data();
  const auto* sp = slot_piece.data();
  auto real_count = [&](auto starts) {
    std::int64_t c = 0;
    for (std::size_t i = 0; i < n; ++i) c += sd[i] >= 0 && starts(i) ? 1 : 0;
    return c;
  };
  auto marked = [&](std::size_t i) { return derived[i] != 0; };
  if (policy().attention == Attention::kRowCausal) {
    bool isolates = false;
    if (row.cu_seqlens) {
      MarkCuSeqlens(*row.cu_seqlens, n);
      isolates = real_count(marked) > 1;
    }
    if (!isolates && row.seq_lens) {
      MarkSeqLens(*row.seq_lens, n);
      isolates = real_count(marked) > 1;
    }
    if (!isolates && row.doc_ids) {
      const auto* ids = row.doc_ids->data();
      isolates = real_count([&](std::size_t i) { return i == 0 || ids[i] != ids[i - 1]; }) > 1;
    }
    if (isolates) row_findings.push_back({Invariant::kAttention, R, -1});
    return;
  }
  // Read as one causal sequence: a violation only where that changes a context set (encoding_notes.h).
  if (HasRequiredBoundaryField(row, policy().boundary_source)) return;
  const auto piece_of = [&](std::int64_t i) { return sd[i] < 0 ? std::int64_t{-1} : std::int64_t{sp[i]}; };
  if (RowCausalChangesContexts(static_cast<std::int64_t>(n), piece_of, policy()))
    row_findings.push_back({Invariant::kAttention, R, -1});
  else
    missing_encoding = true;
}

}  // namespace packoracle::fastcheck
