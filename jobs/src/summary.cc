#include "packoracle/jobs/summary.h"

#include <fstream>
#include <map>

#include "packoracle/oracle.h"

namespace packoracle::jobs {
namespace {

using Json = nlohmann::json;
using OJson = nlohmann::ordered_json;

[[noreturn]] void Bad(const std::string& where, const std::string& what) { throw InputError(where + ": " + what); }

OJson Optional(const std::optional<double>& v) { return v ? OJson(*v) : OJson(nullptr); }

const Json& Field(const Json& object, const std::string& key, const std::string& where) {
  if (!object.is_object()) Bad(where, "must be a JSON object, got " + std::string(object.type_name()));
  auto it = object.find(key);
  if (it == object.end()) Bad(where, "field '" + key + "' is missing");
  return *it;
}

std::int64_t Int(const Json& object, const std::string& key, const std::string& where) {
  const Json& v = Field(object, key, where);
  if (!v.is_number_integer()) Bad(where, "field '" + key + "' must be an integer, got " + v.dump());
  return v.get<std::int64_t>();
}

std::optional<double> OptionalNumber(const Json& object, const std::string& key, const std::string& where) {
  const Json& v = Field(object, key, where);
  if (v.is_null()) return std::nullopt;
  if (!v.is_number()) Bad(where, "field '" + key + "' must be a number or null, got " + v.dump());
  return v.get<double>();
}

std::string String(const Json& object, const std::string& key, const std::string& where) {
  const Json& v = Field(object, key, where);
  if (!v.is_string()) Bad(where, "field '" + key + "' must be a string, got " + v.dump());
  return v.get<std::string>();
}

}  // namespace

std::optional<double> SummaryEntry::valid_targets() const {
  double sum = 0;
  for (const auto& m : microbatches) {
    if (!m.valid_targets) return std::nullopt;
    sum += *m.valid_targets;
  }
  return sum;
}

std::optional<double> SummaryEntry::counted() const {
  double sum = 0;
  for (const auto& m : microbatches) {
    if (!m.counted) return std::nullopt;
    sum += *m.counted;
  }
  return sum;
}

std::optional<double> SummaryEntry::loss_sum() const {
  // A sum over some of the micro-batches would be a wrong total, not a partial one: every one must report it.
  if (microbatches.empty()) return std::nullopt;
  double sum = 0;
  for (const auto& m : microbatches) {
    if (!m.loss_sum) return std::nullopt;
    sum += *m.loss_sum;
  }
  return sum;
}

SummaryCollector::SummaryCollector(std::vector<std::string> files, const HeaderRecord& header, const Policy& policy)
    : policy_(policy) {
  summary_.files = std::move(files);
  summary_.dp_world_size = header.dp_world_size;
  summary_.grad_accum_steps = header.grad_accum_steps;
  summary_.policy = policy.preset;
  for (const auto& [key, value] : PolicyKeyValues(policy))
    if (key == "denominator") summary_.denominator = ToString(value);
  summary_.count_basis = DenominatorCountName(policy);
}

void SummaryCollector::AddStep(std::int64_t step, const std::vector<std::pair<MicrobatchRecord, std::string>>& mbs,
                               const CaseResult& result) {
  // The oracle's rows follow the micro-batches' rows in order; when their counts differ (the candidate's rows
  // could not all be laid out) no valid-target count is trusted.
  std::size_t rows = 0;
  for (const auto& [m, file] : mbs) rows += m.microbatch.rows.size();
  const bool aligned = result.oracle && result.oracle->rows.size() == rows;
  std::map<std::int64_t, SummaryEntry> by_rank;
  std::size_t flat = 0;
  for (const auto& [m, file] : mbs) {
    SummaryMicrobatch s;
    s.micro_step = m.microbatch.micro_step;
    s.file = file;
    s.line = m.line;
    if (aligned) {
      double targets = 0, counted = 0;
      for (std::size_t r = 0; r < m.microbatch.rows.size(); ++r) {
        targets += WeightSum(result.oracle->rows[flat + r]);
        counted += RowDenominatorCount(result.oracle->rows[flat + r], policy_);
      }
      s.valid_targets = targets;
      s.counted = counted;
    }
    flat += m.microbatch.rows.size();
    if (m.microbatch.producer) {
      s.loss_sum = m.microbatch.producer->loss_sum;
      s.denominator = m.microbatch.producer->denominator;
      if (s.denominator) s.denominator_scope = m.microbatch.producer->denominator_scope;  // given with it only
    }
    SummaryEntry& entry = by_rank[m.microbatch.rank];
    entry.step = step;
    entry.rank = m.microbatch.rank;
    entry.microbatches.push_back(std::move(s));
  }
  for (auto& [rank, entry] : by_rank) summary_.entries.push_back(std::move(entry));
}

void SummaryCollector::Write(const std::string& path) const {
  std::ofstream out(path);
  if (!out) throw InputError(path + ": cannot write the summary (--summary)");
  out << SummaryToJson(summary_).dump(1) << "\n";
  if (!out) throw InputError(path + ": writing the summary failed (--summary)");
}

OJson SummaryToJson(const Summary& s) {
  OJson j;
  j["schema"] = "packoracle-summary";
  j["version"] = 1;
  j["files"] = s.files;
  j["dp_world_size"] = s.dp_world_size;
  j["grad_accum_steps"] = s.grad_accum_steps;
  j["policy"] = s.policy;
  j["denominator"] = s.denominator;
  j["count_basis"] = s.count_basis;
  j["entries"] = OJson::array();
  for (const auto& e : s.entries) {
    OJson entry;
    entry["step"] = e.step;
    entry["rank"] = e.rank;
    entry["valid_targets"] = Optional(e.valid_targets());
    entry["counted"] = Optional(e.counted());
    entry["loss_sum"] = Optional(e.loss_sum());
    entry["microbatches"] = OJson::array();
    for (const auto& m : e.microbatches) {
      entry["microbatches"].push_back({{"micro_step", m.micro_step}, {"file", m.file}, {"line", m.line},
                                       {"valid_targets", Optional(m.valid_targets)}, {"counted", Optional(m.counted)},
                                       {"loss_sum", Optional(m.loss_sum)},
                                       {"denominator", Optional(m.denominator)},
                                       {"denominator_scope", m.denominator_scope ? OJson(*m.denominator_scope) : OJson(nullptr)}});
    }
    j["entries"].push_back(entry);
  }
  return j;
}

Summary SummaryFromJson(const Json& j, const std::string& path) {
  Summary s;
  s.path = path;
  if (!j.is_object()) Bad(path, "a summary is one JSON object (written by packoracle verify --summary)");
  if (j.value("schema", Json()) != Json("packoracle-summary")) {
    Bad(path, "field 'schema' must be \"packoracle-summary\" (is this a file written by packoracle verify --summary?)");
  }
  if (Int(j, "version", path) != 1) Bad(path, "field 'version' must be 1 (this kit reads version 1)");
  const Json& files = Field(j, "files", path);
  if (!files.is_array()) Bad(path, "field 'files' must be an array of strings");
  for (std::size_t k = 0; k < files.size(); ++k) {
    if (!files[k].is_string()) Bad(path, "field 'files[" + std::to_string(k) + "]' must be a string");
    s.files.push_back(files[k].get<std::string>());
  }
  s.dp_world_size = Int(j, "dp_world_size", path);
  s.grad_accum_steps = Int(j, "grad_accum_steps", path);
  if (s.dp_world_size < 1) Bad(path, "field 'dp_world_size' must be positive");
  s.policy = String(j, "policy", path);
  s.denominator = String(j, "denominator", path);
  s.count_basis = String(j, "count_basis", path);
  if (s.count_basis != "targets" && s.count_basis != "positions" && s.count_basis != "unshifted_labels") {
    Bad(path, "field 'count_basis' must be \"targets\", \"positions\" or \"unshifted_labels\", got '" + s.count_basis + "'");
  }
  const Json& entries = Field(j, "entries", path);
  if (!entries.is_array()) Bad(path, "field 'entries' must be an array");
  for (std::size_t k = 0; k < entries.size(); ++k) {
    const std::string at = path + ": entries[" + std::to_string(k) + "]";
    SummaryEntry e;
    e.step = Int(entries[k], "step", at);
    e.rank = Int(entries[k], "rank", at);
    const Json& mbs = Field(entries[k], "microbatches", at);
    if (!mbs.is_array()) Bad(at, "field 'microbatches' must be an array");
    for (std::size_t m = 0; m < mbs.size(); ++m) {
      const std::string mat = at + ": microbatches[" + std::to_string(m) + "]";
      SummaryMicrobatch mb;
      mb.micro_step = Int(mbs[m], "micro_step", mat);
      mb.file = String(mbs[m], "file", mat);
      mb.line = Int(mbs[m], "line", mat);
      mb.valid_targets = OptionalNumber(mbs[m], "valid_targets", mat);
      mb.counted = OptionalNumber(mbs[m], "counted", mat);
      mb.loss_sum = OptionalNumber(mbs[m], "loss_sum", mat);
      mb.denominator = OptionalNumber(mbs[m], "denominator", mat);
      const Json& scope = Field(mbs[m], "denominator_scope", mat);
      if (!scope.is_null() && !scope.is_string()) Bad(mat, "field 'denominator_scope' must be a string or null");
      if (scope.is_string()) mb.denominator_scope = scope.get<std::string>();
      e.microbatches.push_back(std::move(mb));
    }
    s.entries.push_back(std::move(e));
  }
  return s;
}

Summary ReadSummary(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open the summary");
  Json j;
  try {
    j = Json::parse(in);
  } catch (const Json::exception& e) {  // out_of_range too: a number beyond double
    throw InputError(path + ": not JSON (" + e.what() + ")");
  }
  return SummaryFromJson(j, path);
}

}  // namespace packoracle::jobs
