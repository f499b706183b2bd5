#include <gtest/gtest.h>

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
    EXPECT_EQ(json.size(), PolicyKeys().size());  // fully resolved: every key present
    EXPECT_EQ(PolicyFromJson(nlohmann::json::parse(json.dump()), "roundtrip"), preset.policy);
  }
  EXPECT_EQ(Presets().size(), 11u);
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
