// FastStepChecker's clean-row path: the common row (its spans tile the row from slot 0 in order, padding at
// the end, no loss_mask, no row-end target waiting for the stream) checked span by span in flat loops over
// the contiguous arrays, with no per-slot branch: every encoding against the spans, the positions, the
// targets and the counts. It only ever answers "clean" (and then leaves exactly the state the generic
// passes would: pieces, layout, sums) or "not sure"; anything not clean goes through CoverageRow, LayoutRow
// and RowPass (step_check.cc, step_rows.cc), which find what is wrong as the oracle would, and the oracle
// writes the report. The rules are the oracle's, restated per span; differential_test.cc pins the two paths
// to CheckCase on generated rows of every size. The three row passes are also built for AVX2 (PACKORACLE_CLONES,
// clones.h: the loader picks the clone the machine runs; the default one is the SSE2 build): their share of check_batch's
// samples fell from 14.7% to 9.9% under perf (bench/README.md, "A ninth pair").
#include <algorithm>
#include <optional>

#include "packoracle/fastcheck/clones.h"
#include "packoracle/oracle/segments.h"
#include "packoracle/properties/encoding_notes.h"
#include "step_impl.h"

namespace packoracle::fastcheck {
namespace {

// 1 when x is 0, else 0, in integer operations that vectorise on any x86-64 (SSE2 has no 64-bit compare): the
// loops below OR such words together instead of branching per slot.
inline std::uint64_t IsZero(std::uint64_t x) { return ((x - 1) & ~x) >> 63; }
inline std::uint64_t Differs(std::int64_t a, std::int64_t b) { return static_cast<std::uint64_t>(a ^ b); }

// ReusedDocId (oracle/segments.h) on a row whose doc_ids per_slot found constant within each span and changing
// at each span's start: the row's segments (runs of one id >= 0) are then one per span whose id is >= 0, plus
// the runs in the padding [real_end, n). Their first ids are gathered (a few per row, instead of a map probe
// per slot over the row) and any id found twice is a reuse. True: some id names two segments.
bool ReusesDocId(const std::int64_t* ids, std::int64_t n, std::int64_t real_end, std::span<const DocSpan> spans) {
  thread_local std::vector<std::int64_t> firsts;
  firsts.clear();
  for (const DocSpan& span : spans)
    if (ids[span.start] >= 0) firsts.push_back(ids[span.start]);
  // The padding opens a segment only where an id there is >= 0 (its sign bit clear): one flat OR of the ids'
  // complements first, so that the common padding (all -1) is not walked slot by slot with a branch.
  std::uint64_t clear = 0;
  for (std::int64_t i = real_end; i < n; ++i) clear |= ~static_cast<std::uint64_t>(ids[i]);
  for (std::int64_t i = real_end; (clear >> 63) != 0 && i < n; ++i)
    if (ids[i] >= 0 && (i == 0 || ids[i - 1] != ids[i])) firsts.push_back(ids[i]);
  std::sort(firsts.begin(), firsts.end());
  return std::adjacent_find(firsts.begin(), firsts.end()) != firsts.end();
}

// The lambdas of a target_clones function are functions of their own, built for the default target: one the
// compiler leaves out of line (as it may where a loop has many variants) runs its loop without AVX2. These are
// inlined into each clone.
#define INLINED __attribute__((always_inline))

// Calls f with the document's tokens as a typed pointer (int64 or int32), so the loops are monomorphic.
template <class F>
[[gnu::always_inline]] inline auto WithTokens(const DocumentView& doc, F&& f) {
  return doc.wide ? f(doc.wide) : f(doc.narrow);
}

}  // namespace

// The spans tile [0, real_end) in order from slot 0, each inside its row and document, every document known:
// CoverageRow's span checks for this shape. Fills span_doc. False: not the common shape, or a finding.
bool FastStepChecker::Impl::TileSpans(const RowView& row, std::int64_t& real_end) {
  const auto n = static_cast<std::int64_t>(row.input_ids.size());
  span_doc.clear();
  real_end = 0;
  for (const DocSpan& span : row.doc_spans) {
    const std::int64_t d = docs().Find(span.doc_uid);
    if (d < 0 || span.start != real_end || span.length <= 0 || span.start > n - span.length || span.doc_offset < 0 ||
        span.doc_offset > InputTokens(policy(), Doc(d).size) - span.length)
      return false;
    EnsureDocument(d);
    span_doc.push_back(static_cast<std::int32_t>(d));
    real_end += span.length;
  }
  return real_end == n || policy().padding == Padding::kRight;  // left-padded rows take the general path
}

// SegmentsRow on a tiled row: each encoding the row carries marks a segment start exactly at each span's
// first slot among the non-pad slots [0, real_end). `positions_matched`: PositionsClean found every span's
// positions first + t with first >= position_base (no modulo split): inside a span they then neither reset to
// the base nor step by other than 1, so the position encodings are read at the spans' first slots alone.
// `fused.doc_ids`: TokensAndTargetsClean found each span's doc_ids all its first slot's (none changes inside).
PACKORACLE_CLONES bool FastStepChecker::Impl::SegmentsClean(const RowView& row, std::int64_t real_end,
                                                                                bool positions_matched,
                                                                                Fused fused) const {
  const auto& spans = row.doc_spans;
  // segment_encodings: rows: cu_seqlens, seq_lens and doc_ids name the row, one segment from slot 0 to the
  // padding (the tiled row's one run of tokens).
  const bool rows = policy().segment_encodings == SegmentEncodings::kRows;
  // Starts from cu_seqlens / seq_lens: the non-empty segments' first slots, in order, must be the spans' starts
  // (under rows: slot 0 alone, where the row has a token).
  auto same_starts = [&](const std::vector<std::int64_t>& marks) {
    std::size_t p = 0;
    const std::size_t want = rows ? std::min<std::size_t>(spans.size(), 1) : spans.size();
    for (const std::int64_t at : marks) {
      if (at >= real_end) break;
      if (p == want || spans[p].start != at) return false;
      ++p;
    }
    return p == want;
  };
  std::vector<std::int64_t> marks;
  if (row.cu_seqlens) {
    const auto& cu = *row.cu_seqlens;
    for (std::size_t k = 0; k + 1 < cu.size(); ++k)
      if (cu[k + 1] > cu[k]) marks.push_back(cu[k]);
    if (!same_starts(marks)) return false;
  }
  if (row.seq_lens) {
    marks.clear();
    std::int64_t at = 0;
    for (const std::int64_t len : *row.seq_lens) {
      if (len > 0) marks.push_back(at);
      at += len;
    }
    if (!same_starts(marks)) return false;
  }
  // Per-slot encodings: `starts(i)` is non-zero where the encoding opens a segment at slot i: at each span's
  // start (or slot 0), and nowhere inside a span (not read there where `inside_known` says it opens none).
  auto per_slot = [&](auto starts, bool inside_known = false) {
    std::uint64_t inside = 0;
    bool missed = false;
    for (const DocSpan& span : spans) {
      missed |= span.start > 0 && starts(span.start) == 0;
      if (inside_known) continue;
      for (std::int64_t i = span.start + 1; i < span.start + span.length; ++i) inside |= starts(i);
    }
    return !missed && inside == 0;
  };
  if (row.doc_ids) {
    const auto* ids = row.doc_ids->data();
    if (rows) {  // one id over the row's tokens
      std::uint64_t inside = 0;
      for (std::int64_t i = 1; i < real_end; ++i) inside |= Differs(ids[i], ids[i - 1]);
      if (inside != 0) return false;
    } else if (!per_slot([&](std::int64_t i) { return Differs(ids[i], ids[i - 1]); }, fused.doc_ids) ||
               ReusesDocId(ids, static_cast<std::int64_t>(row.doc_ids->size()), real_end, spans)) {
      return false;
    }
  }
  const Policy& pol = policy();
  if (row.position_ids) {
    const auto* pos = row.position_ids->data();
    const std::int64_t base = pol.position_base;
    if (pol.boundary_source == BoundarySource::kPositionReset &&
        !per_slot([&](std::int64_t i) { return IsZero(Differs(pos[i], base)); }, positions_matched))
      return false;
    if (pol.boundary_source == BoundarySource::kPositionStep &&
        !per_slot([&](std::int64_t i) { return Differs(pos[i] - pos[i - 1], 1); }, positions_matched))
      return false;
  }
  const auto* in = row.input_ids.data();
  if (pol.boundary_source == BoundarySource::kEodCloses && pol.eos_id) {
    const Token eod = *pol.eos_id;
    if (!per_slot([&](std::int64_t i) { return IsZero(Differs(in[i - 1], eod)); })) return false;
  }
  if (pol.boundary_source == BoundarySource::kBosOpens && pol.bos_id) {
    const Token bos = *pol.bos_id;
    if (!per_slot([&](std::int64_t i) { return IsZero(Differs(in[i], bos)); })) return false;
  }
  return true;
}

// The position the first slot of `span` holds where positions step by 1 through a span (its slot t then holds
// first + t): the row's slot from the base (row_continuous), the document's offset from the base (split pieces
// continue), or the base. None under a modulo split, whose positions wrap at L.
std::optional<std::int64_t> FastStepChecker::Impl::FirstPosition(const DocSpan& span) const {
  const Policy& pol = policy();
  if (pol.positions == Positions::kRowContinuous) return pol.position_base + span.start;
  if (pol.split_positions == SplitPositions::kModulo) return std::nullopt;
  return pol.split_positions == SplitPositions::kContinue ? pol.position_base + span.doc_offset : pol.position_base;
}

// PositionsRow on a tiled row: the position each slot must hold, compared in one loop per span (or, where
// `fused.positions`, already compared by TokensAndTargetsClean: FirstPosition + t). `capped`: the check read L (a
// capped padding position or a modulo split), for Finish to compare with the step's L.
PACKORACLE_CLONES bool FastStepChecker::Impl::PositionsClean(const RowView& row, std::int64_t real_end,
                                                                                 bool& capped, Fused fused) const {
  const Policy& pol = policy();
  const auto& spans = row.doc_spans;
  const std::int64_t base = pol.position_base;
  capped = false;
  if (!row.position_ids) {  // only one piece from its document's start reads as positions 0, 1, ...
    if (pol.positions != Positions::kDocReset && base == 0) return true;
    const bool single = spans.empty() || (spans.size() == 1 && spans[0].doc_offset == 0);
    return single && base == 0 && pol.split_positions != SplitPositions::kModulo;
  }
  const std::int64_t L = given_row_length > 0 ? given_row_length : std::max(longest, std::int64_t{1});
  const auto* got = row.position_ids->data();
  std::uint64_t diff = 0;
  std::int64_t last = base - 1;  // the want of the slot before the padding
  for (const DocSpan& span : spans) {
    const std::int64_t s = span.start, o = span.doc_offset;
    if (const std::optional<std::int64_t> first = FirstPosition(span)) {
      if (!fused.positions)
        for (std::int64_t t = 0; t < span.length; ++t) diff |= Differs(got[s + t], *first + t);
      last = *first + span.length - 1;
    } else {  // a modulo split: positions wrap at L
      for (std::int64_t t = 0; t < span.length; ++t) diff |= Differs(got[s + t], base + (o + t) % L);
      capped |= o + span.length > L;
      last = base + (o + span.length - 1) % L;
    }
  }
  const auto n = static_cast<std::int64_t>(row.input_ids.size());
  if (pol.pad_positions == PadPositions::kZero) {
    for (std::int64_t i = real_end; i < n; ++i) diff |= Differs(got[i], 0);
  } else if (pol.pad_positions == PadPositions::kContinue) {
    const std::int64_t cap = base + L - 1;
    for (std::int64_t i = real_end; i < n; ++i) diff |= Differs(got[i], std::min(last + 1 + (i - real_end), cap));
    capped |= real_end < n && last + (n - real_end) > cap;
  }
  return diff == 0;
}

// PredictionOf for the last slot of span p of a tiled row (the slots inside a span predict their document's
// next token): the next span's first token at a document boundary, the document's last token (shift: document), the
// row end's target, or none.
// `waits`: a row-end target that is the next document of the stream (the generic pass keeps it for Finish).
Pred FastStepChecker::Impl::SpanEndPrediction(const RowView& row, std::size_t p, bool& waits) const {
  const auto& spans = row.doc_spans;
  const DocSpan& span = spans[p];
  const std::int64_t d = span_doc[p], k = span.doc_offset + span.length - 1;
  const auto n = static_cast<std::int64_t>(row.input_ids.size());
  const DocumentView& doc = Doc(d);
  auto in_doc = [&](std::int64_t td, std::int64_t tk, bool weighted) {
    return Pred{true, Doc(td).token(tk), td, tk, weighted ? 1.0 : 0.0};
  };
  waits = false;
  const bool per_document = policy().shift == Shift::kDocument;
  const bool doc_goes_on = k + 1 < InputTokens(policy(), doc.size);  // shift: document: the last is no input
  const bool followed = span.start + span.length < n && p + 1 < spans.size();  // by another span
  if (followed && span_doc[p + 1] == d && spans[p + 1].doc_offset == k + 1)
    return in_doc(d, k + 1, doc.supervised(k + 1) == 1);
  // Rule 5: under shift: document the document's last input predicts its last token, whatever follows.
  if (per_document && !doc_goes_on) return in_doc(d, k + 1, doc.supervised(k + 1) == 1);
  if (span.start + span.length < n) {
    if (!followed) return {};  // padding follows
    const std::int64_t nd = span_doc[p + 1], next_offset = spans[p + 1].doc_offset;
    if (!per_document && next_offset == 0 && nd != d)
      return in_doc(nd, 0, policy().boundary_target == BoundaryTarget::kIncluded && Doc(nd).supervised(0) == 1);
    return {};
  }
  if (policy().row_end_target == RowEndTarget::kNone) return {};
  if (doc_goes_on) return in_doc(d, k + 1, doc.supervised(k + 1) == 1);
  waits = policy().row_end_target == RowEndTarget::kNextInStream;
  return {};
}

// CoverageRow's token comparisons and TargetsAndSums' on a tiled row, in one loop per span (each document token
// read once for the slot that holds it and the prediction that targets it): each span's slots hold its
// document's tokens, the padding the pad id; every slot's label (or the next slot's, labels aligned) is the
// target PredictionOf gives, ignore_index where it gives none. `weighted`: the targets counted. `token_bits`: the
// bits of every document token compared with a slot ORed (the sign bit set exactly when one is negative).
// `fused`: the same loop also reads position_ids (slot t of a span holds FirstPosition + t, as PositionsClean
// compares them) and doc_ids (each the span's first slot's, as SegmentsClean's per-slot starts require), which
// those passes then leave out: five arrays read in one pass, not three passes (bench/README.md, "A thirteenth
// pair").
PACKORACLE_CLONES bool FastStepChecker::Impl::TokensAndTargetsClean(const RowView& row, std::int64_t real_end,
                                                                                        std::int64_t& weighted,
                                                                                        Fused fused,
                                                                                        std::uint64_t& token_bits) const {
  const bool aligned = policy().label_alignment == LabelAlignment::kAligned;
  const std::int64_t shift = aligned ? 1 : 0;
  const Token ignore = policy().ignore_index;
  const Token* labels = row.labels.data();
  const Token* ids = row.input_ids.data();
  const auto n = static_cast<std::int64_t>(row.labels.size());
  bool bad = false;
  weighted = 0;
  token_bits = 0;
  const Token* positions = fused.positions ? row.position_ids->data() : nullptr;
  const Token* doc_ids = fused.doc_ids ? row.doc_ids->data() : nullptr;
  for (std::size_t p = 0; p < row.doc_spans.size(); ++p) {
    const DocSpan& span = row.doc_spans[p];
    const DocumentView& doc = Doc(span_doc[p]);
    const Token* got = labels + span.start + shift;
    const Token* got_ids = ids + span.start;
    const std::int64_t inside = span.length - 1, first = span.doc_offset + 1;
    // The fused encodings at the span's slot t: 0 where they hold what the span requires.
    const Token* got_positions = positions ? positions + span.start : nullptr;
    const Token* got_doc_ids = doc_ids ? doc_ids + span.start : nullptr;
    const std::int64_t first_position = positions ? FirstPosition(span).value_or(0) : 0;
    const Token doc_id = doc_ids ? got_doc_ids[0] : 0;
    // (by value: the loops below vectorise only where the compiler sees that nothing they read can change)
    auto position_at = [got_positions, first_position](std::int64_t t) {
      return Differs(got_positions[t], first_position + t);
    };
    auto doc_id_at = [got_doc_ids, doc_id](std::int64_t t) { return Differs(got_doc_ids[t], doc_id); };
    bad |= WithTokens(doc, [&](const auto* tokens) INLINED {
      const auto* input = tokens + span.doc_offset;  // the slot's token; input[t + 1]: its prediction's target
      std::uint64_t diff = Differs(got_ids[inside], input[inside]);  // the span's last slot
      // The label is the target where supervised (and then must not read as ignored), else ignore_index.
      // Its sums are kept in locals, written back after the loop: a loop that stores through a reference may
      // change its own bound, as far as the compiler knows, and then is not vectorised.
      auto compare = [&](auto weight_of, auto fused_at) INLINED {
        const std::int64_t last = inside;  // a local copy: the loop's bound, which no store can change
        std::uint64_t found = fused_at(last), bits = static_cast<std::uint64_t>(input[last]);
        std::int64_t count = 0;
        for (std::int64_t t = 0; t < last; ++t) {
          const std::uint64_t w = weight_of(first + t), mask = 0 - w;
          const auto tok = static_cast<Token>(input[t + 1]);
          const auto word = static_cast<std::uint64_t>(tok), none = static_cast<std::uint64_t>(ignore);
          const auto want = static_cast<Token>((word & mask) | (none & ~mask));
          found |= Differs(got_ids[t], input[t]) | Differs(got[t], want) | (mask & IsZero(Differs(tok, ignore))) |
                   fused_at(t);
          bits |= static_cast<std::uint64_t>(input[t]);
          count += static_cast<std::int64_t>(w);
        }
        diff |= found;
        token_bits |= bits;
        weighted += count;
      };
      // One loop per layout of the supervised flags (DocumentView) and per set of fused encodings: no branch on
      // either per token.
      auto with_fused = [&](auto weight_of) INLINED {
        if (positions && doc_ids) compare(weight_of, [position_at, doc_id_at](std::int64_t t) { return position_at(t) | doc_id_at(t); });
        else if (positions) compare(weight_of, position_at);
        else if (doc_ids) compare(weight_of, doc_id_at);
        else compare(weight_of, [](std::int64_t) { return std::uint64_t{0}; });
      };
      if (doc.ints) with_fused([&](std::int64_t k) { return IsZero(Differs(doc.ints[k], 1)); });
      else if (doc.bits) with_fused([&](std::int64_t k) { return (doc.bits[k >> 6] >> (k & 63)) & 1; });
      else with_fused([](std::int64_t) { return std::uint64_t{1}; });
      return diff != 0;
    });
    bool waits = false;
    const Pred last = SpanEndPrediction(row, p, waits);
    const std::int64_t i = span.start + inside + shift;  // the slot whose label holds the span end's target
    const Token got_target = i < n ? labels[i] : 0;
    const bool got_weight = i < n && got_target != ignore;
    bad |= waits || got_weight != (last.weight > 0) || (last.weight > 0 && got_target != last.target);
    weighted += last.weight > 0 ? 1 : 0;
  }
  std::uint64_t padding = 0;  // padding holds the pad id and predicts nothing
  const Token pad = policy().pad_id;
  for (std::int64_t i = real_end; i < static_cast<std::int64_t>(row.input_ids.size()); ++i) padding |= Differs(ids[i], pad);
  for (std::int64_t i = real_end + shift; i < n; ++i) padding |= Differs(labels[i], ignore);
  return !bad && padding == 0;
}

// SegmentsRow's attention_mask part and AttentionRow on a tiled row whose encodings agree with the spans.
// `visible`: padding the mask lets queries see (a note, not a finding).
bool FastStepChecker::Impl::AttentionClean(const RowView& row, std::int64_t real_end, bool& visible) const {
  const auto spans = static_cast<std::int64_t>(row.doc_spans.size());
  const Policy& pol = policy();
  visible = false;
  if (row.attention_mask) {
    const auto* am = row.attention_mask->data();
    const auto n = static_cast<std::int64_t>(row.attention_mask->size());
    bool bad = false, zeros = false;
    for (std::int64_t i = 0; i < real_end; ++i) bad |= am[i] != 1;
    for (std::int64_t i = real_end; i < n; ++i) {
      bad |= am[i] != 0 && am[i] != 1;
      visible |= am[i] == 1;
      zeros |= am[i] == 0;
    }
    if (bad || (zeros && pol.attention == Attention::kDocCausal && spans > 1 && !row.cu_seqlens)) return false;
  }
  if (pol.attention == Attention::kRowCausal)  // an encoding that agrees with the spans isolates them (one that
    // names the row, under segment_encodings: rows, does not)
    return spans <= 1 || pol.segment_encodings == SegmentEncodings::kRows ||
           !(row.cu_seqlens || row.seq_lens || row.doc_ids);
  return HasRequiredBoundaryField(row, pol.boundary_source);  // else the generic pass decides (and notes)
}

// The clean row's predictions into the sums, as TargetsAndSums and AddPrediction add them. With the losses
// unknown every weighted target adds 1 (exact in doubles), so the counts go in at once; known losses are
// added slot by slot in the generic pass's order, so the sums are the same doubles.
void FastStepChecker::Impl::AddCleanSums(const RowView& row, std::int64_t R, std::size_t m, std::int64_t weighted) {
  RowSums& s = sums[static_cast<std::size_t>(R)];
  const bool aligned = policy().label_alignment == LabelAlignment::kAligned;
  const bool per_document = policy().denominator == Denominator::kSequenceMean;
  const bool losses_known = !docs().losses.empty();
  if (!losses_known) {
    const auto w = static_cast<double>(weighted);
    s.weight += w;
    s.loss += w;
    mb_loss[m] += w;
    if (!aligned) s.labels += w;
  }
  for (std::size_t p = 0; p < row.doc_spans.size() && (losses_known || per_document); ++p) {
    const DocSpan& span = row.doc_spans[p];
    const std::int64_t d = span_doc[p];
    const DocumentView& doc = Doc(d);
    auto add = [&](const Pred& pred) {
      if (losses_known) return AddPrediction(pred, R, m, d);
      per_doc[static_cast<std::size_t>(d)].first += 1.0;  // Loss 1: AddPrediction's per-document terms alone
      per_doc[static_cast<std::size_t>(d)].second += 1.0;
    };
    for (std::int64_t k = span.doc_offset + 1; k < span.doc_offset + span.length; ++k)
      if (doc.supervised(k) == 1) add(Pred{true, 0, d, k, 1.0});
    bool waits = false;
    const Pred last = SpanEndPrediction(row, p, waits);
    if (last.weight > 0) add(last);
  }
  if (aligned) {  // LabelsOf: the predictions of slots 0..n-2, and slot 0's own label when it has one
    s.labels += static_cast<double>(weighted);
    if (!row.doc_spans.empty()) {
      const std::int64_t k = row.doc_spans[0].doc_offset;
      const bool reachable = k > 0 || policy().boundary_target == BoundaryTarget::kIncluded;
      if (Doc(span_doc[0]).supervised(k) == 1 && reachable) s.labels += 1;
    }
  }
}

// The whole clean-row path for row R of micro-batch m (shape passed, no coverage finding so far): true when
// the row is clean, its effects on the step made; false with nothing changed but scratch and the documents
// looked up, for the generic passes to take the row.
bool FastStepChecker::Impl::CleanRow(const CandidateMicrobatch& mb, const RowView& row, std::int64_t R,
                                     std::size_t m) {
  if (row.loss_mask) return false;  // its values and weights: the generic pass
  std::int64_t real_end = 0, weighted = 0;
  std::uint64_t token_bits = 0;
  bool capped = false, visible = false;
  // PositionsClean before SegmentsClean: positions it matched need not be read again for segment starts.
  const bool stepped = policy().positions == Positions::kRowContinuous || policy().split_positions != SplitPositions::kModulo;
  // The encodings the token pass reads in its loop (Fused): position_ids that step by 1 through a span, doc_ids
  // that name each segment (not the row: segment_encodings rows reads them across spans).
  const Fused fused{stepped && row.position_ids.has_value(),
                    row.doc_ids.has_value() && policy().segment_encodings != SegmentEncodings::kRows};
  if (!TileSpans(row, real_end) || !TokensAndTargetsClean(row, real_end, weighted, fused, token_bits) ||
      !PositionsClean(row, real_end, capped, fused) || !SegmentsClean(row, real_end, stepped, fused) ||
      !AttentionClean(row, real_end, visible))
    return false;
  for (std::size_t p = 0; p < row.doc_spans.size(); ++p)
    pieces[static_cast<std::size_t>(span_doc[p])].push_back(
        {row.doc_spans[p].doc_offset, row.doc_spans[p].length, static_cast<std::size_t>(R)});
  LayoutRow(mb, R);
  const bool known_length = given_row_length > 0;
  if (capped) ReadWithLength(known_length ? given_row_length : std::max(longest, std::int64_t{1}), known_length);
  visible_padding = visible_padding || visible;
  v.clean_tokens_non_negative = v.clean_tokens_non_negative && (token_bits >> 63) == 0;
  sums[static_cast<std::size_t>(R)].used = real_end;
  used += real_end;
  slots += static_cast<std::int64_t>(row.input_ids.size());
  AddCleanSums(row, R, m, weighted);
  return true;
}

}  // namespace packoracle::fastcheck
