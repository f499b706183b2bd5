// A table from uids to dense ids (0, 1, 2, ...) whose bytes its owner keeps: open addressing over 8-byte
// entries (a hash tag and an id; a uid's bytes are compared only where the tag matches), at most half full,
// so that a probe stays short and nothing is allocated per uid. A node-based map (std::unordered_map) cost an
// allocation per uid and three cache misses a look-up: 11% of verify on short documents, and the largest
// share of check_batch's allocations on a batch of short documents (bench/README.md, "A twelfth pair").
// UidInterner (jobs: every uid of an audit) and StepDocuments (a step's documents by uid) each own one.
#pragma once

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace packoracle::fastcheck {

// splitmix64's finaliser: every input bit moves every output bit.
inline std::uint64_t Mix64(std::uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Sorts `ids` by their uids (uid_of(id)) in std::string_view order: each uid's first 8 bytes as a big-endian
// integer decide most comparisons without a call to memcmp (a short-document step sorted hundreds of uids by
// memcmp twice per check_batch: 11% of it); equal prefixes compare the whole uids.
template <class Id, class UidOf>
void SortByUid(std::vector<Id>& ids, const UidOf& uid_of) {
  struct Keyed {
    std::uint64_t prefix;  // the first 8 bytes, big-endian, zero-filled: its order is the bytes' order
    Id id;
  };
  std::vector<Keyed> keyed;
  keyed.reserve(ids.size());
  for (const Id id : ids) {
    const std::string_view uid = uid_of(id);
    std::uint64_t prefix = 0;
    for (std::size_t k = 0; k < 8; ++k)
      prefix = (prefix << 8) | (k < uid.size() ? static_cast<unsigned char>(uid[k]) : 0u);
    keyed.push_back({prefix, id});
  }
  // Zero-filling makes "a" and "a\0" alike: equal prefixes fall back to the whole comparison.
  std::sort(keyed.begin(), keyed.end(), [&](const Keyed& a, const Keyed& b) {
    return a.prefix != b.prefix ? a.prefix < b.prefix : uid_of(a.id) < uid_of(b.id);
  });
  for (std::size_t k = 0; k < ids.size(); ++k) ids[k] = keyed[k].id;
}

class UidTable {
 public:
  static constexpr std::uint32_t kNone = 0xffffffffu;
  // The id of `uid`, kNone when it has none. `uid_of(id)`: the uid of an id in the table.
  template <class UidOf>
  std::uint32_t Find(std::string_view uid, const UidOf& uid_of) const {
    return table_.empty() ? kNone : table_[Place(uid, Hash(uid), uid_of)].id;
  }
  // The id held for `uid`, kNone where it has none yet: assign it to give one (after Reserve made room), or to
  // replace the one it has.
  template <class UidOf>
  std::uint32_t& IdOf(std::string_view uid, const UidOf& uid_of) {
    const std::uint32_t tag = Hash(uid);
    Entry& e = table_[Place(uid, tag, uid_of)];
    e.tag = tag;
    return e.id;
  }
  // Room for `ids` ids with the table at most half full (ids stop below 2^32, which a 32-bit tag places).
  void Reserve(std::size_t ids) {
    if (ids * 2 <= table_.size()) return;
    std::vector<Entry> old(std::max<std::size_t>(64, std::bit_ceil(ids * 2)));
    old.swap(table_);
    const std::size_t mask = table_.size() - 1;
    for (const Entry& e : old) {
      if (e.id == kNone) continue;
      std::size_t i = e.tag & mask;
      while (table_[i].id != kNone) i = (i + 1) & mask;
      table_[i] = e;
    }
  }
  // Forgets every id, keeping the storage.
  void Clear() { std::fill(table_.begin(), table_.end(), Entry{}); }

 private:
  struct Entry {
    std::uint32_t tag = 0;     // the uid's hash (its low bits place the entry)
    std::uint32_t id = kNone;  // kNone: empty
  };
  static std::uint32_t Hash(std::string_view uid) {
    return static_cast<std::uint32_t>(Mix64(std::hash<std::string_view>{}(uid)));
  }
  // The entry of `uid` (tag: Hash(uid)), or the empty one where it would go.
  template <class UidOf>
  std::size_t Place(std::string_view uid, std::uint32_t tag, const UidOf& uid_of) const {
    assert(!table_.empty());  // the mask below would wrap
    const std::size_t mask = table_.size() - 1;
    for (std::size_t i = tag & mask;; i = (i + 1) & mask) {
      const Entry& e = table_[i];
      if (e.id == kNone || (e.tag == tag && uid_of(e.id) == uid)) return i;
    }
  }
  std::vector<Entry> table_;  // a power of two in size
};

}  // namespace packoracle::fastcheck
