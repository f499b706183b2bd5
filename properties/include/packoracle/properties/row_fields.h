// The fields of a row (CandidateRow, DESIGN §5's `microbatch` rows), stated once: their JSON names in the order
// the writers write them, what each holds, and the other names producers give them. Read off this table:
// check_batch's core reader (python/binding/batch.cc FieldOf); the row readers and writers (JSON Lines, the fast
// reader, the binding's dicts), through its binding to CandidateRow's members (row_members.h); the generated
// schema (python/src/packoracle/dump/schema.json, `packoracle schema`) that packoracle._batch (the producers'
// names) and packoracle.dump.format (the dump writer, which runs without the extension) read.
//
// A new row field is one entry here, its member in CandidateRow, RowView and row_members.h's kRowMembers, and
// its checks; ctest `schema.committed_copy_is_current` then asks for the generated schema to be written again.
#pragma once

#include <array>
#include <cstddef>
#include <stdexcept>
#include <string_view>

namespace packoracle {

// How a field lines up with the row: one value per slot, a list of its own per row (boundaries), or the spans.
enum class RowFieldShape { kPerToken, kPerRowList, kSpans };
// What each value is: an integer, 0 or 1 (a bool allowed where a producer gives one), a real number, a span.
enum class RowFieldValue { kInteger, kZeroOne, kReal, kSpan };

struct RowField {
  std::string_view name;  // the JSON Lines name, CandidateRow's member
  RowFieldShape shape;
  RowFieldValue value;
  bool required;  // every row of a dump gives it
  // Other names producers use for it (HF's flash-attention kwargs and seq_idx, Megatron's get_batch, ...):
  // check_batch and the guard read a batch in the producer's own names.
  std::array<std::string_view, 3> aliases;
};

inline constexpr std::array<RowField, 9> kRowFields = {{
    {"input_ids", RowFieldShape::kPerToken, RowFieldValue::kInteger, true, {"tokens"}},  // Megatron's get_batch
    {"labels", RowFieldShape::kPerToken, RowFieldValue::kInteger, true, {}},
    {"loss_mask", RowFieldShape::kPerToken, RowFieldValue::kReal, false, {}},
    {"position_ids", RowFieldShape::kPerToken, RowFieldValue::kInteger, false, {}},
    {"cu_seqlens", RowFieldShape::kPerRowList, RowFieldValue::kInteger, false, {"cu_seq_lens_q", "cu_seqlens_q"}},
    {"seq_lens", RowFieldShape::kPerRowList, RowFieldValue::kInteger, false, {"sequence_lengths"}},
    {"doc_ids", RowFieldShape::kPerToken, RowFieldValue::kInteger, false, {"seq_idx", "segment_ids", "document_ids"}},
    {"attention_mask", RowFieldShape::kPerToken, RowFieldValue::kZeroOne, false, {}},
    {"doc_spans", RowFieldShape::kSpans, RowFieldValue::kSpan, true, {}},
}};

// Names producers give fields that carry nothing the kit checks beyond the fields above. Key-side copies of
// the query boundaries (the kit checks self-attention packing, where both are the same: compared, not read)...
struct KeySideField {
  std::string_view name;
  std::string_view query;  // the query-side name it must equal
};
inline constexpr std::array<KeySideField, 2> kKeySideFields = {{{"cu_seq_lens_k", "cu_seq_lens_q"},
                                                                 {"cu_seqlens_k", "cu_seqlens_q"}}};
// ...and maxima derivable from the boundaries (skipped).
inline constexpr std::array<std::string_view, 5> kDerivedFields = {"max_length_q", "max_length_k", "max_seqlen_q",
                                                                   "max_seqlen_k", "max_seqlen"};

// The entry whose name or alias is `name`, or nullptr.
inline const RowField* FindRowField(std::string_view name) {
  for (const auto& field : kRowFields) {
    if (field.name == name) return &field;
    for (const auto alias : field.aliases)
      if (!alias.empty() && alias == name) return &field;
  }
  return nullptr;
}

// The place in kRowFields of the field named `name` (its JSON name): a stable index for what a reader holds
// per field. A name not in the table throws, which in a constant expression fails the build.
constexpr std::size_t RowFieldIndex(std::string_view name) {
  for (std::size_t k = 0; k < kRowFields.size(); ++k)
    if (kRowFields[k].name == name) return k;
  throw std::invalid_argument("not a row field");
}

inline const char* ToString(RowFieldShape shape) {
  switch (shape) {
    case RowFieldShape::kPerToken: return "per_token";
    case RowFieldShape::kPerRowList: return "per_row_list";
    case RowFieldShape::kSpans: return "spans";
  }
  return "?";
}

inline const char* ToString(RowFieldValue value) {
  switch (value) {
    case RowFieldValue::kInteger: return "integer";
    case RowFieldValue::kZeroOne: return "zero_one";
    case RowFieldValue::kReal: return "real";
    case RowFieldValue::kSpan: return "span";
  }
  return "?";
}

}  // namespace packoracle
