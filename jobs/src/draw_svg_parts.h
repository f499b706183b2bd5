// The pieces of `packoracle draw`'s SVG (draw_svg.cc puts them together): the frame (which slots are drawn
// slot by slot, and how wide a slot is), what disagrees at each slot, a canvas that remembers how far the
// drawing reaches (so the root is sized to its content, title included), and the parts drawn one under the
// other. Internal: not installed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "draw_row.h"
#include "packoracle/jobs/svg.h"

namespace packoracle::jobs::draw_internal {

// Rows up to this many slots are drawn whole; longer ones as a window of this many slots around the first
// disagreement, under an overview strip of the whole row.
constexpr std::int64_t kSvgWindowSlots = 64;
constexpr double kTitleFont = 14, kLineFont = 11, kLabelFont = 10, kValueFont = 9;
constexpr double kMargin = 12;
constexpr double kLaneHeight = 16, kLaneGap = 3;

// Per slot of the whole row: what disagrees with the policy there.
struct SlotFlags {
  std::vector<bool> position;   // the dumped position is not the policy's
  std::vector<bool> target;     // the decoded target or weight is not the oracle's
  std::vector<bool> attention;  // the query's row of the grid has a cell where the encoding implies the opposite
  std::vector<bool> boundary;   // some encoding starts a segment here and the spans do not, or the reverse
  bool Any(std::int64_t s) const {
    const auto i = static_cast<std::size_t>(s);
    return position[i] || target[i] || attention[i] || boundary[i];
  }
};
SlotFlags FlagDisagreements(const RowDrawing& d);

// Which slots are drawn slot by slot, and where.
struct SvgFrame {
  std::int64_t n = 0;                 // the row's slots
  std::int64_t first = 0, count = 0;  // the window: slots [first, first + count)
  bool windowed = false;              // count < n
  std::int64_t focus = -1;            // the first slot where something disagrees, -1 for none
  double cell = 16;                   // px per slot, wide enough for the widest value drawn in it
  double left = 0;                    // x of slot `first`; lane and query labels end left of it
  double X(std::int64_t slot) const { return left + static_cast<double>(slot - first) * cell; }
  double Width() const { return static_cast<double>(count) * cell; }
  bool Holds(std::int64_t slot) const { return slot >= first && slot < first + count; }
};
SvgFrame ChooseFrame(const RowDrawing& d, const SlotFlags& flags, double label_width);

// "4,096": slot numbers in sentences.
std::string Thousands(std::int64_t value);

// An SvgWriter that remembers the rightmost and lowest point drawn (text measured with SvgTextWidth), so that
// Finish sizes the root to the content.
class Canvas {
 public:
  explicit Canvas(const SvgAttributes& root) : svg(root) {}
  enum class Anchor { kStart, kMiddle, kEnd };
  void Text(double x, double y, std::string_view text, double font_size, SvgAttributes attributes,
            Anchor anchor = Anchor::kStart);
  void Rect(double x, double y, double width, double height, const SvgAttributes& attributes);
  std::string Finish() { return svg.Finish(right_ + kMargin, bottom_ + kMargin); }
  double right() const { return right_; }

  SvgWriter svg;  // groups, title and desc go straight to it

 private:
  double right_ = 0, bottom_ = 0;
};

// The parts, top to bottom; each takes the y it starts at and returns the y under it.
// The title, the policy, the counts and, for a window, which slots it holds ("slots 1,020–1,083 of 4,096").
std::vector<std::string> HeaderLines(const RowDrawing& d, const SvgFrame& f, const SlotFlags& flags);
double DrawHeader(Canvas& c, const std::vector<std::string>& lines, double y);
double DrawOverview(Canvas& c, const RowDrawing& d, const SvgFrame& f, const SlotFlags& flags, double y);
double DrawLanes(Canvas& c, const RowDrawing& d, const SvgFrame& f, const SlotFlags& flags, double y);
double DrawGrid(Canvas& c, const RowDrawing& d, const SvgFrame& f, double y);
double DrawLegend(Canvas& c, double width, double y);

// The lanes' names, as drawn left of them (for the label column's width).
std::vector<std::string> LaneLabels(const RowDrawing& d);
std::string SlotColour(const RowDrawing& d, std::int64_t slot);

}  // namespace packoracle::jobs::draw_internal
