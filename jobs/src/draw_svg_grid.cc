// `packoracle draw`'s SVG: the header, the attention grid of the drawn slots and the legend.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "draw_svg_parts.h"

namespace packoracle::jobs::draw_internal {

std::vector<std::string> HeaderLines(const RowDrawing& d, const SvgFrame& f, const SlotFlags& flags) {
  const CandidateMicrobatch& mb = *d.loaded->microbatch;
  double decoded = 0, oracle = 0;
  for (const auto& t : d.decoded) decoded += t.weight;
  for (const auto& p : d.orow->predictions) oracle += p.weight;
  const std::string where = std::filesystem::path(d.file).filename().string() + " row " + std::to_string(d.index) +
                            " (step " + std::to_string(mb.step) + ", micro_step " + std::to_string(mb.micro_step) +
                            ", rank " + std::to_string(mb.rank) + ")";
  auto plural = [](std::int64_t k, const std::string& one) { return std::to_string(k) + " " + one + (k == 1 ? "" : "s"); };
  std::int64_t positions = 0;
  for (bool b : flags.position) positions += b ? 1 : 0;
  std::vector<std::string> lines = {
      "packoracle draw · " + where,
      "policy: " + PolicyLabel(d.policy) + " (" + d.loaded->policy_source + ")",
      Num(decoded) + " valid targets (oracle " + (d.targets_known ? Num(oracle) : "?") + ") of " + Thousands(d.n) +
          " slots · " + Thousands(d.allowed) + " allowed cells · disagree: " + plural(d.disagree, "cell") + ", " +
          plural(d.target_disagreements, "target") + ", " + plural(positions, "position")};
  if (f.windowed) {
    lines.push_back("slots " + Thousands(f.first) + "–" + Thousands(f.first + f.count - 1) + " of " + Thousands(f.n) +
                    " drawn slot by slot: " +
                    (f.focus >= 0 ? "the window around the first disagreement (slot " + Thousands(f.focus) + ")"
                                  : std::string("no disagreement, the row's start")) +
                    "; the overview above shows every slot");
  }
  return lines;
}

double DrawHeader(Canvas& c, const std::vector<std::string>& lines, double y) {
  c.svg.OpenGroup({{"class", "header"}, {"fill", "#222222"}});
  y += 20;
  c.Text(kMargin, y, lines[0], kTitleFont, {{"class", "title"}, {"font-weight", "bold"}});
  for (std::size_t k = 1; k < lines.size(); ++k) {
    y += 16;
    c.Text(kMargin, y, lines[k], kLineFont, {{"class", k == 3 ? "subtitle window-note" : "subtitle"}});
  }
  c.svg.CloseGroup();
  return y + 12;
}

namespace {

// Label every slot, or every 2^k-th, so that slot numbers never overlap.
std::int64_t LabelEvery(const SvgFrame& f) {
  const double label = SvgTextWidth(std::to_string(f.first + f.count - 1), kValueFont) + 4;
  std::int64_t every = 1;
  while (static_cast<double>(every) * f.cell < label) every *= 2;
  return every;
}

void DrawGridAxes(Canvas& c, const RowDrawing& d, const SvgFrame& f, double top) {
  c.svg.OpenGroup({{"class", "axes"}, {"fill", "#333333"}});
  const std::int64_t every = LabelEvery(f);
  for (std::int64_t k = f.first; k < f.first + f.count; k += every) {
    c.Text(f.X(k) + f.cell / 2, top - 12, std::to_string(k), kValueFont,
           {{"class", "axis key slot"}, {"data-slot", std::to_string(k)}}, Canvas::Anchor::kMiddle);
  }
  for (std::int64_t q = f.first; q < f.first + f.count; ++q) {
    const std::string& doc = d.slot_doc[static_cast<std::size_t>(q)];
    c.Text(f.left - 12, top + static_cast<double>(q - f.first) * f.cell + f.cell / 2 + 3.5,
           std::to_string(q) + " " + (doc.empty() ? "pad" : doc), kLabelFont,
           {{"class", "axis query"}, {"data-slot", std::to_string(q)}}, Canvas::Anchor::kEnd);
  }
  c.svg.CloseGroup();
}

// The document of each key (top) and query (left), one strip per slot.
void DrawGridDocuments(Canvas& c, const RowDrawing& d, const SvgFrame& f, double top) {
  c.svg.OpenGroup({{"class", "documents"}});
  for (std::int64_t s = f.first; s < f.first + f.count; ++s) {
    const std::string& doc = d.slot_doc[static_cast<std::size_t>(s)];
    for (const char* axis : {"k", "q"}) {
      const SvgAttributes a = {{"class", doc.empty() ? "doc pad" : "doc"}, {"data-axis", axis},
                               {"data-slot", std::to_string(s)}, {"data-doc", doc.empty() ? "pad" : doc},
                               {"fill", SlotColour(d, s)}};
      const double along = static_cast<double>(s - f.first) * f.cell;
      if (axis[0] == 'k') {
        c.Rect(f.left + along, top - 8, f.cell, 6, a);
      } else {
        c.Rect(f.left - 8, top + along, 6, f.cell, a);
      }
    }
  }
  c.svg.CloseGroup();
}

void DrawCell(Canvas& c, const RowDrawing& d, const SvgFrame& f, double top, std::int64_t q, std::int64_t k) {
  const bool allowed = d.Allowed(q, k), disagree = allowed != d.Implied(q, k);
  const std::string& doc = d.slot_doc[static_cast<std::size_t>(q)];
  c.Rect(f.X(k), top + static_cast<double>(q - f.first) * f.cell, f.cell, f.cell,
         {{"class", std::string("cell ") + (allowed ? "allowed" : "masked") + (disagree ? " disagree" : "")},
          {"data-q", std::to_string(q)},
          {"data-k", std::to_string(k)},
          {"data-doc", doc.empty() ? "pad" : doc},
          {"fill", allowed ? SlotColour(d, q) : "#ffffff"},
          {"stroke", disagree ? kDisagreeColour : (allowed ? "#ffffff" : "#e6e6e6")},
          {"stroke-width", disagree ? "2" : "0.5"}});
}

// Disagreeing cells whose key lies before the window (a long row's query may see, or fail to see, keys far back).
std::int64_t DisagreeingOutside(const RowDrawing& d, const SvgFrame& f) {
  std::int64_t outside = 0;
  for (std::int64_t q = f.first; q < f.first + f.count && d.encoding_compared; ++q)
    for (std::int64_t k = 0; k < f.first; ++k) outside += d.Allowed(q, k) != d.Implied(q, k) ? 1 : 0;
  return outside;
}

}  // namespace

double DrawGrid(Canvas& c, const RowDrawing& d, const SvgFrame& f, double y) {
  const char* declared = DeclaredEncodingName(d.policy.boundary_source);
  std::string caption = std::string("attention (") + Name(d.policy.attention) + "): row = query, column = key; filled may attend" +
                        (d.encoding_compared && declared ? std::string("; red: the row's ") + declared + " implies the opposite" : "");
  if (f.windowed) caption += "; slots " + Thousands(f.first) + "–" + Thousands(f.first + f.count - 1) + " only";
  c.Text(kMargin, y + 14, caption, kLabelFont, {{"class", "grid-caption"}, {"fill", "#333333"}});
  std::int64_t outside = f.windowed ? DisagreeingOutside(d, f) : 0;
  double top = y + 24;
  if (outside > 0) {
    c.Text(kMargin, y + 28, Thousands(outside) + " disagreeing cells of these queries have keys before slot " +
                                Thousands(f.first) + " (not drawn)", kLabelFont,
           {{"class", "grid-caption outside"}, {"fill", kDisagreeColour}});
    top += 14;
  }
  top += 24;  // the key slot numbers and the document strip
  DrawGridAxes(c, d, f, top);
  DrawGridDocuments(c, d, f, top);
  c.svg.OpenGroup({{"class", "grid"}});
  // Agreeing cells first, then the disagreeing ones so that their red outlines lie on top.
  for (int pass = 0; pass < 2; ++pass)
    for (std::int64_t q = f.first; q < f.first + f.count; ++q)
      for (std::int64_t k = f.first; k < f.first + f.count; ++k)
        if ((d.Allowed(q, k) != d.Implied(q, k)) == (pass == 1)) DrawCell(c, d, f, top, q, k);
  c.svg.CloseGroup();
  return top + f.Width() + 12;
}

double DrawLegend(Canvas& c, double width, double y) {
  struct Entry {
    const char* name;
    std::string fill, stroke;
    const char* text;
  };
  const std::vector<Entry> entries = {
      {"legend-allowed", kPalette[0], "none", "may attend"},
      {"legend-masked", "#ffffff", "#9e9e9e", "masked"},
      {"legend-disagree", "#ffffff", kDisagreeColour, "disagrees with the policy"},
      {"legend-valid", "#e8f1fa", "#9e9e9e", "valid target"},
      {"legend-excluded", "#ffffff", "#9e9e9e", "excluded"},
      {"legend-padding", kPadColour, "none", "padding"},
      {"legend-boundary", "#333333", "none", "segment start"}};
  c.svg.OpenGroup({{"class", "legend"}});
  double x = kMargin;
  y += 14;
  for (const Entry& e : entries) {
    const double w = 14 + SvgTextWidth(e.text, kLabelFont) + 14;
    if (x > kMargin && x + w > width) {  // wrap rather than widen the drawing
      x = kMargin;
      y += 16;
    }
    c.Rect(x, y - 9, 10, 10,
           {{"class", std::string("legend ") + e.name}, {"fill", e.fill}, {"stroke", e.stroke}, {"stroke-width", "1"}});
    c.Text(x + 14, y, e.text, kLabelFont, {{"class", "legend-text"}});
    x += w;
  }
  c.svg.CloseGroup();
  return y + 8;
}

}  // namespace packoracle::jobs::draw_internal
