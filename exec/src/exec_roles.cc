// ExecReducer and ExecConsumer: the loss reducer and attention consumer roles over the exec channel (DESIGN §6).
#include "packoracle/exec/exec_roles.h"

#include <string>
#include <utility>

#include "packoracle/interchange/request_json.h"

namespace packoracle {
namespace {

// The line verdict of the lines every role shares: end, error (no refusal here: a failure), a fault.
template <class Verdict>
Verdict Shared(AnswerLine& parsed, const char* role) {
  if (parsed.kind == AnswerLine::Kind::kEnd) return {Verdict::Kind::kEnd, {}};
  if (parsed.kind == AnswerLine::Kind::kRefusal) {
    // An error record fails the case (a role has no refusal), but it is an answer in protocol: the channel keeps
    // the child, so a served library (a family venv's reducer: 30 s of imports) is not started again at every
    // shrinking step. The role turns the outcome into its ExecRoleFault.
    return {Verdict::Kind::kRefusal, std::string("the ") + role + " answered with an error record (a " + role +
                                         " has no refusal): " + parsed.message};
  }
  return {Verdict::Kind::kFault, std::move(parsed.message)};
}

}  // namespace

ReduceResult ExecReducer::Reduce(const ReduceRequest& request) {
  const std::int64_t id = ++next_id_;
  Request line;
  line.name = "reduce request " + std::to_string(id);
  line.record_noun = "totals";
  for (const auto& mb : request.slot_losses)
    for (const auto& row : mb) line.slots += static_cast<std::int64_t>(row.size());
  line.line = ReduceRequestToJson(request, id).dump();
  ReduceResult totals;
  const Outcome outcome = Converse(std::move(line), [&](std::string_view text, const std::string& where) {
    AnswerLine parsed = ParseAnswerLine(text, id, where, AnswerRole::kReducer);
    if (parsed.kind != AnswerLine::Kind::kTotals) return Shared<LineVerdict>(parsed, "loss reducer");
    for (auto& t : parsed.totals) totals.push_back(std::move(t));
    return LineVerdict{LineVerdict::Kind::kMore, {}};
  });
  if (outcome.kind != Outcome::Kind::kComplete) throw ExecRoleFault(outcome.message);
  return totals;
}

std::vector<MaskRuns> ExecConsumer::ConsumeMicrobatchRuns(const CandidateMicrobatch& microbatch, const Policy& policy) {
  const std::int64_t id = ++next_id_;
  const std::size_t rows = microbatch.rows.size();
  Request line;
  line.name = "consume request " + std::to_string(id);
  line.record_noun = "mask";
  for (const auto& row : microbatch.rows) line.slots += static_cast<std::int64_t>(row.input_ids.size());
  line.line = ConsumeRequestToJson(microbatch, policy, id).dump();
  std::vector<MaskRuns> masks;
  const Outcome outcome = Converse(std::move(line), [&](std::string_view text, const std::string& where) {
    AnswerLine parsed = ParseAnswerLine(text, id, where, AnswerRole::kConsumer);
    if (parsed.kind == AnswerLine::Kind::kMask) {
      if (parsed.row != static_cast<std::int64_t>(masks.size()) || masks.size() >= rows) {
        return LineVerdict{LineVerdict::Kind::kFault,
                           where + " answers row " + std::to_string(parsed.row) + " where row " +
                               std::to_string(masks.size()) + " of the micro-batch's " + std::to_string(rows) +
                               " was next (one mask record per row, in order)"};
      }
      masks.push_back(std::move(parsed.mask));
      return LineVerdict{LineVerdict::Kind::kMore, {}};
    }
    if (parsed.kind == AnswerLine::Kind::kEnd && masks.size() != rows) {
      return LineVerdict{LineVerdict::Kind::kFault, where + " ends the answer after " + std::to_string(masks.size()) +
                                                        " of the micro-batch's " + std::to_string(rows) + " masks"};
    }
    return Shared<LineVerdict>(parsed, "attention consumer");
  });
  if (outcome.kind != Outcome::Kind::kComplete) throw ExecRoleFault(outcome.message);
  return masks;
}

std::vector<DenseMask> ExecConsumer::ConsumeMicrobatch(const CandidateMicrobatch& microbatch, const Policy& policy) {
  std::vector<DenseMask> out;
  const auto masks = ConsumeMicrobatchRuns(microbatch, policy);
  for (std::size_t r = 0; r < masks.size(); ++r) {
    const auto n = static_cast<std::int64_t>(microbatch.rows[r].input_ids.size());
    if (const auto bad = Malformed(masks[r], n)) throw ExecRoleFault("row " + std::to_string(r) + ": " + *bad);
    out.push_back(ToDense(masks[r]));
  }
  return out;
}

DenseMask ExecConsumer::Consume(const CandidateRow& row, const Policy& policy) {
  CandidateMicrobatch one;
  one.rows.push_back(row);
  return ConsumeMicrobatch(one, policy).at(0);
}

}  // namespace packoracle
