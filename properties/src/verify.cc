// The runner: generation from a seed, checking, greedy shrinking and reproduce strings.
//
// A reproduce string "v1:<seed>:<case>:<size>:<profile>:<i.j.k>" names the run's seed, the case index, the
// generation size, the profile and the path of shrink choices from the generated case to the minimal one,
// so that a failure replays exactly without storing the case.
#include "packoracle/properties/verify.h"

#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <sstream>

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

int SizeFor(int case_index, int cases) { return cases <= 1 ? 50 : std::min(100, 10 + case_index * 100 / cases); }

const gen::Profile& ProfileFor(const VerifyOptions& options) {
  const auto& profiles = gen::Profiles();
  if (options.profile) {
    for (const auto& p : profiles)
      if (p.name == *options.profile) return p;
    std::string known;
    for (const auto& p : profiles) known += (known.empty() ? "" : ", ") + p.name;
    throw InputError("unknown profile '" + *options.profile + "' (known profiles: " + known + ")");
  }
  return profiles[options.seed % profiles.size()];
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

std::string PathString(const std::vector<int>& path) {
  std::string s;
  for (std::size_t i = 0; i < path.size(); ++i) s += (i ? "." : "") + std::to_string(path[i]);
  return s;
}

struct ParsedReproduce {
  std::uint64_t seed;
  int case_index;
  int size;
  std::string profile;
  std::vector<int> path;
};

ParsedReproduce ParseReproduce(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ':')) parts.push_back(part);
  if (text.size() > 0 && text.back() == ':') parts.push_back("");
  try {
    if (parts.size() != 6 || parts[0] != "v1") throw std::invalid_argument("shape");
    ParsedReproduce r{std::stoull(parts[1]), std::stoi(parts[2]), std::stoi(parts[3]), parts[4], {}};
    std::stringstream path(parts[5]);
    while (std::getline(path, part, '.'))
      if (!part.empty()) r.path.push_back(std::stoi(part));
    return r;
  } catch (const std::exception&) {
    throw InputError("reproduce string '" + text + "' is not of the form v1:<seed>:<case>:<size>:<profile>:<path>");
  }
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
  const gen::Profile* profile = &ProfileFor(options);
  std::uint64_t seed = options.seed;
  int first_case = 0, last_case = options.cases, size_override = -1;
  std::vector<int> replay_path;
  if (options.reproduce) {
    const auto r = ParseReproduce(*options.reproduce);
    VerifyOptions with_profile = options;
    with_profile.profile = r.profile;
    profile = &ProfileFor(with_profile);
    seed = r.seed;
    first_case = r.case_index;
    last_case = r.case_index + 1;
    size_override = r.size;
    replay_path = r.path;
  }
  report.profile = profile->name;
  gen::Profile sized = *profile;
  if (options.max_documents) sized.max_documents = *options.max_documents;
  if (!options.sft_masks) sized.sft_percent = 0;
  const auto generator = gen::Request(sized, candidate.policies, options.max_row_length);
  std::set<Invariant> ever_checked, ever_not_applicable;
  bool first_not_applicable = true;

  for (int k = first_case; k < last_case; ++k) {
    const int size = size_override >= 0 ? size_override : SizeFor(k, options.cases);
    rc::Shrinkable<PackRequest> current = generator(RandomFor(seed, k), size);
    std::vector<int> path;
    for (int step : replay_path) {  // replaying: walk the recorded shrink path
      auto next = NthShrink(current, step);
      if (!next) throw InputError("reproduce string: shrink step " + std::to_string(step) + " does not exist");
      current = *next;
      path.push_back(step);
    }
    PackRequest request = current.value();
    request.id = k;
    if (options.collect_stats && replay_path.empty()) {
      (report.generated ? *report.generated : report.generated.emplace()).Observe(request, profile->name);
    }
    CaseResult result;
    try {
      result = CheckWith(options, candidate, request);
    } catch (const InputError& e) {
      // A generated case the kit itself cannot check is a bug of the kit's generators: say which case.
      throw InputError("generated case v1:" + std::to_string(seed) + ":" + std::to_string(k) + ":" + std::to_string(size) +
                       ":" + profile->name + ": is not a valid input: " + e.what());
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
    int budget = options.shrink && !options.reproduce ? options.max_shrink_steps : 0;
    bool progressed = true;
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
        CaseResult r = CheckWith(options, candidate, smaller);
        VerifyOptions same = options;
        same.only = headline;
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
    report.counterexample = request;
    report.failure = result;
    report.reproduce = "v1:" + std::to_string(seed) + ":" + std::to_string(k) + ":" + std::to_string(size) + ":" +
                       profile->name + ":" + PathString(path);
    break;
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
