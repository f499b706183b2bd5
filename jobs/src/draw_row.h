// The pieces of `packoracle draw` (draw.h), shared by the files that read the row (draw_load.cc), print it
// for the terminal (draw_text.cc) and draw it as SVG (draw_svg.cc). Internal: not installed.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "packoracle/fastcheck/jsonl_reader.h"
#include "packoracle/interchange/packed_batch.h"
#include "packoracle/jobs/draw.h"
#include "packoracle/oracle.h"

namespace packoracle::jobs::draw_internal {

constexpr std::int64_t kMaxTableSlots = 128;  // longer rows: the table shows the slots around boundaries and
                                              // differences
constexpr std::int64_t kMaxGridSlots = 64;    // the terminal attention grid; disagreeing cells beyond are listed
constexpr std::size_t kMaxListed = 12;        // cells or slots listed by coordinates

constexpr const char* kPadColour = "#bdbdbd";
constexpr const char* kDisagreeColour = "#d62728";
// Document colours in order of appearance in the row (tab10 without its red and grey, then lighter tints).
inline constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2",
                                    "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5"};

// ---- small formatting helpers (draw_load.cc) ----------------------------------------------------------

std::string Num(double v);
std::string List(const std::vector<std::int64_t>& v, std::size_t max_items = 24);
std::string PadLeft(const std::string& s, std::size_t width);   // width in characters (UTF-8)
std::string PadRight(const std::string& s, std::size_t width);
std::string PolicyLabel(const Policy& policy);  // "reference", "reference with k=v, ...", ...
[[noreturn]] void Unusable(const std::string& message);  // throws InputError

// ---- what is read from the source ---------------------------------------------------------------------

struct MicrobatchSummary {
  std::int64_t step = 0, micro_step = 0, rank = 0, line = 0;
  std::int64_t rows = 0, slots = 0;
  double weights = 0;          // Σ w of its rows' labels, decoded under the policy
  std::int64_t labels = 0;     // labels != ignore_index, without the shift (count_basis unshifted_labels)
  std::string problem;         // why its rows could not be decoded (the counts are then partial)
  std::optional<ProducerTotals> producer;
};

struct Loaded {
  std::string file;                     // the source's name in messages
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
  // Load with at_lines: the micro-batch record of each line asked for, and its index in summaries.
  std::map<std::int64_t, std::pair<CandidateMicrobatch, std::size_t>> at_line;
};

// ---- the row, its oracle and its encodings --------------------------------------------------------------

struct EncodingView {
  std::string name;                    // "cu_seqlens", ...
  std::string shown;                   // the encoding's values, abbreviated
  std::optional<SegmentStarts> starts; // derived segment starts (all slots)
  std::string problem;                 // why none could be derived
  SegmentStarts expected;              // the starts it must give (non-padding): the spans', or under
                                       // segment_encodings: rows the row's (ExpectedSegmentStarts)
  bool names_rows = false;             // expected is the row's, not the documents'
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

const char* DeclaredEncodingName(BoundarySource source);
std::vector<std::int64_t> RealStarts(const SegmentStarts& starts, const RowDrawing& d);

// The policy options give in place of the header's (a preset, a policy file or a Policy), if any.
std::optional<Policy> GivenPolicy(const DrawOptions& o);
// Reads the source once, keeping the row options.row (of options.step) and what the denominators need; with
// at_lines, the micro-batch records on those lines instead (Loaded::at_line), any of whose rows SelectRowAt
// then makes the row to draw: several rows drawn for one read of the file.
Loaded Load(fastcheck::RecordReader& source, const DrawOptions& o, const std::optional<Policy>& given,
            const std::set<std::int64_t>* at_lines = nullptr);
void SelectRowAt(Loaded& loaded, std::int64_t line, std::int64_t row);  // InputError when there is no such row
// The row against its oracle: targets, documents, encodings, attention.
RowDrawing Analyse(const Loaded& loaded, const DrawOptions& o);

void PrintRow(const RowDrawing& d, std::ostream& os);           // draw_text.cc
void PrintDenominators(const RowDrawing& d, std::ostream& os);  // draw_text.cc
std::string DrawSvg(const RowDrawing& d);                        // draw_svg.cc

}  // namespace packoracle::jobs::draw_internal
