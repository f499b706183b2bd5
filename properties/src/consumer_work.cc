// An attention consumer's computed work against the least the declared rule needs (consumer_work.h).
#include "consumer_work.h"

#include <algorithm>

namespace packoracle::internal {
namespace {

// The pairs of query i in runs a ∪ runs b (each sorted and disjoint): swept in key order, overlaps counted once.
std::int64_t UnionOfQuery(const MaskRuns& a, const MaskRuns& b, std::int64_t i) {
  auto ra = a.row_offsets[static_cast<std::size_t>(i)], ea = a.row_offsets[static_cast<std::size_t>(i + 1)];
  auto rb = b.row_offsets[static_cast<std::size_t>(i)], eb = b.row_offsets[static_cast<std::size_t>(i + 1)];
  std::int64_t pairs = 0, covered_to = 0;  // keys below covered_to are counted
  while (ra < ea || rb < eb) {
    const bool take_a = rb >= eb || (ra < ea && a.run_begin[static_cast<std::size_t>(ra)] <=
                                                    b.run_begin[static_cast<std::size_t>(rb)]);
    const auto k = static_cast<std::size_t>(take_a ? ra++ : rb++);
    const std::int64_t begin = take_a ? a.run_begin[k] : b.run_begin[k];
    const std::int64_t end = take_a ? a.run_end[k] : b.run_end[k];
    const std::int64_t from = std::max(begin, covered_to);
    if (end > from) pairs += end - from;
    covered_to = std::max(covered_to, end);
  }
  return pairs;
}

std::string Pairs(std::int64_t n) { return std::to_string(n) + (n == 1 ? " (query, key) pair" : " (query, key) pairs"); }

// How much more than `required` pairs `computed` is, as a sentence ("4900% more than needed", rounded down).
std::string Overhead(std::int64_t computed, std::int64_t required) {
  if (required == 0) return "where no pair is needed";
  const auto percent = static_cast<long double>(computed - required) * 100.0L / static_cast<long double>(required);
  return std::to_string(static_cast<std::int64_t>(percent)) + "% more than needed";
}

// What is wrong with a work report for the micro-batch whose oracle rows are `truth`; nullopt: nothing.
std::optional<std::string> MalformedWork(const ComputedWork& work, const std::vector<const OracleRow*>& truth) {
  if (!work.rows.empty() && work.rows.size() != truth.size()) {
    return "the attention consumer reported the work of " + std::to_string(work.rows.size()) +
           " rows for a micro-batch of " + std::to_string(truth.size()) + " rows";
  }
  for (std::size_t k = 0; k < work.rows.size(); ++k) {
    if (const auto bad = Malformed(work.rows[k], truth[k]->length()))
      return "the attention consumer's computed pairs of row " + std::to_string(k) + ": " + *bad;
  }
  for (std::size_t e = 0; e < work.extra_rows.size(); ++e) {
    const MaskRuns& extra = work.extra_rows[e];
    if (const auto bad = Malformed(extra, std::max<std::int64_t>(extra.n, 0)))
      return "the attention consumer's extra row " + std::to_string(e) + ": " + *bad;
  }
  return std::nullopt;
}

void AddViolation(CaseResult& result, Violation v) {
  if (result.violations.size() >= kMaxViolationsKept) {
    ++result.not_kept[v.invariant];  // counted, not kept, as CheckCase does
    return;
  }
  result.violations.push_back(std::move(v));
}

}  // namespace

std::int64_t PairsIn(const MaskRuns& runs) {
  std::int64_t pairs = 0;
  for (std::size_t r = 0; r < runs.run_begin.size(); ++r) pairs += runs.run_end[r] - runs.run_begin[r];
  return pairs;
}

std::int64_t PairsInUnion(const MaskRuns* computed, const MaskRuns& mask) {
  if (computed == nullptr) return PairsIn(mask);
  std::int64_t pairs = 0;
  for (std::int64_t i = 0; i < mask.n; ++i) pairs += UnionOfQuery(*computed, mask, i);
  return pairs;
}

void CheckConsumerWork(const ComputedWork& work, const std::vector<const MaskRuns*>& masks,
                       const std::vector<const OracleRow*>& truth, const Policy& policy, const std::string& where,
                       std::int64_t first_row, CaseResult& result) {
  if (const auto bad = MalformedWork(work, truth)) {
    AddViolation(result, {Invariant::kEfficiency, where + ": " + *bad, first_row, -1, "", "", {}});
    return;
  }
  ConsumerWork counted;
  std::string parts;  // "row 0: 1, 1 extra row: 49" for the sentence
  for (std::size_t k = 0; k < truth.size(); ++k) {
    if (masks[k] == nullptr) return;  // the mask was malformed: attention reports it, the work is unknown
    const std::int64_t pairs = PairsInUnion(work.rows.empty() ? nullptr : &work.rows[k], *masks[k]);
    counted.computed += pairs;
    counted.required += RequiredAttentionPairs(*truth[k], policy);
    parts += (k ? ", row " : "row ") + std::to_string(k) + ": " + std::to_string(pairs);
  }
  std::int64_t extra = 0;
  for (const MaskRuns& row : work.extra_rows) extra += PairsIn(row);
  counted.computed += extra;
  if (!work.extra_rows.empty()) {
    parts += ", " + std::to_string(work.extra_rows.size()) +
             (work.extra_rows.size() == 1 ? " extra row: " : " extra rows: ") + std::to_string(extra);
  }
  (result.consumer_work ? *result.consumer_work : result.consumer_work.emplace()).Add(counted);
  if (!policy.consumer_overhead) return;  // reported only
  result.checked.insert(Invariant::kEfficiency);
  // The promise, exactly in integers: 100 · computed ≤ (100 + p) · required (p ≤ 10^6 and a micro-batch's pairs
  // ≤ (2^20)² keep both sides far inside int64).
  const std::int64_t p = *policy.consumer_overhead;
  if (counted.computed * 100 <= (100 + p) * counted.required) return;
  const std::string promised = std::to_string(*policy.consumer_overhead);
  AddViolation(
      result,
      {Invariant::kEfficiency,
       where + ": the attention consumer computes " + Pairs(counted.computed) + " (" + parts + "), the declared " +
           "attention needs " + std::to_string(counted.required) + ": " + Overhead(counted.computed, counted.required) +
           ", but the policy promises consumer_overhead: " + promised + " (at most " + promised + "% more)",
       first_row, -1, "≤ " + std::to_string(counted.required * (100 + *policy.consumer_overhead) / 100),
       std::to_string(counted.computed), {}});
}

}  // namespace packoracle::internal
