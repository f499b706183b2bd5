#include "packoracle/oracle/policy.h"

#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "packoracle/oracle/error.h"
#include "packoracle/oracle/presets.h"

namespace packoracle {
namespace {

template <class E>
struct Named {
  E value;
  const char* name;
};

constexpr std::array<Named<LabelAlignment>, 2> kLabelAlignment{
    {{LabelAlignment::kAligned, "aligned"}, {LabelAlignment::kPreShifted, "pre_shifted"}}};
constexpr std::array<Named<BoundarySource>, 9> kBoundarySource{{{BoundarySource::kSpans, "spans"},
                                                                 {BoundarySource::kCuSeqlens, "cu_seqlens"},
                                                                 {BoundarySource::kSeqLens, "seq_lens"},
                                                                 {BoundarySource::kPositionReset, "position_reset"},
                                                                 {BoundarySource::kPositionStep, "position_step"},
                                                                 {BoundarySource::kDocIds, "doc_ids"},
                                                                 {BoundarySource::kEodCloses, "eod_closes"},
                                                                 {BoundarySource::kBosOpens, "bos_opens"},
                                                                 {BoundarySource::kNone, "none"}}};
constexpr std::array<Named<Attention>, 2> kAttention{
    {{Attention::kDocCausal, "doc_causal"}, {Attention::kRowCausal, "row_causal"}}};
constexpr std::array<Named<PadKeys>, 3> kPadKeys{
    {{PadKeys::kMasked, "masked"}, {PadKeys::kOwnSegment, "own_segment"}, {PadKeys::kVisible, "visible"}}};
constexpr std::array<Named<Positions>, 2> kPositions{
    {{Positions::kDocReset, "doc_reset"}, {Positions::kRowContinuous, "row_continuous"}}};
constexpr std::array<Named<PadPositions>, 3> kPadPositions{
    {{PadPositions::kZero, "zero"}, {PadPositions::kContinue, "continue"}, {PadPositions::kAny, "any"}}};
constexpr std::array<Named<SplitPositions>, 3> kSplitPositions{{{SplitPositions::kContinue, "continue"},
                                                                 {SplitPositions::kModulo, "modulo"},
                                                                 {SplitPositions::kRestart, "restart"}}};
constexpr std::array<Named<BoundaryTarget>, 2> kBoundaryTarget{
    {{BoundaryTarget::kExcluded, "excluded"}, {BoundaryTarget::kIncluded, "included"}}};
constexpr std::array<Named<RowEndTarget>, 3> kRowEndTarget{{{RowEndTarget::kNone, "none"},
                                                             {RowEndTarget::kNextInStream, "next_in_stream"},
                                                             {RowEndTarget::kNextInDoc, "next_in_doc"}}};
constexpr std::array<Named<Padding>, 3> kPadding{
    {{Padding::kNone, "none"}, {Padding::kRight, "right"}, {Padding::kLeft, "left"}}};
// drop: a value added after version 1 (a version-1 policy never has it, so what version 1 wrote is unchanged).
constexpr std::array<Named<Overflow>, 4> kOverflow{{{Overflow::kError, "error"},
                                                    {Overflow::kTruncate, "truncate"},
                                                    {Overflow::kSplit, "split"},
                                                    {Overflow::kDrop, "drop"}}};
constexpr std::array<Named<Denominator>, 5> kDenominator{{{Denominator::kGlobalTargets, "global_targets"},
                                                           {Denominator::kRankMean, "rank_mean"},
                                                           {Denominator::kMicrobatchMean, "microbatch_mean"},
                                                           {Denominator::kSequenceMean, "sequence_mean"},
                                                           {Denominator::kAllPositions, "all_positions"}}};
constexpr std::array<Named<CountBasis>, 2> kCountBasis{
    {{CountBasis::kTargets, "targets"}, {CountBasis::kUnshiftedLabels, "unshifted_labels"}}};
constexpr std::array<Named<Efficiency>, 2> kEfficiency{
    {{Efficiency::kReported, "reported"}, {Efficiency::kNoMergeableRows, "no_mergeable_rows"}}};
constexpr std::array<Named<TruncateTo>, 2> kTruncateTo{
    {{TruncateTo::kRowLen, "row_len"}, {TruncateTo::kPadMultiple, "pad_multiple"}}};
constexpr std::array<Named<SegmentEncodings>, 2> kSegmentEncodings{
    {{SegmentEncodings::kDocuments, "documents"}, {SegmentEncodings::kRows, "rows"}}};
constexpr std::array<Named<Shift>, 2> kShift{{{Shift::kRow, "row"}, {Shift::kDocument, "document"}}};

template <class E, std::size_t N>
const char* NameIn(const std::array<Named<E>, N>& table, E v) {
  for (const auto& entry : table)
    if (entry.value == v) return entry.name;
  return "?";
}

template <class E, std::size_t N>
std::string Allowed(const std::array<Named<E>, N>& table) {
  std::string out;
  for (const auto& entry : table) out += (out.empty() ? "" : " | ") + std::string(entry.name);
  return out;
}

std::string Describe(const PolicyValue& value) {
  if (std::holds_alternative<std::string>(value)) return "\"" + std::get<std::string>(value) + "\"";
  return ToString(value);
}

[[noreturn]] void BadValue(std::string_view key, const PolicyValue& value, const std::string& allowed) {
  throw InputError("policy key '" + std::string(key) + "': value " + Describe(value) + " is not allowed (" +
                   allowed + ")");
}

template <class E, std::size_t N>
void SetEnum(E& field, const std::array<Named<E>, N>& table, std::string_view key, const PolicyValue& value) {
  if (const auto* s = std::get_if<std::string>(&value)) {
    for (const auto& entry : table) {
      if (*s == entry.name) {
        field = entry.value;
        return;
      }
    }
  }
  BadValue(key, value, Allowed(table));
}

std::int64_t GetInt(std::string_view key, const PolicyValue& value) {
  if (const auto* i = std::get_if<std::int64_t>(&value)) return *i;
  BadValue(key, value, "an integer");
}

bool GetBool(std::string_view key, const PolicyValue& value) {
  if (const auto* b = std::get_if<bool>(&value)) return *b;
  BadValue(key, value, "true | false");
}

std::optional<Token> GetOptionalInt(std::string_view key, const PolicyValue& value) {
  if (std::holds_alternative<std::nullptr_t>(value)) return std::nullopt;
  if (const auto* i = std::get_if<std::int64_t>(&value)) return *i;
  BadValue(key, value, "an integer or null");
}

PolicyValue OptionalValue(const std::optional<Token>& v) {
  if (v) return PolicyValue(*v);
  return PolicyValue(nullptr);
}

PolicyValue Str(const char* s) { return PolicyValue(std::string(s)); }

// shift: document shifts inside each document: every input's label is the next token of its own document, given
// pre-shifted, and a document's last token is a label only. The keys that would read a target or a boundary
// across documents, or a document's last token as an input, contradict it.
void ShiftProblems(const Policy& p, std::vector<std::string>& problems) {
  if (p.shift != Shift::kDocument) return;
  if (p.label_alignment == LabelAlignment::kAligned) {
    problems.push_back("shift: document gives each input the next token of its own document as a pre-shifted "
                       "label, but label_alignment is aligned (the model's own shift of the row would make a "
                       "document's last input predict the next document's first token; use pre_shifted)");
  }
  if (p.boundary_target == BoundaryTarget::kIncluded) {
    problems.push_back("shift: document keeps every target inside its document, so no prediction targets the next "
                       "document's first token, but boundary_target is included (use excluded)");
  }
  if (p.row_end_target == RowEndTarget::kNextInStream) {
    problems.push_back("row_end_target: next_in_stream makes a row's last slot predict the stream's next input, but "
                       "under shift: document a document's last input predicts its own last token, which is no input "
                       "(use next_in_doc)");
  }
  if (p.stream_stride == StreamStride::kLPlus1) {
    problems.push_back("stream_stride: \"L+1\" skips the input after each window as the window's row-end target, "
                       "but under shift: document a window ending a document's inputs targets the document's last "
                       "token, and the skipped input would be lost (use \"L\")");
  }
  if (p.boundary_source == BoundarySource::kEodCloses) {
    problems.push_back("boundary_source: eod_closes reads a boundary after each EOD input, but under shift: document "
                       "a document's last token (its EOD) is a label only, never an input (use another "
                       "boundary_source)");
  }
}

}  // namespace

const char* Name(LabelAlignment v) { return NameIn(kLabelAlignment, v); }
const char* Name(BoundarySource v) { return NameIn(kBoundarySource, v); }
const char* Name(Attention v) { return NameIn(kAttention, v); }
const char* Name(PadKeys v) { return NameIn(kPadKeys, v); }
const char* Name(Positions v) { return NameIn(kPositions, v); }
const char* Name(PadPositions v) { return NameIn(kPadPositions, v); }
const char* Name(SplitPositions v) { return NameIn(kSplitPositions, v); }
const char* Name(BoundaryTarget v) { return NameIn(kBoundaryTarget, v); }
const char* Name(RowEndTarget v) { return NameIn(kRowEndTarget, v); }
const char* Name(Padding v) { return NameIn(kPadding, v); }
const char* Name(Overflow v) { return NameIn(kOverflow, v); }
const char* Name(Denominator v) { return NameIn(kDenominator, v); }
const char* Name(CountBasis v) { return NameIn(kCountBasis, v); }
const char* Name(Efficiency v) { return NameIn(kEfficiency, v); }
const char* Name(TruncateTo v) { return NameIn(kTruncateTo, v); }
const char* Name(SegmentEncodings v) { return NameIn(kSegmentEncodings, v); }
const char* Name(Shift v) { return NameIn(kShift, v); }

bool operator==(const Policy& a, const Policy& b) { return PolicyKeyValues(a) == PolicyKeyValues(b); }

namespace {

// One entry per policy key of DESIGN §3, in canonical order ("preset" first): the one place a key is named,
// read and written. PolicyKeys, SetPolicyKey, PolicyKeyValues, PolicyKeyDomains and KeysAfterVersionOne are all
// read off this table, so a new key is one entry here (plus the field in Policy and its rules).
struct KeyDescriptor {
  PolicyKeyDomain domain;                                // name, the values it takes, whether it came after v1
  std::function<PolicyValue(const Policy&)> get;         // the value as JSON carries it
  std::function<void(Policy&, const PolicyValue&)> set;  // throws InputError naming the key and what it takes
};

template <class E, std::size_t N>
KeyDescriptor EnumKey(const char* key, E Policy::*field, const std::array<Named<E>, N>& table,
                      bool after_version_one = false) {
  PolicyKeyDomain domain{key, {}, false, Allowed(table), after_version_one};
  for (const auto& entry : table) domain.values.emplace_back(std::string(entry.name));
  return {std::move(domain), [field, &table](const Policy& p) { return Str(NameIn(table, p.*field)); },
          [key, field, &table](Policy& p, const PolicyValue& v) { SetEnum(p.*field, table, key, v); }};
}

KeyDescriptor IntegerKey(const char* key, std::int64_t Policy::*field) {
  return {{key, {}, true, "an integer", false}, [field](const Policy& p) { return PolicyValue(p.*field); },
          [key, field](Policy& p, const PolicyValue& v) { p.*field = GetInt(key, v); }};
}

KeyDescriptor OptionalIntegerKey(const char* key, std::optional<Token> Policy::*field) {
  return {{key, {PolicyValue(nullptr)}, true, "an integer or null", false},
          [field](const Policy& p) { return OptionalValue(p.*field); },
          [key, field](Policy& p, const PolicyValue& v) { p.*field = GetOptionalInt(key, v); }};
}

KeyDescriptor PresetKey() {
  return {{"preset", {}, true, "a preset name", false},
          [](const Policy& p) { return p.preset.empty() ? PolicyValue(nullptr) : PolicyValue(p.preset); },
          [](Policy& p, const PolicyValue& v) {
            const auto* name = std::get_if<std::string>(&v);
            if (name == nullptr) BadValue("preset", v, "a preset name");
            p = FindPreset(*name).policy;  // throws for an unknown name, listing the known ones
          }};
}

KeyDescriptor StreamStrideKey() {
  static const char* kTakes = "null | \"L\" | \"L+1\"";
  return {{"stream_stride", {PolicyValue(nullptr), Str("L"), Str("L+1")}, false, kTakes, false},
          [](const Policy& p) {
            if (p.stream_stride == StreamStride::kL) return Str("L");
            if (p.stream_stride == StreamStride::kLPlus1) return Str("L+1");
            return PolicyValue(nullptr);
          },
          [](Policy& p, const PolicyValue& v) {
            const auto* s = std::get_if<std::string>(&v);
            if (std::holds_alternative<std::nullptr_t>(v)) {
              p.stream_stride = StreamStride::kNone;
            } else if (s != nullptr && *s == "L") {
              p.stream_stride = StreamStride::kL;
            } else if (s != nullptr && *s == "L+1") {
              p.stream_stride = StreamStride::kLPlus1;
            } else {
              BadValue("stream_stride", v, kTakes);
            }
          }};
}

// pad_to: "row_len", "longest" (added after version 1: a policy that never uses it writes what version 1 wrote),
// or the open set "multiple_of:k".
KeyDescriptor PadToKey() {
  static const char* kTakes = "\"row_len\" | \"longest\" | \"multiple_of:k\" with k a positive integer";
  return {{"pad_to", {Str("row_len"), Str("longest")}, true, kTakes, false},
          [](const Policy& p) {
            if (p.pad_to.kind == PadTo::Kind::kRowLen) return Str("row_len");
            if (p.pad_to.kind == PadTo::Kind::kLongest) return Str("longest");
            return PolicyValue("multiple_of:" + std::to_string(p.pad_to.multiple));
          },
          [](Policy& p, const PolicyValue& v) {
            const auto* s = std::get_if<std::string>(&v);
            const std::string prefix = "multiple_of:";
            if (s != nullptr && *s == "row_len") {
              p.pad_to = PadTo{};
            } else if (s != nullptr && *s == "longest") {
              p.pad_to = PadTo{PadTo::Kind::kLongest, 0};
            } else if (s != nullptr && s->rfind(prefix, 0) == 0 && s->size() > prefix.size() &&
                       std::all_of(s->begin() + static_cast<std::ptrdiff_t>(prefix.size()), s->end(),
                                   [](char c) { return c >= '0' && c <= '9'; }) &&
                       s->size() - prefix.size() <= 9) {
              p.pad_to = PadTo{PadTo::Kind::kMultipleOf, std::stoll(s->substr(prefix.size()))};
            } else {
              BadValue("pad_to", v, kTakes);
            }
          }};
}

// consumer_overhead: null (reported only) or a percentage p ≥ 0 that an attention consumer's computed work may
// exceed the work the declared rule needs (Policy::consumer_overhead). Added after version 1: left out at null.
KeyDescriptor ConsumerOverheadKey() {
  static const char* kTakes = "null | an integer percentage in 0..1000000";
  return {{"consumer_overhead", {PolicyValue(nullptr)}, true, kTakes, true},
          [](const Policy& p) { return OptionalValue(p.consumer_overhead); },
          [](Policy& p, const PolicyValue& v) {
            const auto* i = std::get_if<std::int64_t>(&v);
            if (std::holds_alternative<std::nullptr_t>(v)) {
              p.consumer_overhead.reset();
            } else if (i != nullptr && *i >= 0 && *i <= 1'000'000) {
              p.consumer_overhead = *i;
            } else {
              BadValue("consumer_overhead", v, kTakes);
            }
          }};
}

const std::vector<KeyDescriptor>& Keys() {
  static const std::vector<KeyDescriptor> keys = [] {
    std::vector<KeyDescriptor> k;
    k.push_back(PresetKey());
    k.push_back(EnumKey("label_alignment", &Policy::label_alignment, kLabelAlignment));
    k.push_back(IntegerKey("ignore_index", &Policy::ignore_index));
    k.push_back({{"loss_mask", {PolicyValue(false), PolicyValue(true)}, false, "true | false", false},
                 [](const Policy& p) { return PolicyValue(p.loss_mask); },
                 [](Policy& p, const PolicyValue& v) { p.loss_mask = GetBool("loss_mask", v); }});
    k.push_back(EnumKey("boundary_source", &Policy::boundary_source, kBoundarySource));
    k.push_back(EnumKey("attention", &Policy::attention, kAttention));
    k.push_back(EnumKey("pad_keys", &Policy::pad_keys, kPadKeys));
    k.push_back(EnumKey("positions", &Policy::positions, kPositions));
    k.push_back(IntegerKey("position_base", &Policy::position_base));
    k.push_back(EnumKey("pad_positions", &Policy::pad_positions, kPadPositions));
    k.push_back(EnumKey("split_positions", &Policy::split_positions, kSplitPositions));
    k.push_back(EnumKey("boundary_target", &Policy::boundary_target, kBoundaryTarget));
    k.push_back(EnumKey("row_end_target", &Policy::row_end_target, kRowEndTarget));
    k.push_back(StreamStrideKey());
    k.push_back(EnumKey("padding", &Policy::padding, kPadding));
    k.push_back(IntegerKey("pad_id", &Policy::pad_id));
    k.push_back(PadToKey());
    k.push_back(EnumKey("overflow", &Policy::overflow, kOverflow));
    k.push_back(OptionalIntegerKey("eos_id", &Policy::eos_id));
    k.push_back(OptionalIntegerKey("bos_id", &Policy::bos_id));
    k.push_back(EnumKey("denominator", &Policy::denominator, kDenominator));
    k.push_back(EnumKey("count_basis", &Policy::count_basis, kCountBasis));
    // Keys added after version 1: a resolved policy's JSON leaves each out at its default.
    k.push_back(EnumKey("efficiency", &Policy::efficiency, kEfficiency, true));
    k.push_back(EnumKey("truncate_to", &Policy::truncate_to, kTruncateTo, true));
    k.push_back(EnumKey("segment_encodings", &Policy::segment_encodings, kSegmentEncodings, true));
    k.push_back(EnumKey("shift", &Policy::shift, kShift, true));
    k.push_back(ConsumerOverheadKey());
    return k;
  }();
  return keys;
}

}  // namespace

const std::vector<PolicyKeyDomain>& PolicyKeyDomains() {
  static const std::vector<PolicyKeyDomain> domains = [] {
    std::vector<PolicyKeyDomain> out;
    for (const auto& key : Keys()) {
      out.push_back(key.domain);
      out.back().default_value = key.get(Policy{});
    }
    return out;
  }();
  return domains;
}

const std::vector<std::string>& PolicyKeys() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& key : Keys()) out.push_back(key.domain.key);
    return out;
  }();
  return names;
}

const std::vector<std::pair<std::string, std::string>>& KeysAfterVersionOne() {
  static const std::vector<std::pair<std::string, std::string>> later = [] {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& key : Keys())
      if (key.domain.after_version_one) out.emplace_back(key.domain.key, ToString(key.get(Policy{})));
    return out;
  }();
  return later;
}

void SetPolicyKey(Policy& p, std::string_view key, const PolicyValue& value) {
  for (const auto& descriptor : Keys()) {
    if (descriptor.domain.key == key) {
      descriptor.set(p, value);
      return;
    }
  }
  std::string known;
  for (const auto& k : PolicyKeys()) known += (known.empty() ? "" : ", ") + k;
  throw InputError("unknown policy key '" + std::string(key) + "' (known keys: " + known + ")");
}

std::vector<std::pair<std::string, PolicyValue>> PolicyKeyValues(const Policy& p) {
  std::vector<std::pair<std::string, PolicyValue>> out;
  out.reserve(Keys().size());
  for (const auto& key : Keys()) out.emplace_back(key.domain.key, key.get(p));
  return out;
}

const std::vector<std::string>& KeysNullWhenMeaningless() {
  static const std::vector<std::string> keys = {"pad_id", "pad_to", "pad_keys", "pad_positions", "split_positions",
                                                "count_basis"};
  return keys;
}

std::optional<std::string> WhyKeyMatters(const Policy& p, std::string_view key) {
  if (key == "pad_id" || key == "pad_to" || key == "pad_keys" || key == "pad_positions") {
    if (p.padding == Padding::kNone) return std::nullopt;
    static const std::map<std::string_view, const char*> what = {
        {"pad_id", "padding slots hold the pad id"},
        {"pad_to", "it says how far rows are padded"},
        {"pad_keys", "it says what padding keys a query may see"},
        {"pad_positions", "it says what positions padding slots carry"}};
    return std::string("padding is ") + Name(p.padding) + ": " + what.at(key);
  }
  if (key == "split_positions") {
    if (p.overflow != Overflow::kSplit || p.positions != Positions::kDocReset) return std::nullopt;
    return "overflow is split and positions doc_reset: it says what positions a document continued from an "
           "earlier row carries";
  }
  if (key == "count_basis") {
    if (p.denominator == Denominator::kAllPositions) return std::nullopt;
    return std::string("denominator is ") + Name(p.denominator) + ": it says what the denominator counts";
  }
  return "it means something under every policy";
}

std::string ToString(const PolicyValue& value) {
  if (std::holds_alternative<std::nullptr_t>(value)) return "null";
  if (const auto* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  if (const auto* i = std::get_if<std::int64_t>(&value)) return std::to_string(*i);
  return std::get<std::string>(value);
}

std::vector<std::string> PolicyProblems(const Policy& p) {
  std::vector<std::string> problems;
  if (p.boundary_source == BoundarySource::kEodCloses && !p.eos_id) {
    problems.push_back("boundary_source: eod_closes needs an EOD id, but eos_id is null");
  }
  if (p.boundary_source == BoundarySource::kBosOpens && !p.bos_id) {
    problems.push_back("boundary_source: bos_opens needs a BOS id, but bos_id is null");
  }
  if (p.boundary_source == BoundarySource::kBosOpens && p.bos_id && p.eos_id && *p.eos_id == *p.bos_id) {
    problems.push_back("boundary_source: bos_opens with eos_id equal to bos_id (" + std::to_string(*p.bos_id) +
                       "): the EOS appended to a document would read as the start of the next one");
  }
  if (p.attention == Attention::kDocCausal && p.boundary_source == BoundarySource::kNone) {
    problems.push_back(
        "attention: doc_causal needs document boundaries, but boundary_source is none (nothing tells a "
        "backend where documents start)");
  }
  if ((p.boundary_source == BoundarySource::kPositionReset ||
       p.boundary_source == BoundarySource::kPositionStep) &&
      p.positions != Positions::kDocReset) {
    problems.push_back(std::string("boundary_source: ") + Name(p.boundary_source) +
                       " reads boundaries from position ids, but positions is row_continuous (they never reset)");
  }
  if (p.row_end_target == RowEndTarget::kNextInStream && p.stream_stride == StreamStride::kNone) {
    problems.push_back("row_end_target: next_in_stream needs stream_stride \"L\" or \"L+1\", but it is null");
  }
  if (p.row_end_target == RowEndTarget::kNextInDoc && p.overflow != Overflow::kSplit) {
    problems.push_back(std::string("row_end_target: next_in_doc carries a document into the next row, but "
                                   "overflow is ") +
                       Name(p.overflow) + " (documents are never split)");
  }
  if (p.stream_stride != StreamStride::kNone && p.overflow != Overflow::kSplit) {
    problems.push_back(std::string("stream_stride cuts a stream of documents into windows, which splits documents, "
                                   "but overflow is ") + Name(p.overflow) + " (a stream policy has overflow: split)");
  }
  if (p.row_end_target != RowEndTarget::kNone && p.label_alignment == LabelAlignment::kAligned) {
    problems.push_back(std::string("row_end_target: ") + Name(p.row_end_target) +
                       " gives a row's last slot a target, but under label_alignment: aligned the last slot reads "
                       "no label (the target of slot i is labels[i+1])");
  }
  if (p.boundary_source == BoundarySource::kPositionReset && p.overflow == Overflow::kSplit &&
      p.split_positions == SplitPositions::kModulo) {
    problems.push_back("boundary_source: position_reset with split_positions: modulo: a continued document whose "
                       "position wraps to the base would read as a new document");
  }
  constexpr std::int64_t kMaxBase = std::int64_t{1} << 40;
  if (p.position_base < -kMaxBase || p.position_base > kMaxBase) {
    problems.push_back("position_base " + std::to_string(p.position_base) + " is outside ±2^40");
  }
  if (p.pad_to.kind == PadTo::Kind::kMultipleOf && p.pad_to.multiple < 1) {
    problems.push_back("pad_to: multiple_of:" + std::to_string(p.pad_to.multiple) + " needs k >= 1");
  }
  if (p.padding == Padding::kNone && p.pad_to.kind == PadTo::Kind::kMultipleOf) {
    problems.push_back("pad_to: multiple_of:" + std::to_string(p.pad_to.multiple) +
                       " asks for padding, but padding is none");
  }
  if (p.padding == Padding::kNone && p.pad_to.kind == PadTo::Kind::kLongest) {
    problems.push_back("pad_to: longest asks for padding, but padding is none");
  }
  // no_mergeable_rows compares rows of whole documents: a split row ends where the row does, not where a
  // document does (stream_stride needs split, so stream windows land here too), and without boundaries a row
  // holds one document, as padded batches do.
  if (p.efficiency == Efficiency::kNoMergeableRows && p.overflow == Overflow::kSplit) {
    problems.push_back(std::string("efficiency: no_mergeable_rows compares rows of whole documents, but overflow is "
                                   "split") + (p.stream_stride != StreamStride::kNone ? " (stream windows)" : "") +
                       " (a split row is full by construction; use overflow error or truncate)");
  }
  if (p.efficiency == Efficiency::kNoMergeableRows && p.boundary_source == BoundarySource::kNone) {
    problems.push_back("efficiency: no_mergeable_rows packs several documents into a row, but boundary_source is "
                       "none (one document per row: nothing would mark where the second starts)");
  }
  // truncate_to: pad_multiple says where truncation stops when rows are padded to a multiple of k: it needs
  // both the truncation and the multiple.
  if (p.truncate_to == TruncateTo::kPadMultiple && p.overflow != Overflow::kTruncate) {
    problems.push_back(std::string("truncate_to: pad_multiple says where overflow: truncate cuts a document, but "
                                   "overflow is ") + Name(p.overflow) + " (use truncate_to: row_len)");
  }
  if (p.truncate_to == TruncateTo::kPadMultiple &&
      (p.padding == Padding::kNone || p.pad_to.kind != PadTo::Kind::kMultipleOf)) {
    problems.push_back(std::string("truncate_to: pad_multiple keeps floor(L/k)*k tokens of pad_to multiple_of:k, "
                                   "but ") + (p.padding == Padding::kNone ? "padding is none"
                                                                          : p.pad_to.kind == PadTo::Kind::kLongest
                                                                                ? "pad_to is longest"
                                                                                : "pad_to is row_len") +
                       " (use truncate_to: row_len)");
  }
  // segment_encodings: rows makes each row one sequence for a backend: attention over the whole row.
  if (p.segment_encodings == SegmentEncodings::kRows && p.attention == Attention::kDocCausal) {
    problems.push_back("segment_encodings: rows makes each row one sequence of cu_seqlens, seq_lens and doc_ids, "
                       "so a backend attends across the row's documents, but attention is doc_causal (use "
                       "row_causal)");
  }
  if (p.segment_encodings == SegmentEncodings::kRows &&
      (p.boundary_source == BoundarySource::kCuSeqlens || p.boundary_source == BoundarySource::kSeqLens ||
       p.boundary_source == BoundarySource::kDocIds)) {
    problems.push_back(std::string("boundary_source: ") + Name(p.boundary_source) +
                       " reads document boundaries from an encoding that segment_encodings: rows says names rows "
                       "(use spans, none, or a position, EOD or BOS boundary)");
  }
  ShiftProblems(p, problems);
  if (p.loss_mask && p.label_alignment == LabelAlignment::kAligned) {
    // Not impossible, but no system does it and "indexed like the targets" would be ambiguous.
    problems.push_back("loss_mask: true is defined for pre_shifted labels only (Megatron), but label_alignment "
                       "is aligned");
  }
  return problems;
}

void ValidatePolicy(const Policy& policy) {
  const auto problems = PolicyProblems(policy);
  if (problems.empty()) return;
  std::string message = "contradictory policy";
  if (!policy.preset.empty()) message += " (from preset '" + policy.preset + "')";
  message += ":";
  for (const auto& problem : problems) message += "\n  - " + problem;
  throw InputError(message);
}

void ValidateDocument(const Document& document, const Policy& policy, Delimiters delimiters) {
  ValidateDocument(DocumentRef::Of(document), policy, delimiters);
}

void ValidateDocument(const DocumentRef& document, const Policy& policy, Delimiters delimiters) {
  const bool included = delimiters == Delimiters::kIncluded;
  const std::size_t n = document.size;
  if (document.supervised && document.supervised_size != n) {
    throw InputError("document '" + std::string(document.uid) + "': supervised has " + std::to_string(document.supervised_size) +
                     " entries but tokens has " + std::to_string(n));
  }
  const std::string uid(document.uid);
  for (std::size_t k = 0; document.supervised && k < document.supervised_size; ++k) {
    if (document.supervised[k] != 0 && document.supervised[k] != 1) {
      throw InputError("document '" + uid + "': supervised[" + std::to_string(k) + "] is " +
                       std::to_string(document.supervised[k]) + ", expected 0 or 1");
    }
  }
  for (std::size_t k = 0; k < n; ++k) {
    if (document.tokens[k] == policy.ignore_index) {
      throw InputError("document '" + uid + "': token " + std::to_string(k) + " is " +
                       std::to_string(policy.ignore_index) +
                       ", the policy's ignore_index: a label could not carry it as a target");
    }
    // Under token-delimited boundaries a delimiter inside a document is itself a boundary: such data cannot be
    // encoded, whatever the packer does.
    const bool closing_eod = included && k + 1 == n;  // a dumped document ends with its own EOD
    const bool opening_bos = included && k == 0;     // and starts with its own BOS
    if (policy.boundary_source == BoundarySource::kEodCloses && policy.eos_id && document.tokens[k] == *policy.eos_id &&
        !closing_eod) {
      throw InputError("document '" + uid + "': token " + std::to_string(k) + " is the EOD id " +
                       std::to_string(*policy.eos_id) + ", which under boundary_source: eod_closes ends the document there");
    }
    if (policy.boundary_source == BoundarySource::kBosOpens && policy.bos_id && document.tokens[k] == *policy.bos_id &&
        !opening_bos) {
      throw InputError("document '" + uid + "': token " + std::to_string(k) + " is the BOS id " +
                       std::to_string(*policy.bos_id) + ", which under boundary_source: bos_opens starts a new document there");
    }
  }
}

EffectiveDocument Effective(const Document& document, const Policy& policy, Delimiters delimiters) {
  return Effective(DocumentRef::Of(document), policy, delimiters);
}

EffectiveDocument Effective(const DocumentRef& document, const Policy& policy, Delimiters delimiters) {
  ValidateDocument(document, policy, delimiters);
  return EffectiveOfValid(document, policy, delimiters);
}

EffectiveDocument EffectiveOfValid(const DocumentRef& document, const Policy& policy, Delimiters delimiters) {
  const bool included = delimiters == Delimiters::kIncluded;
  const std::size_t n = document.size;
  EffectiveDocument out;
  out.uid = std::string(document.uid);
  // The document and at most two delimiters, copied whole: in-process checks make every document effective
  // on every call.
  out.tokens.reserve(n + 2);
  out.supervised.reserve(n + 2);
  if (policy.bos_id && !included) {
    out.tokens.push_back(*policy.bos_id);
    out.supervised.push_back(1);
  }
  out.tokens.insert(out.tokens.end(), document.tokens, document.tokens + n);
  if (!document.supervised) {
    out.supervised.resize(out.supervised.size() + n, 1);
  } else {
    out.supervised.insert(out.supervised.end(), document.supervised, document.supervised + document.supervised_size);
  }
  if (policy.eos_id && !included) {
    out.tokens.push_back(*policy.eos_id);
    out.supervised.push_back(1);
  }
  return out;
}

bool AddsDelimiters(const Policy& policy) { return policy.bos_id.has_value() || policy.eos_id.has_value(); }

void CheckUidsUnique(const std::vector<Document>& documents) {
  std::set<std::string> seen;
  for (std::size_t d = 0; d < documents.size(); ++d) {
    if (!seen.insert(documents[d].uid).second) {
      throw InputError("document " + std::to_string(d) + ": uid '" + documents[d].uid +
                       "' is used by an earlier document (uids must be unique)");
    }
  }
}

std::vector<EffectiveDocument> Effective(const std::vector<Document>& documents, const Policy& policy,
                                         Delimiters delimiters) {
  CheckUidsUnique(documents);
  std::vector<EffectiveDocument> out;
  for (const Document& d : documents) out.push_back(Effective(d, policy, delimiters));
  return out;
}

std::vector<Document> MakeDocuments(const std::vector<std::vector<Token>>& token_lists) {
  std::vector<Document> out;
  for (std::size_t d = 0; d < token_lists.size(); ++d) out.push_back({"d" + std::to_string(d), token_lists[d], {}});
  return out;
}

}  // namespace packoracle
