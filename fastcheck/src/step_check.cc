// FastStepChecker: CheckCase's packer checks, one pass per row. Each block names the Checker method of
// properties/src/check.cc it mirrors; the order of findings follows it (see step_check.h for the contract).
#include "packoracle/fastcheck/step_check.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "packoracle/oracle/layout.h"

namespace packoracle::fastcheck {

std::int64_t StepDocuments::Find(std::string_view uid) const {
  auto it = by_uid_.find(uid);
  return it == by_uid_.end() ? -1 : it->second;
}

void StepDocuments::Index() {
  by_uid_.clear();
  by_uid_.reserve(docs.size());
  for (std::size_t d = 0; d < docs.size(); ++d) by_uid_[docs[d]->uid] = static_cast<std::int64_t>(d);
}

namespace {

bool Close(double a, double b) { return std::fabs(a - b) <= 1e-12 * std::max({1.0, std::fabs(a), std::fabs(b)}); }

// One prediction as PredictionOf (oracle/src/batch.cc) defines it, without the target token's lookup
// deferred: kind is enough to tell "has a target".
struct Pred {
  bool has_target = false;
  Token target = 0;
  std::int64_t doc = -1, offset = -1;
  double weight = 0;
};

}  // namespace

struct FastStepChecker::Impl {
  const StepInput& in;
  const Policy& policy;
  const StepDocuments& docs;
  Buffers& b;
  StepVerdict& v;
  std::vector<const CandidateRow*> rows;
  std::vector<std::size_t> row_microbatch;

  void Add(Invariant inv, std::int64_t row = -1, std::int64_t slot = -1) { v.findings.push_back({inv, row, slot}); }
  const EffectiveDocument& Doc(std::int64_t d) const { return *docs.docs[static_cast<std::size_t>(d)]; }
  double Loss(std::int64_t d, std::int64_t k) const {
    if (docs.losses.empty()) return 1.0;  // losses unknown: the sums that use them are not used
    const auto* l = docs.losses[static_cast<std::size_t>(d)];
    return l && static_cast<std::size_t>(k) < l->size() ? (*l)[static_cast<std::size_t>(k)] : 1.0;
  }

  bool PolicyDemandsRefusal() const;
  bool Shape();
  bool Coverage();
  bool LayoutIsValid();
  void FillSlots(std::size_t r);  // row r's slots, from its spans (resolved by Coverage)
  Pred PredictionAt(std::size_t i, std::size_t n) const;
  void Rows();
  void Totals();
  bool Run();  // false: defer to CheckCase

  // Per-row sums for the totals (CheckTotals and Objective).
  struct RowSums {
    double weight = 0, count = 0, loss = 0;  // count on the policy's basis
    double labels = 0;                       // the oracle's labels != ignore_index
    std::int64_t length = 0;
  };
  std::vector<RowSums> sums;
  std::vector<std::pair<double, double>> per_doc;  // sequence_mean: (Σwℓ, Σw) by input document
  std::vector<double> mb_loss;                     // CheckTotals' s per micro-batch, prediction by prediction
};

bool FastStepChecker::Impl::PolicyDemandsRefusal() const {
  std::int64_t total = 0;
  bool overlong = false;
  for (const auto* d : docs.docs) {
    total += d->size();
    overlong = overlong || d->size() > in.row_length;
  }
  const bool stream_only_full = policy.stream_stride != StreamStride::kNone && policy.padding == Padding::kNone;
  const std::int64_t window = in.row_length + (policy.row_end_target == RowEndTarget::kNextInStream ? 1 : 0);
  if (stream_only_full) return total > 0 && total < window;
  return policy.overflow == Overflow::kError && overlong;
}

// Checker::CheckShape.
bool FastStepChecker::Impl::Shape() {
  const std::size_t before = v.findings.size();
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const CandidateRow& row = *rows[r];
    const auto R = static_cast<std::int64_t>(r);
    const auto n = static_cast<std::int64_t>(row.input_ids.size());
    auto same = [&](std::size_t size) {
      if (static_cast<std::int64_t>(size) != n) Add(Invariant::kShape, R);
    };
    same(row.labels.size());
    if (row.loss_mask) same(row.loss_mask->size());
    if (row.position_ids) same(row.position_ids->size());
    if (row.doc_ids) same(row.doc_ids->size());
    if (row.attention_mask) same(row.attention_mask->size());
    if (policy.loss_mask && !row.loss_mask) Add(Invariant::kShape, R);
    if (n > in.row_length) Add(Invariant::kShape, R);
    if (policy.padding == Padding::kRight && policy.pad_to.kind == PadTo::Kind::kRowLen && n != in.row_length)
      Add(Invariant::kShape, R);
    if (policy.padding == Padding::kRight && policy.pad_to.kind == PadTo::Kind::kMultipleOf &&
        n % policy.pad_to.multiple != 0)
      Add(Invariant::kShape, R);
    if (row.cu_seqlens) {
      const auto& cu = *row.cu_seqlens;
      bool monotone = true;
      for (std::size_t k = 1; k < cu.size(); ++k) monotone = monotone && cu[k] >= cu[k - 1];
      if (cu.empty() || cu.front() != 0 || cu.back() != n || !monotone) Add(Invariant::kShape, R);
    }
    if (row.seq_lens) {
      std::int64_t sum = 0;
      bool nonnegative = true;
      for (auto x : *row.seq_lens) {
        sum += x;
        nonnegative = nonnegative && x >= 0;
      }
      if (sum != n || !nonnegative) Add(Invariant::kShape, R);
    }
  }
  return v.findings.size() == before;
}

// Checker::CheckCoverage: spans against document tokens, padding, then each document's pieces.
bool FastStepChecker::Impl::Coverage() {
  const std::size_t before = v.findings.size();
  for (auto& p : b.pieces) p.clear();
  b.pieces.resize(docs.docs.size());
  b.span_doc.clear();
  b.row_spans.clear();
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const CandidateRow& row = *rows[r];
    const auto R = static_cast<std::int64_t>(r);
    const auto n = static_cast<std::int64_t>(row.input_ids.size());
    b.covered.assign(static_cast<std::size_t>(n), 0);
    b.row_spans.push_back(b.span_doc.size());
    for (const DocSpan& span : row.doc_spans) {
      const std::int64_t d = docs.Find(span.doc_uid);
      b.span_doc.push_back(static_cast<std::int32_t>(d));
      if (d < 0) {
        Add(Invariant::kCoverage, R);
        continue;
      }
      const EffectiveDocument& doc = Doc(d);
      if (span.length <= 0 || span.start < 0 || span.start > n - span.length || span.doc_offset < 0 ||
          span.doc_offset > doc.size() - span.length) {
        Add(Invariant::kCoverage, R);
        continue;
      }
      const Token* want = doc.tokens.data() + span.doc_offset;
      const Token* got = row.input_ids.data() + span.start;
      std::uint8_t* cov = b.covered.data() + span.start;
      for (std::int64_t t = 0; t < span.length; ++t) {
        if (cov[t]) Add(Invariant::kCoverage, R, span.start + t);
        cov[t] = 1;
        if (got[t] != want[t]) Add(Invariant::kCoverage, R, span.start + t);
      }
      b.pieces[static_cast<std::size_t>(d)].push_back({span.doc_offset, span.length});
    }
    bool seen_pad = false;
    for (std::int64_t i = 0; i < n; ++i) {
      const auto s = static_cast<std::size_t>(i);
      if (!b.covered[s]) {
        seen_pad = true;
        if (row.input_ids[s] != policy.pad_id) Add(Invariant::kCoverage, R, i);
        if (policy.padding == Padding::kNone) Add(Invariant::kCoverage, R, i);
      } else if (seen_pad && policy.padding == Padding::kRight) {
        Add(Invariant::kCoverage, R, i);
      }
    }
  }
  if (v.findings.size() != before) return false;

  const bool stream = policy.stream_stride != StreamStride::kNone;
  std::int64_t last_doc = -1;
  for (std::size_t d = 0; d < docs.docs.size(); ++d)
    if (docs.docs[d]->size() > 0) last_doc = static_cast<std::int64_t>(d);
  for (std::size_t d = 0; d < docs.docs.size(); ++d) {
    const auto& pieces = b.pieces[d];
    const std::int64_t size = docs.docs[d]->size();
    if (in.options.partial_coverage) {
      if (pieces.size() > 1 && policy.overflow != Overflow::kSplit) Add(Invariant::kCoverage);
      continue;
    }
    std::int64_t next = 0;
    const bool skips = stream && policy.stream_stride == StreamStride::kLPlus1;
    for (const auto& [offset, length] : pieces) {
      if (skips && offset == next + 1) next = offset;
      if (offset != next) {
        Add(Invariant::kCoverage);
        return false;
      }
      next += length;
    }
    if (pieces.size() > 1 && policy.overflow != Overflow::kSplit) Add(Invariant::kCoverage);
    if (next == size) continue;
    if (skips && next == size - 1) continue;
    if (policy.overflow == Overflow::kTruncate && next >= std::min(size, in.row_length)) continue;
    if (stream && policy.padding == Padding::kNone) continue;
    if (stream && policy.row_end_target == RowEndTarget::kNextInStream && static_cast<std::int64_t>(d) == last_doc &&
        next == size - 1)
      continue;
    Add(Invariant::kCoverage);
  }
  return v.findings.size() == before;
}

// What Materialize's ValidateLayout (oracle/src/layout.cc) would throw on, once shape and coverage passed:
// a micro_step or rank out of range, two pieces of one document in a row, a token placed twice in the step.
bool FastStepChecker::Impl::LayoutIsValid() {
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const auto& mb = *in.microbatches[row_microbatch[r]];
    if (mb.micro_step < 0 || mb.rank < 0 || mb.micro_step >= kMaxMicrobatchesPerStep ||
        mb.rank >= kMaxMicrobatchesPerStep)
      return false;
  }
  // Pieces with their row, per document; the coverage pass kept (offset, length) only, so count again.
  auto& last_row = b.last_row;
  last_row.assign(docs.docs.size(), -1);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    for (std::size_t p = 0; p < rows[r]->doc_spans.size(); ++p) {
      const auto d = static_cast<std::size_t>(b.span_doc[b.row_spans[r] + p]);
      if (last_row[d] == static_cast<std::int64_t>(r)) return false;
      last_row[d] = static_cast<std::int64_t>(r);
    }
  }
  for (auto& pieces : b.pieces) {
    if (pieces.size() < 2) continue;
    std::sort(pieces.begin(), pieces.end());
    for (std::size_t k = 1; k < pieces.size(); ++k)
      if (pieces[k].first < pieces[k - 1].first + pieces[k - 1].second) return false;
  }
  return true;
}

void FastStepChecker::Impl::FillSlots(std::size_t r) {
  const CandidateRow& row = *rows[r];
  const std::size_t n = row.input_ids.size();
  b.slot_doc.assign(n, -1);
  b.slot_offset.resize(n);
  b.slot_piece.resize(n);
  b.piece_base.resize(row.doc_spans.size());
  for (std::size_t p = 0; p < row.doc_spans.size(); ++p) {
    const DocSpan& span = row.doc_spans[p];
    const std::int32_t d = b.span_doc[b.row_spans[r] + p];
    b.piece_base[p] = span.doc_offset;
    for (std::int64_t t = 0; t < span.length; ++t) {
      const auto s = static_cast<std::size_t>(span.start + t);
      b.slot_doc[s] = d;
      b.slot_offset[s] = span.doc_offset + t;
      b.slot_piece[s] = static_cast<std::int32_t>(p);
    }
  }
}

// PredictionOf (oracle/src/batch.cc), rules 1-4.
Pred FastStepChecker::Impl::PredictionAt(std::size_t i, std::size_t n) const {
  const std::int64_t d = b.slot_doc[i];
  if (d < 0) return {};
  const std::int64_t k = b.slot_offset[i];
  const EffectiveDocument& doc = Doc(d);
  auto in_doc = [&](std::int64_t td, std::int64_t tk, double w) {
    return Pred{true, Doc(td).tokens[static_cast<std::size_t>(tk)], td, tk, w};
  };
  auto boundary_weight = [&](std::int64_t td) {
    return policy.boundary_target == BoundaryTarget::kIncluded && Doc(td).supervised[0] == 1 ? 1.0 : 0.0;
  };
  if (i + 1 < n) {
    const std::int64_t nd = b.slot_doc[i + 1];
    if (nd >= 0 && nd == d && b.slot_offset[i + 1] == k + 1)
      return in_doc(d, k + 1, doc.supervised[static_cast<std::size_t>(k + 1)] == 1 ? 1.0 : 0.0);
    if (nd >= 0 && b.slot_offset[i + 1] == 0 && nd != d) return in_doc(nd, 0, boundary_weight(nd));
    return {};
  }
  const bool goes_on = k + 1 < doc.size();
  switch (policy.row_end_target) {
    case RowEndTarget::kNone: return {};
    case RowEndTarget::kNextInDoc:
    case RowEndTarget::kNextInStream:
      if (goes_on) return in_doc(d, k + 1, doc.supervised[static_cast<std::size_t>(k + 1)] == 1 ? 1.0 : 0.0);
      if (policy.row_end_target == RowEndTarget::kNextInDoc) return {};
      {
        const std::int64_t e = b.next_nonempty[static_cast<std::size_t>(d)];
        return e >= 0 ? in_doc(e, 0, boundary_weight(e)) : Pred{};
      }
  }
  return {};
}

// CheckSegments, CheckPositions, CheckTargets and CheckBoundaryEncodingPresent, row by row in one pass
// (their findings are per row and sorted by invariant afterwards, so interleaving them keeps CheckCase's
// order), plus the sums the totals need.
void FastStepChecker::Impl::Rows() {
  const bool attention_doc = policy.attention == Attention::kDocCausal;
  bool targets_stopped = false;  // CheckTargets returns at the first wrong prediction of the step
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
      for (std::size_t i = 0; i < n; ++i) {
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
      bool present = true;
      switch (policy.boundary_source) {
        case BoundarySource::kCuSeqlens: present = row.cu_seqlens.has_value(); break;
        case BoundarySource::kSeqLens: present = row.seq_lens.has_value(); break;
        case BoundarySource::kDocIds: present = row.doc_ids.has_value(); break;
        case BoundarySource::kPositionReset:
        case BoundarySource::kPositionStep: present = row.position_ids.has_value(); break;
        default: break;
      }
      if (!present) Add(Invariant::kAttention, R);
    }
  }
  v.utilization = slots > 0 ? static_cast<double>(used) / static_cast<double>(slots) : 1.0;
  for (const auto& s : sums) v.valid_targets += s.weight;
}

// Checker::CheckTotals for the packer's producer totals, and the token mean of Checker::Run.
void FastStepChecker::Impl::Totals() {
  const auto& mbs = in.microbatches;
  const bool known = in.options.losses_known;
  std::int64_t max_micro = 0, max_rank = 0;
  for (const auto* mbp : mbs) {
    const auto& mb = *mbp;
    max_micro = std::max(max_micro, mb.micro_step);
    max_rank = std::max(max_rank, mb.rank);
  }
  // Objective's StepShape checks (Resolve in oracle/src/denominator.cc) throw on these: defer.
  auto shape_ok = [&](std::int64_t R, std::int64_t M) {
    if (R > kMaxMicrobatchesPerStep || M > kMaxMicrobatchesPerStep || R * M > kMaxMicrobatchesPerStep) return false;
    for (const auto* mb : mbs)
      if (!mb->rows.empty() && (mb->rank >= R || mb->micro_step >= M)) return false;
    return true;
  };
  if (known && !shape_ok(max_rank + 1, max_micro + 1)) throw Outcome::kDefer;

  // Per micro-batch counts, as CheckTotals makes them.
  std::vector<double> n_mb(mbs.size(), 0.0);
  std::map<std::int64_t, double> per_rank;
  double global = 0;
  {
    std::size_t flat = 0;
    for (std::size_t m = 0; m < mbs.size(); ++m) {
      double n = 0;
      for (std::size_t k = 0; k < mbs[m]->rows.size(); ++k, ++flat) {
        const RowSums& s = sums[flat];
        if (policy.denominator == Denominator::kAllPositions) n += static_cast<double>(s.length);
        else if (policy.count_basis == CountBasis::kUnshiftedLabels) n += s.labels;
        else n += s.weight;
      }
      n_mb[m] = n;
      per_rank[mbs[m]->rank] += n;
      global += n;
    }
  }
  std::vector<const ProducerTotals*> totals;
  for (const auto* mb : mbs)
    if (mb->producer) totals.push_back(&*mb->producer);

  auto token_mean_of_oracle = [&] {
    double w = 0, l = 0;
    for (const auto& s : sums) {
      w += s.weight;
      l += s.loss;
    }
    if (w > 0) v.token_mean = l / w;
  };

  if (!totals.empty() && totals.size() != mbs.size()) Add(Invariant::kDenominator);
  if (totals.empty() || totals.size() != mbs.size()) {
    if (known) token_mean_of_oracle();
    return;
  }
  const bool seq_mean = policy.denominator == Denominator::kSequenceMean;
  std::vector<double> loss_sums(mbs.size());
  for (std::size_t m = 0; m < mbs.size(); ++m) loss_sums[m] = known ? mb_loss[m] : totals[m]->loss_sum;
  bool ok = true;
  for (std::size_t m = 0; m < totals.size(); ++m) {
    const ProducerTotals& t = *totals[m];
    if (!std::isfinite(t.loss_sum) || !std::isfinite(t.denominator) || (t.loss && !std::isfinite(*t.loss))) {
      Add(Invariant::kDenominator);
      ok = false;
      continue;
    }
    double expected = 0;
    if (t.denominator_scope == "microbatch") expected = n_mb[m];
    else if (t.denominator_scope == "step") expected = per_rank[mbs[m]->rank];
    else if (t.denominator_scope == "global") expected = global;
    else {
      Add(Invariant::kDenominator);
      ok = false;
      continue;
    }
    const bool empty_ok = expected == 0 && (t.denominator == 0 || t.denominator == 1);
    if (!seq_mean && !Close(t.denominator, expected) && !empty_ok) {
      Add(Invariant::kDenominator);
      ok = false;
    }
    if (!Close(t.loss_sum, loss_sums[m])) {
      Add(Invariant::kLoss);
      ok = false;
    } else if (!seq_mean && t.loss && t.denominator > 0 && !Close(*t.loss, t.loss_sum / t.denominator)) {
      Add(Invariant::kLoss);
      ok = false;
    } else if (!seq_mean && t.loss && t.denominator == 0 && *t.loss != 0) {
      Add(Invariant::kLoss);
      ok = false;
    }
  }
  auto finish = [&] {
    if (known) token_mean_of_oracle();
  };
  if (!ok || (seq_mean && !known)) return finish();

  const auto R = static_cast<double>(in.dp_world_size);
  const auto M = static_cast<double>(max_micro + 1);
  double sum = 0;
  for (const auto* t : totals) sum += t->loss ? *t->loss : (t->denominator > 0 ? t->loss_sum / t->denominator : 0);
  const std::string& scope = totals.front()->denominator_scope;
  for (const auto* t : totals) {
    if (t->denominator_scope != scope) {
      Add(Invariant::kDenominator);
      return finish();
    }
  }
  double declared = sum;
  if (!seq_mean) {
    if (scope == "step") declared = sum / R;
    if (scope == "microbatch") declared = sum / (R * M);
  }
  v.declared_objective = declared;
  double want = 0;
  if (known) {
    // Objective (oracle/src/denominator.cc) under the policy's formula, from the per-row sums.
    if (!shape_ok(in.dp_world_size, max_micro + 1)) throw Outcome::kDefer;
    double weight = 0, loss = 0, count = 0;
    std::int64_t length = 0;
    for (const auto& s : sums) {
      weight += s.weight;
      loss += s.loss;
      count += s.count;
      length += s.length;
    }
    if (weight > 0) {
      switch (policy.denominator) {
        case Denominator::kGlobalTargets: want = count > 0 ? loss / count : 0.0; break;
        case Denominator::kRankMean:
        case Denominator::kMicrobatchMean: {
          const bool by_rank = policy.denominator == Denominator::kRankMean;
          std::map<std::pair<std::int64_t, std::int64_t>, std::pair<double, double>> groups;
          std::size_t flat = 0;
          for (const auto* mb : mbs)
            for (std::size_t k = 0; k < mb->rows.size(); ++k, ++flat) {
              auto& sn = groups[{mb->rank, by_rank ? 0 : mb->micro_step}];
              sn.first += sums[flat].loss;
              sn.second += sums[flat].count;
            }
          double total = 0;
          for (const auto& [key, sn] : groups) total += sn.first / std::max(1.0, sn.second);
          want = total / (by_rank ? R : R * M);
          break;
        }
        case Denominator::kSequenceMean: {
          double total = 0;
          std::int64_t count_docs = 0;
          for (const auto& [l, w] : per_doc) {
            if (w == 0) continue;
            total += l / w;
            ++count_docs;
          }
          want = total / static_cast<double>(count_docs);
          break;
        }
        case Denominator::kAllPositions: want = loss / static_cast<double>(length); break;
      }
    }
  } else {
    double total = 0, total_n = 0, per_mb = 0;
    std::map<std::int64_t, std::pair<double, double>> by_rank;
    for (std::size_t m = 0; m < totals.size(); ++m) {
      total += loss_sums[m];
      total_n += n_mb[m];
      by_rank[mbs[m]->rank].first += loss_sums[m];
      by_rank[mbs[m]->rank].second += n_mb[m];
      per_mb += loss_sums[m] / std::max(1.0, n_mb[m]);
    }
    if (total_n > 0) v.token_mean = total / total_n;
    switch (policy.denominator) {
      case Denominator::kGlobalTargets:
      case Denominator::kAllPositions: want = total_n > 0 ? total / total_n : 0; break;
      case Denominator::kRankMean: {
        double rank_sum = 0;
        for (const auto& [rank, sn] : by_rank) rank_sum += sn.first / std::max(1.0, sn.second);
        want = rank_sum / R;
        break;
      }
      case Denominator::kMicrobatchMean: want = per_mb / (R * M); break;
      case Denominator::kSequenceMean: break;
    }
  }
  if (!Close(declared, want)) Add(Invariant::kLoss);
  finish();
}

bool FastStepChecker::Impl::Run() {
  if (in.fault) {
    Add(Invariant::kShape);
    return true;
  }
  const bool demanded = PolicyDemandsRefusal();
  if (in.refusal) {
    if (!demanded) Add(Invariant::kCoverage);
    return true;
  }
  if (demanded) {
    Add(Invariant::kCoverage);
    return true;
  }
  for (std::size_t m = 0; m < in.microbatches.size(); ++m)
    for (const auto& row : in.microbatches[m]->rows) {
      rows.push_back(&row);
      row_microbatch.push_back(m);
    }
  if (!Shape() || !Coverage()) return true;
  if (!LayoutIsValid()) return false;
  b.next_nonempty.assign(docs.docs.size(), -1);
  for (std::size_t d = docs.docs.size(), e = static_cast<std::size_t>(-1); d-- > 0;) {
    b.next_nonempty[d] = static_cast<std::int64_t>(e);
    if (docs.docs[d]->size() > 0) e = d;
  }
  Rows();
  if (in.options.efficiency && v.utilization < in.options.min_utilization) Add(Invariant::kEfficiency);
  Totals();
  return true;
}

void StepInput::SetPacked(const PackResult& packed) {
  microbatches.clear();
  for (const auto& mb : packed.microbatches) microbatches.push_back(&mb);
  refusal = packed.refusal ? &*packed.refusal : nullptr;
  fault = packed.fault ? &*packed.fault : nullptr;
}

const StepVerdict& FastStepChecker::Check(const StepInput& input) {
  verdict_ = StepVerdict{};
  verdict_.findings.clear();
  Impl impl{input, *input.policy, *input.documents, buffers_, verdict_, {}, {}, {}, {}, {}};
  bool decided;
  try {
    decided = impl.Run();
  } catch (Outcome) {
    decided = false;
  }
  if (!decided) {
    verdict_.outcome = Outcome::kDefer;
    return verdict_;
  }
  std::stable_sort(verdict_.findings.begin(), verdict_.findings.end(),
                   [](const Finding& a, const Finding& b) { return a.invariant < b.invariant; });
  verdict_.outcome = verdict_.findings.empty() ? Outcome::kPassed : Outcome::kViolated;
  return verdict_;
}

}  // namespace packoracle::fastcheck
