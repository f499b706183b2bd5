// `packoracle lesson` and `packoracle presets` as library calls: the texts they print.
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

}  // namespace packoracle::jobs
