// The kit's reference attention consumer (backend_attention.h) and the consumer role's micro-batch form.
#include <gtest/gtest.h>  // before rapidcheck/gtest.h

#include <rapidcheck/gtest.h>

#include "packoracle/oracle.h"
#include "packoracle/properties/backend_attention.h"
#include "packoracle/properties/generators.h"
#include "packoracle/properties/invariants.h"

namespace packoracle {
namespace {

std::vector<Policy> AllPresets() {
  std::vector<Policy> out;
  for (const auto& p : Presets()) out.push_back(p.policy);
  return out;
}

// For a correct packer of any preset (the kit's reference packer), the mask derived from the row's declared
// encoding is exactly the oracle's attention rule, cell by cell, padding queries included.
RC_GTEST_PROP(BackendAttention, EqualsTheOracleRuleOnCorrectRowsOfEveryPreset, ()) {
  const auto profile = *rc::gen::elementOf(gen::Profiles());
  const PackRequest request = *gen::Request(profile, AllPresets(), 16);
  Candidate reference = ReferenceCandidate();
  const PackResult packed = reference.packer->Pack(request);
  RC_PRE(!packed.refusal.has_value());
  const Layout layout = LayoutFromSpans(packed.microbatches, Effective(request.documents, request.policy), request.row_length);
  const OracleBatch batch = Materialize(request.documents, layout, request.policy);
  std::size_t flat = 0;
  for (const auto& mb : packed.microbatches) {
    for (const auto& row : mb.rows) {
      const OracleRow& want = batch.rows[flat++];
      const DenseMask mask = BackendAttention(row, request.policy);
      RC_ASSERT(mask.size() == static_cast<std::size_t>(want.length()));
      for (std::int64_t i = 0; i < want.length(); ++i)
        for (std::int64_t j = 0; j < want.length(); ++j)
          RC_ASSERT((mask[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] != 0) == Attends(want, request.policy, i, j));
    }
  }
}

CandidateRow TwoDocuments() {
  CandidateRow row;
  row.input_ids = {11, 12, 13, 21, 22, 0};
  row.labels = {12, 13, -100, 22, -100, -100};
  row.position_ids = std::vector<std::int64_t>{0, 1, 2, 0, 1, 0};
  row.doc_spans = {{"a", 0, 3, 0}, {"b", 3, 2, 0}};
  return row;
}

TEST(BackendAttention, ReadsTheDeclaredEncodingAndRefusesAMissingOne) {
  Policy policy = FindPreset("trl-padding-free").policy;  // position_reset
  const DenseMask mask = BackendAttention(TwoDocuments(), policy);
  EXPECT_EQ(mask[3][2], 0) << "the second document must not see the first";
  EXPECT_EQ(mask[4][3], 1);
  EXPECT_EQ(mask[4][5], 0) << "causal";
  EXPECT_EQ(mask[3][5], 0);
  policy.boundary_source = BoundarySource::kCuSeqlens;
  EXPECT_THROW(BackendAttention(TwoDocuments(), policy), InputError);  // no cu_seqlens: never a silent fallback
  CandidateRow with_cu = TwoDocuments();
  with_cu.cu_seqlens = std::vector<std::int64_t>{0, 3, 6};  // the padding folded into b: b's keys are all real
  EXPECT_EQ(BackendAttention(with_cu, policy)[4][3], 1);
  EXPECT_EQ(BackendAttention(with_cu, policy)[3][0], 0);
}

TEST(BackendAttention, TakesPaddingFromTheTwoDimensionalMaskWhenThereIsOne) {
  Policy policy = FindPreset("trl-padding-free").policy;
  policy.pad_keys = PadKeys::kVisible;
  CandidateRow row = TwoDocuments();
  row.input_ids.push_back(0);
  row.labels.push_back(-100);
  row.position_ids->push_back(0);
  row.attention_mask = std::vector<std::int64_t>{1, 1, 1, 1, 1, 0, 0};
  const DenseMask mask = BackendAttention(row, policy);
  EXPECT_EQ(mask[6][5], 1) << "a padding query sees its padding run";
  EXPECT_EQ(mask[6][4], 0);
}

// DeclaredSegments is the one reading of a row's encoding under a policy (what packoracle._core.segments
// binds): llm.c's BOS opens a document, position_reset reads a reset to the base, position_step a step
// other than 1; a row without the declared field is one sequence only as fed.
TEST(DeclaredSegments, ReadsEachEncodingAsItsBackendDoes) {
  CandidateRow llmc_row;
  llmc_row.input_ids = {0, 5, 6, 0, 7, 8, 9, 0};
  llmc_row.labels = llmc_row.input_ids;
  EXPECT_EQ(DeclaredSegments(llmc_row, FindPreset("llmc").policy), (SegmentStarts{0, 3, 7}));

  CandidateRow row = TwoDocuments();
  row.position_ids = std::vector<std::int64_t>{1, 2, 3, 1, 2, 1};
  Policy reset = FindPreset("trl-padding-free").policy;
  reset.position_base = 1;
  EXPECT_EQ(DeclaredSegments(row, reset), (SegmentStarts{0, 3, 5}));
  row.position_ids = std::vector<std::int64_t>{0, 1, 2, 5, 6, 9};  // no reset to the base 0, but steps other than 1
  reset.position_base = 0;
  EXPECT_EQ(DeclaredSegments(row, reset), (SegmentStarts{0}));
  reset.boundary_source = BoundarySource::kPositionStep;
  EXPECT_EQ(DeclaredSegments(row, reset), (SegmentStarts{0, 3, 5}));

  row.position_ids.reset();
  EXPECT_THROW(DeclaredSegments(row, reset), InputError);
  EXPECT_EQ(DeclaredSegmentsAsFed(row, reset), (SegmentStarts{0}));  // read as one sequence
}

TEST(DeclaredSegments, AnEodReadingStartsWhereLeftPaddingEnds) {
  // llm.c's EOT-opened rows, left-padded with the pad id 99: the first document starts where the padding ends,
  // as a row's first token does (FromBosOpens' first_token), not at slot 0 with the padding.
  Policy left = FindPreset("llmc").policy;
  left.padding = Padding::kLeft;
  left.pad_id = 99;
  CandidateRow row;
  row.input_ids = {99, 99, 5, 6, 0, 7};
  row.labels = row.input_ids;
  row.attention_mask = std::vector<std::int64_t>{0, 0, 1, 1, 1, 1};
  EXPECT_EQ(DeclaredSegments(row, left), (SegmentStarts{0, 2, 4}));
}

// A consumer with only the micro-batch form: the kit hands it whole micro-batches, and its per-row form is the
// row as a micro-batch of one.
struct CountsRows {
  std::vector<DenseMask> ConsumeMicrobatch(const CandidateMicrobatch& mb, const Policy&) {
    std::vector<DenseMask> out;
    for (const auto& row : mb.rows) {
      const auto n = row.input_ids.size();
      out.emplace_back(n, std::vector<std::uint8_t>(n, static_cast<std::uint8_t>(mb.rows.size())));
    }
    return out;
  }
};
static_assert(AttentionConsumer<CountsRows> && MicrobatchAttentionConsumer<CountsRows> && !RowAttentionConsumer<CountsRows>);

TEST(ConsumerRole, MicrobatchFormSeesTheWholeBatchAndServesTheRowForm) {
  Candidate c = MakeCandidate("counts-rows", CountsRows{});
  ASSERT_TRUE(c.consumer);
  CandidateMicrobatch mb;
  mb.rows = {TwoDocuments(), TwoDocuments()};
  const auto masks = c.consumer->ConsumeMicrobatch(mb, Policy{});
  ASSERT_EQ(masks.size(), 2u);
  EXPECT_EQ(masks[1][0][0], 2);
  EXPECT_EQ(c.consumer->Consume(TwoDocuments(), Policy{})[0][0], 1);
  // And a per-row consumer keeps working in the micro-batch form, row by row.
  Candidate ref = ReferenceAttentionConsumerCandidate();
  EXPECT_EQ(ref.consumer->ConsumeMicrobatch(mb, FindPreset("trl-padding-free").policy).size(), 2u);
}

}  // namespace
}  // namespace packoracle
