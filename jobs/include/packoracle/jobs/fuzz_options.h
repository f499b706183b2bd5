// The options of a fuzz run (FuzzOptions) that its front ends set, stated once: `packoracle fuzz`'s flag,
// packoracle.fuzz's keyword, the member each sets, and whether a failure's replay line repeats it. Read by the
// command line (cli/fuzz_command.cc adds a flag per entry), the binding (python/binding/fuzz.cc reads its
// `options` dict by keyword; `_core.fuzz_options()` hands the table to packoracle._fuzz, whose replay line
// repeats the entries marked `replayed`) and the exec replay line (ExecReplayCommand).
//
// A new option is its FuzzOptions member, its entry here, and its keyword in packoracle.fuzz's signature
// (python/tests/test_fuzz_options.py holds the signature and the table the same).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

#include "packoracle/jobs/fuzz.h"

namespace packoracle::jobs {

static_assert(std::is_same_v<std::size_t, std::uint64_t>, "FuzzMember holds max_documents as a std::uint64_t");
using FuzzMember = std::variant<int FuzzOptions::*, std::int64_t FuzzOptions::*, std::uint64_t FuzzOptions::*,
                                double FuzzOptions::*, bool FuzzOptions::*, std::string FuzzOptions::*>;

struct FuzzOption {
  std::string_view flag;     // `packoracle fuzz`'s, "" where the command line has none
  std::string_view keyword;  // packoracle.fuzz's, "" where Python has none (it names the policy itself)
  FuzzMember member;
  // The keyword says the member's negation (packoracle.fuzz's decoder=False is --no-decoder).
  bool keyword_negates = false;
  // A failure's replay line repeats it where it is not at its default: the case drawn, or what is checked of
  // it, depends on it.
  bool replayed = false;
  std::uint64_t most = 0;  // the command line refuses a value outside 1..most (0: no range)
  std::string_view help = {};
};

inline constexpr std::array<FuzzOption, 24> kFuzzOptions = {{
    {"--preset", "", &FuzzOptions::preset, false, true, 0,
     "the preset the candidate implements (see `packoracle presets`)"},
    {"--policy", "", &FuzzOptions::policy_file, false, true, 0,
     "a JSON file holding the policy the candidate implements: {\"preset\":..., key: value, ...}"},
    {"--cases", "cases", &FuzzOptions::cases, false, false, 0,
     "cases to generate (default 1000; with --time and no --cases: as many as the time allows)"},
    {"--seed", "seed", &FuzzOptions::seed, false, false, 0, "the run's seed: the same seed gives the same cases"},
    {"--time", "time", &FuzzOptions::time, false, false, 0, "time budget in seconds: no new case is generated after it"},
    {"--max-row-length", "max_row_length", &FuzzOptions::max_row_length, false, true, kMaxFuzzRowLength,
     "the longest row L generated, reached as the run grows (a reproduce string depends on it)"},
    {"--max-documents", "max_documents", &FuzzOptions::max_documents, false, true, kMaxFuzzDocuments,
     "the most documents in one case, reached as the run grows (a reproduce string depends on it)"},
    {"--profile", "", &FuzzOptions::profile, false, false, 0,
     "one fuzzing profile for every case (packed, edges, short, long, sft, collide, large); default: drawn per case"},
    {"--save-regressions", "save_regressions", &FuzzOptions::save_regressions, false, false, 0,
     "write the minimal counterexample into this directory"},
    {"--reproduce", "reproduce", &FuzzOptions::reproduce, false, false, 0,
     "replay exactly the case of a reproduce string (v1:...) and stop"},
    {"--stats", "stats", &FuzzOptions::stats, false, false, 0,
     "say what was generated: documents per case and per row, row lengths, tokens, the share of cases in which "
     "documents share a row, refusals, zero-target steps, ranks and micro-batches (the JSON output always holds "
     "it, under \"generated\")"},
    {"--oracle", "", &FuzzOptions::oracle, false, false, 0,
     "check every case with the oracle alone (CheckCase); by default the fast verifier checks each case and the "
     "oracle reports the failures (with the decoder on, the oracle checks every case)"},
    {"--no-decoder", "decoder", &FuzzOptions::no_decoder, true, true, 0,
     "skip packing_invariance (the tiny reference decoder run on every row and every document alone): the "
     "structural invariants stay, on the fast verifier"},
    {"--shard", "", &FuzzOptions::shard, false, false, 0,
     "i/n: run shard i of n (batches b with b mod n == i; same --seed and --cases in every shard)"},
    {"", "sft_masks", &FuzzOptions::sft_masks, false, true},  // the command line's candidates take supervision
    {"", "headline", &FuzzOptions::headline},                 // the Python call, as the user made it
    // packoracle.fuzz's exec packer (the command line's is --exec, ExecFuzzOptions::exec)
    {"", "exec_packer", &FuzzOptions::exec_packer, false, true},
    {"--exec-reducer", "exec_reducer", &FuzzOptions::exec_reducer, false, true, 0,
     "a command that runs the candidate's loss reducer as a process over the exec protocol (DESIGN §6, other "
     "roles: reduce_request records, totals answers); without --exec the kit's reference packer makes the rows"},
    {"--exec-consumer", "exec_consumer", &FuzzOptions::exec_consumer, false, true, 0,
     "a command that runs the candidate's attention consumer as a process over the exec protocol (DESIGN §6, "
     "other roles: consume_request records, mask answers); the same command may serve --exec-reducer too"},
    {"--exec-value-consumer", "exec_value_consumer", &FuzzOptions::exec_value_consumer, false, true, 0,
     "a command that runs the candidate's value consumer as a process over the exec protocol (DESIGN §6, other "
     "roles: value_request records, values answers): its per-position outputs of each packed micro-batch are "
     "compared with each document piece's alone (packing_invariance)"},
    // packoracle.fuzz sets it from gradient=True with exec_value_consumer=
    {"--exec-value-gradients", "", &FuzzOptions::exec_value_gradients, false, true, 0,
     "ask the --exec-value-consumer for the probe loss's parameter gradient too (value_request \"gradient\": "
     "true, a gradient record answers): the packed micro-batch's must equal the sum of its pieces' (gradient)"},
    {"--optimizer-steps", "optimizer_steps", &FuzzOptions::optimizer_steps, false, true, 64,
     "a reducer's schedule: hand it each case's step as one generation batch feeding this many optimizer steps "
     "(GRPO/PPO steps_per_generation > gradient accumulation), each checked against the declared objective over "
     "that optimizer step alone (default 1)"},
    {"--select-top-fraction", "select_top_fraction", &FuzzOptions::select_top_fraction, false, true, 0,
     "a selection in a reducer's objective: keep the top fraction q in (0, 1] of each optimizer step's targets by "
     "the score the kit supplies per slot (reduce_request slot_scores; RL recipes keeping the top-20% entropy "
     "tokens), every target's weight, count and loss then those of the selected ones alone (default 1: none)"},
    // packoracle.fuzz's deadline of each answer (default 60 s) holds for its exec roles too: a reducer or consumer
    // in another interpreter may take as long as one in-process (a family venv's first answer imports its library).
    {"", "timeout", &FuzzOptions::exec_timeout},
}};

// The entry whose keyword is `keyword`, or nullptr.
inline const FuzzOption* FuzzOptionOfKeyword(std::string_view keyword) {
  for (const auto& option : kFuzzOptions)
    if (!option.keyword.empty() && option.keyword == keyword) return &option;
  return nullptr;
}

// The flags that repeat the options marked `replayed` that `o` holds away from their defaults (" --preset P
// --max-row-length 16 ..."), each value quoted for a POSIX shell: what a replay command line adds.
std::string ReplayedFlags(const FuzzOptions& o);

// The shortest text that reads back as `v` (0.2, not std::to_string's 0.200000): how a replayed fraction is written.
std::string ShortestText(double v);

}  // namespace packoracle::jobs
