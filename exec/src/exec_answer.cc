// ParseAnswerLine: one line of an exec candidate's answer (DESIGN §6), whichever role it plays. The envelope
// (JSON, an object, its record kind, its id) is the same for every role; the records that carry the answer are
// the role's: a packer's microbatch records, a loss reducer's totals, an attention consumer's masks.
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "exec_text.h"
#include "packoracle/exec/exec_channel.h"
#include "packoracle/interchange/request_json.h"
#include "packoracle/oracle/error.h"

namespace packoracle {
namespace {

using exec_text::Quote;
using Json = nlohmann::json;

// The record kind each role answers with, as the messages name it.
const char* AnswerKind(AnswerRole role) {
  switch (role) {
    case AnswerRole::kPacker: return "microbatch";
    case AnswerRole::kReducer: return "totals";
    case AnswerRole::kConsumer: return "mask";
    case AnswerRole::kValueConsumer: return "values";
  }
  return "?";
}

// {"record":"totals","id":N,"totals":[<producer object>, ...]}: the next micro-batches' totals, in order.
std::vector<ProducerTotals> TotalsFromJson(const Json& j, const std::string& where) {
  const auto list = j.find("totals");
  if (list == j.end() || !list->is_array()) {
    throw InputError(where + ": field 'totals' must be an array of producer objects (DESIGN §5), one per micro-batch");
  }
  std::vector<ProducerTotals> out;
  for (std::size_t k = 0; k < list->size(); ++k) {
    out.push_back(ProducerTotalsFromJson((*list)[k], where + ": totals[" + std::to_string(k) + "]"));
  }
  return out;
}

std::vector<std::int64_t> Integers(const Json& j, const std::string& field, const std::string& where) {
  const auto it = j.find(field);
  if (it == j.end() || !it->is_array()) throw InputError(where + ": field '" + field + "' must be an array of integers");
  std::vector<std::int64_t> out;
  out.reserve(it->size());
  for (const auto& v : *it) {
    if (!v.is_number_integer()) throw InputError(where + ": field '" + field + "' must hold integers only");
    out.push_back(v.is_number_unsigned() && v.get<std::uint64_t>() > INT64_MAX ? INT64_MAX : v.get<std::int64_t>());
  }
  return out;
}

// A runs object, {"row_offsets":[..],"run_begin":[..],"run_end":[..],"source":..} (mask_runs.h), its n the
// offsets' count less one. Its shape against a row is the checker's (Malformed); here only its types.
MaskRuns RunsFromJson(const Json& runs, const std::string& at) {
  if (!runs.is_object()) throw InputError(at + " must be an object of row_offsets, run_begin, run_end");
  MaskRuns out;
  out.row_offsets = Integers(runs, "row_offsets", at);
  out.run_begin = Integers(runs, "run_begin", at);
  out.run_end = Integers(runs, "run_end", at);
  out.n = static_cast<std::int64_t>(out.row_offsets.size()) - 1;
  const auto source = runs.find("source");
  const std::string name = source != runs.end() && source->is_string() ? source->get<std::string>() : "runs";
  if (name != "runs" && name != "function" && name != "dense") {
    throw InputError(at + ": field 'source' must be \"runs\", \"function\" or \"dense\" (how the consumer answered)");
  }
  out.source = name == "dense" ? MaskSource::kDense : name == "function" ? MaskSource::kFunction : MaskSource::kRuns;
  return out;
}

// {"record":"work","id":N,"rows":[<runs>, ...],"extra_rows":[<runs>, ...]} (added after version 1, DESIGN §6):
// what the consumer computes for the micro-batch, ComputedWork. `rows` absent or null: each row computes what
// its mask attends; `extra_rows` absent: none.
ComputedWork WorkFromJson(const Json& j, const std::string& where) {
  ComputedWork out;
  for (const char* field : {"rows", "extra_rows"}) {
    const auto list = j.find(field);
    if (list == j.end() || list->is_null()) continue;
    if (!list->is_array()) throw InputError(where + ": field '" + field + "' must be an array of runs objects");
    auto& into = std::string_view(field) == "rows" ? out.rows : out.extra_rows;
    for (std::size_t k = 0; k < list->size(); ++k)
      into.push_back(RunsFromJson((*list)[k], where + ": " + field + "[" + std::to_string(k) + "]"));
  }
  return out;
}

// A value as a value consumer writes it: a number, or a quoted non-finite token (QuoteNonFiniteTokens: Python
// writes a NaN output as NaN, which is a value the comparison must see, never close to anything).
double ValueNumber(const Json& v, const std::string& at) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const auto text = v.get<std::string>();
    if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (text == "Infinity") return std::numeric_limits<double>::infinity();
    if (text == "-Infinity") return -std::numeric_limits<double>::infinity();
  }
  throw InputError(at + " must be a number, got " + v.dump());
}

// {"record":"values","id":N,"row":r,"values":[[v, ...] per slot]}: row r's outputs, n × features (features ≥ 1,
// the same for every slot); the count against the row is the value comparison's (value_invariance.cc).
void ValuesFromJson(const Json& j, const std::string& where, AnswerLine& out) {
  const auto row = j.find("row");
  if (row == j.end() || !row->is_number_integer() || row->is_number_unsigned() && row->get<std::uint64_t>() > INT64_MAX)
    throw InputError(where + ": field 'row' must be the index of the row the values answer");
  out.row = row->get<std::int64_t>();
  const auto slots = j.find("values");
  if (slots == j.end() || !slots->is_array())
    throw InputError(where + ": field 'values' must be an array of slots, each an array of its features' values");
  for (std::size_t i = 0; i < slots->size(); ++i) {
    const Json& slot = (*slots)[i];
    const std::string at = where + ": values[" + std::to_string(i) + "]";
    if (!slot.is_array() || slot.empty() ||
        (i > 0 && static_cast<std::int64_t>(slot.size()) != out.values.features))
      throw InputError(at + " must be an array of the row's features (as many for every slot, at least one)");
    out.values.features = static_cast<std::int64_t>(slot.size());
    for (std::size_t f = 0; f < slot.size(); ++f)
      out.values.values.push_back(ValueNumber(slot[f], at + "[" + std::to_string(f) + "]"));
  }
}

// {"record":"gradient","id":N,"parameter_gradient":[..]}: the probe loss's parameter gradient, flattened.
std::vector<double> GradientFromJson(const Json& j, const std::string& where) {
  const auto list = j.find("parameter_gradient");
  if (list == j.end() || !list->is_array())
    throw InputError(where + ": field 'parameter_gradient' must be an array of numbers");
  std::vector<double> out;
  for (std::size_t k = 0; k < list->size(); ++k)
    out.push_back(ValueNumber((*list)[k], where + ": parameter_gradient[" + std::to_string(k) + "]"));
  return out;
}

// {"record":"mask","id":N,"row":r,"runs":{"row_offsets":[..],"run_begin":[..],"run_end":[..],"source":..}} or
// with "mask":[[0/1, ...], ...] (dense, n × n): row r's mask. The runs' shape against the row is the checker's
// (Malformed); here only their types.
void MaskFromJson(const Json& j, const std::string& where, AnswerLine& out) {
  const auto row = j.find("row");
  if (row == j.end() || !row->is_number_integer() || row->is_number_unsigned() && row->get<std::uint64_t>() > INT64_MAX) {
    throw InputError(where + ": field 'row' must be the index of the row the mask answers");
  }
  out.row = row->get<std::int64_t>();
  const auto runs = j.find("runs"), dense = j.find("mask");
  if ((runs == j.end()) == (dense == j.end())) {
    throw InputError(where + ": a mask record holds exactly one of 'runs' (per query, its visible keys) or 'mask' "
                             "(n × n, 0/1)");
  }
  if (runs != j.end()) {
    out.mask = RunsFromJson(*runs, where + ": runs");
    return;
  }
  if (!dense->is_array()) throw InputError(where + ": field 'mask' must be an array of rows of 0/1");
  DenseMask matrix;
  for (const auto& line : *dense) {
    if (!line.is_array()) throw InputError(where + ": field 'mask' must be an array of rows of 0/1");
    auto& bits = matrix.emplace_back();
    for (const auto& v : line) {
      if (!(v.is_boolean() || (v.is_number_integer() && (v == 0 || v == 1)))) {
        throw InputError(where + ": field 'mask' must hold 0, 1, true or false only, got " + v.dump());
      }
      bits.push_back(v.is_boolean() ? v.get<bool>() : v.get<int>() == 1);
    }
  }
  out.mask = RunsFromDense(matrix);
}

}  // namespace

AnswerLine ParseAnswerLine(std::string_view text, std::int64_t request_id, const std::string& where, AnswerRole role) {
  AnswerLine out;
  auto fault = [&](std::string message) {
    out.kind = AnswerLine::Kind::kFault;
    out.message = std::move(message);
    return out;
  };
  if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
  const std::string id = std::to_string(request_id);
  Json j;
  try {
    j = Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {
    // A bare NaN or Infinity (Python's json writes them) is read as the non-finite number it means.
    const auto quoted = QuoteNonFiniteTokens(text);
    if (quoted) j = Json::parse(*quoted, nullptr, false);
    if (!quoted || j.is_discarded()) return fault(where + " is not JSON: " + Quote(text) + " (" + e.what() + ")");
  }
  if (!j.is_object()) return fault(where + " is not a JSON object: " + Quote(text));
  auto record = j.find("record");
  if (record == j.end() || !record->is_string()) {
    return fault(where + " has no \"record\" field naming its type: " + Quote(text));
  }
  const std::string type = record->get<std::string>();
  auto id_field = j.find("id");
  if (id_field != j.end()) {
    // An unsigned id above INT64_MAX is another id, never this one (no conversion may make it equal).
    const bool same = id_field->is_number_integer() &&
                      (id_field->is_number_unsigned() ? request_id >= 0 && id_field->get<std::uint64_t>() ==
                                                                               static_cast<std::uint64_t>(request_id)
                                                      : id_field->get<std::int64_t>() == request_id);
    if (!same) {
      return fault(where + " is a record for id " + id_field->dump() + " (type '" + type + "'), but the request is id " +
                   id + ": " + Quote(text));
    }
  } else if (type == "end" || type == "error") {
    return fault(where + " is a record of type '" + type + "' without an id (expected \"id\":" + id + "): " + Quote(text));
  }
  const std::string answer_kind = AnswerKind(role);
  try {
    if (type == answer_kind && role == AnswerRole::kPacker) {
      try {
        out.microbatch = MicrobatchFromJson(j, where);
      } catch (const InputError& e) {
        return fault(std::string("the candidate's microbatch record is not a packed batch: ") + e.what());
      }
      out.kind = AnswerLine::Kind::kMicrobatch;
      return out;
    }
    if (type == answer_kind && role == AnswerRole::kReducer) {
      out.totals = TotalsFromJson(j, where);
      out.kind = AnswerLine::Kind::kTotals;
      return out;
    }
    if (type == answer_kind && role == AnswerRole::kConsumer) {
      MaskFromJson(j, where, out);
      out.kind = AnswerLine::Kind::kMask;
      return out;
    }
    if (type == "work" && role == AnswerRole::kConsumer) {
      out.work = WorkFromJson(j, where);
      out.kind = AnswerLine::Kind::kWork;
      return out;
    }
    if (type == answer_kind && role == AnswerRole::kValueConsumer) {
      ValuesFromJson(j, where, out);
      out.kind = AnswerLine::Kind::kValues;
      return out;
    }
    if (type == "gradient" && role == AnswerRole::kValueConsumer) {
      out.gradient = GradientFromJson(j, where);
      out.kind = AnswerLine::Kind::kGradient;
      return out;
    }
  } catch (const InputError& e) {
    return fault(std::string("the candidate's ") + type + " record cannot be read: " + e.what());
  }
  if (type == "end") {
    out.kind = AnswerLine::Kind::kEnd;
    return out;
  }
  if (type == "error") {
    auto message = j.find("message");
    out.kind = AnswerLine::Kind::kRefusal;
    out.message = message == j.end() ? std::string("(no message)")
                                     : message->is_string() ? message->get<std::string>() : message->dump();
    return out;
  }
  return fault(where + " has an unknown record type '" + type + "' (an answer is " + answer_kind +
               " records, then end; or one error record): " + Quote(text));
}

}  // namespace packoracle
