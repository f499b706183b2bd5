// Every refusal of the oracle's API says what is wrong and where.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

#include "packoracle/interchange/policy_json.h"
#include "packoracle/oracle.h"

namespace packoracle {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Runs `f`, expects an InputError and returns its message.
template <class F>
std::string ErrorOf(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError was thrown";
  return "";
}

const auto kDocs = MakeDocuments({{11, 12, 13}, {21, 22, 23, 24, 25, 26}});

Layout OneRow(std::vector<Piece> pieces, std::int64_t length = 8) {
  Layout layout{8, {}};
  layout.rows.push_back(RowLayout{length, std::move(pieces), 0, 0});
  return layout;
}

TEST(BadInput, SpanOutsideItsDocument) {
  const auto message = ErrorOf([] { Materialize(kDocs, OneRow({{0, 1, 0, 3}}), Policy{}); });
  EXPECT_THAT(message, AllOf(HasSubstr("row 0, piece 0"), HasSubstr("span [1, 4)"), HasSubstr("document 'd0'"),
                             HasSubstr("outside the document's 3 tokens")));
}

TEST(BadInput, SpanOutsideItsRow) {
  const auto message = ErrorOf([] { Materialize(kDocs, OneRow({{1, 0, 4, 6}}), Policy{}); });
  EXPECT_THAT(message, AllOf(HasSubstr("row 0, piece 0"), HasSubstr("slots [4, 10)"), HasSubstr("8 slots")));
}

TEST(BadInput, OverlappingSpans) {
  const auto message = ErrorOf([] { Materialize(kDocs, OneRow({{0, 0, 0, 3}, {1, 0, 2, 5}}), Policy{}); });
  EXPECT_THAT(message, AllOf(HasSubstr("row 0"), HasSubstr("[0, 3) (document 'd0')"),
                             HasSubstr("[2, 7) (document 'd1') overlap")));
}

TEST(BadInput, NegativeRowLength) {
  EXPECT_THAT(ErrorOf([] { Materialize(kDocs, OneRow({}, -1), Policy{}); }),
              AllOf(HasSubstr("row 0"), HasSubstr("negative row length -1")));
  EXPECT_THAT(ErrorOf([] { SequentialLayout(kDocs, Policy{}, 0); }), HasSubstr("row length must be positive, got 0"));
}

TEST(BadInput, RowLongerThanTheRowLength) {
  EXPECT_THAT(ErrorOf([] { Materialize(kDocs, OneRow({}, 9), Policy{}); }),
              AllOf(HasSubstr("row 0"), HasSubstr("9 slots, more than the row length 8")));
}

TEST(BadInput, UnknownDocumentAndEmptyPiece) {
  EXPECT_THAT(ErrorOf([] { Materialize(kDocs, OneRow({{2, 0, 0, 1}}), Policy{}); }),
              HasSubstr("document index 2 does not exist (2 documents)"));
  EXPECT_THAT(ErrorOf([] { Materialize(kDocs, OneRow({{0, 0, 0, 0}}), Policy{}); }), HasSubstr("has length 0"));
}

TEST(BadInput, UnknownPreset) {
  EXPECT_THAT(ErrorOf([] { FindPreset("megatron"); }),
              AllOf(HasSubstr("unknown preset 'megatron'"), HasSubstr("megatron-gpt"), HasSubstr("reference")));
  EXPECT_THAT(ErrorOf([] { PolicyFromJson({{"preset", "hf"}}, "policy.json"); }),
              AllOf(HasSubstr("policy.json"), HasSubstr("unknown preset 'hf'")));
}

TEST(BadInput, EodClosesWithoutAnEodId) {
  Policy policy;
  policy.boundary_source = BoundarySource::kEodCloses;
  EXPECT_THAT(ErrorOf([&] { ValidatePolicy(policy); }),
              HasSubstr("boundary_source: eod_closes needs an EOD id, but eos_id is null"));
  EXPECT_THAT(ErrorOf([&] { Materialize(kDocs, OneRow({}), policy); }), HasSubstr("eod_closes"));
  EXPECT_THAT(ErrorOf([] { PolicyFromJson({{"preset", "megatron-gpt"}, {"eos_id", nullptr}}, "dump.jsonl line 1"); }),
              AllOf(HasSubstr("dump.jsonl line 1"), HasSubstr("from preset 'megatron-gpt'"), HasSubstr("eos_id is null")));
}

TEST(BadInput, OtherContradictoryKeys) {
  Policy policy;
  policy.boundary_source = BoundarySource::kNone;  // doc_causal with nothing that marks documents
  policy.row_end_target = RowEndTarget::kNextInStream;  // and no stride
  const auto message = ErrorOf([&] { ValidatePolicy(policy); });
  EXPECT_THAT(message, AllOf(HasSubstr("doc_causal needs document boundaries"),
                             HasSubstr("next_in_stream needs stream_stride")));
  policy = Policy{};
  policy.boundary_source = BoundarySource::kPositionReset;
  policy.positions = Positions::kRowContinuous;
  EXPECT_THAT(ErrorOf([&] { ValidatePolicy(policy); }), HasSubstr("they never reset"));
  policy = Policy{};
  policy.label_alignment = LabelAlignment::kAligned;
  policy.row_end_target = RowEndTarget::kNextInDoc;
  policy.overflow = Overflow::kSplit;
  EXPECT_THAT(ErrorOf([&] { ValidatePolicy(policy); }), HasSubstr("the last slot reads no label"));
  policy = Policy{};
  policy.boundary_source = BoundarySource::kBosOpens;
  EXPECT_THAT(ErrorOf([&] { ValidatePolicy(policy); }), HasSubstr("bos_id is null"));
}

TEST(BadInput, BadPolicyKeysAndValues) {
  EXPECT_THAT(ErrorOf([] { PolicyFromJson({{"attention", "causal"}}, "p.json"); }),
              AllOf(HasSubstr("p.json"), HasSubstr("policy key 'attention'"), HasSubstr("\"causal\""),
                    HasSubstr("doc_causal | row_causal")));
  EXPECT_THAT(ErrorOf([] { PolicyFromJson({{"atention", "doc_causal"}}, "p.json"); }),
              AllOf(HasSubstr("unknown policy key 'atention'"), HasSubstr("attention")));
  EXPECT_THAT(ErrorOf([] { PolicyFromJson({{"pad_to", "multiple_of:0"}}, "p.json"); }), HasSubstr("k >= 1"));
  EXPECT_THAT(ErrorOf([] { PolicyFromJson({{"pad_to", "multiple_of:x"}}, "p.json"); }), HasSubstr("positive integer"));
  EXPECT_THAT(ErrorOf([] { PolicyFromJson({{"ignore_index", 1.5}}, "p.json"); }), HasSubstr("an integer"));
  EXPECT_THAT(ErrorOf([] { PolicyFromJson({{"loss_mask", {1, 2}}}, "p.json"); }), HasSubstr("has a array value"));
  EXPECT_THAT(ErrorOf([] { PolicyFromJson(nlohmann::json::array(), "p.json"); }), HasSubstr("must be a JSON object"));
}

TEST(BadInput, DocumentProblems) {
  Document doc{"x", {1, 2, 3}, {1, 1}};
  EXPECT_THAT(ErrorOf([&] { Effective(doc, Policy{}); }),
              AllOf(HasSubstr("document 'x'"), HasSubstr("supervised has 2 entries but tokens has 3")));
  doc.supervised = {1, 2, 1};
  EXPECT_THAT(ErrorOf([&] { Effective(doc, Policy{}); }), HasSubstr("supervised[1] is 2, expected 0 or 1"));
  const std::vector<Document> twins = {{"a", {1}, {}}, {"a", {2}, {}}};
  EXPECT_THAT(ErrorOf([&] { Effective(twins, Policy{}); }), HasSubstr("uid 'a' is used by an earlier document"));
}

TEST(BadInput, OverlongDocumentUnderOverflowError) {
  const auto docs = MakeDocuments({{1, 2, 3, 4, 5, 6, 7, 8, 9}});
  EXPECT_THAT(ErrorOf([&] { SequentialLayout(docs, Policy{}, 8); }),
              AllOf(HasSubstr("document 'd0' (index 0) has 9 tokens"), HasSubstr("longer than the row length 8"),
                    HasSubstr("overflow: error")));
  EXPECT_THAT(ErrorOf([&] { OneDocumentPerRow(docs, Policy{}, 8); }), HasSubstr("longer than the row length 8"));
}

TEST(BadInput, StreamTooShortForOneWindow) {
  EXPECT_THAT(ErrorOf([] { StreamWindows(MakeDocuments({{5}}), FindPreset("llmc").policy, 4); }),
              AllOf(HasSubstr("stream of 2 tokens"), HasSubstr("shorter than one window"), HasSubstr("(5 tokens)")));
}

TEST(BadInput, StepShapeAndLosses) {
  const auto& policy = FindPreset("reference").policy;
  auto layout = SequentialLayout(kDocs, policy, 8);
  AssignMicrobatches(layout, 1, 2);
  const auto batch = Materialize(kDocs, layout, policy);
  EXPECT_THAT(ErrorOf([&] { Denominators(batch, {1, 1}); }),
              AllOf(HasSubstr("row 1: rank 1"), HasSubstr("outside a step of 1 ranks x 1 micro-batches")));
  EXPECT_THAT(ErrorOf([&] { Objective(batch, {{0, 1, 3}}, Denominator::kGlobalTargets); }),
              AllOf(HasSubstr("no loss given for target token 1 of document 'd1'"), HasSubstr("losses cover 0 of its 6")));
  EXPECT_THAT(ErrorOf([&] { AssignMicrobatches(layout, 0, 1); }), HasSubstr("rows per micro-batch must be positive"));
}

TEST(BadInput, SegmentEncodings) {
  EXPECT_THAT(ErrorOf([] { FromCuSeqlens({1, 3, 8}, 8); }), HasSubstr("must start at 0"));
  EXPECT_THAT(ErrorOf([] { FromCuSeqlens({0, 5, 3, 8}, 8); }), HasSubstr("decreases at entry 2"));
  EXPECT_THAT(ErrorOf([] { FromCuSeqlens({0, 3, 7}, 8); }), HasSubstr("must end at the row length 8"));
  EXPECT_THAT(ErrorOf([] { FromSeqLens({3, 4}, 8); }), HasSubstr("sum to 7, not the row length 8"));
  EXPECT_THAT(ErrorOf([] { FromSeqLens({3, -1, 6}, 8); }), HasSubstr("negative length at entry 1"));
}

TEST(BadInput, LossMaskNeededToDecode) {
  EXPECT_THAT(ErrorOf([] { DecodeTargets({1, 2}, nullptr, FindPreset("megatron-gpt").policy); }),
              HasSubstr("loss_mask as long as the labels (2) is needed, got none"));
}

}  // namespace
}  // namespace packoracle

namespace packoracle {
namespace {

TEST(BadInput, AbsurdNumbersAreRefusedNotOverflowed) {
  const auto docs = MakeDocuments({{11, 12, 13}, {21, 22, 23, 24, 25, 26}});
  const std::int64_t huge = std::numeric_limits<std::int64_t>::max();
  Layout layout{8, {RowLayout{8, {{0, 0, huge, 1}}, 0, 0}}};
  EXPECT_THAT(ErrorOf([&] { Materialize(docs, layout, Policy{}); }), HasSubstr("lie outside the row's 8 slots"));
  layout.rows[0].pieces = {{0, huge, 0, 1}};
  EXPECT_THAT(ErrorOf([&] { Materialize(docs, layout, Policy{}); }), HasSubstr("outside the document's 3 tokens"));
  layout.rows[0].pieces = {};
  layout.rows[0].micro_step = std::int64_t{1} << 40;
  EXPECT_THAT(ErrorOf([&] { Materialize(docs, layout, Policy{}); }), HasSubstr("must lie in 0.."));
  EXPECT_THAT(ErrorOf([&] { SequentialLayout(docs, FindPreset("hf-flatten").policy, huge); }),
              HasSubstr("above the kit's limit"));
  Policy base;
  base.position_base = huge;
  EXPECT_THAT(ErrorOf([&] { ValidatePolicy(base); }), HasSubstr("outside ±2^40"));
}

TEST(BadInput, OneDocumentTwiceInARowOrATokenPlacedTwice) {
  const auto docs = MakeDocuments({{11, 12, 13}, {21, 22, 23, 24, 25, 26}});
  Layout same_row{8, {RowLayout{8, {{1, 0, 0, 3}, {1, 3, 3, 3}}, 0, 0}}};
  EXPECT_THAT(ErrorOf([&] { Materialize(docs, same_row, Policy{}); }),
              AllOf(HasSubstr("two pieces of document 'd1'"), HasSubstr("at most one piece")));
  Layout twice{8, {RowLayout{8, {{0, 0, 0, 3}}, 0, 0}, RowLayout{8, {{0, 1, 0, 2}}, 0, 0}}};
  EXPECT_THAT(ErrorOf([&] { Materialize(docs, twice, Policy{}); }),
              AllOf(HasSubstr("token 1 of document 'd0' is placed twice"), HasSubstr("rows 0 and 1")));
}

TEST(BadInput, TokensALabelOrABoundaryEncodingCannotCarry) {
  EXPECT_THAT(ErrorOf([] { Effective(Document{"x", {5, -100, 6}, {}}, Policy{}); }),
              AllOf(HasSubstr("document 'x': token 1 is -100"), HasSubstr("ignore_index")));
  EXPECT_THAT(ErrorOf([] { Effective(Document{"x", {5, 0, 6}, {}}, FindPreset("megatron-gpt").policy); }),
              AllOf(HasSubstr("token 1 is the EOD id 0"), HasSubstr("eod_closes")));
  EXPECT_THAT(ErrorOf([] { Effective(Document{"x", {5, 0, 6}, {}}, FindPreset("llmc").policy); }),
              AllOf(HasSubstr("token 1 is the BOS id 0"), HasSubstr("bos_opens")));
}

TEST(BadInput, PadToMultipleRoundingPastTheRowLengthNamesPadTo) {
  Policy policy;
  policy.pad_to = {PadTo::Kind::kMultipleOf, 3};
  EXPECT_THAT(ErrorOf([&] { SequentialLayout(MakeDocuments({{1, 2, 3, 4, 5, 6, 7, 8}}), policy, 8); }),
              AllOf(HasSubstr("pad_to: multiple_of:3"), HasSubstr("up to 9 slots, more than the row length 8")));
}

TEST(BadInput, StreamPoliciesSplitDocuments) {
  Policy policy = FindPreset("megatron-gpt").policy;
  policy.overflow = Overflow::kError;
  EXPECT_THAT(ErrorOf([&] { ValidatePolicy(policy); }), HasSubstr("a stream policy has overflow: split"));
}

}  // namespace
}  // namespace packoracle
