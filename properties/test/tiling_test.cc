// TileDocument (oracle/tiling.h), the one statement of document tiling, pinned token by token against the
// plainest reading of DESIGN §4 `coverage`: count how many pieces cover each token.
#include <gtest/gtest.h>  // before rapidcheck/gtest.h

#include <rapidcheck/gtest.h>

#include <algorithm>
#include <vector>

#include "packoracle/oracle/tiling.h"

namespace packoracle {
namespace {

// Per token of the document: how many times it is repeated, whether it is dropped inside the document (a gap)
// or in the missing tail; and why a missing tail is excused.
// `placed`: under overflow: drop, how many pieces hold each token of a document the policy drops.
struct TokenVerdicts {
  std::vector<int> repeats;
  std::vector<bool> dropped, tail;
  TailExemption exemption = TailExemption::kNone;
  std::vector<int> placed;
  bool operator==(const TokenVerdicts& o) const {
    return repeats == o.repeats && dropped == o.dropped && tail == o.tail && exemption == o.exemption &&
           placed == o.placed;
  }
};

// The brute-force statement: c(t) = the pieces covering token t. A token covered c > 1 times is repeated
// c − 1 times. A maximal run of uncovered tokens is dropped, except a run of one token under stride L+1 (a
// window's row-end target); the run that reaches the document's end is its missing tail, excused as the
// policy says (tiling.h lists why).
// The tokens a truncated document keeps, restated: the row length, or the largest multiple of k not above it
// under truncate_to: pad_multiple.
std::int64_t Kept(const Policy& policy, const TilingContext& context) {
  if (policy.truncate_to != TruncateTo::kPadMultiple) return context.row_length;
  std::int64_t kept = 0;
  while (kept + policy.pad_to.multiple <= context.row_length) kept += policy.pad_to.multiple;
  return kept;
}

TokenVerdicts BruteForce(std::int64_t size, const std::vector<TilingPiece>& pieces, const Policy& policy,
                         const TilingContext& context) {
  const auto n = static_cast<std::size_t>(size);
  std::vector<int> count(n, 0);
  for (const auto& p : pieces)
    for (std::int64_t t = p.offset; t < p.offset + p.length; ++t) ++count[static_cast<std::size_t>(t)];
  TokenVerdicts v{std::vector<int>(n, 0), std::vector<bool>(n, false), std::vector<bool>(n, false), {},
                  std::vector<int>(n, 0)};
  // overflow: drop and more tokens than the row: nothing of the document belongs in a row; every token a
  // piece holds is placed that many times, and a document in no piece is excused.
  if (policy.overflow == Overflow::kDrop && size > context.row_length) {
    v.placed = count;
    if (pieces.empty()) v.exemption = TailExemption::kDropped;
    return v;
  }
  for (std::size_t t = 0; t < n; ++t) v.repeats[t] = std::max(0, count[t] - 1);
  const bool l_plus_1 = policy.stream_stride == StreamStride::kLPlus1;
  for (std::size_t a = 0; a < n;) {
    if (count[a] > 0) {
      ++a;
      continue;
    }
    std::size_t b = a;
    while (b < n && count[b] == 0) ++b;
    const bool one_token = b - a == 1;
    if (b < n) {
      if (!(l_plus_1 && one_token))
        for (std::size_t t = a; t < b; ++t) v.dropped[t] = true;
    } else {
      const bool stream = policy.stream_stride != StreamStride::kNone;
      if (l_plus_1 && one_token) v.exemption = TailExemption::kWindowRowEndTarget;
      else if (policy.overflow == Overflow::kTruncate && static_cast<std::int64_t>(a) >= Kept(policy, context))
        v.exemption = TailExemption::kTruncated;
      else if (stream && policy.padding == Padding::kNone) v.exemption = TailExemption::kStreamRemainder;
      else if (policy.row_end_target == RowEndTarget::kNextInStream && context.ends_stream && one_token)
        v.exemption = TailExemption::kStreamEnd;
      else if (context.may_stop_early) v.exemption = TailExemption::kStoppedEarly;
      else
        for (std::size_t t = a; t < b; ++t) v.tail[t] = true;
    }
    a = b;
  }
  return v;
}

// The same verdicts read from TileDocument's findings.
TokenVerdicts FromFindings(std::int64_t size, const DocumentTiling& tiling) {
  const auto n = static_cast<std::size_t>(size);
  TokenVerdicts v{std::vector<int>(n, 0), std::vector<bool>(n, false), std::vector<bool>(n, false),
                  tiling.tail_exemption, std::vector<int>(n, 0)};
  for (const auto& f : tiling.findings) {
    RC_ASSERT(0 <= f.begin);
    RC_ASSERT(f.begin < f.end);
    RC_ASSERT(f.end <= size);
    for (auto t = static_cast<std::size_t>(f.begin); t < static_cast<std::size_t>(f.end); ++t) {
      if (f.fault == TilingFault::kOverlap) ++v.repeats[t];
      if (f.fault == TilingFault::kGap) v.dropped[t] = true;
      if (f.fault == TilingFault::kMissingTail) v.tail[t] = true;
      if (f.fault == TilingFault::kPlacedDropped) ++v.placed[t];
    }
  }
  return v;
}

// Pieces near a tiling: the document cut at random points, then pieces dropped, shifted by a token or
// repeated (sizes are small, so edges and one-token runs are common); sorted by offset.
std::vector<TilingPiece> NearTiling(std::int64_t size) {
  std::vector<TilingPiece> pieces;
  for (std::int64_t at = 0; at < size;) {
    const auto length = *rc::gen::inRange<std::int64_t>(1, size - at + 1);
    pieces.push_back({at, length, 0});
    at += length;
  }
  const int edits = *rc::gen::inRange(0, 4);
  for (int e = 0; e < edits && !pieces.empty(); ++e) {
    const auto k = *rc::gen::inRange<std::size_t>(0, pieces.size());
    switch (*rc::gen::inRange(0, 4)) {
      case 0: pieces.erase(pieces.begin() + static_cast<std::ptrdiff_t>(k)); break;
      case 1: pieces.push_back(pieces[k]); break;
      case 2:  // one token later or earlier, its end kept
        if (pieces[k].length > 1) ++pieces[k].offset, --pieces[k].length;
        else if (pieces[k].offset > 0) --pieces[k].offset, ++pieces[k].length;
        break;
      default:  // one token longer or shorter
        if (pieces[k].offset + pieces[k].length < size) ++pieces[k].length;
        else if (pieces[k].length > 1) --pieces[k].length;
    }
  }
  std::stable_sort(pieces.begin(), pieces.end(), [](const auto& a, const auto& b) { return a.offset < b.offset; });
  for (std::size_t k = 0; k < pieces.size(); ++k) pieces[k].index = 100 + k;
  return pieces;
}

Policy TilingPolicy() {
  Policy p;
  p.overflow = *rc::gen::element(Overflow::kError, Overflow::kTruncate, Overflow::kSplit, Overflow::kDrop);
  p.stream_stride = *rc::gen::element(StreamStride::kNone, StreamStride::kL, StreamStride::kLPlus1);
  p.padding = *rc::gen::element(Padding::kNone, Padding::kRight);
  p.row_end_target = *rc::gen::element(RowEndTarget::kNone, RowEndTarget::kNextInStream, RowEndTarget::kNextInDoc);
  if (p.overflow == Overflow::kTruncate && *rc::gen::arbitrary<bool>()) {  // rows padded to a multiple of k
    p.padding = Padding::kRight;
    p.pad_to = PadTo{PadTo::Kind::kMultipleOf, *rc::gen::inRange<std::int64_t>(1, 6)};
    p.truncate_to = TruncateTo::kPadMultiple;
  }
  return p;
}

RC_GTEST_PROP(Tiling, EveryTokenAsTheBruteForceCountSays, ()) {
  const auto size = *rc::gen::inRange<std::int64_t>(0, 17);
  const auto pieces = NearTiling(size);
  const Policy policy = TilingPolicy();
  const TilingContext context{*rc::gen::inRange<std::int64_t>(1, 20), *rc::gen::arbitrary<bool>(),
                              *rc::gen::arbitrary<bool>()};
  const DocumentTiling tiling = TileDocument(size, pieces, policy, context);
  RC_ASSERT(FromFindings(size, tiling) == BruteForce(size, pieces, policy, context));
  // Each finding names the piece it was found at (the missing tail: the last one), by the caller's index.
  for (const auto& f : tiling.findings) {
    if (pieces.empty()) {
      RC_ASSERT(!f.piece.has_value());
      continue;
    }
    RC_ASSERT(f.piece.has_value());
    const auto& named = pieces[*f.piece - 100];
    const bool names_its_piece =
        f.fault == TilingFault::kMissingTail ? *f.piece == pieces.back().index : named.offset == f.piece_offset;
    if (f.fault == TilingFault::kPlacedDropped) RC_ASSERT(named.offset == f.begin && named.length == f.end - f.begin);
    RC_ASSERT(names_its_piece);
  }
}

// In row order (CheckCase), a piece before its predecessor reads as a gap, then as an overlap.
TEST(Tiling, WalksPiecesInTheOrderGiven) {
  const Policy policy{};
  const auto tiling = TileDocument(6, {{3, 3, 0}, {0, 3, 1}}, policy, {8, false, false});
  ASSERT_EQ(tiling.findings.size(), 2u);
  EXPECT_EQ(tiling.findings[0].fault, TilingFault::kGap);
  EXPECT_EQ(tiling.findings[0].expected, 0);
  EXPECT_EQ(tiling.findings[0].piece_offset, 3);
  EXPECT_EQ(tiling.findings[1].fault, TilingFault::kOverlap);
  EXPECT_EQ(tiling.findings[1].piece, 1u);
}

TEST(Tiling, TruncationExcusesOnlyTheTailPastTheRow) {
  Policy policy;
  policy.overflow = Overflow::kTruncate;
  EXPECT_TRUE(TileDocument(10, {{0, 8, 0}}, policy, {8, false, false}).findings.empty());
  const auto short_prefix = TileDocument(10, {{0, 7, 0}}, policy, {8, false, false});
  ASSERT_EQ(short_prefix.findings.size(), 1u);
  EXPECT_EQ(short_prefix.findings[0].fault, TilingFault::kMissingTail);
  EXPECT_EQ(short_prefix.findings[0].begin, 7);
}

// truncate_to: pad_multiple (TRL pack_dataset with seq_length = L//k*k): a row of 10 padded to a multiple of 8
// keeps 8 tokens of a long document; 7 drop one it had room for; under truncate_to: row_len 8 drop two.
TEST(Tiling, TruncationAtThePaddingMultipleExcusesTheTailPastFloorLOverKTimesK) {
  Policy policy;
  policy.overflow = Overflow::kTruncate;
  policy.pad_to = PadTo{PadTo::Kind::kMultipleOf, 8};
  policy.truncate_to = TruncateTo::kPadMultiple;
  EXPECT_TRUE(TileDocument(12, {{0, 8, 0}}, policy, {10, false, false}).findings.empty());
  EXPECT_EQ(TileDocument(12, {{0, 8, 0}}, policy, {10, false, false}).tail_exemption, TailExemption::kTruncated);
  const auto short_prefix = TileDocument(12, {{0, 7, 0}}, policy, {10, false, false});
  ASSERT_EQ(short_prefix.findings.size(), 1u);
  EXPECT_EQ(short_prefix.findings[0].begin, 7);
  EXPECT_TRUE(TileDocument(9, {{0, 8, 0}}, policy, {10, false, false}).findings.empty());  // 9 ≤ L, cut at 8
  policy.truncate_to = TruncateTo::kRowLen;
  EXPECT_EQ(TileDocument(12, {{0, 8, 0}}, policy, {10, false, false}).findings.size(), 1u);
}

// overflow: drop (axolotl's excess_length_strategy: drop): a document of 9 tokens in rows of 8 belongs in no
// row: absent, it is excused; its first 8 tokens in a row (a packer that truncates instead) are a finding; a
// document of exactly 8 tokens is kept and tiled as under error.
TEST(Tiling, DropExcusesALongDocumentInNoRowAndFindsEveryPieceOfIt) {
  Policy policy;
  policy.overflow = Overflow::kDrop;
  const auto absent = TileDocument(9, {}, policy, {8, false, false});
  EXPECT_TRUE(absent.findings.empty());
  EXPECT_EQ(absent.tail_exemption, TailExemption::kDropped);
  const auto truncated = TileDocument(9, {{0, 8, 3}}, policy, {8, false, false});
  ASSERT_EQ(truncated.findings.size(), 1u);
  EXPECT_EQ(truncated.findings[0].fault, TilingFault::kPlacedDropped);
  EXPECT_EQ(truncated.findings[0].end, 8);
  EXPECT_EQ(truncated.findings[0].piece, 3u);
  EXPECT_EQ(TileDocument(9, {{0, 5, 0}, {5, 4, 1}}, policy, {8, false, false}).findings.size(), 2u);
  EXPECT_TRUE(TileDocument(8, {{0, 8, 0}}, policy, {8, false, false}).findings.empty());
  const auto missing = TileDocument(8, {}, policy, {8, false, false});  // kept, so its absence is a finding
  ASSERT_EQ(missing.findings.size(), 1u);
  EXPECT_EQ(missing.findings[0].fault, TilingFault::kMissingTail);
  policy.shift = Shift::kDocument;  // 9 tokens are 8 inputs: kept
  EXPECT_TRUE(TileDocument(9, {{0, 8, 0}}, policy, {8, false, false}).findings.empty());
}

TEST(Tiling, NextInStreamExcusesTheLastTokenOfTheStreamsLastDocumentOnly) {
  Policy policy;
  policy.overflow = Overflow::kSplit;
  policy.stream_stride = StreamStride::kL;
  policy.row_end_target = RowEndTarget::kNextInStream;
  EXPECT_EQ(TileDocument(5, {{0, 4, 0}}, policy, {4, true, false}).tail_exemption, TailExemption::kStreamEnd);
  EXPECT_EQ(TileDocument(5, {{0, 4, 0}}, policy, {4, false, false}).findings.size(), 1u);
  EXPECT_EQ(TileDocument(5, {{0, 3, 0}}, policy, {4, true, false}).findings.size(), 1u);
}

}  // namespace
}  // namespace packoracle
