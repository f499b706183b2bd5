// pad_to: longest (DESIGN §3): every row of a micro-batch has as many slots as the most any of its rows needs
// (its content, delimiters included), at most L, the padding on the declared side: LitGPT 0.5.13's
// get_sft_collate_fn, HF DataCollatorWithPadding(padding="longest"). The `shape` invariant judges the width:
// a row wider or narrower than its micro-batch's widest content is a finding, whichever side pads. The fast
// verifier is pinned to CheckCase under it in fastcheck/test/differential_test.cc (LongestAgreement).
#include <gtest/gtest.h>  // before rapidcheck/gtest.h

#include <rapidcheck/gtest.h>

#include <string>
#include <vector>

#include "packoracle/gtest.h"
#include "packoracle/oracle.h"
#include "packoracle/properties/generators.h"

namespace packoracle {
namespace {

Policy Longest(Padding padding) {
  Policy p = FindPreset("hf-padded").policy;
  p.padding = padding;
  p.pad_to = PadTo{PadTo::Kind::kLongest, 0};
  return p;
}

// Documents of 3, 5 and 1 tokens, one a row, two rows a micro-batch: widths 5 (rows 0 and 1) and 1 (row 2).
PackRequest Request(const Policy& policy) {
  PackRequest r;
  r.row_length = 8;
  r.micro_batch_rows = 2;
  r.policy = policy;
  r.documents = MakeDocuments({{11, 12, 13}, {21, 22, 23, 24, 25}, {31}});
  return r;
}

std::vector<std::string> ShapeSentences(const CaseResult& result) {
  std::vector<std::string> out;
  for (const auto& v : result.violations)
    if (v.invariant == Invariant::kShape) out.push_back(v.sentence);
  return out;
}

// The reference's layout with its rows padded as `pad_to` says, whatever the policy declares.
struct PaddedTo {
  PadTo pad_to;
  PackResult Pack(const PackRequest& request) {
    PackRequest as = request;
    as.policy.pad_to = pad_to;
    return PackWithLayout(as, OneDocumentPerRow(as.documents, as.policy, as.row_length));
  }
};

TEST(PadToLongest, TheReferencePackerPassesOnEitherSide) {
  for (const Padding padding : {Padding::kRight, Padding::kLeft}) {
    Candidate reference = ReferenceCandidate();
    const auto result = CheckCase(reference, Request(Longest(padding)));
    EXPECT_TRUE(result.passed()) << Name(padding) << ": "
                                 << (result.violations.empty() ? "" : result.violations[0].sentence);
    ASSERT_TRUE(result.packed.has_value());
    ASSERT_EQ(result.packed->microbatches.size(), 2u);
    EXPECT_EQ(result.packed->microbatches[0].rows[0].input_ids.size(), 5u);
    EXPECT_EQ(result.packed->microbatches[1].rows[0].input_ids.size(), 1u);
  }
}

// A collator that pads to max_length where the policy says longest: the rows shorter in content than L are wider
// than their micro-batch's longest.
TEST(PadToLongest, RowsPaddedToTheRowLengthAreAShapeFinding) {
  Candidate to_l = MakeCandidate("pads to L", PaddedTo{PadTo{}});
  const auto sentences = ShapeSentences(CheckCase(to_l, Request(Longest(Padding::kRight))));
  ASSERT_EQ(sentences.size(), 3u);
  EXPECT_EQ(sentences[0], "micro-batch 0 row 0: 8 slots, but the policy pads every row of a micro-batch to its "
                          "longest, 5 slots (the most its spans cover in a row of micro-batch 0)");
  EXPECT_EQ(sentences[2], "micro-batch 1 row 0: 8 slots, but the policy pads every row of a micro-batch to its "
                          "longest, 1 slots (the most its spans cover in a row of micro-batch 1)");
}

// A collator that pads each row to its own content (no common width): the narrower row of micro-batch 0.
TEST(PadToLongest, RowsOfTheirOwnWidthAreAShapeFinding) {
  for (const Padding padding : {Padding::kRight, Padding::kLeft}) {
    Candidate own = MakeCandidate("own width", PaddedTo{PadTo{PadTo::Kind::kMultipleOf, 1}});
    const auto sentences = ShapeSentences(CheckCase(own, Request(Longest(padding))));
    ASSERT_EQ(sentences.size(), 1u) << Name(padding);
    EXPECT_EQ(sentences[0], "micro-batch 0 row 0: 3 slots, but the policy pads every row of a micro-batch to its "
                            "longest, 5 slots (the most its spans cover in a row of micro-batch 0)");
  }
}

// The same rows under pad_to row_len: what LitGPT's rows were before the value (a finding of every short row).
TEST(PadToLongest, LongestRowsBreakPadToRowLen) {
  Candidate longest = MakeCandidate("longest", PaddedTo{PadTo{PadTo::Kind::kLongest, 0}});
  Policy row_len = Longest(Padding::kRight);
  row_len.pad_to = PadTo{};
  const auto sentences = ShapeSentences(CheckCase(longest, Request(row_len)));
  ASSERT_EQ(sentences.size(), 3u);
  EXPECT_EQ(sentences[0], "micro-batch 0 row 0: 5 slots, but the policy pads every row to 8");
}

// Generated cases under mixed longest policies: the reference packer passes every one (its layouts are fitted to
// each micro-batch by AssignMicrobatches), whatever the micro-batch rows, ranks and overflow.
RC_GTEST_PROP(PadToLongest, TheReferencePackerPassesGeneratedCases, ()) {
  Policy policy = *gen::MixedPolicy();
  if (policy.padding == Padding::kNone) policy.padding = Padding::kRight;
  policy.pad_to = PadTo{PadTo::Kind::kLongest, 0};
  if (policy.truncate_to == TruncateTo::kPadMultiple) policy.truncate_to = TruncateTo::kRowLen;
  const PackRequest request = *gen::Request(*rc::gen::elementOf(gen::Profiles()), {policy});
  Candidate reference = ReferenceCandidate();
  CheckOptions options;
  options.packing_invariance = false;
  const auto result = CheckCase(reference, request, options);
  RC_ASSERT(result.passed());
}

}  // namespace
}  // namespace packoracle
