// packoracle draw: the command line of jobs::Draw.
#include "draw_command.h"

#include <iostream>
#include <memory>

#include "packoracle/jobs/draw.h"
#include "packoracle/oracle.h"

namespace packoracle::cli {
namespace {

int RunDraw(const jobs::DrawOptions& o) {
  try {
    const jobs::DrawResult result = jobs::Draw(o);
    std::cout << result.text;  // the drawing first: it is shown even when the SVG cannot be written
    if (o.write_svg) {
      jobs::WriteSvg(result);
      std::cout << "\n  SVG: " << result.svg_path << "\n";
    }
    return result.exit_code;
  } catch (const InputError& e) {
    std::cerr << "packoracle draw: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    // Anything else a malformed file can provoke (an allocation too large, a filesystem error) is still
    // unusable input, never a crash.
    std::cerr << "packoracle draw: " << o.file << ": " << e.what() << "\n";
    return 2;
  }
}

}  // namespace

Runner AddDrawCommand(CLI::App& app) {
  struct State {
    jobs::DrawOptions options;
    std::int64_t step = 0;
    CLI::Option* step_option = nullptr;
    bool no_svg = false;
  };
  auto s = std::make_shared<State>();
  auto* draw = app.add_subcommand(
      "draw",
      "Draw one row of a packed-batch file as the lesson does: documents, tokens, positions, the targets its labels "
      "decode to against the oracle's, the attention grid (the oracle's rule, ! where the row's boundary encoding "
      "implies otherwise) and the denominators; on the terminal and as an SVG file (lanes per slot, red where the row "
      "disagrees with the policy; rows over 64 slots as a window around the first disagreement under an overview) "
      "(exit 0 drawn, 2 unusable input)");
  draw->add_option("FILE", s->options.file, "a packed-batch JSON Lines file (DESIGN §5)")->required();
  draw->add_option("--row", s->options.row, "the row to draw: rows of the file in order, micro-batches flattened")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  s->step_option = draw->add_option("--step", s->step, "count only the rows of this step's micro-batches");
  draw->add_option("--svg", s->options.svg, "where to write the SVG (default: FILE with .row<R>.svg for its extension)");
  draw->add_flag("--no-svg", s->no_svg, "draw on the terminal only");
  auto* preset = draw->add_option("--preset", s->options.preset, "read the row under this preset, not the header's policy");
  auto* policy = draw->add_option("--policy", s->options.policy_file,
                                  "read the row under the policy in this JSON file: {\"preset\":..., key: value, ...}");
  preset->excludes(policy);
  return [s, draw] {
    if (!*draw) return -1;  // not the subcommand given (command.h)
    jobs::DrawOptions options = s->options;
    if (s->step_option->count() > 0) options.step = s->step;
    options.write_svg = !s->no_svg;
    return RunDraw(options);
  };
}

}  // namespace packoracle::cli
