// `packoracle lesson`, `packoracle presets` and `packoracle invariants` as library calls: the texts they print.
#pragma once

#include <string>

namespace packoracle::jobs {

// The lesson's worked example (reference/lesson.md): two documents in one row of 8 slots, drawn, with their
// targets and the three denominators.
std::string LessonText();

// The named presets: for each what it describes and the keys in which it differs from the reference policy;
// or every key of every preset as JSON (`presets --format json`). Both end with a newline.
std::string RenderPresetsText();
std::string RenderPresetsJson();

// The invariants, each stated once (properties/src/invariants.cc) with a common way to break it and the bundled
// candidate that does: as text for a terminal (`packoracle invariants`), or as the Markdown list the README
// holds between its invariants markers (`--format markdown`). Both end with a newline.
std::string RenderInvariantsText();
std::string RenderInvariantsMarkdown();
// Their names, comma-separated, in the same order ("shape, coverage, ..."): the foot of `packoracle --help`.
std::string InvariantNames();

}  // namespace packoracle::jobs
