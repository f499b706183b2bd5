// The exec candidate against small Python candidates (exec/test/candidates/): a correct one must pass, and
// every fault must fail its case, say what happened, leave the kit running with a restarted candidate, and
// leave no process behind (no zombie, no live child, nothing left in the candidate's process group).
#include "packoracle/exec/exec_candidate.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <limits>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "packoracle/interchange/packed_batch.h"
#include "packoracle/interchange/request_json.h"
#include "packoracle/oracle.h"
#include "packoracle/properties/generators.h"
#include "packoracle/properties/verify.h"
#include "exec_test_util.h"

#ifndef PACKORACLE_EXEC_TEST_DIR
#error "PACKORACLE_EXEC_TEST_DIR must name exec/test/candidates"
#endif

namespace packoracle {
namespace {

namespace fs = std::filesystem;
using namespace exec_test;  // NOLINT: the shared helpers

// Every test runs Python candidates (or needs none, but shares the suite).
class ExecCandidate : public testing::Test {
 protected:
  void SetUp() override {
    if (!HavePython()) GTEST_SKIP() << "no python3: set PACKORACLE_TEST_PYTHON to run the exec candidate tests";
  }
};

// A fresh marker path for --once (the script misbehaves while it does not exist).
std::string Marker(const std::string& name) {
  static int counter = 0;
  const fs::path path = fs::path(testing::TempDir()) /
                        ("packoracle-exec-" + std::to_string(getpid()) + "-" + name + "-" + std::to_string(counter++));
  fs::remove(path);
  return path.string();
}

Policy Reference() { return FindPreset("reference").policy; }

ExecOptions Options(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  ExecOptions options;
  options.policies = {Reference()};
  options.timeout = timeout;
  return options;
}

// The lesson's case: documents [11 12 13] and [21 .. 26], rows of 8, one row per micro-batch.
PackRequest Lesson(std::int64_t id = 1) {
  PackRequest r;
  r.id = id;
  r.row_length = 8;
  r.policy = Reference();
  r.documents = {{"a", {11, 12, 13}, {1, 1, 1}}, {"b", {21, 22, 23, 24, 25, 26}, {1, 1, 1, 1, 1, 1}}};
  r.target_losses = {{"a", {0, 1, 3}}, {"b", {0, 1, 1, 1, 1, 1}}};
  return r;
}

ExecPacker& PackerOf(Candidate& c) { return *std::dynamic_pointer_cast<ExecPacker>(c.packer); }

void ExpectNoChild() {
  int status = 0;
  errno = 0;
  EXPECT_EQ(waitpid(-1, &status, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

// ---- A correct candidate ----------------------------------------------------------------------------------

TEST_F(ExecCandidate, ThePythonReferencePackerAnswersTheLessonLikeTheKitsOwn) {
  std::deque<pid_t> groups;
  {
    Candidate c = MakeExecCandidate(Script("reference_packer.py"), Options());
    const PackResult got = c.packer->Pack(Lesson());
    ASSERT_FALSE(got.fault) << *got.fault;
    const PackResult want = ReferenceCandidate().packer->Pack(Lesson());
    ASSERT_EQ(got.microbatches.size(), 2u);
    for (std::size_t m = 0; m < 2; ++m) {
      EXPECT_EQ(got.microbatches[m].rows[0].input_ids, want.microbatches[m].rows[0].input_ids);
      EXPECT_EQ(got.microbatches[m].rows[0].labels, want.microbatches[m].rows[0].labels);
      EXPECT_EQ(got.microbatches[m].rows[0].doc_spans, want.microbatches[m].rows[0].doc_spans);
      EXPECT_EQ(got.microbatches[m].producer, want.microbatches[m].producer);
    }
    EXPECT_TRUE(CheckCase(c, Lesson()).passed());
    EXPECT_EQ(PackerOf(c).stats().starts, 1);
    groups = PackerOf(c).recent_pids();
  }
  ExpectNoLeftovers(groups);
}

TEST_F(ExecCandidate, ThePythonReferencePackerPassesEveryProfileAndRefusesExactlyWhenDemanded) {
  std::deque<pid_t> groups;
  {
    Candidate c = MakeExecCandidate(Script("reference_packer.py"), Options());
    for (const auto& profile : gen::Profiles()) {
      SCOPED_TRACE(profile.name);
      VerifyOptions options;
      options.cases = 60;
      options.profile = profile.name;
      const VerifyReport report = Verify(c, options);
      EXPECT_TRUE(report.passed) << report.text;
      EXPECT_EQ(report.cases_run, 60);
    }
    const auto& stats = PackerOf(c).stats();
    EXPECT_EQ(stats.starts, 1) << "a correct candidate is never restarted";
    EXPECT_EQ(stats.faults, 0) << PackerOf(c).last_fault();
    EXPECT_GT(stats.refusals, 0) << "the 'long' profile has documents longer than the row: refusals are demanded";

    // A document longer than the row under overflow: error: the refusal is the right answer.
    PackRequest overlong = Lesson(7);
    overlong.row_length = 4;
    const PackResult refused = c.packer->Pack(overlong);
    ASSERT_TRUE(refused.refusal.has_value());
    EXPECT_NE(refused.refusal->find("overflow: error"), std::string::npos) << *refused.refusal;
    EXPECT_TRUE(CheckCase(c, overlong).passed());
    groups = PackerOf(c).recent_pids();
  }
  ExpectNoLeftovers(groups);
}

TEST_F(ExecCandidate, ARefusalThePolicyDoesNotDemandFailsUnderCoverage) {
  std::deque<pid_t> groups;
  {
    Candidate c = MakeExecCandidate(Script("refuse_always.py"), Options());
    VerifyOptions options;
    options.cases = 50;
    const VerifyReport report = Verify(c, options);
    ASSERT_FALSE(report.passed);
    EXPECT_EQ(report.broken(), Invariant::kCoverage);
    EXPECT_NE(report.text.find("refused an input its policy accepts: documents are not my job"), std::string::npos)
        << report.text;
    EXPECT_EQ(report.counterexample_documents(), 1u) << report.text;  // shrunk to one document
    EXPECT_EQ(PackerOf(c).stats().faults, 0) << "a refusal is an answer, not a fault";
    groups = PackerOf(c).recent_pids();
  }
  ExpectNoLeftovers(groups);
}

TEST_F(ExecCandidate, AFloodOnStderrDoesNotBlockACorrectCandidate) {
  std::deque<pid_t> groups;
  {
    // 4 MiB of log per request, far more than a pipe holds: the kit must drain stderr while it waits.
    Candidate c = MakeExecCandidate(Script("stderr_flood.py", "--bytes 4194304"), Options(std::chrono::seconds(30)));
    VerifyOptions options;
    options.cases = 10;
    const auto start = std::chrono::steady_clock::now();
    const VerifyReport report = Verify(c, options);
    EXPECT_TRUE(report.passed) << report.text;
    EXPECT_EQ(PackerOf(c).stats().faults, 0) << PackerOf(c).last_fault();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(120));  // a blocked pipe never ends
    groups = PackerOf(c).recent_pids();
  }
  ExpectNoLeftovers(groups);
}

// ---- Faults -------------------------------------------------------------------------------------------------

struct Fault {
  const char* label;
  const char* script;
  const char* args;                       // besides --once
  std::vector<std::string> says;          // each must appear in the fault message and the report
  int faulting_request = 0;               // 0-based Pack call of a fresh child that faults
  std::chrono::milliseconds timeout{10000};
  std::size_t max_line_bytes = std::size_t{64} << 20;
  bool determinism = true;                // Verify's determinism check (a second and third request per case)
};

void PrintTo(const Fault& f, std::ostream* os) { *os << f.label; }

class ExecFault : public testing::TestWithParam<Fault> {
 protected:
  void SetUp() override {
    if (!HavePython()) GTEST_SKIP() << "no python3: set PACKORACLE_TEST_PYTHON to run the exec candidate tests";
  }
};

// The candidate misbehaves only once (--once): the fault fails that request, the next request goes to a
// restarted child and passes.
TEST_P(ExecFault, FailsTheCaseSaysWhatHappenedAndTheRestartedCandidateGoesOn) {
  const Fault& f = GetParam();
  std::deque<pid_t> groups;
  {
    ExecOptions options = Options(f.timeout);
    options.max_line_bytes = f.max_line_bytes;
    Candidate c = MakeExecCandidate(Script(f.script, std::string(f.args) + " --once " + Marker(f.label)), options);
    ExecPacker& packer = PackerOf(c);
    for (int k = 0; k < f.faulting_request; ++k) {
      const PackResult ok = c.packer->Pack(Lesson(k));
      ASSERT_FALSE(ok.fault) << *ok.fault;
    }
    const auto start = std::chrono::steady_clock::now();
    const PackResult bad = c.packer->Pack(Lesson(f.faulting_request));
    ASSERT_TRUE(bad.fault.has_value()) << "the misbehaviour was not noticed";
    EXPECT_FALSE(bad.refusal);
    EXPECT_TRUE(bad.microbatches.empty());
    for (const auto& s : f.says) EXPECT_NE(bad.fault->find(s), std::string::npos) << "'" << s << "' in:\n" << *bad.fault;
    // Not a measurement: only a kit that waits far past its timeout (a hang of its own) fails here.
    EXPECT_LT(std::chrono::steady_clock::now() - start, f.timeout + std::chrono::seconds(60));
    // The faulted child is gone and reaped; nothing runs until the next request.
    EXPECT_EQ(packer.pid(), 0);
    EXPECT_TRUE(packer.took_a_request()) << "it read the request before misbehaving: a failing case, not a start-up problem";
    ExpectNoLeftovers(packer.recent_pids());

    // The next request starts a fresh child, which answers correctly.
    const CaseResult next = CheckCase(c, Lesson(9));
    EXPECT_TRUE(next.passed()) << (next.violations.empty() ? "" : next.violations.front().sentence);
    EXPECT_EQ(packer.stats().starts, 2);
    EXPECT_EQ(packer.stats().faults, 1);
    groups = packer.recent_pids();
  }
  ExpectNoLeftovers(groups);
}

// A candidate that answers at once but hangs on long documents: its first hang costs the whole timeout,
// later hangs (while shrinking) the adaptive deadline, about a second each, and the counterexample is the
// hanging case, shrunk.
TEST(ExecAdaptiveDeadline, AHangingCandidateIsShrunkAtAboutASecondAStepAfterItsFirstHang) {
  if (!HavePython()) GTEST_SKIP() << "no python3: set PACKORACLE_TEST_PYTHON to run the exec candidate tests";
  const auto timeout = std::chrono::seconds(6);
  Candidate c = MakeExecCandidate(Script("hang_on_long.py", ""), Options(timeout));
  ExecPacker& packer = PackerOf(c);
  VerifyOptions options;
  options.cases = 200;
  options.max_row_length = 16;  // small cases: the test is about hangs, not sizes
  options.max_documents = 8;
  options.check.determinism = false;
  const auto start = std::chrono::steady_clock::now();
  const VerifyReport report = Verify(c, options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(report.passed);
  EXPECT_EQ(report.broken(), Invariant::kShape);
  EXPECT_TRUE(packer.answer_clock().hung);
  EXPECT_LT(packer.answer_clock().Deadline(8, timeout), timeout) << "after a hang the deadline adapts";
  const auto& sentence = report.failure->violations.front().sentence;
  EXPECT_NE(sentence.find("adaptive deadline"), std::string::npos) << sentence;
  // The counterexample still hangs: one document of 4 tokens (the least that hangs) or so.
  ASSERT_TRUE(report.counterexample.has_value());
  std::size_t longest = 0;
  for (const auto& d : report.counterexample->documents) longest = std::max(longest, d.tokens.size());
  EXPECT_EQ(longest, 4u) << report.text;
  // Every hang but the first ended at the adaptive deadline: had each cost the timeout, the run would take
  // at least faults × timeout.
  const auto faults = packer.stats().faults;
  EXPECT_GE(faults, 2);
  EXPECT_LT(seconds, static_cast<double>(faults) * 6.0) << faults << " hangs in " << seconds << " s";
  std::cout << "adaptive deadline: " << faults << " hangs, found and shrunk in " << seconds << " s\n";
}

// Under Verify: the first failing case is reported (under shape, with what happened), shrinking goes on
// against restarted children, and nothing is left behind.
TEST_P(ExecFault, IsReportedByVerifyWhichShrinksOnWithARestartedCandidate) {
  const Fault& f = GetParam();
  std::deque<pid_t> groups;
  {
    ExecOptions options = Options(f.timeout);
    options.max_line_bytes = f.max_line_bytes;
    Candidate c = MakeExecCandidate(Script(f.script, std::string(f.args) + " --once " + Marker(f.label)), options);
    VerifyOptions verify;
    verify.cases = 20;
    verify.max_shrink_steps = 40;
    verify.check.determinism = f.determinism;
    const VerifyReport report = Verify(c, verify);
    ASSERT_FALSE(report.passed);
    EXPECT_EQ(report.broken(), Invariant::kShape);
    EXPECT_NE(report.text.find("no packed batch came back"), std::string::npos) << report.text;
    for (const auto& s : f.says) EXPECT_NE(report.text.find(s), std::string::npos) << "'" << s << "' in:\n" << report.text;
    EXPECT_EQ(report.cases_to_failure, f.faulting_request + 1);
    EXPECT_FALSE(report.reproduce.empty());
    const auto& stats = PackerOf(c).stats();
    EXPECT_EQ(stats.faults, 1);
    EXPECT_EQ(stats.starts, 2);
    EXPECT_GT(stats.requests, 2) << "shrinking went on with the restarted candidate";
    EXPECT_EQ(report.shrinks, 0) << "the restarted candidate passes every smaller case";
    groups = PackerOf(c).recent_pids();
  }
  ExpectNoLeftovers(groups);
}

const std::size_t kMiB = std::size_t{1} << 20;

INSTANTIATE_TEST_SUITE_P(
    Scripts, ExecFault,
    testing::Values(
        Fault{"segfault", "crash_segv.py", "", {"killed by signal 11 (SIGSEGV", "about to crash on request"}},
        Fault{"abort", "crash_abort.py", "", {"killed by signal 6 (SIGABRT", "assertion failed: rows >= 0"}},
        Fault{"exit", "exit_nonzero.py", "", {"exited with status 3", "fatal: cannot pack request"}},
        // The timeout counts from the request's first byte, and a loaded machine (or build-asan/) can take a
        // second to start Python: 0.3 s made the hang look like a start-up failure and the restarted child time
        // out too. 4 s is far more than any start-up and still a short wait.
        Fault{"hang", "hang.py", "", {"no complete answer", "within 4 s (the timeout)", "killed"}, 0,
              std::chrono::milliseconds(4000)},
        Fault{"wrong_id", "wrong_id.py", "", {"record for id", "but the request is id"}},
        Fault{"partial_line", "partial_line.py", "", {"partial line", "exited with status 0", "{\"record\":\"microbatch\""}},
        Fault{"not_json", "not_json.py", "", {"is not JSON", "'packing request"}},
        Fault{"unknown_record", "unknown_record.py", "", {"unknown record type 'banana'"}},
        Fault{"long_line", "long_line.py", "--bytes 2097152", {"longer than the limit of 1 MiB"}, 0,
              std::chrono::seconds(10), kMiB},
        // A line of 1 GiB under the default limit of 64 MiB per line: read up to the limit, never all of it.
        Fault{"line_of_1_GiB", "long_line.py", "--bytes 1073741824", {"longer than the limit of 64 MiB per line"}, 0,
              std::chrono::seconds(60)},
        Fault{"stdin_closed", "close_stdin.py", "", {"closed its stdin", "EPIPE", "closing stdin"}, 1,
              std::chrono::seconds(10), std::size_t{64} << 20, /*determinism=*/false}),
    [](const testing::TestParamInfo<Fault>& param) { return std::string(param.param.label); });

// The peak resident set of this process (VmHWM), in bytes; 0 when /proc does not say.
std::size_t PeakResidentBytes() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;  // "VmHWM:   123456 kB"
  }
  return 0;
}

TEST_F(ExecCandidate, ALineOf1GiBIsStreamedUpToTheLimitNotBuffered) {
  // Resets the peak (Linux >= 4.0), so that earlier tests' memory does not count; when that is not allowed,
  // the bound below still holds for the whole process so far.
  { std::ofstream("/proc/self/clear_refs") << "5"; }
  std::deque<pid_t> groups;
  {
    ExecOptions options = Options(std::chrono::seconds(60));  // the default limits: 64 MiB a line
    ASSERT_EQ(options.max_line_bytes, std::size_t{64} << 20);
    Candidate c = MakeExecCandidate(Script("long_line.py", "--bytes 1073741824"), options);
    const PackResult r = c.packer->Pack(Lesson());
    ASSERT_TRUE(r.fault.has_value());
    EXPECT_NE(r.fault->find("longer than the limit of 64 MiB per line"), std::string::npos) << *r.fault;
    EXPECT_NE(r.fault->find("it begins '{\"record\":\"microbatch\",\"padding\":\"xxx"), std::string::npos) << *r.fault;
    groups = PackerOf(c).recent_pids();
  }
  ExpectNoLeftovers(groups);
  const std::size_t peak = PeakResidentBytes();
  if (peak == 0) GTEST_SKIP() << "no VmHWM in /proc/self/status";
  // Holding the whole line would take over 1 GiB; the kit holds at most the 64 MiB limit and a read chunk
  // (with the sanitizers' shadow and quarantine on top, in build-asan/).
  EXPECT_LT(peak, std::size_t{768} << 20) << "peak resident set " << (peak >> 20) << " MiB";
}

TEST_F(ExecCandidate, ACandidateCrashingOnEveryRequestIsShrunkWithARestartPerEvaluation) {
  std::deque<pid_t> groups;
  {
    Candidate c = MakeExecCandidate(Script("crash_segv.py"), Options());
    VerifyOptions options;
    options.cases = 10;
    options.max_shrink_steps = 60;
    const VerifyReport report = Verify(c, options);
    ASSERT_FALSE(report.passed);
    EXPECT_NE(report.text.find("SIGSEGV"), std::string::npos) << report.text;
    EXPECT_GT(report.shrinks, 0);
    EXPECT_EQ(report.cases_to_failure, 1);
    const auto& stats = PackerOf(c).stats();
    EXPECT_EQ(stats.faults, stats.starts) << "every child crashed once and was replaced";
    EXPECT_GT(stats.faults, report.shrinks) << "the first failure and every accepted shrink faulted";
    groups = PackerOf(c).recent_pids();
  }
  ExpectNoLeftovers(groups);
}

// ---- Start-up and shut-down -----------------------------------------------------------------------------

TEST_F(ExecCandidate, ACommandThatCannotStartIsReportedNotCrashedOn) {
  {
    ExecPacker packer("/nonexistent/packer --fast", Options());
    const auto problem = packer.CheckStarts(std::chrono::seconds(2));
    ASSERT_TRUE(problem.has_value());
    EXPECT_NE(problem->find("exited with status 127"), std::string::npos) << *problem;
    EXPECT_NE(problem->find("not found"), std::string::npos) << *problem;  // the shell's message, from stderr
    ExpectNoChild();
    const PackResult r = packer.Pack(Lesson());
    ASSERT_TRUE(r.fault.has_value());
    EXPECT_NE(r.fault->find("127"), std::string::npos) << *r.fault;
    EXPECT_FALSE(packer.took_a_request());
    ExpectNoChild();
  }
  ExpectNoChild();
}

TEST_F(ExecCandidate, ACandidateDyingBeforeItReadsItsFirstRequestNeverTookOne) {
  std::deque<pid_t> groups;
  {
    // Slower to die than any start-up check waits: only the unread request in its stdin pipe tells.
    ExecPacker packer(Python() + " -c \"import sys, time; time.sleep(0.4); sys.exit('no model weights here')\"", Options());
    EXPECT_FALSE(packer.CheckStarts(std::chrono::milliseconds(10)).has_value());
    const PackResult r = packer.Pack(Lesson(4));
    ASSERT_TRUE(r.fault.has_value());
    EXPECT_NE(r.fault->find("exited with status 1 before reading request 4"), std::string::npos) << *r.fault;
    EXPECT_NE(r.fault->find("no model weights here"), std::string::npos) << *r.fault;
    EXPECT_FALSE(packer.took_a_request());
    groups = packer.recent_pids();
  }
  ExpectNoLeftovers(groups);
}

TEST_F(ExecCandidate, CheckStartsKeepsAGoodChildForTheFirstRequest) {
  std::deque<pid_t> groups;
  {
    ExecPacker packer(Script("reference_packer.py"), Options());
    EXPECT_FALSE(packer.CheckStarts(std::chrono::milliseconds(100)).has_value());
    const pid_t pid = packer.pid();
    EXPECT_GT(pid, 0);
    EXPECT_FALSE(packer.Pack(Lesson()).fault);
    EXPECT_EQ(packer.pid(), pid);
    EXPECT_EQ(packer.stats().starts, 1);
    groups = packer.recent_pids();
  }
  ExpectNoLeftovers(groups);
}

TEST_F(ExecCandidate, StoppingKillsAChildThatIgnoresItsClosedStdinAndEverythingItStarted) {
  std::deque<pid_t> groups;
  const auto start = std::chrono::steady_clock::now();
  {
    ExecOptions options = Options();
    options.shutdown_grace = std::chrono::milliseconds(100);
    // A background grandchild in the candidate's process group, and a shell that never reads its stdin.
    ExecPacker packer("sleep 60 & sleep 60", options);
    EXPECT_FALSE(packer.CheckStarts(std::chrono::milliseconds(50)).has_value());
    groups = packer.recent_pids();
  }
  ExpectNoLeftovers(groups);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
}

TEST_F(ExecCandidate, OutputAfterACompleteAnswerIsAFault) {
  std::deque<pid_t> groups;
  {
    // In the same read as the end record: this request's fault.
    ExecPacker packer(Script("after_end.py", "--same"), Options());
    const PackResult first = packer.Pack(Lesson(1));
    ASSERT_TRUE(first.fault.has_value());
    EXPECT_NE(first.fault->find("wrote more after its answer to request 1 was complete: 'also this"), std::string::npos)
        << *first.fault;
    groups = packer.recent_pids();
  }
  {
    // Later, between two requests: the next request's fault, found before it is sent.
    ExecPacker packer(Script("after_end.py"), Options());
    ASSERT_FALSE(packer.Pack(Lesson(1)).fault);
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    const PackResult second = packer.Pack(Lesson(2));
    ASSERT_TRUE(second.fault.has_value());
    EXPECT_NE(second.fault->find("wrote on stdout between answers (before request 2 was sent): 'also this"),
              std::string::npos)
        << *second.fault;
    EXPECT_EQ(packer.stats().requests, 1) << "request 2 was never sent";
    for (pid_t p : packer.recent_pids()) groups.push_back(p);
  }
  ExpectNoLeftovers(groups);
}

TEST_F(ExecCandidate, ACompoundCommandKeepsItsShellAndStillLeavesNothingBehind) {
  std::deque<pid_t> groups;
  {
    ExecPacker packer("cd " PACKORACLE_EXEC_TEST_DIR " && " + Script("crash_segv.py"), Options());
    const PackResult r = packer.Pack(Lesson());
    ASSERT_TRUE(r.fault.has_value());
    // The shell reports its command's death by SIGSEGV as status 139.
    EXPECT_NE(r.fault->find("SIGSEGV"), std::string::npos) << *r.fault;
    groups = packer.recent_pids();
  }
  ExpectNoLeftovers(groups);
}

// ---- One answer line (what the fuzz target exec_answer_fuzzer drives) --------------------------------------

TEST(ParseAnswerLine, SaysWhatEachLineIsAndNeverTakesAnotherIdForTheRequests) {
  using Kind = AnswerLine::Kind;
  const std::string where = "line 1 of the answer to request 7";
  EXPECT_EQ(ParseAnswerLine(R"({"record":"end","id":7})", 7, where).kind, Kind::kEnd);
  EXPECT_EQ(ParseAnswerLine("{\"record\":\"end\",\"id\":7}\r", 7, where).kind, Kind::kEnd);
  const AnswerLine refusal = ParseAnswerLine(R"({"record":"error","id":7,"message":"too long"})", 7, where);
  EXPECT_EQ(refusal.kind, Kind::kRefusal);
  EXPECT_EQ(refusal.message, "too long");
  for (const std::string line : {R"({"record":"end","id":8})", R"({"record":"end","id":"7"})", R"({"record":"end","id":7.0})",
                                 R"({"record":"end"})", R"({"record":"banana","id":7})", "not json", "[1,2]",
                                 R"({"record":"end","id":1e999})"}) {
    const AnswerLine parsed = ParseAnswerLine(line, 7, where);
    EXPECT_EQ(parsed.kind, Kind::kFault) << line;
    EXPECT_NE(parsed.message.find(where), std::string::npos) << parsed.message;
  }
  // An unsigned id is another id than a negative request id, whatever a conversion would make of it.
  EXPECT_EQ(ParseAnswerLine(R"({"record":"end","id":18446744073709551609})", -7, where).kind, Kind::kFault);
  EXPECT_EQ(ParseAnswerLine(R"({"record":"end","id":-7})", -7, where).kind, Kind::kEnd);
  const AnswerLine bad = ParseAnswerLine(R"({"record":"microbatch","micro_step":0,"rank":0,"rows":[{"input_ids":[1],"labels":[]}]})", 7, where);
  EXPECT_EQ(bad.kind, Kind::kFault);
  EXPECT_NE(bad.message.find("field 'labels' has 0 entries, input_ids has 1"), std::string::npos) << bad.message;
}

}  // namespace
}  // namespace packoracle

namespace {

// exec_answer_fuzzer finding: a non-finite producer total read from a candidate (Python's bare NaN) was
// written back as null, which the readers refuse ("must be a number") or, for `loss`, read as no loss. Written
// as the quoted token instead, it reads back as the same total, through the exec parser and a dump alike.
TEST(ExecAnswer, NonFiniteProducerTotalsSurviveAWriteReadRoundTrip) {
  const std::string line =
      R"({"id":7,"record":"microbatch","step":0,"micro_step":0,"rank":0,"rows":[{"input_ids":[1,2],"labels":[2,-100],)"
      R"("doc_spans":[{"doc_uid":"a","start":0,"length":2,"doc_offset":0}]}],)"
      R"("producer":{"loss_sum":NaN,"denominator":-Infinity,"denominator_scope":"global","loss":Infinity}})";
  const packoracle::AnswerLine read = packoracle::ParseAnswerLine(line, 7, "answer");
  ASSERT_EQ(read.kind, packoracle::AnswerLine::Kind::kMicrobatch) << read.message;
  ASSERT_TRUE(read.microbatch.producer.has_value());
  EXPECT_TRUE(std::isnan(read.microbatch.producer->loss_sum.value()));

  const std::string written = packoracle::MicrobatchToJson(read.microbatch).dump();
  EXPECT_EQ(written.find("null"), std::string::npos) << written;
  const packoracle::AnswerLine again = packoracle::ParseAnswerLine(written, 7, "round trip");
  ASSERT_EQ(again.kind, packoracle::AnswerLine::Kind::kMicrobatch) << again.message;
  EXPECT_TRUE(again.microbatch == read.microbatch);
  ASSERT_TRUE(again.microbatch.producer->loss.has_value());
  EXPECT_EQ(*again.microbatch.producer->loss, std::numeric_limits<double>::infinity());
  EXPECT_EQ(again.microbatch.producer->denominator.value(), -std::numeric_limits<double>::infinity());

  // The same micro-batch in a packed-batch dump, read by the dump reader.
  std::stringstream dump;
  packoracle::PackedBatchWriter writer(dump);
  packoracle::HeaderRecord header;
  header.policy = packoracle::FindPreset("reference").policy;
  writer.Header(header);
  writer.Microbatch(read.microbatch);
  packoracle::PackedBatchReader reader(dump, "dump.jsonl");
  ASSERT_TRUE(reader.Next().has_value());  // the header
  const auto record = reader.Next();
  ASSERT_TRUE(record.has_value());
  EXPECT_TRUE(std::get<packoracle::MicrobatchRecord>(*record).microbatch == read.microbatch);
}

}  // namespace

namespace {

// Bare non-finite tokens are quoted where a value goes, and only there: a token in a key's place stays, so the
// line stays what it is, not JSON (exec_answer_fuzzer finding: an end record with a bare -Infinity key was
// accepted once the key was quoted).
TEST(ExecAnswer, NonFiniteTokensAreQuotedOnlyWhereAValueGoes) {
  using packoracle::QuoteNonFiniteTokens;
  EXPECT_EQ(QuoteNonFiniteTokens(R"({"a":NaN})"), R"({"a":"NaN"})");
  EXPECT_EQ(QuoteNonFiniteTokens(R"({"a": [1, -Infinity,NaN], "b" : Infinity})"),
            R"({"a": [1, "-Infinity","NaN"], "b" : "Infinity"})");
  EXPECT_EQ(QuoteNonFiniteTokens("NaN"), "\"NaN\"");
  EXPECT_EQ(QuoteNonFiniteTokens(R"({"s":"NaN Infinity"})"), std::nullopt);  // inside strings: text
  EXPECT_EQ(QuoteNonFiniteTokens(R"({NaN:1})"), std::nullopt);
  EXPECT_EQ(QuoteNonFiniteTokens(R"({"a":[1],-Infinity:[0]})"), std::nullopt);
  EXPECT_EQ(QuoteNonFiniteTokens(R"({"a":{"b":1}, Infinity:2})"), std::nullopt);

  const auto end = packoracle::ParseAnswerLine(R"({"record":"end",-Infinity:[0,1],"id":7})", 7, "answer line 1");
  EXPECT_EQ(end.kind, packoracle::AnswerLine::Kind::kFault) << end.message;
}

}  // namespace
