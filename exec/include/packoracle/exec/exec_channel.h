// The exec protocol's channel (DESIGN §6): a candidate's role played by a long-lived child process, one JSON
// line of request on its stdin, JSON lines of answer on its stdout. Every role over the protocol (the packer:
// exec_candidate.h; the loss reducer and the attention consumer: exec_roles.h) is an ExecChannel and says only
// what its request line is and what each answer line means; the process, the deadlines, the restarts and the
// faults are this channel's, the same for every role.
//
// Per request:
//   → one line, {"record":<the role's request kind>,"id":N,...}
//   ← zero or more records of the role's answer kind (microbatch, totals, mask), then {"record":"end","id":N}
//   ← or {"record":"error","id":N,"message":"..."}: the candidate refuses (a packer's refusal; for the other
//     roles a failure of the case, its message quoted)
// One JSON object per line; the candidate must flush stdout after each answer. Its stderr is free text: it is
// drained all the time (a candidate may log as much as it likes) and its last ~4 KiB are quoted in reports.
//
// Every other outcome is a fault of that case, with a message that says what happened and quotes the last
// lines of the candidate's stderr:
//   1 the child exits, or is killed by a signal (named: SIGSEGV, SIGABRT, ...), before its answer is complete;
//   2 no complete answer within `timeout` (the child is killed);
//   3 a line that is not JSON, not an object, or has no "record" field; an unknown record type; a record that
//     does not hold what its kind says (the field is named);
//   4 a record for another id than the request's;
//   5 a partial line and then the end of stdout;
//   6 a single line longer than `max_line_bytes` (reading stops there), or an answer longer than
//     `max_answer_bytes` in total;
//   7 the child closes its stdin before taking the whole request (EPIPE; SIGPIPE never reaches the kit);
//   8 output between answers (after an end record, before the next request).
// After a fault the child's process group is killed and the child reaped; the next request starts a fresh
// child, so that shrinking goes on. No child is ever left running or unreaped: the destructor closes the
// child's stdin, gives it `shutdown_grace` to exit, then kills its process group and reaps it. Should the
// host die without its destructors, the child gets SIGKILL (PR_SET_PDEATHSIG, tied to the thread that
// started it).
//
// The command runs under /bin/sh -c in a process group of its own. A simple command (`python3 packer.py
// --fast`, with any quoting, variables or redirections) is run as `exec <command>`, so that the candidate
// replaces the shell and owns the pipes itself. A compound command (`cd dir && python3 x.py`, a pipeline)
// keeps a shell in between; that works too, except that the shell also holds the candidate's stdin, so a
// candidate closing its stdin (case 7) shows as a timeout, and a crash as the shell's status 128+signal.
//
// A common way to break the protocol is forgetting to flush stdout after the end record (Python buffers
// stdout on a pipe): every case then times out.
//
// Not thread-safe: one channel serves one thread at a time (as Verify uses it).
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "packoracle/oracle/policy.h"
#include "packoracle/properties/candidate.h"

namespace packoracle {

struct ExecOptions {
  std::string name;                                  // the candidate's name in reports; default "exec: <command>"
  std::vector<Policy> policies;                      // the policies it claims (Candidate::policies); empty: all
  std::chrono::milliseconds timeout{10000};          // per case: from the request's first byte to its end record
  // Once the candidate has hung once (no answer within `timeout`), later cases get an adaptive deadline:
  // AnswerClock::Deadline, at most `timeout`. false: always `timeout`.
  bool adaptive_deadline = true;
  std::size_t max_line_bytes = std::size_t{64} << 20;    // a longer line is a fault
  std::size_t max_answer_bytes = std::size_t{256} << 20; // all lines of one answer together
  std::size_t stderr_tail_bytes = 4096;              // how much of the child's stderr is kept for reports
  std::chrono::milliseconds shutdown_grace{500};     // stdin closed → wait this long → SIGKILL
};

class ExecChannel {
 public:
  ExecChannel(std::string command, ExecOptions options);
  virtual ~ExecChannel();
  ExecChannel(const ExecChannel&) = delete;
  ExecChannel& operator=(const ExecChannel&) = delete;

  // Starts the child (if none runs) and watches it for `grace`. Returns why it cannot serve: the shell could
  // not be started, or the child exited (with its status and stderr) before any request was sent. nullopt:
  // it is running (and is kept for the first request).
  std::optional<std::string> CheckStarts(std::chrono::milliseconds grace);

  // Closes the child's stdin, waits up to shutdown_grace for it to exit, then kills its process group and
  // reaps it. The next request starts a fresh child.
  void Stop();

  // How long the candidate takes to answer, and the deadline that follows. Before the first hang every case
  // has the full `timeout` (a slow but correct candidate is never failed for being slow: an answer later than
  // the adaptive deadline only raises it). After a hang, a case has
  //   max(0.5 s, 20 × the slowest answer so far, 20 × the slowest answer per slot × this case's slots),
  // capped at `timeout`, so that shrinking a hanging case costs about a second a step instead of `timeout`.
  // A child's first answer is not counted there (it includes the child's start-up: an interpreter, imports);
  // it is kept apart, and a fresh child's first case gets max(0.5 s, 5 × the slowest first answer) more, so
  // that a restart after a hang on a loaded machine is not read as another hang (a false counterexample).
  struct AnswerClock {
    std::int64_t answers = 0;
    double slowest = 0;           // seconds
    double slowest_per_slot = 0;  // seconds per slot (slots: the case's size, at least 64)
    double slowest_start = 0;     // seconds: the slowest first answer of a fresh child (start-up included)
    bool hung = false;            // a case had no answer within the full timeout
    void Answered(double seconds, std::int64_t slots);
    void FirstAnswered(double seconds) { slowest_start = std::max(slowest_start, seconds); }
    std::chrono::milliseconds Deadline(std::int64_t slots, std::chrono::milliseconds cap, bool fresh_child = false) const;
  };
  const AnswerClock& answer_clock() const { return clock_; }

  struct Stats {
    std::int64_t starts = 0;     // children started
    std::int64_t requests = 0;   // requests sent
    std::int64_t faults = 0;     // requests whose answer was a fault
    std::int64_t refusals = 0;
  };
  const Stats& stats() const { return stats_; }
  const std::string& command() const { return command_; }
  const ExecOptions& options() const { return options_; }
  // The running child's pid (also its process group id); 0 when none runs.
  pid_t pid() const;
  // The pids of the last (up to 64) children started, oldest first: each was a process group leader.
  const std::deque<pid_t>& recent_pids() const { return recent_pids_; }
  // The last fault message (empty when there was none).
  const std::string& last_fault() const { return last_fault_; }
  // Has any child read (some of) a request, or answered? False after a fault means that the command never got
  // as far as reading its input (it died or hung before): it cannot start, rather than failing a case.
  bool took_a_request() const { return took_request_; }

 protected:
  // What a role makes of one complete line of its answer.
  struct LineVerdict {
    enum class Kind { kMore, kEnd, kRefusal, kFault };
    Kind kind = Kind::kMore;
    std::string message;  // kRefusal: the candidate's reason; kFault: what is wrong with the line
  };
  // How an exchange ended: the answer is complete (the role holds what its lines gave), refused, or a fault.
  struct Outcome {
    enum class Kind { kComplete, kRefusal, kFault };
    Kind kind = Kind::kFault;
    std::string message;
  };
  // One line of the answer (`where`: "line 2 of the answer to request 7").
  using LineHandler = std::function<LineVerdict(std::string_view line, const std::string& where)>;
  // A request: its JSON line (without the newline), its name in messages ("request 7", "reduce request 3"), its
  // size for the adaptive deadline (slots), and what its answer's records are called in messages ("microbatch").
  struct Request {
    std::string line;
    std::string name;
    std::int64_t slots = 0;
    std::string record_noun;
  };
  // Sends the request and hands each line of the answer to `handle` until it ends the answer. Never throws:
  // whatever the child does, the outcome is one of the three.
  Outcome Converse(Request request, const LineHandler& handle);

 private:
  struct Child;
  struct Round;  // one request's exchange: its request line, its deadline, the answer read so far
  Outcome Exchange(Round& round);
  // The complete lines read so far, each through the role's handler: nullopt to read on, or the outcome.
  std::optional<Outcome> ConsumeLines(Round& round);
  std::optional<Outcome> HandleLine(Round& round, std::string_view text);
  // After the child's stdout closed: what happened to it (`what`: how the answer stood).
  Outcome Closed(Round& round, const std::string& what);
  // No complete answer by the deadline: the fault, saying how far the exchange had come.
  Outcome Overdue(const Round& round);
  // One poll() round (at most 1 s): writes what it can of the request, reads stdout and stderr.
  std::optional<Outcome> Transfer(Round& round, std::chrono::steady_clock::time_point now);
  // Kills and reaps the child, counts the fault and returns it with the child's last stderr lines.
  Outcome Fail(std::string message);
  bool StartChild(std::string& error);

  std::string command_;
  ExecOptions options_;
  std::unique_ptr<Child> child_;
  Stats stats_;
  AnswerClock clock_;
  std::deque<pid_t> recent_pids_;
  std::string last_fault_;
  bool took_request_ = false;
  bool child_answered_ = false;  // the running child has answered once (its first answer includes its start-up)
};

// The records an answer line may hold, by role: a packer's microbatch records, a loss reducer's totals, an
// attention consumer's masks and its work record, a value consumer's values and gradient records (each role's
// request kind: DESIGN §6).
enum class AnswerRole { kPacker, kReducer, kConsumer, kValueConsumer };

// One line of a candidate's answer to request `request_id`, parsed (exposed for the fuzz target
// fuzz/exec_answer_fuzzer.cc and for tests; every exec role reads every line through it). `where` names the line
// in messages ("line 2 of the answer to request 7"). Never throws on any input: whatever the bytes, the result
// is one of the kinds below, and a fault carries a message that names the line and quotes it. A record kind of
// another role than `role` is a fault.
struct AnswerLine {
  enum class Kind { kMicrobatch, kTotals, kMask, kWork, kValues, kGradient, kEnd, kRefusal, kFault };
  Kind kind = Kind::kFault;
  CandidateMicrobatch microbatch;        // kMicrobatch
  std::vector<ProducerTotals> totals;    // kTotals: the next micro-batches' totals, in order
  std::int64_t row = 0;                  // kMask, kValues: the row of the micro-batch it answers
  MaskRuns mask;                         // kMask
  ComputedWork work;                     // kWork: what the consumer computes for the micro-batch
  SlotValues values;                     // kValues: the row's output values
  std::vector<double> gradient;          // kGradient: the parameter gradient of the probe loss
  std::string message;                   // kRefusal: the candidate's reason; kFault: what is wrong with the line
};
AnswerLine ParseAnswerLine(std::string_view text, std::int64_t request_id, const std::string& where,
                           AnswerRole role = AnswerRole::kPacker);

}  // namespace packoracle
