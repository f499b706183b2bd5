// The runner: generation from a seed, checking, shrinking (shrinker.h) and reproduce strings.
//
// A reproduce string (reproduce_string.h) names the run's seed, the case index, the generation size, the
// profile and the path of shrink choices from the generated case to the minimal one, so that a failure
// replays exactly without storing the case.
#include "packoracle/properties/verify.h"

#include <rapidcheck.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

#include "case_edits.h"
#include "shrinker.h"
#include "packoracle/properties/reproduce_string.h"
#include "packoracle/oracle/error.h"
#include "packoracle/properties/generators.h"
#include "packoracle/oracle.h"
#include "packoracle/properties/invariants.h"

namespace packoracle {
namespace {

// Keeps the largest |declared objective − global token mean| of the run (a reducer's splits, or a packer's
// producer totals as packed).
void RecordGap(VerifyReport& report, const CaseResult& result, const Policy& policy, int case_index) {
  if (!result.token_mean) return;
  auto consider = [&](const std::string& split, double declared) {
    const double gap = std::fabs(declared - *result.token_mean);
    if (gap <= 1e-12 * std::max(1.0, std::fabs(*result.token_mean))) return;
    if (report.largest_gap && gap <= std::fabs(report.largest_gap->gap())) return;
    report.largest_gap = VerifyReport::ObjectiveGap{declared, *result.token_mean, split, case_index, policy.denominator};
  };
  if (!result.split_objectives.empty()) {
    for (const auto& s : result.split_objectives) consider(s.split, s.declared);
  } else if (result.declared_objective) {
    consider("as packed", *result.declared_objective);
  }
}

rc::Random RandomFor(std::uint64_t seed, int case_index) {
  return rc::Random(seed ^ (0x9E3779B97F4A7C15ULL * static_cast<std::uint64_t>(case_index + 1)));
}

// The generation size of case k: it climbs from 10 to 100 over the run's first ramp cases (counted over the
// whole run: a fuzz run calls Verify once per batch), then stays at 100.
int SizeFor(const VerifyOptions& options, int case_index) {
  const std::int64_t ramp = options.ramp_cases > 0 ? options.ramp_cases : options.cases;
  if (ramp <= 1) return 50;
  const std::int64_t k = options.ramp_offset + case_index;
  return static_cast<int>(std::min<std::int64_t>(100, 10 + k * 90 / ramp));
}

const gen::Profile& NamedProfile(const std::string& name) {
  const auto& profiles = gen::Profiles();
  for (const auto& p : profiles)
    if (p.name == name) return p;
  std::string known;
  for (const auto& p : profiles) known += (known.empty() ? "" : ", ") + p.name;
  throw InputError("unknown profile '" + name + "' (known profiles: " + known + ")");
}

// The profile of case k: the one asked for, else one drawn per case from the seed, so that every run sees
// every corner of the input space whatever its seed.
const gen::Profile& ProfileFor(const VerifyOptions& options, std::uint64_t seed, int case_index) {
  if (options.profile) return NamedProfile(*options.profile);
  const auto& profiles = gen::Profiles();
  const std::uint64_t h = (seed ^ (0xD1B54A32D192ED03ULL * static_cast<std::uint64_t>(case_index + 1))) >> 17;
  // every profile once, `large` twice: the size-dependent bugs need it, and the small ones are cheap
  const std::uint64_t slot = h % (profiles.size() + 1);
  return slot < profiles.size() ? profiles[slot] : NamedProfile("large");
}

template <class T>
std::optional<rc::Shrinkable<T>> NthShrink(const rc::Shrinkable<T>& s, int n) {
  auto seq = s.shrinks();
  for (int i = 0;; ++i) {
    auto next = seq.next();
    if (!next) return std::nullopt;
    if (i == n) return *next;
  }
}

// What a run checks: its seed and cases, and, replaying a reproduce string, the one case and the way from
// it to its minimal form.
struct RunPlan {
  std::uint64_t seed = 0;
  int first_case = 0, last_case = 0;
  int size_override = -1;                    // replaying: the recorded generation size
  const gen::Profile* replay_profile = nullptr;
  std::vector<int> replay_path;              // RapidCheck's shrink choices
  std::vector<std::string> replay_edits;     // then the case edits
};

RunPlan PlanRun(const VerifyOptions& options) {
  if (options.profile) NamedProfile(*options.profile);  // an unknown name is an input error before any case
  RunPlan plan;
  plan.seed = options.seed;
  plan.last_case = options.cases;
  if (!options.reproduce) return plan;
  const auto r = ReproduceString::Parse(*options.reproduce);
  plan.replay_profile = &NamedProfile(r.profile);
  plan.seed = r.seed;
  plan.first_case = r.case_index;
  plan.last_case = r.case_index + 1;
  plan.size_override = r.size;
  plan.replay_path = r.path;
  plan.replay_edits = r.edits;
  return plan;
}

// Case k of the run: generated from the seed at its size and profile; replaying, walked down the recorded
// shrink path and case edits.
struct GeneratedCase {
  const gen::Profile* profile = nullptr;
  int size = 0;
  internal::FailingCase at;  // the case (its result not yet checked) and the way to it
};

GeneratedCase Generate(const RunPlan& plan, const Candidate& candidate, const VerifyOptions& options,
                       const gen::Limits& limits, int k) {
  const int size = plan.size_override >= 0 ? plan.size_override : SizeFor(options, k);
  const gen::Profile* profile = plan.replay_profile ? plan.replay_profile : &ProfileFor(options, plan.seed, k);
  gen::Profile drawn = *profile;
  if (!options.sft_masks) drawn.sft_percent = 0;
  const auto generator = gen::Request(drawn, candidate.policies, limits);
  GeneratedCase out{profile, size, {generator(RandomFor(plan.seed, k), size), {}, {}, {}, {}}};
  for (int step : plan.replay_path) {
    auto next = NthShrink(out.at.shrinkable, step);
    if (!next) throw InputError("reproduce string: shrink step " + std::to_string(step) + " does not exist");
    out.at.shrinkable = *next;
    out.at.path.push_back(step);
  }
  out.at.request = out.at.shrinkable.value();
  for (const auto& e : plan.replay_edits) {
    auto edited = internal::ApplyCaseEdit(out.at.request, e);
    if (!edited) throw InputError("reproduce string: the case edit '" + e + "' does not apply");
    out.at.request = std::move(*edited);
    out.at.edits.push_back(e);
  }
  out.at.request.id = k;
  return out;
}

// The probe's micro-batches, as CheckCase hands a consumer its rows: the candidate's own packer's answer when it
// has one (a consumer may read fields only its packer writes: MK-02 reads the attention_mask its packer fills),
// the reference packer's otherwise. Empty when the probe is refused or the packer fails on it.
std::vector<CandidateMicrobatch> ProbeMicrobatches(Candidate& candidate, const PackRequest& probe) {
  try {
    if (candidate.packer) {
      PackResult packed = candidate.packer->Pack(probe);
      if (packed.refusal || packed.fault) return {};
      return std::move(packed.microbatches);
    }
    Layout layout = DefaultLayout(probe.documents, probe.policy, probe.row_length);
    AssignMicrobatches(layout, 1, 1);
    return ReferenceMicrobatches(Materialize(probe.documents, layout, probe.policy), probe);
  } catch (const std::exception&) {
    return {};  // the policy refuses the probe, or the packer threw: its cases report it
  }
}

// How does the consumer answer (MaskSource: runs, a mask function, a dense matrix)? Asked once a run, on a probe of
// two documents of 12 tokens in rows of 16 slots (ProbeMicrobatches), under the candidate's first policy (the
// reference preset when it claims every policy). A probe refused, a consumer that throws on it: taken as dense (its
// cases report what it does); rows of mixed forms: the costliest.
MaskSource ProbeAnswer(Candidate& candidate) {
  PackRequest probe;
  probe.row_length = 16;
  probe.policy = candidate.policies.empty() ? FindPreset("reference").policy : candidate.policies.front();
  // two documents that fit a row, long enough together for a policy that cuts a stream into full windows (llmc)
  probe.documents = {{"probe-a", std::vector<Token>(12, 3), {}}, {"probe-b", std::vector<Token>(12, 4), {}}};
  for (const auto& doc : probe.documents) probe.target_losses[doc.uid].assign(16, 1.0);  // delimiters included
  std::vector<CandidateMicrobatch> microbatches = ProbeMicrobatches(candidate, probe);
  if (microbatches.empty() || microbatches.front().rows.empty()) return MaskSource::kDense;
  microbatches.front().producer.reset();
  try {
    const auto masks = candidate.consumer->ConsumeMicrobatchRuns(microbatches.front(), probe.policy);
    if (masks.empty()) return MaskSource::kDense;
    MaskSource costliest = MaskSource::kRuns;
    for (const auto& m : masks) costliest = std::max(costliest, m.source);
    return costliest;
  } catch (const std::exception&) {
    return MaskSource::kDense;  // the consumer's own failure: its cases report it
  }
}

// The longest row of a run's cases. An attention consumer is generated rows by what its answer costs a row
// (MaskSource): one that answers runs (segment ids, C++ MaskRuns) gets max_row_length, as every other role
// does; a mask function, mask_mod or BlockMask (read cell by cell) kFunctionConsumerMaxRowLength; dense n × n
// masks kDenseConsumerMaxRowLength. The probe is skipped when it cannot matter.
std::int64_t LongestRow(Candidate& candidate, const VerifyOptions& options) {
  if (!candidate.consumer || options.max_row_length <= kDenseConsumerMaxRowLength) return options.max_row_length;
  switch (ProbeAnswer(candidate)) {
    case MaskSource::kRuns: return options.max_row_length;
    case MaskSource::kFunction: return std::min(options.max_row_length, kFunctionConsumerMaxRowLength);
    case MaskSource::kDense: break;
  }
  return kDenseConsumerMaxRowLength;
}

// The generator's bounds for case k: the run's, with rows of at most `longest` (LongestRow), but for one case in
// kFullSizeCaseEvery of a consumer whose rows are capped, which gets the run's full length (mask_runs.h).
gen::Limits LimitsFor(int k, std::int64_t longest, const VerifyOptions& options) {
  gen::Limits limits{longest, static_cast<std::int64_t>(options.max_documents)};
  if (longest >= options.max_row_length || k % kFullSizeCaseEvery != kFullSizeCaseEvery - 1) return limits;
  limits.max_row_length = options.max_row_length;
  limits.min_row_length = std::min(options.max_row_length, kFullSizeMinRowLength);
  limits.max_micro_batch_rows = 1;
  return limits;
}

// What a run learns from every case it checks, whether it fails or not: the invariants checked, those that
// applied to no case, the largest objective gap, the contamination, the consumer's work.
class RunTally {
 public:
  void Observe(VerifyReport& report, const CaseResult& result, const PackRequest& request, int k) {
    ++report.cases_run;
    RecordGap(report, result, request.policy, k + 1);
    checked_.insert(result.checked.begin(), result.checked.end());
    if (result.contamination && result.contamination->targets > 0) {
      Accumulate(report.contamination ? *report.contamination : report.contamination.emplace(), *result.contamination);
    }
    if (result.consumer_work) (report.consumer_work ? *report.consumer_work : report.consumer_work.emplace()).Add(*result.consumer_work);
    if (first_) {
      not_applicable_ = result.not_applicable;
      first_ = false;
      return;
    }
    std::set<Invariant> both;
    for (auto inv : not_applicable_)
      if (result.not_applicable.count(inv)) both.insert(inv);
    not_applicable_ = both;
  }

  void Finish(VerifyReport& report) const {
    report.checked = checked_;
    for (auto inv : not_applicable_)
      if (!checked_.count(inv)) report.not_applicable.insert(inv);
  }

 private:
  std::set<Invariant> checked_, not_applicable_;
  bool first_ = true;
};

}  // namespace

std::size_t VerifyReport::counterexample_documents() const {
  return counterexample ? counterexample->documents.size() : 0;
}

std::size_t VerifyReport::counterexample_tokens() const {
  std::size_t n = 0;
  if (counterexample)
    for (const auto& d : counterexample->documents) n += d.tokens.size();
  return n;
}

VerifyReport Verify(Candidate& candidate, const VerifyOptions& options) {
  VerifyReport report;
  report.candidate = candidate.name;
  report.source = candidate.source;
  const RunPlan plan = PlanRun(options);
  // A loss reducer gets the steps a packer gets (tens of thousands of slots), checked under every split
  // (splits.h); an attention consumer too, unless it answers dense masks (LongestRow).
  const std::int64_t longest = LongestRow(candidate, options);
  std::set<std::string> profiles_used;
  RunTally tally;
  for (int k = plan.first_case; k < plan.last_case; ++k) {
    GeneratedCase generated = Generate(plan, candidate, options, LimitsFor(k, longest, options), k);
    internal::FailingCase& c = generated.at;
    profiles_used.insert(generated.profile->name);
    if (options.collect_stats && plan.replay_path.empty()) {
      (report.generated ? *report.generated : report.generated.emplace()).Observe(c.request, generated.profile->name);
    }
    try {
      c.result = internal::CheckWith(options, candidate, c.request);
    } catch (const InputError& e) {
      // A generated case the kit itself cannot check is a bug of the kit's generators: say which case.
      throw InputError("generated case " +
                       ReproduceString{plan.seed, k, generated.size, generated.profile->name, {}, {}}.CaseString() +
                       " is not a valid input: " + e.what());
    }
    tally.Observe(report, c.result, c.request, k);
    if (!internal::Fails(c.result, options)) continue;
    report.passed = false;
    report.cases_to_failure = k + 1;
    report.shrinks += internal::Shrinker(candidate, options, k).Shrink(c);
    report.counterexample = c.request;
    report.failure = c.result;
    report.profile = generated.profile->name;
    report.reproduce = ReproduceString{plan.seed, k, generated.size, generated.profile->name, c.path, c.edits}.ToString();
    break;
  }
  // A failure names the profile of its case (its reproduce string holds it); a pass, every profile drawn.
  if (report.passed) {
    for (const auto& name : profiles_used) report.profile += (report.profile.empty() ? "" : ",") + name;
  }
  tally.Finish(report);
  if (!report.passed) {
    DescribeFailure(report, options);
  }
  return report;
}

std::string DescribeGap(const VerifyReport& report) {
  if (!report.largest_gap) return "";
  const auto& g = *report.largest_gap;
  std::ostringstream os;
  os.precision(6);
  os << "declares " << Name(g.formula) << ": its step objective was " << std::showpos << g.gap()
     << std::noshowpos << " nats";
  if (g.token_mean != 0) os << " (" << std::showpos << 100.0 * g.gap() / g.token_mean << std::noshowpos << "%)";
  os << " from the global token mean Σwℓ/Σw (" << g.declared << " vs " << g.token_mean << ", case " << g.case_index
     << ", split " << g.split << ")";
  return os.str();
}

void DescribeFailure(VerifyReport& report, const VerifyOptions& options) {
  if (report.passed || !report.counterexample || !report.failure) return;
  report.sections = BuildReportSections(report.candidate, *report.counterexample, *report.failure, report, options);
  report.text = RenderReport(*report.sections);
}

VerifyReport VerifyOne(Candidate& candidate, const PackRequest& request, const VerifyOptions& options) {
  VerifyReport report;
  report.candidate = candidate.name;
  report.source = candidate.source;
  report.profile = "given";
  CaseResult result = internal::CheckWith(options, candidate, request);
  report.cases_run = 1;
  report.checked = result.checked;
  report.not_applicable = result.not_applicable;
  RecordGap(report, result, request.policy, 1);
  if (internal::Fails(result, options)) {
    report.passed = false;
    report.cases_to_failure = 1;
    report.counterexample = request;
    report.failure = result;
    report.reproduce = "(a given case: replay it from its file)";
    DescribeFailure(report, options);
  }
  return report;
}

}  // namespace packoracle
