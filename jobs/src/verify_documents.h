// The documents an audit holds while pieces of them may still come (verify_internal.h), in about the size of
// their tokens: a dump may write every document record before the first micro-batch (DESIGN §5 only asks
// that documents precede the micro-batches using them), and then the whole dataset is held at once.
//
// A held document is one allocation: its tokens as int32 when every token fits (int64 otherwise), then its
// `supervised` flags as bits (nothing when absent or all ones, ints when a value is neither 0 nor 1, so that
// the oracle still sees and reports it). Expand gives the Document back exactly as it was read.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "packoracle/fastcheck/step_check.h"
#include "packoracle/fastcheck/uid_table.h"
#include "packoracle/oracle/document.h"

namespace packoracle::jobs::verify_internal {

// A 64-bit fingerprint of a document's content: its tokens and its supervised flags, absent flags read as
// all ones (as Effective reads them). Two records of one doc_uid must agree on it.
std::uint64_t ContentFingerprint(const DocumentRef& document);
inline std::uint64_t ContentFingerprint(const Document& document) { return ContentFingerprint(DocumentRef::Of(document)); }

// Every uid an audit meets, given a dense id (0, 1, 2, ...) the first time, so that what verify keeps per
// document lives in flat arrays indexed by id: one hash look-up where a record or span names a uid, none
// after (a short-document dump spent more time finding its documents again by uid than parsing them).
//
// The table (fastcheck::UidTable) is tried after a hint (Find). The uids' bytes are kept in blocks that never
// move, so that Uid's views stay valid for good.
class UidInterner {
 public:
  static constexpr std::uint32_t kNone = 0xffffffffu;
  // The id of `uid`, given now if it has none.
  std::uint32_t Intern(std::string_view uid);
  // The id of `uid`, kNone when it has none.
  std::uint32_t Find(std::string_view uid) const;
  // The same, `hint` tried first: a dump names its documents in about the order it wrote them, so the id after
  // the last one found is most often the next one, found without hashing (the table is megabytes, each
  // look-up in it a cache miss).
  std::uint32_t Find(std::string_view uid, std::uint32_t hint) const {
    return hint < uids_.size() && uids_[hint] == uid ? hint : Find(uid);
  }
  std::uint32_t Intern(std::string_view uid, std::uint32_t hint) {
    return hint < uids_.size() && uids_[hint] == uid ? hint : Intern(uid);
  }
  std::string_view Uid(std::uint32_t id) const { return uids_[id]; }
  std::size_t size() const { return uids_.size(); }
  void Reserve(std::size_t more) {
    table_.Reserve(uids_.size() + more);
    uids_.reserve(uids_.size() + more);
  }

 private:
  std::string_view UidOf(std::uint32_t id) const { return uids_[id]; }
  std::string_view Keep(std::string_view uid);  // the bytes copied into blocks_
  fastcheck::UidTable table_;
  std::vector<std::string_view> uids_;          // by id, into blocks_
  std::vector<std::unique_ptr<char[]>> blocks_;
  std::size_t block_left_ = 0;
  char* block_next_ = nullptr;
};

// The documents held, by uid id (UidInterner). A document is held, then retired once its pieces tile it: its
// tokens go, its content fingerprint stays (a later record of the uid is still compared with what was checked).
class DocumentStore {
 public:
  // Holds `document` (copied: the caller's storage stays its own). A repeated uid must repeat the content
  // (a multi-rank dump writes a document on every rank that packs a piece of it): kSame then changes nothing;
  // kDiffers keeps the held one and leaves the caller to refuse the dump (two documents under one doc_uid).
  // The uid must not be retired (Retired).
  enum class PutResult { kNew, kSame, kDiffers };
  PutResult Put(const Document& document) { return Put(Id(document.uid), document); }
  PutResult Put(std::uint32_t id, const Document& document);
  // Put without the copy: the store views `document` where it lies, which the caller keeps alive and unchanged
  // for the store's life (check_batch's documents: the caller's arrays, for the one call that audits them).
  PutResult Borrow(std::uint32_t id, const DocumentRef& document);
  // Marks a held document as one the fast verifier must not see (View: false), when Effective refuses it:
  // checked once, when it is put, not on every step that names it.
  void MarkUnusable(std::uint32_t id) { slots_[live_[id]].usable = false; }
  // Room for `documents` more uids and held documents (a caller that knows how many it will put).
  void Reserve(std::size_t documents);
  // The id of a uid (given now if it has none) and the interned uids.
  std::uint32_t Id(std::string_view uid) { return uids_.Intern(uid); }
  std::uint32_t Id(std::string_view uid, std::uint32_t hint) { return uids_.Intern(uid, hint); }
  const UidInterner& uids() const { return uids_; }
  // What differs between `document` and the held document of its uid ("" when nothing does, or not held).
  std::string Difference(const Document& document) const;
  // The held document's content fingerprint (ContentFingerprint); 0 when it is not held.
  std::uint64_t Fingerprint(std::string_view uid);
  bool Contains(std::string_view uid) const { return Held(uids_.Find(uid)); }
  bool Held(std::uint32_t id) const { return id < live_.size() && live_[id] < kRetired; }
  // The held document's token count; -1 when it is not held.
  std::int64_t Size(std::string_view uid) const { return Size(uids_.Find(uid)); }
  std::int64_t Size(std::uint32_t id) const {
    return Held(id) ? static_cast<std::int64_t>(slots_[live_[id]].size) : -1;
  }
  // The held document into `out` (its storage reused), exactly as Put received it; false when not held.
  bool Expand(std::string_view uid, Document& out) const;
  // The held document as the fast verifier reads it, without unpacking (its supervised flags as Effective
  // makes them: all ones when absent); valid until the uid is erased or retired. False when not held, when
  // a supervised value is neither 0 nor 1 (Effective refuses it), or when marked unusable.
  bool View(std::string_view uid, fastcheck::DocumentView& view) const { return View(uids_.Find(uid), view); }
  bool View(std::uint32_t id, fastcheck::DocumentView& view) const;
  void Erase(std::string_view uid);
  // Lets the held document `id` go, keeping its fingerprint for Retired.
  void Retire(std::uint32_t id);
  // A retired document's content fingerprint, nullopt when it is not retired.
  std::optional<std::uint64_t> Retired(std::uint32_t id) const {
    if (id >= live_.size() || live_[id] != kRetired) return std::nullopt;
    return fingerprints_[id];
  }
  std::int64_t tokens_held() const { return tokens_held_; }
  // The ids of every held document, in uid order (one sort of their uids).
  std::vector<std::uint32_t> HeldInUidOrder() const;

 private:
  enum class Supervised : std::uint8_t { kAbsent, kAllOnes, kBits, kInts };
  struct Slot {
    std::unique_ptr<std::uint64_t[]> data;  // tokens, then the supervised flags (8-byte aligned)
    std::uint32_t size = 0;                 // tokens
    bool wide = false;                      // tokens as int64 (else int32)
    bool usable = true;                     // not marked unusable
    bool fingerprinted = false;             // fingerprints_[id] holds its ContentFingerprint
    bool is_borrowed = false;               // Borrow: `borrowed` views the caller's document (data is then empty)
    DocumentRef borrowed;
    Supervised supervised = Supervised::kAbsent;
  };
  static void Pack(const Document& document, Slot& slot);
  PutResult Hold(std::uint32_t id, const Document* document, const DocumentRef& ref);
  std::uint64_t HeldFingerprint(std::uint32_t id);
  // What is kept per id is small (12 bytes), since it grows with every document of the dump; a held
  // document's Slot is in slots_, reused once it is let go.
  static constexpr std::uint32_t kRetired = UidInterner::kNone - 1;
  UidInterner uids_;
  std::vector<std::uint64_t> fingerprints_;  // by id: ContentFingerprint of the retired (or fingerprinted held) one
  std::vector<std::uint32_t> live_;          // by id: its slot in slots_; kRetired; kNone: never held (or erased)
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_slots_;
  std::int64_t tokens_held_ = 0;
};

}  // namespace packoracle::jobs::verify_internal
