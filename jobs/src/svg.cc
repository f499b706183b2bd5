#include "packoracle/jobs/svg.h"

#include <charconv>
#include <cmath>

namespace packoracle {

std::string SvgEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string SvgNumber(double value) {
  if (!std::isfinite(value)) return "0";
  const double rounded = std::round(value * 100.0) / 100.0;
  if (rounded == 0.0) return "0";  // never "-0"
  char buffer[64];
  // std::to_chars ignores the locale (printf would not, under a decimal-comma locale).
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, rounded, std::chars_format::fixed, 2);
  std::string out(buffer, result.ptr);
  while (!out.empty() && out.back() == '0') out.pop_back();
  if (!out.empty() && out.back() == '.') out.pop_back();
  return out;
}

double SvgTextWidth(std::string_view text, double font_size) {
  std::size_t points = 0;
  for (char c : text) points += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;  // not a continuation
  return static_cast<double>(points) * font_size * kSvgCharEm;
}

SvgWriter::SvgWriter(double width, double height, const SvgAttributes& root)
    : root_(root), width_(width), height_(height) {}

SvgWriter::SvgWriter(const SvgAttributes& root) : root_(root) {}

std::string SvgWriter::Root(double width, double height) const {
  const std::string w = SvgNumber(width), h = SvgNumber(height);
  const SvgAttributes leading = {{"xmlns", "http://www.w3.org/2000/svg"},
                           {"width", w},
                           {"height", h},
                           {"viewBox", "0 0 " + w + " " + h},
                           {"font-family", kSvgFontFamily},
                           {"font-size", "11"}};
  std::string out = "<svg";
  for (const auto* list : {&leading, &root_}) {
    for (const auto& [key, value] : *list) out += " " + key + "=\"" + SvgEscape(value) + "\"";
  }
  return out + ">\n";
}

void SvgWriter::Element(std::string_view name, const SvgAttributes& leading, const SvgAttributes& attributes,
                        std::string_view text, Form form) {
  if (finished_) return;
  out_ += "<";
  out_ += name;
  for (const auto* list : {&leading, &attributes}) {
    for (const auto& [key, value] : *list) {
      out_ += " ";
      out_ += key;
      out_ += "=\"";
      out_ += SvgEscape(value);
      out_ += "\"";
    }
  }
  if (form == Form::kSelfClosing) {
    out_ += "/>\n";
    return;
  }
  if (form == Form::kOpen) {
    out_ += ">\n";
    return;
  }
  out_ += ">";
  out_ += SvgEscape(text);
  out_ += "</";
  out_ += name;
  out_ += ">\n";
}

void SvgWriter::Title(std::string_view text) { Element("title", {}, {}, text, Form::kWithText); }

void SvgWriter::Desc(std::string_view text) { Element("desc", {}, {}, text, Form::kWithText); }

void SvgWriter::Rect(double x, double y, double width, double height, const SvgAttributes& attributes) {
  Element("rect", {{"x", SvgNumber(x)}, {"y", SvgNumber(y)}, {"width", SvgNumber(width)}, {"height", SvgNumber(height)}},
          attributes, {}, Form::kSelfClosing);
}

void SvgWriter::Line(double x1, double y1, double x2, double y2, const SvgAttributes& attributes) {
  Element("line", {{"x1", SvgNumber(x1)}, {"y1", SvgNumber(y1)}, {"x2", SvgNumber(x2)}, {"y2", SvgNumber(y2)}},
          attributes, {}, Form::kSelfClosing);
}

void SvgWriter::Text(double x, double y, std::string_view text, const SvgAttributes& attributes) {
  Element("text", {{"x", SvgNumber(x)}, {"y", SvgNumber(y)}}, attributes, text, Form::kWithText);
}

void SvgWriter::OpenGroup(const SvgAttributes& attributes) {
  if (finished_) return;
  Element("g", {}, attributes, {}, Form::kOpen);
  ++open_groups_;
}

void SvgWriter::CloseGroup() {
  if (finished_ || open_groups_ == 0) return;
  out_ += "</g>\n";
  --open_groups_;
}

std::string SvgWriter::Finish() { return Finish(width_, height_); }

std::string SvgWriter::Finish(double width, double height) {
  if (!finished_) {
    while (open_groups_ > 0) CloseGroup();
    out_ = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + Root(width, height) + out_ + "</svg>\n";
    finished_ = true;
  }
  return out_;
}

}  // namespace packoracle
