// The runner: generation from a seed, checking, greedy shrinking and reproduce strings.
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
#include "packoracle/properties/reproduce_string.h"
#include "packoracle/oracle/error.h"
#include "packoracle/properties/generators.h"

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

// Does this case fail in a way that counts for the run?
CaseResult CheckWith(const VerifyOptions& options, Candidate& candidate, const PackRequest& request) {
  return options.check_case ? options.check_case(candidate, request, options.check)
                            : CheckCase(candidate, request, options.check);
}

bool Fails(const CaseResult& result, const VerifyOptions& options) {
  if (!options.only) return !result.passed();
  for (const auto& v : result.violations)
    if (v.invariant == *options.only) return true;
  return false;
}

std::optional<Invariant> Headline(const CaseResult& result, const VerifyOptions& options) {
  if (options.only) return options.only;
  if (result.violations.empty()) return std::nullopt;
  return result.violations.front().invariant;
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
  if (options.profile) NamedProfile(*options.profile);  // an unknown name is an input error before any case
  std::uint64_t seed = options.seed;
  int first_case = 0, last_case = options.cases, size_override = -1;
  std::vector<int> replay_path;
  std::vector<std::string> replay_edits;
  const gen::Profile* replay_profile = nullptr;
  if (options.reproduce) {
    const auto r = ReproduceString::Parse(*options.reproduce);
    replay_profile = &NamedProfile(r.profile);
    seed = r.seed;
    first_case = r.case_index;
    last_case = r.case_index + 1;
    size_override = r.size;
    replay_path = r.path;
    replay_edits = r.edits;
  }
  // An attention consumer answers with dense L×L masks: its rows stay at kRoleMaxRowLength. A loss reducer
  // gets the steps a packer gets (tens of thousands of slots), checked under every split (splits.h).
  const std::int64_t longest = candidate.consumer ? std::min(options.max_row_length, kRoleMaxRowLength)
                                                  : options.max_row_length;
  const gen::Limits limits{longest, static_cast<std::int64_t>(options.max_documents)};
  std::set<std::string> profiles_used;
  std::set<Invariant> ever_checked, ever_not_applicable;
  bool first_not_applicable = true;

  for (int k = first_case; k < last_case; ++k) {
    const int size = size_override >= 0 ? size_override : SizeFor(options, k);
    const gen::Profile* profile = replay_profile ? replay_profile : &ProfileFor(options, seed, k);
    profiles_used.insert(profile->name);
    gen::Profile drawn = *profile;
    if (!options.sft_masks) drawn.sft_percent = 0;
    const auto generator = gen::Request(drawn, candidate.policies, limits);
    rc::Shrinkable<PackRequest> current = generator(RandomFor(seed, k), size);
    std::vector<int> path;
    for (int step : replay_path) {  // replaying: walk the recorded shrink path
      auto next = NthShrink(current, step);
      if (!next) throw InputError("reproduce string: shrink step " + std::to_string(step) + " does not exist");
      current = *next;
      path.push_back(step);
    }
    PackRequest request = current.value();
    std::vector<std::string> edits;
    for (const auto& e : replay_edits) {  // replaying: the recorded case edits
      auto edited = internal::ApplyCaseEdit(request, e);
      if (!edited) throw InputError("reproduce string: the case edit '" + e + "' does not apply");
      request = std::move(*edited);
      edits.push_back(e);
    }
    request.id = k;
    if (options.collect_stats && replay_path.empty()) {
      (report.generated ? *report.generated : report.generated.emplace()).Observe(request, profile->name);
    }
    CaseResult result;
    try {
      result = CheckWith(options, candidate, request);
    } catch (const InputError& e) {
      // A generated case the kit itself cannot check is a bug of the kit's generators: say which case.
      throw InputError("generated case " + ReproduceString{seed, k, size, profile->name, {}, {}}.CaseString() +
                       " is not a valid input: " + e.what());
    }
    ++report.cases_run;
    RecordGap(report, result, request.policy, k + 1);
    ever_checked.insert(result.checked.begin(), result.checked.end());
    if (result.contamination && result.contamination->targets > 0) {
      Accumulate(report.contamination ? *report.contamination : report.contamination.emplace(), *result.contamination);
    }
    if (first_not_applicable) {
      ever_not_applicable = result.not_applicable;
      first_not_applicable = false;
    } else {
      std::set<Invariant> both;
      for (auto inv : ever_not_applicable)
        if (result.not_applicable.count(inv)) both.insert(inv);
      ever_not_applicable = both;
    }
    if (!Fails(result, options)) continue;

    // Shrink greedily: take the first simpler case that still breaks the same invariant, repeat.
    report.passed = false;
    report.cases_to_failure = k + 1;
    const auto headline = Headline(result, options);
    // While shrinking only the headline counts: the determinism rerun (two more calls of the candidate per
    // case) is left out unless determinism is what broke.
    VerifyOptions shrinking = options;
    if (headline != Invariant::kDeterminism) shrinking.check.determinism = false;
    VerifyOptions same = options;  // a smaller case counts when it breaks the same invariant
    same.only = headline;
    int budget = options.shrink && !options.reproduce ? options.max_shrink_steps : 0;
    // A large case (its tokens drawn from a seed, not one pick each) is cut down by the case edits alone:
    // RapidCheck's shrinks would regenerate and recheck all of it for every pick.
    std::size_t tokens = 0;
    for (const auto& d : request.documents) tokens += d.tokens.size();
    bool progressed = tokens <= static_cast<std::size_t>(gen::detail::kShrinkableTokens);
    while (progressed && budget > 0) {
      progressed = false;
      auto seq = current.shrinks();
      int index = 0;
      while (budget > 0) {
        auto next = seq.next();
        if (!next) break;
        --budget;
        PackRequest smaller = next->value();
        smaller.id = k;
        CaseResult r = CheckWith(shrinking, candidate, smaller);
        if (Fails(r, same)) {
          current = *next;
          request = smaller;
          result = r;
          path.push_back(index);
          ++report.shrinks;
          progressed = true;
          break;
        }
        ++index;
      }
    }
    // Then the edits RapidCheck cannot make (a document removed from the middle, one cut short, ...), the
    // first that still fails taken, repeated; last, distinct token values per document when they still fail.
    auto try_edit = [&](const std::string& e) {
      auto edited = internal::ApplyCaseEdit(request, e);
      if (!edited || budget <= 0) return false;
      --budget;
      edited->id = k;
      CaseResult r = CheckWith(shrinking, candidate, *edited);
      if (!Fails(r, same)) return false;
      request = std::move(*edited);
      result = std::move(r);
      internal::AppendCaseEdit(edits, e);
      ++report.shrinks;
      return true;
    };
    // Passes over the edit list; after a success the list is remade and the pass goes on from the same
    // place (what was tried before it failed on a larger case, so it is left for the next pass).
    auto edit_all = [&] {
      for (int pass = 0, edited = 1; edited && pass < 4 && budget > 0; ++pass) {
        edited = 0;
        std::vector<std::string> list = internal::CaseEdits(request);
        for (std::size_t at = 0; at < list.size() && budget > 0;) {
          if (try_edit(list[at])) {
            edited = 1;
            list = internal::CaseEdits(request);
          } else {
            ++at;
          }
        }
      }
    };
    edit_all();
    // distinct tokens can make more edits possible (a collision with the pad id no longer hides the bug)
    if (try_edit(internal::kDistinctTokens)) edit_all();
    report.counterexample = request;
    report.failure = result;
    report.profile = profile->name;
    report.reproduce = ReproduceString{seed, k, size, profile->name, path, edits}.ToString();
    break;
  }
  // A failure names the profile of its case (its reproduce string holds it); a pass, every profile drawn.
  if (report.passed) {
    for (const auto& name : profiles_used) report.profile += (report.profile.empty() ? "" : ",") + name;
  }
  report.checked = ever_checked;
  for (auto inv : ever_not_applicable)
    if (!ever_checked.count(inv)) report.not_applicable.insert(inv);
  if (!report.passed) {
    report.text = RenderFailure(candidate.name, *report.counterexample, *report.failure, report, options);
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

VerifyReport VerifyOne(Candidate& candidate, const PackRequest& request, const VerifyOptions& options) {
  VerifyReport report;
  report.candidate = candidate.name;
  report.profile = "given";
  CaseResult result = CheckWith(options, candidate, request);
  report.cases_run = 1;
  report.checked = result.checked;
  report.not_applicable = result.not_applicable;
  RecordGap(report, result, request.policy, 1);
  if (Fails(result, options)) {
    report.passed = false;
    report.cases_to_failure = 1;
    report.counterexample = request;
    report.failure = result;
    report.reproduce = "(a given case: replay it from its file)";
    report.text = RenderFailure(candidate.name, request, result, report, options);
  }
  return report;
}

}  // namespace packoracle
