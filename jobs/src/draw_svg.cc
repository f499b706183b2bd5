// `packoracle draw`'s SVG (draw.h): a header, for long rows an overview strip, the per-slot lanes (tokens,
// documents, positions as dumped and as the policy wants, labels, loss mask, targets as decoded and as the
// oracle wants, each encoding's boundaries), the attention grid and a legend, one element per line with
// machine-readable attributes (packoracle/jobs/svg.h). The root is sized to what is drawn.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "draw_svg_parts.h"

namespace packoracle::jobs::draw_internal {

std::string SlotColour(const RowDrawing& d, std::int64_t slot) {
  const int c = d.slot_colour[static_cast<std::size_t>(slot)];
  return c < 0 ? kPadColour : kPalette[static_cast<std::size_t>(c) % (sizeof kPalette / sizeof *kPalette)];
}

std::string Thousands(std::int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (value < 0 ? "-" : "") + out;
}

void Canvas::Text(double x, double y, std::string_view text, double font_size, SvgAttributes attributes,
                  Anchor anchor) {
  const double w = SvgTextWidth(text, font_size);
  const double reach = anchor == Anchor::kStart ? x + w : anchor == Anchor::kMiddle ? x + w / 2 : x;
  right_ = std::max(right_, reach);
  bottom_ = std::max(bottom_, y + font_size * 0.3);  // descenders
  if (anchor != Anchor::kStart) attributes.push_back({"text-anchor", anchor == Anchor::kMiddle ? "middle" : "end"});
  attributes.push_back({"font-size", SvgNumber(font_size)});
  svg.Text(x, y, text, attributes);
}

void Canvas::Rect(double x, double y, double width, double height, const SvgAttributes& attributes) {
  right_ = std::max(right_, x + width);
  bottom_ = std::max(bottom_, y + height);
  svg.Rect(x, y, width, height, attributes);
}

SlotFlags FlagDisagreements(const RowDrawing& d) {
  const auto n = static_cast<std::size_t>(d.n);
  SlotFlags f{std::vector<bool>(n), d.target_differs, std::vector<bool>(n), std::vector<bool>(n)};
  if (d.row->position_ids && d.targets_known) {
    for (std::size_t i = 0; i < n; ++i) {
      const auto& want = d.orow->position_ids[i];
      f.position[i] = want && *want != (*d.row->position_ids)[i];
    }
  }
  for (std::int64_t q = 0; q < d.n && d.encoding_compared; ++q)
    for (std::int64_t k = 0; k <= q && !f.attention[static_cast<std::size_t>(q)]; ++k)
      f.attention[static_cast<std::size_t>(q)] = d.Allowed(q, k) != d.Implied(q, k);
  for (const auto& e : d.encodings) {
    if (!e.starts) continue;
    std::vector<bool> truth(n);  // the spans' starts, or the row's under segment_encodings: rows
    for (auto s : e.expected) truth[static_cast<std::size_t>(s)] = true;
    std::vector<bool> got(n);
    for (auto s : RealStarts(*e.starts, d)) got[static_cast<std::size_t>(s)] = true;
    for (std::size_t i = 0; i < n; ++i)
      if (got[i] != truth[i]) f.boundary[i] = true;
  }
  return f;
}

SvgFrame ChooseFrame(const RowDrawing& d, const SlotFlags& flags, double label_width) {
  SvgFrame f;
  f.n = d.n;
  for (std::int64_t s = 0; s < d.n && f.focus < 0; ++s)
    if (flags.Any(s)) f.focus = s;
  f.count = std::min(d.n, kSvgWindowSlots);
  f.windowed = f.count < d.n;
  // A quarter of the window before the first disagreement: what leads up to it stays in view.
  if (f.windowed && f.focus >= 0) f.first = std::clamp(f.focus - f.count / 4, std::int64_t{0}, d.n - f.count);
  // Wide enough for the widest value drawn in a slot (tokens, positions, labels, slot numbers), within bounds
  // that keep 64 slots on a screen; a value that still does not fit is left to the element's data attribute.
  std::size_t chars = std::to_string(f.first + f.count - 1).size();
  for (std::int64_t s = f.first; s < f.first + f.count; ++s) {
    const auto i = static_cast<std::size_t>(s);
    chars = std::max({chars, std::to_string(d.row->input_ids[i]).size(), std::to_string(d.row->labels[i]).size()});
    if (d.row->position_ids) chars = std::max(chars, std::to_string((*d.row->position_ids)[i]).size());
  }
  const double wanted = static_cast<double>(chars) * kValueFont * kSvgCharEm + 4;
  f.cell = std::clamp(wanted, d.n <= 16 ? 28.0 : 16.0, 40.0);
  f.left = kMargin + label_width + 10;
  return f;
}

namespace {

double MaxWidth(const std::vector<std::string>& texts, double font_size) {
  double w = 0;
  for (const auto& t : texts) w = std::max(w, SvgTextWidth(t, font_size));
  return w;
}

// The query labels left of the grid: "slot document".
std::vector<std::string> QueryLabels(const RowDrawing& d, const SvgFrame& f) {
  std::vector<std::string> out;
  for (std::int64_t q = f.first; q < f.first + f.count; ++q) {
    const std::string& doc = d.slot_doc[static_cast<std::size_t>(q)];
    out.push_back(std::to_string(q) + " " + (doc.empty() ? "pad" : doc));
  }
  return out;
}

SvgAttributes RootAttributes(const RowDrawing& d, const SvgFrame& f, std::int64_t position_disagreements) {
  const CandidateMicrobatch& mb = *d.loaded->microbatch;
  double decoded = 0, oracle = 0;
  for (const auto& t : d.decoded) decoded += t.weight;
  for (const auto& p : d.orow->predictions) oracle += p.weight;
  return {{"data-file", std::filesystem::path(d.file).filename().string()},
          {"data-row", std::to_string(d.index)},
          {"data-step", std::to_string(mb.step)},
          {"data-micro-step", std::to_string(mb.micro_step)},
          {"data-rank", std::to_string(mb.rank)},
          {"data-slots", std::to_string(d.n)},
          {"data-drawn-slots", std::to_string(f.count)},
          {"data-first-slot", std::to_string(f.first)},
          {"data-window", f.windowed ? "window" : "all"},
          {"data-cells", "cell"},
          {"data-policy", PolicyLabel(d.policy)},
          {"data-valid-targets", Num(decoded)},
          {"data-oracle-targets", d.targets_known ? Num(oracle) : "unknown"},
          {"data-allowed", std::to_string(d.allowed)},
          {"data-disagree", std::to_string(d.disagree)},
          {"data-target-disagree", std::to_string(d.target_disagreements)},
          {"data-position-disagree", std::to_string(position_disagreements)}};
}

}  // namespace

std::string DrawSvg(const RowDrawing& d) {
  const SlotFlags flags = FlagDisagreements(d);
  std::vector<std::string> labels = LaneLabels(d);
  SvgFrame frame = ChooseFrame(d, flags, 0);
  const std::vector<std::string> queries = QueryLabels(d, frame);
  labels.insert(labels.end(), queries.begin(), queries.end());
  frame = ChooseFrame(d, flags, std::max(MaxWidth(labels, kLabelFont), MaxWidth(queries, kLabelFont) + 10));

  const auto position_disagreements = std::count(flags.position.begin(), flags.position.end(), true);
  Canvas c(RootAttributes(d, frame, position_disagreements));
  const std::vector<std::string> header = HeaderLines(d, frame, flags);
  c.svg.Title(header[0] + ": " + header[2]);
  c.svg.Desc(
      "Top to bottom: the lanes, one cell per slot (tokens; documents, coloured; positions as dumped and as the "
      "policy wants; labels; loss_mask; targets as the labels decode and as the oracle wants; the segment starts "
      "each boundary encoding gives), a red outline wherever the row disagrees with the policy. Then the "
      "attention grid: row q is the query slot, column k the key slot; a filled cell may attend (coloured by "
      "the query's document, padding grey), an empty cell is masked, a red outline marks a cell where the row's "
      "boundary encoding implies the opposite. Rows longer than 64 slots are drawn as a window of 64 slots "
      "around the first disagreement, under an overview strip of the whole row.");
  double y = DrawHeader(c, header, 0);
  y = DrawOverview(c, d, frame, flags, y);
  y = DrawLanes(c, d, frame, flags, y);
  y = DrawGrid(c, d, frame, y);
  DrawLegend(c, std::max(c.right(), frame.left + frame.Width()), y);
  return c.Finish();
}

}  // namespace packoracle::jobs::draw_internal
