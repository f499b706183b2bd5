// CheckCase: one case against every invariant the candidate's roles allow.
#include <algorithm>
#include <cmath>
#include <exception>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "consumer_work.h"
#include "packing_invariance.h"
#include "value_invariance.h"
#include "packoracle/oracle.h"
#include "packoracle/oracle/tiling.h"
#include "packoracle/properties/encoding_notes.h"
#include "packoracle/properties/invariants.h"
#include "packoracle/properties/attention_runs.h"
#include "packoracle/properties/producer_totals.h"
#include "packoracle/properties/context_parallel.h"
#include "packoracle/properties/determinism.h"
#include "packoracle/properties/tolerance.h"
#include "packoracle/properties/splits.h"

namespace packoracle {
namespace {

template <class T>
std::string Show(const std::vector<T>& v) {
  std::ostringstream os;
  os << "[";
  for (std::size_t i = 0; i < v.size(); ++i) os << (i ? " " : "") << v[i];
  return os.str() + "]";
}

std::string Num(double v) {
  std::ostringstream os;
  os.precision(12);
  os << v;
  return os.str();
}

// The rows of a step, micro-batches flattened in order, with their position for messages.
struct RowRef {
  const CandidateRow* row;
  std::size_t microbatch;
  std::size_t index_in_microbatch;
};

std::vector<RowRef> Flatten(const std::vector<CandidateMicrobatch>& mbs) {
  std::vector<RowRef> out;
  for (std::size_t m = 0; m < mbs.size(); ++m)
    for (std::size_t r = 0; r < mbs[m].rows.size(); ++r) out.push_back({&mbs[m].rows[r], m, r});
  return out;
}

// Per-target values (the kit's losses or scores, indexed [document][token]) at each slot of the step's rows,
// [microbatch][row][slot]: the value of the target the slot predicts, 0 where it predicts none (as
// cross-entropy with an ignore index gives).
std::vector<std::vector<std::vector<double>>> PerSlot(const OracleBatch& batch,
                                                      const std::vector<CandidateMicrobatch>& mbs,
                                                      const std::vector<std::vector<double>>& per_target) {
  std::vector<std::vector<std::vector<double>>> out;
  std::size_t flat = 0;
  for (const auto& mb : mbs) {
    auto& rows = out.emplace_back();
    for (std::size_t k = 0; k < mb.rows.size(); ++k, ++flat) {
      auto& slots = rows.emplace_back();
      for (const auto& p : batch.rows[flat].predictions) {
        slots.push_back(p.has_target() ? per_target[static_cast<std::size_t>(p.target_doc)]
                                                   [static_cast<std::size_t>(p.target_offset)]
                                       : 0.0);
      }
    }
  }
  return out;
}

// What a declared selection kept of a step, for the report of a failure under it: the selected targets of the
// step and of each micro-batch (weights summed in `judged`, SelectedTargets's batch) against the valid ones.
std::string SelectionNote(const OracleBatch& batch, const OracleBatch& judged,
                          const std::vector<CandidateMicrobatch>& mbs, double top_fraction) {
  double valid = 0, kept = 0;
  std::string per_microbatch;
  for (std::size_t m = 0, flat = 0; m < mbs.size(); ++m) {
    double kept_here = 0;
    for (std::size_t k = 0; k < mbs[m].rows.size(); ++k, ++flat) {
      valid += WeightSum(batch.rows[flat]);
      kept_here += WeightSum(judged.rows[flat]);
    }
    kept += kept_here;
    per_microbatch += (m ? " " : "") + Num(kept_here);
  }
  return "the declared selection keeps " + Num(kept) + " of the step's " + Num(valid) + " valid targets (the top " +
         Num(top_fraction) + " of each optimizer step by the kit's scores, slot_scores; per micro-batch: " +
         per_microbatch + "): the denominator and Σwℓ count those alone";
}

struct ScopeCounts;

class Checker {
 public:
  Checker(Candidate& candidate, const PackRequest& request, const CheckOptions& options, CaseResult& result)
      : candidate_(candidate), request_(request), options_(options), result_(result),
        policy_(request.policy), docs_(Effective(request.documents, request.policy, request.delimiters)) {}

  void Run();

 private:
  void Add(Invariant inv, std::string sentence, std::int64_t row = -1, std::int64_t slot = -1, std::string expected = "",
           std::string actual = "") {
    if (result_.violations.size() >= kMaxViolationsKept) {
      ++result_.not_kept[inv];  // counted, not kept (kMaxViolationsKept)
      return;
    }
    result_.violations.push_back({inv, std::move(sentence), row, slot, std::move(expected), std::move(actual), {}});
  }
  // A note for the report, once per case (notes are per step: the same sentence from two rows is one note).
  void AddNote(std::string note) {
    if (std::find(result_.notes.begin(), result_.notes.end(), note) == result_.notes.end())
      result_.notes.push_back(std::move(note));
  }
  bool Has(Invariant inv) const {
    return result_.not_kept.count(inv) > 0 ||
           std::any_of(result_.violations.begin(), result_.violations.end(),
                       [inv](const Violation& v) { return v.invariant == inv; });
  }
  std::string At(std::size_t flat_row, std::int64_t slot = -1) const {
    const RowRef& ref = rows_[flat_row];
    std::string s = "micro-batch " + std::to_string(ref.microbatch) + " row " + std::to_string(ref.index_in_microbatch);
    if (slot >= 0) s += " slot " + std::to_string(slot);
    return s;
  }

  // A refusal is demanded when overflow is error and a document is longer than the row, or when the policy
  // cuts full stream windows only (stream_stride set, padding none: llm.c) and the stream is non-empty but
  // shorter than one window and its last target (L + 1 tokens), or when rows are padded to a multiple of k
  // larger than the row (no row can hold a token: the reference layout rejects every non-empty input).
  // The rule is the oracle's (policy.h); here only the effective lengths are gathered.
  bool PolicyDemandsRefusal() const {
    if (!options_.whole_input) return false;  // a window of a run: its documents' lengths are not all seen
    std::vector<std::int64_t> lengths;
    for (const auto& d : docs_) lengths.push_back(d.size());
    return packoracle::PolicyDemandsRefusal(policy_, request_.row_length, lengths);
  }

  void CheckPacker();
  bool CheckShape();
  bool CheckCoverage();
  void CheckRowSpans(std::size_t r, const std::map<std::string, std::size_t>& index, std::vector<int>& covered,
                     std::vector<std::vector<TilingPiece>>& pieces);
  void CheckRowPadding(std::size_t r, const std::vector<int>& covered);
  bool CheckDocumentTiling(const std::vector<std::vector<TilingPiece>>& pieces);
  void CheckNoMergeableRows();
  void CheckSegments();
  void CheckPositions();
  void CheckTargets();
  void CheckBoundaryEncodingPresent();
  void CheckTotals(const OracleBatch& batch, const std::vector<CandidateMicrobatch>& mbs,
                   const std::vector<ProducerTotals>& totals, const std::string& who, std::int64_t dp_world_size);
  void CheckTotalValues(const OracleBatch& batch, const std::vector<CandidateMicrobatch>& mbs,
                        const std::vector<ProducerTotals>& totals, const std::string& who, std::int64_t dp_world_size);
  ScopeCounts CountScopes(const OracleBatch& batch, const std::vector<CandidateMicrobatch>& mbs) const;
  bool CheckStepObjective(const OracleBatch& batch, const std::vector<CandidateMicrobatch>& mbs,
                          const std::vector<ProducerTotals>& totals, const ScopeCounts& counts, const std::string& who,
                          std::int64_t dp_world_size);
  bool CheckWeighting(const std::vector<CandidateMicrobatch>& mbs, const std::vector<ProducerTotals>& totals,
                      const ScopeCounts& counts);
  bool CheckMicrobatchTotals(const ProducerTotals& t, std::size_t m, std::int64_t rank, const ScopeCounts& counts,
                             const std::string& who);
  bool CheckGivenLoss(const ProducerTotals& t, const std::string& where, std::size_t m, std::int64_t rank,
                      const ScopeCounts& counts);
  void CheckGradient(const OracleBatch& batch, const std::vector<CandidateMicrobatch>& mbs,
                     const std::vector<ProducerTotals>& totals, const std::string& who, DenominatorScope scope,
                     std::int64_t dp_world_size);
  void CheckReducer();
  void CheckScheduledTotals(const OracleBatch& batch, const std::vector<CandidateMicrobatch>& mbs,
                            const ReduceResult& totals, const std::string& who, std::int64_t dp_world_size,
                            std::int64_t accumulation, std::int64_t optimizer_steps);
  void CheckConsumer();
  void CompareConsumerMask(std::size_t r);
  void CheckWork(const std::vector<std::optional<ComputedWork>>& work);
  void CheckInvariance();
  void CheckValues();

  Candidate& candidate_;
  const PackRequest& request_;
  const CheckOptions& options_;
  CaseResult& result_;
  const Policy& policy_;
  std::vector<EffectiveDocument> docs_;
  Layout layout_;  // the rows of result_.oracle: the packer's (from its spans) or the reference's
  std::vector<CandidateMicrobatch> microbatches_;  // the packer's, or the reference's when there is no packer
  std::vector<RowRef> rows_;
  bool rows_are_candidates_ = false;
  // The consumer's mask per flat row (CheckConsumer): absent where it threw or gave a malformed mask.
  std::vector<std::optional<MaskRuns>> consumer_masks_;
};

void Checker::Run() {
  if (candidate_.packer) {
    CheckPacker();
  } else {
    for (auto inv : {Invariant::kShape, Invariant::kCoverage, Invariant::kSegments, Invariant::kPositions,
                     Invariant::kTargets, Invariant::kDeterminism})
      result_.not_applicable.insert(inv);
    // Reducers and consumers are fed the reference packer's rows.
    try {
      layout_ = DefaultLayout(request_.documents, policy_, request_.row_length);
    } catch (const InputError&) {
      return;  // the policy refuses this input: nothing for a reducer or consumer to see
    }
    AssignMicrobatches(layout_, request_.micro_batch_rows, request_.dp_world_size, policy_);
    result_.oracle = Materialize(request_.documents, layout_, policy_);
    microbatches_ = ReferenceMicrobatches(*result_.oracle, request_);
    for (auto& mb : microbatches_) mb.producer.reset();
    rows_ = Flatten(microbatches_);
  }
  if (result_.oracle && options_.losses_known) {
    const auto losses = LossesOf(request_, result_.oracle->documents);
    const auto token_mean = Objective(*result_.oracle, losses, Denominator::kGlobalTargets);
    if (token_mean.has_targets) result_.token_mean = token_mean.value;
  }
  if (candidate_.reducer) {
    CheckReducer();
  } else if (!(rows_are_candidates_ && std::any_of(microbatches_.begin(), microbatches_.end(),
                                                  [](const CandidateMicrobatch& m) { return m.producer.has_value(); }))) {
    result_.not_applicable.insert(Invariant::kDenominator);
    result_.not_applicable.insert(Invariant::kLoss);
  }
  if (candidate_.consumer) {
    CheckConsumer();
  } else if (!candidate_.packer) {
    result_.not_applicable.insert(Invariant::kAttention);
  }
  if (options_.packing_invariance && request_.row_length <= options_.decoder_max_row_length && result_.oracle &&
      (candidate_.packer || candidate_.consumer)) {
    CheckInvariance();
  } else {
    result_.not_applicable.insert(Invariant::kPackingInvariance);
  }
  if (candidate_.values) CheckValues();
  // Only a reducer or a value consumer backpropagates, and only one that handed back gradients had them checked.
  if (!result_.checked.count(Invariant::kGradient)) result_.not_applicable.insert(Invariant::kGradient);
  if (result_.checked.count(Invariant::kPackingInvariance)) result_.not_applicable.erase(Invariant::kPackingInvariance);
  std::stable_sort(result_.violations.begin(), result_.violations.end(),
                   [](const Violation& a, const Violation& b) { return a.invariant < b.invariant; });
  for (const auto& v : result_.violations) result_.not_applicable.erase(v.invariant);
  for (const auto& [inv, n] : result_.not_kept) result_.not_applicable.erase(inv);
}

void Checker::CheckPacker() {
  PackResult out;
  try {
    out = candidate_.packer->Pack(request_);
  } catch (const std::exception& e) {
    out = PackResult::Fault(std::string("the packer threw: ") + e.what());
  }
  result_.packed = out;
  result_.checked.insert(Invariant::kCoverage);
  result_.checked.insert(Invariant::kShape);
  if (out.fault) {
    Add(Invariant::kShape, "no packed batch came back: " + *out.fault);
    return;
  }

  // determinism: the same request again, after an unrelated one, gives the same output.
  if (options_.determinism) {
    result_.checked.insert(Invariant::kDeterminism);
    const PackRequest decoy = DeterminismDecoy(request_);
    PackResult again;
    try {
      candidate_.packer->Pack(decoy);  // whatever the decoy gives (a fault too) is not this case's concern
    } catch (const std::exception&) {
    }
    try {
      again = candidate_.packer->Pack(request_);
    } catch (const std::exception& e) {
      again = PackResult::Fault(std::string("the packer threw: ") + e.what());
    }
    if (!(again == out)) {
      Add(Invariant::kDeterminism,
          "packing the same documents again, after packing them in another order, gave a different output");
    }
  }

  const bool demanded = PolicyDemandsRefusal();
  if (out.refusal) {
    if (!demanded) {
      Add(Invariant::kCoverage, "the packer refused an input its policy accepts: " + *out.refusal);
    }
    return;
  }
  if (demanded) {
    Add(Invariant::kCoverage, "the policy demands a refusal (a document longer than the row length " +
                                  std::to_string(request_.row_length) +
                                  " under overflow: error, a stream shorter than one full window, or pad_to a multiple larger than the row), "
                                  "but the packer "
                                  "did not refuse");
    return;
  }
  microbatches_ = out.microbatches;
  rows_ = Flatten(microbatches_);
  rows_are_candidates_ = true;
  result_.checked.insert(Invariant::kShape);
  if (!CheckShape()) return;
  if (!CheckCoverage()) return;

  layout_ = LayoutFromSpans(microbatches_, docs_, request_.row_length);
  result_.oracle = Materialize(request_.documents, layout_, policy_, request_.delimiters);
  std::int64_t slots = 0, used = 0;
  for (const auto& row : result_.oracle->rows) {
    slots += row.length();
    for (const auto& s : row.slots) used += s.is_pad() ? 0 : 1;
  }
  result_.utilization = slots > 0 ? static_cast<double>(used) / static_cast<double>(slots) : 1.0;
  if (options_.efficiency) {
    result_.checked.insert(Invariant::kEfficiency);
    if (result_.utilization < options_.min_utilization) {
      Add(Invariant::kEfficiency, "utilization " + Num(result_.utilization) + " is below the required " +
                                      Num(options_.min_utilization));
    }
  }
  if (policy_.efficiency == Efficiency::kNoMergeableRows) CheckNoMergeableRows();
  CheckSegments();
  CheckPositions();
  CheckTargets();
  CheckBoundaryEncodingPresent();
  std::vector<ProducerTotals> totals;
  for (const auto& mb : microbatches_)
    if (mb.producer) totals.push_back(*mb.producer);
  if (!totals.empty()) {
    if (totals.size() != microbatches_.size()) {
      Add(Invariant::kDenominator, "only " + std::to_string(totals.size()) + " of " +
                                       std::to_string(microbatches_.size()) + " micro-batches report producer totals");
    } else {
      CheckTotals(*result_.oracle, microbatches_, totals, options_.totals_owner, request_.dp_world_size);
    }
  }
}

// efficiency: no_mergeable_rows, the packer's promise of first-fit quality. On each rank, for every two rows
// r ≠ s of the step, with used(r) = the row's non-pad slots (delimiters included) and C = MergeCapacity (L, or
// ⌊L/k⌋·k under pad_to multiple_of:k):
//   used(r) + used(s) > C
// else the two could be one row and one of them was needless. A first-fit (or best-fit) packer keeps it: it
// opens a row only for a document no open row can take. One violation per rank, naming the pair with the
// fewest used slots together (the earliest pair, r < s, on ties), which the fast verifier finds as the two
// rows with the fewest used slots.
void Checker::CheckNoMergeableRows() {
  result_.checked.insert(Invariant::kEfficiency);
  const std::int64_t C = MergeCapacity(policy_, request_.row_length);
  std::vector<std::int64_t> used;
  for (const auto& row : result_.oracle->rows) {
    std::int64_t u = 0;
    for (const auto& slot : row.slots) u += slot.is_pad() ? 0 : 1;
    used.push_back(u);
  }
  std::map<std::int64_t, std::pair<std::size_t, std::size_t>> named;  // rank -> the pair it names
  for (std::size_t r = 0; r < used.size(); ++r) {
    for (std::size_t s = r + 1; s < used.size(); ++s) {
      const std::int64_t rank = layout_.rows[r].rank;
      if (layout_.rows[s].rank != rank || used[r] + used[s] > C) continue;
      auto it = named.find(rank);
      if (it == named.end() || used[r] + used[s] < used[it->second.first] + used[it->second.second])
        named[rank] = {r, s};
    }
  }
  for (const auto& [rank, pair] : named) {
    const auto [r, s] = pair;
    const char* slots = used[r] == 1 ? " non-pad slot) and " : " non-pad slots) and ";
    std::string sentence = At(r) + " (" + std::to_string(used[r]) + slots + At(s) + " (" + std::to_string(used[s]) + ")";
    if (request_.dp_world_size > 1) sentence += " on rank " + std::to_string(rank);
    sentence += " could be one row: " + std::to_string(used[r]) + " + " + std::to_string(used[s]) + " = " +
                std::to_string(used[r] + used[s]) + " ≤ " +
                (C == request_.row_length ? "the row length " + std::to_string(C)
                                          : std::to_string(C) + ", the most tokens a row of length " +
                                                std::to_string(request_.row_length) + " holds padded to multiple_of:" +
                                                std::to_string(policy_.pad_to.multiple)) +
                ", but the policy promises efficiency: no_mergeable_rows";
    Add(Invariant::kEfficiency, sentence, static_cast<std::int64_t>(s), -1, "> " + std::to_string(C),
        std::to_string(used[r] + used[s]));
  }
}

// pad_to longest: the slots of row r its spans cover, slot by slot (spans clipped to the row: a span outside
// it is coverage's finding), which for a row whose spans coverage accepts is its content, delimiters included.
std::int64_t SlotsCovered(const CandidateRow& row) {
  const auto n = static_cast<std::int64_t>(row.input_ids.size());
  std::vector<std::uint8_t> covered(static_cast<std::size_t>(n), 0);
  for (std::int64_t i = 0; i < n; ++i)
    for (const DocSpan& span : row.doc_spans)
      if (span.length > 0 && i >= span.start &&
          (span.start < 0 ? i < span.start + span.length : i - span.start < span.length))  // no sum overflows
        covered[static_cast<std::size_t>(i)] = 1;
  return std::count(covered.begin(), covered.end(), 1);
}

bool Checker::CheckShape() {
  const std::size_t before = result_.found();
  // pad_to longest: each micro-batch's width, the most slots any of its rows' spans cover (DESIGN §3).
  std::vector<std::int64_t> longest(microbatches_.size(), 0);
  if (policy_.padding != Padding::kNone && policy_.pad_to.kind == PadTo::Kind::kLongest)
    for (const RowRef& ref : rows_) longest[ref.microbatch] = std::max(longest[ref.microbatch], SlotsCovered(*ref.row));
  for (std::size_t r = 0; r < rows_.size(); ++r) {
    const CandidateRow& row = *rows_[r].row;
    const auto n = static_cast<std::int64_t>(row.input_ids.size());
    auto same_length = [&](const char* field, std::size_t size) {
      if (static_cast<std::int64_t>(size) != n) {
        Add(Invariant::kShape, At(r) + ": " + field + " has " + std::to_string(size) + " entries, input_ids has " +
                                   std::to_string(n), static_cast<std::int64_t>(r), -1, std::to_string(n), std::to_string(size));
      }
    };
    same_length("labels", row.labels.size());
    if (row.loss_mask) same_length("loss_mask", row.loss_mask->size());
    if (row.position_ids) same_length("position_ids", row.position_ids->size());
    if (row.doc_ids) same_length("doc_ids", row.doc_ids->size());
    if (row.attention_mask) same_length("attention_mask", row.attention_mask->size());
    if (policy_.loss_mask && !row.loss_mask) {
      Add(Invariant::kShape, At(r) + ": the policy has loss_mask: true but the row has no loss_mask",
          static_cast<std::int64_t>(r));
    }
    if (n > request_.row_length) {
      Add(Invariant::kShape, At(r) + ": " + std::to_string(n) + " slots, more than the row length " +
                                 std::to_string(request_.row_length), static_cast<std::int64_t>(r));
    }
    if (policy_.padding != Padding::kNone && policy_.pad_to.kind == PadTo::Kind::kRowLen && n != request_.row_length) {
      Add(Invariant::kShape, At(r) + ": " + std::to_string(n) + " slots, but the policy pads every row to " +
                                 std::to_string(request_.row_length), static_cast<std::int64_t>(r));
    }
    if (policy_.padding != Padding::kNone && policy_.pad_to.kind == PadTo::Kind::kMultipleOf &&
        n % policy_.pad_to.multiple != 0) {
      Add(Invariant::kShape, At(r) + ": " + std::to_string(n) + " slots, not a multiple of " +
                                 std::to_string(policy_.pad_to.multiple), static_cast<std::int64_t>(r));
    }
    if (policy_.padding != Padding::kNone && policy_.pad_to.kind == PadTo::Kind::kLongest &&
        n != longest[rows_[r].microbatch]) {
      Add(Invariant::kShape, At(r) + ": " + std::to_string(n) + " slots, but the policy pads every row of a "
                                 "micro-batch to its longest, " + std::to_string(longest[rows_[r].microbatch]) +
                                 " slots (the most its spans cover in a row of micro-batch " +
                                 std::to_string(rows_[r].microbatch) + ")",
          static_cast<std::int64_t>(r), -1, std::to_string(longest[rows_[r].microbatch]), std::to_string(n));
    }
    if (row.cu_seqlens) {
      const auto& cu = *row.cu_seqlens;
      bool monotone = true;
      for (std::size_t k = 1; k < cu.size(); ++k) monotone = monotone && cu[k] >= cu[k - 1];
      if (cu.empty() || cu.front() != 0 || cu.back() != n || !monotone) {
        Add(Invariant::kShape, At(r) + ": cu_seqlens " + Show(cu) + " must start at 0, never decrease and end at " +
                                   std::to_string(n), static_cast<std::int64_t>(r));
      }
    }
    if (row.seq_lens) {
      std::int64_t sum = 0;
      bool nonnegative = true;
      for (auto v : *row.seq_lens) {
        sum += v;
        nonnegative = nonnegative && v >= 0;
      }
      if (sum != n || !nonnegative) {
        Add(Invariant::kShape, At(r) + ": seq_lens " + Show(*row.seq_lens) + " must be non-negative and sum to " +
                                   std::to_string(n), static_cast<std::int64_t>(r));
      }
    }
  }
  return result_.found() == before;
}

bool Checker::CheckCoverage() {
  const std::size_t before = result_.found();
  std::map<std::string, std::size_t> index;
  for (std::size_t d = 0; d < docs_.size(); ++d) index[docs_[d].uid] = d;
  std::vector<std::vector<TilingPiece>> pieces(docs_.size());  // each document's, rows in order (index: the row)
  for (std::size_t r = 0; r < rows_.size(); ++r) {
    std::vector<int> covered(rows_[r].row->input_ids.size(), 0);
    CheckRowSpans(r, index, covered, pieces);
    CheckRowPadding(r, covered);
  }
  if (result_.found() != before) return false;
  return CheckDocumentTiling(pieces) && result_.found() == before;
}

// Each span of row r names a document of the input, lies inside its row and its document's inputs, claims its
// slots once and holds the document's tokens there; covered counts the spans per slot, pieces gathers each
// document's pieces in row order.
void Checker::CheckRowSpans(std::size_t r, const std::map<std::string, std::size_t>& index, std::vector<int>& covered,
                            std::vector<std::vector<TilingPiece>>& pieces) {
  const CandidateRow& row = *rows_[r].row;
  const auto n = static_cast<std::int64_t>(row.input_ids.size());
  for (const DocSpan& span : row.doc_spans) {
    auto it = index.find(span.doc_uid);
    if (it == index.end()) {
      Add(Invariant::kCoverage, At(r) + ": a span names document '" + span.doc_uid + "', which is not in the input",
          static_cast<std::int64_t>(r));
      continue;
    }
    const EffectiveDocument& doc = docs_[it->second];
    const std::int64_t inputs = InputTokens(policy_, doc.size());  // shift: document: the last token is no input
    if (span.length <= 0 || span.start < 0 || span.start > n - span.length || span.doc_offset < 0 ||
        span.doc_offset > inputs - span.length) {  // written without sums: no overflow
      Add(Invariant::kCoverage, At(r) + ": span of '" + doc.uid + "' (start " + std::to_string(span.start) +
                                    ", length " + std::to_string(span.length) + ", doc_offset " +
                                    std::to_string(span.doc_offset) + ") lies outside its row or its document" +
                                    (inputs < doc.size() && span.doc_offset + span.length == doc.size()
                                         ? " (under shift: document its last token, " +
                                               std::to_string(doc.tokens.back()) + ", is a label only, never an input)"
                                         : ""),
          static_cast<std::int64_t>(r));
      continue;
    }
    for (std::int64_t t = 0; t < span.length; ++t) {
      const auto slot = static_cast<std::size_t>(span.start + t);
      if (covered[slot]++) {
        Add(Invariant::kCoverage, At(r, span.start + t) + " is claimed by two spans", static_cast<std::int64_t>(r),
            span.start + t);
      }
      const Token want = doc.tokens[static_cast<std::size_t>(span.doc_offset + t)];
      if (row.input_ids[slot] != want) {
        Add(Invariant::kCoverage,
            At(r, span.start + t) + " holds " + std::to_string(row.input_ids[slot]) + " but its span says token " +
                std::to_string(span.doc_offset + t) + " of '" + doc.uid + "', which is " + std::to_string(want),
            static_cast<std::int64_t>(r), span.start + t, std::to_string(want), std::to_string(row.input_ids[slot]));
      }
    }
    pieces[it->second].push_back({span.doc_offset, span.length, r});
  }
}

// Slots outside the spans are padding: the pad id, under right padding only after the row's last token,
// under left padding only before its first (PaddingOutOfPlace).
void Checker::CheckRowPadding(std::size_t r, const std::vector<int>& covered) {
  const CandidateRow& row = *rows_[r].row;
  const auto n = static_cast<std::int64_t>(row.input_ids.size());
  bool seen_pad = false, seen_token = false;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto slot = static_cast<std::size_t>(i);
    if (PaddingOutOfPlace(policy_.padding, !covered[slot], seen_pad, seen_token)) {
      Add(Invariant::kCoverage, At(r, i) + (covered[slot] ? " holds a document token after padding (right padding only)"
                                                           : " is padding after a document token (left padding only)"),
          static_cast<std::int64_t>(r), i);
    }
    if (!covered[slot]) {
      seen_pad = true;
      if (row.input_ids[slot] != policy_.pad_id) {
        Add(Invariant::kCoverage, At(r, i) + " holds " + std::to_string(row.input_ids[slot]) +
                                      ", which is neither a document token (no span covers it) nor the pad id " +
                                      std::to_string(policy_.pad_id),
            static_cast<std::int64_t>(r), i);
      }
      if (policy_.padding == Padding::kNone) {
        Add(Invariant::kCoverage, At(r, i) + " is padding, but the policy has padding: none",
            static_cast<std::int64_t>(r), i);
      }
    } else {
      seen_token = true;
    }
  }
}

// Every document, piece by piece in row order, tiles its tokens exactly once, as TileDocument (tiling.h)
// states with the policy's exemptions; only split policies cut a document into several pieces. False when a
// piece out of order (or a dropped document packed) stopped the check.
bool Checker::CheckDocumentTiling(const std::vector<std::vector<TilingPiece>>& pieces) {
  std::int64_t last_doc = -1;  // the stream's last document with an input
  for (std::size_t d = 0; d < docs_.size(); ++d)
    if (InputTokens(policy_, docs_[d].size()) > 0) last_doc = static_cast<std::int64_t>(d);
  for (std::size_t d = 0; d < docs_.size(); ++d) {
    const EffectiveDocument& doc = docs_[d];
    auto forbidden_split = [&] {
      if (pieces[d].size() > 1 && policy_.overflow != Overflow::kSplit) {
        Add(Invariant::kCoverage, "document '" + doc.uid + "' is split into " + std::to_string(pieces[d].size()) +
                                      " pieces, but the policy says overflow: " + Name(policy_.overflow));
      }
    };
    if (options_.partial_coverage) {
      // Auditing a dump: pieces may come in any order across rows (samplers shuffle); the caller checks that
      // they tile the document over the whole dump. Only a split the policy forbids is this case's concern.
      forbidden_split();
      continue;
    }
    const TilingContext context{request_.row_length, static_cast<std::int64_t>(d) == last_doc, false};
    const DocumentTiling tiling = TileDocument(doc.size(), pieces[d], policy_, context);
    if (!tiling.findings.empty() && tiling.findings.front().fault == TilingFault::kPlacedDropped) {
      const TilingFinding& f = tiling.findings.front();  // a row holds a document the policy drops
      Add(Invariant::kCoverage, "document '" + doc.uid + "' has " + std::to_string(InputTokens(policy_, doc.size())) +
                                    " input tokens, more than the row length " + std::to_string(request_.row_length) +
                                    ", and the policy says overflow: drop, but its tokens [" + std::to_string(f.begin) +
                                    ", " + std::to_string(f.end) + ") are packed",
          -1, -1, "in no row", "packed");
      return false;
    }
    if (!tiling.findings.empty() && tiling.findings.front().fault != TilingFault::kMissingTail) {
      const TilingFinding& f = tiling.findings.front();  // the first piece out of order stops the check
      Add(Invariant::kCoverage, "document '" + doc.uid + "': a piece starts at token " +
                                    std::to_string(f.piece_offset) + " where token " + std::to_string(f.expected) +
                                    " was expected (tokens " + (f.fault == TilingFault::kGap ? "dropped" : "repeated") +
                                    ")",
          -1, -1, std::to_string(f.expected), std::to_string(f.piece_offset));
      return false;
    }
    forbidden_split();
    if (tiling.findings.empty()) continue;
    const TilingFinding& tail = tiling.findings.back();  // tail.end: the document's inputs (TileDocument)
    Add(Invariant::kCoverage, "document '" + doc.uid + "': only " + std::to_string(tail.begin) + " of its " +
                                  std::to_string(tail.end) + (tail.end == doc.size() ? "" : " input") +
                                  " tokens are packed",
        -1, -1, std::to_string(tail.end), std::to_string(tail.begin));
  }
  return true;
}

// Segment starts at non-padding slots: every encoding must put them exactly where documents start. (How
// padding is cut into segments differs between systems and never reaches a loss.)
std::vector<std::int64_t> RealStarts(const SegmentStarts& starts, const OracleRow& row) {
  std::vector<std::int64_t> out;
  for (auto s : starts)
    if (!row.slots[static_cast<std::size_t>(s)].is_pad()) out.push_back(s);
  return out;
}

void Checker::CheckSegments() {
  result_.checked.insert(Invariant::kSegments);
  for (std::size_t r = 0; r < rows_.size(); ++r) {
    const CandidateRow& row = *rows_[r].row;
    const OracleRow& truth_row = result_.oracle->rows[r];
    const auto truth = RealStarts(TrueSegmentStarts(truth_row), truth_row);
    const auto n = truth_row.length();
    auto compare = [&](const char* encoding, const SegmentStarts& derived) {
      const auto got = RealStarts(derived, truth_row);
      if (got != truth) {
        Add(Invariant::kSegments, At(r) + ": " + encoding + " put document starts at " + Show(got) +
                                      ", the spans at " + Show(truth), static_cast<std::int64_t>(r), -1, Show(truth), Show(got));
      }
    };
    // Under segment_encodings: rows cu_seqlens, seq_lens and doc_ids name the row: one segment per run of
    // tokens, as the oracle's own encoding of the row cuts it (Materialize).
    auto compare_named = [&](const char* encoding, const SegmentStarts& derived) {
      if (policy_.segment_encodings == SegmentEncodings::kDocuments) return compare(encoding, derived);
      const auto row_named = RealStarts(ExpectedSegmentStarts(truth_row, policy_, encoding), truth_row);
      const auto got = RealStarts(derived, truth_row);
      if (got != row_named) {
        Add(Invariant::kSegments, At(r) + ": " + encoding + " put segment starts at " + Show(got) +
                                      ", but under segment_encodings: rows they name the row, starting at " +
                                      Show(row_named), static_cast<std::int64_t>(r), -1, Show(row_named), Show(got));
      }
    };
    if (row.cu_seqlens) compare_named("cu_seqlens", FromCuSeqlens(*row.cu_seqlens, n));
    if (row.seq_lens) compare_named("seq_lens", FromSeqLens(*row.seq_lens, n));
    if (row.doc_ids) compare_named("doc_ids", FromDocIds(*row.doc_ids));
    if (row.doc_ids) {
      if (const auto reused = ReusedDocId(*row.doc_ids)) {
        const auto id = (*row.doc_ids)[static_cast<std::size_t>(reused->second)];
        Add(Invariant::kSegments,
            At(r, reused->second) + ": doc_ids give id " + std::to_string(id) + " to the segment at slot " +
                std::to_string(reused->first) + " and again to this one, so a consumer that compares ids "
                "(FlexAttention's document mask) lets them attend to each other",
            static_cast<std::int64_t>(r), reused->second, "a new id", std::to_string(id));
      }
    }
    if (row.position_ids && policy_.boundary_source == BoundarySource::kPositionReset) {
      compare("position_ids (a segment starts where position == base, as the flash path reads them)",
              FromPositionReset(*row.position_ids, policy_.position_base));
    }
    if (row.position_ids && policy_.boundary_source == BoundarySource::kPositionStep) {
      compare("position_ids (a segment starts where positions do not step by 1, as SDPA reads them)",
              FromPositionStep(*row.position_ids));
    }
    // Under padding: left the row's first token follows the padding run, no delimiter (as slot 0 has none).
    std::size_t first_token = 0;
    while (policy_.padding == Padding::kLeft && first_token < truth_row.slots.size() &&
           truth_row.slots[first_token].is_pad())
      ++first_token;
    if (policy_.boundary_source == BoundarySource::kEodCloses && policy_.eos_id) {
      compare("EOD tokens", FromEodCloses(row.input_ids, *policy_.eos_id, first_token));
    }
    if (policy_.boundary_source == BoundarySource::kBosOpens && policy_.bos_id) {
      compare("BOS tokens", FromBosOpens(row.input_ids, *policy_.bos_id, first_token));
    }
    if (row.attention_mask) {
      std::int64_t last_real = -1;  // padding after the last real slot is a key no real query sees
      for (std::int64_t i = 0; i < n; ++i)
        if (!truth_row.slots[static_cast<std::size_t>(i)].is_pad()) last_real = i;
      for (std::int64_t i = 0; i < n; ++i) {
        const bool pad = truth_row.slots[static_cast<std::size_t>(i)].is_pad();
        const auto value = (*row.attention_mask)[static_cast<std::size_t>(i)];
        if (pad && i > last_real && value == 1) {
          AddNote(VisiblePaddingNote());
          continue;
        }
        if (value != (pad ? 0 : 1)) {
          Add(Invariant::kSegments, At(r, i) + ": the 2-D attention_mask says " +
                                        std::to_string((*row.attention_mask)[static_cast<std::size_t>(i)]) +
                                        " but the slot is " + (pad ? "padding" : "a document token"),
              static_cast<std::int64_t>(r), i);
          break;
        }
      }
      const bool has_zeros = std::find(row.attention_mask->begin(), row.attention_mask->end(), 0) != row.attention_mask->end();
      if (has_zeros && policy_.attention == Attention::kDocCausal && truth.size() > 1 && !row.cu_seqlens) {
        Add(Invariant::kSegments,
            At(r) + ": a 2-D attention_mask with zeros next to several documents: the HF flash path unpads by the "
                    "mask (one sequence per row) and ignores the position resets, so documents see each other",
            static_cast<std::int64_t>(r));
      }
    }
  }
}

void Checker::CheckBoundaryEncodingPresent() {
  result_.checked.insert(Invariant::kAttention);
  if (policy_.attention == Attention::kRowCausal) {
    // Under row_causal attention crosses documents: a segment encoding that isolates them (a dense mask
    // converted to doc_ids or seq_lens, varlen cu_seqlens) contradicts the declared rule.
    for (std::size_t r = 0; r < rows_.size(); ++r) {
      const CandidateRow& row = *rows_[r].row;
      const OracleRow& truth = result_.oracle->rows[r];
      const auto n = truth.length();
      auto isolates = [&](const SegmentStarts& starts) { return RealStarts(starts, truth).size() > 1; };
      const char* encoding = nullptr;
      try {
        if (row.cu_seqlens && isolates(FromCuSeqlens(*row.cu_seqlens, n))) encoding = "cu_seqlens";
        else if (row.seq_lens && isolates(FromSeqLens(*row.seq_lens, n))) encoding = "seq_lens";
        else if (row.doc_ids && isolates(FromDocIds(*row.doc_ids))) encoding = "doc_ids";
      } catch (const InputError&) {
      }
      if (encoding) {
        Add(Invariant::kAttention, At(r) + ": the row's " + encoding +
                                       " isolate its documents, but the policy declares row_causal attention "
                                       "(every position sees the whole row before it)",
            static_cast<std::int64_t>(r));
      }
    }
    return;
  }
  const std::string field = RequiredBoundaryField(policy_.boundary_source);
  for (std::size_t r = 0; r < rows_.size(); ++r) {
    if (HasRequiredBoundaryField(*rows_[r].row, policy_.boundary_source)) continue;
    // A backend without the encoding reads the row as one causal sequence: a violation only where that
    // changes a context set (encoding_notes.h).
    const OracleRow& truth = result_.oracle->rows[r];
    const auto piece_of = [&](std::int64_t i) {
      const Slot& s = truth.slots[static_cast<std::size_t>(i)];
      return s.is_pad() ? std::int64_t{-1} : static_cast<std::int64_t>(s.piece);
    };
    if (!RowCausalChangesContexts(truth.length(), piece_of, policy_)) {
      AddNote(MissingBoundaryEncodingNote(field));
    } else {
      Add(Invariant::kAttention, At(r) + std::string(": the policy isolates documents through ") +
                                     Name(policy_.boundary_source) +
                                     ", which the row lacks: a backend would attend across documents",
          static_cast<std::int64_t>(r));
    }
  }
}

void Checker::CheckPositions() {
  result_.checked.insert(Invariant::kPositions);
  for (std::size_t r = 0; r < rows_.size(); ++r) {
    const CandidateRow& row = *rows_[r].row;
    const OracleRow& want = result_.oracle->rows[r];
    if (!row.position_ids) {
      // Without position ids the model counts 0..n-1 along the row: right only for row_continuous at base 0.
      if (policy_.positions == Positions::kDocReset || policy_.position_base != 0) {
        bool single_piece_at_start = true;  // one document starting at offset 0: default positions are right
        for (const auto& s : want.slots)
          if (!s.is_pad() && (s.piece != want.slots[0].piece || want.slots[0].offset != 0)) single_piece_at_start = false;
        if (!(single_piece_at_start && policy_.position_base == 0 && policy_.split_positions != SplitPositions::kModulo)) {
          Add(Invariant::kPositions, At(r) + ": no position_ids, so the model counts along the row, but the policy "
                                             "resets positions per document",
              static_cast<std::int64_t>(r));
        }
      }
      continue;
    }
    for (std::size_t i = 0; i < want.position_ids.size(); ++i) {
      if (want.position_ids[i] && (*row.position_ids)[i] != *want.position_ids[i]) {
        std::vector<std::string> w, g;
        for (std::size_t k = 0; k < want.position_ids.size(); ++k) {
          w.push_back(want.position_ids[k] ? std::to_string(*want.position_ids[k]) : "*");
          g.push_back(std::to_string((*row.position_ids)[k]));
        }
        Add(Invariant::kPositions, At(r, static_cast<std::int64_t>(i)) + ": position " +
                                       std::to_string((*row.position_ids)[i]) + ", the policy says " +
                                       std::to_string(*want.position_ids[i]),
            static_cast<std::int64_t>(r), static_cast<std::int64_t>(i), Show(w), Show(g));
        break;
      }
    }
  }
}

void Checker::CheckTargets() {
  result_.checked.insert(Invariant::kTargets);
  for (std::size_t r = 0; r < rows_.size(); ++r) {
    const CandidateRow& row = *rows_[r].row;
    const OracleRow& want = result_.oracle->rows[r];
    if (row.loss_mask) {
      for (std::size_t i = 0; i < row.loss_mask->size(); ++i) {
        const double m = (*row.loss_mask)[i];
        if (m != 0.0 && m != 1.0) {
          Add(Invariant::kTargets, At(r, static_cast<std::int64_t>(i)) + ": loss_mask is " + Num(m) + ", not 0 or 1",
              static_cast<std::int64_t>(r), static_cast<std::int64_t>(i), "0 or 1", Num(m));
          return;
        }
      }
    }
    std::vector<DecodedTarget> got;
    try {
      got = DecodeTargets(row.labels, row.loss_mask ? &*row.loss_mask : nullptr, policy_);
    } catch (const InputError& e) {
      Add(Invariant::kTargets, At(r) + ": " + e.what(), static_cast<std::int64_t>(r));
      continue;
    }
    for (std::size_t i = 0; i < want.predictions.size(); ++i) {
      const Prediction& p = want.predictions[i];
      const Slot& s = want.slots[i];
      const auto slot = static_cast<std::int64_t>(i);
      if (got[i].weight != p.weight) {
        std::string why;
        if (s.is_pad()) why = "padding is never an input of a target";
        else if ((p.kind == TargetKind::kBoundary || p.kind == TargetKind::kRowEndNextDocument) && p.weight == 0 &&
                 policy_.boundary_target == BoundaryTarget::kExcluded)
          why = "it would predict the first token of the next document, and the policy excludes boundary targets";
        else if (p.kind == TargetKind::kNone) why = "it has no next token in its document under the policy";
        else if (p.weight == 0) why = "its target token is not supervised";
        else why = "its target, token " + std::to_string(p.target_offset) + " of '" +
                   result_.oracle->documents[static_cast<std::size_t>(p.target_doc)].uid + "', is supervised";
        Add(Invariant::kTargets, At(r, slot) + ": prediction has weight " + Num(got[i].weight) + ", expected " +
                                     Num(p.weight) + " (" + why + ")",
            static_cast<std::int64_t>(r), slot, Num(p.weight), Num(got[i].weight));
        return;
      }
      if (p.weight > 0 && got[i].target != p.target) {
        Add(Invariant::kTargets, At(r, slot) + ": prediction targets " + std::to_string(got[i].target) +
                                     ", but the next token of its document is " + std::to_string(p.target),
            static_cast<std::int64_t>(r), slot, std::to_string(p.target), std::to_string(got[i].target));
        return;
      }
    }
  }
}

// Counts of the oracle's rows under the policy's basis, per scope, and the kit's Σwℓ per micro-batch.
struct ScopeCounts {
  double global = 0;
  std::map<std::int64_t, double> per_rank;
  std::vector<double> per_microbatch;
  std::vector<std::optional<double>> loss_sums;  // Σwℓ of each micro-batch's valid targets; none: losses unknown

  // The count of micro-batch m (of rank `rank`) under `scope`; none for a scope that is not one of §5's.
  std::optional<double> Of(const std::string& scope, std::size_t m, std::int64_t rank) const {
    const std::optional<DenominatorScope> named = ScopeNamed(scope);
    if (!named) return std::nullopt;
    return Of(*named, m, rank);
  }
  double Of(DenominatorScope scope, std::size_t m, std::int64_t rank) const {
    return CountOfScope(scope, per_microbatch[m], per_rank.at(rank), global);
  }
};

std::string Show(const std::optional<double>& v) { return v ? Num(*v) : std::string("-"); }
bool Finite(const std::optional<double>& v) { return !v || std::isfinite(*v); }

ScopeCounts Checker::CountScopes(const OracleBatch& batch, const std::vector<CandidateMicrobatch>& mbs) const {
  const auto losses = options_.losses_known ? LossesOf(request_, batch.documents) : TargetLosses{};
  ScopeCounts counts;
  std::size_t flat = 0;
  for (const auto& mb : mbs) {
    double n = 0, s = 0;
    for (std::size_t k = 0; k < mb.rows.size(); ++k, ++flat) {
      const OracleRow& row = batch.rows[flat];
      n += RowDenominatorCount(row, policy_);
      if (options_.losses_known) {
        for (const auto& p : row.predictions)
          if (p.weight > 0) s += p.weight * losses[static_cast<std::size_t>(p.target_doc)][static_cast<std::size_t>(p.target_offset)];
      }
    }
    counts.per_microbatch.push_back(n);
    counts.loss_sums.push_back(options_.losses_known ? std::optional<double>(s) : std::nullopt);
    counts.per_rank[mb.rank] += n;
    counts.global += n;
  }
  return counts;
}

// One micro-batch's totals, field by field (producer_totals.h says what each field is checked against).
// False when it has a violation: the step objective is then not computed.
bool Checker::CheckMicrobatchTotals(const ProducerTotals& t, std::size_t m, std::int64_t rank, const ScopeCounts& counts,
                                    const std::string& who) {
  const std::string where = who + ", micro-batch " + std::to_string(m);
  if (auto problem = TotalsShapeProblem(t)) {
    Add(Invariant::kDenominator, where + ": " + *problem);
    return false;
  }
  if (!Finite(t.loss_sum) || !Finite(t.denominator) || !Finite(t.loss)) {
    Add(Invariant::kDenominator, where + ": a non-finite loss_sum, denominator or loss (" + Show(t.loss_sum) + ", " +
                                     Show(t.denominator) + ", " + Show(t.loss) +
                                     "): zero valid targets must be reported, never divided");
    return false;
  }
  const bool seq_mean = policy_.denominator == Denominator::kSequenceMean;
  bool ok = true;
  if (t.denominator) {
    const std::optional<double> expected = counts.Of(t.denominator_scope, m, rank);
    if (!expected) {
      Add(Invariant::kDenominator, where + ": denominator_scope '" + t.denominator_scope +
                                       "' is none of microbatch, step, global");
      return false;
    }
    const bool empty_ok = *expected == 0 && (*t.denominator == 0 || *t.denominator == 1);  // max(1, n) clamps
    const bool unseen_ranks = options_.partial_ranks && ScopeNamed(t.denominator_scope) == DenominatorScope::kGlobal;
    if (!seq_mean && !unseen_ranks && !Close(*t.denominator, *expected) && !empty_ok) {
      Add(Invariant::kDenominator, where + ": divided by " + Num(*t.denominator) + ", but its " + t.denominator_scope +
                                       " has " + Num(*expected) + " " +
                                       (policy_.denominator == Denominator::kAllPositions ? "positions" : "valid targets"),
          -1, -1, Num(*expected), Num(*t.denominator));
      ok = false;
    }
  }
  const std::optional<double>& kit_sum = counts.loss_sums[m];
  if (t.loss_sum && kit_sum && !LossClose(*t.loss_sum, *kit_sum)) {
    Add(Invariant::kLoss, where + ": loss_sum " + Num(*t.loss_sum) + ", but Σwℓ of its valid targets is " + Num(*kit_sum),
        -1, -1, Num(*kit_sum), Num(*t.loss_sum));
    return false;
  }
  if (t.loss && !seq_mean && !CheckGivenLoss(t, where, m, rank, counts)) ok = false;
  return ok;
}

// A given loss against its sum over its divisor. The sum is loss_sum, or the kit's Σwℓ where the producer
// gives none (known losses only); the divisor is the denominator, or where the producer gives none the count
// of the scope its policy implies (a loss alone says "the micro-batch loss under my policy").
bool Checker::CheckGivenLoss(const ProducerTotals& t, const std::string& where, std::size_t m, std::int64_t rank,
                             const ScopeCounts& counts) {
  const std::optional<double> sum = t.loss_sum ? t.loss_sum : counts.loss_sums[m];
  if (!sum) return true;  // a loss without loss_sum in a dump: nothing to compare it with (ProducerNotes)
  const std::string sum_name = t.loss_sum ? "loss_sum" : "Σwℓ of its valid targets";
  std::optional<double> divisor = t.denominator;
  std::string divisor_name = "denominator";
  if (!divisor) {
    const DenominatorScope scope = ImpliedScope(policy_.denominator);
    if (options_.partial_ranks && scope == DenominatorScope::kGlobal) return true;  // the count spans ranks not seen here
    divisor = counts.Of(scope, m, rank);
    divisor_name = std::string("the ") + ToString(scope) + " count (" + Num(*divisor) + ") that " + Name(policy_.denominator) + " divides by";
  }
  if (*divisor > 0 && !LossClose(*t.loss, *sum / *divisor)) {
    Add(Invariant::kLoss, where + ": loss " + Num(*t.loss) + " is not " + sum_name + " / " + divisor_name + " = " +
                              Num(*sum / *divisor), -1, -1, Num(*sum / *divisor), Num(*t.loss));
    return false;
  }
  if (*divisor == 0 && *t.loss != 0) {
    Add(Invariant::kLoss, where + ": loss " + Num(*t.loss) + " with a zero " + (t.denominator ? "denominator" : "count"));
    return false;
  }
  return true;
}

// The denominators against the policy's (DenominatorWeighting), where the step objective could not be
// compared: a micro-batch divided by a count its scope declares correctly can still weigh the step's
// micro-batches unequally (a mean of micro-batch means under global_targets). False when they do.
bool Checker::CheckWeighting(const std::vector<CandidateMicrobatch>& mbs, const std::vector<ProducerTotals>& totals,
                             const ScopeCounts& counts) {
  if (options_.partial_ranks && ImpliedScope(policy_.denominator) == DenominatorScope::kGlobal) return true;
  std::vector<MicrobatchDivision> divisions;
  for (std::size_t m = 0; m < totals.size(); ++m)
    if (totals[m].denominator) divisions.push_back({mbs[m].rank, m, counts.per_microbatch[m], *totals[m].denominator});
  Weighting w = DenominatorWeighting(policy_.denominator, divisions, "the step");
  for (auto& note : w.notes) AddNote(std::move(note));
  for (auto& problem : w.problems) Add(Invariant::kDenominator, std::move(problem));
  return w.problems.empty();
}

// The totals' values (denominator, loss), then, where they hold, the gradient the reducer backpropagated: a
// reducer whose reported loss is already wrong is reported under `loss`, its gradient following it.
void Checker::CheckTotals(const OracleBatch& batch, const std::vector<CandidateMicrobatch>& mbs,
                          const std::vector<ProducerTotals>& totals, const std::string& who,
                          std::int64_t dp_world_size) {
  const std::size_t before = result_.found();
  CheckTotalValues(batch, mbs, totals, who, dp_world_size);
  if (result_.found() > before || totals.empty() || !options_.losses_known || options_.partial_ranks) return;
  const ProducerTotals& t = totals.front();  // every micro-batch's scope is the same (CheckTotalValues)
  CheckGradient(batch, mbs, totals, who, DividedScope(t, policy_.denominator).value_or(DenominatorScope::kGlobal),
                dp_world_size);
}

void Checker::CheckTotalValues(const OracleBatch& batch, const std::vector<CandidateMicrobatch>& mbs,
                               const std::vector<ProducerTotals>& totals, const std::string& who,
                               std::int64_t dp_world_size) {
  result_.checked.insert(Invariant::kDenominator);
  const bool loss_given = std::any_of(totals.begin(), totals.end(),
                                      [](const ProducerTotals& t) { return t.loss_sum || t.loss; });
  (loss_given ? result_.checked : result_.not_applicable).insert(Invariant::kLoss);
  std::vector<const ProducerTotals*> given;
  for (const auto& t : totals) given.push_back(&t);
  for (auto& note : ProducerNotes(given, options_)) AddNote(std::move(note));
  const ScopeCounts counts = CountScopes(batch, mbs);
  bool totals_ok = true;
  for (std::size_t m = 0; m < totals.size(); ++m)
    if (!CheckMicrobatchTotals(totals[m], m, mbs[m].rank, counts, who)) totals_ok = false;
  if (!totals_ok) return;
  // The step objective, where the totals and the losses allow it, decides; where they do not, what the
  // denominators weigh is all there is to judge (a guard, a dump of denominators alone).
  const std::size_t before = result_.found();
  if (!CheckStepObjective(batch, mbs, totals, counts, who, dp_world_size) && result_.found() == before)
    CheckWeighting(mbs, totals, counts);
}

// The step objective the reported losses give under the declared formula, against the oracle's (or, without
// per-target losses, against the one the producer's loss sums give). False when it could not be compared.
bool Checker::CheckStepObjective(const OracleBatch& batch, const std::vector<CandidateMicrobatch>& mbs,
                                 const std::vector<ProducerTotals>& totals, const ScopeCounts& counts,
                                 const std::string& who, std::int64_t dp_world_size) {
  if (policy_.denominator == Denominator::kSequenceMean && !options_.losses_known) return false;  // needs per-target losses
  if (options_.partial_ranks) return false;  // the step objective combines ranks not seen here
  if (totals.empty()) return false;  // an empty step: nothing was reported, nothing to combine

  // How a trainer combines the micro-batch losses follows from what each was divided by: losses divided by
  // the global count add up (HF, torchtune); by the rank's count, the ranks' gradients are averaged
  // (DDP's 1/R); by the micro-batch's count, also averaged over the accumulation steps (Megatron's
  // 1/num_microbatches). Sequence means report each micro-batch's share, which adds up. A micro-batch
  // without a denominator divided by the scope its policy implies.
  auto scope_of = [&](const ProducerTotals& t) {
    return t.denominator ? t.denominator_scope : std::string(ToString(ImpliedScope(policy_.denominator)));
  };
  auto label = [&](const ProducerTotals& t) { return scope_of(t) + (t.denominator ? "" : " (implied by the policy)"); };
  const std::string scope = scope_of(totals.front());
  for (const auto& t : totals) {
    if (scope_of(t) != scope) {
      Add(Invariant::kDenominator, who + " reports micro-batches with different denominator scopes ('" +
                                       label(totals.front()) + "' and '" + label(t) + "')");
      return true;
    }
  }
  // Without per-target losses, the kit's token mean comes from the producer's loss sums.
  std::vector<double> sums;
  for (const auto& t : totals)
    if (auto s = GivenLossSum(t)) sums.push_back(*s);
  const bool sums_given = sums.size() == totals.size();
  if (!options_.losses_known && sums_given) {
    double total = 0, total_n = 0;
    for (std::size_t m = 0; m < totals.size(); ++m) {
      total += sums[m];
      total_n += counts.per_microbatch[m];
    }
    if (total_n > 0) result_.token_mean = total / total_n;
  }

  // The step objective the reported losses give under the declared formula, against the oracle's.
  double sum = 0;
  for (const auto& t : totals) {
    const std::optional<double> loss = GivenLoss(t);
    if (!loss) return false;  // a micro-batch without its loss: no step objective (ProducerNotes says so)
    sum += *loss;
  }
  const auto R = static_cast<double>(dp_world_size);
  std::int64_t max_micro = 0;
  for (const auto& mb : mbs) max_micro = std::max(max_micro, mb.micro_step);
  const auto M = static_cast<double>(max_micro + 1);
  // (a scope that is none of §5's is the `denominator` violation CheckTotalValues found: added up meanwhile)
  const double declared =
      sum * CombineByScope(policy_.denominator, ScopeNamed(scope).value_or(DenominatorScope::kGlobal), R, M).factor;
  result_.declared_objective = declared;
  double want = 0;
  if (options_.losses_known) {
    const auto losses = LossesOf(request_, batch.documents);
    const auto objective = Objective(batch, losses, policy_.denominator, policy_.count_basis,
                                     StepShape{dp_world_size, max_micro + 1});
    want = objective.has_targets ? objective.value : 0.0;
  } else {
    if (!sums_given) return false;  // a loss alone, without per-target losses: nothing to compare (ProducerNotes)
    // From the producer's loss sums and the kit's counts, under the declared formula.
    double total = 0, total_n = 0;
    std::map<std::int64_t, std::pair<double, double>> per_rank;
    double per_mb = 0;
    for (std::size_t m = 0; m < totals.size(); ++m) {
      total += sums[m];
      total_n += counts.per_microbatch[m];
      per_rank[mbs[m].rank].first += sums[m];
      per_rank[mbs[m].rank].second += counts.per_microbatch[m];
      per_mb += sums[m] / std::max(1.0, counts.per_microbatch[m]);
    }
    switch (policy_.denominator) {
      case Denominator::kGlobalTargets:
      case Denominator::kAllPositions: want = total_n > 0 ? total / total_n : 0; break;
      case Denominator::kRankMean: {
        double rank_sum = 0;
        for (const auto& [rank, sn] : per_rank) rank_sum += sn.first / std::max(1.0, sn.second);
        want = rank_sum / R;
        break;
      }
      case Denominator::kMicrobatchMean: want = per_mb / (R * M); break;
      case Denominator::kSequenceMean: break;
    }
  }
  if (!LossClose(declared, want)) {
    std::string gap;
    if (result_.token_mean) gap = " (the global token mean Σwℓ/Σw is " + Num(*result_.token_mean) + ")";
    Add(Invariant::kLoss, who + "'s micro-batch losses give the step objective " + Num(declared) + ", but " +
                              Name(policy_.denominator) + " over the step is " + Num(want) + gap,
        -1, -1, Num(want), Num(declared));
  }
  return true;
}

// `gradient`: what the reducer backpropagates, differentiated with respect to each per-target loss it was
// handed, against the weight the declared objective gives that loss (ObjectiveWeights: m / Σm over the step
// under global_targets). The micro-batches' backward tensors combine as their losses do in CheckTotals (added
// up under a global scope, averaged over the ranks under a step scope, over ranks and accumulation steps under
// a micro-batch scope), so a reducer that backpropagates exactly the loss it reports passes exactly when that
// loss is right; one whose value is right and whose gradient is not (a detached or rescaled backward tensor,
// Liger-Kernel #968), or that backpropagates another value than it reports (torchtitan PR #4194), fails here.
// Not checked (not applicable) when no micro-batch handed back a gradient.
void Checker::CheckGradient(const OracleBatch& batch, const std::vector<CandidateMicrobatch>& mbs,
                            const std::vector<ProducerTotals>& totals, const std::string& who, DenominatorScope scope,
                            std::int64_t dp_world_size) {
  if (std::none_of(totals.begin(), totals.end(), [](const ProducerTotals& t) { return t.gradient.has_value(); }))
    return;
  result_.checked.insert(Invariant::kGradient);
  std::int64_t max_micro = 0;
  for (const auto& mb : mbs) max_micro = std::max(max_micro, mb.micro_step);
  const auto R = static_cast<double>(dp_world_size);
  const auto M = static_cast<double>(max_micro + 1);
  const auto [factor, combined] = CombineByScope(policy_.denominator, scope, R, M);
  const auto weights = ObjectiveWeights(batch, policy_.denominator, policy_.count_basis,
                                        StepShape{dp_world_size, max_micro + 1});
  double scale = 0;
  for (const auto& row : weights)
    for (double w : row) scale = std::max(scale, std::fabs(w));
  const std::string rule = policy_.denominator == Denominator::kGlobalTargets
                               ? std::string("m / Σm over the step")
                               : std::string(Name(policy_.denominator)) + "'s weight over the step";
  for (std::size_t m = 0, flat = 0; m < totals.size(); flat += mbs[m].rows.size(), ++m) {
    const std::string where = who + ", micro-batch " + std::to_string(m);
    const auto& g = totals[m].gradient;
    if (g && g->size() != mbs[m].rows.size()) {
      Add(Invariant::kGradient, where + ": a gradient for " + std::to_string(g->size()) + " rows of its " +
                                    std::to_string(mbs[m].rows.size()));
      continue;
    }
    std::int64_t off = 0, weighted = 0;
    std::optional<Violation> first;
    for (std::size_t k = 0; k < mbs[m].rows.size(); ++k) {
      const auto& want = weights[flat + k];
      if (g && (*g)[k].size() != want.size()) {
        Add(Invariant::kGradient, where + " row " + std::to_string(k) + ": a gradient for " +
                                      std::to_string((*g)[k].size()) + " slots of its " + std::to_string(want.size()),
            static_cast<std::int64_t>(flat + k));
        first.reset();
        off = -1;
        break;
      }
      for (std::size_t i = 0; i < want.size(); ++i) {
        const double expected = want[i];
        const double actual = g ? factor * (*g)[k][i] : 0.0;
        weighted += expected != 0 ? 1 : 0;
        const bool close = std::isfinite(actual) &&
                           std::fabs(actual - expected) <= 1e-5 * std::max(std::fabs(actual), std::fabs(expected)) +
                                                                1e-6 * scale + 1e-300;
        if (close) continue;
        ++off;
        if (first) continue;
        first = Violation{Invariant::kGradient,
                          where + " row " + std::to_string(k) + " slot " + std::to_string(i) + ": " +
                              (g ? "what it backpropagates" : "nothing it backpropagates") +
                              " (its micro-batches' backward tensors " + combined +
                              ") gives this target's loss the gradient " + Num(actual) + ", but " + rule + " is " +
                              Num(expected) + (expected == 0 ? " (not a weighted target)" : ""),
                          static_cast<std::int64_t>(flat + k),
                          static_cast<std::int64_t>(i),
                          Num(expected),
                          Num(actual),
                          {}};
      }
    }
    if (first) {
      first->sentence += " (slots off in this micro-batch: " + std::to_string(off) + "; its weighted targets: " +
                         std::to_string(weighted) + ")";
      result_.violations.push_back(std::move(*first));
    }
  }
}

// The step-level property of a loss reducer: the step as packed, then the same rows split in the ways that
// broke real trainers (splits.h: longer or no accumulation, two ranks, a rank or a micro-batch without a valid
// target, context-parallel shards). Under every split its totals must give the declared objective, which under
// global_targets is Σwℓ/Σw over the step whatever the split. The first split that breaks an invariant is the
// case's failure, reported with that split's rows.
void Checker::CheckReducer() {
  if (!result_.oracle) {
    result_.not_applicable.insert(Invariant::kDenominator);
    result_.not_applicable.insert(Invariant::kLoss);
    return;
  }
  const auto splits = ReducerSplits(layout_, request_.dp_world_size, static_cast<std::uint64_t>(request_.id));
  const auto losses = LossesOf(request_, result_.oracle->documents);
  std::optional<double> packed_objective;
  for (std::size_t s = 0; s < splits.size(); ++s) {
    const StepSplit& split = splits[s];
    OracleBatch batch;
    std::vector<CandidateMicrobatch> mbs;
    if (s == 0) {
      batch = *result_.oracle;
      mbs = microbatches_;
    } else {
      batch = Materialize(request_.documents, split.layout, policy_, request_.delimiters);
      PackRequest dealt = request_;
      dealt.dp_world_size = split.dp_world_size;
      mbs = ReferenceMicrobatches(batch, dealt);
    }
    ReduceRequest req;
    req.policy = policy_;
    req.dp_world_size = split.dp_world_size;
    req.context_parallel_size = split.context_parallel_size;
    req.context_parallel_scheme = split.cp_scheme;
    for (const auto& mb : mbs) {
      auto& rows = req.cp_shards.emplace_back();
      for (const auto& row : mb.rows) rows.push_back(CpShards(row, split.context_parallel_size, split.cp_scheme));
    }
    std::int64_t max_micro = 0;
    for (const auto& mb : mbs) max_micro = std::max(max_micro, mb.micro_step);
    req.grad_accum_steps = max_micro + 1;
    if (s == 0 && options_.optimizer_steps > 1) {
      // The packed step as a generation batch feeding optimizer steps of A = ⌈M/K⌉ micro-steps (the last may
      // hold fewer): as many as its M micro-steps make.
      const std::int64_t M = max_micro + 1;
      req.grad_accum_steps = (M + options_.optimizer_steps - 1) / options_.optimizer_steps;
      req.optimizer_steps = (M + req.grad_accum_steps - 1) / req.grad_accum_steps;
    }
    req.microbatches = mbs;
    for (auto& mb : req.microbatches) mb.producer.reset();
    req.slot_losses = PerSlot(batch, mbs, losses);
    // A declared selection: the reducer is told the rule and every slot's score; its totals are judged against
    // the selected weights, chosen within each optimizer step (the whole step without a schedule: then
    // grad_accum_steps is past every micro-step).
    OracleBatch judged = batch;
    if (options_.selection.active()) {
      const TargetScores scores = KitScores(request_, batch.documents);
      req.selection = options_.selection;
      req.slot_scores = PerSlot(batch, mbs, scores);
      judged = SelectedTargets(batch, scores, options_.selection, req.grad_accum_steps);
    }
    const std::string selecting = options_.selection.active()
                                      ? " (keeping the top " + Num(options_.selection.top_fraction) +
                                            " of each optimizer step's targets by score)"
                                      : std::string();
    const std::string who = s == 0 ? "the loss reducer" + selecting
                                   : "the loss reducer" + selecting + " (the same rows split " + split.name + ")";
    const std::size_t before = result_.found();
    ReduceResult totals;
    try {
      totals = candidate_.reducer->Reduce(req);
    } catch (const std::exception& e) {
      Add(Invariant::kLoss, who + " threw: " + e.what());
    }
    if (result_.found() == before && totals.size() != mbs.size()) {
      Add(Invariant::kDenominator, who + " returned " + std::to_string(totals.size()) + " totals for " +
                                       std::to_string(mbs.size()) + " micro-batches");
    }
    if (result_.found() == before && req.optimizer_steps > 1) {
      CheckScheduledTotals(judged, mbs, totals, who, split.dp_world_size, req.grad_accum_steps, req.optimizer_steps);
    } else if (result_.found() == before) {
      CheckTotals(judged, mbs, totals, who, split.dp_world_size);
    }
    if (s == 0 || result_.found() > before) result_.reduced = totals;
    if (result_.found() > before) {
      if (options_.selection.active()) AddNote(SelectionNote(batch, judged, mbs, options_.selection.top_fraction));
      if (s > 0 && !candidate_.packer) {
        result_.oracle = batch;  // draw the rows of the split that broke it
        microbatches_ = mbs;
        rows_ = Flatten(microbatches_);
      }
      return;
    }
    if (result_.declared_objective) result_.split_objectives.push_back({split.name, *result_.declared_objective});
    if (s == 0) packed_objective = result_.declared_objective;
  }
  result_.declared_objective = packed_objective;
}

// A generation batch feeding K optimizer steps of A micro-steps each (ReduceRequest::optimizer_steps): every
// optimizer step's micro-batches, their micro-steps counted from 0 again, checked as a step of their own, so
// that the declared objective is each optimizer step's (oracle/denominator.h states it per optimizer step). The
// first optimizer step that breaks an invariant is the failure.
void Checker::CheckScheduledTotals(const OracleBatch& batch, const std::vector<CandidateMicrobatch>& mbs,
                                   const ReduceResult& totals, const std::string& who, std::int64_t dp_world_size,
                                   std::int64_t accumulation, std::int64_t optimizer_steps) {
  for (std::int64_t o = 0; o < optimizer_steps; ++o) {
    OracleBatch step = batch;
    step.rows.clear();
    std::vector<CandidateMicrobatch> step_mbs;
    ReduceResult step_totals;
    for (std::size_t m = 0, flat = 0; m < mbs.size(); flat += mbs[m].rows.size(), ++m) {
      if (OptimizerStepOf(mbs[m].micro_step, accumulation) != o) continue;
      step_mbs.push_back(mbs[m]);
      step_mbs.back().micro_step -= o * accumulation;
      step_totals.push_back(totals[m]);
      for (std::size_t k = 0; k < mbs[m].rows.size(); ++k) {
        step.rows.push_back(batch.rows[flat + k]);
        step.rows.back().micro_step -= o * accumulation;
      }
    }
    if (step_mbs.empty()) continue;
    const std::size_t before = result_.found();
    CheckTotals(step, step_mbs, step_totals,
                who + " (optimizer step " + std::to_string(o) + " of the " + std::to_string(optimizer_steps) +
                    " its generation batch feeds, " + std::to_string(accumulation) + " micro-steps each)",
                dp_world_size);
    if (result_.found() > before) return;
  }
}

void Checker::CheckConsumer() {
  if (!result_.oracle) {
    result_.not_applicable.insert(Invariant::kAttention);
    return;
  }
  result_.checked.insert(Invariant::kAttention);
  // The consumer sees whole micro-batches (a backend gets the batch tensor); row r of the step is row k of
  // micro-batch m, in order. It answers runs (mask_runs.h): rows of any length, dense answers converted.
  consumer_masks_.assign(rows_.size(), std::nullopt);
  std::vector<std::optional<std::string>> failures(rows_.size());
  std::vector<std::optional<ComputedWork>> work(microbatches_.size());  // what each micro-batch's consumer computed
  for (std::size_t m = 0, flat = 0; m < microbatches_.size(); flat += microbatches_[m].rows.size(), ++m) {
    std::vector<MaskRuns> masks;
    std::string failure;
    try {
      ConsumerAnswer answer = candidate_.consumer->ConsumeMicrobatchWithWork(
          microbatches_[m], policy_, StepLayoutOf(microbatches_, m, request_.dp_world_size, static_cast<std::uint64_t>(request_.id)));
      masks = std::move(answer.masks);
      work[m] = std::move(answer.work);
      if (masks.size() != microbatches_[m].rows.size()) {
        failure = "the attention consumer returned " + std::to_string(masks.size()) + " masks for a micro-batch of " +
                  std::to_string(microbatches_[m].rows.size()) + " rows";
      }
    } catch (const std::exception& e) {
      failure = std::string("the attention consumer threw: ") + e.what();
    }
    for (std::size_t k = 0; k < microbatches_[m].rows.size() && flat + k < rows_.size(); ++k) {
      if (failure.empty()) consumer_masks_[flat + k] = std::move(masks[k]);
      else failures[flat + k] = failure;
    }
  }
  for (std::size_t r = 0; r < rows_.size(); ++r) {
    if (failures[r]) {
      Add(Invariant::kAttention, At(r) + ": " + *failures[r], static_cast<std::int64_t>(r));
      continue;
    }
    if (const auto bad = Malformed(*consumer_masks_[r], result_.oracle->rows[r].length())) {
      Add(Invariant::kAttention, At(r) + ": " + *bad, static_cast<std::int64_t>(r));
      consumer_masks_[r].reset();
      continue;
    }
    CompareConsumerMask(r);
  }
  CheckWork(work);
}

// efficiency of what the consumer computes (consumer_work.h): each micro-batch whose consumer said what it
// computed, its well-formed masks beside it, against the least the declared rule needs.
void Checker::CheckWork(const std::vector<std::optional<ComputedWork>>& work) {
  for (std::size_t m = 0, flat = 0; m < microbatches_.size(); flat += microbatches_[m].rows.size(), ++m) {
    if (!work[m] || flat + microbatches_[m].rows.size() > rows_.size()) continue;
    std::vector<const MaskRuns*> masks;
    std::vector<const OracleRow*> truth;
    for (std::size_t k = 0; k < microbatches_[m].rows.size(); ++k) {
      masks.push_back(consumer_masks_[flat + k] ? &*consumer_masks_[flat + k] : nullptr);
      truth.push_back(&result_.oracle->rows[flat + k]);
    }
    internal::CheckConsumerWork(*work[m], masks, truth, policy_, "micro-batch " + std::to_string(m),
                                static_cast<std::int64_t>(flat), result_);
  }
}

// Row r's consumer mask against the rule: the wrong queries found from the runs (attention_runs.h, pinned to
// Attends), then their cells listed by Attends itself, element by element: every wrong query's in a row of at
// most kDenseConsumerMaxRowLength slots, the first kListedQueries' in a longer one (the report draws a window
// around the first). The count in the sentence covers every wrong query.
void Checker::CompareConsumerMask(std::size_t r) {
  constexpr std::size_t kListedQueries = 8;
  const OracleRow& want = result_.oracle->rows[r];
  const MaskRuns& mask = *consumer_masks_[r];
  const std::int64_t n = want.length();
  const auto wrong = DisagreeingQueries(mask, PieceIds(want), policy_);
  if (wrong.empty()) return;
  Violation v{Invariant::kAttention, "", static_cast<std::int64_t>(r), -1, "", "", {}};
  std::int64_t disagreeing = 0;
  for (std::size_t q = 0; q < wrong.size(); ++q) {
    disagreeing += wrong[q].keys;
    if (n > kDenseConsumerMaxRowLength && q >= kListedQueries) continue;
    const std::int64_t i = wrong[q].query;
    std::int64_t listed = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      if (mask.Visible(i, j) == Attends(want, policy_, i, j)) continue;
      v.cells.push_back({i, j});
      ++listed;
    }
    if (listed != wrong[q].keys) {
      throw std::logic_error("packoracle: the attention comparison over runs found " + std::to_string(wrong[q].keys) +
                             " wrong keys for query " + std::to_string(i) + " of " + At(r) + ", Attends " +
                             std::to_string(listed) + " (a bug of the kit)");
    }
  }
  const auto [qi, kj] = v.cells.front();
  const bool visible = mask.Visible(qi, kj);
  const bool future = kj > qi;
  v.slot = qi;
  v.sentence = At(r) + ": query " + std::to_string(qi) + (visible ? " may attend" : " may not attend") + " key " +
               std::to_string(kj) +
               (future ? " (a future position)" : (want.slots[static_cast<std::size_t>(kj)].is_pad() ? " (padding)" : "")) +
               ", the policy says " + (visible ? "no" : "yes") + " (" + std::to_string(disagreeing) + " cells disagree)";
  result_.violations.push_back(v);
}

// The tiny decoder on the rows as a backend is fed them (internal::CheckPackingInvariance says how). A row
// whose consumer failed is left to `attention`, which reports it.
void Checker::CheckInvariance() {
  std::vector<internal::InvarianceRow> rows;
  const bool consumed = candidate_.consumer != nullptr;
  for (std::size_t r = 0; r < rows_.size(); ++r) {
    if (consumed && !consumer_masks_[r]) return;  // the consumer failed on it: attention reports the failure
    rows.push_back({rows_[r].row, At(r), consumed ? &*consumer_masks_[r] : nullptr});
  }
  internal::CheckPackingInvariance(rows, *result_.oracle, policy_, result_);
}

// The value consumer on every micro-batch and on each document piece alone (value_invariance.h), on rows the
// decoder would run on too: it is called once per piece, so its cases stay as small as the decoder's.
void Checker::CheckValues() {
  if (!result_.oracle || !options_.packing_invariance || request_.row_length > options_.decoder_max_row_length) return;
  std::vector<std::string> where;
  for (std::size_t r = 0; r < rows_.size(); ++r) where.push_back(At(r));
  internal::CheckValueInvariance(*candidate_.values, microbatches_, where, *result_.oracle, policy_,
                                 {request_.dp_world_size, static_cast<std::uint64_t>(request_.id)}, result_);
}

}  // namespace

CheckOptions DumpStepOptions() {
  CheckOptions o;
  o.determinism = false;
  o.partial_coverage = true;
  o.losses_known = false;
  o.packing_invariance = false;
  o.totals_owner = "the loss reducer";  // the step's reported totals come from its loss code
  return o;
}

CaseResult CheckCase(Candidate& candidate, const PackRequest& request, const CheckOptions& options) {
  ValidatePolicy(request.policy);
  if (request.row_length <= 0 || request.micro_batch_rows <= 0 || request.dp_world_size <= 0) {
    throw InputError("request " + std::to_string(request.id) + ": row_length, micro_batch_rows and dp_world_size must be positive");
  }
  // Documents without given losses get 1 nat per target, so that a hand-written case needs only documents.
  PackRequest filled = request;
  for (const auto& doc : Effective(request.documents, request.policy, request.delimiters)) {
    auto& losses = filled.target_losses[doc.uid];
    if (losses.size() < static_cast<std::size_t>(doc.size())) losses.resize(static_cast<std::size_t>(doc.size()), 1.0);
  }
  CaseResult result;
  Checker(candidate, filled, options, result).Run();
  return result;
}

}  // namespace packoracle
