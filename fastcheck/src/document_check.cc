// ValidateDocument's common answer decided faster (document_check.h).
#include "packoracle/fastcheck/document_check.h"

#include <algorithm>
#include <array>
#include <cstdint>

#include "packoracle/fastcheck/clones.h"

namespace packoracle::fastcheck {
namespace {

// True when some token equals `id`, in one pass with no branch per token (the comparison in integer operations:
// SSE2 has no 64-bit compare, and `==` would stay scalar).
PACKORACLE_CLONES bool AnyTokenIs(const Token* tokens, std::size_t n, Token id) {
  std::uint64_t hit = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const std::uint64_t x = static_cast<std::uint64_t>(tokens[k]) ^ static_cast<std::uint64_t>(id);
    hit |= ((x - 1) & ~x) >> 63;  // 1 exactly when x is 0
  }
  return hit != 0;
}

}  // namespace

bool MayRefuse(const DocumentRef& document, const Policy& policy, bool non_negative) {
  // A supervised list of another length, or a flag other than 0 or 1.
  if (document.supervised && document.supervised_size != document.size) return true;
  std::uint64_t bad_flag = 0;
  const std::size_t flags = document.supervised ? document.supervised_size : 0;
  for (std::size_t k = 0; k < flags; ++k) bad_flag |= static_cast<std::uint32_t>(document.supervised[k]) > 1u;
  if (bad_flag) return true;
  // The ids ValidateDocument's loop compares tokens with (an id the policy's boundary does not read stands in as
  // ignore_index), each distinct one once: where none occurs, it finds nothing.
  const Token eod =
      policy.boundary_source == BoundarySource::kEodCloses && policy.eos_id ? *policy.eos_id : policy.ignore_index;
  const Token bos =
      policy.boundary_source == BoundarySource::kBosOpens && policy.bos_id ? *policy.bos_id : policy.ignore_index;
  std::array<Token, 3> ids = {policy.ignore_index, eod, bos};
  std::sort(ids.begin(), ids.end());
  const auto end = std::unique(ids.begin(), ids.end());
  return std::any_of(ids.begin(), end, [&](Token id) {
    return !(id < 0 && non_negative) && AnyTokenIs(document.tokens, document.size, id);
  });
}

void ValidateDocumentFast(const DocumentRef& document, const Policy& policy, Delimiters delimiters, bool non_negative) {
  if (MayRefuse(document, policy, non_negative)) ValidateDocument(document, policy, delimiters);
}

EffectiveDocument EffectiveFast(const DocumentRef& document, const Policy& policy, Delimiters delimiters,
                                bool non_negative) {
  ValidateDocumentFast(document, policy, delimiters, non_negative);
  return EffectiveOfValid(document, policy, delimiters);
}

std::vector<EffectiveDocument> EffectiveFast(const std::vector<Document>& documents, const Policy& policy,
                                             Delimiters delimiters) {
  CheckUidsUnique(documents);
  std::vector<EffectiveDocument> out;
  out.reserve(documents.size());
  for (const Document& d : documents) out.push_back(EffectiveFast(DocumentRef::Of(d), policy, delimiters));
  return out;
}

}  // namespace packoracle::fastcheck
