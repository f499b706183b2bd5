// What a run generated: the shape of its cases, so that a person (and the tests) can see whether the
// generator makes the situations packing bugs need (documents sharing a row, sizes of real training) and not
// only tiny or refused inputs.
//
//   packoracle::GenerationStats stats;
//   for (const auto& request : cases) stats.Observe(request);
//   std::cout << RenderGenerationStats(stats);
//
// Each case is laid out by the reference layout of its policy (DefaultLayout, micro-batches and ranks as
// AssignMicrobatches deals them), which is what "documents per row" and "zero-target steps" are measured on.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "packoracle/properties/candidate.h"

namespace packoracle {

// A distribution of non-negative integers, kept as exact counts per value (the values a generator draws are
// few enough: row lengths up to the largest L, documents up to the largest count), so quantiles are exact.
class Distribution {
 public:
  void Add(std::int64_t value, std::int64_t times = 1);
  void Merge(const Distribution& other);
  std::int64_t count() const { return count_; }
  // The smallest value v with at least q·count observations ≤ v (q in [0, 1]); 0 when empty.
  std::int64_t Quantile(double q) const;
  std::int64_t max() const { return counts_.empty() ? 0 : counts_.rbegin()->first; }
  double mean() const { return count_ ? static_cast<double>(sum_) / static_cast<double>(count_) : 0.0; }
  // Share of observations ≥ value, in [0, 1].
  double ShareAtLeast(std::int64_t value) const;

 private:
  std::map<std::int64_t, std::int64_t> counts_;
  std::int64_t count_ = 0;
  std::int64_t sum_ = 0;
};

struct GenerationStats {
  std::int64_t cases = 0;
  Distribution documents;           // per case
  Distribution tokens;              // per case: document tokens, before delimiters
  Distribution row_length;          // L per case
  Distribution documents_per_row;   // per row of the reference layout (cases the policy accepts)
  Distribution most_in_a_row;       // per accepted case: the most documents one row holds
  Distribution rows;                // per accepted case
  Distribution microbatches;        // per accepted case: micro-batches of the step, over every rank
  Distribution ranks;               // dp_world_size per case
  std::int64_t no_documents = 0;    // cases without a document
  std::int64_t empty_document = 0;  // cases with an empty document (no tokens)
  std::int64_t shared_row = 0;      // cases in which at least two documents share a row
  std::int64_t refused = 0;         // cases the policy refuses (a correct packer must answer with an error)
  std::int64_t zero_targets = 0;    // accepted cases whose step has no weighted target
  std::int64_t sft_masks = 0;       // cases with at least one unsupervised token
  std::map<std::string, std::int64_t> profiles;  // cases per generation profile

  // Adds one generated case (the profile it was drawn from, when known).
  void Observe(const PackRequest& request, const std::string& profile = "");
  void Merge(const GenerationStats& other);
  double Share(std::int64_t n) const { return cases ? static_cast<double>(n) / static_cast<double>(cases) : 0.0; }
};

// A block for people, e.g.
//   generated 1000 cases (profiles: edges 200, short 200, ...)
//     documents per case   median 6, p90 40, max 190; 1.2% with none
//     ...
std::string RenderGenerationStats(const GenerationStats& stats);

}  // namespace packoracle
