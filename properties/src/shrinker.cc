// Verify's shrinker (shrinker.h).
#include "shrinker.h"

#include "case_edits.h"
#include "packoracle/properties/generators.h"

namespace packoracle::internal {
namespace {

std::optional<Invariant> Headline(const CaseResult& result, const VerifyOptions& options) {
  if (options.only) return options.only;
  if (result.violations.empty()) return std::nullopt;
  return result.violations.front().invariant;
}

}  // namespace

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

Shrinker::Shrinker(Candidate& candidate, const VerifyOptions& options, int case_index)
    : candidate_(candidate), shrinking_(options), same_(options), case_index_(case_index),
      budget_(options.shrink && !options.reproduce ? options.max_shrink_steps : 0) {}

int Shrinker::Shrink(FailingCase& failing) {
  const auto headline = Headline(failing.result, same_);
  // While shrinking only the headline counts: the determinism rerun (two more calls of the candidate per
  // case) is left out unless determinism is what broke.
  if (headline != Invariant::kDeterminism) shrinking_.check.determinism = false;
  same_.only = headline;
  taken_ = 0;
  // A large case (its tokens drawn from a seed, not one pick each) is cut down by the case edits alone:
  // RapidCheck's shrinks would regenerate and recheck all of it for every pick.
  std::size_t tokens = 0;
  for (const auto& d : failing.request.documents) tokens += d.tokens.size();
  if (tokens <= static_cast<std::size_t>(gen::detail::kShrinkableTokens)) ShrinkByGenerator(failing);
  // Then the edits RapidCheck cannot make (a document removed from the middle, one cut short, ...); last,
  // distinct token values per document when they still fail: they can make more edits possible (a collision
  // with the pad id no longer hides the bug).
  EditAll(failing);
  if (TryEdit(failing, kDistinctTokens)) EditAll(failing);
  return taken_;
}

// RapidCheck's shrinks: the first that still fails is taken and its own shrinks tried, until none fails.
void Shrinker::ShrinkByGenerator(FailingCase& failing) {
  for (bool progressed = true; progressed && budget_ > 0;) {
    progressed = false;
    auto seq = failing.shrinkable.shrinks();
    for (int index = 0; budget_ > 0; ++index) {
      auto next = seq.next();
      if (!next) break;
      --budget_;
      PackRequest smaller = next->value();
      smaller.id = case_index_;
      CaseResult r = CheckWith(shrinking_, candidate_, smaller);
      if (!Fails(r, same_)) continue;
      failing.shrinkable = *next;
      failing.request = std::move(smaller);
      failing.result = std::move(r);
      failing.path.push_back(index);
      ++taken_;
      progressed = true;
      break;
    }
  }
}

// Passes over the edit list; after a success the list is remade and the pass goes on from the same place
// (what was tried before it failed on a larger case, so it is left for the next pass).
void Shrinker::EditAll(FailingCase& failing) {
  for (int pass = 0, edited = 1; edited && pass < 4 && budget_ > 0; ++pass) {
    edited = 0;
    std::vector<std::string> list = CaseEdits(failing.request);
    for (std::size_t at = 0; at < list.size() && budget_ > 0;) {
      if (TryEdit(failing, list[at])) {
        edited = 1;
        list = CaseEdits(failing.request);
      } else {
        ++at;
      }
    }
  }
}

bool Shrinker::TryEdit(FailingCase& failing, const std::string& edit) {
  auto edited = ApplyCaseEdit(failing.request, edit);
  if (!edited || budget_ <= 0) return false;
  --budget_;
  edited->id = case_index_;
  CaseResult r = CheckWith(shrinking_, candidate_, *edited);
  if (!Fails(r, same_)) return false;
  failing.request = std::move(*edited);
  failing.result = std::move(r);
  AppendCaseEdit(failing.edits, edit);
  ++taken_;
  return true;
}

}  // namespace packoracle::internal
