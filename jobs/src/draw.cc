// The entry points of `packoracle draw` (draw.h): the options checked, the source read (draw_load.cc), the
// row printed (draw_text.cc) and drawn (draw_svg.cc).
#include "packoracle/jobs/draw.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "draw_row.h"

namespace packoracle::jobs {
namespace {

using namespace draw_internal;

void CheckOptions(const DrawOptions& o, const std::string& source) {
  if (int(!o.preset.empty()) + int(!o.policy_file.empty()) + int(o.policy.has_value()) > 1) {
    Unusable("give --preset or --policy, not both");
  }
  if (o.row < 0) Unusable(source + ": --row " + std::to_string(o.row) + " is out of range: rows count from 0");
}

// The row of `source` under the policy given (resolved before the source is opened: its errors come first).
DrawResult Render(fastcheck::RecordReader& source, const DrawOptions& o, const std::optional<Policy>& given,
                  bool with_svg) {
  const Loaded loaded = Load(source, o, given);
  const RowDrawing drawing = Analyse(loaded, o);
  std::ostringstream text;
  PrintRow(drawing, text);
  PrintDenominators(drawing, text);
  DrawResult result;
  result.text = text.str();
  if (with_svg) result.svg = DrawSvg(drawing);
  return result;
}

}  // namespace

std::string DefaultSvgPath(const std::string& file, std::int64_t row, std::optional<std::int64_t> step) {
  std::filesystem::path path(file);
  const std::string suffix = (step ? ".step" + std::to_string(*step) : std::string()) + ".row" + std::to_string(row) + ".svg";
  if (path.has_extension()) path.replace_extension();
  path += suffix;
  return path.string();
}

DrawResult Draw(const DrawOptions& o) {
  if (o.file.empty()) Unusable("no FILE given (a packed-batch JSON Lines file)");
  CheckOptions(o, o.file);
  const std::optional<Policy> given = GivenPolicy(o);
  fastcheck::OracleBatchReader source(o.file);
  DrawResult result = Render(source, o, given, o.write_svg);
  if (o.write_svg) result.svg_path = o.svg.empty() ? DefaultSvgPath(o.file, o.row, o.step) : o.svg;
  return result;
}

std::vector<DrawnRow> DrawRowsAt(const DrawOptions& o, const std::vector<RowAt>& rows) {
  if (o.file.empty()) Unusable("no FILE given (a packed-batch JSON Lines file)");
  CheckOptions(o, o.file);
  const std::optional<Policy> given = GivenPolicy(o);
  std::set<std::int64_t> lines;
  for (const RowAt& at : rows) lines.insert(at.line);
  fastcheck::OracleBatchReader source(o.file);
  Loaded loaded = Load(source, o, given, &lines);
  std::vector<DrawnRow> out;
  for (const RowAt& at : rows) {
    DrawnRow drawn;
    try {
      SelectRowAt(loaded, at.line, at.row);
      DrawOptions one = o;
      one.row = at.row;
      drawn.svg = DrawSvg(Analyse(loaded, one));
    } catch (const InputError& e) {
      drawn.problem = e.what();
    }
    out.push_back(std::move(drawn));
  }
  return out;
}

void WriteSvg(const DrawResult& result) {
  std::ofstream file(result.svg_path, std::ios::binary);
  if (!file || !(file << result.svg) || !file.flush()) Unusable(result.svg_path + ": cannot write the SVG");
}

DrawResult DrawReader(fastcheck::RecordReader& source, const DrawOptions& o) {
  CheckOptions(o, source.path());
  return Render(source, o, GivenPolicy(o), true);
}

}  // namespace packoracle::jobs
