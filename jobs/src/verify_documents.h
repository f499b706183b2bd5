// The documents an audit holds while pieces of them may still come (verify_internal.h), in about the size of
// their tokens: a dump may write every document record before the first micro-batch (DESIGN §5 only asks
// that documents precede the micro-batches using them), and then the whole dataset is held at once.
//
// A held document is one allocation: its tokens as int32 when every token fits (int64 otherwise), then its
// `supervised` flags as bits (nothing when absent or all ones, ints when a value is neither 0 nor 1, so that
// the oracle still sees and reports it). Expand gives the Document back exactly as it was read.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "packoracle/fastcheck/step_check.h"
#include "packoracle/oracle/document.h"

namespace packoracle::jobs::verify_internal {

// A 64-bit fingerprint of a document's content: its tokens and its supervised flags, absent flags read as
// all ones (as Effective reads them). Two records of one doc_uid must agree on it.
std::uint64_t ContentFingerprint(const Document& document);

class DocumentStore {
 public:
  // Holds `document` (copied: the caller's storage stays its own). A repeated uid must repeat the content
  // (a multi-rank dump writes a document on every rank that packs a piece of it): kSame then changes nothing;
  // kDiffers keeps the held one and leaves the caller to refuse the dump (two documents under one doc_uid).
  enum class PutResult { kNew, kSame, kDiffers };
  PutResult Put(const Document& document);
  // What differs between `document` and the held document of its uid ("" when nothing does, or not held).
  std::string Difference(const Document& document) const;
  // The held document's content fingerprint (ContentFingerprint); 0 when it is not held.
  std::uint64_t Fingerprint(std::string_view uid) const;
  bool Contains(std::string_view uid) const { return held_.find(uid) != held_.end(); }
  // The held document's token count; -1 when it is not held.
  std::int64_t Size(std::string_view uid) const;
  // The held document into `out` (its storage reused), exactly as Put received it; false when not held.
  bool Expand(std::string_view uid, Document& out) const;
  // The held document as the fast verifier reads it, without unpacking (its supervised flags as Effective
  // makes them: all ones when absent); valid until the uid is put again or erased. False when not held, or
  // when a supervised value is neither 0 nor 1 (Effective refuses it).
  bool View(std::string_view uid, fastcheck::DocumentView& view) const;
  void Erase(const std::string& uid);
  std::int64_t tokens_held() const { return tokens_held_; }
  // Every held document in uid order: fn(uid, token count).
  template <class Fn>
  void ForEach(Fn&& fn) const {
    for (const auto& [uid, held] : held_) fn(uid, static_cast<std::int64_t>(held.size));
  }

 private:
  enum class Supervised : std::uint8_t { kAbsent, kAllOnes, kBits, kInts };
  struct Held {
    std::unique_ptr<std::uint64_t[]> data;  // tokens, then the supervised flags (8-byte aligned)
    std::uint32_t size = 0;                 // tokens
    bool wide = false;                      // tokens as int64 (else int32)
    Supervised supervised = Supervised::kAbsent;
    std::uint64_t fingerprint = 0;          // ContentFingerprint of what was put
  };
  static Held Pack(const Document& document);
  std::map<std::string, Held, std::less<>> held_;  // ordered: the end-of-dump findings go in uid order
  std::int64_t tokens_held_ = 0;
};

}  // namespace packoracle::jobs::verify_internal
