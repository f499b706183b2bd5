// FastStepChecker: CheckCase's packer checks, one pass per row. Each block names the Checker method of
// properties/src/check.cc it mirrors; the order of findings follows it (see step_check.h for the contract).
// This file: the flow, shape, coverage and the layout; step_rows.cc the per-row pass; step_totals.cc totals.
#include "packoracle/fastcheck/step_check.h"

#include <algorithm>

#include "packoracle/oracle/layout.h"
#include "step_impl.h"

namespace packoracle::fastcheck {

std::int64_t StepDocuments::Find(std::string_view uid) const {
  auto it = by_uid_.find(uid);
  return it == by_uid_.end() ? -1 : it->second;
}

StepDocuments StepDocuments::Of(const std::vector<EffectiveDocument>& effective,
                                const std::map<std::string, std::vector<double>>& target_losses) {
  StepDocuments docs;
  for (const auto& d : effective) {
    docs.docs.push_back(&d);
    auto it = target_losses.find(d.uid);
    docs.losses.push_back(it == target_losses.end() ? nullptr : &it->second);
  }
  docs.Index();
  return docs;
}

void StepDocuments::Index() {
  by_uid_.clear();
  by_uid_.reserve(docs.size());
  for (std::size_t d = 0; d < docs.size(); ++d) by_uid_[docs[d]->uid] = static_cast<std::int64_t>(d);
}

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
  if (PadsBeyondTheRow(policy, in.row_length) && total > 0) return true;
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
