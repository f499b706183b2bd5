// Private to fastcheck/src: the state of one FastStepChecker::Check call, shared by step_check.cc (the flow,
// shape, coverage, the layout), step_rows.cc (the per-row pass) and step_totals.cc (producer totals).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "packoracle/fastcheck/step_check.h"

namespace packoracle::fastcheck::internal {

// Equality up to rounding, as check.cc's Close and LossClose.
inline bool Close(double a, double b) { return std::fabs(a - b) <= 1e-12 * std::max({1.0, std::fabs(a), std::fabs(b)}); }
// Losses come from float32 kernels (ForCausalLMLoss upcasts to float32; TRL's fused LM head and most fused
// cross-entropies accumulate in float32), so loss sums, losses and the step objective are compared at float32
// precision over a few hundred terms: 1e-5 relative. A target miscounted in a step of 10,000 still moves the
// sum by about 1e-4. Counts and denominators stay exact (Close).
inline bool LossClose(double a, double b) { return std::fabs(a - b) <= 1e-5 * std::max({1.0, std::fabs(a), std::fabs(b)}); }

// One prediction as PredictionOf (oracle/src/batch.cc) defines it; has_target stands for kind != kNone (the
// kind itself is only needed for the oracle's messages).
struct Pred {
  bool has_target = false;
  Token target = 0;
  std::int64_t doc = -1, offset = -1;
  double weight = 0;
};

}  // namespace packoracle::fastcheck::internal

namespace packoracle::fastcheck {

using internal::Close;
using internal::Pred;

struct FastStepChecker::Impl {
  const StepInput& in;
  const Policy& policy;
  const StepDocuments& docs;
  Buffers& b;
  StepVerdict& v;
  std::vector<const CandidateRow*> rows;
  std::vector<std::size_t> row_microbatch;

  void Add(Invariant inv, std::int64_t row = -1, std::int64_t slot = -1) { v.findings.push_back({inv, row, slot}); }
  // A note once per step, in the order CheckCase adds them (rows first, then the totals).
  void AddNote(std::string note) {
    if (std::find(v.notes.begin(), v.notes.end(), note) == v.notes.end()) v.notes.push_back(std::move(note));
  }
  const EffectiveDocument& Doc(std::int64_t d) const { return *docs.docs[static_cast<std::size_t>(d)]; }
  double Loss(std::int64_t d, std::int64_t k) const {
    if (docs.losses.empty()) return 1.0;  // losses unknown: the sums that use them are not used
    const auto* l = docs.losses[static_cast<std::size_t>(d)];
    return l && static_cast<std::size_t>(k) < l->size() ? (*l)[static_cast<std::size_t>(k)] : 1.0;
  }

  bool PolicyDemandsRefusal() const;
  bool Shape();
  bool Coverage();
  bool LayoutIsValid();
  void FillSlots(std::size_t r);  // row r's slots, from its spans (resolved by Coverage)
  Pred PredictionAt(std::size_t i, std::size_t n) const;
  void Rows();
  void Totals();
  bool Run();  // false: defer to CheckCase

  // Per-row sums for the totals (CheckTotals and Objective).
  struct RowSums {
    double weight = 0, count = 0, loss = 0;  // count on the policy's basis
    double labels = 0;                       // the oracle's labels != ignore_index
    std::int64_t length = 0;
  };
  std::vector<RowSums> sums;
  std::vector<std::pair<double, double>> per_doc;  // sequence_mean: (Σwℓ, Σw) by input document
  std::vector<double> mb_loss;                     // CheckTotals' s per micro-batch, prediction by prediction
};

}  // namespace packoracle::fastcheck
