// packoracle draw FILE [--row R]: see draw_command.h.
//
// The file is read once, streaming: the header's policy (or the one given) decodes every row as it goes by,
// so the micro-batch and step counts of the denominator section need no second pass; only the drawn row's
// micro-batch and the document records are kept.
#include "draw_command.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "packoracle/interchange/packed_batch.h"
#include "packoracle/interchange/policy_json.h"
#include "packoracle/interchange/svg.h"
#include "packoracle/oracle.h"
#include "packoracle/properties/invariants.h"

namespace packoracle::cli {
namespace {

constexpr std::int64_t kMaxTableSlots = 128;  // longer rows: the table shows the slots around boundaries and
                                              // differences
constexpr std::int64_t kMaxGridSlots = 64;    // the terminal attention grid; disagreeing cells beyond are listed
constexpr std::int64_t kMaxSvgSlots = 4096;     // the SVG grid: longer rows are drawn for their first slots
constexpr std::int64_t kMaxSvgCellSlots = 128;  // up to this, one <rect> per cell; beyond, one per run
constexpr std::size_t kMaxListed = 12;        // cells or slots listed by coordinates

constexpr const char* kPadColour = "#bdbdbd";
constexpr const char* kDisagreeColour = "#d62728";
// Document colours in order of appearance in the row (tab10 without its red and grey, then lighter tints).
constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2",
                                    "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5"};

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

std::string List(const std::vector<std::int64_t>& v, std::size_t max_items = 24) {
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

// ---- reading the file ---------------------------------------------------------------------------------

struct MicrobatchSummary {
  std::int64_t step = 0, micro_step = 0, rank = 0, line = 0;
  std::int64_t rows = 0, slots = 0;
  double weights = 0;          // Σ w of its rows' labels, decoded under the policy
  std::int64_t labels = 0;     // labels != ignore_index, without the shift (count_basis unshifted_labels)
  std::string problem;         // why its rows could not be decoded (the counts are then partial)
  std::optional<ProducerTotals> producer;
};

struct Loaded {
  HeaderRecord header;
  Policy policy;
  std::string policy_source;            // "the header's", "--preset P", "--policy F"
  std::vector<Document> documents;      // file order, the first record of each uid
  std::vector<MicrobatchSummary> summaries;
  std::optional<CandidateMicrobatch> microbatch;  // the one holding the row
  std::size_t summary_index = 0;
  std::size_t row_in_microbatch = 0;
  std::int64_t line = 0;
  std::int64_t rows_counted = 0;        // rows R could index
  std::int64_t microbatches_counted = 0;
};

[[noreturn]] void Unusable(const std::string& message) { throw InputError(message); }

Policy GivenPolicy(const DrawOptions& o) {
  if (!o.preset.empty()) return FindPreset(o.preset).policy;
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

Loaded Load(const DrawOptions& o) {
  Loaded loaded;
  std::optional<Policy> given;
  if (!o.preset.empty() || !o.policy_file.empty()) {
    given = GivenPolicy(o);
    loaded.policy_source = !o.preset.empty() ? "--preset " + o.preset : "--policy " + o.policy_file;
  }
  PackedBatchReader reader(o.file);
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
      const bool counted = !o.step || mb.step == *o.step;
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
  if (!loaded.microbatch) {
    const std::string where = o.step ? " of step " + std::to_string(*o.step) : "";
    if (index == 0) {
      Unusable(o.file + ": --row " + std::to_string(o.row) + " is out of range: the file has no rows" + where +
               (o.step ? "" : " (no microbatch record)"));
    }
    Unusable(o.file + ": --row " + std::to_string(o.row) + " is out of range: the file has " + std::to_string(index) +
             " row" + (index == 1 ? "" : "s") + where + " in " + std::to_string(loaded.microbatches_counted) +
             " micro-batch" + (loaded.microbatches_counted == 1 ? "" : "es") + " (rows 0.." +
             std::to_string(index - 1) + ", micro-batches flattened in file order)");
  }
  return loaded;
}

// ---- the row, its oracle and its encodings ------------------------------------------------------------

struct EncodingView {
  std::string name;                    // "cu_seqlens", ...
  std::string shown;                   // the encoding's values, abbreviated
  std::optional<SegmentStarts> starts; // derived segment starts (all slots)
  std::string problem;                 // why none could be derived
};

struct RowDrawing {
  std::string file;
  std::int64_t index = 0;  // R
  const Loaded* loaded = nullptr;
  const CandidateRow* row = nullptr;
  std::int64_t n = 0;
  Policy policy;
  OracleBatch oracle;                  // one row: the spans' layout under the policy
  const OracleRow* orow = nullptr;
  bool targets_known = true;           // every span's document has a record
  std::string targets_note;
  std::vector<DecodedTarget> decoded;
  std::vector<bool> target_differs;
  std::int64_t target_disagreements = 0;
  std::vector<std::string> slot_doc;   // display name per slot, "" for padding
  std::vector<int> slot_colour;        // palette index per slot, -1 for padding
  std::vector<std::pair<std::string, std::string>> aliases;  // short name = uid, when uids are long
  std::vector<std::int64_t> pad_run_start;  // for padding slots: where their run starts
  // Attention.
  std::string encoding_note;           // how the row's declared encoding was read
  std::vector<std::int64_t> encoded_segment;  // per slot; empty: no comparison possible
  bool encoding_compared = false;
  std::int64_t allowed = 0, implied_allowed = 0, disagree = 0;
  // Disagreeing cells grouped by the spans' segments of query and key: (query segment, key segment) → cells,
  // and whether the row's encoding lets them through (the oracle masks them) or masks them.
  struct Block {
    std::int64_t cells = 0;
    bool let_through = false;
  };
  std::map<std::pair<std::int64_t, std::int64_t>, Block> disagree_blocks;
  std::vector<std::int64_t> segment_of;  // per slot: index of its segment among the spans' segments
  std::vector<EncodingView> encodings; // every boundary encoding present, for the boundaries lines
  SegmentStarts true_starts;           // the spans' document starts (non-padding)

  bool Pad(std::int64_t i) const { return orow->slots[static_cast<std::size_t>(i)].is_pad(); }

  // The oracle's rule A_ij (batch.h Attends); a padding query sees its own padding run, computed here from
  // the run's start so that a long padded row costs O(L²), not O(L³).
  bool Allowed(std::int64_t i, std::int64_t j) const {
    if (j > i) return false;
    if (Pad(i)) return j >= pad_run_start[static_cast<std::size_t>(i)];
    return Attends(*orow, policy, i, j);
  }

  // What a backend reading the row's declared boundary encoding allows: the same rule with the encoding's
  // segments in place of the spans' (the kit's reference attention consumer).
  bool Implied(std::int64_t i, std::int64_t j) const {
    if (!encoding_compared || Pad(i) || j > i) return Allowed(i, j);
    if (Pad(j)) return policy.pad_keys == PadKeys::kVisible;
    if (policy.attention == Attention::kRowCausal) return true;
    if (encoded_segment.empty()) return true;  // no encoding: nothing keeps documents apart
    return encoded_segment[static_cast<std::size_t>(i)] == encoded_segment[static_cast<std::size_t>(j)];
  }
};

// Every boundary encoding the row carries, derived the way the backend that reads it does (segments.h); the
// declared one is the first.
std::vector<EncodingView> Encodings(const CandidateRow& row, const Policy& policy, const HeaderRecord& header,
                                    std::int64_t n) {
  std::vector<EncodingView> out;
  auto add = [&](const std::string& name, const std::string& shown, auto derive) {
    EncodingView v{name, shown, std::nullopt, ""};
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

const char* DeclaredEncodingName(BoundarySource source) {
  switch (source) {
    case BoundarySource::kCuSeqlens: return "cu_seqlens";
    case BoundarySource::kSeqLens: return "seq_lens";
    case BoundarySource::kDocIds: return "doc_ids";
    case BoundarySource::kPositionReset:
    case BoundarySource::kPositionStep: return "position_ids";
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

// The oracle for the row's spans. With every span's document on record: the row's documents as the dump gives
// them (delimiters included), each followed by the one after it in the file (the stream's next document, whose
// first token a next_in_stream row end targets), in file order; the file's other documents play no part, so a
// defect in one of them does not stop the drawing. With some missing, each piece stands alone as a document of
// its own: enough for the attention rule, which depends only on the pieces, not for targets.
void MaterializeOracle(RowDrawing& d, const DrawOptions& o) {
  const Loaded& loaded = *d.loaded;
  const std::string where = o.file + ":" + std::to_string(loaded.line) + ": microbatch record, rows[" +
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

RowDrawing Analyse(const Loaded& loaded, const DrawOptions& o) {
  RowDrawing d;
  d.file = o.file;
  d.index = o.row;
  d.loaded = &loaded;
  d.row = &loaded.microbatch->rows[loaded.row_in_microbatch];
  d.n = static_cast<std::int64_t>(d.row->input_ids.size());
  d.policy = loaded.policy;
  const std::string where = o.file + ":" + std::to_string(loaded.line) + ": microbatch record, rows[" +
                            std::to_string(loaded.row_in_microbatch) + "]";
  if (d.n == 0) Unusable(where + ": field 'input_ids' is empty (a row has at least one slot)");
  MaterializeOracle(d, o);

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
      d.encoding_note = "the row has no " + what + ", its declared boundary source: a backend would attend across "
                        "documents";
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

// ---- the terminal drawing -------------------------------------------------------------------------------

std::string WeightText(double w) { return Num(w); }

void PrintRow(const RowDrawing& d, std::ostream& os) {
  const Loaded& loaded = *d.loaded;
  const CandidateMicrobatch& mb = *loaded.microbatch;
  const CandidateRow& row = *d.row;
  const OracleRow& orow = *d.orow;
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

  // The per-slot table: every slot of a short row; of a long one, the slots around each document start, each
  // difference and the row's ends, with a gap column ("…") between runs.
  std::vector<std::int64_t> position_differs;  // slots whose given position is not the policy's
  if (row.position_ids) {
    for (std::int64_t i = 0; i < d.n; ++i) {
      const auto& want = orow.position_ids[static_cast<std::size_t>(i)];
      if (want && *want != (*row.position_ids)[static_cast<std::size_t>(i)]) position_differs.push_back(i);
    }
  }
  std::vector<std::int64_t> shown;  // slots in table order; -1 is a gap
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

  // The attention grid.
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
    os << "  (" << d.n << " x " << d.n << " cells: too many for the terminal; the SVG draws "
       << (d.n <= kMaxSvgSlots ? "them all" : "the first " + std::to_string(kMaxSvgSlots) + " slots") << ")\n";
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

  // The boundaries every encoding implies.
  os << "\n  boundaries: the spans start documents at " << List(d.true_starts) << "\n";
  for (const auto& e : d.encodings) {
    os << "    " << PadRight(e.name, 12) << " " << e.shown;
    if (!e.starts) {
      os << ": cannot be read: " << e.problem << "\n";
      continue;
    }
    const auto got = RealStarts(*e.starts, d);
    os << " -> starts " << List(got) << (got == d.true_starts ? ": agrees" : ": DIFFERS from the spans");
    const char* declared = DeclaredEncodingName(policy.boundary_source);
    if (declared && e.name == declared) os << " (declared)";
    os << "\n";
  }
  if (d.encodings.empty()) os << "    (the row carries no boundary encoding)\n";
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
    os << "    producer: loss_sum " << Num(p.loss_sum) << ", denominator " << Num(p.denominator) << " (scope "
       << (p.denominator_scope.empty() ? "?" : p.denominator_scope) << ")";
    if (p.loss) os << ", loss " << Num(*p.loss);
    os << (std::abs(p.denominator - expected) <= 1e-9 * std::max(1.0, std::abs(expected))
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

// ---- the SVG --------------------------------------------------------------------------------------------

std::string Colour(const RowDrawing& d, std::int64_t slot) {
  const int c = d.slot_colour[static_cast<std::size_t>(slot)];
  return c < 0 ? kPadColour : kPalette[static_cast<std::size_t>(c) % (sizeof kPalette / sizeof *kPalette)];
}

std::string DrawSvg(const RowDrawing& d) {
  const Loaded& loaded = *d.loaded;
  const CandidateMicrobatch& mb = *loaded.microbatch;
  const std::int64_t m = std::min(d.n, kMaxSvgSlots);  // slots drawn
  const bool per_cell = m <= kMaxSvgCellSlots;           // one rect per cell, else one per run of a query row
  const double cell = m <= 16 ? 28 : m <= 32 ? 22 : m <= 64 ? 14 : m <= 128 ? 8 : m <= 256 ? 4 : m <= 512 ? 2
                      : m <= 1024 ? 1 : m <= 2048 ? 0.5 : 0.25;
  const bool labels = cell >= 14;  // tokens on the axes and under the target marks
  std::int64_t every = 1;          // label every slot, or every 2^k-th so that labels stay 28 px apart
  while (static_cast<double>(every) * cell < 28) every *= 2;
  const double char_w = 6.6;
  std::size_t token_chars = 1, query_chars = 7;
  for (std::int64_t i = 0; i < m; ++i) {
    const std::size_t token = std::to_string(d.row->input_ids[static_cast<std::size_t>(i)]).size();
    token_chars = std::max(token_chars, token);
    query_chars = std::max(query_chars, std::to_string(i).size() + (labels ? 1 + token : 0));
  }
  const double left = 16 + static_cast<double>(query_chars) * char_w + 14;
  const double top = 56 + (labels ? static_cast<double>(token_chars) * char_w + 8 : 0) + 24;
  const double grid = static_cast<double>(m) * cell;
  const double marks_y = top + grid + 10;
  const double mark_h = std::max(cell, 8.0);
  const double legend_y = marks_y + mark_h + (labels ? 24 : 10) + 12;

  double decoded = 0, oracle = 0;
  for (const auto& t : d.decoded) decoded += t.weight;
  for (const auto& p : d.orow->predictions) oracle += p.weight;
  const std::string file_name = std::filesystem::path(d.file).filename().string();
  const std::string where = file_name + " row " + std::to_string(d.index) + " (step " + std::to_string(mb.step) +
                            ", micro_step " + std::to_string(mb.micro_step) + ", rank " + std::to_string(mb.rank) + ")";
  const std::string policy_line = "policy: " + PolicyLabel(d.policy) + " (" + loaded.policy_source + ")";
  const std::string counts = Num(decoded) + " valid targets (oracle " + (d.targets_known ? Num(oracle) : "?") + ") of " +
                             std::to_string(d.n) + " slots · " + std::to_string(d.allowed) + " allowed cells · " +
                             std::to_string(d.disagree) + " cell" + (d.disagree == 1 ? "" : "s") + " and " +
                             std::to_string(d.target_disagreements) + " target" +
                             (d.target_disagreements == 1 ? "" : "s") + " disagree" +
                             (m < d.n ? " · slots 0-" + std::to_string(m - 1) + " of " + std::to_string(d.n) + " drawn" : "");
  const std::size_t longest = std::max({where.size() + 20, policy_line.size(), counts.size()});
  const double width = std::max({left + grid + 24, 640.0, 24 + static_cast<double>(longest) * char_w});
  const double height = legend_y + 26;

  SvgWriter svg(width, height,
                {{"data-file", file_name},
                 {"data-row", std::to_string(d.index)},
                 {"data-step", std::to_string(mb.step)},
                 {"data-micro-step", std::to_string(mb.micro_step)},
                 {"data-rank", std::to_string(mb.rank)},
                 {"data-slots", std::to_string(d.n)},
                 {"data-drawn-slots", std::to_string(m)},
                 {"data-cells", per_cell ? "cell" : "run"},
                 {"data-policy", PolicyLabel(d.policy)},
                 {"data-valid-targets", Num(decoded)},
                 {"data-oracle-targets", d.targets_known ? Num(oracle) : "unknown"},
                 {"data-allowed", std::to_string(d.allowed)},
                 {"data-disagree", std::to_string(d.disagree)},
                 {"data-target-disagree", std::to_string(d.target_disagreements)}});
  svg.Title("packoracle draw: " + where + ": " + counts);
  svg.Desc(std::string("Attention grid: row q is the query slot, column k the key slot; a filled cell may attend "
                       "(coloured by the query's document, padding grey), an empty cell is masked, a red outline marks "
                       "a cell where the row's boundary encoding implies the opposite.") +
           (per_cell ? "" : " Cells are drawn as runs along each query row (data-k to data-k-last); masked runs that "
                            "agree are left empty.") +
           " Under the grid: one target mark per slot (filled: a valid target; empty: excluded; grey: padding; red "
           "outline: differs from the oracle).");
  svg.Text(12, 20, "packoracle draw · " + where, {{"class", "title"}, {"font-size", "14"}, {"font-weight", "bold"}});
  svg.Text(12, 37, policy_line, {{"class", "subtitle"}});
  svg.Text(12, 52, counts, {{"class", "subtitle"}});

  // Axes: slot numbers (and tokens) along the keys on top and the queries on the left.
  svg.OpenGroup({{"class", "axes"}, {"fill", "#333333"}});
  for (std::int64_t k = 0; k < m; k += every) {
    const double x = left + (static_cast<double>(k) + 0.5) * cell;
    svg.Text(x, top - 14, std::to_string(k),
             {{"class", "axis key slot"}, {"data-slot", std::to_string(k)}, {"text-anchor", "middle"}, {"font-size", "9"}});
    if (labels) {
      const double y = top - 28;
      svg.Text(x + 3, y, std::to_string(d.row->input_ids[static_cast<std::size_t>(k)]),
               {{"class", "axis key token"},
                {"data-slot", std::to_string(k)},
                {"transform", "rotate(-90 " + SvgNumber(x + 3) + " " + SvgNumber(y) + ")"}});
    }
  }
  for (std::int64_t q = 0; q < m; q += every) {
    const std::string token = std::to_string(d.row->input_ids[static_cast<std::size_t>(q)]);
    svg.Text(left - 12, top + (static_cast<double>(q) + 0.5) * cell + 4,
             labels ? std::to_string(q) + " " + token : std::to_string(q),
             {{"class", "axis query"}, {"data-slot", std::to_string(q)}, {"text-anchor", "end"}, {"font-size", "10"}});
  }
  svg.Text(left - 12, top - 14, "q \\ k", {{"class", "axis corner"}, {"text-anchor", "end"}, {"font-size", "9"}});
  svg.CloseGroup();

  // Document strips: the document of each key (top) and query (left); one per slot, or one per run of slots.
  svg.OpenGroup({{"class", "documents"}});
  for (std::int64_t s = 0; s < m;) {
    std::int64_t e = s + 1;
    if (!per_cell) {
      while (e < m && d.slot_doc[static_cast<std::size_t>(e)] == d.slot_doc[static_cast<std::size_t>(s)] &&
             d.Pad(e) == d.Pad(s) && (d.Pad(s) || d.orow->slots[static_cast<std::size_t>(e)].piece == d.orow->slots[static_cast<std::size_t>(s)].piece))
        ++e;
    }
    const std::string doc = d.slot_doc[static_cast<std::size_t>(s)];
    const std::string cls = doc.empty() ? "doc pad" : "doc";
    for (const char* axis : {"k", "q"}) {
      SvgAttributes a = {{"class", cls}, {"data-axis", axis}, {"data-slot", std::to_string(s)}};
      if (!per_cell) a.push_back({"data-length", std::to_string(e - s)});
      a.push_back({"data-doc", doc.empty() ? "pad" : doc});
      a.push_back({"fill", Colour(d, s)});
      const double along = static_cast<double>(s) * cell, length = static_cast<double>(e - s) * cell;
      if (axis[0] == 'k') {
        svg.Rect(left + along, top - 8, length, 6, a);
      } else {
        svg.Rect(left - 8, top + along, 6, length, a);
      }
    }
    s = e;
  }
  svg.CloseGroup();

  // The grid: agreeing cells first, then the disagreeing ones so that their red outlines lie on top.
  const std::string thin = cell >= 8 ? "0.5" : "0";
  const std::string thick = cell >= 8 ? "2" : "0.5";
  svg.OpenGroup({{"class", "grid"}});
  if (!per_cell) svg.Rect(left, top, grid, grid, {{"class", "grid-background"}, {"fill", "#ffffff"}, {"stroke", "#cccccc"}});
  std::vector<std::uint8_t> allowed_row(static_cast<std::size_t>(m)), disagree_row(static_cast<std::size_t>(m));
  for (int pass = 0; pass < 2; ++pass) {
    for (std::int64_t q = 0; q < m; ++q) {
      const std::string doc = d.slot_doc[static_cast<std::size_t>(q)].empty() ? "pad" : d.slot_doc[static_cast<std::size_t>(q)];
      for (std::int64_t k = 0; k < m; ++k) {
        const bool allowed = d.Allowed(q, k);
        allowed_row[static_cast<std::size_t>(k)] = allowed ? 1 : 0;
        disagree_row[static_cast<std::size_t>(k)] = allowed != d.Implied(q, k) ? 1 : 0;
      }
      for (std::int64_t k = 0; k < m;) {
        const bool allowed = allowed_row[static_cast<std::size_t>(k)] != 0;
        const bool disagree = disagree_row[static_cast<std::size_t>(k)] != 0;
        std::int64_t e = k + 1;
        if (!per_cell) {
          while (e < m && allowed_row[static_cast<std::size_t>(e)] == allowed_row[static_cast<std::size_t>(k)] &&
                 disagree_row[static_cast<std::size_t>(e)] == disagree_row[static_cast<std::size_t>(k)])
            ++e;
        }
        const bool draw = disagree == (pass == 1) && (per_cell || allowed || disagree);
        if (draw) {
          SvgAttributes a = {{"class", std::string(per_cell ? "cell " : "run ") + (allowed ? "allowed" : "masked") +
                                           (disagree ? " disagree" : "")},
                             {"data-q", std::to_string(q)},
                             {"data-k", std::to_string(k)}};
          if (!per_cell) a.push_back({"data-k-last", std::to_string(e - 1)});
          a.push_back({"data-doc", doc});
          a.push_back({"fill", allowed ? Colour(d, q) : (per_cell ? "#ffffff" : "#f7c6c7")});
          a.push_back({"stroke", disagree ? kDisagreeColour : (allowed ? "#ffffff" : "#e6e6e6")});
          a.push_back({"stroke-width", disagree ? thick : thin});
          svg.Rect(left + static_cast<double>(k) * cell, top + static_cast<double>(q) * cell,
                   static_cast<double>(e - k) * cell, cell, a);
        }
        k = e;
      }
    }
  }
  svg.CloseGroup();

  // Target marks: what the row's labels train at each slot, outlined red where the oracle says otherwise.
  svg.OpenGroup({{"class", "targets"}});
  svg.Text(left - 12, marks_y + mark_h / 2 + 4, "targets",
           {{"class", "axis targets-label"}, {"text-anchor", "end"}, {"font-size", "10"}});
  const double gap = cell >= 8 ? 1 : 0;
  for (std::int64_t s = 0; s < m; ++s) {
    const auto& t = d.decoded[static_cast<std::size_t>(s)];
    const Prediction& p = d.orow->predictions[static_cast<std::size_t>(s)];
    const bool pad = d.Pad(s);
    const bool valid = t.weight > 0;
    const bool differs = d.target_differs[static_cast<std::size_t>(s)];
    const std::string kind = valid ? "valid" : (pad ? "padding" : "excluded");
    const std::string expected = !d.targets_known ? "unknown" : (p.weight > 0 ? std::to_string(p.target) : "none");
    svg.Rect(left + static_cast<double>(s) * cell + gap, marks_y, cell - 2 * gap, mark_h,
             {{"class", "target " + kind + (differs ? " disagree" : "")},
              {"data-slot", std::to_string(s)},
              {"data-target", valid ? std::to_string(t.target) : "none"},
              {"data-weight", Num(t.weight)},
              {"data-expected", expected},
              {"data-expected-weight", d.targets_known ? Num(p.weight) : "unknown"},
              {"fill", valid ? Colour(d, s) : (pad ? kPadColour : "#ffffff")},
              {"stroke", differs ? kDisagreeColour : (valid || pad ? "none" : "#9e9e9e")},
              {"stroke-width", differs ? (cell >= 8 ? "2" : "1") : (cell >= 8 ? "1" : "0.25")}});
    if (labels && valid) {
      svg.Text(left + (static_cast<double>(s) + 0.5) * cell, marks_y + mark_h + 12, std::to_string(t.target),
               {{"class", "target-token"}, {"data-slot", std::to_string(s)}, {"text-anchor", "middle"}, {"font-size", "9"}});
    }
  }
  svg.CloseGroup();

  // Legend.
  svg.OpenGroup({{"class", "legend"}, {"font-size", "10"}});
  double x = 12;
  auto entry = [&](const std::string& name, const std::string& fill, const std::string& stroke, const std::string& text) {
    svg.Rect(x, legend_y - 9, 10, 10, {{"class", "legend " + name}, {"fill", fill}, {"stroke", stroke}, {"stroke-width", "1"}});
    svg.Text(x + 14, legend_y, text, {{"class", "legend-text"}});
    x += 14 + static_cast<double>(text.size()) * 6.0 + 14;
  };
  entry("legend-allowed", kPalette[0], "none", "may attend");
  entry("legend-masked", "#ffffff", "#9e9e9e", "masked");
  entry("legend-disagree", "#ffffff", kDisagreeColour, "encoding disagrees");
  entry("legend-valid", kPalette[0], "none", "valid target");
  entry("legend-excluded", "#ffffff", "#9e9e9e", "excluded");
  entry("legend-padding", kPadColour, "none", "padding");
  svg.CloseGroup();
  return svg.Finish();
}

}  // namespace

std::string DefaultSvgPath(const std::string& file, std::int64_t row, std::optional<std::int64_t> step) {
  std::filesystem::path path(file);
  const std::string suffix = (step ? ".step" + std::to_string(*step) : std::string()) + ".row" + std::to_string(row) + ".svg";
  if (path.has_extension()) path.replace_extension();
  path += suffix;
  return path.string();
}

int RunDraw(const DrawOptions& o, std::ostream& out, std::ostream& err) {
  try {
    if (o.file.empty()) Unusable("no FILE given (a packed-batch JSON Lines file)");
    if (!o.preset.empty() && !o.policy_file.empty()) Unusable("give --preset or --policy, not both");
    if (o.row < 0) Unusable(o.file + ": --row " + std::to_string(o.row) + " is out of range: rows count from 0");
    const Loaded loaded = Load(o);
    const RowDrawing drawing = Analyse(loaded, o);
    PrintRow(drawing, out);
    PrintDenominators(drawing, out);
    if (o.write_svg) {
      const std::string path = o.svg.empty() ? DefaultSvgPath(o.file, o.row, o.step) : o.svg;
      const std::string document = DrawSvg(drawing);
      std::ofstream file(path, std::ios::binary);
      if (!file || !(file << document) || !file.flush()) Unusable(path + ": cannot write the SVG");
      out << "\n  SVG: " << path << "\n";
    }
    return 0;
  } catch (const InputError& e) {
    err << "packoracle draw: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    // Anything else a malformed file can provoke (an allocation too large, a filesystem error) is still
    // unusable input, never a crash.
    err << "packoracle draw: " << o.file << ": " << e.what() << "\n";
    return 2;
  }
}

Runner AddDrawCommand(CLI::App& app) {
  struct State {
    DrawOptions options;
    std::int64_t step = 0;
    CLI::Option* step_option = nullptr;
    bool no_svg = false;
  };
  auto s = std::make_shared<State>();
  auto* draw = app.add_subcommand(
      "draw",
      "Draw one row of a packed-batch file as the lesson does: documents, tokens, positions, the targets its labels "
      "decode to against the oracle's, the attention grid (the oracle's rule, ! where the row's boundary encoding "
      "implies otherwise) and the denominators; on the terminal and as an SVG file (exit 0 drawn, 2 unusable input)");
  draw->add_option("FILE", s->options.file, "a packed-batch JSON Lines file (DESIGN §5)")->required();
  draw->add_option("--row", s->options.row, "the row to draw: rows of the file in order, micro-batches flattened")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  s->step_option = draw->add_option("--step", s->step, "count only the rows of this step's micro-batches");
  draw->add_option("--svg", s->options.svg, "where to write the SVG (default: FILE with .row<R>.svg for its extension)");
  draw->add_flag("--no-svg", s->no_svg, "draw on the terminal only");
  auto* preset = draw->add_option("--preset", s->options.preset, "read the row under this preset, not the header's policy");
  auto* policy = draw->add_option("--policy", s->options.policy_file,
                                  "read the row under the policy in this JSON file: {\"preset\":..., key: value, ...}");
  preset->excludes(policy);
  return [s, draw] {
    if (!*draw) return -1;  // not the subcommand given (command.h)
    DrawOptions options = s->options;
    if (s->step_option->count() > 0) options.step = s->step;
    options.write_svg = !s->no_svg;
    return RunDraw(options, std::cout, std::cerr);
  };
}

}  // namespace packoracle::cli
