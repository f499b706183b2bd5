// kRowFields (row_fields.h) bound to CandidateRow: the member that holds each field, in the table's order. The
// row readers and writers (interchange/request_json.cc, fastcheck/jsonl_reader.cc, the binding's convert.cc)
// walk this binding instead of naming each field, so a new field is its kRowFields entry, its member here and
// in CandidateRow, and its checks; the static_assert below refuses a member whose type does not hold what the
// table says (a per-token integer field bound to a vector of doubles, an optional member for a required field).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "packoracle/properties/candidate.h"
#include "packoracle/properties/row_fields.h"

namespace packoracle {

inline constexpr auto kRowMembers =
    std::tuple{&CandidateRow::input_ids, &CandidateRow::labels,   &CandidateRow::loss_mask,
               &CandidateRow::position_ids, &CandidateRow::cu_seqlens, &CandidateRow::seq_lens,
               &CandidateRow::doc_ids,   &CandidateRow::attention_mask, &CandidateRow::doc_spans};
static_assert(std::tuple_size_v<decltype(kRowMembers)> == kRowFields.size(), "one member per kRowFields entry");

// The field per-token lengths are measured against (the readers' "has N entries, input_ids has M"). It comes
// first, so a reader walking the table in order knows the length before any other per-token field.
inline constexpr std::size_t kRowLengthField = RowFieldIndex("input_ids");
static_assert(kRowLengthField == 0);

// The field of the spans (shape kSpans), which the readers take apart (a dump's rows may all leave them out).
inline constexpr std::size_t kRowSpansField = [] {
  for (std::size_t k = 0; k < kRowFields.size(); ++k)
    if (kRowFields[k].shape == RowFieldShape::kSpans) return k;
  throw std::invalid_argument("no spans field");
}();

// The member of field I of `row` (a CandidateRow, const or not).
template <std::size_t I, class Row>
constexpr auto& RowMember(Row& row) {
  return row.*std::get<I>(kRowMembers);
}

namespace row_members_internal {
template <class T>
struct Unwrap {
  using type = T;
  static constexpr bool optional = false;
};
template <class T>
struct Unwrap<std::optional<T>> {
  using type = T;
  static constexpr bool optional = true;
};

template <std::size_t I>
constexpr bool MemberHoldsField() {
  using Member = std::remove_cvref_t<decltype(RowMember<I>(std::declval<CandidateRow&>()))>;
  using Element = typename Unwrap<Member>::type::value_type;
  constexpr RowField field = kRowFields[I];
  // A required field is always there (doc_spans too: a row without spans holds an empty list).
  if (Unwrap<Member>::optional == field.required) return false;
  switch (field.value) {
    case RowFieldValue::kInteger:
    case RowFieldValue::kZeroOne: return std::is_integral_v<Element> && field.shape != RowFieldShape::kSpans;
    case RowFieldValue::kReal: return std::is_floating_point_v<Element> && field.shape != RowFieldShape::kSpans;
    case RowFieldValue::kSpan: return std::is_same_v<Element, DocSpan> && field.shape == RowFieldShape::kSpans;
  }
  return false;
}

template <std::size_t... I>
constexpr bool EveryMemberHoldsItsField(std::index_sequence<I...>) {
  return (MemberHoldsField<I>() && ...);
}
}  // namespace row_members_internal

static_assert(row_members_internal::EveryMemberHoldsItsField(std::make_index_sequence<kRowFields.size()>()),
              "a kRowMembers member does not hold what its kRowFields entry says");

// f(std::integral_constant<std::size_t, I>) for every field, in the table's order (the writers' order).
template <class F>
constexpr void ForEachRowField(F&& f) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (f(std::integral_constant<std::size_t, I>{}), ...);
  }(std::make_index_sequence<kRowFields.size()>());
}

// f(std::integral_constant<std::size_t, I>) for the one field whose index is `index` (a reader that found the
// field by name); its result, or `otherwise` for an index out of the table.
template <class R, class F>
R VisitRowField(std::size_t index, R otherwise, F&& f) {
  R out = otherwise;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (void)((index == I ? (out = f(std::integral_constant<std::size_t, I>{}), true) : false) || ...);
  }(std::make_index_sequence<kRowFields.size()>());
  return out;
}

// The fields of a span (the entries of the kSpans field), stated once, in the order the writers write them and
// a tuple gives them, bound to DocSpan: the document's uid first (`number` null), then its three integers.
struct SpanField {
  std::string_view name;
  std::int64_t DocSpan::*number;
};
inline constexpr std::array<SpanField, 4> kSpanFields = {{
    {"doc_uid", nullptr},
    {"start", &DocSpan::start},
    {"length", &DocSpan::length},
    {"doc_offset", &DocSpan::doc_offset},
}};
static_assert(!kSpanFields[0].number, "the uid comes first (a span tuple's order)");

// What a writer walks: values(name, values) for each array field the row gives (a required one always, an
// optional one when present), spans(name, doc_spans) for the spans, in the table's order (the writers' order).
template <class Values, class Spans>
void ForEachGivenRowField(const CandidateRow& row, Values&& values, Spans&& spans) {
  ForEachRowField([&](auto i) {
    constexpr std::size_t I = decltype(i)::value;
    const auto& member = RowMember<I>(row);
    if constexpr (I == kRowSpansField) spans(kRowFields[I].name, member);
    else if constexpr (kRowFields[I].required) values(kRowFields[I].name, member);
    else if (member) values(kRowFields[I].name, *member);
  });
}

}  // namespace packoracle
