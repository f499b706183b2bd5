// ExecPacker: the packer role over the exec channel (DESIGN §6): a `request` line, microbatch records back.
#include "packoracle/exec/exec_candidate.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "packoracle/interchange/request_json.h"

namespace packoracle {

PackResult ExecPacker::Pack(const PackRequest& request) {
  PackResult result;
  Request line;
  line.name = "request " + std::to_string(request.id);
  line.record_noun = "microbatch";
  for (const auto& d : request.documents) line.slots += static_cast<std::int64_t>(d.tokens.size());
  try {
    line.line = RequestToJson(request).dump();
  } catch (const std::exception& e) {
    return PackResult::Fault(std::string("the kit could not write ") + line.name + ": " + e.what());
  }
  std::vector<std::string> records;  // the answer's microbatch lines as the child wrote them
  const Outcome outcome = Converse(std::move(line), [&](std::string_view text, const std::string& where) {
    AnswerLine parsed = ParseAnswerLine(text, request.id, where, AnswerRole::kPacker);
    switch (parsed.kind) {
      case AnswerLine::Kind::kMicrobatch:
        result.microbatches.push_back(std::move(parsed.microbatch));
        records.emplace_back(text);
        return LineVerdict{LineVerdict::Kind::kMore, {}};
      case AnswerLine::Kind::kEnd: return LineVerdict{LineVerdict::Kind::kEnd, {}};
      case AnswerLine::Kind::kRefusal: return LineVerdict{LineVerdict::Kind::kRefusal, std::move(parsed.message)};
      default: return LineVerdict{LineVerdict::Kind::kFault, std::move(parsed.message)};
    }
  });
  emitted_ = outcome.kind == Outcome::Kind::kComplete ? std::move(records) : std::vector<std::string>{};
  if (on_answer_) on_answer_(emitted_);
  switch (outcome.kind) {
    case Outcome::Kind::kComplete: return result;
    case Outcome::Kind::kRefusal: return PackResult::Refuse(outcome.message);
    case Outcome::Kind::kFault: break;
  }
  return PackResult::Fault(outcome.message);
}

Candidate MakeExecCandidate(const std::string& command, ExecOptions options) {
  Candidate candidate;
  candidate.name = options.name.empty() ? "exec: " + command : options.name;
  candidate.policies = options.policies;
  candidate.packer = std::make_shared<ExecPacker>(command, std::move(options));
  return candidate;
}

}  // namespace packoracle
