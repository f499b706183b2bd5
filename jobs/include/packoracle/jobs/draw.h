// `packoracle draw FILE [--row R]` as a library call: one row of a packed-batch dump drawn the way the lesson
// draws it (reference/lesson.md: "draw document and target masks, then reconstruct the loss denominator"), as a
// terminal grid and as an SVG file for people who would rather look than read.
//
//   packoracle draw rank0.jsonl --row 3                  # writes rank0.row3.svg next to the file
//   packoracle draw rank0.jsonl --step 2 --row 0 --svg /tmp/row.svg --preset megatron-sft-thd
//
// The row: R counts the rows of the file in order, micro-batches flattened (with --step S, only the rows of
// step S's micro-batches). The policy: the header's, or --preset P / --policy F in its place.
//
// What is drawn, per slot: the token, its document (from doc_spans, the ground truth), the positions as
// given, the raw labels, the targets and weights the labels decode to under the policy (DecodeTargets), the
// oracle's expected targets and weights for the spans' layout (Materialize with the dump's documents, whose
// delimiters are included), and a `!` where the two differ. Then the attention grid: the oracle's rule on the
// spans' segments (# allowed, . masked), with `!` on every cell where the row's own boundary encoding
// (cu_seqlens, seq_lens, doc_ids, position_ids, EOD or BOS tokens, as boundary_source declares) implies the
// opposite. Then the denominators: the row's valid targets (decoded), the oracle's count, the slots, and the
// producer totals of its micro-batch against the count its declared denominator calls for.
//
// The SVG (FILE with its extension replaced by .row<R>.svg, or .step<S>.row<R>.svg with --step; or --svg
// PATH), sized to its content (text measured by SvgTextWidth, so the title is never cut): a header (the
// title, the policy, the counts of what disagrees), then one lane per line of the terminal's table, a cell per
// slot (tokens, documents, positions as dumped and as the policy wants, labels, loss_mask, targets as decoded
// and as the oracle wants, the segment starts of the spans and of every boundary encoding the row carries),
// then the attention grid (allowed cells filled in the colour of the query's document, padding grey, masked
// cells empty) and a legend. Everything that disagrees with the policy is outlined red. Every element a test
// or script needs carries machine-readable attributes (one element per line, see packoracle/jobs/svg.h):
//   <svg ... data-row="R" data-slots="L" data-drawn-slots="64" data-first-slot="0" data-window="all"
//        data-valid-targets="7" data-oracle-targets="7" data-allowed="21" data-disagree="0"
//        data-target-disagree="0" data-position-disagree="0">
//   <g class="lane" data-lane="position">  (lanes: slot, input, document, position, position-policy, label,
//                                           loss-mask, target, target-policy, boundaries:spans,
//                                           boundaries:<encoding>)
//   <rect class="position disagree" data-slot="4" data-value="4" .../>    (position-policy likewise)
//   <rect class="boundary" data-encoding="doc_ids" data-slot="3" .../>     ("boundary missing disagree" where
//                                                                            the encoding misses a start)
//   <rect class="target valid" data-slot="3" data-target="22" data-weight="1" data-expected="22" .../>
//                                                                            (or "target excluded",
//                                                                             "target padding"; + " disagree")
//   <rect class="cell allowed" data-q="3" data-k="0" data-doc="b" .../>      (or "cell masked"; + " disagree")
//   <rect class="doc" data-axis="q" data-slot="3" data-doc="b" .../>         (the grid's document strips)
// Long rows: beyond 64 slots the lanes and the grid show a window of 64 slots starting a quarter window before
// the first disagreement (data-window="window", data-first-slot), under an overview of the whole row
// (<rect class="overview-bar">, "overview-disagree", "overview-window"); the header's fourth line says which
// slots ("slots 1,014–1,077 of 4,096 drawn slot by slot ..."). The terminal prints the attention grid up to 64
// slots, and for longer rows the per-slot table around document starts, differences and the row's ends;
// disagreeing cells are always summed up by (query document, key document).
//
// Drawn whatever the row's verdict (draw shows, `packoracle verify` judges). Unusable input (a file that cannot
// be read or is not a packed-batch file, a row out of range, spans that describe no layout of the documents,
// a policy the row cannot be read under, an SVG that cannot be written) throws InputError with a message
// naming the file, the line and the field; the command line prints it and exits 2.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "packoracle/fastcheck/jsonl_reader.h"
#include "packoracle/oracle/policy.h"

namespace packoracle::jobs {

struct DrawOptions {
  std::string file;                  // the packed-batch JSON Lines file (Draw only)
  std::int64_t row = 0;              // R: rows of the source in order, micro-batches flattened
  std::optional<std::int64_t> step;  // S: count rows of this step's micro-batches only
  std::string svg;                   // where the SVG goes; empty: DefaultSvgPath (Draw only)
  bool write_svg = true;             // false: the terminal drawing only (--no-svg; Draw only)
  // The policy to read the row under instead of the header's: a preset, a JSON policy file, or a Policy
  // object (at most one).
  std::string preset;
  std::string policy_file;
  std::optional<Policy> policy;
};

struct DrawResult {
  int exit_code = 0;     // 0: drawn (unusable input throws InputError instead)
  std::string text;      // the terminal drawing, as `packoracle draw` prints it before its "SVG:" line
  std::string svg;       // the SVG document; empty when not wanted (Draw with write_svg false)
  std::string svg_path;  // where WriteSvg writes it (Draw); empty for DrawReader
};

// FILE with its extension replaced: "dumps/rank0.jsonl" → "dumps/rank0.row3.svg" (".step2.row3.svg" with a
// step).
std::string DefaultSvgPath(const std::string& file, std::int64_t row, std::optional<std::int64_t> step = std::nullopt);

// Draws row options.row of options.file: the text, and with write_svg the SVG and its path, which WriteSvg
// then writes (kept apart so that the command line prints the drawing before it writes the file).
DrawResult Draw(const DrawOptions& options);
// Writes result.svg to result.svg_path; InputError when it cannot.
void WriteSvg(const DrawResult& result);

// A row located as verify locates a violation's (AuditViolation, verify.h): the micro-batch record's line in
// the file and the row within that micro-batch.
struct RowAt {
  std::int64_t line = 0;
  std::int64_t row = 0;
};
struct DrawnRow {
  std::string svg;      // the row's SVG, or empty when it cannot be drawn
  std::string problem;  // why not (the InputError's message)
};
// Draws each of `rows` of options.file as an SVG, reading the file once (verify --html's pictures), in the
// order given. options.row, step, svg and write_svg play no part; the policy options do. A file that cannot be
// read throws InputError; a row that cannot be drawn gets its problem instead.
std::vector<DrawnRow> DrawRowsAt(const DrawOptions& options, const std::vector<RowAt>& rows);

// Draws row options.row of any source (records built in memory: fastcheck::MemoryRecordReader), the text
// and the SVG, writing nothing; options.file, svg and write_svg play no part. The source is read to its end.
DrawResult DrawReader(fastcheck::RecordReader& source, const DrawOptions& options);

}  // namespace packoracle::jobs
