// The candidate interface: what a packer, a loss reducer or an attention consumer under test must provide.
//
// A candidate fills any subset of four roles:
//   packer              documents → micro-batches of rows with their encodings (and doc_spans, the truth)
//   loss reducer        rows + per-slot losses → loss_sum, denominator, loss per micro-batch
//   attention consumer  one row (or one whole micro-batch) → the mask a backend really uses (dense, or as
//                       runs of visible keys per query: mask_runs.h, for rows of real length)
//   value consumer      one micro-batch → per-position output values (and parameter gradients), compared
//                       with each document piece run alone (ValueConsumerRole)
// Properties needing a role the candidate lacks are reported as not applicable, never as passed.
//
// The types mirror the exec protocol of DESIGN §6 (a request, `microbatch` records, `producer` totals), so
// the same checks serve an in-process C++ candidate and an external process.
//
//   struct MyPacker {
//     packoracle::PackResult Pack(const packoracle::PackRequest& request);   // the only requirement
//   };
//   auto candidate = packoracle::MakeCandidate("my-packer", MyPacker{});
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <concepts>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "packoracle/oracle/document.h"
#include "packoracle/oracle/policy.h"
#include "packoracle/oracle/selection.h"
#include "packoracle/properties/mask_runs.h"

namespace packoracle {

// One generated case: the input of a packer (the exec protocol's `request`).
struct PackRequest {
  std::int64_t id = 0;
  std::int64_t row_length = 0;        // L
  std::int64_t micro_batch_rows = 1;  // rows per micro-batch
  std::int64_t dp_world_size = 1;     // data-parallel ranks sharing the step
  Policy policy;                      // fully resolved
  std::vector<Document> documents;
  // target_losses[uid][k]: the loss ℓ of predicting token k of that document after the policy's delimiters
  // are added (entry 0 is used only where the policy makes a document's first token a target).
  std::map<std::string, std::vector<double>> target_losses;
  // kIncluded when the documents already carry the policy's delimiters (a dump's document records).
  Delimiters delimiters = Delimiters::kAdd;
};

// The ground truth of where a document piece sits: tokens [doc_offset, doc_offset + length) of the effective
// document `doc_uid` occupy slots [start, start + length) of the row.
struct DocSpan {
  std::string doc_uid;
  std::int64_t start = 0;
  std::int64_t length = 0;
  std::int64_t doc_offset = 0;
  bool operator==(const DocSpan&) const = default;
};

// One row as the producer emits it (DESIGN §5). Optional encodings are absent when the producer has none.
struct CandidateRow {
  std::vector<Token> input_ids;
  std::vector<Token> labels;                                // under the policy's label_alignment
  std::optional<std::vector<double>> loss_mask;             // Megatron; indexed like the targets
  std::optional<std::vector<std::int64_t>> position_ids;    // as fed to the model
  std::optional<std::vector<std::int64_t>> cu_seqlens;      // row-local, 0 .. row length
  std::optional<std::vector<std::int64_t>> seq_lens;        // torchtune style
  std::optional<std::vector<std::int64_t>> doc_ids;         // -1 for padding
  std::optional<std::vector<std::int64_t>> attention_mask;  // 2-D per token 0/1 (HF padded)
  std::vector<DocSpan> doc_spans;                           // required
  bool operator==(const CandidateRow&) const = default;
};

// One row viewed where its holder keeps it: the same fields as CandidateRow, as spans. The fast verifier reads
// rows through it, so that a caller holding a batch in its own arrays (check_batch: the training batch's
// tensors) is checked where the batch lies, not copied into CandidateRows first; a row is copied (Copy) only
// for the oracle's report of a step that fails. The views are valid while the holder's storage is.
struct RowView {
  std::span<const Token> input_ids;
  std::span<const Token> labels;
  std::optional<std::span<const double>> loss_mask;
  std::optional<std::span<const std::int64_t>> position_ids;
  std::optional<std::span<const std::int64_t>> cu_seqlens;
  std::optional<std::span<const std::int64_t>> seq_lens;
  std::optional<std::span<const std::int64_t>> doc_ids;
  std::optional<std::span<const std::int64_t>> attention_mask;
  std::span<const DocSpan> doc_spans;

  static RowView Of(const CandidateRow& row) {
    auto view = [](const auto& field) {
      using Span = std::span<const typename std::decay_t<decltype(*field)>::value_type>;
      return field ? std::optional<Span>(Span(*field)) : std::nullopt;
    };
    return {row.input_ids, row.labels,     view(row.loss_mask), view(row.position_ids), view(row.cu_seqlens),
            view(row.seq_lens), view(row.doc_ids), view(row.attention_mask), row.doc_spans};
  }
  // The row as a CandidateRow of its own (what the oracle reads).
  CandidateRow Copy() const {
    auto copy = [](const auto& field) {
      using Vector = std::vector<typename std::decay_t<decltype(*field)>::value_type>;
      return field ? std::optional<Vector>(Vector(field->begin(), field->end())) : std::nullopt;
    };
    return {{input_ids.begin(), input_ids.end()}, {labels.begin(), labels.end()}, copy(loss_mask),
            copy(position_ids), copy(cu_seqlens), copy(seq_lens), copy(doc_ids), copy(attention_mask),
            {doc_spans.begin(), doc_spans.end()}};
  }
};

// What a producer's denominator counts (DESIGN §5 `denominator_scope`), stated once: its micro-batch's count,
// its rank's over the step's micro-batches, or the step's over every rank. ProducerTotals carries the name as
// given: a name that is none of these is the producer's `denominator` violation, not unreadable input.
enum class DenominatorScope { kMicrobatch, kStep, kGlobal };
inline constexpr std::array<DenominatorScope, 3> kDenominatorScopes = {
    DenominatorScope::kMicrobatch, DenominatorScope::kStep, DenominatorScope::kGlobal};
inline const char* ToString(DenominatorScope scope) {
  switch (scope) {
    case DenominatorScope::kMicrobatch: return "microbatch";
    case DenominatorScope::kStep: return "step";
    case DenominatorScope::kGlobal: return "global";
  }
  return "?";
}
// The scope named `name`, none for a name that is not one of §5's.
inline std::optional<DenominatorScope> ScopeNamed(std::string_view name) {
  for (const auto scope : kDenominatorScopes)
    if (name == ToString(scope)) return scope;
  return std::nullopt;
}

// What the producer computed for one micro-batch (DESIGN §5 `producer`): any non-empty subset of loss_sum,
// denominator and loss, as the producer has them (a Trainer knows its count, not always a loss sum), with
// denominator_scope given exactly when a denominator is. Each given field is checked for what it says
// (properties/producer_totals.h); what the absent fields would have allowed is reported as not checked.
//   {"denominator": 7, "denominator_scope": "global"}            a count alone: checked as the count
//   {"loss_sum": 4.0}                                              a sum alone: checked as Σwℓ
//   {"loss": 0.571}                                                the micro-batch loss under the policy
//   {"loss_sum": 4.0, "denominator": 7, "denominator_scope": "global", "loss": 0.571}   everything
struct ProducerTotals {
  std::optional<double> loss_sum;     // Σ w·ℓ over its valid targets
  std::optional<double> denominator;  // the number loss_sum was divided by
  std::string denominator_scope;      // "microbatch" | "step" | "global"; "" exactly when no denominator
  std::optional<double> loss;         // loss_sum / denominator
  // A loss reducer that backpropagated (python: fuzz(gradient=True)): [row][slot], the gradient with respect
  // to each per-target loss of this micro-batch (ReduceRequest::slot_losses) of what the reducer backpropagates
  // over the step, its micro-batches' backward tensors combined as their losses are (the `gradient`
  // invariant). Absent: the gradient is not checked.
  std::optional<std::vector<std::vector<double>>> gradient;
  // Equal when every field is; a NaN equals a NaN here (a candidate that gives the same NaN twice is
  // deterministic: its NaN is a denominator problem, not a determinism one).
  bool operator==(const ProducerTotals& o) const {
    auto same = [](const std::optional<double>& a, const std::optional<double>& b) {
      if (a.has_value() != b.has_value()) return false;
      return !a || *a == *b || (std::isnan(*a) && std::isnan(*b));
    };
    return same(loss_sum, o.loss_sum) && same(denominator, o.denominator) &&
           denominator_scope == o.denominator_scope && same(loss, o.loss) && gradient == o.gradient;
  }
};

// The fields of a `producer` object (DESIGN §5), stated once, in the order the writers write them: the three
// totals, each a number the producer may leave out, and the denominator's scope (`number` null). Every reader
// and writer of the object (interchange/request_json.cc, fastcheck/jsonl_reader.cc, the binding's convert.cc,
// `packoracle schema` for packoracle.dump.format) walks this table.
struct ProducerTotalsField {
  std::string_view name;
  std::optional<double> ProducerTotals::*number;
};
inline constexpr std::array<ProducerTotalsField, 4> kProducerTotalsFields = {{
    {"loss_sum", &ProducerTotals::loss_sum},
    {"denominator", &ProducerTotals::denominator},
    {"denominator_scope", nullptr},
    {"loss", &ProducerTotals::loss},
}};
// The scope's entry: the one without a number.
inline constexpr std::string_view kDenominatorScopeField = [] {
  for (const auto& field : kProducerTotalsFields)
    if (!field.number) return field.name;
  return std::string_view();
}();
static_assert(!kDenominatorScopeField.empty(), "kProducerTotalsFields names the scope");

// The rule of a micro-batch's totals' shape (DESIGN §5), stated once for every reader (the JSON Lines readers,
// the exec protocol, the Python binding) and for a candidate's answer (TotalsShapeProblem): any non-empty
// subset of the totals, with a non-empty denominator_scope exactly when a denominator is given (a count means
// nothing without what it counts, and a scope nothing without a count). The problem is the field to name and
// what is wrong with it ("producer": the object as a whole); `scope_given`: the producer gave a scope (not null).
struct TotalsProblem {
  std::string field;
  std::string sentence;
};
inline std::optional<TotalsProblem> ProducerTotalsProblem(const ProducerTotals& t, bool scope_given) {
  std::string scopes = "(";  // "(microbatch, step or global)"
  for (std::size_t k = 0; k < kDenominatorScopes.size(); ++k)
    scopes += std::string(k == 0 ? "" : k + 1 == kDenominatorScopes.size() ? " or " : ", ") + ToString(kDenominatorScopes[k]);
  scopes += ")";
  std::string totals;  // "loss_sum, denominator, loss"
  bool any = false;
  for (const auto& field : kProducerTotalsFields) {
    if (!field.number) continue;
    totals += (totals.empty() ? "" : ", ") + std::string(field.name);
    any = any || (t.*field.number).has_value();
  }
  const std::string scope(kDenominatorScopeField);
  if (scope_given && t.denominator_scope.empty()) return TotalsProblem{scope, "is empty " + scopes};
  if (!any)
    return TotalsProblem{"producer", "gives none of " + totals + ": give those the producer has, or no producer "
                                     "object at all"};
  if (t.denominator && !scope_given) return TotalsProblem{scope, "is missing: a denominator needs its scope " + scopes};
  if (!t.denominator && scope_given)
    return TotalsProblem{scope, "is given without a denominator (the scope says what a denominator counts)"};
  return std::nullopt;
}

struct CandidateMicrobatch {
  std::int64_t step = 0;
  std::int64_t micro_step = 0;
  std::int64_t rank = 0;
  std::vector<CandidateRow> rows;
  std::optional<ProducerTotals> producer;
  bool operator==(const CandidateMicrobatch&) const = default;
};

// A packer's answer: micro-batches, or a refusal with its reason (exec protocol `error`), or a fault: the
// candidate crashed, hung, threw, or answered with something that is not a packed batch. A refusal is right
// exactly when the policy demands one; a fault is always the case's failure (reported under `shape`: the
// output is not a packed batch).
struct PackResult {
  std::vector<CandidateMicrobatch> microbatches;
  std::optional<std::string> refusal;
  std::optional<std::string> fault;
  static PackResult Refuse(std::string message) { return {{}, std::move(message), std::nullopt}; }
  static PackResult Fault(std::string message) { return {{}, std::nullopt, std::move(message)}; }
  bool operator==(const PackResult&) const = default;
};

// How a row is dealt to the ranks of its context-parallel group (context_parallel.h states the rule).
enum class CpScheme { kContiguous, kLoadBalanced };
inline const char* Name(CpScheme scheme) { return scheme == CpScheme::kContiguous ? "contiguous" : "load_balanced"; }

// [start, end) slots of a row held by one CP rank.
struct CpChunk {
  std::int64_t start = 0, end = 0;
  bool operator==(const CpChunk&) const = default;
};

// Where a micro-batch sits in its step's parallel layout, as a consumer may ask for it (DESIGN §12, "The step a
// consumer sees"): what a real model's data path knows beside the batch tensors (its DP rank, its
// context-parallel shard of each row and the load-balancing scheme that dealt it, its place among the pipeline
// / accumulation micro-batches), so that a consumer's per-rank arithmetic (cu_seqlens // cp_size, a zigzag
// partition) can be checked against the layout the kit states. The kit draws the CP size and scheme of a case
// as it does for the reducer's CP split (DrawnCp, splits.h) and deals each row with CpShards.
struct StepLayout {
  std::int64_t microbatch = 0;        // index of the micro-batch in the step's order; -1: a piece alone
  std::int64_t dp_rank = 0;
  std::int64_t dp_world_size = 1;
  std::int64_t micro_step = 0;        // its pipeline / accumulation micro-batch on its rank
  std::int64_t micro_steps = 1;       // how many its rank has in the step
  std::int64_t context_parallel_size = 1;
  CpScheme context_parallel_scheme = CpScheme::kContiguous;
  std::vector<std::vector<std::vector<CpChunk>>> cp_shards;  // [row][cp rank]: the chunks each CP rank holds
};
// The layout of a micro-batch seen outside a step (a probe, a caller of the runs form): micro-batch 0 of one
// rank, no context parallelism (one CP rank holding every row whole).
inline StepLayout WholeRowsLayout(const CandidateMicrobatch& microbatch) {
  StepLayout out;
  out.micro_step = microbatch.micro_step;
  out.dp_rank = microbatch.rank;
  for (const auto& row : microbatch.rows)
    out.cp_shards.push_back({{CpChunk{0, static_cast<std::int64_t>(row.input_ids.size())}}});
  return out;
}

// The input of a loss reducer: the step's micro-batches and, per row and slot, the loss the model gives the
// prediction at that slot against the labels' target (0 where there is none, as cross-entropy with an ignore
// index gives). The reducer must weight, count and normalise them as its policy declares.
struct ReduceRequest {
  Policy policy;
  std::int64_t dp_world_size = 1;
  std::int64_t grad_accum_steps = 1;
  // Context parallelism: each row is dealt to the context_parallel_size ranks of its CP group under the
  // scheme (CpShards, context_parallel.h); cp_shards[m][r][k] are the chunks CP rank k holds of row r of
  // micro-batch m. The reducer still reports one total per micro-batch (the group's, as its ranks all-reduce
  // them), and every target counts once, whichever shard holds it: the objective counts over DP × CP.
  std::int64_t context_parallel_size = 1;
  CpScheme context_parallel_scheme = CpScheme::kContiguous;
  std::vector<std::vector<std::vector<std::vector<CpChunk>>>> cp_shards;  // [microbatch][row][cp rank]
  std::vector<CandidateMicrobatch> microbatches;
  std::vector<std::vector<std::vector<double>>> slot_losses;  // [microbatch][row][slot]
  // A schedule: the micro-batches are one generation batch (RL rollouts generated once) feeding `optimizer_steps`
  // optimizer steps in turn, `grad_accum_steps` micro-steps each: micro-batch m feeds optimizer step
  // micro_step / grad_accum_steps (OptimizerStepOf, oracle/denominator.h). The declared denominator applies to
  // each optimizer step on its own (under global_targets a micro-batch is divided by its optimizer step's
  // targets, never by the generation batch's). 1: the request is one optimizer step, as before schedules.
  std::int64_t optimizer_steps = 1;
  // A selection declared as part of the objective (DESIGN §4 `loss`, oracle/selection.h): keep, within each
  // optimizer step (all ranks, all its micro-batches), the top `selection.top_fraction` of the weighted targets
  // by the score the kit supplies, and weight, count and normalise those alone. slot_scores[m][r][slot] is the
  // score of the target at each slot (indexed as slot_losses; 0 where the slot has no target); the kit's scores
  // are distinct within a step, so no tie has to be broken. Inactive (top_fraction 1): no selection, and
  // slot_scores is empty.
  SelectionRule selection;
  std::vector<std::vector<std::vector<double>>> slot_scores;  // [microbatch][row][slot]
};

// One ProducerTotals per micro-batch of the request, in the same order.
using ReduceResult = std::vector<ProducerTotals>;

// ---- The roles, type-erased ---------------------------------------------------------------------------

class PackerRole {
 public:
  virtual ~PackerRole() = default;
  virtual PackResult Pack(const PackRequest& request) = 0;
};

class LossReducerRole {
 public:
  virtual ~LossReducerRole() = default;
  virtual ReduceResult Reduce(const ReduceRequest& request) = 0;
};

// What an attention consumer computes for a micro-batch, beside the masks it attends with (DESIGN §4 efficiency,
// §12 "Work"): the (query, key) pairs its kernel evaluates, whether or not the mask then hides them. A dense
// causal kernel over a padded row computes [0, i] for every query, padding included; a varlen kernel over the
// pieces, only each piece's [start, i]; a consumer that turns alignment padding into a dense dummy row of a slots
// computes that row's a × a pairs as well. The kit counts, per row, the pairs in `rows[r]` ∪ the row's mask (a
// pair attended is a pair computed, whatever the report says), plus every pair of `extra_rows`, and compares
// the micro-batch's sum with the least the declared rule needs (RequiredAttentionPairs, oracle/batch.h).
struct ComputedWork {
  // One per row of the micro-batch, as runs of computed keys per query (mask_runs.h); empty: each row computes
  // what its mask attends.
  std::vector<MaskRuns> rows;
  // Rows the consumer builds beyond the micro-batch's (a dense dummy row of alignment padding), each the pairs
  // computed over it (its n is the row's length).
  std::vector<MaskRuns> extra_rows;
};

// A consumer's answer for a micro-batch with what it computes: the masks (one per row, as ConsumeMicrobatchInStep
// answers) and, when the consumer says, its ComputedWork.
struct ConsumerAnswer {
  std::vector<MaskRuns> masks;
  std::optional<ComputedWork> work;
};

class AttentionConsumerRole {
 public:
  virtual ~AttentionConsumerRole() = default;
  // The mask the backend really uses for `row` under `policy`.
  virtual DenseMask Consume(const CandidateRow& row, const Policy& policy) = 0;
  // The masks of every row of a micro-batch, in row order, for a backend that looks at the whole batch tensor
  // (HF detects packing from position ids only when the batch has one row). The kit calls this form; by
  // default it consumes the rows one by one.
  virtual std::vector<DenseMask> ConsumeMicrobatch(const CandidateMicrobatch& microbatch, const Policy& policy) {
    std::vector<DenseMask> out;
    for (const auto& row : microbatch.rows) out.push_back(Consume(row, policy));
    return out;
  }
  // The same masks as runs (mask_runs.h): what the kit calls. By default the dense masks above, converted
  // (MaskSource::kDense: such a consumer's rows stay at kDenseConsumerMaxRowLength); a consumer that holds a
  // compact form (segment ids, a mask function) overrides it and gets longer rows (mask_runs.h, MaskSource).
  virtual std::vector<MaskRuns> ConsumeMicrobatchRuns(const CandidateMicrobatch& microbatch, const Policy& policy) {
    std::vector<MaskRuns> out;
    for (const auto& mask : ConsumeMicrobatch(microbatch, policy)) out.push_back(RunsFromDense(mask));
    return out;
  }
  // The form that sees the whole step: the micro-batch with its place in the step's parallel layout (StepLayout).
  // What CheckCase calls; by default the runs above, the layout unread.
  virtual std::vector<MaskRuns> ConsumeMicrobatchInStep(const CandidateMicrobatch& microbatch, const Policy& policy,
                                                        const StepLayout& layout) {
    (void)layout;
    return ConsumeMicrobatchRuns(microbatch, policy);
  }
  // The masks with what the consumer computes (ComputedWork): what CheckCase calls. By default the step form's
  // masks and no work said (efficiency then measures the packer's rows only).
  virtual ConsumerAnswer ConsumeMicrobatchWithWork(const CandidateMicrobatch& microbatch, const Policy& policy,
                                                   const StepLayout& layout) {
    return {ConsumeMicrobatchInStep(microbatch, policy, layout), std::nullopt};
  }
};

// ---- The value consumer (DESIGN §12, "Values and gradients") -----------------------------------------
//
// A consumer that answers what it computes, not only what it attends with: per-position output values
// (logits, hidden states) for every row of a micro-batch. The kit runs each document piece alone, as a
// micro-batch of one row holding just that piece (ValueInvariance, properties/src/value_invariance.cc), through
// the same consumer and compares each piece's values packed and alone within the consumer's declared
// tolerance (`packing_invariance` at the value level: for any model, not only the tiny decoder). Asked for a
// gradient, the consumer also answers the gradient of the kit's probe loss with respect to its parameters; the
// packed micro-batch's must equal the sum of its pieces' alone (`gradient`).

// One row's output values: `features` numbers per slot, row-major (values[i * features + f]).
struct SlotValues {
  std::int64_t features = 0;
  std::vector<double> values;
  double At(std::int64_t slot, std::int64_t feature) const {
    return values[static_cast<std::size_t>(slot * features + feature)];
  }
};

// What the kit asks of a value consumer for one micro-batch.
struct ValueRequest {
  // True: answer ValueAnswer::parameter_gradient as well.
  bool gradient = false;
  // [row][slot] u_i: the probe loss is  Σ_row Σ_i u_i · Σ_f c_f · out[row][i][f]  with c_f = ProbeFeatureWeight(f).
  // u is 0 on padding and a fixed number per (document, token) elsewhere (the same number packed and alone), so
  // the packed loss is the sum of the pieces' losses alone and so must its gradient be.
  std::vector<std::vector<double>> slot_weights;
  // The micro-batch's place in the step (a piece alone: microbatch -1, one row, the same CP size and scheme).
  StepLayout layout;
};
// c_f of the probe loss: not constant in f, so that a softmax's outputs (which sum to 1) still have a gradient.
inline double ProbeFeatureWeight(std::int64_t feature) { return 1.0 + static_cast<double>(feature % 4); }

struct ValueAnswer {
  std::vector<SlotValues> rows;  // one per row of the micro-batch, in order
  // d(probe loss)/dθ over the consumer's parameters, flattened in one fixed order; given when asked for.
  std::optional<std::vector<double>> parameter_gradient;
};

// How close packed and alone values must be: |a − b| ≤ absolute + relative·max(|a|, |b|); a NaN is never
// close. The defaults suit float32 models (a packed row sums in another order than the piece alone).
struct ValueTolerance {
  double absolute = 1e-5;
  double relative = 1e-4;
  bool Close(double a, double b) const {
    return std::fabs(a - b) <= absolute + relative * std::max(std::fabs(a), std::fabs(b));
  }
};

class ValueConsumerRole {
 public:
  virtual ~ValueConsumerRole() = default;
  virtual ValueAnswer ConsumeValues(const CandidateMicrobatch& microbatch, const Policy& policy,
                                    const ValueRequest& request) = 0;
  virtual ValueTolerance Tolerance() const { return {}; }
  // Whether the consumer can answer gradients (the kit then asks for them and checks `gradient`).
  virtual bool AnswersGradients() const { return false; }
};

// A candidate under test: a name and any subset of the roles.
struct Candidate {
  std::string name;
  std::shared_ptr<PackerRole> packer;
  std::shared_ptr<LossReducerRole> reducer;
  std::shared_ptr<AttentionConsumerRole> consumer;
  // Policies the candidate implements; empty = it claims every policy it is handed.
  std::vector<Policy> policies;
  // How C++ constructs this candidate afresh, for the failure report's regression draft: an expression of type
  // Candidate, or of a candidate type CheckOneCase takes ("packoracle::MakeBundledCandidate(\"TG-02\")",
  // "MyPacker{}"), and the header that declares it (empty: the reader's own). Empty expression: the candidate
  // has no name to construct it by (a lambda, an exec process, a Python callable), and the draft says it is
  // best effort.
  struct Source {
    std::string expression;
    std::string header;
  };
  Source source;
  // A value consumer (DESIGN §12): per-position outputs and parameter gradients. Last, so that a candidate
  // written as an aggregate ({name, packer, reducer, consumer, policies, source}) stays one.
  std::shared_ptr<ValueConsumerRole> values;
};

// ---- Concepts: what a plain C++ type needs to fill a role ---------------------------------------------

template <class T>
concept Packer = requires(T& t, const PackRequest& r) {
  { t.Pack(r) } -> std::convertible_to<PackResult>;
};

template <class T>
concept LossReducer = requires(T& t, const ReduceRequest& r) {
  { t.Reduce(r) } -> std::convertible_to<ReduceResult>;
};

// An attention consumer has a per-row form, a micro-batch form (one mask per row, in order), or both.
template <class T>
concept RowAttentionConsumer = requires(T& t, const CandidateRow& row, const Policy& p) {
  { t.Consume(row, p) } -> std::convertible_to<DenseMask>;
};

template <class T>
concept MicrobatchAttentionConsumer = requires(T& t, const CandidateMicrobatch& mb, const Policy& p) {
  { t.ConsumeMicrobatch(mb, p) } -> std::convertible_to<std::vector<DenseMask>>;
};

// The compact form: one MaskRuns per row of the micro-batch (rows of any length).
template <class T>
concept RunsAttentionConsumer = requires(T& t, const CandidateMicrobatch& mb, const Policy& p) {
  { t.ConsumeMicrobatchRuns(mb, p) } -> std::convertible_to<std::vector<MaskRuns>>;
};

// The form that sees the step: the runs of each row, given the micro-batch's place in the step (StepLayout).
template <class T>
concept StepAttentionConsumer = requires(T& t, const CandidateMicrobatch& mb, const Policy& p, const StepLayout& l) {
  { t.ConsumeMicrobatchInStep(mb, p, l) } -> std::convertible_to<std::vector<MaskRuns>>;
};

// The form that says what it computes: the masks of the step form with the consumer's ComputedWork.
template <class T>
concept WorkAttentionConsumer = requires(T& t, const CandidateMicrobatch& mb, const Policy& p, const StepLayout& l) {
  { t.ConsumeMicrobatchWithWork(mb, p, l) } -> std::convertible_to<ConsumerAnswer>;
};

template <class T>
concept AttentionConsumer = RowAttentionConsumer<T> || MicrobatchAttentionConsumer<T> || RunsAttentionConsumer<T> ||
                            StepAttentionConsumer<T> || WorkAttentionConsumer<T>;

// A value consumer: per-position outputs of a micro-batch (ValueConsumerRole). It may also declare a tolerance
// (`ValueTolerance Tolerance() const`) and answer gradients (`bool AnswersGradients() const`).
template <class T>
concept ValueConsumer = requires(T& t, const CandidateMicrobatch& mb, const Policy& p, const ValueRequest& r) {
  { t.ConsumeValues(mb, p, r) } -> std::convertible_to<ValueAnswer>;
};

namespace internal {
template <class T>
struct SharedImpl {
  std::shared_ptr<T> object;
};
template <class T>
struct PackerAdapter final : PackerRole, SharedImpl<T> {
  PackResult Pack(const PackRequest& r) override { return this->object->Pack(r); }
};
template <class T>
struct ReducerAdapter final : LossReducerRole, SharedImpl<T> {
  ReduceResult Reduce(const ReduceRequest& r) override { return this->object->Reduce(r); }
};
template <class T>
struct ConsumerAdapter final : AttentionConsumerRole, SharedImpl<T> {
  DenseMask Consume(const CandidateRow& row, const Policy& p) override {
    if constexpr (RowAttentionConsumer<T>) {
      return this->object->Consume(row, p);
    } else if constexpr (!MicrobatchAttentionConsumer<T>) {  // only the runs form (or the step form)
      CandidateMicrobatch one;
      one.rows.push_back(row);
      auto runs = ConsumeMicrobatchRuns(one, p);
      return runs.empty() ? DenseMask{} : ToDense(runs.front());
    } else {  // only the micro-batch form: the row alone is a micro-batch of one row
      CandidateMicrobatch one;
      one.rows.push_back(row);
      auto masks = this->object->ConsumeMicrobatch(one, p);
      return masks.empty() ? DenseMask{} : std::move(masks.front());
    }
  }
  std::vector<DenseMask> ConsumeMicrobatch(const CandidateMicrobatch& mb, const Policy& p) override {
    if constexpr (MicrobatchAttentionConsumer<T>) {
      return this->object->ConsumeMicrobatch(mb, p);
    } else {
      return AttentionConsumerRole::ConsumeMicrobatch(mb, p);
    }
  }
  std::vector<MaskRuns> ConsumeMicrobatchRuns(const CandidateMicrobatch& mb, const Policy& p) override {
    if constexpr (RunsAttentionConsumer<T>) {
      return this->object->ConsumeMicrobatchRuns(mb, p);
    } else if constexpr ((StepAttentionConsumer<T> || WorkAttentionConsumer<T>) && !MicrobatchAttentionConsumer<T> &&
                         !RowAttentionConsumer<T>) {
      return ConsumeMicrobatchInStep(mb, p, WholeRowsLayout(mb));  // only the step form (or the work form)
    } else {
      return AttentionConsumerRole::ConsumeMicrobatchRuns(mb, p);
    }
  }
  std::vector<MaskRuns> ConsumeMicrobatchInStep(const CandidateMicrobatch& mb, const Policy& p,
                                                const StepLayout& layout) override {
    if constexpr (StepAttentionConsumer<T>) {
      return this->object->ConsumeMicrobatchInStep(mb, p, layout);
    } else if constexpr (WorkAttentionConsumer<T> && !RunsAttentionConsumer<T> && !MicrobatchAttentionConsumer<T> &&
                         !RowAttentionConsumer<T>) {
      return this->object->ConsumeMicrobatchWithWork(mb, p, layout).masks;  // only the work form
    } else {
      return ConsumeMicrobatchRuns(mb, p);
    }
  }
  ConsumerAnswer ConsumeMicrobatchWithWork(const CandidateMicrobatch& mb, const Policy& p,
                                           const StepLayout& layout) override {
    if constexpr (WorkAttentionConsumer<T>) {
      return this->object->ConsumeMicrobatchWithWork(mb, p, layout);
    } else {
      return AttentionConsumerRole::ConsumeMicrobatchWithWork(mb, p, layout);
    }
  }
};
template <class T>
struct ValueConsumerAdapter final : ValueConsumerRole, SharedImpl<T> {
  ValueAnswer ConsumeValues(const CandidateMicrobatch& mb, const Policy& p, const ValueRequest& r) override {
    return this->object->ConsumeValues(mb, p, r);
  }
  ValueTolerance Tolerance() const override {
    if constexpr (requires(const T& t) { { t.Tolerance() } -> std::convertible_to<ValueTolerance>; }) {
      return this->object->Tolerance();
    } else {
      return {};
    }
  }
  bool AnswersGradients() const override {
    if constexpr (requires(const T& t) { { t.AnswersGradients() } -> std::convertible_to<bool>; }) {
      return this->object->AnswersGradients();
    } else {
      return false;
    }
  }
};
}  // namespace internal

// Wraps any object that models at least one of the concepts; each role it models is filled, sharing the one
// object (so a packer that also reduces sees its own state).
template <class T>
  requires(Packer<T> || LossReducer<T> || AttentionConsumer<T> || ValueConsumer<T>)
Candidate MakeCandidate(std::string name, T object, std::vector<Policy> policies = {}) {
  auto shared = std::make_shared<T>(std::move(object));
  Candidate c;
  c.name = std::move(name);
  c.policies = std::move(policies);
  if constexpr (Packer<T>) {
    auto a = std::make_shared<internal::PackerAdapter<T>>();
    a->object = shared;
    c.packer = a;
  }
  if constexpr (LossReducer<T>) {
    auto a = std::make_shared<internal::ReducerAdapter<T>>();
    a->object = shared;
    c.reducer = a;
  }
  if constexpr (AttentionConsumer<T>) {
    auto a = std::make_shared<internal::ConsumerAdapter<T>>();
    a->object = shared;
    c.consumer = a;
  }
  if constexpr (ValueConsumer<T>) {
    auto a = std::make_shared<internal::ValueConsumerAdapter<T>>();
    a->object = shared;
    c.values = a;
  }
  return c;
}

}  // namespace packoracle
