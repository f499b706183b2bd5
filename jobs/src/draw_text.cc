// `packoracle draw`'s terminal drawing (draw.h): the per-slot table, the attention grid, the boundaries
// and the denominators.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "draw_row.h"
#include "packoracle/properties/invariants.h"

namespace packoracle::jobs::draw_internal {
namespace {

std::string WeightText(double w) { return Num(w); }

// Where the row is, its policy, and its documents with their slots and tokens.
void PrintRowHeader(const RowDrawing& d, std::ostream& os) {
  const Loaded& loaded = *d.loaded;
  const CandidateMicrobatch& mb = *loaded.microbatch;
  const CandidateRow& row = *d.row;
  const Policy& policy = d.policy;

  os << "packoracle draw: " << d.file << ", row " << d.index << " (line " << loaded.line << ": step " << mb.step
     << ", micro_step " << mb.micro_step << ", rank " << mb.rank << ", row " << loaded.row_in_microbatch << " of "
     << mb.rows.size() << " in its micro-batch)\n";
  os << "  policy:    " << PolicyLabel(policy) << " (" << loaded.policy_source << ")\n";
  os << "  documents:";
  if (row.doc_spans.empty()) os << " none (the row is padding)";
  os << "\n";
  constexpr std::size_t kMaxDocuments = 24;
  for (std::size_t k = 0; k < row.doc_spans.size(); ++k) {
    if (k == kMaxDocuments) {
      os << "    … and " << row.doc_spans.size() - k << " more\n";
      break;
    }
    const DocSpan& span = row.doc_spans[k];
    const std::int64_t first = span.start, last = span.start + span.length - 1;
    std::string name = span.doc_uid;
    for (const auto& [alias, uid] : d.aliases)
      if (uid == span.doc_uid) name = alias + " = " + uid;
    std::vector<std::int64_t> tokens;
    for (std::int64_t s = first; s <= last; ++s) tokens.push_back(row.input_ids[static_cast<std::size_t>(s)]);
    os << "    " << PadRight(name, 6) << " slots " << first << "-" << last << ", tokens " << span.doc_offset << "-"
       << span.doc_offset + span.length - 1;
    if (d.targets_known) {
      for (const auto& doc : d.oracle.documents)
        if (doc.uid == span.doc_uid) os << " of " << doc.size();
    }
    os << ": " << List(tokens, 16) << "\n";
  }
  if (!d.targets_known) os << "    (" << d.targets_note << ")\n";
}

// The slots the table shows, in order, -1 for a gap: all of a short row; of a long one, those around each
// document start, each difference (targets, positions) and the row's ends.
std::vector<std::int64_t> ShownSlots(const RowDrawing& d, const std::vector<std::int64_t>& position_differs) {
  const OracleRow& orow = *d.orow;
  std::vector<std::int64_t> shown;
  if (d.n <= kMaxTableSlots) {
    for (std::int64_t i = 0; i < d.n; ++i) shown.push_back(i);
  } else {
    std::set<std::int64_t> pick;
    auto around = [&](std::int64_t at, std::int64_t before, std::int64_t after) {
      for (std::int64_t i = std::max<std::int64_t>(0, at - before); i <= std::min(d.n - 1, at + after); ++i) pick.insert(i);
    };
    around(0, 0, 3);
    around(d.n - 1, 3, 0);
    for (std::int64_t i = 1; i < d.n; ++i)
      if (d.Pad(i) != d.Pad(i - 1) || (!d.Pad(i) && orow.slots[static_cast<std::size_t>(i)].piece != orow.slots[static_cast<std::size_t>(i - 1)].piece))
        around(i, 3, 2);
    for (std::int64_t i = 0; i < d.n; ++i)
      if (d.target_differs[static_cast<std::size_t>(i)]) around(i, 2, 2);
    for (std::int64_t i : position_differs) around(i, 2, 2);
    for (std::int64_t i : pick) {
      if (static_cast<std::int64_t>(shown.size()) >= kMaxTableSlots) break;
      if (!shown.empty() && shown.back() != i - 1) shown.push_back(-1);
      shown.push_back(i);
    }
  }
  return shown;
}

// The per-slot table: every slot of a short row; of a long one, the slots around each document start, each
// difference and the row's ends, with a gap column ("…") between runs. Then what its lines mean.
void PrintSlotTable(const RowDrawing& d, std::ostream& os) {
  const CandidateRow& row = *d.row;
  const OracleRow& orow = *d.orow;
  const Policy& policy = d.policy;
  std::vector<std::int64_t> position_differs;  // slots whose given position is not the policy's
  if (row.position_ids) {
    for (std::int64_t i = 0; i < d.n; ++i) {
      const auto& want = orow.position_ids[static_cast<std::size_t>(i)];
      if (want && *want != (*row.position_ids)[static_cast<std::size_t>(i)]) position_differs.push_back(i);
    }
  }
  const std::vector<std::int64_t> shown = ShownSlots(d, position_differs);
  auto target_text = [&](double weight, Token target, bool has) { return has && weight > 0 ? std::to_string(target) : std::string("-"); };
  std::vector<std::pair<std::string, std::vector<std::string>>> lines;
  auto add_line = [&](const std::string& name, auto cell) {
    std::vector<std::string> cells;
    for (std::int64_t i : shown) cells.push_back(i < 0 ? std::string("…") : cell(static_cast<std::size_t>(i)));
    lines.push_back({name, std::move(cells)});
  };
  add_line("slot", [&](std::size_t i) { return std::to_string(i); });
  add_line("input", [&](std::size_t i) { return std::to_string(row.input_ids[i]); });
  add_line("document", [&](std::size_t i) { return d.slot_doc[i].empty() ? std::string("pad") : d.slot_doc[i]; });
  if (row.position_ids) {
    add_line("position", [&](std::size_t i) { return std::to_string((*row.position_ids)[i]); });
    if (!position_differs.empty() && d.targets_known) {
      add_line("(oracle)", [&](std::size_t i) {
        return orow.position_ids[i] ? std::to_string(*orow.position_ids[i]) : std::string("*");
      });
    }
  }
  add_line("label", [&](std::size_t i) { return std::to_string(row.labels[i]); });
  if (row.loss_mask) add_line("loss_mask", [&](std::size_t i) { return WeightText((*row.loss_mask)[i]); });
  add_line("target", [&](std::size_t i) { return target_text(d.decoded[i].weight, d.decoded[i].target, d.decoded[i].has_target); });
  add_line("weight", [&](std::size_t i) { return WeightText(d.decoded[i].weight); });
  if (d.targets_known) {
    add_line("oracle", [&](std::size_t i) {
      const Prediction& p = orow.predictions[i];
      if (p.kind == TargetKind::kBoundary && p.weight == 0) return std::string("x");
      return target_text(p.weight, p.target, p.has_target());
    });
    add_line("weight", [&](std::size_t i) { return WeightText(orow.predictions[i].weight); });
    if (d.target_disagreements > 0) {
      add_line("differs", [&](std::size_t i) { return d.target_differs[i] ? std::string("!") : std::string(""); });
    }
  }
  std::size_t width = 3;
  for (const auto& [name, cells] : lines)
    for (const auto& c : cells) width = std::max(width, c.size());
  width += 1;
  const std::size_t per_block = std::max<std::size_t>(8, (100 - 12) / width);
  for (std::size_t from = 0; from < shown.size(); from += per_block) {
    os << "\n";
    for (const auto& [name, cells] : lines) {
      std::string text = "  " + PadRight(name, 10);
      for (std::size_t i = from; i < cells.size() && i < from + per_block; ++i) text += PadLeft(cells[i], width);
      while (!text.empty() && text.back() == ' ') text.pop_back();
      os << text << "\n";
    }
  }
  if (d.n > kMaxTableSlots) {
    os << "  (" << d.n << " slots: the table shows those around document starts, differences and the row's ends)\n";
  }
  os << "\n  target, weight: what the row's labels" << (row.loss_mask ? " and loss_mask" : "") << " decode to ("
     << Name(policy.label_alignment) << ", ignore_index " << policy.ignore_index << ")\n";
  if (d.targets_known) {
    os << "  oracle, weight: the policy's targets for the spans (x: a boundary target, excluded)\n";
    if (d.target_disagreements == 0) {
      os << "  every target and weight agrees with the oracle\n";
    } else {
      std::vector<std::int64_t> slots;
      for (std::int64_t i = 0; i < d.n; ++i)
        if (d.target_differs[static_cast<std::size_t>(i)]) slots.push_back(i);
      os << "  " << d.target_disagreements << " slot" << (d.target_disagreements == 1 ? "" : "s")
         << " where the row's target or weight differs from the oracle's: " << List(slots, kMaxListed) << "\n";
    }
  }

  if (!position_differs.empty() && d.targets_known) {
    os << "  (oracle) under position: the policy's positions (" << Name(policy.positions) << ", split_positions "
       << Name(policy.split_positions) << "; * any); slots " << List(position_differs, kMaxListed) << " differ\n";
  }
}

// The attention grid (# may attend, . masked, ! where the row's encoding and the oracle disagree), and the
// disagreeing cells by the spans' segments of query and key.
void PrintAttentionGrid(const RowDrawing& d, std::ostream& os) {
  const Policy& policy = d.policy;
  os << "\n  attention under " << Name(policy.attention) << ", pad_keys " << Name(policy.pad_keys)
     << "   (# may attend, . masked; the oracle's rule on the spans)\n";
  os << "  " << d.encoding_note << "\n";
  if (d.n <= kMaxGridSlots) {
    const std::size_t name_width = [&] {
      std::size_t w = 3;
      for (const auto& s : d.slot_doc) w = std::max(w, s.size());
      return w;
    }();
    const std::string indent = "    query " + std::string(2 + 1 + name_width, ' ');
    if (d.n > 10) {  // the tens digit of each key above its units
      std::string tens(indent.size() + 1, ' ');
      for (std::int64_t j = 0; j < d.n; ++j) tens += " " + (j >= 10 ? std::to_string(j / 10 % 10) : std::string(" "));
      while (!tens.empty() && tens.back() == ' ') tens.pop_back();
      os << tens << "\n";
    }
    os << PadLeft("key j:", indent.size()) << " ";
    for (std::int64_t j = 0; j < d.n; ++j) os << " " << j % 10;
    os << "\n";
    for (std::int64_t i = 0; i < d.n; ++i) {
      const std::string doc = d.slot_doc[static_cast<std::size_t>(i)].empty() ? "pad" : d.slot_doc[static_cast<std::size_t>(i)];
      os << "    query " << PadLeft(std::to_string(i), 2) << " " << PadRight(doc, name_width) << ": ";
      std::string text;
      for (std::int64_t j = 0; j < d.n; ++j) {
        const bool allowed = d.Allowed(i, j);
        text += allowed != d.Implied(i, j) ? "! " : (allowed ? "# " : ". ");
      }
      while (!text.empty() && text.back() == ' ') text.pop_back();
      os << text << "\n";
    }
  } else {
    os << "  (" << d.n << " x " << d.n << " cells: too many for the terminal; the SVG draws the 64 slots around "
       << "the first disagreement, under an overview of the whole row)\n";
  }
  os << "  allowed cells: " << d.allowed << " (the oracle)";
  if (d.encoding_compared) {
    os << ", " << d.implied_allowed << " (the row's " << DeclaredEncodingName(policy.boundary_source) << ")";
  }
  os << "; cells that disagree: " << d.disagree << "\n";
  // Where they are: by the spans' segments of query and key.
  auto span_of = [&](std::int64_t segment) {
    std::int64_t first = -1, last = -1;
    for (std::int64_t i = 0; i < d.n; ++i) {
      if (d.segment_of[static_cast<std::size_t>(i)] != segment) continue;
      if (first < 0) first = i;
      last = i;
    }
    const std::string doc = d.slot_doc[static_cast<std::size_t>(first)];
    return (first == last ? std::to_string(first) : std::to_string(first) + "-" + std::to_string(last)) +
           " (" + (doc.empty() ? std::string("padding") : doc) + ")";
  };
  std::size_t listed = 0;
  for (const auto& [key, block] : d.disagree_blocks) {
    if (listed++ == kMaxListed) {
      os << "    … and " << d.disagree_blocks.size() - kMaxListed << " more blocks\n";
      break;
    }
    os << "    queries " << span_of(key.first) << " x keys " << span_of(key.second) << ": " << block.cells << " cell"
       << (block.cells == 1 ? "" : "s") << " the row's " << DeclaredEncodingName(policy.boundary_source)
       << (block.let_through ? " lets through and the oracle masks\n" : " masks and the oracle allows\n");
  }
}

// The boundaries every encoding the row carries implies, against the spans'.
void PrintBoundaries(const RowDrawing& d, std::ostream& os) {
  const Policy& policy = d.policy;
  os << "\n  boundaries: the spans start documents at " << List(d.true_starts) << "\n";
  for (const auto& e : d.encodings) {
    os << "    " << PadRight(e.name, 12) << " " << e.shown;
    if (!e.starts) {
      os << ": cannot be read: " << e.problem << "\n";
      continue;
    }
    const auto got = RealStarts(*e.starts, d);
    os << " -> starts " << List(got);
    if (e.names_rows) {
      os << (got == e.expected ? ": agrees (under segment_encodings: rows it names the row)"
                               : ": DIFFERS: under segment_encodings: rows it names the row, starting at " +
                                     List(e.expected));
    } else {
      os << (got == e.expected ? ": agrees" : ": DIFFERS from the spans");
    }
    const char* declared = DeclaredEncodingName(policy.boundary_source);
    if (declared && e.name == declared) os << " (declared)";
    os << "\n";
  }
  if (d.encodings.empty()) os << "    (the row carries no boundary encoding)\n";
}

}  // namespace

void PrintRow(const RowDrawing& d, std::ostream& os) {
  PrintRowHeader(d, os);
  PrintSlotTable(d, os);
  PrintAttentionGrid(d, os);
  PrintBoundaries(d, os);
}

// How many targets the producer's declared denominator divides by, over what this file holds.
void PrintDenominators(const RowDrawing& d, std::ostream& os) {
  const Loaded& loaded = *d.loaded;
  const Policy& policy = d.policy;
  const MicrobatchSummary& own = loaded.summaries[loaded.summary_index];
  double decoded = 0;
  for (const auto& t : d.decoded) decoded += t.weight;
  double oracle = 0;
  for (const auto& p : d.orow->predictions) oracle += p.weight;

  os << "\n  denominators (the lesson: L = Σ m·ℓ / Σ m, divided by the included targets, not the slots)\n";
  auto item = [&](const std::string& what, const std::string& value, const std::string& note = "") {
    os << "    " << PadRight(what, 48) << PadLeft(value, 8) << (note.empty() ? "" : "   " + note) << "\n";
  };
  item("valid targets in the row (its labels, decoded)", Num(decoded));
  if (d.targets_known) {
    item("valid targets in the row (the oracle)", Num(oracle),
         std::abs(oracle - decoded) <= 1e-9 ? "agrees" : "DIFFERS from the row's");
  } else {
    item("valid targets in the row (the oracle)", "?", "no document record");
  }
  if (policy.count_basis == CountBasis::kUnshiftedLabels) {
    std::int64_t labels = 0;
    for (Token label : d.row->labels) labels += label != policy.ignore_index ? 1 : 0;
    item("labels != ignore_index, unshifted (count_basis)", std::to_string(labels));
  }
  item("slots in the row", std::to_string(d.n));

  // The micro-batch and the scope its denominator is declared over.
  os << "    micro-batch (step " << own.step << ", micro_step " << own.micro_step << ", rank " << own.rank << ", "
     << own.rows << " row" << (own.rows == 1 ? "" : "s") << "): " << Num(own.weights) << " valid targets decoded, "
     << own.slots << " slots" << (own.problem.empty() ? "" : " (some rows cannot be decoded: " + own.problem + ")")
     << "\n";
  auto count_of = [&](const MicrobatchSummary& s) {
    if (policy.denominator == Denominator::kAllPositions) return static_cast<double>(s.slots);
    if (policy.count_basis == CountBasis::kUnshiftedLabels) return static_cast<double>(s.labels);
    return s.weights;
  };
  double expected = 0;
  std::set<std::int64_t> ranks;
  std::string scope;
  for (const auto& s : loaded.summaries) {
    if (s.step != own.step) continue;
    ranks.insert(s.rank);
    bool in_scope = false;
    switch (policy.denominator) {
      case Denominator::kGlobalTargets:
      case Denominator::kAllPositions: in_scope = true; break;
      case Denominator::kRankMean: in_scope = s.rank == own.rank; break;
      case Denominator::kMicrobatchMean:
      case Denominator::kSequenceMean: in_scope = &s == &own; break;
    }
    if (in_scope) expected += count_of(s);
  }
  const std::string basis = policy.denominator == Denominator::kAllPositions ? "slots"
                            : policy.count_basis == CountBasis::kUnshiftedLabels ? "labels != ignore_index"
                                                                                  : "valid targets";
  switch (policy.denominator) {
    case Denominator::kGlobalTargets:
    case Denominator::kAllPositions: scope = "the " + basis + " of step " + std::to_string(own.step) + ", every rank"; break;
    case Denominator::kRankMean: scope = "the " + basis + " of rank " + std::to_string(own.rank) + " in step " + std::to_string(own.step); break;
    case Denominator::kMicrobatchMean: scope = "the " + basis + " of this micro-batch"; break;
    case Denominator::kSequenceMean: scope = "the " + basis + " of this micro-batch (as sequence_mean producers report it)"; break;
  }
  os << "    the declared denominator " << Name(policy.denominator) << " divides by " << scope << ": " << Num(expected)
     << " as this file's labels decode";
  const bool global = policy.denominator == Denominator::kGlobalTargets || policy.denominator == Denominator::kAllPositions;
  if (global && static_cast<std::int64_t>(ranks.size()) < loaded.header.dp_world_size) {
    os << " (it holds " << ranks.size() << " of the header's " << loaded.header.dp_world_size
       << " ranks: the others' counts are not in it)";
  }
  os << "\n";
  if (own.producer) {
    const ProducerTotals& p = *own.producer;
    // Producer totals come as any non-empty subset of loss_sum, denominator, loss: print what was given.
    os << "    producer:";
    std::string sep = " ";
    if (p.loss_sum) {
      os << sep << "loss_sum " << Num(*p.loss_sum);
      sep = ", ";
    }
    if (p.denominator) {
      os << sep << "denominator " << Num(*p.denominator) << " (scope "
         << (p.denominator_scope.empty() ? "?" : p.denominator_scope) << ")";
      sep = ", ";
    }
    if (p.loss) os << sep << "loss " << Num(*p.loss);
    if (!p.denominator) os << ": no denominator given\n";
    else
      os << (std::abs(*p.denominator - expected) <= 1e-9 * std::max(1.0, std::abs(expected))
                 ? ": the denominator agrees with the labels"
                 : ": the denominator DIFFERS from the labels' " + Num(expected))
         << "\n";
  } else {
    os << "    producer: no totals recorded for this micro-batch\n";
  }
  if (d.targets_known && std::abs(oracle - decoded) > 1e-9 && policy.denominator != Denominator::kAllPositions) {
    os << "    (this row's labels count " << Num(decoded) << " where the oracle counts " << Num(oracle)
       << ": a count taken from them is off by " << (decoded > oracle ? "+" : "") << Num(decoded - oracle) << ")\n";
  }
}

}  // namespace packoracle::jobs::draw_internal
