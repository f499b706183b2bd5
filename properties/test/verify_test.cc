// The runner on the reference packer (must pass every invariant for every policy) and on a first mutant.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <optional>
#include <cctype>
#include <string>
#include <vector>

#include "packoracle/gtest.h"
#include "packoracle/oracle.h"
#include "packoracle/properties/generators.h"

namespace packoracle {
namespace {

TEST(Verify, ReferencePackerPassesEveryInvariantOnEveryProfile) {
  for (const auto& profile : gen::Profiles()) {
    SCOPED_TRACE(profile.name);
    Candidate reference = ReferenceCandidate();
    VerifyOptions options;
    options.cases = 150;
    options.profile = profile.name;
    const auto report = Verify(reference, options);
    EXPECT_TRUE(report.passed) << report.text;
    EXPECT_EQ(report.cases_run, 150);
    for (auto inv : {Invariant::kShape, Invariant::kCoverage, Invariant::kSegments, Invariant::kPositions,
                     Invariant::kTargets, Invariant::kDenominator, Invariant::kLoss, Invariant::kPackingInvariance,
                     Invariant::kDeterminism}) {
      EXPECT_TRUE(report.checked.count(inv)) << Name(inv) << " was never checked";
    }
  }
}

// torchtune before PR #2613 (bugzoo TG-02): labels shifted over the whole packed row, so each document's
// last prediction targets the next document's first token.
struct WholeRowShift {
  PackResult Pack(const PackRequest& request) {
    PackResult out = ReferenceCandidate().packer->Pack(request);
    for (auto& mb : out.microbatches) {
      for (auto& row : mb.rows) {
        for (std::size_t i = 0; i + 1 < row.input_ids.size(); ++i) {
          const bool pad_next = row.input_ids[i + 1] == request.policy.pad_id && row.labels[i + 1] == request.policy.ignore_index &&
                                row.labels[i] == request.policy.ignore_index;
          if (!pad_next) row.labels[i] = row.input_ids[i + 1];
        }
      }
    }
    return out;
  }
  static std::vector<Policy> Policies() { return {FindPreset("torchtune-packed").policy}; }
};

// Issue 27: a long row wrong slot by slot (a token of no document in each of 5000 slots) keeps the first
// kMaxViolationsKept violations in full and counts the rest under their invariant, rather than keeping all
// (10^7 slots exhausted memory).
struct NoDocumentAnywhere {
  PackResult Pack(const PackRequest& request) {
    CandidateMicrobatch mb;
    CandidateRow row;
    row.input_ids.assign(static_cast<std::size_t>(request.row_length), 7);
    row.labels.assign(row.input_ids.size(), request.policy.ignore_index);
    mb.rows.push_back(row);
    PackResult out;
    out.microbatches.push_back(mb);
    return out;
  }
};

TEST(Verify, ViolationsPastTheCapAreCountedNotKept) {
  PackRequest request;
  request.row_length = 5000;
  request.micro_batch_rows = 1;
  request.policy = FindPreset("reference").policy;
  request.documents = {{"a", {5, 6}, {1, 1}}};
  Candidate c = MakeCandidate("no-document-anywhere", NoDocumentAnywhere{});
  const CaseResult result = CheckCase(c, request);
  ASSERT_FALSE(result.passed());
  EXPECT_EQ(result.violations.size(), kMaxViolationsKept);
  ASSERT_TRUE(result.not_kept.count(Invariant::kCoverage));
  EXPECT_GE(result.found(), 5000u);
  EXPECT_EQ(result.found(), result.violations.size() + static_cast<std::size_t>(result.not_kept.at(Invariant::kCoverage)));
}

TEST(Verify, WholeRowShiftIsCaughtByTargetsAndShrunk) {
  Candidate c = MakeCandidate("whole-row-shift", WholeRowShift{}, WholeRowShift::Policies());
  const auto report = Verify(c);
  ASSERT_FALSE(report.passed);
  EXPECT_EQ(report.broken(), Invariant::kTargets);
  EXPECT_LE(report.counterexample_documents(), 2u);
  std::cout << report.text;
  // The reproduce string replays the minimal case exactly.
  VerifyOptions replay;
  replay.reproduce = report.reproduce;
  const auto again = Verify(c, replay);
  ASSERT_FALSE(again.passed);
  EXPECT_EQ(again.counterexample->documents.size(), report.counterexample->documents.size());
  EXPECT_EQ(again.broken(), report.broken());
}

// A packer that cuts every document at 600 tokens (a size bug, as SZ-03 at 1,000): a case that large is
// shrunk by the case edits alone, which cut the long document down a token at a time at the end, and the
// reproduce path keeps only the last cut of each run.
struct CutsAt600 {
  PackResult Pack(const PackRequest& request) {
    PackRequest cut = request;
    for (auto& d : cut.documents) {
      if (d.tokens.size() > 600) d.tokens.resize(600);
      if (d.supervised.size() > 600) d.supervised.resize(600);
    }
    return ReferenceCandidate().packer->Pack(cut);
  }
};

TEST(Verify, ShrinkingALongDocumentLeavesOneCutOfItInTheReproducePath) {
  Candidate c = MakeCandidate("cuts-at-600", CutsAt600{}, {FindPreset("reference").policy});
  VerifyOptions options;
  options.max_row_length = 2048;
  options.profile = "large";
  const auto report = Verify(c, options);
  ASSERT_FALSE(report.passed);
  EXPECT_EQ(report.broken(), Invariant::kCoverage);
  const std::string path = report.reproduce.substr(report.reproduce.rfind(':') + 1);
  std::vector<std::string> edits;
  for (std::size_t at = 0; at <= path.size();) {
    const std::size_t dot = std::min(path.find('.', at), path.size());
    edits.push_back(path.substr(at, dot - at));
    at = dot + 1;
  }
  auto same_cut = [](const std::string& a, const std::string& b) {
    return a[0] == 't' && b[0] == 't' && a.substr(0, a.find(',')) == b.substr(0, b.find(','));
  };
  EXPECT_EQ(std::adjacent_find(edits.begin(), edits.end(), same_cut), edits.end()) << report.reproduce;
  VerifyOptions replay = options;
  replay.reproduce = report.reproduce;
  const auto again = Verify(c, replay);
  ASSERT_FALSE(again.passed);
  ASSERT_EQ(again.counterexample->documents.size(), report.counterexample->documents.size());
  for (std::size_t d = 0; d < again.counterexample->documents.size(); ++d)
    EXPECT_EQ(again.counterexample->documents[d].tokens, report.counterexample->documents[d].tokens);
}

// Verify's defaults draw the cases `packoracle fuzz` draws: sizes climb over the run to rows of 8,192 slots
// and 512 documents a case (the `large` profile from the first case), not rows of 16 slots.
TEST(Verify, DefaultCasesGrowToTheSizesOfRealTraining) {
  Candidate c = ReferenceCandidate();
  VerifyOptions options;
  options.collect_stats = true;
  options.check.packing_invariance = false;
  const auto report = Verify(c, options);
  ASSERT_TRUE(report.passed) << report.text;
  ASSERT_TRUE(report.generated.has_value());
  EXPECT_GE(report.generated->row_length.max(), 4096);
  EXPECT_GE(report.generated->most_in_a_row.max(), 256);
  EXPECT_EQ(options.max_row_length, 8192);
  EXPECT_EQ(options.max_documents, 512u);
}

// A loss reducer that goes wrong only on long rows: past 2,048 slots it splits a row over 2 sequence-parallel
// ranks (ring attention) and all-reduces the count over the data-parallel group only, so a long row counts
// its first shard's targets. Correct otherwise (the token mean over the step, global scope).
struct RingSplitCountsOneShard {
  ReduceResult Reduce(const ReduceRequest& request) {
    std::vector<double> sums(request.microbatches.size(), 0);
    double count = 0;
    for (std::size_t m = 0; m < request.microbatches.size(); ++m) {
      const auto& rows = request.microbatches[m].rows;
      for (std::size_t r = 0; r < rows.size(); ++r) {
        const std::size_t n = rows[r].labels.size();
        for (std::size_t i = 0; i < n; ++i) {
          if (rows[r].labels[i] == request.policy.ignore_index) continue;
          sums[m] += request.slot_losses[m][r][i];
          if (n <= 2048 || i < n / 2) count += 1;
        }
      }
    }
    ReduceResult out;
    for (double s : sums) {
      ProducerTotals t;
      t.loss_sum = s;
      t.denominator = count;
      t.denominator_scope = "global";
      t.loss = count > 0 ? s / count : 0.0;
      out.push_back(t);
    }
    return out;
  }
};

TEST(Verify, AReducerBugThatNeedsLongRowsIsCaughtAtTheDefaults) {
  Candidate c = MakeCandidate("ring-split-counts-one-shard", RingSplitCountsOneShard{}, {FindPreset("reference").policy});
  const auto report = Verify(c);
  ASSERT_FALSE(report.passed);
  EXPECT_EQ(report.broken(), Invariant::kDenominator);
  ASSERT_TRUE(report.counterexample.has_value());
  EXPECT_GT(report.counterexample->row_length, 2048) << report.text;
  // rows of 512 slots (the former bound of a reducer's cases) never show it
  VerifyOptions small;
  small.max_row_length = 512;
  small.cases = 100;
  EXPECT_TRUE(Verify(c, small).passed);
}

// Shrinking stays readable at size: a document cut at 600 tokens shrinks to one document of 601 tokens.
TEST(Verify, ASizeBugShrinksToItsThreshold) {
  Candidate c = MakeCandidate("cuts-at-600", CutsAt600{}, {FindPreset("reference").policy});
  const auto report = Verify(c);
  ASSERT_FALSE(report.passed);
  ASSERT_TRUE(report.counterexample.has_value());
  ASSERT_EQ(report.counterexample->documents.size(), 1u) << report.text;
  EXPECT_EQ(report.counterexample->documents[0].tokens.size(), 601u) << report.text;
}

// The kit's own reference packer through the typed suite: one test per invariant, all passing.
struct KitReferencePacker {
  PackResult Pack(const PackRequest& request) { return ReferenceCandidate().packer->Pack(request); }
};
INSTANTIATE_TYPED_TEST_SUITE_P(KitReference, PackerConformance, ::testing::Types<KitReferencePacker>);

// The typed suite has one test per invariant the kit states (kEntries' names, as gtest names them in
// CamelCase): generated from PACKORACLE_INVARIANTS, it cannot leave one out as it once left gradient and
// efficiency out.
TEST(Verify, TheTypedSuiteHasOneTestPerInvariant) {
  std::vector<std::string> tests, expected;
  const auto* unit = ::testing::UnitTest::GetInstance();
  for (int s = 0; s < unit->total_test_suite_count(); ++s) {
    const auto* suite = unit->GetTestSuite(s);
    if (std::string(suite->name()) != "KitReference/PackerConformance/0") continue;
    for (int t = 0; t < suite->total_test_count(); ++t) tests.emplace_back(suite->GetTestInfo(t)->name());
  }
  for (std::size_t k = 0; k < kInvariantCount; ++k) {
    std::string camel;
    bool upper = true;
    for (const char c : std::string(Name(static_cast<Invariant>(k)))) {
      if (c == '_') {
        upper = true;
        continue;
      }
      camel += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
      upper = false;
    }
    expected.push_back(camel);
  }
  EXPECT_EQ(tests, expected);
  EXPECT_EQ(kInvariantCount, 12u);
}

TEST(Verify, OneCallEntryPointPasses) { EXPECT_TRUE(VerifyPackerKeepsInvariants(KitReferencePacker{})); }

// Rows padded to a multiple of 8 cannot be at most 4 slots long: the policy demands a refusal (a packer that
// refuses passes, one that answers with rows of 4 fails under coverage), as the reference layout rejects it.
struct AlwaysRefuses {
  PackResult Pack(const PackRequest&) { return PackResult::Refuse("pad_to_multiple_of=8: no row fits in 4 slots"); }
};

TEST(Verify, PaddingToAMultipleLargerThanTheRowDemandsARefusal) {
  PackRequest request;
  request.policy = FindPreset("reference").policy;
  request.policy.padding = Padding::kRight;
  request.policy.pad_to = {PadTo::Kind::kMultipleOf, 8};
  request.row_length = 4;
  request.documents = {Document{"d0", {5, 6}, {}}};
  Candidate refuses = MakeCandidate("refuses", AlwaysRefuses{});
  EXPECT_TRUE(CheckCase(refuses, request).passed());
  struct RowsOfFour {
    PackResult Pack(const PackRequest& r) {
      PackRequest fits = r;
      fits.policy.pad_to = {PadTo::Kind::kRowLen, 0};
      return ReferenceCandidate().packer->Pack(fits);
    }
  };
  Candidate answers = MakeCandidate("answers", RowsOfFour{});
  const CaseResult result = CheckCase(answers, request);
  ASSERT_FALSE(result.passed());
  EXPECT_EQ(result.violations.front().invariant, Invariant::kCoverage);
}


// doc_ids are read as consumers read them, by equality (DESIGN §5): [0 0 1 1 0 0] for three documents gives
// the third the first's id, and FlexAttention's document mask lets it attend to the first.
struct DocIdsModuloTwo {
  PackResult Pack(const PackRequest& request) {
    PackResult out = ReferenceCandidate().packer->Pack(request);
    for (auto& mb : out.microbatches)
      for (auto& row : mb.rows)
        for (auto& id : *row.doc_ids)
          if (id >= 0) id %= 2;
    return out;
  }
};

TEST(Verify, ADocIdNamingTwoSegmentsOfARowBreaksSegments) {
  Policy policy = FindPreset("reference").policy;
  policy.boundary_source = BoundarySource::kDocIds;
  Candidate c = MakeCandidate("doc-ids-modulo-two", DocIdsModuloTwo{}, {policy});
  PackRequest request;
  request.policy = policy;
  request.row_length = 6;
  request.documents = {{"a", {11, 12}, {1, 1}}, {"b", {21, 22}, {1, 1}}, {"c", {31, 32}, {1, 1}}};
  const CaseResult result = CheckCase(c, request, CheckOptions{});
  ASSERT_FALSE(result.passed());
  EXPECT_EQ(result.violations.front().invariant, Invariant::kSegments);
  EXPECT_NE(result.violations.front().sentence.find("doc_ids give id 0 to the segment at slot 0"), std::string::npos)
      << result.violations.front().sentence;
  // Two documents, ids 0 and 1: distinct, clean.
  request.documents.pop_back();
  EXPECT_TRUE(CheckCase(c, request, CheckOptions{}).passed());
}

// gtest.h reads the PACKORACLE_* variables strictly: a value it cannot read is an error naming the variable and
// the value (PACKORACLE_CASES=abc used to run 0 cases and pass).
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = std::string(old);
    ::setenv(name, value, 1);
  }
  ~ScopedVariable() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::string EnvironmentError(const char* name, const char* value) {
  ScopedVariable variable(name, value);
  try {
    OptionsFromEnvironment();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(GtestEnvironment, RefusesValuesItCannotRead) {
  for (const char* bad : {"abc", "", "0", "-1", "+5", " 5", "5 ", "12x", "1e3", "99999999999"}) {
    const std::string error = EnvironmentError("PACKORACLE_CASES", bad);
    EXPECT_NE(error.find(std::string("PACKORACLE_CASES='") + bad + "'"), std::string::npos) << bad << ": " << error;
  }
  for (const char* bad : {"abc", "-1", "18446744073709551616", ""}) {
    const std::string error = EnvironmentError("PACKORACLE_SEED", bad);
    EXPECT_NE(error.find(std::string("PACKORACLE_SEED='") + bad + "'"), std::string::npos) << bad << ": " << error;
  }
  for (const char* bad : {"0", "abc", "1048577"}) {
    const std::string error = EnvironmentError("PACKORACLE_MAX_ROW_LENGTH", bad);
    EXPECT_NE(error.find(std::string("PACKORACLE_MAX_ROW_LENGTH='") + bad + "'"), std::string::npos) << error;
  }
  EXPECT_NE(EnvironmentError("PACKORACLE_MAX_DOCUMENTS", "65537").find("PACKORACLE_MAX_DOCUMENTS='65537'"),
            std::string::npos);
  EXPECT_NE(EnvironmentError("PACKORACLE_PROFILE", "").find("PACKORACLE_PROFILE is set but empty"), std::string::npos);
  EXPECT_NE(EnvironmentError("PACKORACLE_REPRODUCE", "").find("PACKORACLE_REPRODUCE"), std::string::npos);
}

TEST(GtestEnvironment, ReadsWellFormedValues) {
  ScopedVariable cases("PACKORACLE_CASES", "0300");
  ScopedVariable seed("PACKORACLE_SEED", "18446744073709551615");
  ScopedVariable profile("PACKORACLE_PROFILE", "edges");
  ScopedVariable length("PACKORACLE_MAX_ROW_LENGTH", "16");
  ScopedVariable documents("PACKORACLE_MAX_DOCUMENTS", "8");
  const VerifyOptions options = OptionsFromEnvironment();
  EXPECT_EQ(options.max_row_length, 16);
  EXPECT_EQ(options.max_documents, 8u);
  EXPECT_EQ(options.cases, 300);
  EXPECT_EQ(options.seed, std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(options.profile, std::optional<std::string>("edges"));
}

}  // namespace
}  // namespace packoracle
