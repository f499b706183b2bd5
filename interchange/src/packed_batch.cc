#include "packoracle/interchange/packed_batch.h"

#include "packoracle/interchange/policy_json.h"
#include "packoracle/interchange/request_json.h"
#include "packoracle/oracle/error.h"

namespace packoracle {
namespace {

using Json = nlohmann::json;

[[noreturn]] void Bad(const std::string& where, const std::string& what) { throw InputError(where + ": " + what); }

std::optional<Token> OptionalId(const Json& ids, const char* key, const std::string& where) {
  auto it = ids.find(key);
  if (it == ids.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer()) Bad(where, std::string("field 'special_ids.") + key + "' must be an integer or null");
  return it->get<Token>();
}

std::int64_t IntOr(const Json& j, const char* key, std::int64_t fallback, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number_integer()) Bad(where, std::string("field '") + key + "' must be an integer");
  return it->get<std::int64_t>();
}

std::optional<double> NumberOr(const Json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) Bad(where, std::string("field '") + key + "' must be a number");
  return it->get<double>();
}

}  // namespace

PackedBatchRecord ParsePackedBatchRecord(const Json& j, const std::string& where, bool first) {
  if (!j.is_object()) Bad(where, std::string("a record must be a JSON object, got ") + j.type_name());
  auto kind = j.find("record");
  if (kind == j.end() || !kind->is_string()) Bad(where, "field 'record' is missing (every line names its record type)");
  const std::string type = kind->get<std::string>();
  const std::string at = where + ": " + type + " record";
  if (first && type != "header") Bad(at, "the first record must be the header");
  if (!first && type == "header") Bad(at, "a second header (the header comes once, first)");

  if (type == "header") {
    // Compared as JSON: j.value("schema", "") would throw nlohmann's type_error for a non-string schema.
    if (j.value("schema", Json()) != Json("packed-batch")) Bad(at, "field 'schema' must be \"packed-batch\"");
    if (IntOr(j, "version", -1, at) != 1) Bad(at, "field 'version' must be 1 (this kit reads version 1)");
    HeaderRecord h;
    h.producer = j.value("producer", Json::object());
    if (auto ids = j.find("special_ids"); ids != j.end() && !ids->is_null()) {
      if (!ids->is_object()) Bad(at, "field 'special_ids' must be an object");
      h.pad_id = OptionalId(*ids, "pad", at);
      h.bos_id = OptionalId(*ids, "bos", at);
      h.eos_id = OptionalId(*ids, "eos", at);
      h.eod_id = OptionalId(*ids, "eod", at);
    }
    h.dp_world_size = IntOr(j, "dp_world_size", 1, at);
    h.grad_accum_steps = IntOr(j, "grad_accum_steps", 1, at);
    if (h.dp_world_size < 1 || h.grad_accum_steps < 1) Bad(at, "dp_world_size and grad_accum_steps must be positive");
    auto policy = j.find("policy");
    if (policy == j.end()) Bad(at, "field 'policy' is missing (a preset name and/or the keys of DESIGN §3)");
    h.policy_json = *policy;
    if (policy->is_string()) {
      h.policy = PolicyFromJson(Json{{"preset", *policy}}, at + ": policy");
    } else {
      h.policy = PolicyFromJson(*policy, at + ": policy");
    }
    return h;
  }
  if (type == "document") return DocumentRecord{DocumentFromJson(j, at)};
  if (type == "microbatch") {
    MicrobatchRecord m;
    m.microbatch = MicrobatchFromJson(j, at, &m.spans_absent);
    if (auto flattened = j.find("flattened"); flattened != j.end() && !flattened->is_null()) {
      if (!flattened->is_boolean()) Bad(at, "field 'flattened' must be true or false, got " + flattened->dump());
      m.flattened = flattened->get<bool>();
    }
    if (m.flattened && m.microbatch.rows.size() != 1) {
      Bad(at, "field 'flattened' is true but the micro-batch has " + std::to_string(m.microbatch.rows.size()) +
                  " rows (a flattened micro-batch has one)");
    }
    return m;
  }
  if (type == "step") {
    StepRecord s;
    s.step = IntOr(j, "step", 0, at);
    s.rank = IntOr(j, "rank", 0, at);
    s.num_items_in_batch = NumberOr(j, "num_items_in_batch", at);
    s.loss = NumberOr(j, "loss", at);
    return s;
  }
  Bad(at, "unknown record type '" + type + "' (header, document, microbatch or step)");
}

PackedBatchReader::PackedBatchReader(std::string path) : path_(std::move(path)), file_(path_) {
  if (!file_) throw InputError(path_ + ": cannot open the file");
}

PackedBatchReader::PackedBatchReader(std::istream& in, std::string name) : path_(std::move(name)), in_(&in) {}

std::optional<PackedBatchRecord> PackedBatchReader::Next() {
  std::string text;
  while (std::getline(*in_, text)) {
    ++line_;
    bytes_ += static_cast<std::int64_t>(text.size()) + 1;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank line
    const std::string where = path_ + ":" + std::to_string(line_);
    Json j;
    try {
      j = Json::parse(text);
    } catch (const Json::exception& e) {  // parse_error, and out_of_range for a number beyond double (1e999)
      throw InputError(where + ": not a JSON object (" + e.what() + ")");
    }
    PackedBatchRecord record = ParsePackedBatchRecord(j, where, !seen_header_);
    seen_header_ = true;
    if (auto* m = std::get_if<MicrobatchRecord>(&record)) m->line = line_;
    if (auto* d = std::get_if<DocumentRecord>(&record)) d->line = line_;
    return record;
  }
  if (!seen_header_) throw InputError(path_ + ": empty (a packed-batch file starts with its header record)");
  return std::nullopt;
}

void PackedBatchWriter::Header(const HeaderRecord& h) {
  nlohmann::ordered_json j;
  j["record"] = "header";
  j["schema"] = "packed-batch";
  j["version"] = 1;
  j["producer"] = h.producer.is_null() ? nlohmann::ordered_json::object() : nlohmann::ordered_json(h.producer);
  auto id = [](const std::optional<Token>& v) { return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr); };
  j["special_ids"] = {{"pad", id(h.pad_id)}, {"bos", id(h.bos_id)}, {"eos", id(h.eos_id)}, {"eod", id(h.eod_id)}};
  j["dp_world_size"] = h.dp_world_size;
  j["grad_accum_steps"] = h.grad_accum_steps;
  j["policy"] = PolicyToJson(h.policy);
  out_ << j.dump() << "\n";
}

void PackedBatchWriter::Document(const packoracle::Document& d) {
  nlohmann::ordered_json j;
  j["record"] = "document";
  j["doc_uid"] = d.uid;
  j["tokens"] = d.tokens;
  std::vector<int> supervised = d.supervised;
  if (supervised.empty()) supervised.assign(d.tokens.size(), 1);
  j["supervised"] = supervised;
  out_ << j.dump() << "\n";
}

void PackedBatchWriter::Microbatch(const CandidateMicrobatch& m) { out_ << MicrobatchToJson(m).dump() << "\n"; }

std::span<const RowView> RowViews(const MicrobatchRecord& record, std::vector<RowView>& scratch) {
  if (!record.views.empty()) return record.views;
  scratch.clear();
  for (const CandidateRow& row : record.microbatch.rows) scratch.push_back(RowView::Of(row));
  return scratch;
}

void Materialize(MicrobatchRecord& record) {
  if (record.views.empty()) return;
  std::vector<CandidateRow> rows;  // copied before the storage the views may point into is let go
  rows.reserve(record.views.size());
  for (const RowView& view : record.views) rows.push_back(view.Copy());
  record.microbatch.rows = std::move(rows);
  record.views.clear();
}

}  // namespace packoracle
