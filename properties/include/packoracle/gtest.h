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
// one reproduce string), PACKORACLE_PROFILE, PACKORACLE_MAX_ROW_LENGTH and PACKORACLE_MAX_DOCUMENTS (the bounds the
// cases grow to: by default those of `packoracle fuzz`, rows of 8,192 slots and 512 documents), PACKORACLE_REGRESSIONS (a directory: every failure found is saved
// there as a regression file; replay them with ReplayRegressions). A value that cannot be read (PACKORACLE_CASES=abc,
// a negative seed, an empty string) fails the test with a message naming the variable and its value.
#pragma once

#include <cxxabi.h>

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>
#include <system_error>
#include <type_traits>
#include <typeinfo>

#include <gtest/gtest.h>

#include "packoracle/oracle/error.h"
#include "packoracle/properties/regression.h"
#include "packoracle/properties/verify.h"

namespace packoracle {

// T's name as C++ writes it, less the `noise` qualifiers.
template <class T>
std::string DemangledName(std::initializer_list<std::string> noise) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(typeid(T).name(), nullptr, nullptr, &status), std::free);
  std::string out = status == 0 && name ? name.get() : typeid(T).name();
  for (const std::string& n : noise) {
    for (auto at = out.find(n); at != std::string::npos; at = out.find(n)) out.erase(at, n.size());
  }
  return out;
}

// A readable name for a candidate type ("MyPacker" rather than its mangled name).
template <class T>
std::string TypeName() {
  return DemangledName<T>({"(anonymous namespace)::", "packoracle::"});
}

// How a regression draft constructs a candidate type afresh: its qualified name and `{}` (a member of an
// anonymous namespace is reached through the enclosing one). None for a type that cannot be named so (a class
// local to a function, a lambda's) or built so: the draft is then best effort.
template <class T>
Candidate::Source TypeSource() {
  if constexpr (!std::is_default_constructible_v<T>) {
    return {};
  } else {
    const std::string name = DemangledName<T>({"(anonymous namespace)::"});
    if (name.find('(') != std::string::npos || name.find('{') != std::string::npos) return {};
    return {name + "{}", ""};
  }
}

// The value of environment variable `name` as a decimal integer in [min, max]: digits only (no sign, space or
// suffix). Anything else throws InputError naming the variable and its value, so that PACKORACLE_CASES=abc
// fails the test instead of running 0 cases and passing.
inline std::uint64_t EnvironmentInteger(const char* name, const char* value, std::uint64_t min, std::uint64_t max,
                                        const char* what) {
  const std::string text = value;
  std::uint64_t out = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (error != std::errc() || end != text.data() + text.size() || out < min || out > max) {
    throw InputError(std::string(name) + "='" + text + "': expected " + what + " (an integer from " +
                     std::to_string(min) + " to " + std::to_string(max) + ")");
  }
  return out;
}

// The value of environment variable `name`, which must not be empty (InputError naming it otherwise).
inline std::string EnvironmentText(const char* name, const char* value, const char* what) {
  if (*value == '\0') throw InputError(std::string(name) + " is set but empty: expected " + what + " (or unset it)");
  return value;
}

// VerifyOptions with the PACKORACLE_* environment variables applied on top of `base`. A value that cannot be
// read throws InputError naming the variable and its value (a test that calls this fails with that message).
inline VerifyOptions OptionsFromEnvironment(VerifyOptions base = {}) {
  if (const char* cases = std::getenv("PACKORACLE_CASES")) {
    base.cases = static_cast<int>(EnvironmentInteger("PACKORACLE_CASES", cases, 1,
                                                     static_cast<std::uint64_t>(std::numeric_limits<int>::max()),
                                                     "the number of generated cases per property"));
  }
  if (const char* seed = std::getenv("PACKORACLE_SEED")) {
    base.seed = EnvironmentInteger("PACKORACLE_SEED", seed, 0, std::numeric_limits<std::uint64_t>::max(),
                                   "the run's seed");
  }
  if (const char* reproduce = std::getenv("PACKORACLE_REPRODUCE")) {
    base.reproduce = EnvironmentText("PACKORACLE_REPRODUCE", reproduce, "a reproduce string v1:...");
  }
  if (const char* length = std::getenv("PACKORACLE_MAX_ROW_LENGTH")) {
    base.max_row_length = static_cast<std::int64_t>(
        EnvironmentInteger("PACKORACLE_MAX_ROW_LENGTH", length, 1, std::uint64_t{1} << 20, "the longest row generated"));
  }
  if (const char* documents = std::getenv("PACKORACLE_MAX_DOCUMENTS")) {
    base.max_documents = static_cast<std::size_t>(
        EnvironmentInteger("PACKORACLE_MAX_DOCUMENTS", documents, 1, std::uint64_t{1} << 16, "the most documents a case"));
  }
  if (const char* profile = std::getenv("PACKORACLE_PROFILE")) {
    base.profile = EnvironmentText("PACKORACLE_PROFILE", profile, "a profile name");
  }
  return base;
}

// The failure's first line: the gtest test that ran it, at its file:line, and the candidate.
inline std::string TestHeadline(const std::string& candidate) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info == nullptr) return "";
  return std::string(info->test_suite_name()) + "." + info->name() + " (" + info->file() + ":" +
         std::to_string(info->line()) + "): Verify(" + candidate + ")";
}

inline std::string ReproduceCommand(const std::string& reproduce) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string filter = info ? std::string(info->test_suite_name()) + "." + info->name() : "*";
  return "PACKORACLE_REPRODUCE=\"" + reproduce + "\" <test binary> --gtest_filter='" + filter + "'";
}

// Runs the candidate against generated cases; the AssertionResult carries the full report on failure.
// Saves the failure of `report` when PACKORACLE_REGRESSIONS names a directory; returns a line for the message.
inline std::string MaybeSaveRegression(const std::string& candidate, const VerifyReport& report,
                                       const CheckOptions& check = {}) {
  const char* dir = std::getenv("PACKORACLE_REGRESSIONS");
  if (dir == nullptr || report.passed) return "";
  const std::string directory = EnvironmentText("PACKORACLE_REGRESSIONS", dir, "a directory");
  return "saved as " + SaveRegression(directory, candidate, report, check) + "\n";
}

inline ::testing::AssertionResult VerifyCandidate(Candidate& candidate, VerifyOptions options = OptionsFromEnvironment()) {
  VerifyReport report = Verify(candidate, options);
  if (report.passed) return ::testing::AssertionSuccess() << report.cases_run << " cases passed";
  options.reproduce_command = ReproduceCommand(report.reproduce);
  options.headline = TestHeadline(candidate.name);
  DescribeFailure(report, options);
  return ::testing::AssertionFailure() << "\n" << report.text << MaybeSaveRegression(candidate.name, report, options.check);
}

// Replays every saved regression of `directory` whose candidate is `candidate.name` (or all of them when
// `all` is true): each must now pass. Run it in CI so a fixed bug stays fixed.
inline ::testing::AssertionResult ReplayRegressions(Candidate& candidate, const std::string& directory, bool all = false) {
  std::string failures;
  int replayed = 0;
  for (const Regression& r : LoadRegressions(directory)) {
    if (!all && r.candidate != candidate.name) continue;
    ++replayed;
    VerifyOptions options;
    options.check = r.check;  // the schedule and selection it was found under
    VerifyReport report = VerifyOne(candidate, r.request, options);
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
  requires(Packer<T> || LossReducer<T> || AttentionConsumer<T> || ValueConsumer<T>)
::testing::AssertionResult VerifyPackerKeepsInvariants(T candidate_object, VerifyOptions options = OptionsFromEnvironment()) {
  Candidate candidate = MakeCandidate(TypeName<T>(), std::move(candidate_object), ClaimedPolicies<T>());
  candidate.source = TypeSource<T>();
  return VerifyCandidate(candidate, std::move(options));
}

// One given case (a regression): passes when the candidate keeps every invariant on it. `check`: what it is
// checked against beyond the request (a loss reducer's schedule and selection), as the regression draft says.
inline ::testing::AssertionResult CheckOneCase(Candidate& candidate, const PackRequest& request,
                                               const CheckOptions& check = {}) {
  VerifyOptions options;
  options.check = check;
  VerifyReport report = VerifyOne(candidate, request, options);
  if (report.passed) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\n" << report.text;
}

template <class T>
  requires(Packer<T> || LossReducer<T> || AttentionConsumer<T> || ValueConsumer<T>)
::testing::AssertionResult CheckOneCase(T candidate_object, const PackRequest& request,
                                        const CheckOptions& check = {}) {
  Candidate candidate = MakeCandidate(TypeName<T>(), std::move(candidate_object), ClaimedPolicies<T>());
  return CheckOneCase(candidate, request, check);
}

// ---- The abstract typed suite: one test per invariant -----------------------------------------------------
// T must be default-constructible and model Packer, LossReducer, AttentionConsumer (any of its forms, the step
// form ConsumeMicrobatchInStep among them) and/or ValueConsumer (checked under packing_invariance and, when it
// answers gradients, gradient). Optionally it has
// `static std::vector<packoracle::Policy> Policies()` naming the policies it implements (default: all).

template <class T>
class PackerConformance : public ::testing::Test {
 protected:
  void Check(Invariant invariant) {
    Candidate candidate = MakeCandidate(TypeName<T>(), T{}, ClaimedPolicies<T>());
    candidate.source = TypeSource<T>();
    VerifyOptions options = OptionsFromEnvironment();
    options.only = invariant;
    VerifyReport report = Verify(candidate, options);
    if (report.passed && !report.checked.count(invariant)) {
      GTEST_SKIP() << Name(invariant) << " is not applicable to this candidate (it lacks the role that produces it)";
    }
    if (!report.passed) {
      options.reproduce_command = ReproduceCommand(report.reproduce);
      options.headline = TestHeadline(candidate.name);
      DescribeFailure(report, options);
    }
    EXPECT_TRUE(report.passed) << "\n" << report.text;
  }
};

TYPED_TEST_SUITE_P(PackerConformance);
// One test per invariant of PACKORACLE_INVARIANTS (properties/invariants.h), named as it names it.
#define PACKORACLE_CONFORMANCE_TEST(enumerator, test) \
  TYPED_TEST_P(PackerConformance, test) { this->Check(Invariant::enumerator); }
PACKORACLE_INVARIANTS(PACKORACLE_CONFORMANCE_TEST)
#undef PACKORACLE_CONFORMANCE_TEST
// Registered under the same list (an indirection, so that the list is expanded before gtest's macro splits
// its arguments).
#define PACKORACLE_CONFORMANCE_NAME(enumerator, test) , test
#define PACKORACLE_REGISTER_CONFORMANCE(...) REGISTER_TYPED_TEST_SUITE_P(__VA_ARGS__)
PACKORACLE_REGISTER_CONFORMANCE(PackerConformance PACKORACLE_INVARIANTS(PACKORACLE_CONFORMANCE_NAME));
#undef PACKORACLE_REGISTER_CONFORMANCE
#undef PACKORACLE_CONFORMANCE_NAME
// Including this header without instantiating the suite is fine (one test file may only call Verify…).
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(PackerConformance);

}  // namespace packoracle
