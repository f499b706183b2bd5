// verify.h ReconcileReadings: one verdict where the documents can be read into rows in more than one way.
#include <algorithm>
#include <set>
#include <string>

#include "packoracle/jobs/verify.h"

namespace packoracle::jobs {
namespace {

// The invariants an audit found, kept or only counted.
std::set<Invariant> Found(const AuditResult& audit) {
  std::set<Invariant> found;
  for (const auto& v : audit.violations) found.insert(v.invariant);
  for (const auto& [invariant, n] : audit.not_kept) found.insert(invariant);
  return found;
}

std::string Listed(const std::vector<Invariant>& invariants) {
  std::string out;
  for (const Invariant i : invariants) out += (out.empty() ? "" : ", ") + std::string(Name(i));
  return out;
}

}  // namespace

AuditResult ReconcileReadings(AuditResult chosen, const std::vector<AuditResult>& others) {
  const std::set<Invariant> found = Found(chosen);
  std::set<Invariant> differ;  // found under one reading and not under another: which is the packer's is unknown
  for (const auto& other : others) {
    const std::set<Invariant> theirs = Found(other);
    std::set_symmetric_difference(found.begin(), found.end(), theirs.begin(), theirs.end(),
                                  std::inserter(differ, differ.end()));
  }
  if (differ.empty()) return chosen;
  chosen.ambiguous.assign(differ.begin(), differ.end());
  std::erase_if(chosen.violations, [&](const AuditViolation& v) { return differ.contains(v.invariant); });
  std::erase_if(chosen.not_kept, [&](const auto& entry) { return differ.contains(entry.first); });
  chosen.exit_code = chosen.clean() ? 0 : 1;
  chosen.notes.push_back(AuditNote{
      "not checked, ambiguous: " + Listed(chosen.ambiguous) + ": the documents can be read into these rows in " +
          std::to_string(others.size() + 1) + " or more ways whose verdicts differ on " +
          (differ.size() == 1 ? "it" : "them") + " (the rows carry no doc_spans to say which the packer made)",
      static_cast<std::int64_t>(chosen.steps.size())});
  return chosen;
}

}  // namespace packoracle::jobs
