// Where each document piece sits in rows that carry no doc_spans, derived from the documents alone (never from
// the producer's boundary tensors, which are what is checked). The one owner of this reading: check_batch,
// check_step and the guard (packoracle._batch.SpanMatcher binds it); the dump converters' sequential cursor
// (packoracle.dump.match_sequential, which must run without the extension) is tested against it.
//
// Each row is read left to right: a piece is the rest of the document cut at the previous row's end, or else
// the first unplaced document (in the given order) whose tokens start here, whole or, when the policy splits
// or truncates, cut at the row's end. Where the policy splits and a row starts with neither, its first piece
// may continue any document from past its first token (rows handed out out of stream order: shuffled stream
// windows). Slots where no document matches are left without a span: the checks
// then report them (coverage, padding).
//
// A document made only of the pad id, where the rest of the row is the pad id too, is read as padding unless a
// slot it would cover is a target (padding is never a target). When the greedy reading leaves the step
// unexplained (misses(): rows whose rest is not the pad id; Unplaced(): documents never placed), Solve()
// searches every reading of the rows seen, depth-first, for one that places every document, padding being a
// trailing run of the pad id, and replaces the greedy spans with it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "packoracle/oracle/document.h"
#include "packoracle/oracle/policy.h"
#include "packoracle/properties/candidate.h"

namespace packoracle::jobs {

// What a row's own encodings say about where its pieces lie: the evidence that chooses between readings the
// tokens allow alike (never what decides a reading: an encoding that is wrong is still what the checks find).
struct RowEvidence {
  std::vector<std::int64_t> starts;          // where the encodings start segments, sorted; empty: none read
  std::optional<std::int64_t> padding_from;  // where the row's marks of padding (a doc id below 0, an
                                             // attention_mask of 0) start its trailing run; none: no marks
  std::int64_t padding_until = 0;            // where the leading run of such marks ends (0: none; padding: left)
  RowEvidence() = default;
  RowEvidence(std::vector<std::int64_t> segment_starts) : starts(std::move(segment_starts)) {}  // NOLINT: implicit
};

// A row's evidence under `policy`: EncodedSegments' starts (properties/backend_attention.h) and its padding marks.
RowEvidence EvidenceOf(const CandidateRow& row, const Policy& policy);

// One derived piece: `document` indexes the documents the derivation was built with.
struct DerivedSpan {
  std::int64_t document = 0;
  std::int64_t start = 0;
  std::int64_t length = 0;
  std::int64_t doc_offset = 0;
  bool operator==(const DerivedSpan&) const = default;
};

class SpanDerivation {
 public:
  // The search's bound (calls of its depth-first step): beyond it the greedy reading stays.
  static constexpr std::int64_t kSolveSteps = 20000;

  // `documents`: their tokens as placed (the policy's delimiters added), in the order the packer was given them.
  // `left_padded` (padding: left): a row's padding is its leading run (LeadingPadding), each row is read from
  // where that ends and its spans are placed after it; everything below then reads the rows without it.
  SpanDerivation(std::vector<std::vector<Token>> documents, Overflow overflow, std::optional<Token> pad_id,
                 bool left_padded = false);
  // The same, the tokens viewed where the caller holds them, alive and unchanged for the derivation's life (the
  // guard's documents: read into a _core.Documents once per batch, not copied again here).
  SpanDerivation(std::vector<std::span<const Token>> documents, Overflow overflow, std::optional<Token> pad_id,
                 bool left_padded = false);
  SpanDerivation(SpanDerivation&&) = default;
  SpanDerivation(const SpanDerivation&) = delete;  // its views may point into its own storage

  // A row's evidence (EvidenceOf), asked for only where two documents both match at a slot of the row or a
  // document may be read as its padding.
  using StartsOf = std::function<RowEvidence()>;

  // The spans of the next row of the step. `targets`: which of its slots are targets (a label that is not
  // ignored and a loss_mask that is not 0), or empty when unknown. `starts`: the row's encodings, or null.
  // They only choose between documents whose tokens both match at a slot (one that ends where the row does or
  // a segment starts is read first, then one that ends where padding starts: EndEvidence): the tokens decide every reading, so an encoding
  // that is wrong is still what the checks find.
  // `viewed`: the caller keeps the row's tokens alive and unchanged for the derivation's life, and they are
  // viewed where they are (check_batch's batch arrays); else they are copied (Solve reads every row again).
  const std::vector<DerivedSpan>& Match(std::span<const Token> row, std::span<const std::uint8_t> targets,
                                        const StartsOf& starts = nullptr, bool viewed = false);

  std::int64_t misses() const { return misses_; }
  std::int64_t Unplaced() const;
  // Searches for a reading of every row seen that places every document (padding: a trailing run of `pad_id`);
  // on success the rows' spans are replaced, misses() is 0, and it returns true. A reading the rows' evidence
  // bears out (Contradicts: none) is taken first; where there is none, the greedy reading stays if it placed
  // every document, else the first reading that does.
  bool Solve(Token pad_id);
  // Which documents are interchangeable: the same kind (and the same tokens) where placing one or the other gives
  // the same verdict (tokens and supervision alike). Default: the same tokens alone. The search tries one of a
  // kind where several match, so that documents alike in tokens but not in supervision are still told apart.
  void Interchangeable(std::vector<std::int64_t> kinds) { kinds_ = std::move(kinds); }
  // Up to `limit` other readings of every row seen that place every document, each differing from rows() in
  // some piece, of the tier rows() came from (bearing out the rows' evidence where it does): the readings an
  // audit must also hold the rows to before it calls a verdict (where theirs differ, it is ambiguous). Searched
  // only where the derivation met a choice (two documents matching at a slot, a row ending in the pad id that
  // a document starts with, a row starting inside a document, a search), within kSolveSteps.
  std::vector<std::vector<std::vector<DerivedSpan>>> OtherReadings(Token pad_id, std::size_t limit) const;
  // Every row's spans so far, in the order the rows were matched (Solve may have replaced them).
  const std::vector<std::vector<DerivedSpan>>& rows() const { return left_ ? Shifted(spans_, shifted_) : spans_; }
  // Rows whose greedy reading the rows' own evidence contradicts (Contradicts), among those whose encodings were
  // read.
  std::int64_t contradicted() const { return contradicted_; }
  // Once a step's (or a run's) rows are all matched: where the greedy reading leaves them unexplained (a miss,
  // an unplaced document) or the rows' evidence contradicts it, Solve with `pad_id`. The one rule check_step,
  // the guard and verify apply; true when the spans were replaced (re-read rows()).
  bool Finish(Token pad_id) { return misses_ + Unplaced() + contradicted_ > 0 && Solve(pad_id); }

 private:
  struct Search;
  // Match on a row without padding before its documents (all of it, or what follows its leading padding).
  const std::vector<DerivedSpan>& MatchRow(std::span<const Token> row, std::span<const std::uint8_t> targets,
                                           const StartsOf& starts, bool viewed);
  // Under padding: left, where the row's leading padding ends: where its leading marks of padding end, where the
  // row carries marks; else the leading run of pad ids that are no target, less what of it a document starting
  // with the pad id is read as: the next unplaced document in order where it starts with the pad id (the
  // longest run after which it matches); else the run whole where an unplaced document matches after it; else
  // the longest run after which one does (the run whole where none does).
  std::int64_t LeadingPadding(std::span<const Token> row, std::span<const std::uint8_t> targets,
                              const std::optional<RowEvidence>& evidence) const;
  bool MatchesAt(std::int64_t k, std::span<const Token> row, std::int64_t i) const;  // document k, whole or cut
  bool UnplacedMatchesAt(std::span<const Token> row, std::int64_t i) const;
  // `readings` with each row's spans moved past its leading padding (leads_), into `out`.
  const std::vector<std::vector<DerivedSpan>>& Shifted(const std::vector<std::vector<DerivedSpan>>& readings,
                                                       std::vector<std::vector<DerivedSpan>>& out) const;
  std::optional<std::int64_t> NextDocument(std::size_t r, std::int64_t i, const StartsOf& starts);
  // How well row r's encodings bear out document k at slot i (whole, or cut at the row's end) ending where it
  // would: 2 where the row ends there or its encodings start a segment there, 1 where only padding (a run of the
  // pad id) starts there, 0 otherwise or where the row carries no encoding. An encoded start outranks padding:
  // with doc_ids [0 0] over [x pad], the row says one document of two slots, not one slot and padding.
  int EndEvidence(std::size_t r, std::int64_t i, std::int64_t k) const;
  // `candidates` (documents matching at slot i of row r) reordered, stably: the best EndEvidence first.
  void PreferEncoded(std::size_t r, std::int64_t i, std::vector<std::int64_t>& candidates) const;
  bool PaddingRatherThan(std::int64_t k, std::size_t r, std::int64_t i) const;
  // The evidence a reading of row r must bear out where the row carries it (its encodings were read, its targets
  // are known): a piece starts where the encodings start a segment, and padding is never a target. Only
  // checked where a document could be read as padding or a segment start was asked for: the tokens decide
  // every other reading. Where the row marks its padding, pieces end and padding starts where the marks do.
  bool StartBorneOut(std::size_t r, std::int64_t start) const;
  bool EndBorneOut(std::size_t r, std::int64_t end) const;
  bool PaddingBorneOut(std::size_t r, std::int64_t i) const;
  bool TargetFrom(std::size_t r, std::int64_t i) const;
  bool Contradicts(std::size_t r, const std::vector<DerivedSpan>& spans) const;
  bool PaddingFrom(std::span<const Token> row, std::int64_t i) const;
  std::optional<std::int64_t> FirstUnplaced() const;
  // Per document, the token ranges [from, to) its pieces so far hold (a few a document: intervals, not bits).
  using Claimed = std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>>;
  std::optional<DerivedSpan> ContinuedPiece(std::span<const Token> row, const Claimed& claimed) const;
  std::vector<DerivedSpan> ContinuedPieces(std::span<const Token> row, const Claimed& claimed) const;
  // Adds (claim) the span's range, false where it overlaps one already held; or takes it back (false: not held).
  bool Claim(Claimed& claimed, const DerivedSpan& span, bool claim) const;
  bool Free(const Claimed& claimed, const DerivedSpan& span) const;  // no token of the span held yet
  static bool Covered(const Claimed& claimed, std::int64_t document, std::int64_t from, std::int64_t to);
  void IndexDocuments();

  std::vector<std::vector<Token>> owned_;     // the documents, where the derivation holds them
  std::vector<std::span<const Token>> docs_;  // the documents read (into owned_ or the caller's storage)
  bool cut_ = false;    // overflow split or truncate: a piece may end at the row's end, short of its document;
                        // drop too: a packer that truncates what it should drop is read as it packed (the
                        // checks then name the dropped document's piece, as verify does from the spans)
  bool split_ = false;  // overflow split: the cut document continues at the next row's start
  std::optional<Token> pad_id_;
  std::vector<bool> all_pad_;  // documents made only of the pad id
  bool pad_first_ = false;     // some document starts with the pad id (padding and a document may be read alike)
  std::vector<bool> placed_;
  Claimed claimed_;  // per document, the token ranges some span holds
  std::unordered_map<Token, std::vector<std::int64_t>> by_first_;  // first token → documents, in order
  std::optional<std::pair<std::int64_t, std::int64_t>> open_;       // (document, offset) continued next row
  std::vector<std::span<const Token>> rows_;   // every row matched: viewed, or in row_copies_
  std::vector<std::vector<Token>> row_copies_;  // the rows not viewed (their buffers stay put as this grows)
  std::vector<std::vector<std::uint8_t>> targets_;
  std::vector<RowEvidence> starts_;                // per row, its encodings' evidence (Match's `starts`)
  std::vector<bool> starts_asked_;                 // per row, whether `starts` was asked (once a row at most)
  std::vector<std::vector<DerivedSpan>> spans_;
  std::int64_t misses_ = 0;
  std::int64_t contradicted_ = 0;
  bool left_ = false;                 // padding: left (the constructor's left_padded)
  std::vector<std::int64_t> leads_;   // per row, its leading padding (0 unless left_)
  mutable std::vector<std::vector<DerivedSpan>> shifted_;  // rows() under left_: spans_ placed after the padding
  std::vector<DerivedSpan> match_out_;                      // Match's answer under left_
  std::vector<std::int64_t> kinds_;  // Interchangeable; empty: every document one kind (the tokens decide)
  std::int64_t choices_ = 0;         // choices met while reading (OtherReadings searches only where some was)
  bool borne_out_ = true;            // rows() bear out the rows' evidence (the tier OtherReadings searches)
};

// The pad id a derivation reads trailing runs of as padding under `policy`: none where the policy pads nothing.
inline std::optional<Token> DerivationPad(const Policy& policy) {
  return policy.padding == Padding::kNone ? std::nullopt : std::optional<Token>(policy.pad_id);
}

// Whether a derivation under `policy` reads a row's padding as its leading run (the constructor's left_padded).
inline bool DerivationLeftPadded(const Policy& policy) { return policy.padding == Padding::kLeft; }

// Which slots of a row carry a target as its producer wrote them, 1 or 0 into `out`: a label that is not
// `ignore_index`, and a loss_mask that is not 0 where there is one. Match's evidence: padding is never a target.
void TargetSlots(std::span<const Token> labels, std::optional<std::span<const double>> loss_mask, Token ignore_index,
                 std::vector<std::uint8_t>& out);

}  // namespace packoracle::jobs
