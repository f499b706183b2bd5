// GenerationStats (generation_stats.h): each case laid out by its policy's reference layout and measured.
#include "packoracle/properties/generation_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "packoracle/oracle.h"

namespace packoracle {

void Distribution::Add(std::int64_t value, std::int64_t times) {
  if (times <= 0) return;
  counts_[value] += times;
  count_ += times;
  sum_ += value * times;
}

void Distribution::Merge(const Distribution& other) {
  for (const auto& [value, times] : other.counts_) Add(value, times);
}

std::int64_t Distribution::Quantile(double q) const {
  if (count_ == 0) return 0;
  const auto needed = static_cast<std::int64_t>(std::ceil(std::clamp(q, 0.0, 1.0) * static_cast<double>(count_)));
  std::int64_t seen = 0;
  for (const auto& [value, times] : counts_) {
    seen += times;
    if (seen >= std::max<std::int64_t>(needed, 1)) return value;
  }
  return counts_.rbegin()->first;
}

double Distribution::ShareAtLeast(std::int64_t value) const {
  if (count_ == 0) return 0.0;
  std::int64_t n = 0;
  for (auto it = counts_.lower_bound(value); it != counts_.end(); ++it) n += it->second;
  return static_cast<double>(n) / static_cast<double>(count_);
}

namespace {

// The step's rows as the reference lays them out, or nullopt when the policy refuses the input.
std::optional<OracleBatch> ReferenceBatch(const PackRequest& r) {
  try {
    Layout layout = DefaultLayout(r.documents, r.policy, r.row_length);
    AssignMicrobatches(layout, r.micro_batch_rows, r.dp_world_size, r.policy);
    return Materialize(r.documents, layout, r.policy, r.delimiters);
  } catch (const InputError&) {
    return std::nullopt;
  }
}

}  // namespace

void GenerationStats::Observe(const PackRequest& r, const std::string& profile) {
  ++cases;
  if (!profile.empty()) ++profiles[profile];
  std::int64_t token_count = 0;
  bool masked = false;
  bool empty = false;
  for (const auto& d : r.documents) {
    token_count += static_cast<std::int64_t>(d.tokens.size());
    empty = empty || d.tokens.empty();
    masked = masked || std::find(d.supervised.begin(), d.supervised.end(), 0) != d.supervised.end();
  }
  documents.Add(static_cast<std::int64_t>(r.documents.size()));
  tokens.Add(token_count);
  row_length.Add(r.row_length);
  ranks.Add(r.dp_world_size);
  if (r.documents.empty()) ++no_documents;
  if (empty) ++empty_document;
  if (masked) ++sft_masks;

  const auto batch = ReferenceBatch(r);
  if (!batch) {
    ++refused;
    return;
  }
  std::int64_t most = 0;
  bool any_target = false;
  std::set<std::pair<std::int64_t, std::int64_t>> steps;  // (rank, micro_step)
  for (const auto& row : batch->rows) {
    std::set<std::int64_t> docs;
    for (const auto& slot : row.slots)
      if (slot.doc != kPad) docs.insert(slot.doc);
    documents_per_row.Add(static_cast<std::int64_t>(docs.size()));
    most = std::max<std::int64_t>(most, static_cast<std::int64_t>(docs.size()));
    for (const auto& p : row.predictions) any_target = any_target || (p.has_target() && p.weight != 0.0);
    steps.insert({row.rank, row.micro_step});
  }
  most_in_a_row.Add(most);
  rows.Add(static_cast<std::int64_t>(batch->rows.size()));
  microbatches.Add(static_cast<std::int64_t>(steps.size()));
  if (most >= 2) ++shared_row;
  if (!any_target) ++zero_targets;
}

void GenerationStats::Merge(const GenerationStats& o) {
  cases += o.cases;
  documents.Merge(o.documents);
  tokens.Merge(o.tokens);
  row_length.Merge(o.row_length);
  documents_per_row.Merge(o.documents_per_row);
  most_in_a_row.Merge(o.most_in_a_row);
  rows.Merge(o.rows);
  microbatches.Merge(o.microbatches);
  ranks.Merge(o.ranks);
  no_documents += o.no_documents;
  empty_document += o.empty_document;
  shared_row += o.shared_row;
  refused += o.refused;
  zero_targets += o.zero_targets;
  sft_masks += o.sft_masks;
  for (const auto& [name, n] : o.profiles) profiles[name] += n;
}

namespace {

std::string Percent(double share) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.1f%%", 100.0 * share);
  return buffer;
}

std::string Spread(const Distribution& d) {
  return "median " + std::to_string(d.Quantile(0.5)) + ", p90 " + std::to_string(d.Quantile(0.9)) + ", max " +
         std::to_string(d.max());
}

}  // namespace

std::string RenderGenerationStats(const GenerationStats& s) {
  std::string profiles;
  for (const auto& [name, n] : s.profiles) profiles += (profiles.empty() ? "" : ", ") + name + " " + std::to_string(n);
  std::string out = "generated " + std::to_string(s.cases) + " case" + (s.cases == 1 ? "" : "s");
  if (!profiles.empty()) out += " (profiles: " + profiles + ")";
  out += "\n";
  auto line = [&out](const std::string& what, const std::string& text) {
    char buffer[48];
    std::snprintf(buffer, sizeof(buffer), "  %-22s ", what.c_str());
    out += buffer + text + "\n";
  };
  line("documents per case", Spread(s.documents) + "; " + Percent(s.Share(s.no_documents)) + " with none, " +
                                 Percent(s.Share(s.empty_document)) + " with an empty one");
  line("row length L", Spread(s.row_length));
  line("tokens per case", Spread(s.tokens));
  line("documents per row", Spread(s.documents_per_row) + " (reference layout)");
  line("rows sharing", Percent(s.Share(s.shared_row)) + " of cases put two or more documents into one row");
  line("refused", Percent(s.Share(s.refused)) + " of cases (the policy demands an error)");
  line("zero-target steps", Percent(s.Share(s.zero_targets)) + " of cases");
  line("SFT masks", Percent(s.Share(s.sft_masks)) + " of cases hold an unsupervised token");
  line("rows per step", Spread(s.rows));
  line("micro-batches", Spread(s.microbatches) + " per step, over " + std::to_string(s.ranks.max()) + " rank(s) at most");
  return out;
}

}  // namespace packoracle
