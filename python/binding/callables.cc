#include "callables.h"

#include <string>
#include <utility>
#include <vector>

#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include "convert.h"
#include "packoracle/oracle/error.h"
#include "packoracle/properties/context_parallel.h"

namespace packoracle::python {
namespace {

// Calls a driver; returns its (kind, value), or nullopt with `fault` set when the run was interrupted.
struct Answer {
  std::string kind;  // "ok" | "refuse" | "fault"
  nb::object value;
};

Answer Call(CallState& state, nb::handle driver, nb::handle argument, nb::handle argument2 = nb::handle(),
            nb::handle argument3 = nb::handle()) {
  if (state.interrupt) return {"fault", nb::str("interrupted")};
  try {
    nb::object out = argument3 ? driver(argument, argument2, argument3)
                     : argument2 ? driver(argument, argument2) : driver(argument);
    nb::tuple pair = nb::cast<nb::tuple>(out);
    return {nb::cast<std::string>(pair[0]), nb::borrow(pair[1])};
  } catch (nb::python_error& e) {  // KeyboardInterrupt, SystemExit: the driver lets only these through
    state.interrupt.emplace(std::move(e));
    return {"fault", nb::str("interrupted")};
  }
}

std::string Text(nb::handle value) { return nb::cast<std::string>(nb::str(value)); }

// One micro-batch's CP shards, [row][cp rank]: lists of (start, end) (context_parallel.h).
nb::list ShardsToPython(const std::vector<std::vector<std::vector<CpChunk>>>& shards) {
  nb::list rows;
  for (const auto& row : shards) {
    nb::list ranks;
    for (const auto& chunks : row) {
      nb::list held;
      for (const CpChunk& c : chunks) held.append(nb::make_tuple(c.start, c.end));
      ranks.append(held);
    }
    rows.append(ranks);
  }
  return rows;
}

// What every role holds: its driver and the run's shared state.
struct Driven {
  Driven(nb::object driver, std::shared_ptr<CallState> state) : driver_(std::move(driver)), state_(std::move(state)) {}
  nb::object driver_;
  std::shared_ptr<CallState> state_;
};

class PythonPacker final : public PackerRole, Driven {
 public:
  using Driven::Driven;
  PackResult Pack(const PackRequest& request) override {
    nb::gil_scoped_acquire gil;
    Answer a = Call(*state_, driver_, RequestToPython(request));
    if (a.kind == "refuse") return PackResult::Refuse(Text(a.value));
    if (a.kind != "ok") return PackResult::Fault(Text(a.value));
    PackResult result;
    try {
      std::size_t k = 0;
      for (nb::handle mb : nb::borrow<nb::list>(a.value)) {
        result.microbatches.push_back(MicrobatchFromPython(mb, "the packer's answer: microbatches[" + std::to_string(k++) + "]"));
      }
    } catch (const InputError& e) {
      return PackResult::Fault(std::string("the packer returned something that is not a packed batch: ") + e.what());
    } catch (nb::python_error& e) {
      return PackResult::Fault(std::string("the packer returned something that is not a packed batch: ") + e.what());
    }
    return result;
  }

};

class PythonReducer final : public LossReducerRole, Driven {
 public:
  using Driven::Driven;
  ReduceResult Reduce(const ReduceRequest& request) override {
    nb::gil_scoped_acquire gil;
    nb::dict in;
    in["policy"] = PolicyToPython(request.policy);
    in["dp_world_size"] = request.dp_world_size;
    in["grad_accum_steps"] = request.grad_accum_steps;
    in["optimizer_steps"] = request.optimizer_steps;  // a schedule: grad_accum_steps micro-steps each
    in["context_parallel_size"] = request.context_parallel_size;
    in["context_parallel_scheme"] = Name(request.context_parallel_scheme);
    nb::list cp_shards;  // [microbatch][row][cp rank]: [(start, end), ...] (context_parallel.h)
    for (const auto& mb : request.cp_shards) cp_shards.append(ShardsToPython(mb));
    in["cp_shards"] = cp_shards;
    nb::list mbs, losses;
    for (std::size_t m = 0; m < request.microbatches.size(); ++m) {
      mbs.append(MicrobatchToPython(request.microbatches[m]));
      nb::list rows;
      for (const auto& row : request.slot_losses[m]) {
        nb::list slots;
        for (double v : row) slots.append(v);
        rows.append(slots);
      }
      losses.append(rows);
    }
    in["microbatches"] = mbs;
    in["slot_losses"] = losses;
    if (request.selection.active()) {  // a selection (oracle/selection.h): keys present only then, as over exec
      nb::dict selection;
      selection["top_fraction"] = request.selection.top_fraction;
      selection["scope"] = "optimizer_step";
      in["selection"] = selection;
      nb::list scores;
      for (const auto& mb : request.slot_scores) {
        nb::list rows;
        for (const auto& row : mb) {
          nb::list slots;
          for (double v : row) slots.append(v);
          rows.append(slots);
        }
        scores.append(rows);
      }
      in["slot_scores"] = scores;
    }
    Answer a = Call(*state_, driver_, in);
    // A reducer has no refusal and no fault channel: an exception is its fault, told by a throw that
    // CheckCase reports as that case's failure.
    if (a.kind != "ok") throw std::runtime_error(Text(a.value));
    ReduceResult out;
    std::size_t k = 0;
    for (nb::handle totals : nb::borrow<nb::list>(a.value)) {
      ProducerTotals t = ProducerFromPython(totals, "the reducer's answer[" + std::to_string(k++) + "]");
      // The driver's: [row][slot] floats, the gradient of what the reducer backpropagated (fuzz(gradient=True)).
      if (nb::dict d = nb::borrow<nb::dict>(totals); d.contains("gradient")) {
        std::vector<std::vector<double>> rows;
        for (nb::handle row : nb::borrow<nb::list>(d["gradient"])) {
          std::vector<double> slots;
          for (nb::handle v : nb::borrow<nb::list>(row)) slots.push_back(nb::cast<double>(v));
          rows.push_back(std::move(slots));
        }
        t.gradient = std::move(rows);
      }
      out.push_back(std::move(t));
    }
    return out;
  }

};

// A micro-batch's place in its step (StepLayout) as the consumers' drivers get it: a dict of the same names,
// cp_shards [row][cp rank] lists of (start, end), the scheme by its name (context_parallel.h).
nb::dict LayoutToPython(const StepLayout& layout) {
  nb::dict out;
  out["microbatch"] = layout.microbatch;
  out["dp_rank"] = layout.dp_rank;
  out["dp_world_size"] = layout.dp_world_size;
  out["micro_step"] = layout.micro_step;
  out["micro_steps"] = layout.micro_steps;
  out["context_parallel_size"] = layout.context_parallel_size;
  out["context_parallel_scheme"] = Name(layout.context_parallel_scheme);
  out["cp_shards"] = ShardsToPython(layout.cp_shards);
  return out;
}

// The driver returns per row the runs of visible keys it read from whatever the consumer gave (_masks.py
// `runs`): a tuple (row_offsets, run_begin, run_end, source) of C-contiguous int64 arrays (n + 1, runs, runs)
// and how the consumer answered: "runs" (segment ids), "function" (a mask function, mask_mod, BlockMask) or
// "dense" (an n × n matrix).
MaskRuns MaskFromDriver(nb::handle value) {
  using Vector = nb::ndarray<const std::int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
  auto parts = nb::borrow<nb::tuple>(value);
  auto copy = [](nb::handle array, std::vector<std::int64_t>& to) {
    auto v = nb::cast<Vector>(array);
    to.assign(v.data(), v.data() + v.shape(0));
  };
  MaskRuns out;
  copy(parts[0], out.row_offsets);
  copy(parts[1], out.run_begin);
  copy(parts[2], out.run_end);
  out.n = static_cast<std::int64_t>(out.row_offsets.size()) - 1;
  const auto source = nb::cast<std::string>(parts[3]);
  out.source = source == "dense" ? MaskSource::kDense : source == "function" ? MaskSource::kFunction : MaskSource::kRuns;
  return out;
}

// A per-row consumer (`consumer=f`, driven row by row) or a micro-batch consumer (`microbatch_consumer=g`, one
// call per micro-batch with every row, as a backend gets the batch tensor: DESIGN §12). It answers runs; the
// dense forms are those runs as matrices (for small rows).
class PythonConsumer final : public AttentionConsumerRole, Driven {
 public:
  PythonConsumer(nb::object driver, std::shared_ptr<CallState> state, bool whole_microbatch)
      : Driven(std::move(driver), std::move(state)), whole_microbatch_(whole_microbatch) {}

  DenseMask Consume(const CandidateRow& row, const Policy& policy) override {
    CandidateMicrobatch one;
    one.rows.push_back(row);
    return ConsumeMicrobatch(one, policy).at(0);
  }

  std::vector<DenseMask> ConsumeMicrobatch(const CandidateMicrobatch& microbatch, const Policy& policy) override {
    std::vector<DenseMask> out;
    for (const auto& runs : ConsumeMicrobatchRuns(microbatch, policy)) out.push_back(ToDense(runs));
    return out;
  }

  std::vector<MaskRuns> ConsumeMicrobatchRuns(const CandidateMicrobatch& microbatch, const Policy& policy) override {
    return ConsumeMicrobatchInStep(microbatch, policy, WholeRowsLayout(microbatch));
  }

  // The micro-batch driver gets the layout too (it hands the consumer the step when fuzz(step_view=True)).
  std::vector<MaskRuns> ConsumeMicrobatchInStep(const CandidateMicrobatch& microbatch, const Policy& policy,
                                                const StepLayout& layout) override {
    return ConsumeMicrobatchWithWork(microbatch, policy, layout).masks;
  }

  // The micro-batch driver answers its masks, or (masks, work) for a consumer that returned packoracle.Computed
  // (_drivers.py): work {"rows": [runs per row] or None, "extra_rows": [runs, ...]}, read as ComputedWork.
  ConsumerAnswer ConsumeMicrobatchWithWork(const CandidateMicrobatch& microbatch, const Policy& policy,
                                           const StepLayout& layout) override {
    nb::gil_scoped_acquire gil;
    ConsumerAnswer out;
    if (!whole_microbatch_) {
      for (const auto& row : microbatch.rows) {
        Answer a = Call(*state_, driver_, RowToPython(row), PolicyToPython(policy));
        if (a.kind != "ok") throw std::runtime_error(Text(a.value));
        out.masks.push_back(MaskFromDriver(a.value));
      }
      return out;
    }
    Answer a = Call(*state_, driver_, MicrobatchToPython(microbatch), PolicyToPython(policy), LayoutToPython(layout));
    if (a.kind != "ok") throw std::runtime_error(Text(a.value));
    nb::object masks = a.value;
    if (nb::isinstance<nb::tuple>(a.value)) {
      auto pair = nb::borrow<nb::tuple>(a.value);
      masks = pair[0];
      auto work = nb::borrow<nb::dict>(pair[1]);
      const nb::object rows = work["rows"], extra_rows = work["extra_rows"];
      ComputedWork& w = out.work.emplace();
      if (!rows.is_none())
        for (nb::handle runs : nb::borrow<nb::list>(rows)) w.rows.push_back(MaskFromDriver(runs));
      for (nb::handle runs : nb::borrow<nb::list>(extra_rows)) w.extra_rows.push_back(MaskFromDriver(runs));
    }
    for (nb::handle mask : nb::borrow<nb::list>(masks)) out.masks.push_back(MaskFromDriver(mask));
    return out;
  }

 private:
  bool whole_microbatch_;
};

// A value consumer (`value_consumer=h`, DESIGN §12 "Values and gradients"): one call per micro-batch (the packed
// one, then each document piece alone as a micro-batch of one row). The driver (_fuzz.py) answers a pair
// (rows, gradient): per row a C-contiguous float64 n × features array, and, when the request asks for it, the
// flattened float64 parameter gradient of the probe loss (else None).
class PythonValueConsumer final : public ValueConsumerRole, Driven {
 public:
  PythonValueConsumer(nb::object driver, std::shared_ptr<CallState> state, ValueTolerance tolerance, bool gradients)
      : Driven(std::move(driver), std::move(state)), tolerance_(tolerance), gradients_(gradients) {}

  ValueAnswer ConsumeValues(const CandidateMicrobatch& microbatch, const Policy& policy,
                            const ValueRequest& request) override {
    using Matrix = nb::ndarray<const double, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
    using Vector = nb::ndarray<const double, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
    nb::gil_scoped_acquire gil;
    nb::dict ask;
    ask["gradient"] = request.gradient;
    nb::list weights;
    for (const auto& row : request.slot_weights) {
      nb::list slots;
      for (double u : row) slots.append(u);
      weights.append(slots);
    }
    ask["slot_weights"] = weights;
    ask["layout"] = LayoutToPython(request.layout);
    Answer a = Call(*state_, driver_, MicrobatchToPython(microbatch), PolicyToPython(policy), ask);
    if (a.kind != "ok") throw std::runtime_error(Text(a.value));
    auto pair = nb::borrow<nb::tuple>(a.value);
    ValueAnswer out;
    for (nb::handle row : nb::borrow<nb::list>(pair[0])) {
      auto m = nb::cast<Matrix>(row);
      out.rows.push_back({static_cast<std::int64_t>(m.shape(1)),
                          std::vector<double>(m.data(), m.data() + m.shape(0) * m.shape(1))});
    }
    if (!pair[1].is_none()) {
      auto g = nb::cast<Vector>(pair[1]);
      out.parameter_gradient.emplace(g.data(), g.data() + g.shape(0));
    }
    return out;
  }
  ValueTolerance Tolerance() const override { return tolerance_; }
  bool AnswersGradients() const override { return gradients_; }

 private:
  ValueTolerance tolerance_;
  bool gradients_;
};

}  // namespace

Candidate CallableCandidate(const std::string& name, nb::object packer, nb::object reducer, nb::object consumer,
                            bool microbatch_consumer, std::shared_ptr<CallState> state, const ValueDriver& values) {
  Candidate c;
  c.name = name;
  if (!packer.is_none()) c.packer = std::make_shared<PythonPacker>(std::move(packer), state);
  if (!reducer.is_none()) c.reducer = std::make_shared<PythonReducer>(std::move(reducer), state);
  if (!consumer.is_none()) c.consumer = std::make_shared<PythonConsumer>(std::move(consumer), state, microbatch_consumer);
  if (!values.driver.is_none())
    c.values = std::make_shared<PythonValueConsumer>(values.driver, state, values.tolerance, values.gradients);
  return c;
}

}  // namespace packoracle::python
