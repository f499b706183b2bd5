// ExecReducer, ExecConsumer and ExecValueConsumer: the loss reducer, attention consumer and value consumer roles
// over the exec channel (DESIGN §6).
#include "packoracle/exec/exec_roles.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

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

namespace {

// The packer's own record of micro-batch `m` of its latest answer (ExecPacker::emitted), when the packer is an
// exec process and `m` is one of its answer's; else none (the request then carries no `emitted`).
std::optional<nlohmann::ordered_json> EmittedRecord(const EmittedSource& source, const StepLayout* layout) {
  const std::vector<std::string>* records = source && layout ? source() : nullptr;
  if (!records || layout->microbatch < 0 || layout->microbatch >= static_cast<std::int64_t>(records->size()))
    return std::nullopt;
  const std::string& text = (*records)[static_cast<std::size_t>(layout->microbatch)];
  auto j = nlohmann::ordered_json::parse(text, nullptr, false);
  if (j.is_discarded()) {  // a bare NaN the packer wrote (its record was read with it quoted)
    const auto quoted = QuoteNonFiniteTokens(text);
    if (quoted) j = nlohmann::ordered_json::parse(*quoted, nullptr, false);
  }
  if (j.is_discarded()) return std::nullopt;
  return j;
}

}  // namespace

std::vector<MaskRuns> ExecConsumer::ConsumeMicrobatchRuns(const CandidateMicrobatch& microbatch, const Policy& policy) {
  const StepLayout whole = WholeRowsLayout(microbatch);  // as an in-process consumer is handed it outside a step
  return Ask(microbatch, policy, &whole).masks;
}

std::vector<MaskRuns> ExecConsumer::ConsumeMicrobatchInStep(const CandidateMicrobatch& microbatch, const Policy& policy,
                                                            const StepLayout& layout) {
  return Ask(microbatch, policy, &layout).masks;
}

ConsumerAnswer ExecConsumer::ConsumeMicrobatchWithWork(const CandidateMicrobatch& microbatch, const Policy& policy,
                                                       const StepLayout& layout) {
  return Ask(microbatch, policy, &layout);
}

ConsumerAnswer ExecConsumer::Ask(const CandidateMicrobatch& microbatch, const Policy& policy,
                                 const StepLayout* layout) {
  const std::int64_t id = ++next_id_;
  const std::size_t rows = microbatch.rows.size();
  Request line;
  line.name = "consume request " + std::to_string(id);
  line.record_noun = "mask";
  for (const auto& row : microbatch.rows) line.slots += static_cast<std::int64_t>(row.input_ids.size());
  const auto emitted = EmittedRecord(emitted_, layout);
  line.line = ConsumeRequestToJson(microbatch, policy, id, {layout, emitted ? &*emitted : nullptr}).dump();
  ConsumerAnswer answer;
  auto& masks = answer.masks;
  const Outcome outcome = Converse(std::move(line), [&](std::string_view text, const std::string& where) {
    AnswerLine parsed = ParseAnswerLine(text, id, where, AnswerRole::kConsumer);
    if (parsed.kind == AnswerLine::Kind::kMask) {
      if (parsed.row != static_cast<std::int64_t>(masks.size()) || masks.size() >= rows || answer.work) {
        return LineVerdict{LineVerdict::Kind::kFault,
                           where + " answers row " + std::to_string(parsed.row) + " where " +
                               (answer.work ? std::string("the work record had ended the masks")
                                            : "row " + std::to_string(masks.size()) + " of the micro-batch's " +
                                                  std::to_string(rows) + " was next") +
                               " (one mask record per row, in order, then at most one work record)"};
      }
      masks.push_back(std::move(parsed.mask));
      return LineVerdict{LineVerdict::Kind::kMore, {}};
    }
    if (parsed.kind == AnswerLine::Kind::kWork) {
      if (answer.work || masks.size() != rows) {
        return LineVerdict{LineVerdict::Kind::kFault,
                           where + " is a work record " + (answer.work ? "after another" : "before every row's mask") +
                               " (one mask record per row, in order, then at most one work record)"};
      }
      answer.work = std::move(parsed.work);
      return LineVerdict{LineVerdict::Kind::kMore, {}};
    }
    if (parsed.kind == AnswerLine::Kind::kEnd && masks.size() != rows) {
      return LineVerdict{LineVerdict::Kind::kFault, where + " ends the answer after " + std::to_string(masks.size()) +
                                                        " of the micro-batch's " + std::to_string(rows) + " masks"};
    }
    return Shared<LineVerdict>(parsed, "attention consumer");
  });
  if (outcome.kind != Outcome::Kind::kComplete) throw ExecRoleFault(outcome.message);
  return answer;
}

ValueAnswer ExecValueConsumer::ConsumeValues(const CandidateMicrobatch& microbatch, const Policy& policy,
                                             const ValueRequest& request) {
  const std::int64_t id = ++next_id_;
  const std::size_t rows = microbatch.rows.size();
  Request line;
  line.name = "value request " + std::to_string(id);
  line.record_noun = "values";
  for (const auto& row : microbatch.rows) line.slots += static_cast<std::int64_t>(row.input_ids.size());
  const auto emitted = EmittedRecord(emitted_, &request.layout);
  line.line = ValueRequestToJson(microbatch, policy, request, id, emitted ? &*emitted : nullptr).dump();
  ValueAnswer answer;
  const Outcome outcome = Converse(std::move(line), [&](std::string_view text, const std::string& where) {
    AnswerLine parsed = ParseAnswerLine(text, id, where, AnswerRole::kValueConsumer);
    const std::string order = " (one values record per row, in order, then one gradient record when asked)";
    if (parsed.kind == AnswerLine::Kind::kValues) {
      if (parsed.row != static_cast<std::int64_t>(answer.rows.size()) || answer.rows.size() >= rows ||
          answer.parameter_gradient) {
        return LineVerdict{LineVerdict::Kind::kFault,
                           where + " answers row " + std::to_string(parsed.row) + " where row " +
                               std::to_string(answer.rows.size()) + " of the micro-batch's " + std::to_string(rows) +
                               " was next" + order};
      }
      answer.rows.push_back(std::move(parsed.values));
      return LineVerdict{LineVerdict::Kind::kMore, {}};
    }
    if (parsed.kind == AnswerLine::Kind::kGradient) {
      if (!request.gradient || answer.parameter_gradient || answer.rows.size() != rows) {
        const char* why = !request.gradient ? "the request did not ask for" : "out of order";
        return LineVerdict{LineVerdict::Kind::kFault, where + " is a gradient record " + why + order};
      }
      answer.parameter_gradient = std::move(parsed.gradient);
      return LineVerdict{LineVerdict::Kind::kMore, {}};
    }
    const bool no_gradient = request.gradient && !answer.parameter_gradient;
    if (parsed.kind == AnswerLine::Kind::kEnd && (answer.rows.size() != rows || no_gradient)) {
      return LineVerdict{LineVerdict::Kind::kFault,
                         where + " ends the answer after " + std::to_string(answer.rows.size()) + " of the " +
                             std::to_string(rows) + " rows of values" + (no_gradient ? " and no gradient record" : "") +
                             order};
    }
    return Shared<LineVerdict>(parsed, "value consumer");
  });
  if (outcome.kind != Outcome::Kind::kComplete) throw ExecRoleFault(outcome.message);
  return answer;
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
