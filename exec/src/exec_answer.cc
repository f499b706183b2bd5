// ParseAnswerLine: one line of an exec candidate's answer (DESIGN §6), whichever role it plays. The envelope
// (JSON, an object, its record kind, its id) is the same for every role; the records that carry the answer are
// the role's: a packer's microbatch records, a loss reducer's totals, an attention consumer's masks.
#include <cstdint>
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
    if (!runs->is_object()) throw InputError(where + ": field 'runs' must be an object");
    const std::string at = where + ": runs";
    out.mask.row_offsets = Integers(*runs, "row_offsets", at);
    out.mask.run_begin = Integers(*runs, "run_begin", at);
    out.mask.run_end = Integers(*runs, "run_end", at);
    out.mask.n = static_cast<std::int64_t>(out.mask.row_offsets.size()) - 1;
    const auto source = runs->find("source");
    const std::string name = source != runs->end() && source->is_string() ? source->get<std::string>() : "runs";
    if (name != "runs" && name != "function" && name != "dense") {
      throw InputError(at + ": field 'source' must be \"runs\", \"function\" or \"dense\" (how the consumer answered)");
    }
    out.mask.source = name == "dense" ? MaskSource::kDense : name == "function" ? MaskSource::kFunction : MaskSource::kRuns;
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
  } catch (const InputError& e) {
    return fault(std::string("the candidate's ") + answer_kind + " record cannot be read: " + e.what());
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
