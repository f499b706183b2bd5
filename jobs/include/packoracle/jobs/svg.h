// A minimal SVG writer for the kit's drawings (`packoracle draw`): standard library only, deterministic.
//
//   packoracle::SvgWriter svg(200, 120, {{"data-row", "0"}});
//   svg.Title("row 0");
//   svg.Rect(10, 10, 12, 12, {{"class", "cell allowed"}, {"data-q", "3"}, {"data-k", "0"}, {"fill", "#1f77b4"}});
//   svg.Text(10, 40, "tokens < 5", {{"class", "axis"}});
//   std::string text = svg.Finish();
//
// What it promises, so that tests and scripts can read a drawing with a plain text scan instead of an XML
// library:
//   1. one element per line, in the order written; attributes in the order given, values in double quotes;
//   2. every <rect> and <line> is self-closing (`<rect .../>`); <text>, <title> and <desc> hold only escaped
//      character data;
//   3. numbers are printed the same way on every machine: no locale, no exponent, at most two decimals,
//      trailing zeros dropped ("12", "12.5", "-0.25");
//   4. text and attribute values are escaped (& < > " '), so a file name or document uid cannot break the
//      document.
// Attribute names are written as given: pass plain names (`class`, `data-q`, `fill`).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace packoracle {

using SvgAttributes = std::vector<std::pair<std::string, std::string>>;

// `text` with & < > " ' replaced by their XML entities.
std::string SvgEscape(std::string_view text);

// `value` as SVG coordinates are written here (promise 3). Non-finite values print as "0".
std::string SvgNumber(double value);

// The width `text` takes at `font_size` in the drawings' monospace font, over-estimated on purpose: a
// drawing sized from it never cuts its text. DejaVu Sans Mono (and most monospace faces) advance 0.60 em per
// character; 0.62 em leaves room for a fallback face. Counts UTF-8 code points, not bytes.
inline constexpr double kSvgCharEm = 0.62;
double SvgTextWidth(std::string_view text, double font_size);

// The monospace face the drawings ask for (the root's font-family), first the one widths are measured for.
inline constexpr const char* kSvgFontFamily = "DejaVu Sans Mono, Menlo, Consolas, monospace";

class SvgWriter {
 public:
  // Starts the document: the XML declaration and an <svg> root of the given size (user units = pixels)
  // with a matching viewBox, monospace text, and `root` attributes after those.
  SvgWriter(double width, double height, const SvgAttributes& root = {});
  // The same, sized at the end: Finish(width, height) writes the root once everything drawn is known, so a
  // drawing can take the size of its content.
  explicit SvgWriter(const SvgAttributes& root);

  void Title(std::string_view text);  // <title>: what a viewer shows as the drawing's name
  void Desc(std::string_view text);   // <desc>: a longer description
  void Rect(double x, double y, double width, double height, const SvgAttributes& attributes);
  void Line(double x1, double y1, double x2, double y2, const SvgAttributes& attributes);
  void Text(double x, double y, std::string_view text, const SvgAttributes& attributes = {});
  void OpenGroup(const SvgAttributes& attributes);  // <g ...>
  void CloseGroup();                                 // </g> (ignored when no group is open)

  // Closes any open groups and the root; returns the whole document. Writing after Finish is ignored.
  std::string Finish();
  std::string Finish(double width, double height);  // for the size-at-the-end constructor

 private:
  enum class Form { kSelfClosing, kWithText, kOpen };
  void Element(std::string_view name, const SvgAttributes& leading, const SvgAttributes& attributes,
               std::string_view text, Form form);
  std::string Root(double width, double height) const;
  SvgAttributes root_;
  double width_ = 0, height_ = 0;
  std::string out_;  // the body; the declaration and the root are put in front by Finish
  int open_groups_ = 0;
  bool finished_ = false;
};

}  // namespace packoracle
