// An external candidate: a packer in any language, driven as a long-lived child process over the exec
// protocol of DESIGN §6 (JSON Lines on stdin and stdout). `packoracle fuzz --exec CMD` is built on it.
//
//   packoracle::ExecOptions options;
//   options.policies = {packoracle::FindPreset("reference").policy};
//   packoracle::Candidate candidate = packoracle::MakeExecCandidate("python3 my_packer.py", options);
//   packoracle::VerifyReport report = packoracle::Verify(candidate);
//
// The protocol, per case:
//   → one line: RequestToJson(request), {"record":"request","id":N,...}
//   ← zero or more {"record":"microbatch",...} lines, then {"record":"end","id":N}
//   ← or {"record":"error","id":N,"message":"..."}: the candidate refuses the input (PackResult::Refuse; right
//     exactly when the policy demands a refusal)
// Every other outcome is a fault of that case (PackResult::Fault, always a failure, reported under `shape`):
// exec_channel.h lists them. The process, its deadlines and restarts are the channel's (ExecChannel); the
// loss reducer and the attention consumer roles over the same protocol are in exec_roles.h.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "packoracle/exec/exec_channel.h"

namespace packoracle {

// The packer role of an exec candidate. Exposed (rather than hidden behind PackerRole) for the command line
// and the tests: they check that the command starts, and watch restarts and child processes.
class ExecPacker final : public PackerRole, public ExecChannel {
 public:
  ExecPacker(std::string command, ExecOptions options) : ExecChannel(std::move(command), std::move(options)) {}

  // Sends one request and reads its answer. Never throws; a misbehaving candidate gives a Fault.
  PackResult Pack(const PackRequest& request) override;

  // The microbatch records of the latest answer exactly as the child wrote them (one JSON line each, in the
  // answer's order, with whatever fields and nesting of its own it adds; empty after a refusal or a fault): what
  // a consumer's step view hands as `emitted` (DESIGN §12, "The step a consumer sees"), in-process or over exec.
  const std::vector<std::string>& emitted() const { return emitted_; }
  // Called after every answer with emitted() (the Python binding's step view keeps them).
  void OnAnswer(std::function<void(const std::vector<std::string>&)> observer) { on_answer_ = std::move(observer); }

 private:
  std::vector<std::string> emitted_;
  std::function<void(const std::vector<std::string>&)> on_answer_;
};

// A candidate whose packer role is an ExecPacker running `command` (via /bin/sh -c). The child starts lazily,
// at the first request (or ExecPacker::CheckStarts).
Candidate MakeExecCandidate(const std::string& command, ExecOptions options = {});

}  // namespace packoracle
