// `packoracle draw`'s SVG: the lanes, one cell per drawn slot, each a line of the terminal's table or one
// encoding's boundaries, with a red outline where the row disagrees with the policy; and the overview strip
// of a long row.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "draw_svg_parts.h"

namespace packoracle::jobs::draw_internal {
namespace {

constexpr const char* kDisagreeFill = "#fde0e0";

const EncodingView* DeclaredView(const RowDrawing& d) {
  const char* declared = DeclaredEncodingName(d.policy.boundary_source);
  if (!declared) return nullptr;
  for (const auto& e : d.encodings)
    if (e.name == declared) return &e;
  return nullptr;
}

bool DeclaredMissing(const RowDrawing& d) {
  return d.policy.attention != Attention::kRowCausal && DeclaredEncodingName(d.policy.boundary_source) && !DeclaredView(d);
}

std::string EncodingLabel(const RowDrawing& d, const std::string& name) {
  const char* declared = DeclaredEncodingName(d.policy.boundary_source);
  return "starts: " + name + (declared && name == declared ? " (declared)" : "");
}

// One lane: its background and its label; the cells are drawn by the caller.
struct Lane {
  Canvas& c;
  const SvgFrame& f;
  double y;
  void Open(const std::string& id, const std::string& label) const {
    c.svg.OpenGroup({{"class", "lane"}, {"data-lane", id}});
    c.Text(f.left - 12, y + kLaneHeight / 2 + 3.5, label, kLabelFont, {{"class", "lane-label"}, {"fill", "#333333"}},
           Canvas::Anchor::kEnd);
    c.Rect(f.left, y, f.Width(), kLaneHeight,
           {{"class", "lane-background"}, {"fill", "#fafafa"}, {"stroke", "#e0e0e0"}, {"stroke-width", "0.5"}});
  }
  void Close() const { c.svg.CloseGroup(); }
  // The value inside its cell when it fits (the data-value attribute always holds it).
  void Value(std::int64_t slot, const std::string& text, const std::string& cls, const char* ink) const {
    if (SvgTextWidth(text, kValueFont) > f.cell - 2) return;
    c.Text(f.X(slot) + f.cell / 2, y + kLaneHeight / 2 + 3, text, kValueFont,
           {{"class", cls + "-value"}, {"data-slot", std::to_string(slot)}, {"fill", ink}}, Canvas::Anchor::kMiddle);
  }
};

struct CellStyle {
  std::string cls, fill;
  bool disagree = false;
};

// A lane of values, one cell per slot: `value(slot)` is drawn in it, `style(slot)` says its class and fill.
void ValueLane(Lane lane, const std::string& id, const std::string& label,
               const std::function<std::string(std::size_t)>& value,
               const std::function<CellStyle(std::size_t)>& style, SvgAttributes (*extra)(const RowDrawing&, std::size_t),
               const RowDrawing& d) {
  lane.Open(id, label);
  for (std::int64_t s = lane.f.first; s < lane.f.first + lane.f.count; ++s) {
    const auto i = static_cast<std::size_t>(s);
    const CellStyle st = style(i);
    SvgAttributes a = {{"class", st.cls + (st.disagree ? " disagree" : "")}, {"data-slot", std::to_string(s)},
                       {"data-value", value(i)}};
    if (extra) {
      const SvgAttributes more = extra(d, i);
      a.insert(a.end(), more.begin(), more.end());
    }
    a.push_back({"fill", st.disagree && st.fill == "none" ? kDisagreeFill : st.fill});
    a.push_back({"stroke", st.disagree ? kDisagreeColour : "#e6e6e6"});
    a.push_back({"stroke-width", st.disagree ? "2" : "0.5"});
    lane.c.Rect(lane.f.X(s) + 0.5, lane.y + 0.5, lane.f.cell - 1, kLaneHeight - 1, a);
    // White on a document's colour, dark on anything light.
    const bool coloured = st.cls == "doc-lane";
    lane.Value(s, value(i), st.cls.substr(0, st.cls.find(' ')), coloured ? "#ffffff" : "#222222");
  }
  lane.Close();
}

SvgAttributes TargetData(const RowDrawing& d, std::size_t i) {
  const auto& t = d.decoded[i];
  const Prediction& p = d.orow->predictions[i];
  return {{"data-target", t.weight > 0 ? std::to_string(t.target) : "none"},
          {"data-weight", Num(t.weight)},
          {"data-expected", !d.targets_known ? "unknown" : (p.weight > 0 ? std::to_string(p.target) : "none")},
          {"data-expected-weight", d.targets_known ? Num(p.weight) : "unknown"}};
}

void DrawTargetLanes(const RowDrawing& d, const SvgFrame& f, const SlotFlags& flags, Canvas& c, double& y) {
  auto kind = [&](double weight, std::size_t i) { return weight > 0 ? "valid" : d.Pad(static_cast<std::int64_t>(i)) ? "padding" : "excluded"; };
  auto fill = [&](double weight, std::size_t i) {
    return weight > 0 ? std::string("#e8f1fa") : d.Pad(static_cast<std::int64_t>(i)) ? std::string(kPadColour) : std::string("none");
  };
  ValueLane(
      Lane{c, f, y}, "target", "target",
      [&](std::size_t i) { return d.decoded[i].weight > 0 ? std::to_string(d.decoded[i].target) : std::string("-"); },
      [&](std::size_t i) {
        return CellStyle{std::string("target ") + kind(d.decoded[i].weight, i), fill(d.decoded[i].weight, i), flags.target[i]};
      },
      TargetData, d);
  y += kLaneHeight + kLaneGap;
  if (!d.targets_known) return;
  ValueLane(
      Lane{c, f, y}, "target-policy", "target (policy)",
      [&](std::size_t i) {
        const Prediction& p = d.orow->predictions[i];
        if (p.kind == TargetKind::kBoundary && p.weight == 0) return std::string("x");
        return p.weight > 0 && p.has_target() ? std::to_string(p.target) : std::string("-");
      },
      [&](std::size_t i) {
        const double w = d.orow->predictions[i].weight;
        return CellStyle{std::string("target-policy ") + kind(w, i), fill(w, i), flags.target[i]};
      },
      nullptr, d);
  y += kLaneHeight + kLaneGap;
}

void DrawPositionLanes(const RowDrawing& d, const SvgFrame& f, const SlotFlags& flags, Canvas& c, double& y) {
  if (!d.row->position_ids) return;
  const auto& given = *d.row->position_ids;
  ValueLane(
      Lane{c, f, y}, "position", "position", [&](std::size_t i) { return std::to_string(given[i]); },
      [&](std::size_t i) { return CellStyle{"position", "none", flags.position[i]}; }, nullptr, d);
  y += kLaneHeight + kLaneGap;
  if (!d.targets_known) return;
  ValueLane(
      Lane{c, f, y}, "position-policy", "position (policy)",
      [&](std::size_t i) { return d.orow->position_ids[i] ? std::to_string(*d.orow->position_ids[i]) : std::string("*"); },
      [&](std::size_t i) { return CellStyle{"position-policy", "none", flags.position[i]}; }, nullptr, d);
  y += kLaneHeight + kLaneGap;
}

// One lane per boundary encoding (and the spans, the truth): a dark tick where a segment starts; red where
// the encoding starts one the spans do not ("boundary disagree") or misses one they start ("boundary missing").
void BoundaryLane(const RowDrawing& d, const SvgFrame& f, Canvas& c, double y, const std::string& name,
                  const std::string& label, const std::optional<SegmentStarts>& starts, const std::string& problem,
                  const SegmentStarts& expected) {
  Lane lane{c, f, y};
  lane.Open("boundaries:" + name, label);
  std::vector<bool> truth(static_cast<std::size_t>(d.n)), got(static_cast<std::size_t>(d.n));
  for (auto s : expected) truth[static_cast<std::size_t>(s)] = true;
  if (starts)
    for (auto s : RealStarts(*starts, d)) got[static_cast<std::size_t>(s)] = true;
  if (!starts) {
    c.Text(f.left + 4, y + kLaneHeight / 2 + 3.5, problem, kValueFont,
           {{"class", "boundary-problem"}, {"fill", kDisagreeColour}});
  }
  for (std::int64_t s = f.first; s < f.first + f.count && starts; ++s) {
    const auto i = static_cast<std::size_t>(s);
    if (!got[i] && !truth[i]) continue;
    const bool disagree = got[i] != truth[i];
    const std::string cls = got[i] ? "boundary" : "boundary missing";
    c.Rect(f.X(s) + 1, y + 1, std::max(4.0, f.cell / 4), kLaneHeight - 2,
           {{"class", cls + (disagree ? " disagree" : "")}, {"data-encoding", name}, {"data-slot", std::to_string(s)},
            {"fill", got[i] ? (disagree ? kDisagreeColour : "#333333") : "none"},
            {"stroke", disagree ? kDisagreeColour : "none"}, {"stroke-width", disagree ? "2" : "0"}});
  }
  lane.Close();
}

void DrawBoundaryLanes(const RowDrawing& d, const SvgFrame& f, Canvas& c, double& y) {
  BoundaryLane(d, f, c, y, "spans", "starts: doc_spans (truth)", SegmentStarts(d.true_starts), "", d.true_starts);
  y += kLaneHeight + kLaneGap;
  for (const auto& e : d.encodings) {
    BoundaryLane(d, f, c, y, e.name, EncodingLabel(d, e.name), e.starts, "cannot be read: " + e.problem, e.expected);
    y += kLaneHeight + kLaneGap;
  }
  if (DeclaredMissing(d)) {
    const std::string name = DeclaredEncodingName(d.policy.boundary_source);
    BoundaryLane(d, f, c, y, name, EncodingLabel(d, name), std::nullopt,
                 "missing from the row: a backend reads one segment", d.true_starts);
    y += kLaneHeight + kLaneGap;
  }
}

}  // namespace

std::vector<std::string> LaneLabels(const RowDrawing& d) {
  std::vector<std::string> out = {"slot", "input", "document", "position (policy)", "label", "loss_mask",
                                  "target (policy)", "starts: doc_spans (truth)"};
  for (const auto& e : d.encodings) out.push_back(EncodingLabel(d, e.name));
  if (DeclaredMissing(d)) out.push_back(EncodingLabel(d, DeclaredEncodingName(d.policy.boundary_source)));
  return out;
}

double DrawLanes(Canvas& c, const RowDrawing& d, const SvgFrame& f, const SlotFlags& flags, double y) {
  c.svg.OpenGroup({{"class", "lanes"}});
  const double step = kLaneHeight + kLaneGap;
  ValueLane(
      Lane{c, f, y}, "slot", "slot", [](std::size_t i) { return std::to_string(i); },
      [](std::size_t) { return CellStyle{"slot", "none", false}; }, nullptr, d);
  y += step;
  ValueLane(
      Lane{c, f, y}, "input", "input", [&](std::size_t i) { return std::to_string(d.row->input_ids[i]); },
      [](std::size_t) { return CellStyle{"token", "none", false}; }, nullptr, d);
  y += step;
  ValueLane(
      Lane{c, f, y}, "document", "document",
      [&](std::size_t i) { return d.slot_doc[i].empty() ? std::string("pad") : d.slot_doc[i]; },
      [&](std::size_t i) {
        return CellStyle{d.slot_doc[i].empty() ? "doc-lane pad" : "doc-lane", SlotColour(d, static_cast<std::int64_t>(i)), false};
      },
      nullptr, d);
  y += step;
  DrawPositionLanes(d, f, flags, c, y);
  ValueLane(
      Lane{c, f, y}, "label", "label", [&](std::size_t i) { return std::to_string(d.row->labels[i]); },
      [](std::size_t) { return CellStyle{"label", "none", false}; }, nullptr, d);
  y += step;
  if (d.row->loss_mask) {
    const auto& mask = *d.row->loss_mask;
    ValueLane(
        Lane{c, f, y}, "loss-mask", "loss_mask", [&](std::size_t i) { return Num(mask[i]); },
        [&](std::size_t i) { return CellStyle{mask[i] != 0 ? "loss-mask on" : "loss-mask off", mask[i] != 0 ? "#dcdcdc" : "none", false}; },
        nullptr, d);
    y += step;
  }
  DrawTargetLanes(d, f, flags, c, y);
  DrawBoundaryLanes(d, f, c, y);
  c.svg.CloseGroup();
  return y + 6;
}

double DrawOverview(Canvas& c, const RowDrawing& d, const SvgFrame& f, const SlotFlags& flags, double y) {
  if (!f.windowed) return y;
  // One bar per `per_bar` slots across the window's width: the document of the bar's first slot, and a red
  // mark under every bar holding a disagreement.
  const double width = f.Width();
  const std::int64_t bars = std::min<std::int64_t>(f.n, static_cast<std::int64_t>(width / 2));
  const std::int64_t per_bar = (f.n + bars - 1) / bars;
  const double bar = width / static_cast<double>((f.n + per_bar - 1) / per_bar);
  c.svg.OpenGroup({{"class", "overview"}, {"data-slots-per-bar", std::to_string(per_bar)}});
  c.Text(f.left - 12, y + 10, "overview", kLabelFont, {{"class", "lane-label"}, {"fill", "#333333"}}, Canvas::Anchor::kEnd);
  c.Text(f.left - 12, y + 24, Thousands(per_bar) + " slots/bar", kValueFont, {{"class", "lane-label"}, {"fill", "#666666"}},
         Canvas::Anchor::kEnd);
  for (std::int64_t s = 0, k = 0; s < f.n; s += per_bar, ++k) {
    const double x = f.left + static_cast<double>(k) * bar;
    const std::int64_t last = std::min(f.n, s + per_bar) - 1;
    c.Rect(x, y, bar, 12, {{"class", "overview-bar"}, {"data-first", std::to_string(s)}, {"data-last", std::to_string(last)},
                           {"fill", SlotColour(d, s)}});
    bool any = false;
    for (std::int64_t t = s; t <= last && !any; ++t) any = flags.Any(t);
    if (any) {
      c.Rect(x, y + 14, std::max(bar, 2.0), 8,
             {{"class", "overview-disagree"}, {"data-first", std::to_string(s)}, {"data-last", std::to_string(last)},
              {"fill", kDisagreeColour}});
    }
  }
  const double x0 = f.left + static_cast<double>(f.first) / static_cast<double>(f.n) * width;
  const double w = std::max(3.0, static_cast<double>(f.count) / static_cast<double>(f.n) * width);
  c.Rect(x0, y - 3, w, 28, {{"class", "overview-window"}, {"data-first", std::to_string(f.first)},
                            {"data-last", std::to_string(f.first + f.count - 1)}, {"fill", "none"},
                            {"stroke", "#000000"}, {"stroke-width", "1.5"}});
  c.svg.CloseGroup();
  return y + 36;
}

}  // namespace packoracle::jobs::draw_internal
