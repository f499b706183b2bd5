// `packoracle verify --summary FILE` (VerifyOptions::summary): a per-rank summary of an audit, for
// `packoracle merge`.
//
// A data-parallel run is audited rank by rank (one verify per rank's dump, in parallel: a CI matrix, a Slurm
// array); each verify writes what it saw per step and rank into a summary, and `packoracle merge` then checks
// what no single rank can: that every global-scope denominator of a step equals the step's valid targets
// summed over all ranks.
//
// The summary is one JSON object:
//   {"schema":"packoracle-summary","version":1,"files":[..],"dp_world_size":2,"grad_accum_steps":1,
//    "policy":"reference","denominator":"global_targets","count_basis":"targets",
//    "entries":[{"step":0,"rank":0,"valid_targets":7,"counted":7,"loss_sum":9.0,
//                "microbatches":[{"micro_step":0,"file":"rank0.jsonl","line":4,"valid_targets":2,"counted":2,
//                                 "loss_sum":4.0,"denominator":7,"denominator_scope":"global"}, ..]}, ..]}
// valid_targets are the oracle's (Σ of the weights the policy gives, recomputed from the documents); counted
// is what the policy's denominator counts, as verify compares it: the valid targets, or the positions under
// `denominator: all_positions`, or the labels that are not ignore_index under `count_basis:
// unshifted_labels`. Both are null when they could not be computed. loss_sum, denominator and
// denominator_scope are the producer's, null when a micro-batch carries no producer totals.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "packoracle/interchange/packed_batch.h"
#include "packoracle/properties/candidate.h"
#include "packoracle/properties/invariants.h"

namespace packoracle::jobs {

struct SummaryMicrobatch {
  std::int64_t micro_step = 0;
  std::string file;
  std::int64_t line = 0;
  std::optional<double> valid_targets;
  std::optional<double> counted;
  std::optional<double> loss_sum, denominator;
  // As the producer gave it: a name that is none of DESIGN §5's is the producer's `denominator` violation, and
  // the summary (a version-1 format) keeps what was said, as ProducerTotals does. Scope() is what it counts.
  std::optional<std::string> denominator_scope;
  std::optional<DenominatorScope> Scope() const {
    return denominator_scope ? ScopeNamed(*denominator_scope) : std::nullopt;
  }
};

struct SummaryEntry {  // one step of one rank
  std::int64_t step = 0, rank = 0;
  std::vector<SummaryMicrobatch> microbatches;
  std::optional<double> valid_targets() const;  // nullopt when a micro-batch's is unknown
  std::optional<double> counted() const;        // nullopt when a micro-batch's is unknown
  std::optional<double> loss_sum() const;       // nullopt unless every micro-batch reports one
};

struct Summary {
  std::string path;  // where it was read from (for messages)
  std::vector<std::string> files;
  std::int64_t dp_world_size = 1;
  std::int64_t grad_accum_steps = 1;
  std::string policy;       // the preset name ("" for a custom policy)
  std::string denominator;  // the policy's declared denominator
  std::string count_basis;  // what `counted` counts: targets, positions or unshifted_labels
  std::vector<SummaryEntry> entries;
};

// Collects a verify run's steps into a Summary.
class SummaryCollector {
 public:
  SummaryCollector(std::vector<std::string> files, const HeaderRecord& header, const Policy& policy);
  // One checked step: its micro-batches (with their files) and the CheckCase result of the step. The oracle's
  // rows are in the order of `microbatches`' rows.
  void AddStep(std::int64_t step, const std::vector<std::pair<MicrobatchRecord, std::string>>& microbatches,
               const CaseResult& result);
  const Summary& summary() const { return summary_; }
  // Writes the summary as JSON; InputError when the file cannot be written.
  void Write(const std::string& path) const;

 private:
  Summary summary_;
  Policy policy_;
};

nlohmann::ordered_json SummaryToJson(const Summary& summary);
// Strict: InputError naming `path` and the field for a summary that is not one.
Summary SummaryFromJson(const nlohmann::json& json, const std::string& path);
Summary ReadSummary(const std::string& path);

}  // namespace packoracle::jobs
