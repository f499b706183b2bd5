// `packoracle draw`'s SVG (draw.h): the attention grid, document strips, target marks and a legend, one
// element per line with machine-readable attributes (packoracle/interchange/svg.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "draw_row.h"
#include "packoracle/interchange/svg.h"

namespace packoracle::jobs::draw_internal {
namespace {

std::string Colour(const RowDrawing& d, std::int64_t slot) {
  const int c = d.slot_colour[static_cast<std::size_t>(slot)];
  return c < 0 ? kPadColour : kPalette[static_cast<std::size_t>(c) % (sizeof kPalette / sizeof *kPalette)];
}

}  // namespace

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

}  // namespace packoracle::jobs::draw_internal
