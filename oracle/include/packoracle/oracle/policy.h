// The policy: a packed batch's declared boundary semantics (DESIGN.md §3).
//
// Every packing convention answers the same questions differently: how labels are aligned, where document
// boundaries are encoded, who may attend to whom, how positions count, whether the prediction that crosses
// into the next document is trained, what a row's last slot predicts, how rows are padded, what happens to a
// document longer than a row, and what the summed loss is divided by. A Policy is one answer to each.
// A default-constructed Policy is the `reference` preset: document isolation as in the lesson,
//   L = Σ m·ℓ / Σ m,   A_ij = 1[j ≤ i]·1[d_j = d_i].
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "packoracle/oracle/document.h"

namespace packoracle {

// aligned: the target of prediction (r,i) is labels[r][i+1]; the last slot has none (HF, TRL).
// pre_shifted: labels[r][i] is the target of (r,i) (Megatron, torchtune, llm.c).
enum class LabelAlignment { kAligned, kPreShifted };

// Where the producer encodes document boundaries; the kit re-derives segments from it.
enum class BoundarySource {
  kSpans,          // the dump's doc_spans (ground truth) only
  kCuSeqlens,      // flash-attention varlen cu_seqlens
  kSeqLens,        // torchtune seq_lens
  kPositionReset,  // a segment starts where position == position_base (HF flash path, TRL)
  kPositionStep,   // a segment starts where position[i] - position[i-1] != 1 (HF SDPA/flex)
  kDocIds,         // per-token document ids (FlexAttention document_id, HF seq_idx)
  kEodCloses,      // the token after an EOD starts a segment (Megatron, torchtitan)
  kBosOpens,       // a BOS/EOT token starts a segment (llm.c)
  kNone,           // not encoded (one document per row, or attention across documents)
};

// doc_causal: C(i) = {j ≤ i : d_j = d_i}.  row_causal: C(i) = {j ≤ i}.
enum class Attention { kDocCausal, kRowCausal };

// How padding keys are treated by non-padding queries.
enum class PadKeys { kMasked, kOwnSegment, kVisible };

// doc_reset: position = offset in the document + position_base.  row_continuous: slot index + base.
enum class Positions { kDocReset, kRowContinuous };

// What positions padding slots carry: 0, the previous position + 1 (at most base + L - 1), or anything.
enum class PadPositions { kZero, kContinue, kAny };

// Positions of a document piece continued from an earlier row (doc_reset only): counting on from the
// document's start, counting on modulo the row length (torchtune split_across_pack), or from the base
// again at the row start (Megatron).
enum class SplitPositions { kContinue, kModulo, kRestart };

// May the prediction whose input is in document d target the first token of the next document?
enum class BoundaryTarget { kExcluded, kIncluded };

// The target of a row's last slot: none, the next token of the stream (windows overlap, Megatron/llm.c),
// or the next token of the same document carried into the next row (torchtune split_across_pack).
enum class RowEndTarget { kNone, kNextInStream, kNextInDoc };

// How far stream windows advance: L (llm.c, Megatron, TRL wrapped) or L+1 (torchtitan). JSON null = none.
enum class StreamStride { kNone, kL, kLPlus1 };

// Where a row shorter than its slots is padded: nowhere (rows keep their content), after its last token
// (right), or before its first token (left: HF tokenizers with padding_side="left", generation and RL rollout
// batches, where every row's content ends at its last slot).
enum class Padding { kNone, kRight, kLeft };

// DESIGN §3: where padding may sit in a row, slot by slot left to right: under padding right a token may not
// follow a padding slot (slot i padding ⇒ every slot after i is padding); under padding left a padding slot
// may not follow a token (slot i padding ⇒ every slot before i is padding). `is_pad`: slot i is padding;
// `seen_pad` / `seen_token`: some slot before i is padding / holds a token. (Padding at all under padding:
// none is its own finding.) Stated once: the coverage invariant and the fast verifier both ask this.
inline bool PaddingOutOfPlace(Padding padding, bool is_pad, bool seen_pad, bool seen_token) {
  if (padding == Padding::kRight) return !is_pad && seen_pad;
  if (padding == Padding::kLeft) return is_pad && seen_token;
  return false;
}

// Rows padded to the row length L, or to the next multiple of k, or (longest, a value added after version 1)
// every row of a micro-batch to the most slots any row of that micro-batch needs, at most L (LitGPT's
// get_sft_collate_fn, HF DataCollatorWithPadding(padding="longest")).
struct PadTo {
  enum class Kind { kRowLen, kMultipleOf, kLongest };
  Kind kind = Kind::kRowLen;
  std::int64_t multiple = 0;  // k, for kMultipleOf
  bool operator==(const PadTo& o) const { return kind == o.kind && multiple == o.multiple; }
};

// A document longer than a row: refused, cut to the row length, continued in the next row, or (drop, a value
// added after version 1: a version-1 policy never has it) left out of every row, neither refused nor cut
// (axolotl's default excess_length_strategy: drop, LLaMA-Factory's cutoff_len filter): DroppedDocument.
enum class Overflow { kError, kTruncate, kSplit, kDrop };

// The normalisation the producer declares (conventions.md §4 gives each formula; denominator.h computes).
enum class Denominator { kGlobalTargets, kRankMean, kMicrobatchMean, kSequenceMean, kAllPositions };

// What the producer counts: weighted targets, or labels != ignore_index without the shift (HF before #46204).
enum class CountBasis { kTargets, kUnshiftedLabels };

// reported: utilization is reported, never a violation. no_mergeable_rows: the packer promises first-fit
// quality: on each rank, no two rows of a step could be one row, used(r) + used(s) > MergeCapacity (used =
// non-pad slots, delimiters included). Coherent only where rows hold whole documents (PolicyProblems).
enum class Efficiency { kReported, kNoMergeableRows };

// Where overflow: truncate cuts a document: after its first L tokens (row_len), or after its first ⌊L/k⌋·k
// under pad_to multiple_of:k (pad_multiple: the most tokens a row padded to a multiple of k holds, TRL
// pack_dataset with seq_length = L//k*k). Coherent only with overflow: truncate and pad_to multiple_of:k
// (PolicyProblems).
enum class TruncateTo { kRowLen, kPadMultiple };

// What the segment encodings a backend isolates by (cu_seqlens, seq_lens, doc_ids) delimit: the documents of a
// row, or the row itself, one sequence per row (TRL pack_dataset 'wrapped' + the padding-free collator: no
// seq_lengths, so cu_seq_lens and seq_idx make each packed row one sequence). rows: the attention they give
// is the whole row, causal, so it is coherent only with attention: row_causal, and no boundary_source may
// read documents from them (PolicyProblems).
enum class SegmentEncodings { kDocuments, kRows };

// Where inputs and targets are shifted: over the row (row: the slot holding token k of a document predicts what
// the next slot holds, across a document boundary when the policy says so), or per document (document:
// torchtitan's HuggingFaceTextDataset since PR #4075, NeMo's GPTSFTPackedDataset collate): each effective
// document e of n tokens enters the rows as its inputs e[0..n-2] with the pre-shifted labels e[1..n-1], so
// its last token (the EOS) is a label only, never an input, and no prediction crosses a document boundary.
// Under document, every count of a document's tokens is a count of its n - 1 inputs (InputTokens): layouts,
// tiling, refusal, stream windows, truncation. Coherent only with pre_shifted labels, boundary_target
// excluded, no row_end_target next_in_stream nor stream_stride L+1, and no eod_closes (PolicyProblems).
enum class Shift { kRow, kDocument };

// consumer_overhead (DESIGN §4 efficiency): null, the attention work a consumer reports (ComputedWork,
// candidate.h) is reported only; p ≥ 0, the consumer promises to compute, in each micro-batch, at most
// (1 + p/100) times the (query, key) pairs the declared rule needs (RequiredAttentionPairs, batch.h):
//   100 · computed ≤ (100 + p) · required.
// 0: exactly what the rule needs (a varlen kernel over the pieces); 100: at most twice as much. p ≤ 10^6.

struct Policy {
  std::string preset;  // the preset this policy started from ("" when built key by key)
  LabelAlignment label_alignment = LabelAlignment::kPreShifted;
  std::int64_t ignore_index = -100;
  bool loss_mask = false;
  BoundarySource boundary_source = BoundarySource::kSpans;
  Attention attention = Attention::kDocCausal;
  PadKeys pad_keys = PadKeys::kMasked;
  Positions positions = Positions::kDocReset;
  std::int64_t position_base = 0;
  PadPositions pad_positions = PadPositions::kAny;
  SplitPositions split_positions = SplitPositions::kContinue;
  BoundaryTarget boundary_target = BoundaryTarget::kExcluded;
  RowEndTarget row_end_target = RowEndTarget::kNone;
  StreamStride stream_stride = StreamStride::kNone;
  Padding padding = Padding::kRight;
  Token pad_id = 0;
  PadTo pad_to;
  Overflow overflow = Overflow::kError;
  std::optional<Token> eos_id;  // appended to every document by the packer
  std::optional<Token> bos_id;  // prepended to every document by the packer
  Denominator denominator = Denominator::kGlobalTargets;
  CountBasis count_basis = CountBasis::kTargets;
  // Keys added after version 1: JSON leaves each out at its default (PolicyToJson, KeysAfterVersionOne).
  Efficiency efficiency = Efficiency::kReported;
  TruncateTo truncate_to = TruncateTo::kRowLen;
  SegmentEncodings segment_encodings = SegmentEncodings::kDocuments;
  Shift shift = Shift::kRow;
  std::optional<std::int64_t> consumer_overhead;  // a percentage in 0..10^6, or nullopt: reported only
};

bool operator==(const Policy& a, const Policy& b);
inline bool operator!=(const Policy& a, const Policy& b) { return !(a == b); }

// Rows padded to a multiple of k larger than the row length L: no row can hold a token (a row of n ≥ 1 tokens
// rounds up to ⌈n/k⌉·k ≥ k > L slots), so the policy refuses every input that has one.
inline bool PadsBeyondTheRow(const Policy& p, std::int64_t row_length) {
  return p.padding != Padding::kNone && p.pad_to.kind == PadTo::Kind::kMultipleOf && p.pad_to.multiple > row_length;
}

// The tokens of an effective document of n tokens that are inputs (sit in slots): all n under shift: row; the
// first n - 1 under shift: document, its last token being a label only (a document of one token has no input
// and, like an empty document, takes no slot). Stated once: the reference layouts, ValidateLayout, tiling
// (TileDocument) and the refusal rule (PolicyDemandsRefusal) count a document's tokens through this.
inline std::int64_t InputTokens(const Policy& p, std::int64_t n) {
  if (p.shift == Shift::kDocument) return n > 1 ? n - 1 : 0;
  return n;
}

// overflow: drop: a document of more than L inputs (InputTokens) sits in no row and so has no target; every
// denominator counts the documents kept. Not a refusal (PolicyDemandsRefusal). Stated once: the reference
// layouts place no piece of it, TileDocument (the oracle's and the fast verifier's coverage, verify) finds any
// piece of it that a row holds.
inline bool DroppedDocument(const Policy& p, std::int64_t row_length, std::int64_t inputs) {
  return p.overflow == Overflow::kDrop && inputs > row_length;
}

// A stream from which no row can be cut (`total` effective tokens, delimiters included): the first window
// is neither full (L inputs, plus the target after them under next_in_stream) nor a partial window the policy
// keeps (padding right or left keeps one while it holds a prediction: under next_in_stream that needs 2 tokens).
// StreamWindows (layout.cc) cuts no row exactly then; a test pins the two together.
inline bool StreamCutsNoRow(const Policy& p, std::int64_t row_length, std::int64_t total) {
  const bool next_in_stream = p.row_end_target == RowEndTarget::kNextInStream;
  const std::int64_t window = row_length + (next_in_stream ? 1 : 0);
  const bool keeps_partial = p.padding != Padding::kNone && (next_in_stream ? total - 1 : total) > 0;
  return total > 0 && total < window && !keeps_partial;
}

// DESIGN §3: the inputs a packer must refuse, given its documents' effective lengths (delimiters included):
// a stream from which no row can be cut; rows padded beyond the row length (any token); a document longer
// than L under overflow: error. Stated once: the oracle's check and the fast verifier both ask this. Every
// count is of input tokens (InputTokens: under shift: document a document of n tokens has n - 1).
inline bool PolicyDemandsRefusal(const Policy& p, std::int64_t row_length, const std::vector<std::int64_t>& lengths) {
  std::int64_t total = 0;
  bool overlong = false;
  for (const std::int64_t effective : lengths) {
    const std::int64_t n = InputTokens(p, effective);
    total += n;
    overlong = overlong || n > row_length;
  }
  if (PadsBeyondTheRow(p, row_length) && total > 0) return true;
  if (p.stream_stride != StreamStride::kNone) return StreamCutsNoRow(p, row_length, total);
  return p.overflow == Overflow::kError && overlong;
}

// The most tokens two merged rows could hold in one row: L, or ⌊L/k⌋·k when rows are padded to a multiple of
// k (a row of n tokens takes ⌈n/k⌉·k slots, at most L exactly when n ≤ ⌊L/k⌋·k).
inline std::int64_t MergeCapacity(const Policy& p, std::int64_t row_length) {
  if (p.padding == Padding::kNone || p.pad_to.kind != PadTo::Kind::kMultipleOf || p.pad_to.multiple < 1)
    return row_length;
  return row_length / p.pad_to.multiple * p.pad_to.multiple;
}

// The tokens a truncated document keeps (overflow: truncate, a document longer than that): T = L under
// truncate_to: row_len; T = ⌊L/k⌋·k under truncate_to: pad_multiple, the most a row padded to a multiple of k
// holds (T = 0 when k > L, where PadsBeyondTheRow demands the refusal of every token anyway). Stated once:
// the reference layouts and TileDocument (the oracle's and the fast verifier's coverage) both ask this.
inline std::int64_t TruncationLength(const Policy& p, std::int64_t row_length) {
  if (p.truncate_to == TruncateTo::kPadMultiple) return MergeCapacity(p, row_length);
  return row_length;
}

// A policy key's value as JSON would carry it: null, a boolean, an integer or a string.
using PolicyValue = std::variant<std::nullptr_t, bool, std::int64_t, std::string>;

// The keys of DESIGN §3 in their canonical order ("preset" first).
const std::vector<std::string>& PolicyKeys();

// What one policy key takes: its closed set of `values` (every value, for an enum, a boolean or stream_stride;
// the values named ahead of an open set otherwise: null for eos_id, "row_len" and "longest" for pad_to), whether
// other values are `open` to it too (any integer; "multiple_of:k"), `takes` as an error message says it, and whether it
// came `after_version_one` (a resolved policy's JSON leaves it out at its `default_value`). Read off the same table as
// SetPolicyKey and PolicyKeyValues: which_policy's search walks these values.
struct PolicyKeyDomain {
  std::string key;
  std::vector<PolicyValue> values;
  bool open = false;
  std::string takes;
  bool after_version_one = false;
  PolicyValue default_value = nullptr;  // its value in a Policy built key by key (the JSON of a later key omits it)
};
const std::vector<PolicyKeyDomain>& PolicyKeyDomains();

// The keys added after version 1 with their defaults (efficiency: reported, truncate_to: row_len,
// segment_encodings: documents, shift: row): a resolved
// policy's JSON leaves such a key out at its default, so that every dump, request and preset written before
// it stays byte for byte the same.
const std::vector<std::pair<std::string, std::string>>& KeysAfterVersionOne();

// Sets one key from its JSON-like value; throws InputError naming the key, the value and what is allowed.
void SetPolicyKey(Policy& policy, std::string_view key, const PolicyValue& value);

// Every key with its value, in canonical order: the fully resolved form handed to other tools.
std::vector<std::pair<std::string, PolicyValue>> PolicyKeyValues(const Policy& policy);

// Keys that a policy file may give as null where the rest of the policy makes them mean nothing (a user
// describing a system without padding writes "pad_id": null): pad_id, pad_to, pad_keys, pad_positions,
// split_positions, count_basis. (eos_id, bos_id and stream_stride take null as a value of their own.)
const std::vector<std::string>& KeysNullWhenMeaningless();

// Why `key` means something under `policy`, or nullopt when the rest of the policy makes it meaningless:
//   pad_id, pad_to, pad_keys, pad_positions   under padding: none (no slot is padding)
//   split_positions                           unless overflow: split with positions: doc_reset (no piece
//                                             continues a document from an earlier row, or positions count
//                                             slots whatever the document)
//   count_basis                               under denominator: all_positions (every position is counted)
// Any other key always means something, and the reason says so. A null key takes its default (Policy{}),
// which the policy never reads (and which contradicts nothing: a preset's pad_to multiple_of:8 would, under
// padding: none).
std::optional<std::string> WhyKeyMatters(const Policy& policy, std::string_view key);

// Human-readable value ("pre_shifted", "null", "-100", "multiple_of:8").
std::string ToString(const PolicyValue& value);

// Contradictions between keys, one sentence each (empty when the policy is coherent).
std::vector<std::string> PolicyProblems(const Policy& policy);

// Throws InputError listing PolicyProblems when there are any.
void ValidatePolicy(const Policy& policy);

// Whether documents still need the policy's delimiters (generated documents, the exec protocol) or already
// carry them as the producer added them (the `document` records of a dump).
enum class Delimiters { kAdd, kIncluded };

// The effective document under the policy: [bos_id] + tokens + [eos_id], every delimiter supervised (or the
// tokens as they are, under Delimiters::kIncluded). Throws InputError when `supervised` has the wrong length
// or values other than 0 and 1, when a token equals ignore_index, or when a delimiter that marks boundaries
// (eod_closes / bos_opens) appears inside the document.
EffectiveDocument Effective(const DocumentRef& document, const Policy& policy, Delimiters delimiters = Delimiters::kAdd);
EffectiveDocument Effective(const Document& document, const Policy& policy, Delimiters delimiters = Delimiters::kAdd);
// What Effective checks, without making anything: throws the InputError Effective would throw, else nothing
// (verify checks each dumped document once, when it is read, and keeps it packed). Element by element; the
// fast verifier decides the common answer ("nothing to refuse") faster (fastcheck/document_check.h).
void ValidateDocument(const DocumentRef& document, const Policy& policy, Delimiters delimiters = Delimiters::kAdd);
void ValidateDocument(const Document& document, const Policy& policy, Delimiters delimiters = Delimiters::kAdd);
// Whether Effective adds anything under Delimiters::kAdd (a bos_id or an eos_id): when not, a document's
// effective tokens are its tokens, and kAdd and kIncluded check the same.
bool AddsDelimiters(const Policy& policy);
// The effective document of one ValidateDocument accepts (the caller validated it, or a fast path pinned to
// ValidateDocument decided it would be accepted): Effective without its check.
EffectiveDocument EffectiveOfValid(const DocumentRef& document, const Policy& policy,
                                   Delimiters delimiters = Delimiters::kAdd);
std::vector<EffectiveDocument> Effective(const std::vector<Document>& documents, const Policy& policy,
                                         Delimiters delimiters = Delimiters::kAdd);
// Throws InputError naming the first document whose uid an earlier one has (the vector Effective's check).
void CheckUidsUnique(const std::vector<Document>& documents);

// Names of enum values as they appear in JSON (e.g. "pre_shifted").
const char* Name(LabelAlignment v);
const char* Name(BoundarySource v);
const char* Name(Attention v);
const char* Name(PadKeys v);
const char* Name(Positions v);
const char* Name(PadPositions v);
const char* Name(SplitPositions v);
const char* Name(BoundaryTarget v);
const char* Name(RowEndTarget v);
const char* Name(Padding v);
const char* Name(Overflow v);
const char* Name(Denominator v);
const char* Name(CountBasis v);
const char* Name(Efficiency v);
const char* Name(TruncateTo v);
const char* Name(SegmentEncodings v);
const char* Name(Shift v);

}  // namespace packoracle
