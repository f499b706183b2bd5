// Edits of a generated case that RapidCheck's shrinks cannot make: remove a run of documents or one (its neighbours
// keep their tokens), cut a document short, shorten the row, one micro-batch row, one rank, a document
// fully supervised; and, last, each document given its own token values ("distinct": document i holds
// i·10+1, i·10+2, ... as the lesson writes [11 12 13] [21 22 ...]) so that a person tells the documents apart in
// the drawn row. Each edit has a short name that a reproduce string's path carries after RapidCheck's shrink
// indices ("3.0.x2.t0,4.d"), so a replay applies the same edits in the same order.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "packoracle/properties/candidate.h"

namespace packoracle::internal {

// The edits worth trying on `request`, simplest result first.
std::vector<std::string> CaseEdits(const PackRequest& request);

// `request` with `edit` applied; nullopt when the edit does not apply (an unknown name, an index out of
// range, a form that changes nothing).
std::optional<PackRequest> ApplyCaseEdit(const PackRequest& request, const std::string& edit);

// Appends `edit` to a path of edits, folding a cut of a document into the cut just before it of the same
// document ("t0,900" after "t0,901" leaves "t0,900": cuts only shorten, so the last one says it all). The
// path stays replayable and short when a long document is cut down a token at a time.
void AppendCaseEdit(std::vector<std::string>& edits, const std::string& edit);

// The "distinct" edit's name.
inline constexpr const char* kDistinctTokens = "d";

}  // namespace packoracle::internal
