// FastStepChecker: CheckCase's packer checks, one pass per row, rows checked as they are added. Each block
// names the Checker method of properties/src/check.cc it mirrors; the order of findings follows it (see
// step_check.h for the contract). This file: the flow, shape, coverage and the layout; step_rows.cc the
// per-row pass; step_totals.cc the producer totals.
//
// CheckCase runs its passes over the whole step one after another (shape, coverage, then the rows) and stops
// at the first that finds something. Streamed, every row goes through all of them at once, each pass's
// findings kept apart; Finish then reports the first pass that found something, as CheckCase would. Only the
// checks that need the whole step wait for Finish: the policy's demand to refuse, L when it is the longest row,
// the tiling of each document's pieces, and a row-end target that is the next document of the stream.
#include "packoracle/fastcheck/step_check.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "packoracle/oracle/layout.h"
#include "packoracle/properties/encoding_notes.h"
#include "step_impl.h"

namespace packoracle::fastcheck {

DocumentView DocumentView::Of(const EffectiveDocument& d) {
  DocumentView view;
  view.uid = d.uid;
  view.size = d.size();
  view.wide = d.tokens.data();
  view.ints = d.supervised.data();
  return view;
}

std::int64_t StepDocuments::Find(std::string_view uid) {
  const auto uid_of = [this](std::uint32_t d) { return docs[d].uid; };
  if (const std::uint32_t found = by_uid_.Find(uid, uid_of); found != UidTable::kNone) return found;
  DocumentView view;
  if (!resolve || !resolve(uid, view)) return -1;
  const auto d = static_cast<std::uint32_t>(docs.size());
  docs.push_back(view);  // its uid: storage that outlives the row naming it
  by_uid_.Reserve(docs.size());
  by_uid_.IdOf(uid, uid_of) = d;
  return d;
}

StepDocuments StepDocuments::Of(const std::vector<EffectiveDocument>& effective,
                                const std::map<std::string, std::vector<double>>& target_losses) {
  StepDocuments docs;
  for (const auto& d : effective) {
    docs.docs.push_back(DocumentView::Of(d));
    auto it = target_losses.find(d.uid);
    docs.losses.push_back(it == target_losses.end() ? nullptr : &it->second);
  }
  docs.Index();
  return docs;
}

void StepDocuments::Index() {
  by_uid_.Clear();
  by_uid_.Reserve(docs.size());
  const auto uid_of = [this](std::uint32_t k) { return docs[k].uid; };
  // the last of equal uids, as CheckCase's std::map keeps
  for (std::size_t d = 0; d < docs.size(); ++d) by_uid_.IdOf(docs[d].uid, uid_of) = static_cast<std::uint32_t>(d);
}

FastStepChecker::FastStepChecker() : impl_(std::make_unique<Impl>()) {}
FastStepChecker::~FastStepChecker() = default;

void FastStepChecker::Impl::Begin(const StepInput& in) {
  policy_ptr = in.policy;
  given_row_length = in.row_length;
  dp_world_size = in.dp_world_size;
  options = in.options;
  refusal = in.refusal;
  fault = in.fault;
  docs_ptr = in.documents;
  v = StepVerdict{};
  mbs.clear();
  sums.clear();
  row_microbatch.clear();
  row_shape.clear();
  longest = 0;
  doc_count = 0;
  mb_loss.clear();
  coverage.clear();
  row_findings.clear();
  layout_invalid = defer = false;
  targets.reset();
  pending.clear();
  visible_padding = missing_encoding = false;
  slots = used = 0;
  length_read = 0;
  step_order.clear();
  EnsureDocument(static_cast<std::int64_t>(docs().docs.size()) - 1);
}

// The per-document state up to document d (found by a row, or given), its storage reused step to step.
void FastStepChecker::Impl::EnsureDocument(std::int64_t d) {
  for (; doc_count <= d; ++doc_count) {
    const auto k = static_cast<std::size_t>(doc_count);
    if (pieces.size() <= k) pieces.emplace_back();
    pieces[k].clear();
    if (last_row.size() <= k) last_row.push_back(-1);
    last_row[k] = -1;
    if (per_doc.size() <= k) per_doc.emplace_back();
    per_doc[k] = {0.0, 0.0};
  }
}

// The rule is the oracle's (policy.h); here only the effective lengths are gathered.
bool FastStepChecker::Impl::PolicyDemandsRefusal() const {
  if (!options.whole_input) return false;  // a window of a run: its documents' lengths are not all seen
  std::vector<std::int64_t> lengths;
  lengths.reserve(docs_ptr->docs.size());
  for (const auto& d : docs_ptr->docs) lengths.push_back(static_cast<std::int64_t>(d.size));
  return packoracle::PolicyDemandsRefusal(policy(), RowLength(), lengths);
}

// Checker::CheckShape, the findings of one row that need no L (all of a row's findings are alike: a count).
std::int32_t FastStepChecker::Impl::ShapeRow(const RowView& row) const {
  std::int32_t found = 0;
  const auto n = static_cast<std::int64_t>(row.input_ids.size());
  auto same = [&](std::size_t size) { found += static_cast<std::int64_t>(size) != n ? 1 : 0; };
  same(row.labels.size());
  if (row.loss_mask) same(row.loss_mask->size());
  if (row.position_ids) same(row.position_ids->size());
  if (row.doc_ids) same(row.doc_ids->size());
  if (row.attention_mask) same(row.attention_mask->size());
  if (policy().loss_mask && !row.loss_mask) ++found;
  if (policy().padding != Padding::kNone && policy().pad_to.kind == PadTo::Kind::kMultipleOf &&
      n % policy().pad_to.multiple != 0)
    ++found;
  if (row.cu_seqlens) {
    const auto& cu = *row.cu_seqlens;
    bool monotone = true;
    for (std::size_t k = 1; k < cu.size(); ++k) monotone = monotone && cu[k] >= cu[k - 1];
    if (cu.empty() || cu.front() != 0 || cu.back() != n || !monotone) ++found;
  }
  if (row.seq_lens) {
    std::int64_t sum = 0;
    bool nonnegative = true;
    for (auto x : *row.seq_lens) {
      sum += x;
      nonnegative = nonnegative && x >= 0;
    }
    if (sum != n || !nonnegative) ++found;
  }
  return found;
}

// Checker::CheckShape under pad_to longest: the micro-batch's width, the most slots the spans of one of its rows
// cover (-1 under any other pad_to: no width to meet). The oracle marks slot by slot; here each row's spans,
// clipped to the row, are sorted and their union measured.
std::int64_t FastStepChecker::Impl::LongestCovered(std::span<const RowView> rows) {
  if (policy().padding == Padding::kNone || policy().pad_to.kind != PadTo::Kind::kLongest) return -1;
  std::int64_t width = 0;
  for (const RowView& row : rows) {
    const auto n = static_cast<std::int64_t>(row.input_ids.size());
    intervals.clear();
    for (const DocSpan& span : row.doc_spans) {
      // [start, start + length) ∩ [0, n), written without a sum that could overflow (hostile spans)
      if (span.length <= 0 || span.start >= n || (span.start < 0 && span.start <= -span.length)) continue;
      const std::int64_t lo = std::max<std::int64_t>(0, span.start);
      const std::int64_t hi = span.start >= 0 && span.length > n - span.start ? n : std::min(n, span.start + span.length);
      intervals.emplace_back(lo, hi);
    }
    std::sort(intervals.begin(), intervals.end());
    std::int64_t union_slots = 0, reach = 0;  // reach: the end of the union so far
    for (const auto& [lo, hi] : intervals) {
      if (hi <= reach) continue;
      union_slots += hi - std::max(lo, reach);
      reach = hi;
    }
    width = std::max(width, union_slots);
  }
  return width;
}

// Checker::CheckShape, the findings of a row of n slots against L.
std::int32_t FastStepChecker::Impl::ShapeWithLength(std::int64_t n) const {
  const std::int64_t L = RowLength();
  std::int32_t found = n > L ? 1 : 0;
  if (policy().padding != Padding::kNone && policy().pad_to.kind == PadTo::Kind::kRowLen && n != L) ++found;
  return found;
}

// Checker::CheckCoverage, one row: spans against document tokens, then padding. Each valid span becomes a
// piece of its document. False when the row has a finding.
bool FastStepChecker::Impl::CoverageRow(const RowView& row, std::int64_t R) {
  const std::size_t before = coverage.size();
  const auto n = static_cast<std::int64_t>(row.input_ids.size());
  covered.assign(static_cast<std::size_t>(n), 0);
  span_doc.clear();
  for (const DocSpan& span : row.doc_spans) {
    const std::int64_t d = docs().Find(span.doc_uid);
    span_doc.push_back(static_cast<std::int32_t>(d));
    if (d < 0) {
      coverage.push_back({Invariant::kCoverage, R, -1});
      continue;
    }
    EnsureDocument(d);
    const DocumentView& doc = Doc(d);
    if (span.length <= 0 || span.start < 0 || span.start > n - span.length || span.doc_offset < 0 ||
        span.doc_offset > InputTokens(policy(), doc.size) - span.length) {  // shift: document: the last is no input
      coverage.push_back({Invariant::kCoverage, R, -1});
      continue;
    }
    const Token* got = row.input_ids.data() + span.start;
    std::uint8_t* cov = covered.data() + span.start;
    auto compare = [&](const auto* want) {
      for (std::int64_t t = 0; t < span.length; ++t) {
        if (cov[t]) coverage.push_back({Invariant::kCoverage, R, span.start + t});
        cov[t] = 1;
        if (got[t] != want[t]) coverage.push_back({Invariant::kCoverage, R, span.start + t});
      }
    };
    if (doc.wide) compare(doc.wide + span.doc_offset);
    else compare(doc.narrow + span.doc_offset);
    pieces[static_cast<std::size_t>(d)].push_back({span.doc_offset, span.length, static_cast<std::size_t>(R)});
  }
  bool seen_pad = false, seen_token = false;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto s = static_cast<std::size_t>(i);
    if (PaddingOutOfPlace(policy().padding, !covered[s], seen_pad, seen_token))
      coverage.push_back({Invariant::kCoverage, R, i});
    if (!covered[s]) {
      seen_pad = true;
      if (row.input_ids[s] != policy().pad_id) coverage.push_back({Invariant::kCoverage, R, i});
      if (policy().padding == Padding::kNone) coverage.push_back({Invariant::kCoverage, R, i});
    } else {
      seen_token = true;
    }
  }
  return coverage.size() == before;
}

// Checker::CheckCoverage, the step: each document's pieces (rows in order) against its tokens by TileDocument
// (tiling.h), the documents in the step's order. True when nothing is found.
bool FastStepChecker::Impl::Tiling(std::vector<Finding>& out) const {
  const auto& views = docs_ptr->docs;
  const std::vector<std::int64_t>& order = StepOrder();
  const std::size_t before = out.size();
  std::int64_t last_doc = -1;  // the stream's last document with an input
  for (auto d : order)
    if (InputTokens(policy(), views[d].size) > 0) last_doc = d;
  for (auto d : order) {
    const auto& list = pieces[static_cast<std::size_t>(d)];
    const bool forbidden_split = list.size() > 1 && policy().overflow != Overflow::kSplit;
    if (options.partial_coverage) {
      if (forbidden_split) out.push_back({Invariant::kCoverage, -1, -1});
      continue;
    }
    const DocumentTiling tiling = TileDocument(views[d].size, list, policy(), {RowLength(), d == last_doc, false});
    if (!tiling.findings.empty() && tiling.findings.front().fault != TilingFault::kMissingTail) {
      out.push_back({Invariant::kCoverage, -1, -1});  // CheckCoverage stops at the first piece out of order
      return false;
    }
    if (forbidden_split) out.push_back({Invariant::kCoverage, -1, -1});
    if (!tiling.findings.empty()) out.push_back({Invariant::kCoverage, -1, -1});
  }
  return out.size() == before;
}

const std::vector<std::int64_t>& FastStepChecker::Impl::StepOrder() const {
  const auto& views = docs_ptr->docs;
  if (step_order.size() == views.size()) return step_order;  // cleared by Begin; documents are only appended
  step_order.resize(views.size());
  std::iota(step_order.begin(), step_order.end(), 0);
  if (docs_ptr->uid_order) SortByUid(step_order, [&](std::int64_t d) { return views[static_cast<std::size_t>(d)].uid; });
  return step_order;
}

// What Materialize's ValidateLayout (oracle/src/layout.cc) would throw on, once shape and coverage passed: a
// micro_step or rank out of range and two pieces of one document in a row (here, row by row), a token placed
// twice in the step (PiecesOverlap, at Finish).
void FastStepChecker::Impl::LayoutRow(const CandidateMicrobatch& mb, std::int64_t R) {
  if (mb.micro_step < 0 || mb.rank < 0 || mb.micro_step >= kMaxMicrobatchesPerStep ||
      mb.rank >= kMaxMicrobatchesPerStep)
    layout_invalid = true;
  for (const std::int32_t d : span_doc) {
    auto& last = last_row[static_cast<std::size_t>(d)];
    if (last == R) layout_invalid = true;
    last = R;
  }
}

bool FastStepChecker::Impl::PiecesOverlap() {
  for (std::int64_t d = 0; d < doc_count; ++d) {
    auto& list = pieces[static_cast<std::size_t>(d)];
    if (list.size() < 2) continue;
    std::sort(list.begin(), list.end(), [](const TilingPiece& a, const TilingPiece& b) {
      return std::make_pair(a.offset, a.length) < std::make_pair(b.offset, b.length);
    });
    for (std::size_t k = 1; k < list.size(); ++k)
      if (list[k].offset < list[k - 1].offset + list[k - 1].length) return true;
  }
  return false;
}

void FastStepChecker::Impl::FillSlots(const RowView& row) {
  const std::size_t n = row.input_ids.size();
  slot_doc.assign(n, -1);
  slot_offset.resize(n);
  slot_piece.resize(n);
  piece_base.resize(row.doc_spans.size());
  for (std::size_t p = 0; p < row.doc_spans.size(); ++p) {
    const DocSpan& span = row.doc_spans[p];
    const std::int32_t d = span_doc[p];
    piece_base[p] = span.doc_offset;
    for (std::int64_t t = 0; t < span.length; ++t) {
      const auto s = static_cast<std::size_t>(span.start + t);
      slot_doc[s] = d;
      slot_offset[s] = span.doc_offset + t;
      slot_piece[s] = static_cast<std::int32_t>(p);
    }
  }
}

// A row's last slot whose document ends there under row_end_target next_in_stream: its target is the first
// token of the next document of the step's stream (PredictionOf), which Finish resolves.
bool FastStepChecker::Impl::RowEndWaitsForStream(std::size_t i, std::size_t n) const {
  if (i + 1 != n || policy().row_end_target != RowEndTarget::kNextInStream) return false;
  const std::int64_t d = slot_doc[i];
  return d >= 0 && slot_offset[i] + 1 >= Doc(d).size;
}

// PredictionOf (oracle/src/batch.cc), rules 1-5; the row end that waits for the stream is not asked here.
Pred FastStepChecker::Impl::PredictionAt(std::size_t i, std::size_t n) const {
  const std::int64_t d = slot_doc[i];
  if (d < 0) return {};
  const std::int64_t k = slot_offset[i];
  const DocumentView& doc = Doc(d);
  const bool per_document = policy().shift == Shift::kDocument;
  const bool doc_goes_on = k + 1 < InputTokens(policy(), doc.size);
  auto in_doc = [&](std::int64_t td, std::int64_t tk, double w) { return Pred{true, Doc(td).token(tk), td, tk, w}; };
  auto boundary_weight = [&](std::int64_t td) {
    return policy().boundary_target == BoundaryTarget::kIncluded && Doc(td).supervised(0) == 1 ? 1.0 : 0.0;
  };
  const std::int64_t nd = i + 1 < n ? slot_doc[i + 1] : -1;
  if (nd >= 0 && nd == d && slot_offset[i + 1] == k + 1) return in_doc(d, k + 1, doc.supervised(k + 1) == 1 ? 1.0 : 0.0);
  // Rule 5: under shift: document the document's last input predicts its last token, whatever follows.
  if (per_document && !doc_goes_on) return in_doc(d, k + 1, doc.supervised(k + 1) == 1 ? 1.0 : 0.0);
  if (i + 1 < n) {
    if (!per_document && nd >= 0 && slot_offset[i + 1] == 0 && nd != d) return in_doc(nd, 0, boundary_weight(nd));
    return {};
  }
  if (policy().row_end_target == RowEndTarget::kNone) return {};
  if (doc_goes_on) return in_doc(d, k + 1, doc.supervised(k + 1) == 1 ? 1.0 : 0.0);
  return {};  // next_in_doc: none; next_in_stream: RowEndWaitsForStream
}

void FastStepChecker::Impl::Add(const CandidateMicrobatch& mb, std::span<const RowView> rows) {
  if (defer) return;
  const std::size_t m = mbs.size();
  Microbatch info{mb.micro_step, mb.rank, static_cast<std::int64_t>(rows.size()), mb.producer};
  if (info.producer) info.producer->gradient.reset();
  mbs.push_back(std::move(info));
  mb_loss.push_back(0.0);
  const std::int64_t width = LongestCovered(rows);
  for (const RowView& row : rows) {
    const auto R = static_cast<std::int64_t>(sums.size());
    const auto n = static_cast<std::int64_t>(row.input_ids.size());
    sums.push_back({});
    sums.back().length = n;
    row_microbatch.push_back(static_cast<std::int32_t>(m));
    row_shape.push_back(ShapeRow(row) + (width >= 0 && n != width ? 1 : 0));
    longest = std::max(longest, n);
    if (row_shape.back() == 0 && coverage.empty() && CleanRow(mb, row, R, m)) {
      ++v.clean_rows;
      continue;
    }
    if (!CoverageRow(row, R) || row_shape.back() > 0 || !coverage.empty()) continue;  // the step reports shape or coverage
    LayoutRow(mb, R);
    RowPass(row, R, m);
  }
}

// Finish's flow, as Checker::Run: the packer's refusal or fault, then the passes in CheckCase's order.
void FastStepChecker::Impl::Decide() {
  auto add = [&](Invariant inv) { v.findings.push_back({inv, -1, -1}); };
  if (fault) return add(Invariant::kShape);
  const bool demanded = PolicyDemandsRefusal();
  if (refusal) {
    if (!demanded) add(Invariant::kCoverage);
    return;
  }
  if (demanded) return add(Invariant::kCoverage);
  for (std::size_t r = 0; r < sums.size(); ++r) {
    const std::int32_t found = row_shape[r] + ShapeWithLength(sums[r].length);
    for (std::int32_t k = 0; k < found; ++k) v.findings.push_back({Invariant::kShape, static_cast<std::int64_t>(r), -1});
  }
  if (!v.findings.empty()) return;
  if (!coverage.empty()) {
    v.findings = coverage;
    return;
  }
  if (!Tiling(v.findings)) return;
  const std::int64_t L = RowLength();
  if (layout_invalid || PiecesOverlap() || (length_read > 0 && length_read != L)) {
    defer = true;  // CheckCase throws (the layout), or the positions were read with another L than the step's
    return;
  }
  next_nonempty.assign(static_cast<std::size_t>(doc_count), -1);
  const std::vector<std::int64_t>& order = StepOrder();
  for (std::int64_t e = -1, k = static_cast<std::int64_t>(order.size()); k-- > 0;) {
    next_nonempty[static_cast<std::size_t>(order[k])] = e;
    if (Doc(order[k]).size > 0) e = order[k];
  }
  ResolvePending();
  v.findings.insert(v.findings.end(), row_findings.begin(), row_findings.end());
  if (targets) v.findings.push_back(*targets);
  if (visible_padding) AddNote(VisiblePaddingNote());
  if (missing_encoding) AddNote(MissingBoundaryEncodingNote(RequiredBoundaryField(policy().boundary_source)));
  v.utilization = slots > 0 ? static_cast<double>(used) / static_cast<double>(slots) : 1.0;
  for (auto& s : sums) {
    s.count = policy().count_basis == CountBasis::kTargets ? s.weight : s.labels;
    v.valid_targets += s.weight;
    v.counted += DenominatorCount(policy(), s.weight, s.labels, static_cast<double>(s.length));
  }
  if (options.efficiency && v.utilization < options.min_utilization) add(Invariant::kEfficiency);
  if (policy().efficiency == Efficiency::kNoMergeableRows) MergeableRows();
  Totals();
}

// Checker::CheckNoMergeableRows: used(r) + used(s) > C for every two rows of a rank. The pair with the fewest
// used slots together is the rank's two rows with the fewest (the earliest on ties), which is the pair the
// oracle names; if those two do not fit in one row, no two rows of the rank do. The finding is on the later.
void FastStepChecker::Impl::MergeableRows() {
  const std::int64_t C = MergeCapacity(policy(), RowLength());
  struct Two {
    std::int64_t a = -1, b = -1;  // the flat rows with the fewest used slots, a before b in (used, row) order
  };
  std::map<std::int64_t, Two> by_rank;
  auto fewer = [&](std::int64_t x, std::int64_t y) {
    const auto ux = sums[static_cast<std::size_t>(x)].used, uy = sums[static_cast<std::size_t>(y)].used;
    return ux != uy ? ux < uy : x < y;
  };
  for (std::int64_t r = 0; r < static_cast<std::int64_t>(sums.size()); ++r) {
    Two& t = by_rank[mbs[static_cast<std::size_t>(row_microbatch[static_cast<std::size_t>(r)])].rank];
    if (t.a < 0 || fewer(r, t.a)) {
      t.b = t.a;
      t.a = r;
    } else if (t.b < 0 || fewer(r, t.b)) {
      t.b = r;
    }
  }
  for (const auto& [rank, t] : by_rank) {
    if (t.b < 0) continue;
    if (sums[static_cast<std::size_t>(t.a)].used + sums[static_cast<std::size_t>(t.b)].used <= C)
      v.findings.push_back({Invariant::kEfficiency, std::max(t.a, t.b), -1});
  }
}

void FastStepChecker::Impl::Finish() {
  if (!defer) {
    try {
      Decide();
    } catch (Outcome) {
      defer = true;
    }
  }
  if (defer) {
    v.outcome = Outcome::kDefer;
    return;
  }
  std::stable_sort(v.findings.begin(), v.findings.end(),
                   [](const Finding& a, const Finding& b) { return a.invariant < b.invariant; });
  v.outcome = v.findings.empty() ? Outcome::kPassed : Outcome::kViolated;
}

StepInput StepInput::Of(const PackRequest& request, const PackResult& packed, StepDocuments& documents,
                        const CheckOptions& options) {
  StepInput in;
  in.policy = &request.policy;
  in.row_length = request.row_length;
  in.dp_world_size = request.dp_world_size;
  in.SetPacked(packed);
  in.documents = &documents;
  in.options = options;
  return in;
}

void StepInput::SetPacked(const PackResult& packed) {
  microbatches.clear();
  for (const auto& mb : packed.microbatches) microbatches.push_back(&mb);
  refusal = packed.refusal ? &*packed.refusal : nullptr;
  fault = packed.fault ? &*packed.fault : nullptr;
}

void FastStepChecker::Begin(const StepInput& input) { impl_->Begin(input); }

void FastStepChecker::Add(const CandidateMicrobatch& microbatch) {
  auto& views = impl_->row_views;
  views.clear();
  for (const CandidateRow& row : microbatch.rows) views.push_back(RowView::Of(row));
  impl_->Add(microbatch, views);
}

void FastStepChecker::Add(const CandidateMicrobatch& microbatch, std::span<const RowView> rows) {
  impl_->Add(microbatch, rows);
}

const StepVerdict& FastStepChecker::Finish() {
  impl_->Finish();
  return impl_->v;
}

const StepVerdict& FastStepChecker::Check(const StepInput& input) {
  Begin(input);
  if (!input.fault && !input.refusal)
    for (const auto* mb : input.microbatches) Add(*mb);
  return Finish();
}

}  // namespace packoracle::fastcheck
