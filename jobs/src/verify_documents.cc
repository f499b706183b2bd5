// DocumentStore (verify_documents.h): documents packed into one allocation each, unpacked on demand.
#include "verify_documents.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "packoracle/oracle/error.h"

namespace packoracle::jobs::verify_internal {
namespace {

constexpr std::size_t Words(std::size_t bytes) { return (bytes + 7) / 8; }

bool FitsInt32(const std::vector<Token>& tokens) {
  return std::all_of(tokens.begin(), tokens.end(), [](Token t) {
    return t >= std::numeric_limits<std::int32_t>::min() && t <= std::numeric_limits<std::int32_t>::max();
  });
}

using fastcheck::Mix64;

}  // namespace

// Each token hashed on its own (its value, its supervision flag and its index: one multiply) and the hashes
// summed: no chain from one token to the next. A chained hash (two dependent Mix per token) was the largest
// symbol of check_batch under perf, 12% on 60,000 tokens (bench/README.md, "A fifth pair"). One loop for a
// Document and for a held slot (token(k), flag(k): its forms read back as Expand would give them).
template <class TokenAt, class FlagAt>
std::uint64_t HashContent(std::size_t n, TokenAt token, FlagAt flag) {
  constexpr std::uint64_t kIndex = 0x9e3779b97f4a7c15ULL, kFlag = 0xa0761d6478bd642fULL, kMul = 0xd6e8feb86659fd93ULL;
  std::uint64_t h = Mix64(n + kIndex), index = 0;
  for (std::size_t k = 0; k < n; ++k) {
    index += kIndex;  // k + 1 times kIndex: every position its own key
    const std::uint64_t f = static_cast<std::uint64_t>(static_cast<std::int64_t>(flag(k)));
    std::uint64_t x = (static_cast<std::uint64_t>(static_cast<std::int64_t>(token(k))) ^ index) + f * kFlag;
    x = (x ^ (x >> 32)) * kMul;
    h += x ^ (x >> 29);
  }
  return Mix64(h);
}

std::uint64_t ContentFingerprint(const DocumentRef& document) {
  const Token* tokens = document.tokens;
  const int* supervised = document.supervised;
  return HashContent(
      document.size, [&](std::size_t k) { return tokens[k]; },
      [&](std::size_t k) { return supervised ? supervised[k] : 1; });
}

std::uint32_t UidInterner::Find(std::string_view uid) const {
  return table_.Find(uid, [this](std::uint32_t id) { return UidOf(id); });
}

std::uint32_t UidInterner::Intern(std::string_view uid) {
  // Ids stop at 2^32 - 1 (kNone marks an empty entry).
  table_.Reserve(uids_.size() + 1);
  std::uint32_t& id = table_.IdOf(uid, [this](std::uint32_t k) { return UidOf(k); });
  if (id != kNone) return id;
  if (uids_.size() >= kNone) throw InputError("more than 2^32 - 1 doc_uids: more than verify follows in one audit");
  id = static_cast<std::uint32_t>(uids_.size());
  uids_.push_back(Keep(uid));
  return id;
}

std::string_view UidInterner::Keep(std::string_view uid) {
  if (uid.size() > block_left_) {
    const std::size_t size = std::max<std::size_t>(std::size_t{64} << 10, uid.size());
    blocks_.push_back(std::make_unique_for_overwrite<char[]>(size));  // not zeroed: 64 KiB per audit
    block_next_ = blocks_.back().get();
    block_left_ = size;
  }
  char* at = block_next_;
  if (!uid.empty()) std::memcpy(at, uid.data(), uid.size());
  block_next_ += uid.size();
  block_left_ -= uid.size();
  return {at, uid.size()};
}

void DocumentStore::Pack(const Document& document, Slot& h) {
  const auto& tokens = document.tokens;
  const auto& supervised = document.supervised;
  h.size = static_cast<std::uint32_t>(tokens.size());
  h.wide = !FitsInt32(tokens);
  const bool flags = std::all_of(supervised.begin(), supervised.end(), [](int s) { return s == 0 || s == 1; });
  const bool all_ones = std::all_of(supervised.begin(), supervised.end(), [](int s) { return s == 1; });
  h.supervised = supervised.empty() ? Supervised::kAbsent
                 : all_ones         ? Supervised::kAllOnes
                 : flags            ? Supervised::kBits
                                    : Supervised::kInts;
  const std::size_t token_words = h.wide ? tokens.size() : Words(tokens.size() * 4);
  const std::size_t flag_words = h.supervised == Supervised::kBits   ? (supervised.size() + 63) / 64
                                 : h.supervised == Supervised::kInts ? Words(supervised.size() * sizeof(int))
                                                                     : 0;
  h.data = std::make_unique<std::uint64_t[]>(std::max<std::size_t>(1, token_words + flag_words));
  if (h.wide) {
    std::memcpy(h.data.get(), tokens.data(), tokens.size() * sizeof(Token));
  } else {
    auto* narrow = reinterpret_cast<std::int32_t*>(h.data.get());
    for (std::size_t k = 0; k < tokens.size(); ++k) narrow[k] = static_cast<std::int32_t>(tokens[k]);
  }
  std::uint64_t* rest = h.data.get() + token_words;
  if (h.supervised == Supervised::kBits) {
    for (std::size_t k = 0; k < supervised.size(); ++k)
      if (supervised[k]) rest[k / 64] |= std::uint64_t{1} << (k % 64);
  } else if (h.supervised == Supervised::kInts) {
    std::memcpy(rest, supervised.data(), supervised.size() * sizeof(int));
  }
}

DocumentStore::PutResult DocumentStore::Put(std::uint32_t id, const Document& document) {
  return Hold(id, &document, DocumentRef::Of(document));
}

DocumentStore::PutResult DocumentStore::Borrow(std::uint32_t id, const DocumentRef& document) {
  return Hold(id, nullptr, document);
}

void DocumentStore::Reserve(std::size_t documents) {
  uids_.Reserve(documents);
  live_.reserve(uids_.size() + documents);
  fingerprints_.reserve(uids_.size() + documents);
  slots_.reserve(slots_.size() + documents);
}

// `document` given: Put (packed into the slot); null: Borrow of `ref`.
DocumentStore::PutResult DocumentStore::Hold(std::uint32_t id, const Document* document, const DocumentRef& ref) {
  if (live_.size() <= id) {
    const std::size_t size = std::max<std::size_t>(uids_.size(), std::size_t{id} + 1);
    live_.resize(size, UidInterner::kNone);
    fingerprints_.resize(size);
  }
  if (Held(id)) return HeldFingerprint(id) == ContentFingerprint(ref) ? PutResult::kSame : PutResult::kDiffers;
  if (ref.size > std::numeric_limits<std::uint32_t>::max()) {  // before a slot is taken
    throw InputError("document '" + std::string(ref.uid) + "': " + std::to_string(ref.size) +
                     " tokens, more than verify holds in one document (2^32 - 1)");
  }
  std::uint32_t slot = static_cast<std::uint32_t>(slots_.size());
  if (free_slots_.empty()) {
    slots_.emplace_back();
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
    slots_[slot] = Slot{};
  }
  if (!document) {
    Slot& h = slots_[slot];
    h.is_borrowed = true;
    h.borrowed = ref;
    h.size = static_cast<std::uint32_t>(ref.size);
    h.wide = true;
    // Its flags are read where they are; only kInts is read of a borrowed slot's form: as Pack marks it, a
    // flag neither 0 nor 1, which Effective refuses (View: false).
    const int* flags = ref.supervised;
    const bool flags_ok = std::all_of(flags, flags + (flags ? ref.supervised_size : 0),
                                      [](int f) { return f == 0 || f == 1; });
    h.supervised = flags_ok ? Supervised::kAbsent : Supervised::kInts;
  } else {
    Pack(*document, slots_[slot]);  // its fingerprint waits until it is compared or retired (HeldFingerprint)
  }
  live_[id] = slot;
  tokens_held_ += slots_[slot].size;
  return PutResult::kNew;
}

std::string DocumentStore::Difference(const Document& document) const {
  Document held;
  if (!Expand(document.uid, held)) return "";
  if (held.tokens.size() != document.tokens.size()) {
    return std::to_string(document.tokens.size()) + " tokens where the earlier record has " +
           std::to_string(held.tokens.size());
  }
  for (std::size_t k = 0; k < held.tokens.size(); ++k) {
    if (held.tokens[k] != document.tokens[k]) {
      return "token " + std::to_string(k) + " is " + std::to_string(document.tokens[k]) +
             " where the earlier record has " + std::to_string(held.tokens[k]);
    }
    const int was = held.supervised.empty() ? 1 : held.supervised[k];
    const int is = document.supervised.empty() ? 1 : document.supervised[k];
    if (was != is) {
      return "supervised[" + std::to_string(k) + "] is " + std::to_string(is) + " where the earlier record has " +
             std::to_string(was);
    }
  }
  return "";
}

std::uint64_t DocumentStore::Fingerprint(std::string_view uid) {
  const std::uint32_t id = uids_.Find(uid);
  return Held(id) ? HeldFingerprint(id) : 0;
}

// Computed from the packed slot the first time it is asked for: a document checked once and never seen again
// before the audit ends (check_batch's) is never fingerprinted.
std::uint64_t DocumentStore::HeldFingerprint(std::uint32_t id) {
  Slot& h = slots_[live_[id]];
  if (h.fingerprinted) return fingerprints_[id];
  if (h.is_borrowed) {
    fingerprints_[id] = ContentFingerprint(h.borrowed);
    h.fingerprinted = true;
    return fingerprints_[id];
  }
  const std::uint64_t* rest = h.data.get() + (h.wide ? h.size : Words(std::size_t{h.size} * 4));
  const auto* wide = reinterpret_cast<const Token*>(h.data.get());
  const auto* narrow = reinterpret_cast<const std::int32_t*>(h.data.get());
  const auto* ints = reinterpret_cast<const int*>(rest);
  auto fingerprint = [&](auto token) {
    switch (h.supervised) {
      case Supervised::kBits:
        return HashContent(h.size, token, [&](std::size_t k) { return static_cast<int>((rest[k / 64] >> (k % 64)) & 1); });
      case Supervised::kInts: return HashContent(h.size, token, [&](std::size_t k) { return ints[k]; });
      default: return HashContent(h.size, token, [](std::size_t) { return 1; });  // absent or all ones
    }
  };
  fingerprints_[id] = h.wide ? fingerprint([&](std::size_t k) { return wide[k]; })
                             : fingerprint([&](std::size_t k) { return narrow[k]; });
  h.fingerprinted = true;
  return fingerprints_[id];
}

bool DocumentStore::Expand(std::string_view uid, Document& out) const {
  const std::uint32_t id = uids_.Find(uid);
  if (!Held(id)) return false;
  const Slot& h = slots_[live_[id]];
  out.uid.assign(uids_.Uid(id));
  if (h.is_borrowed) {
    out.tokens.assign(h.borrowed.tokens, h.borrowed.tokens + h.borrowed.size);
    if (h.borrowed.supervised) out.supervised.assign(h.borrowed.supervised, h.borrowed.supervised + h.borrowed.supervised_size);
    else out.supervised.clear();
    return true;
  }
  out.tokens.resize(h.size);
  if (h.wide) {
    std::memcpy(out.tokens.data(), h.data.get(), h.size * sizeof(Token));
  } else {
    const auto* narrow = reinterpret_cast<const std::int32_t*>(h.data.get());
    std::copy(narrow, narrow + h.size, out.tokens.begin());
  }
  const std::uint64_t* rest = h.data.get() + (h.wide ? h.size : Words(std::size_t{h.size} * 4));
  switch (h.supervised) {
    case Supervised::kAbsent: out.supervised.clear(); break;
    case Supervised::kAllOnes: out.supervised.assign(h.size, 1); break;
    case Supervised::kBits:
      out.supervised.resize(h.size);
      for (std::size_t k = 0; k < h.size; ++k) out.supervised[k] = static_cast<int>((rest[k / 64] >> (k % 64)) & 1);
      break;
    case Supervised::kInts:
      out.supervised.resize(h.size);
      std::memcpy(out.supervised.data(), rest, h.size * sizeof(int));
      break;
  }
  return true;
}

bool DocumentStore::View(std::uint32_t id, fastcheck::DocumentView& view) const {
  if (!Held(id)) return false;
  const Slot& h = slots_[live_[id]];
  if (h.supervised == Supervised::kInts || !h.usable) return false;
  view = {};
  view.uid = uids_.Uid(id);
  view.size = h.size;
  if (h.is_borrowed) {  // its flags as given (none: all ones); validated when held (MarkUnusable otherwise)
    view.wide = h.borrowed.tokens;
    view.ints = h.borrowed.supervised;
    return true;
  }
  if (h.wide) view.wide = reinterpret_cast<const Token*>(h.data.get());
  else view.narrow = reinterpret_cast<const std::int32_t*>(h.data.get());
  if (h.supervised == Supervised::kBits) view.bits = h.data.get() + (h.wide ? h.size : Words(std::size_t{h.size} * 4));
  return true;
}

void DocumentStore::Erase(std::string_view uid) {
  const std::uint32_t id = uids_.Find(uid);
  if (!Held(id)) return;
  Retire(id);
  live_[id] = UidInterner::kNone;
}

void DocumentStore::Retire(std::uint32_t id) {
  if (!Held(id)) return;
  HeldFingerprint(id);  // kept for Retired
  Slot& slot = slots_[live_[id]];
  tokens_held_ -= slot.size;
  slot.data.reset();
  slot.is_borrowed = false;
  slot.borrowed = {};
  free_slots_.push_back(live_[id]);
  live_[id] = kRetired;
}

std::vector<std::uint32_t> DocumentStore::HeldInUidOrder() const {
  std::vector<std::uint32_t> ids;
  for (std::uint32_t id = 0; id < live_.size(); ++id)
    if (Held(id)) ids.push_back(id);
  fastcheck::SortByUid(ids, [this](std::uint32_t id) { return uids_.Uid(id); });
  return ids;
}

}  // namespace packoracle::jobs::verify_internal
