// Reading the source and analysing the row for `packoracle draw` (draw.h).
//
// The source is read once, streaming: the header's policy (or the one given) decodes every row as it goes
// by, so the micro-batch and step counts of the denominator section need no second pass; only the drawn
// row's micro-batch and the document records are kept.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "draw_row.h"
#include "packoracle/interchange/policy_json.h"
#include "packoracle/properties/encoding_notes.h"
#include "packoracle/properties/invariants.h"

namespace packoracle::jobs::draw_internal {

// ---- small formatting helpers ---------------------------------------------------------------------------

std::string Num(double v) {
  if (std::isfinite(v) && std::fabs(v) < 1e15 && v == std::floor(v)) {
    return std::to_string(static_cast<long long>(v));
  }
  std::ostringstream os;
  os.precision(7);
  os << v;
  return os.str();
}

std::string List(const std::vector<std::int64_t>& v, std::size_t max_items) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size() && i < max_items; ++i) out += (i ? " " : "") + std::to_string(v[i]);
  if (v.size() > max_items) out += " … (" + std::to_string(v.size()) + ")";
  return out + "]";
}

std::string PadLeft(const std::string& s, std::size_t width) {
  // Width in characters, counting a UTF-8 sequence as one.
  std::size_t chars = 0;
  for (char c : s) chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
  return chars >= width ? s : std::string(width - chars, ' ') + s;
}

std::string PadRight(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

// "reference", "reference with row_end_target=next_in_doc, overflow=split", or "custom: ...".
std::string PolicyLabel(const Policy& policy) {
  Policy base;
  std::string name = policy.preset;
  if (!name.empty()) {
    try {
      base = FindPreset(name).policy;
    } catch (const InputError&) {
      name.clear();
    }
  }
  if (name.empty()) name = "reference";
  const auto values = PolicyKeyValues(policy);
  const auto base_values = PolicyKeyValues(base);
  std::string diff;
  for (std::size_t k = 1; k < values.size() && k < base_values.size(); ++k) {
    if (values[k].second != base_values[k].second) {
      diff += (diff.empty() ? "" : ", ") + values[k].first + "=" + ToString(values[k].second);
    }
  }
  return diff.empty() ? name : name + " with " + diff;
}

[[noreturn]] void Unusable(const std::string& message) { throw InputError(message); }

std::optional<Policy> GivenPolicy(const DrawOptions& o) {
  if (o.policy) return o.policy;
  if (!o.preset.empty()) return FindPreset(o.preset).policy;
  if (o.policy_file.empty()) return std::nullopt;
  std::ifstream in(o.policy_file);
  if (!in) Unusable(o.policy_file + ": cannot open the policy file");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {  // out_of_range too: a number beyond double
    Unusable(o.policy_file + ": not JSON (" + e.what() + ")");
  }
  return PolicyFromJson(j, o.policy_file);
}

Loaded Load(fastcheck::RecordReader& reader, const DrawOptions& o, const std::optional<Policy>& given,
            const std::set<std::int64_t>* at_lines) {
  Loaded loaded;
  loaded.file = reader.path();
  if (given) {
    loaded.policy_source = o.policy ? "the given policy" : !o.preset.empty() ? "--preset " + o.preset : "--policy " + o.policy_file;
  }
  std::set<std::string> uids;
  std::int64_t index = 0;
  while (auto record = reader.Next()) {
    if (auto* h = std::get_if<HeaderRecord>(&*record)) {
      loaded.header = *h;
      loaded.policy = given ? *given : h->policy;
      if (!given) loaded.policy_source = "the header's";
    } else if (auto* d = std::get_if<DocumentRecord>(&*record)) {
      if (uids.insert(d->document.uid).second) loaded.documents.push_back(d->document);
    } else if (auto* m = std::get_if<MicrobatchRecord>(&*record)) {
      const CandidateMicrobatch& mb = m->microbatch;
      MicrobatchSummary s;
      s.step = mb.step;
      s.micro_step = mb.micro_step;
      s.rank = mb.rank;
      s.line = m->line;
      s.producer = mb.producer;
      for (const CandidateRow& row : mb.rows) {
        ++s.rows;
        s.slots += static_cast<std::int64_t>(row.input_ids.size());
        for (Token label : row.labels) s.labels += label != loaded.policy.ignore_index ? 1 : 0;
        try {
          for (const auto& t : DecodeTargets(row.labels, row.loss_mask ? &*row.loss_mask : nullptr, loaded.policy))
            s.weights += t.weight;
        } catch (const InputError& e) {
          if (s.problem.empty()) s.problem = e.what();
        }
      }
      if (at_lines && at_lines->count(m->line)) loaded.at_line[m->line] = {mb, loaded.summaries.size()};
      const bool counted = !at_lines && (!o.step || mb.step == *o.step);
      if (counted) {
        ++loaded.microbatches_counted;
        for (std::size_t r = 0; r < mb.rows.size(); ++r, ++index) {
          if (index == o.row) {
            loaded.microbatch = mb;
            loaded.summary_index = loaded.summaries.size();
            loaded.row_in_microbatch = r;
            loaded.line = m->line;
          }
        }
      }
      loaded.summaries.push_back(std::move(s));
    }
  }
  loaded.rows_counted = index;
  if (!loaded.microbatch && !at_lines) {
    const std::string where = o.step ? " of step " + std::to_string(*o.step) : "";
    if (index == 0) {
      Unusable(loaded.file + ": --row " + std::to_string(o.row) + " is out of range: the file has no rows" + where +
               (o.step ? "" : " (no microbatch record)"));
    }
    Unusable(loaded.file + ": --row " + std::to_string(o.row) + " is out of range: the file has " + std::to_string(index) +
             " row" + (index == 1 ? "" : "s") + where + " in " + std::to_string(loaded.microbatches_counted) +
             " micro-batch" + (loaded.microbatches_counted == 1 ? "" : "es") + " (rows 0.." +
             std::to_string(index - 1) + ", micro-batches flattened in file order)");
  }
  return loaded;
}

void SelectRowAt(Loaded& loaded, std::int64_t line, std::int64_t row) {
  const auto it = loaded.at_line.find(line);
  if (it == loaded.at_line.end()) Unusable(loaded.file + ":" + std::to_string(line) + ": no microbatch record on this line");
  const CandidateMicrobatch& mb = it->second.first;
  if (row < 0 || row >= static_cast<std::int64_t>(mb.rows.size())) {
    Unusable(loaded.file + ":" + std::to_string(line) + ": microbatch record: row " + std::to_string(row) +
             " is out of range (" + std::to_string(mb.rows.size()) + " rows)");
  }
  loaded.microbatch = mb;
  loaded.summary_index = it->second.second;
  loaded.row_in_microbatch = static_cast<std::size_t>(row);
  loaded.line = line;
}

namespace {

// Every boundary encoding the row carries, derived the way the backend that reads it does (segments.h); the
// declared one is the first.
std::vector<EncodingView> Encodings(const CandidateRow& row, const Policy& policy, const HeaderRecord& header,
                                    std::int64_t n) {
  std::vector<EncodingView> out;
  auto add = [&](const std::string& name, const std::string& shown, auto derive) {
    EncodingView v;  // expected and names_rows are set beside the spans' starts (Analyse)
    v.name = name;
    v.shown = shown;
    try {
      v.starts = derive();
    } catch (const InputError& e) {
      v.problem = e.what();
    }
    out.push_back(std::move(v));
  };
  if (row.cu_seqlens) add("cu_seqlens", List(*row.cu_seqlens), [&] { return FromCuSeqlens(*row.cu_seqlens, n); });
  if (row.seq_lens) add("seq_lens", List(*row.seq_lens), [&] { return FromSeqLens(*row.seq_lens, n); });
  if (row.doc_ids) add("doc_ids", List(*row.doc_ids), [&] { return FromDocIds(*row.doc_ids); });
  if (row.position_ids && policy.boundary_source == BoundarySource::kPositionReset) {
    add("position_ids", List(*row.position_ids) + " (a segment starts where position == " +
                            std::to_string(policy.position_base) + ")",
        [&] { return FromPositionReset(*row.position_ids, policy.position_base); });
  }
  if (row.position_ids && policy.boundary_source == BoundarySource::kPositionStep) {
    add("position_ids", List(*row.position_ids) + " (a segment starts where positions do not step by 1)",
        [&] { return FromPositionStep(*row.position_ids); });
  }
  if (policy.boundary_source == BoundarySource::kEodCloses) {
    const auto id = policy.eos_id ? policy.eos_id : header.eod_id;
    if (id) add("EOD tokens", "(id " + std::to_string(*id) + ")", [&] { return FromEodCloses(row.input_ids, *id); });
  }
  if (policy.boundary_source == BoundarySource::kBosOpens) {
    const auto id = policy.bos_id ? policy.bos_id : header.bos_id;
    if (id) add("BOS tokens", "(id " + std::to_string(*id) + ")", [&] { return FromBosOpens(row.input_ids, *id); });
  }
  return out;
}

}  // namespace

const char* DeclaredEncodingName(BoundarySource source) {
  if (const char* field = RequiredBoundaryField(source); *field) return field;  // a field of the row
  switch (source) {
    case BoundarySource::kEodCloses: return "EOD tokens";
    case BoundarySource::kBosOpens: return "BOS tokens";
    default: return nullptr;
  }
}

std::vector<std::int64_t> RealStarts(const SegmentStarts& starts, const RowDrawing& d) {
  std::vector<std::int64_t> out;
  for (auto s : starts)
    if (s >= 0 && s < d.n && !d.Pad(s)) out.push_back(s);
  return out;
}

namespace {

// The oracle for the row's spans. With every span's document on record: the row's documents as the dump gives
// them (delimiters included), each followed by the one after it in the file (the stream's next document, whose
// first token a next_in_stream row end targets), in file order; the file's other documents play no part, so a
// defect in one of them does not stop the drawing. With some missing, each piece stands alone as a document of
// its own: enough for the attention rule, which depends only on the pieces, not for targets.
void MaterializeOracle(RowDrawing& d) {
  const Loaded& loaded = *d.loaded;
  const std::string where = loaded.file + ":" + std::to_string(loaded.line) + ": microbatch record, rows[" +
                            std::to_string(loaded.row_in_microbatch) + "]";
  std::set<std::string> known;
  for (const auto& doc : loaded.documents) known.insert(doc.uid);
  std::vector<std::string> missing;
  for (const DocSpan& span : d.row->doc_spans)
    if (!known.count(span.doc_uid) && std::find(missing.begin(), missing.end(), span.doc_uid) == missing.end())
      missing.push_back(span.doc_uid);

  CandidateMicrobatch one;
  one.step = loaded.microbatch->step;
  one.micro_step = loaded.microbatch->micro_step;
  one.rank = loaded.microbatch->rank;
  one.rows = {*d.row};
  std::vector<Document> documents;
  {
    std::set<std::string> used;
    for (const DocSpan& span : d.row->doc_spans) used.insert(span.doc_uid);
    for (std::size_t k = 0; k < loaded.documents.size(); ++k) {
      if (used.count(loaded.documents[k].uid) || (k > 0 && used.count(loaded.documents[k - 1].uid)))
        documents.push_back(loaded.documents[k]);
    }
  }
  if (!missing.empty()) {
    d.targets_known = false;
    std::string names;
    for (std::size_t k = 0; k < missing.size() && k < 4; ++k) names += (k ? ", " : "") + missing[k];
    if (missing.size() > 4) names += ", …";
    d.targets_note = "no document record for " + names +
                     ": the oracle's targets are unknown (the attention rule needs only the spans)";
    documents.clear();
    for (std::size_t s = 0; s < d.row->doc_spans.size(); ++s) {
      DocSpan& span = one.rows[0].doc_spans[s];
      Document piece;
      piece.uid = "piece " + std::to_string(s) + ": " + span.doc_uid;
      for (std::int64_t t = 0; t < span.length; ++t) {
        const std::int64_t slot = span.start + t;
        if (slot < 0 || slot >= d.n) Unusable(where + ": field 'doc_spans[" + std::to_string(s) + "]' lies outside the row");
        piece.tokens.push_back(d.row->input_ids[static_cast<std::size_t>(slot)]);
      }
      span.doc_uid = piece.uid;
      span.doc_offset = 0;
      documents.push_back(std::move(piece));
    }
  }
  try {
    const auto effective = Effective(documents, d.policy, Delimiters::kIncluded);
    Layout layout = LayoutFromSpans({one}, effective, d.n);
    d.oracle = Materialize(documents, layout, d.policy, Delimiters::kIncluded);
  } catch (const InputError& e) {
    Unusable(where + ": field 'doc_spans' describes no layout of the documents under the policy: " + e.what());
  }
  d.orow = &d.oracle.rows.front();
}

}  // namespace

RowDrawing Analyse(const Loaded& loaded, const DrawOptions& o) {
  RowDrawing d;
  d.file = loaded.file;
  d.index = o.row;
  d.loaded = &loaded;
  d.row = &loaded.microbatch->rows[loaded.row_in_microbatch];
  d.n = static_cast<std::int64_t>(d.row->input_ids.size());
  d.policy = loaded.policy;
  const std::string where = loaded.file + ":" + std::to_string(loaded.line) + ": microbatch record, rows[" +
                            std::to_string(loaded.row_in_microbatch) + "]";
  if (d.n == 0) Unusable(where + ": field 'input_ids' is empty (a row has at least one slot)");
  MaterializeOracle(d);

  try {
    d.decoded = DecodeTargets(d.row->labels, d.row->loss_mask ? &*d.row->loss_mask : nullptr, d.policy);
  } catch (const InputError& e) {
    Unusable(where + ": field 'labels'/'loss_mask' cannot be read under the policy: " + e.what());
  }

  // Documents: display names and colours in order of appearance.
  std::map<std::int64_t, int> colour_of;  // oracle document index → palette index
  std::map<std::int64_t, std::string> name_of;
  bool long_names = false;
  for (const Slot& s : d.orow->slots)
    if (!s.is_pad() && d.oracle.documents[static_cast<std::size_t>(s.doc)].uid.size() > 5) long_names = true;
  d.slot_doc.assign(static_cast<std::size_t>(d.n), "");
  d.slot_colour.assign(static_cast<std::size_t>(d.n), -1);
  d.pad_run_start.assign(static_cast<std::size_t>(d.n), 0);
  for (std::int64_t i = 0; i < d.n; ++i) {
    const Slot& s = d.orow->slots[static_cast<std::size_t>(i)];
    if (s.is_pad()) {
      d.pad_run_start[static_cast<std::size_t>(i)] = (i > 0 && d.Pad(i - 1)) ? d.pad_run_start[static_cast<std::size_t>(i - 1)] : i;
      continue;
    }
    if (!colour_of.count(s.doc)) {
      const int k = static_cast<int>(colour_of.size());
      colour_of[s.doc] = k;
      std::string uid = d.oracle.documents[static_cast<std::size_t>(s.doc)].uid;
      if (!d.targets_known) uid = uid.substr(uid.find(": ") + 2);  // "piece 0: a" → "a"
      if (long_names) {
        name_of[s.doc] = "d" + std::to_string(k);
        d.aliases.push_back({name_of[s.doc], uid});
      } else {
        name_of[s.doc] = uid;
      }
    }
    d.slot_doc[static_cast<std::size_t>(i)] = name_of[s.doc];
    d.slot_colour[static_cast<std::size_t>(i)] = colour_of[s.doc];
  }

  // Targets: the row's decoded against the oracle's.
  d.target_differs.assign(static_cast<std::size_t>(d.n), false);
  if (d.targets_known) {
    for (std::int64_t i = 0; i < d.n; ++i) {
      const DecodedTarget& got = d.decoded[static_cast<std::size_t>(i)];
      const Prediction& want = d.orow->predictions[static_cast<std::size_t>(i)];
      const bool differs = std::fabs(got.weight - want.weight) > 1e-12 ||
                           (got.weight > 0 && want.weight > 0 && got.target != want.target);
      d.target_differs[static_cast<std::size_t>(i)] = differs;
      d.target_disagreements += differs ? 1 : 0;
    }
  }

  // Attention: the declared encoding's segments against the spans'.
  d.encodings = Encodings(*d.row, d.policy, loaded.header, d.n);
  d.true_starts = RealStarts(TrueSegmentStarts(*d.orow), d);
  for (auto& e : d.encodings) {
    e.expected = RealStarts(ExpectedSegmentStarts(*d.orow, d.policy, e.name), d);
    e.names_rows = d.policy.segment_encodings == SegmentEncodings::kRows && NamedBySegmentEncodings(e.name);
  }
  const char* declared = DeclaredEncodingName(d.policy.boundary_source);
  if (d.policy.attention == Attention::kRowCausal) {
    d.encoding_note = "row_causal: every earlier token of the row is seen; no boundary encoding is read";
  } else if (!declared) {
    d.encoding_note = std::string("boundary_source ") + Name(d.policy.boundary_source) +
                      ": the spans are the segmentation, so the grid is the oracle's alone";
  } else {
    const EncodingView* view = nullptr;
    for (const auto& e : d.encodings)
      if (e.name == declared) view = &e;
    if (!view) {
      d.encoding_compared = true;  // encoded_segment stays empty: one segment, documents see each other
      std::string what = declared;
      if (d.policy.boundary_source == BoundarySource::kEodCloses || d.policy.boundary_source == BoundarySource::kBosOpens)
        what += " (the policy and the header name no such id)";
      d.encoding_note = "the row has no " + what + ", its declared boundary source: a backend reads it as one sequence" +
                        std::string(d.true_starts.size() > 1 ? ", so its documents attend to each other"
                                                             : " (one document: nothing crosses)");
    } else if (!view->starts) {
      d.encoding_note = std::string("the row's ") + declared + " cannot be read (" + view->problem +
                        "): no comparison is drawn";
    } else {
      d.encoding_compared = true;
      d.encoded_segment = SegmentIds(*view->starts, d.n);
      d.encoding_note = std::string("! where the row's ") + declared + " (its declared boundary source) implies the opposite";
    }
  }
  d.segment_of = SegmentIds(TrueSegmentStarts(*d.orow), d.n);
  for (std::int64_t i = 0; i < d.n; ++i) {
    for (std::int64_t j = 0; j <= i; ++j) {
      const bool allowed = d.Allowed(i, j), implied = d.Implied(i, j);
      d.allowed += allowed ? 1 : 0;
      d.implied_allowed += implied ? 1 : 0;
      if (allowed != implied) {
        ++d.disagree;
        auto& block = d.disagree_blocks[{d.segment_of[static_cast<std::size_t>(i)], d.segment_of[static_cast<std::size_t>(j)]}];
        ++block.cells;
        block.let_through = implied;
      }
    }
  }
  return d;
}

}  // namespace packoracle::jobs::draw_internal
