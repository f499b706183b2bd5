#include "packoracle/interchange/request_json.h"

#include <cmath>
#include <limits>
#include <type_traits>

#include "packoracle/interchange/policy_json.h"
#include "packoracle/oracle/error.h"
#include "packoracle/properties/row_members.h"

namespace packoracle {
namespace {

using Json = nlohmann::json;

[[noreturn]] void Bad(const std::string& where, const std::string& field, const std::string& what) {
  throw InputError(where + ": field '" + field + "' " + what);
}

const Json& Required(const Json& object, const std::string& field, const std::string& where) {
  if (!object.is_object()) Bad(where, field, "cannot be read: the record is not a JSON object");
  auto it = object.find(field);
  if (it == object.end()) Bad(where, field, "is missing");
  return *it;
}

std::int64_t Int(const Json& v, const std::string& field, const std::string& where) {
  if (!v.is_number_integer()) Bad(where, field, std::string("must be an integer, got ") + v.type_name());
  return v.get<std::int64_t>();
}

double Number(const Json& v, const std::string& field, const std::string& where) {
  if (!v.is_number()) Bad(where, field, std::string("must be a number, got ") + v.type_name());
  return v.get<double>();
}

// A producer total: a number, or one of the quoted non-finite tokens of QuoteNonFiniteTokens.
double ProducerNumber(const Json& v, const std::string& field, const std::string& where) {
  if (v.is_string()) {
    const auto text = v.get<std::string>();
    if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (text == "Infinity") return std::numeric_limits<double>::infinity();
    if (text == "-Infinity") return -std::numeric_limits<double>::infinity();
  }
  return Number(v, field, where);
}

// A producer total as written: a finite number as itself, a non-finite one as the quoted token ProducerNumber
// reads back (nlohmann would write null, which reads as "not a number", or for `loss` as no loss at all; an
// exec_answer_fuzzer finding).
nlohmann::ordered_json ProducerNumberJson(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return v;
}

// A producer total the producer may leave out: absent or null is "not given".
std::optional<double> OptionalProducerNumber(const Json& producer, const std::string& field, const std::string& where) {
  auto it = producer.find(field);
  if (it == producer.end() || it->is_null()) return std::nullopt;
  return ProducerNumber(*it, field, where);
}

// A micro-batch's `producer` object (DESIGN §5): its fields as kProducerTotalsFields states them, each given one
// checked for what it says (producer_totals.h), the whole held to ProducerTotalsProblem's rule.
ProducerTotals ProducerFromJson(const Json& p, const std::string& where) {
  if (!p.is_object()) Bad(where, "producer", std::string("must be an object, got ") + p.type_name());
  const std::string at = where + ": producer";
  ProducerTotals t;
  for (const auto& field : kProducerTotalsFields)  // the numbers first, then the scope (which is named first)
    if (field.number) t.*field.number = OptionalProducerNumber(p, std::string(field.name), at);
  bool scope_given = false;
  const std::string scope(kDenominatorScopeField);
  if (auto s = p.find(scope); s != p.end() && !s->is_null()) {
    if (!s->is_string()) Bad(at, scope, "must be a string");
    t.denominator_scope = s->get<std::string>();
    scope_given = true;
  }
  if (const auto problem = ProducerTotalsProblem(t, scope_given)) {
    if (problem->field == "producer") Bad(where, "producer", problem->sentence);
    Bad(at, problem->field, problem->sentence);
  }
  return t;
}

// The fields the producer gave, and only those (any non-empty subset: DESIGN §5), in kProducerTotalsFields' order.
nlohmann::ordered_json ProducerToJson(const ProducerTotals& t) {
  nlohmann::ordered_json p = nlohmann::ordered_json::object();
  for (const auto& field : kProducerTotalsFields) {
    const std::string name(field.name);
    if (field.number) {
      if (t.*field.number) p[name] = ProducerNumberJson(*(t.*field.number));
    } else if (!t.denominator_scope.empty()) {
      p[name] = t.denominator_scope;
    }
  }
  return p;
}

template <class T>
std::vector<T> Ints(const Json& v, const std::string& field, const std::string& where) {
  if (!v.is_array()) Bad(where, field, std::string("must be an array of integers, got ") + v.type_name());
  std::vector<T> out;
  for (std::size_t k = 0; k < v.size(); ++k) out.push_back(static_cast<T>(Int(v[k], field + "[" + std::to_string(k) + "]", where)));
  return out;
}

std::vector<double> Numbers(const Json& v, const std::string& field, const std::string& where) {
  if (!v.is_array()) Bad(where, field, std::string("must be an array of numbers, got ") + v.type_name());
  std::vector<double> out;
  for (std::size_t k = 0; k < v.size(); ++k) out.push_back(Number(v[k], field + "[" + std::to_string(k) + "]", where));
  return out;
}

// A row field's values as its member holds them (row_members.h holds the member to the table's shape and
// value): real numbers for a real field, integers for the others.
template <class Vector>
Vector Values(const Json& v, const std::string& field, const std::string& where) {
  if constexpr (std::is_floating_point_v<typename Vector::value_type>) return Numbers(v, field, where);
  else return Ints<typename Vector::value_type>(v, field, where);
}

// Every field of a row but its spans, in kRowFields' order: a required one must be there, an optional one absent
// or null is not given, and a per-token one has as many entries as input_ids (the first).
void RowFieldsFromJson(const Json& json, const std::string& at, CandidateRow& row) {
  std::size_t n = 0;
  ForEachRowField([&](auto i) {
    constexpr std::size_t I = decltype(i)::value;
    constexpr RowField field = kRowFields[I];
    if constexpr (I != kRowSpansField) {
      const std::string name(field.name);
      auto& member = RowMember<I>(row);
      std::size_t size = 0;
      if constexpr (field.required) {
        member = Values<std::remove_cvref_t<decltype(member)>>(Required(json, name, at), name, at);
        size = member.size();
      } else {
        auto it = json.find(name);
        if (it == json.end() || it->is_null()) return;
        member = Values<typename std::remove_cvref_t<decltype(member)>::value_type>(*it, name, at);
        size = member->size();
      }
      if (I == kRowLengthField) n = size;
      else if (field.shape == RowFieldShape::kPerToken && size != n)
        Bad(at, name, "has " + std::to_string(size) + " entries, input_ids has " + std::to_string(n));
    }
  });
}

// The span objects of a row (its kSpans field).
void SpansFromJson(const Json& spans, const std::string& at, std::vector<DocSpan>& out) {
  const std::string name(kRowFields[kRowSpansField].name);
  if (!spans.is_array()) Bad(at, name, "must be an array");
  for (std::size_t s = 0; s < spans.size(); ++s) {
    const std::string sat = at + ": " + name + "[" + std::to_string(s) + "]";
    DocSpan span;
    for (const auto& field : kSpanFields) {  // kSpanFields' order: the uid first
      const std::string key(field.name);
      const Json& v = Required(spans[s], key, sat);
      if (field.number) {
        span.*field.number = Int(v, key, sat);
      } else {
        if (!v.is_string()) Bad(sat, key, "must be a string");
        span.doc_uid = v.get<std::string>();
      }
    }
    out.push_back(std::move(span));
  }
}

// A row as written: its fields in kRowFields' order, an optional one only when given.
nlohmann::ordered_json RowToJson(const CandidateRow& row) {
  nlohmann::ordered_json r;
  ForEachGivenRowField(
      row, [&](std::string_view name, const auto& values) { r[std::string(name)] = values; },
      [&](std::string_view name, const std::vector<DocSpan>& spans) {
        auto& out = r[std::string(name)] = nlohmann::ordered_json::array();
        for (const auto& s : spans) {
          nlohmann::ordered_json& span = out.emplace_back(nlohmann::ordered_json::object());
          for (const auto& field : kSpanFields)
            span[std::string(field.name)] = field.number ? nlohmann::ordered_json(s.*field.number) : nlohmann::ordered_json(s.doc_uid);
        }
      });
  return r;
}

}  // namespace

nlohmann::ordered_json RequestToJson(const PackRequest& r) {
  nlohmann::ordered_json j;
  j["record"] = "request";
  j["id"] = r.id;
  j["row_length"] = r.row_length;
  j["micro_batch_rows"] = r.micro_batch_rows;
  j["dp_world_size"] = r.dp_world_size;
  j["policy"] = PolicyToJson(r.policy);
  j["documents"] = nlohmann::ordered_json::array();
  for (const auto& d : r.documents) {
    nlohmann::ordered_json doc;
    doc["doc_uid"] = d.uid;
    doc["tokens"] = d.tokens;
    std::vector<int> supervised = d.supervised;
    if (supervised.empty()) supervised.assign(d.tokens.size(), 1);
    doc["supervised"] = supervised;
    j["documents"].push_back(doc);
  }
  j["target_losses"] = nlohmann::ordered_json::object();
  for (const auto& d : r.documents) {
    auto it = r.target_losses.find(d.uid);
    if (it != r.target_losses.end()) j["target_losses"][d.uid] = it->second;
  }
  return j;
}

nlohmann::ordered_json ReduceRequestToJson(const ReduceRequest& r, std::int64_t id) {
  nlohmann::ordered_json j;
  j["record"] = "reduce_request";
  j["id"] = id;
  j["policy"] = PolicyToJson(r.policy);
  j["dp_world_size"] = r.dp_world_size;
  j["grad_accum_steps"] = r.grad_accum_steps;
  j["optimizer_steps"] = r.optimizer_steps;  // a schedule (DESIGN §4 `loss`): the step feeds this many optimizer steps
  j["context_parallel_size"] = r.context_parallel_size;
  j["context_parallel_scheme"] = Name(r.context_parallel_scheme);
  auto& shards = j["cp_shards"] = nlohmann::ordered_json::array();
  for (const auto& mb : r.cp_shards) {
    auto& rows = shards.emplace_back(nlohmann::ordered_json::array());
    for (const auto& row : mb) {
      auto& ranks = rows.emplace_back(nlohmann::ordered_json::array());
      for (const auto& chunks : row) {
        auto& out = ranks.emplace_back(nlohmann::ordered_json::array());
        for (const auto& c : chunks) out.push_back({c.start, c.end});
      }
    }
  }
  auto& mbs = j["microbatches"] = nlohmann::ordered_json::array();
  for (const auto& mb : r.microbatches) {
    CandidateMicrobatch bare = mb;
    bare.producer.reset();  // the reducer computes the totals
    mbs.push_back(MicrobatchToJson(bare));
  }
  j["slot_losses"] = r.slot_losses;
  // A selection (DESIGN §4 `loss`, oracle/selection.h), added after version 1: written only where the run
  // declares one, so that every other request is what version 1 wrote and a reducer that never reads them runs
  // unchanged.
  if (r.selection.active()) {
    j["selection"] = {{"top_fraction", r.selection.top_fraction}, {"scope", "optimizer_step"}};
    j["slot_scores"] = r.slot_scores;
  }
  return j;
}

nlohmann::ordered_json StepLayoutToJson(const StepLayout& layout) {
  nlohmann::ordered_json j;
  j["microbatch"] = layout.microbatch;
  j["dp_rank"] = layout.dp_rank;
  j["dp_world_size"] = layout.dp_world_size;
  j["micro_step"] = layout.micro_step;
  j["micro_steps"] = layout.micro_steps;
  j["context_parallel_size"] = layout.context_parallel_size;
  j["context_parallel_scheme"] = Name(layout.context_parallel_scheme);
  auto& rows = j["cp_shards"] = nlohmann::ordered_json::array();
  for (const auto& row : layout.cp_shards) {
    auto& ranks = rows.emplace_back(nlohmann::ordered_json::array());
    for (const auto& chunks : row) {
      auto& out = ranks.emplace_back(nlohmann::ordered_json::array());
      for (const auto& c : chunks) out.push_back({c.start, c.end});
    }
  }
  return j;
}

nlohmann::ordered_json ConsumeRequestToJson(const CandidateMicrobatch& microbatch, const Policy& policy,
                                            std::int64_t id, const StepContext& step) {
  nlohmann::ordered_json j;
  j["record"] = "consume_request";
  j["id"] = id;
  j["policy"] = PolicyToJson(policy);
  j["microbatch"] = MicrobatchToJson(microbatch);
  // Added after version 1 (DESIGN §6), each written only when the kit has it, so that a consumer that never
  // reads them runs unchanged: the micro-batch's place in the step, and the packer's own record of it.
  if (step.layout) j["layout"] = StepLayoutToJson(*step.layout);
  if (step.emitted) j["emitted"] = *step.emitted;
  return j;
}

nlohmann::ordered_json ValueRequestToJson(const CandidateMicrobatch& microbatch, const Policy& policy,
                                          const ValueRequest& request, std::int64_t id,
                                          const nlohmann::ordered_json* emitted) {
  nlohmann::ordered_json j;
  j["record"] = "value_request";
  j["id"] = id;
  j["policy"] = PolicyToJson(policy);
  j["microbatch"] = MicrobatchToJson(microbatch);
  j["layout"] = StepLayoutToJson(request.layout);
  j["gradient"] = request.gradient;
  if (request.gradient) j["slot_weights"] = request.slot_weights;  // the probe loss's u_i, only when asked
  if (emitted) j["emitted"] = *emitted;
  return j;
}

ProducerTotals ProducerTotalsFromJson(const Json& json, const std::string& where) {
  return ProducerFromJson(json, where);
}

PackRequest RequestFromJson(const Json& j, const std::string& where) {
  PackRequest r;
  r.id = Int(Required(j, "id", where), "id", where);
  r.row_length = Int(Required(j, "row_length", where), "row_length", where);
  r.micro_batch_rows = Int(Required(j, "micro_batch_rows", where), "micro_batch_rows", where);
  r.dp_world_size = Int(Required(j, "dp_world_size", where), "dp_world_size", where);
  r.policy = PolicyFromJson(Required(j, "policy", where), where + ": policy");
  const Json& docs = Required(j, "documents", where);
  if (!docs.is_array()) Bad(where, "documents", "must be an array");
  for (std::size_t k = 0; k < docs.size(); ++k) {
    r.documents.push_back(DocumentFromJson(docs[k], where + ": documents[" + std::to_string(k) + "]"));
  }
  if (auto losses = j.find("target_losses"); losses != j.end() && !losses->is_null()) {
    if (!losses->is_object()) Bad(where, "target_losses", "must be an object of arrays");
    for (const auto& [uid, values] : losses->items()) {
      r.target_losses[uid] = Numbers(values, "target_losses." + uid, where);
    }
  }
  return r;
}

Document DocumentFromJson(const Json& j, const std::string& at) {
  Document d;
  const Json& uid = Required(j, "doc_uid", at);
  if (!uid.is_string()) Bad(at, "doc_uid", "must be a string");
  d.uid = uid.get<std::string>();
  d.tokens = Ints<Token>(Required(j, "tokens", at), "tokens", at);
  if (auto s = j.find("supervised"); s != j.end() && !s->is_null()) {
    d.supervised = Ints<int>(*s, "supervised", at);
    if (d.supervised.size() != d.tokens.size()) {
      Bad(at, "supervised", "has " + std::to_string(d.supervised.size()) + " entries, tokens has " +
                                 std::to_string(d.tokens.size()));
    }
  }
  return d;
}

nlohmann::ordered_json MicrobatchToJson(const CandidateMicrobatch& mb) {
  nlohmann::ordered_json j;
  j["record"] = "microbatch";
  j["step"] = mb.step;
  j["micro_step"] = mb.micro_step;
  j["rank"] = mb.rank;
  j["rows"] = nlohmann::ordered_json::array();
  for (const auto& row : mb.rows) j["rows"].push_back(RowToJson(row));
  if (mb.producer) j["producer"] = ProducerToJson(*mb.producer);
  return j;
}

CandidateMicrobatch MicrobatchFromJson(const Json& j, const std::string& where, bool* spans_absent) {
  CandidateMicrobatch mb;
  mb.step = j.contains("step") ? Int(j.at("step"), "step", where) : 0;
  mb.micro_step = Int(Required(j, "micro_step", where), "micro_step", where);
  mb.rank = Int(Required(j, "rank", where), "rank", where);
  const Json& rows = Required(j, "rows", where);
  if (!rows.is_array()) Bad(where, "rows", "must be an array");
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const std::string at = where + ": rows[" + std::to_string(k) + "]";
    CandidateRow row;
    RowFieldsFromJson(rows[k], at, row);
    const std::string spans_name(kRowFields[kRowSpansField].name);
    const auto given = rows[k].find(spans_name);
    if (spans_absent && k == 0) *spans_absent = given == rows[k].end();
    if (spans_absent && *spans_absent != (given == rows[k].end())) {
      Bad(at, spans_name, *spans_absent ? "is given, but rows[0] has none (every row of a micro-batch or none)"
                                        : "is missing, but rows[0] has them (every row of a micro-batch or none)");
    }
    if (!spans_absent || !*spans_absent) SpansFromJson(Required(rows[k], spans_name, at), at, RowMember<kRowSpansField>(row));
    mb.rows.push_back(std::move(row));
  }
  if (auto p = j.find("producer"); p != j.end() && !p->is_null()) mb.producer = ProducerFromJson(*p, where);
  return mb;
}

std::optional<std::string> QuoteNonFiniteTokens(std::string_view line) {
  static constexpr std::string_view kTokens[] = {"-Infinity", "Infinity", "NaN"};
  std::string out;
  std::string open;  // the containers around the current byte, '{' or '[' (outside strings)
  bool in_string = false, changed = false;
  // A token is quoted only where a value goes: at the root, after ':', after '[', or after ',' in an array.
  // Python writes non-finite floats only as values (a NaN key becomes "NaN"); quoting a bare key would make a
  // line that is not JSON read as if it were (exec_answer_fuzzer finding: {"record":"end",-Infinity:1,"id":7}).
  auto value_position = [&] {
    const auto last = out.find_last_not_of(" \t\r\n");
    if (last == std::string::npos) return true;
    const char p = out[last];
    return p == ':' || p == '[' || (p == ',' && !open.empty() && open.back() == '[');
  };
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < line.size()) out += line[++i];
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
      continue;
    }
    if (c == '{' || c == '[') open += c;
    if ((c == '}' || c == ']') && !open.empty()) open.pop_back();
    bool quoted = false;
    for (auto token : kTokens) {
      if (line.substr(i, token.size()) == token && value_position()) {
        out += '"';
        out += token;
        out += '"';
        i += token.size() - 1;
        quoted = changed = true;
        break;
      }
    }
    if (!quoted) out += c;
  }
  if (!changed) return std::nullopt;
  return out;
}

}  // namespace packoracle
