// The property-based run (`packoracle fuzz`, DESIGN §6–§7) as a library call, generic over the candidate: an
// exec process (fuzz_exec.h), or any in-process packoracle::Candidate (a Python callable behind a PackerRole).
//
//   jobs::FuzzOptions options;
//   options.preset = "reference";
//   options.replay_command = [](const std::string& r) { return "packoracle.fuzz(..., reproduce=\"" + r + "\")"; };
//   const jobs::FuzzPolicies policies = jobs::ResolveFuzzPolicies(options);
//   Candidate candidate = ...;              // candidate.policies = policies.policies
//   const jobs::FuzzOutcome outcome = jobs::RunFuzz(candidate, options, policies);
//   if (outcome.failure) std::cout << outcome.failure_text;   // the minimal counterexample, with its replay line
//
// The run is a sequence of Verify calls of kFuzzBatch cases each: batch 0 uses the run's seed, batch b a seed
// derived from it, so that a run is reproducible from its seed and case count, a time budget can stop it
// between batches, and progress can be shown. Every reproduce string carries its batch's seed.
//
// shard "i/n" runs the batches b with b mod n == i of that same sequence (each with its own derived seed):
// the n shards together run exactly the batches of the unsharded run, each once, so a CI matrix or a Slurm
// array splits a run without changing what is checked; a shard's reproduce strings replay alone.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "packoracle/oracle/policy.h"
#include "packoracle/properties/candidate.h"
#include "packoracle/properties/verify.h"

namespace packoracle::jobs {

inline constexpr int kFuzzBatch = 32;  // cases per Verify call
inline constexpr int kDefaultFuzzCases = 1000;
// Case sizes climb from CI-sized (L ≤ 16, 8 documents) to the bounds over a run's first cases (all of them
// when the run has fewer), so that a long session reaches real sizes in its first minute.
inline constexpr std::int64_t kFuzzRampCases = 2048;
inline constexpr std::int64_t kDefaultFuzzMaxRowLength = packoracle::kDefaultMaxRowLength;
inline constexpr std::int64_t kMaxFuzzRowLength = std::int64_t{1} << 20;  // max_row_length: 1..this
inline constexpr std::size_t kDefaultFuzzMaxDocuments = packoracle::kDefaultMaxDocuments;
inline constexpr std::size_t kMaxFuzzDocuments = std::size_t{1} << 16;  // max_documents: 1..this

struct FuzzOptions {
  // The policies the candidate claims: a preset, a JSON policy file, a Policy object (at most one), or with
  // none of them every preset. Each case draws one of them.
  std::string preset;
  std::string policy_file;
  std::optional<Policy> policy;
  int cases = kDefaultFuzzCases;
  bool cases_given = false;  // with a time budget: false runs as many cases as the time allows
  std::uint64_t seed = packoracle::VerifyOptions{}.seed;
  double time = 0;           // seconds, checked between batches; 0: no budget
  std::string profile;       // one fuzzing profile for every case; empty: drawn per case
  std::int64_t max_row_length = kDefaultFuzzMaxRowLength;  // the rows' largest L (a reproduce string depends on it)
  std::size_t max_documents = kDefaultFuzzMaxDocuments;      // the most documents in a case (so does it)
  bool sft_masks = true;     // false: every token supervised (pretraining packers; reproduce depends on it)
  std::string save_regressions;  // write the minimal counterexample into this directory
  std::string reproduce;     // replay exactly the case of a reproduce string (v1:...) and stop
  bool oracle = false;       // check every case with CheckCase alone (the slow path)
  bool no_decoder = false;   // skip packing_invariance (the tiny decoder): every passing case on the fast path
  std::string shard;         // "i/n"; empty: the whole run
  bool stats = false;        // measure what was generated (FuzzOutcome::generated)
  // The candidate's loss reducer or attention consumer as an external process over the exec protocol (DESIGN
  // §6, "Other roles"): RunFuzz gives the candidate an ExecReducer / ExecConsumer running the command (a
  // candidate that already has the role is an InputError). exec_timeout: seconds each of their answers may take.
  std::string exec_reducer;
  std::string exec_consumer;
  double exec_timeout = 10.0;
  // The candidate's value consumer as an exec process (DESIGN §6 value_request records, §12 "Values and
  // gradients"), asked for the probe loss's parameter gradient when exec_value_gradients, its values compared
  // within exec_value_tolerance (packoracle.fuzz's value_tolerance; the command line's: the default).
  std::string exec_value_consumer;
  bool exec_value_gradients = false;
  ValueTolerance exec_value_tolerance;
  // The candidate's packer as an exec process (packoracle.fuzz's exec_packer=; the command line's --exec is
  // ExecFuzzOptions::exec, started by RunExecFuzz): RunFuzz gives the candidate an ExecPacker running it.
  std::string exec_packer;
  // The exec packer's latest answer as its child wrote it (ExecPacker::emitted), handed to the exec consumers
  // (their requests' `emitted`): set by RunExecFuzz for --exec; RunFuzz's own for exec_packer. Null: none.
  std::function<const std::vector<std::string>*()> emitted_records;
  // Called with the records after each answer of exec_packer's packer (the binding's step view keeps them).
  std::function<void(const std::vector<std::string>&)> on_emitted;
  std::int64_t optimizer_steps = 1;  // the reducer's generation batch feeds this many optimizer steps (CheckOptions)
  // A selection declared in the reducer's objective: the top fraction q ∈ (0, 1] of each optimizer step's targets
  // by the kit's scores (CheckOptions::selection, oracle/selection.h); 1: none.
  double select_top_fraction = 1.0;
  // The line that replays a reproduce string, shown in the failure's report (the command line's
  // `packoracle fuzz --exec ... --reproduce ...`, or the Python call); empty: no replay line.
  std::function<std::string(const std::string& reproduce)> replay_command;
  std::string headline;         // the failure's first line names this (VerifyOptions::headline)
  bool regression_draft = true;  // the failure's report ends with a C++ regression test draft
};

// InputError for options no run can use (a bad shard, --shard with --reproduce, two policies, cases < 1, a
// negative time, an unknown profile); its message is the command line's. `more_checks` (a caller's own, such
// as the exec timeout) run before the profile's, so that a command line with two mistakes names the one it
// always named first.
void CheckFuzzOptions(const FuzzOptions& options, const std::function<void()>& more_checks = {});

struct FuzzPolicies {
  std::vector<Policy> policies;
  std::string label;  // "preset P", "the policy of F", "the given policy", "every preset"
};
// The policies options name; InputError for a policy file that cannot be read or is not one.
FuzzPolicies ResolveFuzzPolicies(const FuzzOptions& options);

struct FuzzHooks {
  std::function<bool()> interrupted;                     // asked between batches: true stops the run
  std::function<void(std::int64_t cases_before)> batch;  // a batch of cases starts
};

struct FuzzBatch {
  std::int64_t index = 0;
  std::uint64_t seed = 0;
  int cases = 0;
};

struct FuzzOutcome {
  int exit_code = 0;  // 0 every case passed, 1 a failure was found, 130 interrupted
  std::string candidate;  // its name
  std::string policy_label;
  std::int64_t cases_run = 0;
  double seconds = 0;
  std::string stopped_by = "cases";  // "cases", "time", "failure" or "interrupt"
  int shard_index = 0, shard_count = 1;
  std::vector<FuzzBatch> batches;    // this shard's
  bool replayed = false;             // options.reproduce: the run was that one case
  std::set<Invariant> checked;
  std::set<std::string> profiles;
  std::optional<VerifyReport> failure;  // shrunk; cases_to_failure counted over the run; its sections as reported
  std::string failure_text;             // its full report (failure->text), with the replay line
  std::string regression_path, regression_error;  // options.save_regressions
  VerifyReport gaps;  // largest_gap only: the largest declared-objective gap over the run
  std::optional<Contamination> contamination;  // packing_invariance's measurement over the run
  std::optional<ConsumerWork> consumer_work;   // the attention consumer's computed work over the run (efficiency)
  std::optional<GenerationStats> generated;    // options.stats: every case as generated, over the run
  double cases_per_second() const;
};

// Runs options' cases against `candidate` (whose policies should be policies.policies): generation,
// checking, shrinking, the failure's report and regression. InputError for unusable options.
FuzzOutcome RunFuzz(Candidate& candidate, const FuzzOptions& options, const FuzzPolicies& policies,
                    const FuzzHooks& hooks = {});

}  // namespace packoracle::jobs
