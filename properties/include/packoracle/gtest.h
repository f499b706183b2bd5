// GoogleTest integration: the only packoracle header that needs gtest (link packoracle::gtest).
//
// One call, in the spirit of absl's VerifyTypeImplementsAbslHashCorrectly:
//
//   TEST(MyPacker, KeepsInvariants) {
//     EXPECT_TRUE(packoracle::VerifyPackerKeepsInvariants(MyPacker{}));
//   }
//
// or one test per invariant, for any default-constructible candidate type (gtest pastes the suite's name
// into identifiers, so the instantiation sits in namespace packoracle):
//
//   namespace packoracle {
//   INSTANTIATE_TYPED_TEST_SUITE_P(MyPacker, PackerConformance, ::testing::Types<MyPacker>);
//   }
//
// The failure message is the whole report: the broken invariant, the minimal counterexample, the rows and
// the attention grid, the reproduce string and a regression test draft. Environment variables steer a run
// without recompiling: PACKORACLE_CASES (cases per property), PACKORACLE_SEED, PACKORACLE_REPRODUCE (replay
// one reproduce string), PACKORACLE_PROFILE, PACKORACLE_REGRESSIONS (a directory: every failure found is saved
// there as a regression file; replay them with ReplayRegressions).
#pragma once

#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <typeinfo>

#include <gtest/gtest.h>

#include "packoracle/interchange/regression.h"
#include "packoracle/properties/verify.h"

namespace packoracle {

// A readable name for a candidate type ("MyPacker" rather than its mangled name).
template <class T>
std::string TypeName() {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(typeid(T).name(), nullptr, nullptr, &status), std::free);
  std::string out = status == 0 && name ? name.get() : typeid(T).name();
  for (const std::string noise : {"(anonymous namespace)::", "packoracle::"}) {
    for (auto at = out.find(noise); at != std::string::npos; at = out.find(noise)) out.erase(at, noise.size());
  }
  return out;
}

// VerifyOptions with the PACKORACLE_* environment variables applied on top of `base`.
inline VerifyOptions OptionsFromEnvironment(VerifyOptions base = {}) {
  if (const char* cases = std::getenv("PACKORACLE_CASES")) base.cases = std::atoi(cases);
  if (const char* seed = std::getenv("PACKORACLE_SEED")) base.seed = std::strtoull(seed, nullptr, 10);
  if (const char* reproduce = std::getenv("PACKORACLE_REPRODUCE")) base.reproduce = std::string(reproduce);
  if (const char* profile = std::getenv("PACKORACLE_PROFILE")) base.profile = std::string(profile);
  return base;
}

inline std::string ReproduceCommand(const std::string& reproduce) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string filter = info ? std::string(info->test_suite_name()) + "." + info->name() : "*";
  return "PACKORACLE_REPRODUCE=\"" + reproduce + "\" <test binary> --gtest_filter='" + filter + "'";
}

// Runs the candidate against generated cases; the AssertionResult carries the full report on failure.
// Saves the failure of `report` when PACKORACLE_REGRESSIONS names a directory; returns a line for the message.
inline std::string MaybeSaveRegression(const std::string& candidate, const VerifyReport& report) {
  const char* dir = std::getenv("PACKORACLE_REGRESSIONS");
  if (dir == nullptr || report.passed) return "";
  return "saved as " + SaveRegression(dir, candidate, report) + "\n";
}

inline ::testing::AssertionResult VerifyCandidate(Candidate& candidate, VerifyOptions options = OptionsFromEnvironment()) {
  VerifyReport report = Verify(candidate, options);
  if (report.passed) return ::testing::AssertionSuccess() << report.cases_run << " cases passed";
  options.reproduce_command = ReproduceCommand(report.reproduce);
  if (report.counterexample && report.failure) {
    report.text = RenderFailure(candidate.name, *report.counterexample, *report.failure, report, options);
  }
  return ::testing::AssertionFailure() << "\n" << report.text << MaybeSaveRegression(candidate.name, report);
}

// Replays every saved regression of `directory` whose candidate is `candidate.name` (or all of them when
// `all` is true): each must now pass. Run it in CI so a fixed bug stays fixed.
inline ::testing::AssertionResult ReplayRegressions(Candidate& candidate, const std::string& directory, bool all = false) {
  std::string failures;
  int replayed = 0;
  for (const Regression& r : LoadRegressions(directory)) {
    if (!all && r.candidate != candidate.name) continue;
    ++replayed;
    VerifyReport report = VerifyOne(candidate, r.request);
    if (!report.passed) failures += "\n" + r.path + " fails again:\n" + report.text;
  }
  if (failures.empty()) return ::testing::AssertionSuccess() << replayed << " regressions replayed";
  return ::testing::AssertionFailure() << failures;
}

// The policies a candidate type claims: T::Policies() when it has one, else every policy it is handed.
template <class T>
std::vector<Policy> ClaimedPolicies() {
  if constexpr (requires { T::Policies(); }) return T::Policies();
  return {};
}

template <int&... ExplicitBarrier, class T>
  requires(Packer<T> || LossReducer<T> || AttentionConsumer<T>)
::testing::AssertionResult VerifyPackerKeepsInvariants(T candidate_object, VerifyOptions options = OptionsFromEnvironment()) {
  Candidate candidate = MakeCandidate(TypeName<T>(), std::move(candidate_object), ClaimedPolicies<T>());
  return VerifyCandidate(candidate, std::move(options));
}

// One given case (a regression): passes when the candidate keeps every invariant on it.
inline ::testing::AssertionResult CheckOneCase(Candidate& candidate, const PackRequest& request) {
  VerifyReport report = VerifyOne(candidate, request);
  if (report.passed) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\n" << report.text;
}

template <class T>
  requires(Packer<T> || LossReducer<T> || AttentionConsumer<T>)
::testing::AssertionResult CheckOneCase(T candidate_object, const PackRequest& request) {
  Candidate candidate = MakeCandidate(TypeName<T>(), std::move(candidate_object), ClaimedPolicies<T>());
  return CheckOneCase(candidate, request);
}

// ---- The abstract typed suite: one test per invariant -----------------------------------------------------
// T must be default-constructible and model Packer, LossReducer and/or AttentionConsumer. Optionally it has
// `static std::vector<packoracle::Policy> Policies()` naming the policies it implements (default: all).

template <class T>
class PackerConformance : public ::testing::Test {
 protected:
  void Check(Invariant invariant) {
    Candidate candidate = MakeCandidate(TypeName<T>(), T{}, ClaimedPolicies<T>());
    VerifyOptions options = OptionsFromEnvironment();
    options.only = invariant;
    VerifyReport report = Verify(candidate, options);
    if (report.passed && !report.checked.count(invariant)) {
      GTEST_SKIP() << Name(invariant) << " is not applicable to this candidate (it lacks the role that produces it)";
    }
    if (!report.passed) {
      options.reproduce_command = ReproduceCommand(report.reproduce);
      report.text = RenderFailure(candidate.name, *report.counterexample, *report.failure, report, options);
    }
    EXPECT_TRUE(report.passed) << "\n" << report.text;
  }
};

TYPED_TEST_SUITE_P(PackerConformance);
TYPED_TEST_P(PackerConformance, Shape) { this->Check(Invariant::kShape); }
TYPED_TEST_P(PackerConformance, Coverage) { this->Check(Invariant::kCoverage); }
TYPED_TEST_P(PackerConformance, Segments) { this->Check(Invariant::kSegments); }
TYPED_TEST_P(PackerConformance, Positions) { this->Check(Invariant::kPositions); }
TYPED_TEST_P(PackerConformance, Targets) { this->Check(Invariant::kTargets); }
TYPED_TEST_P(PackerConformance, Attention) { this->Check(Invariant::kAttention); }
TYPED_TEST_P(PackerConformance, Denominator) { this->Check(Invariant::kDenominator); }
TYPED_TEST_P(PackerConformance, Loss) { this->Check(Invariant::kLoss); }
TYPED_TEST_P(PackerConformance, PackingInvariance) { this->Check(Invariant::kPackingInvariance); }
TYPED_TEST_P(PackerConformance, Determinism) { this->Check(Invariant::kDeterminism); }
REGISTER_TYPED_TEST_SUITE_P(PackerConformance, Shape, Coverage, Segments, Positions, Targets, Attention, Denominator,
                            Loss, PackingInvariance, Determinism);
// Including this header without instantiating the suite is fine (one test file may only call Verify…).
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(PackerConformance);

}  // namespace packoracle
