// Selections inside the objective (DESIGN §4 `loss`, oracle/selection.h): under CheckOptions::selection the
// reducer gets the kit's score of every slot's target (ReduceRequest::slot_scores) and the rule, and its totals
// are judged against the objective over the targets the rule selects within each optimizer step. The mechanism
// (issue 43): RL recipes keeping the top-20% entropy tokens compute the threshold per micro-batch, so that the
// objective depends on how the step was split; the fixed twin selects over the optimizer step.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "packoracle/oracle.h"
#include "packoracle/properties/generators.h"
#include "packoracle/properties/invariants.h"
#include "packoracle/properties/regression.h"
#include "packoracle/properties/verify.h"

namespace packoracle {
namespace {

// Four documents that share no row of 8 slots: one row each, one row a micro-batch, so four micro-steps with
// 2, 5, 4 and 6 targets.
PackRequest Rollouts() {
  PackRequest request;
  request.policy = FindPreset("reference").policy;  // pre_shifted, no loss_mask: a target is labels[i] != -100
  request.row_length = 8;
  request.micro_batch_rows = 1;
  request.documents = {{"a", {11, 12, 13}, {}}, {"b", {21, 22, 23, 24, 25, 26}, {}},
                       {"c", {31, 32, 33, 34, 35}, {}}, {"d", {41, 42, 43, 44, 45, 46, 47}, {}}};
  request.target_losses = {{"a", {0, 1, 3}}, {"b", {0, 1, 2, 4, 8, 16}}, {"c", {0, 2, 3, 5, 7}},
                           {"d", {0, 1, 2, 3, 4, 5, 6}}};
  return request;
}

// A global-token-mean reducer over the top fraction of targets by the kit's score. `per_microbatch` true: the
// bug, each micro-batch keeps ⌈q·n_m⌉ of its own targets; false: the fixed twin, each optimizer step keeps
// ⌈q·n_o⌉ of all its micro-batches' targets (the kit's scores are distinct: no tie to break).
struct TopFractionReducer {
  bool per_microbatch = false;
  ReduceResult Reduce(const ReduceRequest& request) const {
    struct Target { double score; std::size_t m; double loss; };
    std::map<std::int64_t, std::vector<Target>> groups;  // by micro-batch or by optimizer step
    const std::size_t n = request.microbatches.size();
    for (std::size_t m = 0; m < n; ++m) {
      const auto& rows = request.microbatches[m].rows;
      const std::int64_t group = per_microbatch ? static_cast<std::int64_t>(m)
                                                : OptimizerStepOf(request.microbatches[m].micro_step,
                                                                  request.grad_accum_steps);
      for (std::size_t r = 0; r < rows.size(); ++r)
        for (std::size_t i = 0; i < rows[r].labels.size(); ++i)
          if (rows[r].labels[i] != request.policy.ignore_index)
            groups[group].push_back({request.selection.active() ? request.slot_scores[m][r][i] : 0.0, m,
                                     request.slot_losses[m][r][i]});
    }
    std::vector<double> sums(n, 0), kept(n, 0);
    for (auto& [group, targets] : groups) {
      std::sort(targets.begin(), targets.end(), [](const Target& a, const Target& b) { return a.score > b.score; });
      const auto keep = static_cast<std::size_t>(std::ceil(request.selection.top_fraction * double(targets.size())));
      for (std::size_t k = 0; k < keep; ++k) {
        sums[targets[k].m] += targets[k].loss;
        kept[targets[k].m] += 1;
      }
    }
    ReduceResult out;
    for (std::size_t m = 0; m < n; ++m) {
      double count = 0;  // the selected targets of the micro-batch's optimizer step, all its micro-batches
      for (std::size_t k = 0; k < n; ++k)
        if (OptimizerStepOf(request.microbatches[k].micro_step, request.grad_accum_steps) ==
            OptimizerStepOf(request.microbatches[m].micro_step, request.grad_accum_steps))
          count += kept[k];
      ProducerTotals t;
      t.loss_sum = sums[m];
      t.denominator = count;
      t.denominator_scope = "global";
      t.loss = count > 0 ? sums[m] / count : 0.0;
      out.push_back(t);
    }
    return out;
  }
};

CheckOptions Selecting(double top_fraction, std::int64_t optimizer_steps = 1) {
  CheckOptions options;
  options.packing_invariance = false;
  options.selection.top_fraction = top_fraction;
  options.optimizer_steps = optimizer_steps;
  return options;
}

std::string Text(const CaseResult& result) {
  std::string out;
  for (const auto& v : result.violations) out += std::string(Name(v.invariant)) + ": " + v.sentence + "\n";
  return out;
}

TEST(Selection, TheKitsScoresAreDistinctAndTheSameForEveryCallOfACase) {
  const PackRequest request = Rollouts();
  std::vector<EffectiveDocument> docs;
  for (const auto& doc : request.documents) docs.push_back(Effective(doc, request.policy));
  const TargetScores scores = KitScores(request, docs);
  std::vector<double> all;
  for (std::size_t d = 0; d < docs.size(); ++d) {
    ASSERT_EQ(scores[d].size(), docs[d].tokens.size());
    all.insert(all.end(), scores[d].begin(), scores[d].end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "no two scores equal";
  EXPECT_EQ(KitScores(request, docs), scores);
}

TEST(Selection, AReducerSelectingPerMicrobatchIsCaught) {
  Candidate buggy = MakeCandidate("top-fraction-per-microbatch", TopFractionReducer{true});
  const CaseResult result = CheckCase(buggy, Rollouts(), Selecting(0.5));
  ASSERT_FALSE(result.passed());
  const Violation& v = result.violations.front();
  // ⌈2/2⌉ + ⌈5/2⌉ + ⌈4/2⌉ + ⌈6/2⌉ = 9 = ⌈17/2⌉ kept: the counts agree, the targets kept do not.
  EXPECT_EQ(v.invariant, Invariant::kLoss) << Text(result);
  // a's micro-batch keeps the higher-scored of its 2 targets (loss 1); over the step both of a's are among the 9.
  EXPECT_EQ(v.sentence,
            "the loss reducer (keeping the top 0.5 of each optimizer step's targets by score), micro-batch 0: "
            "loss_sum 1, but Σwℓ of its valid targets is 4");
  ASSERT_FALSE(result.notes.empty());
  EXPECT_EQ(result.notes.back(),
            "the declared selection keeps 9 of the step's 17 valid targets (the top 0.5 of each optimizer step by the "
            "kit's scores, slot_scores; per micro-batch: 2 2 2 3): the denominator and Σwℓ count those alone");
}

TEST(Selection, ItsTwinSelectingOverTheOptimizerStepPasses) {
  Candidate fixed = MakeCandidate("top-fraction-per-step", TopFractionReducer{false});
  for (double q : {0.2, 0.5, 0.75}) {
    const CaseResult result = CheckCase(fixed, Rollouts(), Selecting(q));
    EXPECT_TRUE(result.passed()) << q << "\n" << Text(result);
    EXPECT_TRUE(result.checked.count(Invariant::kLoss));
  }
}

TEST(Selection, UnderAScheduleEachOptimizerStepSelectsItsOwn) {
  Candidate fixed = MakeCandidate("top-fraction-per-step", TopFractionReducer{false});
  const CaseResult result = CheckCase(fixed, Rollouts(), Selecting(0.5, 2));
  EXPECT_TRUE(result.passed()) << Text(result);
}

TEST(Selection, TheReducerIsToldTheRuleAndTheScoresOnlyUnderASelection) {
  struct Recorder {
    std::vector<std::pair<double, std::size_t>>* seen;
    ReduceResult Reduce(const ReduceRequest& request) {
      seen->push_back({request.selection.top_fraction, request.slot_scores.size()});
      return TopFractionReducer{false}.Reduce(request);
    }
  };
  std::vector<std::pair<double, std::size_t>> seen;
  Candidate recorder = MakeCandidate("recorder", Recorder{&seen});
  CheckCase(recorder, Rollouts(), Selecting(0.5));
  ASSERT_FALSE(seen.empty());
  for (const auto& [q, micro_batches] : seen) {
    EXPECT_EQ(q, 0.5);
    EXPECT_GT(micro_batches, 0u) << "every split carries the scores";
  }
  seen.clear();
  Candidate plain = MakeCandidate("recorder", Recorder{&seen});
  CheckCase(plain, Rollouts(), Selecting(1.0));
  for (const auto& [q, micro_batches] : seen) EXPECT_EQ(micro_batches, 0u);
}

TEST(Selection, AReducerIgnoringTheSelectionIsCaught) {
  struct AllTargets {  // a plain token mean: right without a selection, wrong under one
    ReduceResult Reduce(ReduceRequest request) const {
      request.selection = {};
      return TopFractionReducer{false}.Reduce(request);
    }
  };
  Candidate plain = MakeCandidate("token-mean", AllTargets{});
  EXPECT_TRUE(CheckCase(plain, Rollouts(), Selecting(1.0)).passed());
  const CaseResult result = CheckCase(plain, Rollouts(), Selecting(0.5));
  ASSERT_FALSE(result.passed());
  EXPECT_EQ(result.violations.front().invariant, Invariant::kDenominator) << Text(result);
}

// A saved regression and the C++ draft keep the schedule and the selection the case was checked under: the case
// alone (its documents and policy) replays as another objective, under which the per-micro-batch reducer passes.
TEST(Selection, ASavedRegressionAndItsDraftKeepTheScheduleAndTheSelection) {
  Candidate buggy = MakeCandidate("top-fraction-per-microbatch", TopFractionReducer{true});
  VerifyOptions options;
  options.check = Selecting(0.5, 2);
  const VerifyReport report = VerifyOne(buggy, Rollouts(), options);
  ASSERT_FALSE(report.passed);
  ASSERT_TRUE(report.sections);
  const std::string& draft = report.sections->regression_draft;
  EXPECT_NE(draft.find("  check.optimizer_steps = 2;\n  check.selection.top_fraction = 0.5;\n"), std::string::npos) << draft;
  EXPECT_NE(draft.find("CheckOneCase(candidate, request, check)"), std::string::npos) << draft;

  const std::string dir = testing::TempDir() + "/selection_regressions";
  std::filesystem::remove_all(dir);
  const Regression loaded = LoadRegression(SaveRegression(dir, buggy.name, report, options.check));
  EXPECT_EQ(loaded.check.optimizer_steps, 2);
  EXPECT_EQ(loaded.check.selection.top_fraction, 0.5);
  VerifyOptions replay;
  replay.check = loaded.check;
  EXPECT_FALSE(VerifyOne(buggy, loaded.request, replay).passed) << "the saved options replay the failure";
  EXPECT_TRUE(VerifyOne(buggy, loaded.request).passed) << "without them the case checks another objective";

  // Saved without a schedule or selection, the file is as before them: no "check" field.
  std::ifstream plain(SaveRegression(dir + "/plain", buggy.name, report));
  const std::string text((std::istreambuf_iterator<char>(plain)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.find("\"check\""), std::string::npos) << text;

  const std::string bad = dir + "/bad.json";
  std::ofstream(bad) << R"({"schema":"packoracle-regression","version":1,"candidate":"x","invariant":"loss",)"
                     << R"("request":{"record":"request","id":0,"row_length":8,"micro_batch_rows":1,"dp_world_size":1,)"
                     << R"("policy":{"preset":"reference"},"documents":[]},"check":{"optimizer_steps":0}})";
  try {
    LoadRegression(bad);
    ADD_FAILURE() << "a check of 0 optimizer steps was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer_steps = 0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace packoracle
