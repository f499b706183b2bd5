// libFuzzer target: the exec protocol's answer lines (DESIGN §6), as every exec role reads what a candidate
// writes on its stdout: ParseAnswerLine on each line of the input, for request id 7, as a packer's, a loss
// reducer's and an attention consumer's answer.
//
// Whatever the bytes, each line must parse into one of the role's records (a micro-batch, totals, a mask), an
// end, a refusal or a fault, without an exception, a crash or undefined behaviour; a fault's message names the
// line; a record for another id is never taken for this request's; a micro-batch survives a write/read round
// trip; totals hold the shape §5 demands; a well-formed mask survives a dense round trip.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "packoracle/exec/exec_channel.h"
#include "packoracle/interchange/request_json.h"

namespace {

[[noreturn]] void Bug(const std::string& what) {
  std::fprintf(stderr, "exec_answer_fuzzer: %s\n", what.c_str());
  std::abort();
}

// One line read as `role`'s answer: whatever it is taken for must hold what that kind promises.
void CheckLine(std::string_view line, const std::string& where, packoracle::AnswerRole role) {
  using Kind = packoracle::AnswerLine::Kind;
  constexpr std::int64_t kId = 7;
  const packoracle::AnswerLine parsed = packoracle::ParseAnswerLine(line, kId, where, role);
  switch (parsed.kind) {
    case Kind::kFault:
      if (parsed.message.find(where) == std::string::npos && parsed.message.find("is not a packed batch") == std::string::npos) {
        Bug("a fault message that does not say which line: " + parsed.message);
      }
      break;
    case Kind::kEnd:
    case Kind::kRefusal: {
      // Accepted as this request's: the line must carry "id":7 exactly.
      const auto j = nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
      const auto id = j.is_object() ? j.find("id") : j.end();
      if (!j.is_object() || id == j.end() || !id->is_number_integer() || id->dump() != "7") {
        Bug("an end or error record accepted for request 7 without \"id\":7: " + std::string(line.substr(0, 200)));
      }
      break;
    }
    case Kind::kMicrobatch: {
      if (role != packoracle::AnswerRole::kPacker) Bug("a microbatch record taken for another role's answer");
      const std::string text = packoracle::MicrobatchToJson(parsed.microbatch).dump();
      const packoracle::AnswerLine again = packoracle::ParseAnswerLine(text, kId, "round trip");
      if (again.kind != Kind::kMicrobatch || !(again.microbatch == parsed.microbatch)) {
        Bug("a micro-batch changed in a write/read round trip: " + again.message + "\n  written: " + text.substr(0, 400));
      }
      break;
    }
    case Kind::kTotals:
      if (role != packoracle::AnswerRole::kReducer) Bug("a totals record taken for another role's answer");
      for (const auto& t : parsed.totals) {
        if (const auto problem = packoracle::ProducerTotalsProblem(t, !t.denominator_scope.empty())) {
          Bug("totals accepted against the rule of §5: " + problem->field + " " + problem->sentence);
        }
      }
      break;
    case Kind::kMask: {
      if (role != packoracle::AnswerRole::kConsumer) Bug("a mask record taken for another role's answer");
      const auto& mask = parsed.mask;
      if (mask.n >= 0 && mask.n <= 64 && !packoracle::Malformed(mask, mask.n)) {
        const packoracle::MaskRuns again = packoracle::RunsFromDense(packoracle::ToDense(mask));
        if (packoracle::ToDense(again) != packoracle::ToDense(mask)) Bug("a mask changed in a dense round trip");
      }
      break;
    }
    case Kind::kWork:
      if (role != packoracle::AnswerRole::kConsumer) Bug("a work record taken for another role's answer");
      break;
    case Kind::kValues: {
      if (role != packoracle::AnswerRole::kValueConsumer) Bug("a values record taken for another role's answer");
      const auto& v = parsed.values;
      if (!v.values.empty() && (v.features < 1 || v.values.size() % static_cast<std::size_t>(v.features) != 0))
        Bug("values accepted that are not slots × features");
      break;
    }
    case Kind::kGradient:
      if (role != packoracle::AnswerRole::kValueConsumer) Bug("a gradient record taken for another role's answer");
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::size_t begin = 0;
  int line_no = 0;
  while (begin <= input.size()) {
    std::size_t end = input.find('\n', begin);
    if (end == std::string_view::npos) end = input.size();
    const std::string_view line = input.substr(begin, end - begin);
    begin = end + 1;
    const std::string where = "line " + std::to_string(++line_no) + " of the answer to request 7";
    for (const auto role : {packoracle::AnswerRole::kPacker, packoracle::AnswerRole::kReducer,
                            packoracle::AnswerRole::kConsumer, packoracle::AnswerRole::kValueConsumer}) {
      CheckLine(line, where, role);
    }
  }
  return 0;
}
