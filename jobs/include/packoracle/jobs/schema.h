// `packoracle schema`: the formats' tables as JSON, read off their one statement in C++ (the policy keys'
// descriptor table, oracle/src/policy.cc; the presets; the row fields, properties/row_fields.h; the denominator
// scopes, properties/candidate.h).
//
// python/src/packoracle/dump/schema.json is this output, committed: the dump writer (packoracle.dump, which runs
// without the extension) and packoracle._batch read it. ctest `schema.committed_copy_is_current` fails when the
// two differ; `cli/test/generated_file.py --write` writes it again (the test's command says how).
#pragma once

#include <string>

namespace packoracle::jobs {

// {"policy_keys": [{"key", "values", "open", "takes", "after_version_one", "default"}, ...],
//  "presets": {name: the resolved policy}, "row_fields": [{"name", "shape", "value", "required", "aliases"}, ...],
//  "key_side_fields": {name: query name}, "derived_fields": [...], "denominator_scopes": [...]}, indented, ending
// with a newline.
std::string RenderSchemaJson();

}  // namespace packoracle::jobs
