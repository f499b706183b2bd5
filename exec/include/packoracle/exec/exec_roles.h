// The loss reducer, the attention consumer and the value consumer roles over the exec protocol (DESIGN §6,
// "Other roles"): a candidate's reducer or consumer in another process (any language; a Python callable in
// another interpreter through `python -m packoracle.exec_server`), with the deadlines, restarts and faults of
// the packer's channel (exec_channel.h).
//
//   packoracle::Candidate c;                       // the kit's reference packer makes the rows
//   c.reducer = std::make_shared<packoracle::ExecReducer>("python3 my_reducer.py", packoracle::ExecOptions{});
//   c.consumer = std::make_shared<packoracle::ExecConsumer>("python3 my_masks.py", packoracle::ExecOptions{});
//   c.values = std::make_shared<packoracle::ExecValueConsumer>("python3 my_model.py", packoracle::ExecOptions{});
//   packoracle::VerifyReport report = packoracle::Verify(c);
//
// Per case, a reducer gets one line, ReduceRequestToJson: {"record":"reduce_request","id":N,...} and answers
//   ← {"record":"totals","id":N,"totals":[<producer object of §5>, ...]}   (one or more such lines, the
//     micro-batches' totals in order), then {"record":"end","id":N}
// and a consumer gets, per micro-batch, ConsumeRequestToJson: {"record":"consume_request","id":N,"policy":..,
// "microbatch":<§5 record>,"layout":<StepLayout>} (layout, added after version 1: the micro-batch's place in the
// step, ConsumeMicrobatchInStep's; "emitted":<the exec packer's own record of it, as its child wrote it> after it
// when the packer is an exec process and ReadEmitted was given) and answers, for each row in order,
//   ← {"record":"mask","id":N,"row":r,"runs":{"row_offsets":[..],"run_begin":[..],"run_end":[..],
//      "source":"runs"|"function"|"dense"}}   (mask_runs.h: query i sees keys [run_begin[k], run_end[k]) for
//      k in [row_offsets[i], row_offsets[i+1]))
//   or {"record":"mask","id":N,"row":r,"mask":[[1,0,..],..]}  (dense n × n, 0/1)
//   then optionally ← {"record":"work","id":N,"rows":[<runs>,..]|null,"extra_rows":[<runs>,..]} (what its kernel
//      computes: ConsumeMicrobatchWithWork's ComputedWork, measured under `efficiency`; none: not said)
//   then {"record":"end","id":N}.
// A value consumer gets, per micro-batch (packed, or a document piece alone), ValueRequestToJson:
// {"record":"value_request","id":N,"policy":..,"microbatch":..,"layout":..,"gradient":false} ("slot_weights"
// [row][slot] with "gradient":true, when it AnswersGradients; "emitted" as above) and answers, per row in order,
//   ← {"record":"values","id":N,"row":r,"values":[[v_f, ..] per slot]}   (n × features, NaN allowed)
//   then, when asked, ← {"record":"gradient","id":N,"parameter_gradient":[..]}, then {"record":"end","id":N}.
// No role refuses: an `error` record, like a crash, a hang, a malformed line or a wrong id, is a failure of
// that case. It reaches the checker as an ExecRoleFault (a std::exception), which reports it under the role's
// invariant (`loss` for a reducer, `attention` for a consumer, `packing_invariance` for a value consumer) with
// the case's input, and shrinking goes on. After a fault the next request starts a fresh child; an error record
// is an answer in protocol, so its child keeps running (a served library is imported once, not again at every
// shrinking step).
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "packoracle/exec/exec_channel.h"

namespace packoracle {

// A reducer's or consumer's exchange that gave no usable answer (the channel's fault, or an error record).
class ExecRoleFault : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ExecReducer final : public LossReducerRole, public ExecChannel {
 public:
  ExecReducer(std::string command, ExecOptions options) : ExecChannel(std::move(command), std::move(options)) {}
  // The totals of the request's micro-batches; ExecRoleFault when the candidate gave none.
  ReduceResult Reduce(const ReduceRequest& request) override;

 private:
  std::int64_t next_id_ = 0;
};

// The exec packer's latest answer as its child wrote it (ExecPacker::emitted), for the consumers' `emitted` field;
// null (or a null source): the packer is not an exec process, and no request carries the field.
using EmittedSource = std::function<const std::vector<std::string>*()>;

class ExecConsumer final : public AttentionConsumerRole, public ExecChannel {
 public:
  ExecConsumer(std::string command, ExecOptions options) : ExecChannel(std::move(command), std::move(options)) {}
  DenseMask Consume(const CandidateRow& row, const Policy& policy) override;
  std::vector<DenseMask> ConsumeMicrobatch(const CandidateMicrobatch& microbatch, const Policy& policy) override;
  // One request per micro-batch, with its WholeRowsLayout; ExecRoleFault when the candidate gave no mask for
  // every row.
  std::vector<MaskRuns> ConsumeMicrobatchRuns(const CandidateMicrobatch& microbatch, const Policy& policy) override;
  // The request carries the layout (and the packer's own record, given ReadEmitted).
  std::vector<MaskRuns> ConsumeMicrobatchInStep(const CandidateMicrobatch& microbatch, const Policy& policy,
                                                const StepLayout& layout) override;
  // ... and the answer's work record, if any, is the ComputedWork (none: work not said).
  ConsumerAnswer ConsumeMicrobatchWithWork(const CandidateMicrobatch& microbatch, const Policy& policy,
                                           const StepLayout& layout) override;
  void ReadEmitted(EmittedSource source) { emitted_ = std::move(source); }

 private:
  ConsumerAnswer Ask(const CandidateMicrobatch& microbatch, const Policy& policy, const StepLayout* layout);
  std::int64_t next_id_ = 0;
  EmittedSource emitted_;
};

// The value consumer role over exec (DESIGN §12, "Values and gradients"): `gradients` says whether it answers
// the probe loss's parameter gradient (the kit then asks for it), `tolerance` how close its values must be.
class ExecValueConsumer final : public ValueConsumerRole, public ExecChannel {
 public:
  ExecValueConsumer(std::string command, ExecOptions options, bool gradients = false, ValueTolerance tolerance = {})
      : ExecChannel(std::move(command), std::move(options)), gradients_(gradients), tolerance_(tolerance) {}
  // One value_request per micro-batch (packed, or a piece alone); ExecRoleFault when the candidate gave no
  // values for every row, or no gradient when asked.
  ValueAnswer ConsumeValues(const CandidateMicrobatch& microbatch, const Policy& policy,
                            const ValueRequest& request) override;
  ValueTolerance Tolerance() const override { return tolerance_; }
  bool AnswersGradients() const override { return gradients_; }
  void ReadEmitted(EmittedSource source) { emitted_ = std::move(source); }

 private:
  std::int64_t next_id_ = 0;
  bool gradients_;
  ValueTolerance tolerance_;
  EmittedSource emitted_;
};

}  // namespace packoracle
