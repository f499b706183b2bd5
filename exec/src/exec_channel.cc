// ExecChannel: the exec protocol of DESIGN §6 over pipes to a long-lived child process, for every role.
//
// One thread, one poll() loop per request: the request is written without blocking while stdout and stderr
// are read, so that neither side can deadlock on a full pipe. The child is a process-group leader, so that a
// kill reaches whatever it started; its exit is observed with waitid(WNOWAIT) first and the group killed
// before the leader is reaped (a zombie's pid, hence its group id, cannot be reused meanwhile).
#include "packoracle/exec/exec_channel.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "exec_text.h"

namespace packoracle {
namespace {

using Clock = std::chrono::steady_clock;
using exec_text::Printable;
using exec_text::Quote;

constexpr std::size_t kReadChunk = 64 * 1024;
constexpr std::size_t kRecentPids = 64;
constexpr std::size_t kStderrLines = 20;  // quoted in a fault message

// Blocks SIGPIPE in this thread for its lifetime, and swallows a SIGPIPE raised meanwhile by our own write,
// so that a candidate closing its stdin gives EPIPE here and never kills (or disturbs) the host process.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
  }
  ~SigpipeBlock() {
    if (!was_pending_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec zero{0, 0};
        while (sigtimedwait(&pipe_, nullptr, &zero) == -1 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  sigset_t pipe_;
  sigset_t old_;
  bool was_pending_ = false;
};

std::string SignalText(int sig) {
  std::string s = "signal " + std::to_string(sig);
  const char* abbrev = sigabbrev_np(sig);
  const char* description = sigdescr_np(sig);
  if (abbrev) s += std::string(" (SIG") + abbrev + (description ? std::string(": ") + description : "") + ")";
  return s;
}

// "exited with status 3", "was killed by signal 11 (SIGSEGV: Segmentation fault)", ...
std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) {
    const int code = WEXITSTATUS(status);
    std::string s = "exited with status " + std::to_string(code);
    if (code == 127) s += " (the shell could not find the command)";
    if (code == 126) s += " (the command could not be executed)";
    if (code > 128 && code - 128 < NSIG && sigabbrev_np(code - 128)) {
      s += " (a shell's report that its command was killed by " + SignalText(code - 128) + ")";
    }
    return s;
  }
  if (WIFSIGNALED(status)) {
    std::string s = "was killed by " + SignalText(WTERMSIG(status));
    if (WCOREDUMP(status)) s += ", core dumped";
    return s;
  }
  return "ended with wait status " + std::to_string(status);
}

std::string Seconds(std::chrono::milliseconds ms) {
  std::ostringstream os;
  os << static_cast<double>(ms.count()) / 1000.0 << " s";
  return os.str();
}

std::string Bytes(std::size_t n) {
  if (n >= (std::size_t{1} << 20) && n % (std::size_t{1} << 20) == 0) return std::to_string(n >> 20) + " MiB";
  if (n >= 1024 && n % 1024 == 0) return std::to_string(n >> 10) + " KiB";
  return std::to_string(n) + " bytes";
}

void SetNonblocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// The shell line that runs `command`. A simple command (no list, pipeline, background job or group outside
// quotes; no leading assignment, reserved word or builtin) is prefixed with `exec`, so that
// the candidate replaces the shell and owns its pipes itself: then a candidate closing its stdin gives EPIPE,
// and its own exit status and signal are seen. Anything else runs as given, with the shell in between.
std::string ShellLine(const std::string& command) {
  char quote = 0;
  for (std::size_t i = 0; i < command.size(); ++i) {
    const char c = command[i];
    if (quote) {
      if (c == quote) quote = 0;
      else if (c == '\\' && quote == '"') ++i;
      continue;
    }
    if (c == '\\') {
      ++i;
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      continue;
    }
    if (std::strchr(";&|()\n{}", c)) return command;  // a list, pipeline, background job or group
  }
  if (quote) return command;
  std::size_t begin = command.find_first_not_of(" \t");
  if (begin == std::string::npos) return command;
  const std::size_t end = command.find_first_of(" \t", begin);
  const std::string first = command.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  if (first.find('=') != std::string::npos) return command;
  static const char* const kNotExecutable[] = {"exec", "cd", "export", "set", "unset", "eval", ".", "source", "if",
                                               "for", "while", "until", "case", "!", "command", "builtin", "alias",
                                               "ulimit", "umask", "trap", "readonly", "local", "shift", "wait"};
  for (const char* word : kNotExecutable)
    if (first == word) return command;
  return "exec " + command;
}

}  // namespace

// The running child and our ends of its pipes.
struct ExecChannel::Child {
  pid_t pid = 0;
  int in = -1, out = -1, err = -1;
  bool out_eof = false, err_eof = false;
  bool exited = false;         // observed (waitid WNOWAIT), not yet reaped
  bool reaped = false;
  bool killed_by_kit = false;  // the kit sent SIGKILL before the child exited on its own
  int status = 0;              // waitpid status once reaped
  bool status_unknown = false;  // the child was reaped by someone else
  std::string out_buf;         // stdout not yet consumed (at most one partial line between rounds)
  std::size_t scan_from = 0;   // out_buf[0, scan_from) holds no newline
  std::string err_tail;        // the last stderr bytes
  bool err_cut = false;        // err_tail lost its beginning
  std::size_t err_total = 0;
  std::size_t tail_limit = 4096;
  std::size_t written = 0;     // bytes of the current request written to stdin

  ~Child() {
    Kill();
    Close();
  }

  static std::unique_ptr<Child> Spawn(const std::string& command, const ExecOptions& options, std::string& error);

  // Reads what stderr holds now (never blocks), keeping only the tail.
  void DrainStderr() {
    if (err < 0 || err_eof) return;
    char buffer[kReadChunk];
    for (int rounds = 0; rounds < 64; ++rounds) {
      const ssize_t n = read(err, buffer, sizeof(buffer));
      if (n > 0) {
        err_total += static_cast<std::size_t>(n);
        err_tail.append(buffer, static_cast<std::size_t>(n));
        if (err_tail.size() > 2 * tail_limit) {
          err_tail.erase(0, err_tail.size() - tail_limit);
          err_cut = true;
        }
        continue;
      }
      if (n == 0) err_eof = true;
      if (n < 0 && errno == EINTR) continue;
      break;
    }
  }

  // Reads what stdout holds now (never blocks), at most about `budget` bytes; sets out_eof at its end.
  void ReadStdout(std::size_t budget) {
    if (out < 0 || out_eof) return;
    std::size_t got = 0;
    while (got < budget) {
      const std::size_t old = out_buf.size();
      out_buf.resize(old + kReadChunk);
      const ssize_t n = read(out, out_buf.data() + old, kReadChunk);
      out_buf.resize(old + (n > 0 ? static_cast<std::size_t>(n) : 0));
      if (n > 0) {
        got += static_cast<std::size_t>(n);
        continue;
      }
      if (n == 0) out_eof = true;
      if (n < 0 && errno == EINTR) continue;
      break;
    }
  }

  // Has the child exited? (Observed without reaping it.)
  bool Exited() {
    if (exited || reaped) return true;
    siginfo_t info;
    std::memset(&info, 0, sizeof(info));
    const int r = waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
    if (r == 0 && info.si_pid == pid) exited = true;
    if (r < 0 && errno == ECHILD) exited = status_unknown = true;  // reaped behind our back (SIGCHLD ignored)
    return exited;
  }

  // Waits (draining stdout and stderr, so that the child cannot block on them) until the child has exited or
  // the deadline passes. True when it has exited.
  bool WaitExited(Clock::time_point deadline) {
    while (!Exited()) {
      const auto now = Clock::now();
      if (now >= deadline) return false;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
      pollfd fds[2];
      nfds_t n = 0;
      if (out >= 0 && !out_eof) fds[n++] = {out, POLLIN, 0};
      if (err >= 0 && !err_eof) fds[n++] = {err, POLLIN, 0};
      // Exit is not a pipe event: wake up every few milliseconds to look for it.
      poll(n ? fds : nullptr, n, static_cast<int>(std::min<long long>(left, 5)));
      if (out_buf.size() < 4 * kReadChunk) ReadStdout(kReadChunk);
      else if (out >= 0 && !out_eof) {  // keep what explains the fault; discard the rest
        char sink[kReadChunk];
        const ssize_t r = read(out, sink, sizeof(sink));
        if (r == 0) out_eof = true;
      }
      DrainStderr();
    }
    return true;
  }

  // Kills the process group (whatever the child started too) and reaps the child; the pipes stay open (what
  // is left in them still explains the fault) until Close().
  void Kill() {
    if (pid > 0 && !reaped) {
      if (!Exited()) killed_by_kit = true;
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      int st = 0;
      while (true) {
        const pid_t r = waitpid(pid, &st, 0);
        if (r == pid) {
          status = st;
          break;
        }
        if (r < 0 && errno != EINTR) {  // ECHILD: reaped behind our back (a host that ignores SIGCHLD)
          status_unknown = true;
          break;
        }
      }
      reaped = true;
      DrainStderr();
    }
  }

  void Close() {
    CloseFd(in);
    CloseFd(out);
    CloseFd(err);
  }

  // Did the child read any of the current request? (What it left in the pipe is still there after it died.)
  bool ConsumedRequest() const {
    if (in < 0 || written == 0) return false;
    int unread = 0;
    if (ioctl(in, FIONREAD, &unread) != 0) return true;  // cannot tell: assume it did
    return written > static_cast<std::size_t>(unread);
  }

  // Closes stdin, lets the child exit on its own for `grace`, then kills what is left.
  void Stop(std::chrono::milliseconds grace) {
    CloseFd(in);
    if (pid > 0 && !reaped) WaitExited(Clock::now() + grace);
    Kill();
  }

  // What happened to the child, once reaped: "exited with status 3", "was killed by signal 11 ...".
  std::string Fate() const {
    if (!reaped) return "is still running";
    if (killed_by_kit) return "was killed by the kit";
    if (status_unknown) return "ended (its exit status is unknown: the host process ignores SIGCHLD)";
    return DescribeStatus(status);
  }

  // The last lines of stderr, indented for a report.
  std::string StderrLines() const {
    if (err_total == 0) return "\n    (the candidate wrote nothing on stderr)";
    std::string_view tail(err_tail);
    bool cut = err_cut;
    if (tail.size() > tail_limit) {
      tail.remove_prefix(tail.size() - tail_limit);
      cut = true;
    }
    if (cut) {  // drop the partial first line
      const auto nl = tail.find('\n');
      if (nl != std::string_view::npos && nl + 1 < tail.size()) tail.remove_prefix(nl + 1);
    }
    while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r')) tail.remove_suffix(1);
    std::vector<std::string_view> lines;
    for (std::size_t start = 0; start <= tail.size();) {
      auto nl = tail.find('\n', start);
      if (nl == std::string_view::npos) nl = tail.size();
      lines.push_back(tail.substr(start, nl - start));
      start = nl + 1;
    }
    const std::size_t shown = std::min<std::size_t>(lines.size(), kStderrLines);
    std::string text = "\n    stderr (last " + std::to_string(shown) + " line" + (shown == 1 ? "" : "s") + " of " +
                       Bytes(err_total) + "):";
    for (std::size_t k = lines.size() - shown; k < lines.size(); ++k) text += "\n    | " + Printable(lines[k], 300);
    return text;
  }
};

std::unique_ptr<ExecChannel::Child> ExecChannel::Child::Spawn(const std::string& command, const ExecOptions& options,
                                                           std::string& error) {
  int in_pipe[2] = {-1, -1}, out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1}, exec_pipe[2] = {-1, -1};
  auto close_all = [&] {
    for (int* p : {in_pipe, out_pipe, err_pipe, exec_pipe}) {
      CloseFd(p[0]);
      CloseFd(p[1]);
    }
  };
  if (pipe2(in_pipe, O_CLOEXEC) != 0 || pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0 ||
      pipe2(exec_pipe, O_CLOEXEC) != 0) {
    error = std::string("cannot create pipes: ") + std::strerror(errno);
    close_all();
    return nullptr;
  }
  // Everything the child needs is prepared before fork: after it only async-signal-safe calls are allowed.
  std::string sh = "/bin/sh", arg0 = "sh", dash_c = "-c", cmd = ShellLine(command);
  char* const argv[] = {arg0.data(), dash_c.data(), cmd.data(), nullptr};
  const pid_t parent = getpid();

  const pid_t pid = fork();
  if (pid < 0) {
    error = std::string("cannot fork: ") + std::strerror(errno);
    close_all();
    return nullptr;
  }
  if (pid == 0) {
    setpgid(0, 0);
    // If the kit dies without its destructors (SIGKILL, a crash), the child goes too.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGPIPE, &dfl, nullptr);
    // Move the pipe ends above 2 first, so that no dup2 below clobbers another (the host may run with fds
    // 0-2 closed, and then pipe2 hands them out).
    const int in_fd = fcntl(in_pipe[0], F_DUPFD, 3);
    const int out_fd = fcntl(out_pipe[1], F_DUPFD, 3);
    const int err_fd = fcntl(err_pipe[1], F_DUPFD, 3);
    if (in_fd < 0 || out_fd < 0 || err_fd < 0 || dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0) {
      const int e = errno;
      [[maybe_unused]] auto w = write(exec_pipe[1], &e, sizeof(e));
      _exit(127);
    }
    close(in_fd);
    close(out_fd);
    close(err_fd);
    execv(sh.c_str(), argv);
    const int e = errno;
    [[maybe_unused]] auto w = write(exec_pipe[1], &e, sizeof(e));
    _exit(127);
  }
  setpgid(pid, pid);  // also here, so that the group exists whichever process runs first
  CloseFd(in_pipe[0]);
  CloseFd(out_pipe[1]);
  CloseFd(err_pipe[1]);
  CloseFd(exec_pipe[1]);
  auto child = std::make_unique<Child>();
  child->pid = pid;
  child->in = in_pipe[1];
  child->out = out_pipe[0];
  child->err = err_pipe[0];
  child->tail_limit = std::max<std::size_t>(options.stderr_tail_bytes, 256);
  // The exec pipe closes on a successful execv; an errno arrives when it failed.
  int exec_errno = 0;
  ssize_t n;
  do {
    n = read(exec_pipe[0], &exec_errno, sizeof(exec_errno));
  } while (n < 0 && errno == EINTR);
  CloseFd(exec_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof(exec_errno))) {
    child->Kill();
    error = "cannot run /bin/sh: " + std::string(std::strerror(exec_errno));
    return nullptr;
  }
  SetNonblocking(child->in);
  SetNonblocking(child->out);
  SetNonblocking(child->err);
  return child;
}

ExecChannel::ExecChannel(std::string command, ExecOptions options)
    : command_(std::move(command)), options_(std::move(options)) {}

ExecChannel::~ExecChannel() { Stop(); }

pid_t ExecChannel::pid() const { return child_ && !child_->reaped ? child_->pid : 0; }

void ExecChannel::Stop() {
  if (!child_) return;
  try {
    child_->Stop(options_.shutdown_grace);
  } catch (...) {
  }
  child_.reset();
}

bool ExecChannel::StartChild(std::string& error) {
  child_ = Child::Spawn(command_, options_, error);
  if (!child_) return false;
  ++stats_.starts;
  child_answered_ = false;
  recent_pids_.push_back(child_->pid);
  while (recent_pids_.size() > kRecentPids) recent_pids_.pop_front();
  return true;
}

std::optional<std::string> ExecChannel::CheckStarts(std::chrono::milliseconds grace) {
  SigpipeBlock sigpipe;
  try {
    std::string error;
    if (!child_ && !StartChild(error)) return "the command cannot be started: " + error;
    if (!child_->WaitExited(Clock::now() + grace)) return std::nullopt;
    child_->Kill();
    std::string message = "the command " + child_->Fate() + " before any request was sent" + child_->StderrLines();
    child_.reset();
    return message;
  } catch (const std::exception& e) {
    Stop();
    return std::string("the command cannot be started: ") + e.what();
  }
}

ExecChannel::Outcome ExecChannel::Fail(std::string message) {
  if (child_) {
    if (child_->ConsumedRequest()) took_request_ = true;
    child_->DrainStderr();
    child_->Kill();
    message += child_->StderrLines();
    child_.reset();
  }
  ++stats_.faults;
  last_fault_ = message;
  return {Outcome::Kind::kFault, std::move(message)};
}

// One request's exchange: what it sent, its deadline, and the answer read so far.
struct ExecChannel::Round {
  Round(ExecChannel::Request r, const LineHandler& h) : request(std::move(r)), handle(h) { request.line += "\n"; }
  ExecChannel::Request request;  // its line ends with the newline
  const LineHandler& handle;
  Clock::time_point start;
  std::chrono::milliseconds allowed{0};
  Clock::time_point deadline;
  std::size_t answer_bytes = 0;
  int line_no = 0;
  std::size_t records = 0;  // lines the role took (kMore)

  // "3 microbatch records"
  std::string Records() const {
    return std::to_string(records) + " " + request.record_noun + " record" + (records == 1 ? "" : "s");
  }
};

ExecChannel::Outcome ExecChannel::Converse(Request request, const LineHandler& handle) {
  SigpipeBlock sigpipe;
  Round round(std::move(request), handle);
  try {
    Outcome outcome = Exchange(round);
    if (outcome.kind == Outcome::Kind::kRefusal) ++stats_.refusals;
    return outcome;
  } catch (const std::exception& e) {
    return Fail(std::string("the kit failed while talking to the candidate: ") + e.what());
  } catch (...) {
    return Fail("the kit failed while talking to the candidate (unknown exception)");
  }
}

ExecChannel::Outcome ExecChannel::Exchange(Round& round) {
  const std::string& req = round.request.name;
  if (!child_) {
    std::string error;
    if (!StartChild(error)) return Fail("the command cannot be started: " + error);
  }
  Child& child = *child_;

  // Anything on stdout now was written outside an answer.
  child.DrainStderr();
  child.ReadStdout(kReadChunk);
  if (!child.out_buf.empty()) {
    return Fail("the candidate wrote on stdout between answers (before " + req + " was sent): " + Quote(child.out_buf));
  }
  if (child.out_eof) {
    child.WaitExited(Clock::now() + std::chrono::milliseconds(200));
    child.Kill();
    return Fail("the candidate closed its stdout between requests (before " + req + " was sent); it " + child.Fate());
  }

  ++stats_.requests;
  round.start = Clock::now();
  round.allowed = options_.adaptive_deadline
                      ? clock_.Deadline(round.request.slots, options_.timeout, !child_answered_)
                      : options_.timeout;
  round.deadline = round.start + round.allowed;
  child.written = 0;

  while (true) {
    if (auto done = ConsumeLines(round)) return std::move(*done);
    if (child.out_buf.size() > options_.max_line_bytes) {
      return Fail("line " + std::to_string(round.line_no + 1) + " of the answer to " + req +
                  " is longer than the limit of " + Bytes(options_.max_line_bytes) + " per line (reading stopped after " +
                  std::to_string(child.out_buf.size()) + " bytes without a newline); it begins " +
                  Quote(child.out_buf, 80));
    }
    if (child.out_eof) {
      const std::string progress = round.Records() + " had come";
      if (!child.out_buf.empty()) {
        return Closed(round, "its stdout ended with a partial line (" + std::to_string(child.out_buf.size()) +
                                 " bytes without a newline: " + Quote(child.out_buf) + "); " + progress +
                                 ", no end record");
      }
      return Closed(round, "its stdout ended before the end record; " + progress);
    }
    const auto now = Clock::now();
    if (now >= round.deadline) return Overdue(round);
    if (auto done = Transfer(round, now)) return std::move(*done);
  }
}

std::optional<ExecChannel::Outcome> ExecChannel::ConsumeLines(Round& round) {
  Child& child = *child_;
  std::size_t begin = 0;
  while (true) {
    const auto nl = child.out_buf.find('\n', child.scan_from);
    if (nl == std::string::npos) {
      child.scan_from = child.out_buf.size();
      break;
    }
    const std::string_view text(child.out_buf.data() + begin, nl - begin);
    if (text.size() > options_.max_line_bytes) {
      return Fail("line " + std::to_string(round.line_no + 1) + " of the answer to " + round.request.name + " is " +
                  std::to_string(text.size()) + " bytes long, over the limit of " + Bytes(options_.max_line_bytes) +
                  " per line; it begins " + Quote(text, 80));
    }
    round.answer_bytes += text.size() + 1;
    if (round.answer_bytes > options_.max_answer_bytes) {
      return Fail("the answer to " + round.request.name + " is longer than the limit of " +
                  Bytes(options_.max_answer_bytes));
    }
    begin = child.scan_from = nl + 1;
    if (auto done = HandleLine(round, text)) {
      if (!child_) return done;  // a fault: the child is gone
      child.out_buf.erase(0, begin);
      child.scan_from = 0;
      if (!child.out_buf.empty()) {
        return Fail("the candidate wrote more after its answer to " + round.request.name + " was complete: " +
                    Quote(child.out_buf));
      }
      return done;
    }
  }
  if (begin > 0) {
    child.out_buf.erase(0, begin);
    child.scan_from -= begin;
  }
  return std::nullopt;
}

std::optional<ExecChannel::Outcome> ExecChannel::HandleLine(Round& round, std::string_view text) {
  ++round.line_no;
  took_request_ = true;  // it answers: it has read the request
  LineVerdict verdict =
      round.handle(text, "line " + std::to_string(round.line_no) + " of the answer to " + round.request.name);
  switch (verdict.kind) {
    case LineVerdict::Kind::kMore:
      ++round.records;
      return std::nullopt;
    case LineVerdict::Kind::kEnd:
      // a fresh child's first answer includes its start-up (an interpreter, imports): not a measure of it
      {
        const double seconds = std::chrono::duration<double>(Clock::now() - round.start).count();
        if (child_answered_) {
          clock_.Answered(seconds, round.request.slots);
        } else {
          clock_.FirstAnswered(seconds);
        }
      }
      child_answered_ = true;
      return Outcome{Outcome::Kind::kComplete, {}};
    case LineVerdict::Kind::kRefusal:
      return Outcome{Outcome::Kind::kRefusal, std::move(verdict.message)};
    case LineVerdict::Kind::kFault:
      break;
  }
  return Fail(std::move(verdict.message));
}

ExecChannel::Outcome ExecChannel::Closed(Round& round, const std::string& what) {
  Child& child = *child_;
  const auto wait_until = std::min(round.deadline, Clock::now() + std::chrono::seconds(1));
  const bool exited = child.WaitExited(std::max(wait_until, Clock::now() + std::chrono::milliseconds(50)));
  child.Kill();
  const std::string& req = round.request.name;
  const std::string during = round.line_no > 0 || child.ConsumedRequest() ? " while answering " : " before reading ";
  std::string message = exited ? "the candidate " + child.Fate() + during + req
                               : "the candidate closed its stdout" + during + req + " but kept running (killed)";
  message += ": " + what;
  return Fail(std::move(message));
}

ExecChannel::Outcome ExecChannel::Overdue(const Round& round) {
  Child& child = *child_;
  child.DrainStderr();
  const bool adaptive = round.allowed < options_.timeout;
  if (!adaptive) clock_.hung = true;
  std::string message = "no complete answer to " + round.request.name + " within " + Seconds(round.allowed) +
                        (adaptive ? " (the adaptive deadline after an earlier hang: 20x the slowest answer, at "
                                    "least 0.5 s, plus a fresh child's start-up, at most the timeout " +
                                        Seconds(options_.timeout) + "): "
                                  : " (the timeout): ");
  const std::string& line = round.request.line;
  if (child.written < line.size()) {
    message += "the candidate had taken " + std::to_string(child.written) + " of the request's " +
               std::to_string(line.size()) + " bytes";
  } else {
    message += round.Records() + " and " + std::to_string(child.out_buf.size()) + " bytes of a further line had come";
  }
  return Fail(message + "; the candidate was killed");
}

std::optional<ExecChannel::Outcome> ExecChannel::Transfer(Round& round, std::chrono::steady_clock::time_point now) {
  Child& child = *child_;
  const std::string& line = round.request.line;
  const std::string& req = round.request.name;
  std::size_t& written = child.written;
  pollfd fds[3];
  nfds_t n = 0;
  int out_index = -1, err_index = -1, in_index = -1;
  out_index = static_cast<int>(n);
  fds[n++] = {child.out, POLLIN, 0};
  if (!child.err_eof) {
    err_index = static_cast<int>(n);
    fds[n++] = {child.err, POLLIN, 0};
  }
  if (written < line.size()) {
    in_index = static_cast<int>(n);
    fds[n++] = {child.in, POLLOUT, 0};
  }
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(round.deadline - now).count() + 1;
  const int ready = poll(fds, n, static_cast<int>(std::min<long long>(left, 1000)));
  if (ready < 0) {
    if (errno == EINTR) return std::nullopt;
    return Fail(std::string("poll failed: ") + std::strerror(errno));
  }
  if (in_index >= 0 && fds[in_index].revents != 0) {
    const ssize_t w = write(child.in, line.data() + written, line.size() - written);
    if (w > 0) {
      written += static_cast<std::size_t>(w);
    } else if (w < 0 && errno == EPIPE) {
      // The read end is closed: either the child is gone or it closed its stdin.
      const bool exited = child.WaitExited(Clock::now() + std::chrono::milliseconds(200));
      child.Kill();
      if (exited) {
        return Fail("the candidate " + child.Fate() + " before taking " + req + " (its stdin was closed: EPIPE after " +
                    std::to_string(written) + " of " + std::to_string(line.size()) + " bytes)");
      }
      return Fail("the candidate closed its stdin while still running (EPIPE after " + std::to_string(written) +
                  " of the " + std::to_string(line.size()) + " bytes of " + req + "); it was killed");
    } else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return Fail("writing " + req + " to the candidate failed: " + std::strerror(errno));
    }
  }
  if (err_index >= 0 && fds[err_index].revents != 0) child.DrainStderr();
  if (fds[out_index].revents != 0) child.ReadStdout(std::size_t{1} << 20);
  return std::nullopt;
}

void ExecChannel::AnswerClock::Answered(double seconds, std::int64_t slots) {
  ++answers;
  slowest = std::max(slowest, seconds);
  slowest_per_slot = std::max(slowest_per_slot, seconds / static_cast<double>(std::max<std::int64_t>(slots, 64)));
}

std::chrono::milliseconds ExecChannel::AnswerClock::Deadline(std::int64_t slots, std::chrono::milliseconds cap,
                                                           bool fresh_child) const {
  if (!hung) return cap;
  double seconds = std::max({0.5, 20.0 * slowest,
                             20.0 * slowest_per_slot * static_cast<double>(std::max<std::int64_t>(slots, 64))});
  if (fresh_child) seconds += std::max(0.5, 5.0 * slowest_start);  // its start-up comes first
  const auto ms = std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0));
  return std::min(ms, cap);
}

}  // namespace packoracle
