// The failure report: FuzzTest's sections, RapidCheck's counts, abseil's one-sentence verdict, a drawn grid.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <sstream>

#include "packoracle/oracle.h"
#include "packoracle/properties/verify.h"

namespace packoracle {
namespace {

constexpr int kWidth = 4;       // characters per slot in drawn rows
constexpr int kMaxSlots = 32;   // slots drawn before trimming with "…"

std::string Pad(const std::string& s, int width = kWidth) {
  return s.size() >= static_cast<std::size_t>(width) ? " " + s : std::string(static_cast<std::size_t>(width) - s.size(), ' ') + s;
}

std::string Num(double v) {
  std::ostringstream os;
  os.precision(10);
  os << v;
  return os.str();
}

// A double that reads back as itself in C++ source (the draft's selection fraction).
std::string Num17(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

std::string PolicyLine(const Policy& policy) {
  std::string out = policy.preset.empty() ? std::string("(custom policy)") : "preset " + policy.preset;
  const auto values = PolicyKeyValues(policy);
  if (!policy.preset.empty()) {
    const auto base = PolicyKeyValues(FindPreset(policy.preset).policy);
    std::string diff;
    for (std::size_t k = 1; k < values.size(); ++k)
      if (values[k].second != base[k].second) diff += (diff.empty() ? "" : ", ") + values[k].first + "=" + ToString(values[k].second);
    if (!diff.empty()) out += " with " + diff;
    return out;
  }
  for (std::size_t k = 1; k < values.size(); ++k) out += (k == 1 ? ": " : ", ") + values[k].first + "=" + ToString(values[k].second);
  return out;
}

// The request's documents for a person: a long document shows its first and last kShownEnds tokens around
// "… (N tokens) …", and after kShownDocuments documents the rest are counted (the regression draft and the
// reproduce line still carry every token).
constexpr std::size_t kShownEnds = 12, kShownDocuments = 32;
std::string DocumentsLine(const PackRequest& r) {
  std::string out;
  for (std::size_t d = 0; d < r.documents.size(); ++d) {
    if (d == kShownDocuments) {
      out += "  … and " + std::to_string(r.documents.size() - d) + " more documents";
      break;
    }
    const Document& doc = r.documents[d];
    const std::size_t n = doc.tokens.size();
    out += (out.empty() ? "" : "  ") + doc.uid + "=[";
    for (std::size_t k = 0; k < n; ++k) {
      if (n > 3 * kShownEnds && k == kShownEnds) {
        out += " … (" + std::to_string(n) + " tokens) …";
        k = n - kShownEnds - 1;
        continue;
      }
      out += (k ? " " : "") + std::to_string(doc.tokens[k]);
      if (!doc.supervised.empty() && doc.supervised[k] == 0) out += "'";
    }
    out += "]";
  }
  return out.empty() ? "(none)" : out;
}

// The candidate's row at flat index r (micro-batches flattened in order).
const CandidateRow* CandidateRowAt(const CaseResult& result, std::int64_t r) {
  if (!result.packed) return nullptr;
  std::int64_t k = 0;
  for (const auto& mb : result.packed->microbatches)
    for (const auto& row : mb.rows)
      if (k++ == r) return &row;
  return nullptr;
}

// The first of kMaxSlots consecutive slots drawn of a row of n so that `slot` is among them: 0 while it fits in
// the first kMaxSlots, else a window centred on it (a long row's failure is drawn where it is).
std::int64_t WindowStart(std::int64_t slot, std::int64_t n) {
  if (slot < kMaxSlots || n <= kMaxSlots) return 0;
  return std::clamp<std::int64_t>(slot - kMaxSlots / 2, 0, n - kMaxSlots);
}

void DrawRow(std::ostream& os, const CaseResult& result, const Policy& policy, std::int64_t r, std::int64_t from = 0) {
  const OracleBatch& batch = *result.oracle;
  const OracleRow& want = batch.rows[static_cast<std::size_t>(r)];
  const CandidateRow* got = CandidateRowAt(result, r);
  const auto n = static_cast<int>(want.length());
  const int first = static_cast<int>(from);
  const int shown = std::min(n - first, kMaxSlots);
  auto line = [&](const std::string& label, auto cell) {
    os << "  " << label << (first > 0 ? "…" : "");
    for (int i = first; i < first + shown; ++i) os << cell(static_cast<std::size_t>(i));
    if (first + shown < n) os << "  …";
    os << "\n";
  };
  os << "=== Row " << r << " (micro-batch rank " << want.rank << ", micro_step " << want.micro_step << ")\n";
  line("slot          ", [&](std::size_t i) { return Pad(std::to_string(i)); });
  line("input         ", [&](std::size_t i) { return Pad(std::to_string(got ? got->input_ids[i] : want.input_ids[i])); });
  line("document      ", [&](std::size_t i) {
    const Slot& s = want.slots[i];
    return Pad(s.is_pad() ? "." : batch.documents[static_cast<std::size_t>(s.doc)].uid);
  });
  line("segment       ", [&](std::size_t i) { return Pad(want.doc_ids[i] < 0 ? "." : std::to_string(want.doc_ids[i])); });
  line("position want ", [&](std::size_t i) { return Pad(want.position_ids[i] ? std::to_string(*want.position_ids[i]) : "*"); });
  if (got && got->position_ids) {
    line("position got  ", [&](std::size_t i) {
      const auto g = (*got->position_ids)[i];
      const bool bad = want.position_ids[i] && *want.position_ids[i] != g;
      return Pad(std::to_string(g) + (bad ? "!" : ""));
    });
  }
  line("target want   ", [&](std::size_t i) {
    const Prediction& p = want.predictions[i];
    return Pad(p.weight > 0 ? std::to_string(p.target) : "-");
  });
  if (got) {
    std::vector<DecodedTarget> decoded;
    try {
      decoded = DecodeTargets(got->labels, got->loss_mask ? &*got->loss_mask : nullptr, policy);
    } catch (const InputError&) {
    }
    if (decoded.size() == want.predictions.size()) {
      line("target got    ", [&](std::size_t i) {
        const Prediction& p = want.predictions[i];
        const bool bad = decoded[i].weight != p.weight || (p.weight > 0 && decoded[i].target != p.target);
        return Pad((decoded[i].weight > 0 ? std::to_string(decoded[i].target) : "-") + (bad ? "!" : ""));
      });
    }
  }
}

void DrawAttention(std::ostream& os, const CaseResult& result, const Policy& policy, const Violation& v) {
  const OracleRow& want = result.oracle->rows[static_cast<std::size_t>(v.row)];
  const auto length = want.length();
  // kMaxSlots keys and queries: the first ones, or windows around the first disagreeing cell of a long row
  const auto [first_query, first_key] = v.cells.front();
  const std::int64_t k0 = WindowStart(first_key, length), q0 = WindowStart(first_query, length);
  const std::int64_t k1 = std::min(length, k0 + kMaxSlots), q1 = std::min(length, q0 + kMaxSlots);
  std::set<std::pair<std::int64_t, std::int64_t>> bad(v.cells.begin(), v.cells.end());
  std::set<std::int64_t> queries;
  for (const auto& c : v.cells) queries.insert(c.first);
  os << "=== Attention row " << v.row << "   (# allowed  . masked  ! the candidate's mask disagrees with the rule)\n";
  if (k0 > 0 || q0 > 0) {
    os << "    keys " << k0 << ".." << k1 - 1 << ", queries " << q0 << ".." << q1 - 1 << " of " << length << " slots\n";
  }
  os << "        key";
  for (std::int64_t j = k0; j < k1; ++j) os << " " << j % 10;
  os << "\n";
  for (std::int64_t i = q0; i < q1; ++i) {
    if (!queries.count(i) && queries.size() > 0 && std::abs(*queries.begin() - i) > 1 && !queries.count(i - 1) &&
        !queries.count(i + 1))
      continue;  // show the queries involved and their neighbours
    os << "    q" << (i < 10 ? " " : "") << i << "    ";
    for (std::int64_t j = k0; j < k1; ++j) {
      const char c = bad.count({i, j}) ? '!' : (Attends(want, policy, i, j) ? '#' : '.');
      os << " " << c;
    }
    os << "\n";
  }
}

// A C++ identifier from a candidate name ("reference-packer" -> "ReferencePacker").
std::string Identifier(const std::string& name) {
  std::string out;
  bool upper = true;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
      upper = false;
    } else {
      upper = true;
    }
  }
  return out.empty() || std::isdigit(static_cast<unsigned char>(out[0])) ? "Candidate" + out : out;
}

// C++ that rebuilds the policy: its preset (or reference), then every key that differs.
std::string PolicySource(const Policy& policy) {
  const std::string base = policy.preset.empty() ? "reference" : policy.preset;
  std::string out = "  request.policy = packoracle::FindPreset(\"" + base + "\").policy;\n";
  const auto values = PolicyKeyValues(policy);
  const auto base_values = PolicyKeyValues(FindPreset(base).policy);
  for (std::size_t k = 1; k < values.size(); ++k) {
    if (values[k].second == base_values[k].second) continue;
    const auto& v = values[k].second;
    std::string literal;
    if (std::holds_alternative<std::nullptr_t>(v)) literal = "nullptr";
    else if (std::holds_alternative<bool>(v)) literal = std::get<bool>(v) ? "true" : "false";
    else if (std::holds_alternative<std::int64_t>(v)) literal = "std::int64_t{" + std::to_string(std::get<std::int64_t>(v)) + "}";
    else literal = "std::string(\"" + std::get<std::string>(v) + "\")";
    out += "  packoracle::SetPolicyKey(request.policy, \"" + values[k].first + "\", " + literal + ");\n";
  }
  if (policy.preset.empty()) out += "  request.policy.preset.clear();\n";
  return out;
}

std::string SourceDocuments(const PackRequest& r) {
  std::string out = "{";
  for (std::size_t d = 0; d < r.documents.size(); ++d) {
    const auto& doc = r.documents[d];
    out += (d ? ", " : "") + std::string("{\"") + doc.uid + "\", {";
    for (std::size_t k = 0; k < doc.tokens.size(); ++k) out += (k ? ", " : "") + std::to_string(doc.tokens[k]);
    out += "}, {";
    for (std::size_t k = 0; k < doc.supervised.size(); ++k) out += (k ? ", " : "") + std::to_string(doc.supervised[k]);
    out += "}}";
  }
  return out + "}";
}

// The run's headline violation first: its only invariant when restricted to one (VerifyOptions::only), else
// the checker's first; then the others in the checker's order.
std::vector<Violation> HeadlineFirst(const std::vector<Violation>& violations, const VerifyOptions& options) {
  std::size_t head = 0;
  for (std::size_t k = 0; options.only && k < violations.size(); ++k) {
    if (violations[k].invariant == *options.only) {
      head = k;
      break;
    }
  }
  std::vector<Violation> out{violations[head]};
  for (std::size_t k = 0; k < violations.size(); ++k)
    if (k != head) out.push_back(violations[k]);
  return out;
}

std::string MinimalCase(const PackRequest& request, const CaseResult& result, const VerifyReport& run) {
  std::ostringstream os;
  auto plural = [](int n, const char* word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); };
  os << "=== Minimal counterexample (after " << plural(run.cases_to_failure, "case") << " and "
     << plural(run.shrinks, "shrink") << "; profile " << run.profile << ")\n";
  os << "policy   " << PolicyLine(request.policy) << "\n";
  os << "step     row_length " << request.row_length << ", micro_batch_rows " << request.micro_batch_rows
     << ", dp_world_size " << request.dp_world_size << "\n";
  os << "docs     " << DocumentsLine(request) << "   (' = unsupervised)\n";
  if (result.packed && result.packed->refusal) os << "refusal  " << *result.packed->refusal << "\n";
  return os.str();
}

// The rows involved (the first two when no violation names a row), then the first attention grid.
std::string Drawn(const PackRequest& request, const CaseResult& result) {
  if (!result.oracle) return "";
  std::ostringstream os;
  std::set<std::int64_t> rows;
  for (const auto& v : result.violations)
    if (v.row >= 0) rows.insert(v.row);
  if (rows.empty())
    for (std::size_t r = 0; r < std::min<std::size_t>(result.oracle->rows.size(), 2); ++r) rows.insert(static_cast<std::int64_t>(r));
  for (auto r : rows) {
    if (r >= static_cast<std::int64_t>(result.oracle->rows.size())) continue;
    std::int64_t from = 0;  // a long row's attention failure is drawn around its first wrong query
    for (const auto& v : result.violations)
      if (v.row == r && v.invariant == Invariant::kAttention && !v.cells.empty()) {
        from = WindowStart(v.cells.front().first, result.oracle->rows[static_cast<std::size_t>(r)].length());
        break;
      }
    DrawRow(os, result, request.policy, r, from);
  }
  for (const auto& v : result.violations) {
    if (!v.cells.empty()) {
      DrawAttention(os, result, request.policy, v);
      break;
    }
  }
  return os.str();
}

// What the producer reported, micro-batch by micro-batch: a reducer's answer, else the packer's totals.
void ReportedTotals(std::ostream& os, const CaseResult& result) {
  const std::vector<ProducerTotals>* reported = nullptr;
  std::vector<ProducerTotals> from_packer;
  if (result.reduced) reported = &*result.reduced;
  else if (result.packed) {
    for (const auto& mb : result.packed->microbatches)
      if (mb.producer) from_packer.push_back(*mb.producer);
    reported = &from_packer;
  }
  if (!reported) return;
  for (std::size_t m = 0; m < reported->size(); ++m) {
    const auto& t = (*reported)[m];
    // A field the producer did not give is "-" (producer totals come as any non-empty subset).
    auto given = [](const std::optional<double>& v) { return v ? Num(*v) : std::string("-"); };
    os << "  reported micro-batch " << m << ": loss_sum " << given(t.loss_sum) << " / denominator "
       << given(t.denominator) << " (" << (t.denominator_scope.empty() ? "-" : t.denominator_scope)
       << ") = " << given(t.loss) << "\n";
  }
}

// Shown when the headline is about the totals, or whenever the producer declared a step objective.
std::string Totals(const CaseResult& result, Invariant head) {
  const bool totals = head == Invariant::kDenominator || head == Invariant::kLoss || head == Invariant::kGradient;
  if (!totals && !result.declared_objective) return "";
  std::ostringstream os;
  os << "=== Denominator and loss\n";
  if (result.oracle) {
    const auto counts = Denominators(*result.oracle);
    os << "  valid targets over the step " << counts.global_targets << " (per micro-batch:";
    for (const auto& [key, n] : counts.per_microbatch) os << " " << n;
    os << "), positions " << counts.all_positions << "\n";
  }
  ReportedTotals(os, result);
  if (result.declared_objective) os << "  declared objective " << Num(*result.declared_objective) << "\n";
  if (result.token_mean) os << "  global token mean  " << Num(*result.token_mean) << "\n";
  if (result.declared_objective && result.token_mean && *result.declared_objective != *result.token_mean)
    os << "  gap                " << Num(*result.declared_objective - *result.token_mean) << "\n";
  for (const auto& note : result.notes) os << "  note: " << note << "\n";
  return os.str();
}

// packing_invariance's measurement (how far the tiny decoder's losses moved because of packing), shown when it
// is the headline or the policy lets documents see each other.
std::string Invariance(const PackRequest& request, const CaseResult& result, Invariant head) {
  if (!result.contamination || result.contamination->targets == 0) return "";
  if (head != Invariant::kPackingInvariance && request.policy.attention != Attention::kRowCausal &&
      request.policy.positions != Positions::kRowContinuous)
    return "";
  std::ostringstream os;
  os << "=== Packing invariance (tiny decoder, " << result.contamination->targets << " weighted targets)\n"
     << "  relative change of the losses against each document alone: max " << Num(result.contamination->max_relative)
     << ", mean " << Num(result.contamination->mean_relative) << "\n";
  return os.str();
}

// The case's target losses, where any differs from the 1 nat a case without them gets (CheckCase): a loss or
// denominator bug may show only on them. Printed to round-trip (17 significant digits).
std::string SourceLosses(const PackRequest& r) {
  bool given = false;
  for (const auto& [uid, losses] : r.target_losses)
    for (double l : losses) given = given || l != 1.0;
  if (!given) return "";
  std::ostringstream os;
  os.precision(17);
  os << "  request.target_losses = {";
  bool first = true;
  for (const auto& [uid, losses] : r.target_losses) {
    os << (first ? "" : ", ") << "{\"" << uid << "\", {";
    for (std::size_t k = 0; k < losses.size(); ++k) os << (k ? ", " : "") << losses[k];
    os << "}}";
    first = false;
  }
  os << "};\n";
  return os.str();
}

// The draft's #include lines and, where the candidate has no C++ expression, the best-effort note.
std::string DraftPreamble(const std::string& candidate, const Candidate::Source& source) {
  std::string out = "#include \"packoracle/gtest.h\"\n#include \"packoracle/oracle.h\"\n";
  if (!source.header.empty()) out += "#include \"" + source.header + "\"\n";
  else if (!source.expression.empty()) out += "// and the header that declares " + source.expression + "\n";
  out += "\n";
  if (source.expression.empty()) {
    out += "// Best effort: nothing says how C++ constructs " + candidate + " (its Candidate::source is empty, as for an\n"
           "// object handed to MakeCandidate, an exec process or a Python callable); declare `candidate` first, e.g.\n"
           "// packoracle::Candidate candidate = packoracle::MakeCandidate(\"" + candidate + "\", MyPacker{});\n";
  }
  return out;
}

// A gtest that replays the case: compiles and fails as printed where the candidate has a C++ expression.
std::string RegressionDraft(const std::string& candidate, const Candidate::Source& source, const PackRequest& request,
                            Invariant head, const CheckOptions& check) {
  std::ostringstream os;
  os << DraftPreamble(candidate, source)
     << "TEST(" << Identifier(candidate) << "Regression, " << Identifier(Name(head)) << ") {\n"
     << "  packoracle::PackRequest request;\n"
     << PolicySource(request.policy)
     << "  request.row_length = " << request.row_length << ";\n"
     << "  request.micro_batch_rows = " << request.micro_batch_rows << ";\n"
     << "  request.dp_world_size = " << request.dp_world_size << ";\n"
     << "  request.documents = " << SourceDocuments(request) << ";\n"
     << SourceLosses(request);
  if (request.delimiters == Delimiters::kIncluded) os << "  request.delimiters = packoracle::Delimiters::kIncluded;\n";
  if (!source.expression.empty()) os << "  auto candidate = " << source.expression << ";\n";
  // A loss reducer's schedule and selection are part of what the case was checked against.
  const bool scheduled = check.optimizer_steps != 1 || check.selection.active();
  if (scheduled) os << "  packoracle::CheckOptions check;\n";
  if (check.optimizer_steps != 1) os << "  check.optimizer_steps = " << check.optimizer_steps << ";\n";
  if (check.selection.active()) os << "  check.selection.top_fraction = " << Num17(check.selection.top_fraction) << ";\n";
  os << "  EXPECT_TRUE(packoracle::CheckOneCase(candidate, request" << (scheduled ? ", check" : "") << "));\n"
     << "}\n";
  return os.str();
}

}  // namespace

ReportSections BuildReportSections(const std::string& candidate, const PackRequest& request, const CaseResult& result,
                                   const VerifyReport& run, const VerifyOptions& options) {
  ReportSections out;
  out.candidate = candidate;
  out.violations = HeadlineFirst(result.violations, options);
  const Invariant head = out.violations.front().invariant;
  out.headline = (options.headline.empty() ? "Verify(" + candidate + ")" : options.headline) + " failed: " + Name(head);
  out.request = request;
  out.minimal_case = MinimalCase(request, result, run);
  out.drawn = Drawn(request, result);
  out.totals = Totals(result, head);
  out.invariance = Invariance(request, result, head);
  out.reproduce = run.reproduce;
  out.reproduce_command = options.reproduce_command;
  if (options.regression_draft) out.regression_draft = RegressionDraft(candidate, run.source, request, head, options.check);
  return out;
}

std::string RenderVerdict(const ReportSections& s) {
  std::ostringstream os;
  const Violation& head = s.violations.front();
  os << "  " << head.sentence << "\n";
  if (!head.expected.empty() || !head.actual.empty()) {
    os << "  expected " << head.expected << "\n  actual   " << head.actual << "\n";
  }
  if (s.violations.size() > 1) {
    os << "  (" << s.violations.size() - 1 << " more:";
    std::set<std::string> names;
    for (std::size_t k = 1; k < s.violations.size(); ++k) names.insert(Name(s.violations[k].invariant));
    for (const auto& n : names) os << " " << n;
    os << ")\n";
  }
  os << "  invariant " << Name(head.invariant) << ": " << Statement(head.invariant) << "\n";
  return os.str();
}

std::string RenderReport(const ReportSections& s) {
  std::string out = s.headline + "\n" + RenderVerdict(s) + s.minimal_case + s.drawn + s.totals + s.invariance;
  out += "=== Reproduce\n  " + s.reproduce + "\n";
  if (!s.reproduce_command.empty()) out += "  " + s.reproduce_command + "\n";
  if (!s.regression_draft.empty()) out += "=== Regression test draft\n" + s.regression_draft;
  return out;
}

std::string RenderFailure(const std::string& candidate, const PackRequest& request, const CaseResult& result,
                          const VerifyReport& run, const VerifyOptions& options) {
  return RenderReport(BuildReportSections(candidate, request, result, run, options));
}

}  // namespace packoracle
