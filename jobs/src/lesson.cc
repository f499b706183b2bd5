// `packoracle lesson`, `packoracle presets` and `packoracle invariants` (lesson.h).
#include "packoracle/jobs/lesson.h"

#include <algorithm>
#include <sstream>

#include <nlohmann/json.hpp>

#include "packoracle/interchange/policy_json.h"
#include "packoracle/oracle.h"
#include "packoracle/properties/invariants.h"
#include "printf.h"

namespace packoracle::jobs {
namespace {

std::string Cell(Token v, int width) {
  std::ostringstream os;
  os.width(width);
  os << v;
  return os.str();
}

// Draws one row: tokens, documents, positions, target marks, and the attention grid with '#' allowed.
void DrawRow(const OracleBatch& batch, const OracleRow& row, std::ostream& os) {
  const int w = 4;
  auto line = [&](const std::string& name, auto value_of) {
    os << "  " << name;
    for (std::size_t i = 0; i < row.slots.size(); ++i) os << value_of(i);
    os << "\n";
  };
  line("slot     ", [&](std::size_t i) { return Cell(static_cast<Token>(i), w); });
  line("input    ", [&](std::size_t i) { return Cell(row.input_ids[i], w); });
  line("document ", [&](std::size_t i) {
    const Slot& s = row.slots[i];
    const std::string name = s.is_pad() ? "." : batch.documents[static_cast<std::size_t>(s.doc)].uid;
    return std::string(static_cast<std::size_t>(std::max<int>(0, w - static_cast<int>(name.size()))), ' ') + name;
  });
  line("position ", [&](std::size_t i) {
    return row.position_ids[i] ? Cell(*row.position_ids[i], w) : std::string(static_cast<std::size_t>(w - 1), ' ') + "*";
  });
  line("target   ", [&](std::size_t i) {
    const Prediction& p = row.predictions[i];
    return p.has_target() ? Cell(p.target, w) : std::string(static_cast<std::size_t>(w - 1), ' ') + "-";
  });
  line("counted  ", [&](std::size_t i) {
    const Prediction& p = row.predictions[i];
    std::string mark = p.weight > 0 ? "1" : (p.kind == TargetKind::kBoundary ? "x" : "0");
    return std::string(static_cast<std::size_t>(w - 1), ' ') + mark;
  });
  os << "\n  attention A_ij = 1[j <= i]·1[d_j = d_i]   (# may attend, . masked)\n";
  os << "        key j:";
  for (std::int64_t j = 0; j < row.length(); ++j) os << " " << j % 10;
  os << "\n";
  for (std::int64_t i = 0; i < row.length(); ++i) {
    os << "    query " << Cell(i, 2) << ": ";
    for (std::int64_t j = 0; j < row.length(); ++j) os << (Attends(row, batch.policy, i, j) ? "# " : ". ");
    os << "\n";
  }
}

}  // namespace

std::string LessonText() {
  std::ostringstream out;
  // reference/lesson.md: documents [11,12,13] and [21..26] in one pre-shifted row of 8 slots (a 9-token window).
  const std::vector<Document> docs = {{"a", {11, 12, 13}, {}}, {"b", {21, 22, 23, 24, 25, 26}, {}}};
  Policy policy = FindPreset("reference").policy;
  policy.row_end_target = RowEndTarget::kNextInDoc;  // the row's last slot predicts 26: a 9-token window
  policy.overflow = Overflow::kSplit;
  Layout layout{8, {RowLayout{8, {{0, 0, 0, 3}, {1, 0, 3, 5}}, 0, 0}}};
  const OracleBatch batch = Materialize(docs, layout, policy);
  const TargetLosses losses = {{0, 1, 3}, {0, 1, 1, 1, 1, 1}};

  out << "The lesson: two documents packed into one row of 8 slots\n"
      << "  a = [11 12 13]   b = [21 22 23 24 25 26]   policy: reference, pre-shifted labels\n\n";
  DrawRow(batch, batch.rows[0], out);
  out << "\n  counted: 1 = a valid target, x = the boundary prediction 13 -> 21 (excluded), 0 = not a target\n"
      << "  losses (nats): a predicts 12, 13 with 1, 3; b predicts 22..26 with 1 each\n\n";

  const auto counts = Denominators(batch);
  const auto token_mean = Objective(batch, losses, Denominator::kGlobalTargets);
  const auto sequence_mean = Objective(batch, losses, Denominator::kSequenceMean);
  const auto per_slot = Objective(batch, losses, Denominator::kAllPositions);
  out << Printf("  %-46s %-12s %s\n", "denominator", "value", "");
  out << Printf("  %-46s 9/%-10.0f %.6f   <- the global token objective\n",
                "included targets (global_targets)", counts.global_targets, token_mean.value);
  out << Printf("  %-46s %-12s %.6f   mean of (1+3)/2 and 5/5\n", "sequence means (sequence_mean)", "", sequence_mean.value);
  out << Printf("  %-46s 9/%-10lld %.6f   understates the objective\n", "all 8 slots (all_positions)",
                static_cast<long long>(counts.all_positions), per_slot.value);
  out << "\n  The denominator that preserves L = Σ m·ℓ / Σ m is the number of included targets: "
      << counts.global_targets << ".\n";
  return out.str();
}

std::string RenderPresetsJson() {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& preset : Presets()) {
    out.push_back({{"name", preset.name}, {"system", preset.system}, {"summary", preset.summary},
                   {"notes", preset.notes}, {"policy", PolicyToJson(preset.policy)}});
  }
  return out.dump(2) + "\n";
}

std::string RenderPresetsText() {
  std::ostringstream out;
  // For each preset: what it describes, and the keys in which it differs from the reference policy.
  const auto ref_values = PolicyKeyValues(FindPreset("reference").policy);
  out << "Presets: real systems mapped onto the policy (a policy file may start from one and override keys;\n"
      << "`packoracle presets --format json` prints every key of every preset).\n";
  for (const auto& preset : Presets()) {
    out << "\n  " << preset.name << "\n      system:   " << preset.system << "\n      what:     "
        << preset.summary << "\n";
    if (!preset.notes.empty()) out << "      note:     " << preset.notes << "\n";
    std::string diff;
    const auto values = PolicyKeyValues(preset.policy);
    for (std::size_t k = 1; k < values.size(); ++k) {
      if (values[k].second != ref_values[k].second) {
        diff += (diff.empty() ? "" : ", ") + values[k].first + "=" + ToString(values[k].second);
      }
    }
    out << "      policy:   " << (diff.empty() ? std::string("(the reference policy)") : "reference with " + diff)
        << "\n";
  }
  return out.str();
}

}  // namespace packoracle::jobs

namespace packoracle::jobs {
namespace {

// The order a person reads them in: the checked ones as CheckedInvariants lists them, then efficiency.
std::vector<Invariant> InvariantsInReadingOrder() {
  std::vector<Invariant> out = CheckedInvariants();
  out.push_back(Invariant::kEfficiency);
  return out;
}

std::string CommonBreakSentence(Invariant invariant) {
  std::string out = std::string("A common way to break it is ") + CommonBreak(invariant);
  if (*BundledBreak(invariant)) out += std::string(" (bundled: ") + BundledBreak(invariant) + ")";
  return out + ".";
}

// Words of `text` on lines of at most `width` characters, each after `indent`.
std::string Wrap(const std::string& text, std::size_t width, const std::string& indent) {
  std::istringstream words(text);
  std::string out, line, word;
  while (words >> word) {
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += indent + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) out += indent + line + "\n";
  return out;
}

}  // namespace

std::string RenderInvariantsText() {
  std::string out = "Every failure names one of these invariants (docs/design.md §4):\n";
  for (Invariant i : InvariantsInReadingOrder()) {
    out += "\n" + std::string(Name(i)) + "\n";
    out += Wrap(std::string(Statement(i)) + ".", 100, "  ");
    out += Wrap(CommonBreakSentence(i), 100, "  ");
  }
  return out;
}

std::string InvariantNames() {
  std::string out;
  for (Invariant i : InvariantsInReadingOrder()) out += std::string(out.empty() ? "" : ", ") + Name(i);
  return out;
}

std::string RenderInvariantsMarkdown() {
  std::string out;
  for (Invariant i : InvariantsInReadingOrder())
    out += "- **`" + std::string(Name(i)) + "`**: " + Statement(i) + ". " + CommonBreakSentence(i) + "\n";
  return out;
}

}  // namespace packoracle::jobs
