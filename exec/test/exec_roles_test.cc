// A loss reducer and an attention consumer in another process (exec/test/candidates/roles.py, one process for
// both roles) over the exec protocol: right ones pass, buggy ones are caught under their role's invariant and
// shrunk, and hanging, crashing or lying ones fail their case under that invariant, are restarted, and leave no
// process behind.
#include "packoracle/exec/exec_roles.h"

#include <gtest/gtest.h>

#include "packoracle/exec/exec_candidate.h"

#include <memory>
#include <string>

#include "exec_test_util.h"
#include "packoracle/interchange/request_json.h"
#include "packoracle/oracle.h"
#include "packoracle/properties/verify.h"

namespace packoracle {
namespace {

using namespace exec_test;  // NOLINT: the shared helpers

class ExecRoles : public testing::Test {
 protected:
  void SetUp() override {
    if (!HavePython()) GTEST_SKIP() << "no python3: set PACKORACLE_TEST_PYTHON to run the exec role tests";
  }
};

ExecOptions Quick(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  ExecOptions options;
  options.timeout = timeout;
  return options;
}

// A candidate of the kit's reference packer's rows (no packer of its own) and the roles of roles.py `bug`.
Candidate Roles(const std::string& bug, bool reducer, bool consumer,
                std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  Candidate c;
  c.name = "roles.py " + bug;
  c.policies = {FindPreset("reference").policy};
  const std::string command = Script("roles.py", bug.empty() ? "" : "--bug " + bug);
  if (reducer) c.reducer = std::make_shared<ExecReducer>(command, Quick(timeout));
  if (consumer) c.consumer = std::make_shared<ExecConsumer>(command, Quick(timeout));
  return c;
}

VerifyOptions Small(int cases = 150) {
  VerifyOptions options;
  options.cases = cases;
  options.max_row_length = 16;
  options.max_documents = 8;
  return options;
}

ExecChannel& ChannelOf(const std::shared_ptr<LossReducerRole>& role) { return *std::dynamic_pointer_cast<ExecReducer>(role); }
ExecChannel& ChannelOf(const std::shared_ptr<AttentionConsumerRole>& role) {
  return *std::dynamic_pointer_cast<ExecConsumer>(role);
}

TEST_F(ExecRoles, ARightReducerAndConsumerInAnotherProcessPass) {
  std::deque<pid_t> groups;
  {
    Candidate c = Roles("", true, true);
    const VerifyReport report = Verify(c, Small());
    EXPECT_TRUE(report.passed) << report.text;
    for (Invariant i : {Invariant::kLoss, Invariant::kDenominator, Invariant::kAttention}) {
      EXPECT_TRUE(report.checked.count(i)) << Name(i) << " not checked";
    }
    EXPECT_EQ(ChannelOf(c.reducer).stats().starts, 1);
    EXPECT_EQ(ChannelOf(c.consumer).stats().faults, 0);
    groups = ChannelOf(c.reducer).recent_pids();
    groups.insert(groups.end(), ChannelOf(c.consumer).recent_pids().begin(), ChannelOf(c.consumer).recent_pids().end());
  }
  ExpectNoLeftovers(groups);
}

TEST_F(ExecRoles, AReducerDividingByItsOwnCountIsCaughtUnderDenominatorAndShrunk) {
  Candidate c = Roles("own-count", true, false);
  const VerifyReport report = Verify(c, Small());
  ASSERT_FALSE(report.passed);
  EXPECT_EQ(report.broken(), Invariant::kDenominator) << report.text;
  ASSERT_TRUE(report.counterexample);
  EXPECT_LE(report.counterexample->documents.size(), 2u) << report.text;  // two micro-batches are the least
  EXPECT_EQ(ChannelOf(c.reducer).stats().faults, 0);
}

TEST_F(ExecRoles, AConsumerJoiningDocumentsIsCaughtUnderAttentionAndShrunkToTwoDocuments) {
  Candidate c = Roles("join", false, true);
  const VerifyReport report = Verify(c, Small());
  ASSERT_FALSE(report.passed);
  EXPECT_EQ(report.broken(), Invariant::kAttention) << report.text;
  ASSERT_TRUE(report.counterexample);
  EXPECT_EQ(report.counterexample->documents.size(), 2u) << report.text;
  // The same reproduce string replays the same failure.
  VerifyOptions replay = Small();
  replay.reproduce = report.reproduce;
  Candidate again = Roles("join", false, true);
  const VerifyReport replayed = Verify(again, replay);
  EXPECT_FALSE(replayed.passed);
  EXPECT_EQ(replayed.broken(), Invariant::kAttention);
  EXPECT_EQ(replayed.counterexample_tokens(), report.counterexample_tokens());
}

// The fault bugs: each fails its case under the role's invariant, naming what happened, and the restarted child
// goes on (shrinking runs against fresh children); nothing is left running.
struct RoleFault {
  const char* bug;
  bool reducer;  // else the consumer
  const char* says;
};

class ExecRoleFaults : public testing::TestWithParam<RoleFault> {
 protected:
  void SetUp() override {
    if (!HavePython()) GTEST_SKIP() << "no python3: set PACKORACLE_TEST_PYTHON to run the exec role tests";
  }
};

TEST_P(ExecRoleFaults, FailTheCaseUnderTheRolesInvariantAndTheRestartedChildGoesOn) {
  const RoleFault& f = GetParam();
  std::deque<pid_t> groups;
  {
    Candidate c = Roles(f.bug, f.reducer, !f.reducer, std::chrono::seconds(3));
    ExecChannel& channel = f.reducer ? ChannelOf(c.reducer) : ChannelOf(c.consumer);
    VerifyOptions options = Small(60);
    options.check.determinism = false;
    const VerifyReport report = Verify(c, options);
    ASSERT_FALSE(report.passed);
    EXPECT_EQ(report.broken(), f.reducer ? Invariant::kLoss : Invariant::kAttention) << report.text;
    const std::string& sentence = report.failure->violations.front().sentence;
    EXPECT_NE(sentence.find(f.says), std::string::npos) << sentence;
    EXPECT_GE(channel.stats().faults, 2) << "shrinking met the fault again, against restarted children";
    EXPECT_GT(channel.stats().starts, channel.stats().faults) << "a fresh child after every fault";
    ASSERT_TRUE(report.counterexample);
    groups = channel.recent_pids();
  }
  ExpectNoLeftovers(groups);
}

INSTANTIATE_TEST_SUITE_P(
    Faults, ExecRoleFaults,
    testing::Values(RoleFault{"hang", true, "no complete answer to reduce request"},
                    RoleFault{"crash", true, "SIGABRT"},
                    RoleFault{"wrong-id", true, "is a record for id"},
                    RoleFault{"hang", false, "no complete answer to consume request"},
                    RoleFault{"crash", false, "about to abort on a big request"},
                    RoleFault{"wrong-id", false, "is a record for id"}),
    [](const testing::TestParamInfo<RoleFault>& info) {
      std::string name = std::string(info.param.reducer ? "Reducer_" : "Consumer_") + info.param.bug;
      for (char& ch : name)
        if (ch == '-') ch = '_';
      return name;
    });

// An error record fails the case under the role's invariant like a fault, but it is an answer in protocol: the
// child keeps running through the whole shrinking (a served library is imported once, not at every step).
TEST_F(ExecRoles, AnErrorRecordFailsTheCaseAndKeepsTheChild) {
  for (const bool reducer : {true, false}) {
    Candidate c = Roles("error", reducer, !reducer);
    ExecChannel& channel = reducer ? ChannelOf(c.reducer) : ChannelOf(c.consumer);
    VerifyOptions options = Small(60);
    options.check.determinism = false;
    const VerifyReport report = Verify(c, options);
    ASSERT_FALSE(report.passed);
    EXPECT_EQ(report.broken(), reducer ? Invariant::kLoss : Invariant::kAttention) << report.text;
    const std::string& sentence = report.failure->violations.front().sentence;
    EXPECT_NE(sentence.find("answered with an error record"), std::string::npos) << sentence;
    EXPECT_NE(sentence.find("cannot answer"), std::string::npos) << sentence;
    EXPECT_EQ(channel.stats().starts, 1) << "an error record restarted the child";
    EXPECT_EQ(channel.stats().faults, 0);
    EXPECT_GE(channel.stats().refusals, 2) << "shrinking met the error record again";
  }
}

TEST(ParseAnswerLineRoles, ReadsTotalsAndMasksOnlyForTheirRole) {
  using Kind = AnswerLine::Kind;
  const std::string where = "line 1 of the answer";
  const AnswerLine totals = ParseAnswerLine(
      R"({"record":"totals","id":3,"totals":[{"loss_sum":4.0,"denominator":7,"denominator_scope":"global"},{"loss":NaN}]})",
      3, where, AnswerRole::kReducer);
  ASSERT_EQ(totals.kind, Kind::kTotals) << totals.message;
  ASSERT_EQ(totals.totals.size(), 2u);
  EXPECT_EQ(totals.totals[0].denominator, 7.0);
  EXPECT_TRUE(std::isnan(*totals.totals[1].loss));
  const AnswerLine scopeless =
      ParseAnswerLine(R"({"record":"totals","id":3,"totals":[{"denominator":7}]})", 3, where, AnswerRole::kReducer);
  EXPECT_EQ(scopeless.kind, Kind::kFault);
  EXPECT_NE(scopeless.message.find("denominator_scope"), std::string::npos) << scopeless.message;

  const AnswerLine runs = ParseAnswerLine(
      R"({"record":"mask","id":3,"row":0,"runs":{"row_offsets":[0,1,2],"run_begin":[0,0],"run_end":[1,2]}})", 3, where,
      AnswerRole::kConsumer);
  ASSERT_EQ(runs.kind, Kind::kMask) << runs.message;
  EXPECT_EQ(ToDense(runs.mask), (DenseMask{{1, 0}, {1, 1}}));
  EXPECT_EQ(runs.mask.source, MaskSource::kRuns);
  const AnswerLine dense =
      ParseAnswerLine(R"({"record":"mask","id":3,"row":1,"mask":[[1,0],[true,1]]})", 3, where, AnswerRole::kConsumer);
  ASSERT_EQ(dense.kind, Kind::kMask) << dense.message;
  EXPECT_EQ(dense.row, 1);
  EXPECT_EQ(dense.mask.source, MaskSource::kDense);
  EXPECT_EQ(ToDense(dense.mask), (DenseMask{{1, 0}, {1, 1}}));
  for (const char* bad : {R"({"record":"mask","id":3,"row":0})", R"({"record":"mask","id":3,"row":0,"mask":[[2]]})",
                          R"({"record":"mask","id":3,"mask":[[1]]})",
                          R"({"record":"mask","id":3,"row":0,"runs":{"row_offsets":[0],"run_begin":[],"run_end":[],"source":"x"}})"}) {
    EXPECT_EQ(ParseAnswerLine(bad, 3, where, AnswerRole::kConsumer).kind, Kind::kFault) << bad;
  }
  // A record of another role's answer is an unknown record here: a packer never reads totals, nor a reducer masks.
  EXPECT_EQ(ParseAnswerLine(R"({"record":"totals","id":3,"totals":[]})", 3, where).kind, Kind::kFault);
  EXPECT_EQ(ParseAnswerLine(R"({"record":"mask","id":3,"row":0,"mask":[]})", 3, where, AnswerRole::kReducer).kind,
            Kind::kFault);
  EXPECT_EQ(ParseAnswerLine(R"({"record":"end","id":3})", 3, where, AnswerRole::kConsumer).kind, Kind::kEnd);
}

// The requests are written by one serializer each, from the request structs (interchange/request_json.h).
TEST(ExecRoleRequests, CarryWhatTheRoleNeeds) {
  ReduceRequest r;
  r.policy = FindPreset("reference").policy;
  CandidateMicrobatch mb;
  CandidateRow row;
  row.input_ids = {11, 12, 13};
  row.labels = {12, 13, -100};
  row.doc_spans = {{"a", 0, 3, 0}};
  mb.rows = {row};
  mb.producer = ProducerTotals{};
  r.microbatches = {mb};
  r.slot_losses = {{{1.0, 3.0, 0.0}}};
  const auto j = ReduceRequestToJson(r, 5);
  EXPECT_EQ(j["record"], "reduce_request");
  EXPECT_EQ(j["id"], 5);
  EXPECT_EQ(j["microbatches"][0]["rows"][0]["labels"], nlohmann::json({12, 13, -100}));
  EXPECT_FALSE(j["microbatches"][0].contains("producer")) << "the reducer computes the totals";
  EXPECT_EQ(j["slot_losses"][0][0][1], 3.0);
  EXPECT_EQ(j["context_parallel_scheme"], "contiguous");
  EXPECT_FALSE(j.contains("selection") || j.contains("slot_scores")) << "no selection: what version 1 wrote";
  ReduceRequest selecting = r;
  selecting.selection.top_fraction = 0.5;
  selecting.slot_scores = {{{0.25, 0.75, 0.0}}};
  const auto s = ReduceRequestToJson(selecting, 7);
  EXPECT_EQ(s["selection"], nlohmann::ordered_json({{"top_fraction", 0.5}, {"scope", "optimizer_step"}}));
  EXPECT_EQ(s["slot_scores"][0][0][1], 0.75);
  auto without = s;
  without.erase("selection");
  without.erase("slot_scores");
  without["id"] = 5;
  EXPECT_EQ(without, j) << "a selection only adds its two keys";
  const auto k = ConsumeRequestToJson(mb, r.policy, 6);
  EXPECT_EQ(k["record"], "consume_request");
  EXPECT_EQ(k["microbatch"]["rows"][0]["doc_spans"][0]["doc_uid"], "a");
  EXPECT_TRUE(k["policy"].is_object());
}

// ---- The whole step over exec: layout, emitted record, work and values (step_roles.py) -------------------

// The kit's reference packer's rows (or an exec packer's), and step_roles.py `bug` as the consumer, the value
// consumer, or both.
Candidate StepRoles(const std::string& bug, bool consumer, bool values, const Policy& policy,
                    bool gradients = false, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  Candidate c;
  c.name = "step_roles.py " + bug;
  c.policies = {policy};
  const std::string command = Script("step_roles.py", "--bug " + bug);
  if (consumer) c.consumer = std::make_shared<ExecConsumer>(command, Quick(timeout));
  if (values) c.values = std::make_shared<ExecValueConsumer>(command, Quick(timeout), gradients);
  return c;
}

const Policy& Reference() { return FindPreset("reference").policy; }

TEST_F(ExecRoles, AConsumerDividingCuSeqlensByTheCpSizeOfTheLayoutIsCaughtAndItsHeldShardsTwinPasses) {
  Candidate divided = StepRoles("cp-divided", true, false, Reference());
  const VerifyReport report = Verify(divided, Small());
  ASSERT_FALSE(report.passed);
  EXPECT_EQ(report.broken(), Invariant::kAttention) << report.text;
  Candidate held = StepRoles("cp-held", true, false, Reference());
  const VerifyReport fixed = Verify(held, Small());
  EXPECT_TRUE(fixed.passed) << fixed.text;
  EXPECT_TRUE(fixed.checked.count(Invariant::kAttention));
}

TEST_F(ExecRoles, AConsumersWorkRecordIsMeasuredADenseDummyRowBreaksConsumerOverheadZeroAndItsTwinKeepsIt) {
  Policy promised = Reference();
  promised.consumer_overhead = 0;
  Candidate dummy = StepRoles("dense-dummy", true, false, promised);
  const VerifyReport report = Verify(dummy, Small());
  ASSERT_FALSE(report.passed);
  EXPECT_EQ(report.broken(), Invariant::kEfficiency) << report.text;
  EXPECT_NE(report.text.find("extra row"), std::string::npos) << report.text;
  Candidate aligned = StepRoles("aligned", true, false, promised);
  const VerifyReport kept = Verify(aligned, Small());
  EXPECT_TRUE(kept.passed) << kept.text;
  EXPECT_TRUE(kept.checked.count(Invariant::kEfficiency));
}

TEST_F(ExecRoles, AValueConsumerLeakingItsStateAcrossDocumentsIsCaughtAndItsResettingTwinPasses) {
  Candidate leak = StepRoles("reset-leak", false, true, Reference());
  const VerifyReport report = Verify(leak, Small());
  ASSERT_FALSE(report.passed);
  EXPECT_EQ(report.broken(), Invariant::kPackingInvariance) << report.text;
  ASSERT_TRUE(report.counterexample);
  EXPECT_EQ(report.counterexample->documents.size(), 2u) << report.text;
  Candidate reset = StepRoles("reset", false, true, Reference(), /*gradients=*/true);
  const VerifyReport fixed = Verify(reset, Small());
  EXPECT_TRUE(fixed.passed) << fixed.text;
  EXPECT_TRUE(fixed.checked.count(Invariant::kPackingInvariance));
  EXPECT_TRUE(fixed.checked.count(Invariant::kGradient));
}

TEST_F(ExecRoles, AValueConsumerAveragingItsGradientOverPiecesIsCaughtUnderGradient) {
  Candidate mean = StepRoles("mean-grad", false, true, Reference(), /*gradients=*/true);
  const VerifyReport report = Verify(mean, Small());
  ASSERT_FALSE(report.passed);
  EXPECT_EQ(report.broken(), Invariant::kGradient) << report.text;
}

TEST_F(ExecRoles, AHangingOrCrashingValueConsumerFailsItsCaseAndIsContained) {
  const std::vector<std::pair<std::string, std::string>> bugs = {
      {"value-hang", "no complete answer to value request"}, {"value-crash", "SIGABRT"}};
  for (const auto& [bug, says] : bugs) {
    std::deque<pid_t> groups;
    {
      Candidate c = StepRoles(bug, false, true, Reference(), false, std::chrono::seconds(3));
      auto& channel = *std::dynamic_pointer_cast<ExecValueConsumer>(c.values);
      VerifyOptions options = Small(60);
      options.check.determinism = false;
      const VerifyReport report = Verify(c, options);
      ASSERT_FALSE(report.passed) << bug;
      EXPECT_EQ(report.broken(), Invariant::kPackingInvariance) << report.text;
      EXPECT_NE(report.text.find(says), std::string::npos) << report.text;
      EXPECT_GT(channel.stats().starts, channel.stats().faults) << "a fresh child after every fault";
      groups = channel.recent_pids();
    }
    ExpectNoLeftovers(groups);
  }
}

TEST_F(ExecRoles, AnExecConsumerGetsTheExecPackersOwnRecordAndOnlyWhenThePackerIsOne) {
  auto wired = [](bool emitted) {
    Candidate c;
    c.name = "reference_packer.py --extra + step_roles.py emitted";
    c.policies = {Reference()};
    auto packer = std::make_shared<ExecPacker>(Script("reference_packer.py", "--extra"), Quick());
    auto consumer = std::make_shared<ExecConsumer>(Script("step_roles.py", "--bug emitted"), Quick());
    if (emitted) consumer->ReadEmitted([packer] { return &packer->emitted(); });
    c.packer = packer;
    c.consumer = consumer;
    return c;
  };
  Candidate given = wired(true);
  const VerifyReport report = Verify(given, Small(60));
  EXPECT_TRUE(report.passed) << report.text;
  EXPECT_TRUE(report.checked.count(Invariant::kAttention));
  const auto& records = std::dynamic_pointer_cast<ExecPacker>(given.packer)->emitted();
  ASSERT_FALSE(records.empty());
  EXPECT_NE(records.front().find("\"packer_own\""), std::string::npos) << records.front();
  Candidate without = wired(false);
  const VerifyReport failed = Verify(without, Small(60));
  ASSERT_FALSE(failed.passed);
  EXPECT_EQ(failed.broken(), Invariant::kAttention) << failed.text;
  EXPECT_NE(failed.text.find("no emitted record"), std::string::npos) << failed.text;
}

TEST(ExecRoleRequests, TheStepFieldsAreAppendedAndWrittenOnlyWhenGiven) {
  CandidateMicrobatch mb;
  CandidateRow row;
  row.input_ids = {11, 12, 13};
  row.labels = {12, 13, -100};
  row.doc_spans = {{"a", 0, 3, 0}};
  mb.rows = {row};
  const Policy& policy = Reference();
  const auto plain = ConsumeRequestToJson(mb, policy, 6);
  std::vector<std::string> keys;
  for (const auto& [key, value] : plain.items()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"record", "id", "policy", "microbatch"})) << "what version 1 wrote";
  StepLayout layout = WholeRowsLayout(mb);
  layout.microbatch = 1;
  layout.context_parallel_size = 2;
  layout.cp_shards = {{{CpChunk{0, 1}, CpChunk{2, 3}}, {CpChunk{1, 2}}}};
  const nlohmann::ordered_json emitted = {{"record", "microbatch"}, {"packer_own", {{"k", 1}}}};
  const auto told = ConsumeRequestToJson(mb, policy, 6, {&layout, &emitted});
  keys.clear();
  for (const auto& [key, value] : told.items()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"record", "id", "policy", "microbatch", "layout", "emitted"}));
  EXPECT_EQ(told["layout"]["microbatch"], 1);
  EXPECT_EQ(told["layout"]["context_parallel_scheme"], "contiguous");
  EXPECT_EQ(told["layout"]["cp_shards"][0][0], nlohmann::json({{0, 1}, {2, 3}}));
  EXPECT_EQ(told["emitted"]["packer_own"]["k"], 1);
  ValueRequest ask;
  ask.layout = layout;
  const auto values = ValueRequestToJson(mb, policy, ask, 9);
  EXPECT_EQ(values["record"], "value_request");
  EXPECT_EQ(values["gradient"], false);
  EXPECT_FALSE(values.contains("slot_weights") || values.contains("emitted"));
  ask.gradient = true;
  ask.slot_weights = {{0.5, 0.25, 0.0}};
  EXPECT_EQ(ValueRequestToJson(mb, policy, ask, 9)["slot_weights"][0][1], 0.25);
}

TEST(ParseAnswerLineRoles, ReadsWorkValuesAndGradientRecordsOnlyForTheirRole) {
  using Kind = AnswerLine::Kind;
  const std::string where = "line 2 of the answer";
  const AnswerLine work = ParseAnswerLine(
      R"({"record":"work","id":4,"extra_rows":[{"row_offsets":[0,1,2],"run_begin":[0,0],"run_end":[2,2]}]})", 4, where,
      AnswerRole::kConsumer);
  ASSERT_EQ(work.kind, Kind::kWork) << work.message;
  EXPECT_TRUE(work.work.rows.empty());
  ASSERT_EQ(work.work.extra_rows.size(), 1u);
  EXPECT_EQ(work.work.extra_rows[0].n, 2);
  const AnswerLine values =
      ParseAnswerLine(R"({"record":"values","id":4,"row":0,"values":[[1.5,2],[NaN,0]]})", 4, where, AnswerRole::kValueConsumer);
  ASSERT_EQ(values.kind, Kind::kValues) << values.message;
  EXPECT_EQ(values.values.features, 2);
  ASSERT_EQ(values.values.values.size(), 4u);
  EXPECT_TRUE(std::isnan(values.values.values[2])) << "a NaN output is a value the comparison sees";
  const AnswerLine gradient =
      ParseAnswerLine(R"({"record":"gradient","id":4,"parameter_gradient":[0.5,-1]})", 4, where, AnswerRole::kValueConsumer);
  ASSERT_EQ(gradient.kind, Kind::kGradient) << gradient.message;
  EXPECT_EQ(gradient.gradient, (std::vector<double>{0.5, -1.0}));
  for (const char* bad : {R"({"record":"values","id":4,"row":0,"values":[[1],[1,2]]})",
                          R"({"record":"values","id":4,"values":[[1]]})",
                          R"({"record":"values","id":4,"row":0,"values":[["x"]]})",
                          R"({"record":"gradient","id":4})"}) {
    EXPECT_EQ(ParseAnswerLine(bad, 4, where, AnswerRole::kValueConsumer).kind, Kind::kFault) << bad;
  }
  EXPECT_EQ(ParseAnswerLine(R"({"record":"work","id":4,"rows":3})", 4, where, AnswerRole::kConsumer).kind, Kind::kFault);
  // Each record only for its role: a packer or a reducer never reads work, an attention consumer never values.
  EXPECT_EQ(ParseAnswerLine(R"({"record":"work","id":4})", 4, where).kind, Kind::kFault);
  EXPECT_EQ(ParseAnswerLine(R"({"record":"values","id":4,"row":0,"values":[[1]]})", 4, where, AnswerRole::kConsumer).kind,
            Kind::kFault);
  EXPECT_EQ(ParseAnswerLine(R"({"record":"mask","id":4,"row":0,"mask":[[1]]})", 4, where, AnswerRole::kValueConsumer).kind,
            Kind::kFault);
}

}  // namespace
}  // namespace packoracle
