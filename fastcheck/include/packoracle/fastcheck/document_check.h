// ValidateDocument (oracle/policy.h) decided faster where its answer is the common one, "nothing to refuse":
// one branch-free pass per id the oracle's loops compare tokens with, and one over the supervision flags, and
// the oracle's element-by-element walk only for a document where the pass finds one (it then names it). A
// reader that found no token below 0 in a document says so (`non_negative`: the Python binding's id scans of
// check_batch's documents), and the pass then looks for no negative id (ignore_index -100 in every preset).
// Pinned to ValidateDocument by fastcheck/test/document_check_test.cc (docs/fast_paths.md).
#pragma once

#include <vector>

#include "packoracle/oracle/document.h"
#include "packoracle/oracle/policy.h"

namespace packoracle::fastcheck {

// Whether ValidateDocument may refuse `document`: false only where it would not.
bool MayRefuse(const DocumentRef& document, const Policy& policy, bool non_negative = false);

// ValidateDocument where MayRefuse says it may refuse; nothing otherwise.
void ValidateDocumentFast(const DocumentRef& document, const Policy& policy, Delimiters delimiters = Delimiters::kAdd,
                          bool non_negative = false);

// Effective (oracle), its check by ValidateDocumentFast.
EffectiveDocument EffectiveFast(const DocumentRef& document, const Policy& policy,
                                Delimiters delimiters = Delimiters::kAdd, bool non_negative = false);
// The documents' (uids unique, as Effective's own overload requires).
std::vector<EffectiveDocument> EffectiveFast(const std::vector<Document>& documents, const Policy& policy,
                                             Delimiters delimiters = Delimiters::kAdd);

}  // namespace packoracle::fastcheck
