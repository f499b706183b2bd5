#include <gtest/gtest.h>

#include <algorithm>

#include "packoracle/interchange/policy_json.h"
#include "packoracle/oracle.h"

namespace packoracle {
namespace {

TEST(Policy, DefaultIsTheReferencePresetOfTheDesign) {
  // DESIGN §3 gives the reference policy in full; the default Policy is exactly it.
  const auto expected = nlohmann::ordered_json::parse(R"({"preset":"reference","label_alignment":"pre_shifted",
    "ignore_index":-100,"loss_mask":false,"boundary_source":"spans","attention":"doc_causal","pad_keys":"masked",
    "positions":"doc_reset","position_base":0,"pad_positions":"any","split_positions":"continue",
    "boundary_target":"excluded","row_end_target":"none","stream_stride":null,"padding":"right","pad_id":0,
    "pad_to":"row_len","overflow":"error","eos_id":null,"bos_id":null,"denominator":"global_targets",
    "count_basis":"targets"})");
  EXPECT_EQ(PolicyToJson(FindPreset("reference").policy), expected);
  Policy defaults;
  defaults.preset = "reference";
  EXPECT_EQ(defaults, FindPreset("reference").policy);
}

TEST(Policy, EveryKeyOfTheTableIsReadAndWrittenByItsOneEntry) {
  // PolicyKeys, PolicyKeyValues, SetPolicyKey, KeysAfterVersionOne and PolicyKeyDomains are one table: the same
  // keys in the same order, every listed value set and read back as itself, the later keys' defaults those
  // of a Policy built key by key.
  const auto& domains = PolicyKeyDomains();
  ASSERT_EQ(domains.size(), PolicyKeys().size());
  const auto defaults = PolicyKeyValues(Policy{});
  std::size_t later = 0;
  for (std::size_t k = 0; k < domains.size(); ++k) {
    SCOPED_TRACE(domains[k].key);
    EXPECT_EQ(domains[k].key, PolicyKeys()[k]);
    EXPECT_EQ(domains[k].key, defaults[k].first);
    EXPECT_EQ(domains[k].default_value, defaults[k].second);
    EXPECT_FALSE(domains[k].takes.empty());
    EXPECT_TRUE(domains[k].open || !domains[k].values.empty());
    for (const PolicyValue& value : domains[k].values) {
      Policy p;
      SetPolicyKey(p, domains[k].key, value);
      EXPECT_EQ(PolicyKeyValues(p)[k].second, value) << ToString(value);
    }
    if (domains[k].after_version_one) {
      ASSERT_LT(later, KeysAfterVersionOne().size());
      EXPECT_EQ(KeysAfterVersionOne()[later].first, domains[k].key);
      EXPECT_EQ(KeysAfterVersionOne()[later].second, ToString(domains[k].default_value));
      ++later;
    }
  }
  EXPECT_EQ(later, KeysAfterVersionOne().size());
  Policy p;
  EXPECT_THROW(SetPolicyKey(p, "no_such_key", PolicyValue(nullptr)), InputError);
  EXPECT_THROW(SetPolicyKey(p, "padding", PolicyValue(std::string("center"))), InputError);
}

TEST(Policy, EveryPresetOfTheDesignExistsIsCoherentAndRoundTrips) {
  for (const char* name : {"reference", "hf-flatten", "hf-padded", "trl-padding-free", "trl-padding-free-legacy",
                           "trl-wrapped", "torchtune-packed", "megatron-gpt", "megatron-gpt-docmask",
                           "megatron-sft-thd", "llmc"}) {
    SCOPED_TRACE(name);
    const Preset& preset = FindPreset(name);
    EXPECT_EQ(preset.policy.preset, name);
    EXPECT_FALSE(preset.system.empty());
    EXPECT_TRUE(PolicyProblems(preset.policy).empty());
    const auto json = PolicyToJson(preset.policy);
    // fully resolved: every key present, but those added after version 1, left out at their defaults
    EXPECT_EQ(json.size() + KeysAfterVersionOne().size(), PolicyKeys().size());
    EXPECT_FALSE(json.contains("efficiency"));
    EXPECT_FALSE(json.contains("truncate_to"));
    EXPECT_FALSE(json.contains("segment_encodings"));
    EXPECT_FALSE(json.contains("shift"));
    EXPECT_EQ(PolicyFromJson(nlohmann::json::parse(json.dump()), "roundtrip"), preset.policy);
  }
  EXPECT_EQ(Presets().size(), 11u);
}

TEST(Policy, EfficiencyIsAPromiseOnlyWhereRowsHoldWholeDocuments) {
  Policy p = FindPreset("reference").policy;
  EXPECT_EQ(p.efficiency, Efficiency::kReported);
  SetPolicyKey(p, "efficiency", std::string("no_mergeable_rows"));
  EXPECT_TRUE(PolicyProblems(p).empty());
  const auto json = PolicyToJson(p);
  EXPECT_EQ(json.at("efficiency"), "no_mergeable_rows");
  EXPECT_EQ(json.size() + KeysAfterVersionOne().size() - 1, PolicyKeys().size());  // the other later keys left out
  EXPECT_EQ(PolicyFromJson(nlohmann::json::parse(json.dump()), "roundtrip"), p);
  EXPECT_THROW(SetPolicyKey(p, "efficiency", std::string("best")), InputError);

  Policy split = FindPreset("torchtune-packed").policy;
  split.overflow = Overflow::kSplit;
  split.efficiency = Efficiency::kNoMergeableRows;
  ASSERT_EQ(PolicyProblems(split).size(), 1u);
  EXPECT_EQ(PolicyProblems(split)[0],
            "efficiency: no_mergeable_rows compares rows of whole documents, but overflow is split (a split row is "
            "full by construction; use overflow error or truncate)");
  Policy stream = FindPreset("megatron-gpt").policy;
  stream.efficiency = Efficiency::kNoMergeableRows;
  ASSERT_FALSE(PolicyProblems(stream).empty());
  EXPECT_NE(PolicyProblems(stream)[0].find("overflow is split (stream windows)"), std::string::npos);
  Policy padded = FindPreset("hf-padded").policy;
  padded.efficiency = Efficiency::kNoMergeableRows;
  ASSERT_EQ(PolicyProblems(padded).size(), 1u);
  EXPECT_NE(PolicyProblems(padded)[0].find("boundary_source is none"), std::string::npos);

  Policy multiple = FindPreset("reference").policy;
  EXPECT_EQ(MergeCapacity(multiple, 10), 10);
  multiple.pad_to = PadTo{PadTo::Kind::kMultipleOf, 4};
  EXPECT_EQ(MergeCapacity(multiple, 10), 8);  // a row of 9 tokens would take 12 slots
}

// consumer_overhead (DESIGN §3, §4 efficiency): null (reported only) or a percentage ≥ 0 that an attention
// consumer's computed pairs may exceed the declared rule's; left out of the JSON at null, as version 1 wrote it.
TEST(Policy, ConsumerOverheadIsNullOrAPercentage) {
  Policy p = FindPreset("reference").policy;
  EXPECT_FALSE(p.consumer_overhead.has_value());
  EXPECT_FALSE(PolicyToJson(p).contains("consumer_overhead"));
  SetPolicyKey(p, "consumer_overhead", std::int64_t{100});
  EXPECT_EQ(p.consumer_overhead, 100);
  const auto json = PolicyToJson(p);
  EXPECT_EQ(json.at("consumer_overhead"), 100);
  EXPECT_EQ(PolicyFromJson(nlohmann::json::parse(json.dump()), "roundtrip"), p);
  SetPolicyKey(p, "consumer_overhead", nullptr);
  EXPECT_FALSE(p.consumer_overhead.has_value());
  try {
    SetPolicyKey(p, "consumer_overhead", std::int64_t{-1});
    FAIL() << "a negative percentage was accepted";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "policy key 'consumer_overhead': value -1 is not allowed (null | an integer percentage in 0..1000000)");
  }
  EXPECT_THROW(SetPolicyKey(p, "consumer_overhead", std::string("2x")), InputError);
}

// truncate_to: pad_multiple (DESIGN §3): a truncated document keeps ⌊L/k⌋·k tokens; it needs overflow: truncate
// and pad_to multiple_of:k, and the JSON of every policy without it stays as version 1 wrote it.
TEST(Policy, TruncationAtThePaddingMultipleNeedsTruncateAndAMultiple) {
  Policy p = FindPreset("trl-padding-free").policy;
  EXPECT_EQ(p.truncate_to, TruncateTo::kRowLen);
  EXPECT_EQ(TruncationLength(p, 10), 10);
  SetPolicyKey(p, "padding", std::string("right"));
  SetPolicyKey(p, "pad_to", std::string("multiple_of:8"));
  EXPECT_EQ(TruncationLength(p, 10), 10);  // row_len: the default keeps what it kept
  SetPolicyKey(p, "truncate_to", std::string("pad_multiple"));
  EXPECT_TRUE(PolicyProblems(p).empty());
  EXPECT_EQ(TruncationLength(p, 10), 8);
  EXPECT_EQ(TruncationLength(p, 16), 16);
  EXPECT_EQ(TruncationLength(p, 7), 0);  // k > L: PadsBeyondTheRow refuses every token
  EXPECT_TRUE(PolicyDemandsRefusal(p, 7, {1}));
  const auto json = PolicyToJson(p);
  EXPECT_EQ(json.at("truncate_to"), "pad_multiple");
  EXPECT_FALSE(json.contains("efficiency"));
  EXPECT_EQ(PolicyFromJson(nlohmann::json::parse(json.dump()), "roundtrip"), p);
  EXPECT_THROW(SetPolicyKey(p, "truncate_to", std::string("multiple_of:8")), InputError);

  Policy error = p;
  error.overflow = Overflow::kError;
  ASSERT_EQ(PolicyProblems(error).size(), 1u);
  EXPECT_EQ(PolicyProblems(error)[0],
            "truncate_to: pad_multiple says where overflow: truncate cuts a document, but overflow is error (use "
            "truncate_to: row_len)");
  Policy row_len = p;
  row_len.pad_to = PadTo{};
  ASSERT_EQ(PolicyProblems(row_len).size(), 1u);
  EXPECT_EQ(PolicyProblems(row_len)[0],
            "truncate_to: pad_multiple keeps floor(L/k)*k tokens of pad_to multiple_of:k, but pad_to is row_len (use "
            "truncate_to: row_len)");
  Policy unpadded = FindPreset("trl-padding-free").policy;
  unpadded.truncate_to = TruncateTo::kPadMultiple;
  ASSERT_EQ(PolicyProblems(unpadded).size(), 1u);
  EXPECT_NE(PolicyProblems(unpadded)[0].find("but padding is none"), std::string::npos);
}

// overflow: drop, a value added after version 1: read and written as "drop" (no version-1 policy has it, so
// the JSON of every earlier policy is unchanged), listed in the key's domain (which_policy walks it), never a
// refusal, and as incoherent as truncate where documents are carried into the next row.
TEST(Policy, OverflowDropIsAValueOfTheOverflowKeyThatNeverRefuses) {
  Policy p;
  SetPolicyKey(p, "overflow", std::string("drop"));
  EXPECT_EQ(p.overflow, Overflow::kDrop);
  EXPECT_TRUE(PolicyProblems(p).empty());
  EXPECT_EQ(PolicyToJson(p).at("overflow"), "drop");
  EXPECT_EQ(PolicyFromJson(nlohmann::json::parse(PolicyToJson(p).dump()), "roundtrip"), p);
  EXPECT_FALSE(PolicyDemandsRefusal(p, 4, {5, 9}));
  const auto& domains = PolicyKeyDomains();
  const auto overflow = std::find_if(domains.begin(), domains.end(), [](const auto& d) { return d.key == "overflow"; });
  ASSERT_NE(overflow, domains.end());
  EXPECT_EQ(overflow->values.back(), PolicyValue(std::string("drop")));
  EXPECT_NE(overflow->takes.find("drop"), std::string::npos);
  Policy carried = p;
  carried.row_end_target = RowEndTarget::kNextInDoc;
  ASSERT_EQ(PolicyProblems(carried).size(), 1u);
  EXPECT_NE(PolicyProblems(carried)[0].find("overflow is drop"), std::string::npos);
}

// segment_encodings: rows (DESIGN §3): cu_seqlens, seq_lens and doc_ids name rows; legal only under row_causal
// attention and where no boundary is read from them.
TEST(Policy, RowNamedSegmentEncodingsNeedRowCausalAttention) {
  Policy p = FindPreset("trl-wrapped").policy;
  EXPECT_EQ(p.segment_encodings, SegmentEncodings::kDocuments);
  SetPolicyKey(p, "segment_encodings", std::string("rows"));
  EXPECT_TRUE(PolicyProblems(p).empty());
  const auto json = PolicyToJson(p);
  EXPECT_EQ(json.at("segment_encodings"), "rows");
  EXPECT_FALSE(json.contains("truncate_to"));
  EXPECT_EQ(PolicyFromJson(nlohmann::json::parse(json.dump()), "roundtrip"), p);
  EXPECT_THROW(SetPolicyKey(p, "segment_encodings", std::string("row")), InputError);

  Policy doc_causal = FindPreset("reference").policy;
  doc_causal.segment_encodings = SegmentEncodings::kRows;
  ASSERT_EQ(PolicyProblems(doc_causal).size(), 1u);
  EXPECT_EQ(PolicyProblems(doc_causal)[0],
            "segment_encodings: rows makes each row one sequence of cu_seqlens, seq_lens and doc_ids, so a backend "
            "attends across the row's documents, but attention is doc_causal (use row_causal)");
  Policy read_from_them = p;
  read_from_them.boundary_source = BoundarySource::kDocIds;
  ASSERT_EQ(PolicyProblems(read_from_them).size(), 1u);
  EXPECT_EQ(PolicyProblems(read_from_them)[0],
            "boundary_source: doc_ids reads document boundaries from an encoding that segment_encodings: rows says "
            "names rows (use spans, none, or a position, EOD or BOS boundary)");
}

// shift: document (DESIGN §3): each document shifted on its own, its last token a label only; every count of
// a document's tokens counts its inputs; contradicted by the keys that would cross a document boundary.
TEST(Policy, ThePerDocumentShiftCountsInputsAndNeverCrossesADocument) {
  Policy p = FindPreset("reference").policy;
  EXPECT_EQ(p.shift, Shift::kRow);
  EXPECT_EQ(InputTokens(p, 3), 3);
  SetPolicyKey(p, "shift", std::string("document"));
  EXPECT_TRUE(PolicyProblems(p).empty());
  EXPECT_EQ(InputTokens(p, 3), 2);
  EXPECT_EQ(InputTokens(p, 1), 0);  // one token: no input, no slot (as an empty document)
  EXPECT_EQ(InputTokens(p, 0), 0);
  const auto json = PolicyToJson(p);
  EXPECT_EQ(json.at("shift"), "document");
  EXPECT_EQ(json.size() + KeysAfterVersionOne().size() - 1, PolicyKeys().size());  // the other later keys left out
  EXPECT_EQ(PolicyFromJson(nlohmann::json::parse(json.dump()), "roundtrip"), p);
  EXPECT_THROW(SetPolicyKey(p, "shift", std::string("documents")), InputError);

  // Refusal counts inputs: a document of L + 1 tokens has L inputs and fits a row under overflow: error.
  EXPECT_FALSE(PolicyDemandsRefusal(p, 2, {3}));
  EXPECT_TRUE(PolicyDemandsRefusal(p, 2, {4}));
  EXPECT_TRUE(PolicyDemandsRefusal(FindPreset("reference").policy, 2, {3}));
  // A stream of 4 + 2 tokens has 3 + 1 inputs: one full window of 4 under padding none, none of 5.
  Policy stream = FindPreset("trl-wrapped").policy;
  stream.padding = Padding::kNone;
  stream.boundary_target = BoundaryTarget::kExcluded;
  stream.label_alignment = LabelAlignment::kPreShifted;
  stream.shift = Shift::kDocument;
  ASSERT_TRUE(PolicyProblems(stream).empty()) << PolicyProblems(stream)[0];
  EXPECT_FALSE(PolicyDemandsRefusal(stream, 4, {4, 2}));
  EXPECT_TRUE(PolicyDemandsRefusal(stream, 5, {4, 2}));

  auto only_problem = [](const Policy& q) {
    const auto problems = PolicyProblems(q);
    EXPECT_EQ(problems.size(), 1u);
    return problems.empty() ? std::string() : problems[0];
  };
  Policy aligned = p;
  aligned.label_alignment = LabelAlignment::kAligned;
  EXPECT_EQ(only_problem(aligned),
            "shift: document gives each input the next token of its own document as a pre-shifted label, but "
            "label_alignment is aligned (the model's own shift of the row would make a document's last input "
            "predict the next document's first token; use pre_shifted)");
  Policy included = p;
  included.boundary_target = BoundaryTarget::kIncluded;
  EXPECT_EQ(only_problem(included),
            "shift: document keeps every target inside its document, so no prediction targets the next document's "
            "first token, but boundary_target is included (use excluded)");
  Policy megatron = FindPreset("megatron-gpt-docmask").policy;  // next_in_stream, eod_closes
  megatron.shift = Shift::kDocument;
  const auto problems = PolicyProblems(megatron);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0],
            "row_end_target: next_in_stream makes a row's last slot predict the stream's next input, but under "
            "shift: document a document's last input predicts its own last token, which is no input (use "
            "next_in_doc)");
  EXPECT_EQ(problems[1],
            "boundary_source: eod_closes reads a boundary after each EOD input, but under shift: document a "
            "document's last token (its EOD) is a label only, never an input (use another boundary_source)");
  Policy stride = stream;
  stride.stream_stride = StreamStride::kLPlus1;
  EXPECT_EQ(only_problem(stride),
            "stream_stride: \"L+1\" skips the input after each window as the window's row-end target, but under "
            "shift: document a window ending a document's inputs targets the document's last token, and the "
            "skipped input would be lost (use \"L\")");
}

// pad_to: longest, a value added after version 1 (LitGPT get_sft_collate_fn, HF padding="longest"): read and
// written as "longest", in the key's named values (which_policy's search walks them), a contradiction without
// padding; a policy that does not use it writes what version 1 wrote.
TEST(Policy, PadToLongestIsAValueOfPadTo) {
  Policy p = FindPreset("hf-padded").policy;
  const std::string before = PolicyToJson(p).dump();
  SetPolicyKey(p, "pad_to", std::string("longest"));
  EXPECT_EQ(p.pad_to, (PadTo{PadTo::Kind::kLongest, 0}));
  EXPECT_EQ(PolicyToJson(p).at("pad_to"), "longest");
  EXPECT_EQ(PolicyFromJson(nlohmann::json::parse(PolicyToJson(p).dump()), "roundtrip"), p);
  EXPECT_TRUE(PolicyProblems(p).empty());
  SetPolicyKey(p, "pad_to", std::string("row_len"));
  EXPECT_EQ(PolicyToJson(p).dump(), before);
  const auto& domains = PolicyKeyDomains();
  const auto pad_to = std::find_if(domains.begin(), domains.end(), [](const auto& d) { return d.key == "pad_to"; });
  ASSERT_NE(pad_to, domains.end());
  EXPECT_NE(std::find(pad_to->values.begin(), pad_to->values.end(), PolicyValue(std::string("longest"))),
            pad_to->values.end());
  EXPECT_NE(pad_to->takes.find("\"longest\""), std::string::npos);
  Policy none = FindPreset("reference").policy;
  none.padding = Padding::kNone;
  none.pad_to = PadTo{PadTo::Kind::kLongest, 0};
  ASSERT_EQ(PolicyProblems(none).size(), 1u);
  EXPECT_EQ(PolicyProblems(none)[0], "pad_to: longest asks for padding, but padding is none");
  Policy truncated = FindPreset("reference").policy;
  truncated.overflow = Overflow::kTruncate;
  truncated.truncate_to = TruncateTo::kPadMultiple;
  truncated.pad_to = PadTo{PadTo::Kind::kLongest, 0};
  ASSERT_EQ(PolicyProblems(truncated).size(), 1u);
  EXPECT_NE(PolicyProblems(truncated)[0].find("but pad_to is longest"), std::string::npos);
  EXPECT_EQ(MergeCapacity(truncated, 10), 10);
  EXPECT_THROW(SetPolicyKey(p, "pad_to", std::string("longest:8")), InputError);
}

TEST(Policy, AFileMayStartFromAPresetAndOverrideKeys) {
  const auto policy = PolicyFromJson(
      {{"overflow", "split"}, {"preset", "torchtune-packed"}, {"row_end_target", "next_in_doc"}, {"pad_to", "multiple_of:8"}},
      "x");
  EXPECT_EQ(policy.preset, "torchtune-packed");
  EXPECT_EQ(policy.boundary_source, BoundarySource::kSeqLens);  // from the preset
  EXPECT_EQ(policy.overflow, Overflow::kSplit);                 // overridden, whatever the key order
  EXPECT_EQ(policy.row_end_target, RowEndTarget::kNextInDoc);
  EXPECT_EQ(policy.pad_to, (PadTo{PadTo::Kind::kMultipleOf, 8}));
}

// "Policy keys that mean nothing under the rest of the policy may be null" (issue 16): a user describing a
// system without padding writes "pad_id": null; wherever the key matters, null is refused naming the key and why.
std::string RefusalOf(const nlohmann::json& policy) {
  try {
    PolicyFromJson(policy, "policy.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Policy, KeysThatMeanNothingUnderThePolicyMayBeNull) {
  // Keys come in any order: "pad_id" sorts before "padding", and the null is judged once every key is set.
  const auto policy = PolicyFromJson({{"preset", "reference"}, {"padding", "none"}, {"pad_id", nullptr},
                                      {"pad_to", nullptr}, {"pad_keys", nullptr}, {"pad_positions", nullptr}},
                                     "policy.json");
  EXPECT_EQ(policy.padding, Padding::kNone);
  EXPECT_EQ(policy.pad_id, Policy{}.pad_id);  // the default, which the policy never reads
  // A preset's pad_to multiple_of would contradict padding: none; null takes the default row_len.
  const auto multiple = PolicyFromJson({{"preset", "reference"}, {"pad_to", "multiple_of:8"}}, "p");
  EXPECT_EQ(ApplyPolicyOverrides(multiple, {{"padding", "none"}, {"pad_to", nullptr}}, "p").pad_to, PadTo{});
  // split_positions under overflow error; count_basis under all_positions.
  EXPECT_NO_THROW(PolicyFromJson({{"overflow", "error"}, {"split_positions", nullptr}}, "p"));
  EXPECT_NO_THROW(PolicyFromJson({{"overflow", "split"}, {"positions", "row_continuous"}, {"split_positions", nullptr},
                                  {"attention", "row_causal"}, {"boundary_source", "spans"}},
                                 "p"));
  EXPECT_NO_THROW(PolicyFromJson({{"denominator", "all_positions"}, {"count_basis", nullptr}}, "p"));
  // A preset without padding: the keys mean nothing there either.
  EXPECT_NO_THROW(PolicyFromJson({{"preset", "hf-flatten"}, {"pad_id", nullptr}, {"pad_to", nullptr}}, "p"));
}

TEST(Policy, NullIsRefusedWhereTheKeyMattersNamingTheKeyAndWhy) {
  EXPECT_EQ(RefusalOf({{"preset", "reference"}, {"pad_id", nullptr}}),
            "policy.json: policy key 'pad_id' is null, but padding is right: padding slots hold the pad id (null is "
            "accepted only where the rest of the policy makes the key mean nothing)");
  EXPECT_NE(RefusalOf({{"padding", "right"}, {"pad_to", nullptr}}).find("'pad_to' is null, but padding is right"),
            std::string::npos);
  EXPECT_NE(RefusalOf({{"overflow", "split"}, {"split_positions", nullptr}}).find("'split_positions' is null, but overflow is split"),
            std::string::npos);
  EXPECT_NE(RefusalOf({{"count_basis", nullptr}}).find("'count_basis' is null, but denominator is global_targets"),
            std::string::npos);
  // Keys that every policy reads keep their own message, naming the key and what is allowed.
  EXPECT_NE(RefusalOf({{"padding", nullptr}}).find("policy key 'padding': value null is not allowed"), std::string::npos);
  EXPECT_NE(RefusalOf({{"ignore_index", nullptr}}).find("policy key 'ignore_index'"), std::string::npos);
  // eos_id, bos_id and stream_stride take null as a value of their own, as before.
  EXPECT_NO_THROW(PolicyFromJson({{"eos_id", nullptr}, {"bos_id", nullptr}, {"stream_stride", nullptr}}, "p"));
}

TEST(Policy, WhyKeyMattersNamesTheDecidingKey) {
  Policy p;
  p.padding = Padding::kNone;
  for (const auto& key : {"pad_id", "pad_to", "pad_keys", "pad_positions"}) EXPECT_FALSE(WhyKeyMatters(p, key)) << key;
  p.padding = Padding::kRight;
  for (const auto& key : {"pad_id", "pad_to", "pad_keys", "pad_positions"}) EXPECT_TRUE(WhyKeyMatters(p, key)) << key;
  EXPECT_EQ(*WhyKeyMatters(p, "attention"), "it means something under every policy");
  EXPECT_FALSE(WhyKeyMatters(p, "split_positions"));  // overflow: error by default
}

TEST(Policy, DelimitersAreAddedAndSupervised) {
  Policy policy;
  policy.bos_id = 1;
  policy.eos_id = 2;
  const auto doc = Effective(Document{"a", {11, 12}, {0, 1}}, policy);
  EXPECT_EQ(doc.tokens, (std::vector<Token>{1, 11, 12, 2}));
  EXPECT_EQ(doc.supervised, (std::vector<int>{1, 0, 1, 1}));
}

}  // namespace
}  // namespace packoracle
