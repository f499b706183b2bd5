// The loss reducer and the attention consumer roles over the exec protocol (DESIGN §6, "Other roles"): a
// candidate's reducer or consumer in another process (any language; a Python callable in another interpreter
// through `python -m packoracle.serve`), with the deadlines, restarts and faults of the packer's channel
// (exec_channel.h).
//
//   packoracle::Candidate c;                       // the kit's reference packer makes the rows
//   c.reducer = std::make_shared<packoracle::ExecReducer>("python3 my_reducer.py", packoracle::ExecOptions{});
//   c.consumer = std::make_shared<packoracle::ExecConsumer>("python3 my_masks.py", packoracle::ExecOptions{});
//   packoracle::VerifyReport report = packoracle::Verify(c);
//
// Per case, a reducer gets one line, ReduceRequestToJson: {"record":"reduce_request","id":N,...} and answers
//   ← {"record":"totals","id":N,"totals":[<producer object of §5>, ...]}   (one or more such lines, the
//     micro-batches' totals in order), then {"record":"end","id":N}
// and a consumer gets, per micro-batch, ConsumeRequestToJson: {"record":"consume_request","id":N,"policy":..,
// "microbatch":<§5 record>} and answers, for each row in order,
//   ← {"record":"mask","id":N,"row":r,"runs":{"row_offsets":[..],"run_begin":[..],"run_end":[..],
//      "source":"runs"|"function"|"dense"}}   (mask_runs.h: query i sees keys [run_begin[k], run_end[k]) for
//      k in [row_offsets[i], row_offsets[i+1]))
//   or {"record":"mask","id":N,"row":r,"mask":[[1,0,..],..]}  (dense n × n, 0/1)
//   then {"record":"end","id":N}.
// Neither role refuses: an `error` record, like a crash, a hang, a malformed line or a wrong id, is a failure of
// that case. It reaches the checker as an ExecRoleFault (a std::exception), which reports it under the role's
// invariant (`loss` for a reducer, `attention` for a consumer) with the case's input, and shrinking goes on.
// After a fault the next request starts a fresh child; an error record is an answer in protocol, so its child
// keeps running (a served library is imported once, not again at every shrinking step).
#pragma once

#include <cstdint>
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

class ExecConsumer final : public AttentionConsumerRole, public ExecChannel {
 public:
  ExecConsumer(std::string command, ExecOptions options) : ExecChannel(std::move(command), std::move(options)) {}
  DenseMask Consume(const CandidateRow& row, const Policy& policy) override;
  std::vector<DenseMask> ConsumeMicrobatch(const CandidateMicrobatch& microbatch, const Policy& policy) override;
  // One request per micro-batch; ExecRoleFault when the candidate gave no mask for every row.
  std::vector<MaskRuns> ConsumeMicrobatchRuns(const CandidateMicrobatch& microbatch, const Policy& policy) override;

 private:
  std::int64_t next_id_ = 0;
};

}  // namespace packoracle
