// The exec run (fuzz_exec.h): the candidate process started and checked, driven by RunFuzz, stopped.
#include "packoracle/jobs/fuzz_exec.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <variant>
#include <utility>
#include <vector>

#include "packoracle/jobs/fuzz_options.h"
#include "packoracle/oracle.h"

namespace packoracle::jobs {
namespace {

constexpr auto kStartGrace = std::chrono::milliseconds(300);  // a command that dies this fast cannot start

// Thrown through Verify (deliberately not a std::exception, which CheckCase would turn into a fault) when the
// candidate fails before it has ever read a request: the command cannot start, no case can be checked.
struct CannotStart {
  std::string message;
};

// The exec packer seen by the hooks, and stopped at its first fault if it never took a request.
class WatchedPacker final : public PackerRole {
 public:
  WatchedPacker(std::shared_ptr<ExecPacker> inner, const ExecFuzzHooks& hooks) : inner_(std::move(inner)), hooks_(hooks) {}
  PackResult Pack(const PackRequest& request) override {
    if (hooks_.request) hooks_.request(request.id);
    PackResult result = inner_->Pack(request);
    if (result.fault && !inner_->took_a_request()) throw CannotStart{*result.fault};
    if (hooks_.answered) hooks_.answered(inner_->stats().starts - 1);
    return result;
  }

 private:
  std::shared_ptr<ExecPacker> inner_;
  const ExecFuzzHooks& hooks_;
};

// 'text' for a POSIX shell (left bare when that is safe, unless `always`).
std::string ShellQuote(const std::string& text, bool always = false) {
  if (!always && !text.empty() && text.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=@,+") ==
                           std::string::npos) {
    return text;
  }
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string Fixed3(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.3f", v);
  return buffer;
}

}  // namespace

void CheckExecFuzzOptions(const ExecFuzzOptions& o, const std::function<void()>& more_checks) {
  if (o.exec.empty() && o.fuzz.exec_reducer.empty() && o.fuzz.exec_consumer.empty() &&
      o.fuzz.exec_value_consumer.empty()) {
    throw InputError("--exec CMD is required (or --exec-reducer / --exec-consumer / --exec-value-consumer): the "
                     "command that runs the candidate (see --help)");
  }
  CheckFuzzOptions(o.fuzz, [&] {
    if (!(o.timeout > 0) || o.timeout > 86400) throw InputError("--timeout must be a number of seconds in (0, 86400]");
    // A schedule and a selection are handed to a loss reducer (reduce_request); an exec packer's own producer
    // totals are never told of them, so without a reducer they would be judged against an objective unseen.
    if (o.fuzz.optimizer_steps > 1 && o.fuzz.exec_reducer.empty()) {
      throw InputError("--optimizer-steps " + std::to_string(o.fuzz.optimizer_steps) +
                       " states a loss reducer's schedule: give --exec-reducer CMD");
    }
    if (o.fuzz.select_top_fraction < 1 && o.fuzz.exec_reducer.empty()) {
      throw InputError("--select-top-fraction " + ShortestText(o.fuzz.select_top_fraction) +
                       " states a selection in a loss reducer's objective: give --exec-reducer CMD");
    }
    if (more_checks) more_checks();
  });
}

std::string NameFromCommand(const std::string& command) {
  std::vector<std::string> words;
  std::istringstream in(command);
  for (std::string w; in >> w;) {
    w.erase(std::remove(w.begin(), w.end(), '\''), w.end());
    w.erase(std::remove(w.begin(), w.end(), '"'), w.end());
    if (!w.empty()) words.push_back(w);
  }
  std::string pick;
  for (std::size_t k = 0; k < words.size() && pick.empty(); ++k) {
    const std::string& w = words[k];
    if (w == "-m" && k + 1 < words.size()) pick = words[k + 1];
    else if (w[0] != '-' && w.find('=') == std::string::npos && w.find('/') != std::string::npos && k > 0) pick = w;
    else if (w[0] != '-' && w.size() > 3 && w.find('.') != std::string::npos && k > 0) pick = w;
  }
  if (pick.empty()) pick = words.empty() ? std::string("candidate") : words[0];
  if (const auto slash = pick.rfind('/'); slash != std::string::npos) pick = pick.substr(slash + 1);
  if (const auto dot = pick.rfind('.'); dot != std::string::npos && dot > 0) pick = pick.substr(0, dot);
  return "exec:" + pick;
}

std::string ShortestText(double v) {
  std::array<char, 32> text{};
  const auto end = std::to_chars(text.data(), text.data() + text.size(), v).ptr;
  return std::string(text.data(), end);
}

std::string ReplayedFlags(const FuzzOptions& o) {
  std::string flags;
  for (const auto& entry : kFuzzOptions) {
    if (!entry.replayed || entry.flag.empty()) continue;
    std::visit(
        [&](auto member) {
          const auto& value = o.*member;
          if (value == FuzzOptions{}.*member) return;
          flags += " " + std::string(entry.flag);
          if constexpr (std::is_same_v<std::remove_cvref_t<decltype(value)>, std::string>) flags += " " + ShellQuote(value);
          else if constexpr (std::is_same_v<std::remove_cvref_t<decltype(value)>, double>) flags += " " + ShortestText(value);
          else if constexpr (!std::is_same_v<std::remove_cvref_t<decltype(value)>, bool>) flags += " " + std::to_string(value);
        },
        entry.member);
  }
  return flags;
}

// The same candidate and policies (they decide what is generated), the reproduce string.
std::string ExecReplayCommand(const ExecFuzzOptions& o, const std::string& reproduce) {
  std::string line = "packoracle fuzz";
  if (!o.exec.empty()) line += " --exec " + ShellQuote(o.exec, true);
  line += " --reproduce " + ShellQuote(reproduce, true);
  line += ReplayedFlags(o.fuzz);
  if (o.timeout != kDefaultExecTimeout) line += " --timeout " + ShellQuote(Fixed3(o.timeout));
  if (!o.name.empty()) line += " --name " + ShellQuote(o.name);
  return line;
}

ExecFuzzResult RunExecFuzz(const ExecFuzzOptions& o, const ExecFuzzHooks& hooks) {
  CheckExecFuzzOptions(o);
  const FuzzPolicies policies = ResolveFuzzPolicies(o.fuzz);
  ExecOptions exec_options;
  const std::string& named = !o.exec.empty()                ? o.exec
                             : !o.fuzz.exec_reducer.empty()  ? o.fuzz.exec_reducer
                             : !o.fuzz.exec_consumer.empty() ? o.fuzz.exec_consumer
                                                             : o.fuzz.exec_value_consumer;
  exec_options.name = o.name.empty() ? NameFromCommand(named) : o.name;
  exec_options.policies = policies.policies;
  exec_options.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(o.timeout * 1000.0 + 0.5));
  if (exec_options.timeout.count() < 1) exec_options.timeout = std::chrono::milliseconds(1);
  // Without --exec the candidate is its other roles alone (--exec-reducer, --exec-consumer: RunFuzz starts
  // them), the kit's reference packer making the rows.
  std::shared_ptr<ExecPacker> exec;
  if (!o.exec.empty()) {
    exec = std::make_shared<ExecPacker>(o.exec, exec_options);
    if (auto problem = exec->CheckStarts(kStartGrace)) {
      throw InputError("the candidate cannot start: `" + o.exec + "`: " + *problem);
    }
  }
  if (hooks.started) hooks.started();

  Candidate candidate;
  candidate.name = exec_options.name;
  candidate.policies = policies.policies;
  if (exec) candidate.packer = std::make_shared<WatchedPacker>(exec, hooks);
  FuzzOptions fuzz = o.fuzz;
  fuzz.exec_timeout = o.timeout;
  // The exec consumers get the packer's own records (their requests' `emitted`: DESIGN §6).
  if (exec) fuzz.emitted_records = [exec] { return &exec->emitted(); };
  if (!fuzz.replay_command) fuzz.replay_command = [&o](const std::string& r) { return ExecReplayCommand(o, r); };
  ExecFuzzResult result;
  try {
    result.outcome = RunFuzz(candidate, fuzz, policies, hooks.run);
  } catch (const CannotStart& e) {
    throw InputError("the candidate cannot start: `" + o.exec + "` failed before it read its first request: " + e.message);
  }
  if (exec) {
    exec->Stop();
    result.stats = exec->stats();
  }
  return result;
}

}  // namespace packoracle::jobs
