// DocumentStore (jobs/src/verify_documents.h): what goes in comes out exactly, whatever form it is packed in.
#include <gtest/gtest.h>

#include <limits>

#include "../src/verify_documents.h"
#include "packoracle/oracle/policy.h"

namespace packoracle::jobs::verify_internal {
namespace {

Document Doc(std::string uid, std::vector<Token> tokens, std::vector<int> supervised) {
  return Document{std::move(uid), std::move(tokens), std::move(supervised)};
}

void ExpectRoundTrip(const Document& d) {
  DocumentStore store;
  EXPECT_EQ(store.Put(d), DocumentStore::PutResult::kNew);
  Document out{"stale", {9, 9, 9, 9, 9, 9, 9, 9, 9}, {1, 0, 1}};  // storage reused: nothing of it may remain
  ASSERT_TRUE(store.Expand(d.uid, out));
  EXPECT_EQ(out.uid, d.uid);
  EXPECT_EQ(out.tokens, d.tokens);
  EXPECT_EQ(out.supervised, d.supervised);
  EXPECT_EQ(store.Size(d.uid), static_cast<std::int64_t>(d.tokens.size()));
  EXPECT_EQ(store.tokens_held(), static_cast<std::int64_t>(d.tokens.size()));
}

TEST(DocumentStore, GivesBackEveryFormExactly) {
  const Token big = std::numeric_limits<std::int64_t>::max(), small = std::numeric_limits<std::int32_t>::min();
  ExpectRoundTrip(Doc("narrow", {1, 2, 3, small, std::numeric_limits<std::int32_t>::max()}, {}));
  ExpectRoundTrip(Doc("wide", {1, big, -big, 4}, {}));
  ExpectRoundTrip(Doc("all-ones", {1, 2, 3}, {1, 1, 1}));  // given: stays given (not made absent)
  std::vector<Token> tokens(130, 7);
  std::vector<int> bits(130, 1);
  for (std::size_t k = 0; k < bits.size(); k += 3) bits[k] = 0;  // across 64-bit words
  ExpectRoundTrip(Doc("bits", tokens, bits));
  ExpectRoundTrip(Doc("not-flags", {1, 2, 3}, {1, 2, -1}));  // kept as given, for the oracle to report
  ExpectRoundTrip(Doc("empty", {}, {}));
}

// What the fast verifier reads of a held document (View) is what Effective makes of it: every token and
// every supervised flag (all ones when absent); a document Effective refuses (a flag neither 0 nor 1) has none.
void ExpectViewIsEffective(const Document& d) {
  DocumentStore store;
  store.Put(d);
  fastcheck::DocumentView view;
  ASSERT_TRUE(store.View(d.uid, view));
  const EffectiveDocument want = Effective(d, Policy{}, Delimiters::kIncluded);
  EXPECT_EQ(view.uid, d.uid);
  ASSERT_EQ(view.size, want.size());
  for (std::int64_t k = 0; k < view.size; ++k) {
    EXPECT_EQ(view.token(k), want.tokens[static_cast<std::size_t>(k)]) << d.uid << " " << k;
    EXPECT_EQ(view.supervised(k), want.supervised[static_cast<std::size_t>(k)]) << d.uid << " " << k;
  }
}

TEST(DocumentStore, ViewsEveryFormAsEffectiveMakesIt) {
  const Token big = std::numeric_limits<std::int64_t>::max() - 1, small = std::numeric_limits<std::int32_t>::min();
  ExpectViewIsEffective(Doc("narrow", {1, 2, 3, small, std::numeric_limits<std::int32_t>::max()}, {}));
  ExpectViewIsEffective(Doc("wide", {1, big, -big, 4}, {0, 1, 1, 0}));
  ExpectViewIsEffective(Doc("all-ones", {1, 2, 3}, {1, 1, 1}));
  std::vector<Token> tokens(130, 7);
  std::vector<int> bits(130, 1);
  for (std::size_t k = 0; k < bits.size(); k += 3) bits[k] = 0;  // across 64-bit words
  ExpectViewIsEffective(Doc("bits", tokens, bits));
  ExpectViewIsEffective(Doc("empty", {}, {}));
  DocumentStore store;
  store.Put(Doc("not-flags", {1, 2, 3}, {1, 2, -1}));
  fastcheck::DocumentView view;
  EXPECT_FALSE(store.View("not-flags", view));
  EXPECT_FALSE(store.View("absent", view));
}

TEST(DocumentStore, ARepeatedUidMustRepeatItsContentAndErasedOnesAreGone) {
  using R = DocumentStore::PutResult;
  DocumentStore store;
  EXPECT_EQ(store.Put(Doc("b", {1, 2}, {})), R::kNew);
  EXPECT_EQ(store.Put(Doc("a", {1, 2, 3}, {})), R::kNew);
  EXPECT_EQ(store.Put(Doc("b", {1, 2}, {1, 1})), R::kSame);  // absent flags are all ones
  EXPECT_EQ(store.Difference(Doc("b", {1, 2}, {1, 1})), "");
  EXPECT_EQ(store.Put(Doc("b", {5, 6, 7, 8}, {0, 1, 1, 1})), R::kDiffers);
  EXPECT_EQ(store.Difference(Doc("b", {5, 6, 7, 8}, {})), "4 tokens where the earlier record has 2");
  EXPECT_EQ(store.Put(Doc("b", {1, 3}, {})), R::kDiffers);
  EXPECT_EQ(store.Difference(Doc("b", {1, 3}, {})), "token 1 is 3 where the earlier record has 2");
  EXPECT_EQ(store.Put(Doc("b", {1, 2}, {1, 0})), R::kDiffers);
  EXPECT_EQ(store.Difference(Doc("b", {1, 2}, {1, 0})), "supervised[1] is 0 where the earlier record has 1");
  EXPECT_EQ(store.tokens_held(), 5);
  std::vector<std::string> order;
  for (const auto id : store.HeldInUidOrder())
    order.push_back(std::string(store.uids().Uid(id)) + ":" + std::to_string(store.Size(id)));
  EXPECT_EQ(order, (std::vector<std::string>{"a:3", "b:2"}));  // uid order, the first content kept
  EXPECT_EQ(store.Fingerprint("b"), ContentFingerprint(Doc("b", {1, 2}, {})));
  EXPECT_NE(store.Fingerprint("b"), ContentFingerprint(Doc("b", {2, 1}, {})));
  // absent flags are all ones; a flag, a token, an index or the length moves it
  EXPECT_EQ(ContentFingerprint(Doc("b", {1, 2}, {})), ContentFingerprint(Doc("b", {1, 2}, {1, 1})));
  EXPECT_NE(ContentFingerprint(Doc("b", {1, 2}, {1, 0})), ContentFingerprint(Doc("b", {1, 2}, {1, 1})));
  EXPECT_NE(ContentFingerprint(Doc("b", {1, 2}, {})), ContentFingerprint(Doc("b", {1, 3}, {})));
  EXPECT_NE(ContentFingerprint(Doc("b", {1, 2}, {})), ContentFingerprint(Doc("b", {1, 2, 0}, {})));
  EXPECT_NE(ContentFingerprint(Doc("b", {0, 0, 0, 1}, {})), ContentFingerprint(Doc("b", {0, 0, 1, 0}, {})));
  store.Erase("a");
  Document out;
  EXPECT_FALSE(store.Expand("a", out));
  EXPECT_EQ(store.Size("a"), -1);
  EXPECT_FALSE(store.Contains("a"));
  EXPECT_EQ(store.Fingerprint("a"), 0u);
  EXPECT_EQ(store.tokens_held(), 2);
}

TEST(UidInterner, GivesEachUidOneDenseIdForGood) {
  UidInterner uids;
  EXPECT_EQ(uids.Find("b"), UidInterner::kNone);
  EXPECT_EQ(uids.Intern("b"), 0u);
  EXPECT_EQ(uids.Intern("a"), 1u);
  EXPECT_EQ(uids.Intern("b"), 0u);  // again: the same id, no new one
  EXPECT_EQ(uids.size(), 2u);
  EXPECT_EQ(uids.Find("a"), 1u);
  EXPECT_EQ(uids.Find("c"), UidInterner::kNone);
  EXPECT_EQ(uids.Find(""), UidInterner::kNone);
  EXPECT_EQ(uids.Intern(""), 2u);  // the empty uid is a uid like any other
  // The interner keeps its own copy: the caller's buffer may change after.
  std::string buffer = "a-long-uid-beyond-the-small-string-buffer";
  const std::uint32_t id = uids.Intern(buffer);
  buffer[0] = 'X';
  EXPECT_EQ(uids.Uid(id), "a-long-uid-beyond-the-small-string-buffer");
  EXPECT_EQ(uids.Find(buffer), UidInterner::kNone);
  // Many uids (the table rehashes many times): every id dense and stable, every uid found again.
  for (int k = 0; k < 20000; ++k) EXPECT_EQ(uids.Intern("d" + std::to_string(k)), 4u + static_cast<std::uint32_t>(k));
  for (int k = 0; k < 20000; k += 97) {
    EXPECT_EQ(uids.Find("d" + std::to_string(k)), 4u + static_cast<std::uint32_t>(k));
    EXPECT_EQ(uids.Uid(4u + static_cast<std::uint32_t>(k)), "d" + std::to_string(k));
  }
  EXPECT_EQ(uids.Uid(0), "b");
  EXPECT_EQ(uids.Uid(1), "a");
}

// Borrow: the document viewed where the caller holds it reads as the same document put (copied and packed):
// the same view slot by slot, the same expansion, fingerprint and retirement; a flag neither 0 nor 1 is not
// viewed, as a put one is not.
TEST(DocumentStore, ABorrowedDocumentReadsAsAPutOne) {
  std::vector<Token> tokens(130, 7);
  std::vector<int> bits(130, 1);
  for (std::size_t k = 0; k < bits.size(); k += 3) bits[k] = 0;
  const std::vector<Document> documents = {
      Doc("narrow", {1, 2, 3, std::numeric_limits<std::int32_t>::min()}, {}),
      Doc("wide", {1, std::numeric_limits<std::int64_t>::max(), 4}, {}), Doc("all-ones", {1, 2, 3}, {1, 1, 1}),
      Doc("bits", tokens, bits), Doc("not-flags", {1, 2, 3}, {1, 2, -1}), Doc("empty", {}, {})};
  for (const Document& d : documents) {
    SCOPED_TRACE(d.uid);
    DocumentStore put, borrowed;
    const std::uint32_t a = put.Id(d.uid), b = borrowed.Id(d.uid);
    EXPECT_EQ(put.Put(a, d), DocumentStore::PutResult::kNew);
    EXPECT_EQ(borrowed.Borrow(b, DocumentRef::Of(d)), DocumentStore::PutResult::kNew);
    EXPECT_EQ(borrowed.Borrow(b, DocumentRef::Of(d)), DocumentStore::PutResult::kSame);
    fastcheck::DocumentView want, got;
    const bool viewed = put.View(a, want);
    ASSERT_EQ(borrowed.View(b, got), viewed);
    if (viewed) {
      EXPECT_EQ(got.uid, want.uid);
      ASSERT_EQ(got.size, want.size);
      for (std::int64_t k = 0; k < want.size; ++k) {
        EXPECT_EQ(got.token(k), want.token(k)) << k;
        EXPECT_EQ(got.supervised(k), want.supervised(k)) << k;
      }
    }
    Document expanded;
    ASSERT_TRUE(borrowed.Expand(d.uid, expanded));
    EXPECT_EQ(expanded.uid, d.uid);
    EXPECT_EQ(expanded.tokens, d.tokens);
    EXPECT_EQ(expanded.supervised, d.supervised);
    EXPECT_EQ(borrowed.Size(b), put.Size(a));
    EXPECT_EQ(borrowed.Fingerprint(d.uid), ContentFingerprint(d));
    Document other = d;  // one token longer, supervised with it when the document has flags (a valid Document)
    other.tokens.push_back(5);
    if (!other.supervised.empty()) other.supervised.push_back(1);
    EXPECT_EQ(borrowed.Put(b, other), DocumentStore::PutResult::kDiffers);
    borrowed.Retire(b);
    ASSERT_TRUE(borrowed.Retired(b));
    EXPECT_EQ(*borrowed.Retired(b), ContentFingerprint(d));
    EXPECT_EQ(borrowed.tokens_held(), 0);
  }
}

// Retired: the tokens go, the fingerprint stays for a later record of the uid; held documents are unaffected.
TEST(DocumentStore, ARetiredDocumentKeepsItsFingerprintAlone) {
  DocumentStore store;
  const std::uint32_t a = store.Id("a"), b = store.Id("b"), c = store.Id("c");
  EXPECT_EQ(store.Put(a, Doc("a", {1, 2, 3}, {})), DocumentStore::PutResult::kNew);
  EXPECT_EQ(store.Put(b, Doc("b", {4, 5}, {1, 0})), DocumentStore::PutResult::kNew);
  EXPECT_FALSE(store.Retired(a));
  EXPECT_FALSE(store.Retired(c));  // an id with no document yet
  EXPECT_FALSE(store.Held(c));
  store.Retire(a);
  ASSERT_TRUE(store.Retired(a));
  EXPECT_EQ(*store.Retired(a), ContentFingerprint(Doc("a", {1, 2, 3}, {})));
  EXPECT_FALSE(store.Held(a));
  EXPECT_EQ(store.Size(a), -1);
  EXPECT_EQ(store.Fingerprint("a"), 0u);
  fastcheck::DocumentView view;
  EXPECT_FALSE(store.View(a, view));
  EXPECT_EQ(store.tokens_held(), 2);
  EXPECT_EQ(store.Size(b), 2);
  ASSERT_TRUE(store.View(b, view));
  EXPECT_EQ(view.uid, "b");
  EXPECT_EQ(view.supervised(1), 0);
  std::vector<std::string> held;
  for (const auto id : store.HeldInUidOrder()) held.emplace_back(store.uids().Uid(id));
  EXPECT_EQ(held, std::vector<std::string>{"b"});
  // Unusable (Effective refuses it): the fast verifier does not see it; it is still held, for CheckCase.
  store.MarkUnusable(b);
  EXPECT_FALSE(store.View(b, view));
  EXPECT_FALSE(store.View("b", view));
  Document out;
  EXPECT_TRUE(store.Expand("b", out));
  EXPECT_EQ(out.tokens, (std::vector<Token>{4, 5}));
  // A new document takes the retired one's storage: it is itself, whole, usable; the retired stays retired.
  EXPECT_EQ(store.Put(c, Doc("c", {7, 8, 9, 10}, {0, 0, 1, 1})), DocumentStore::PutResult::kNew);
  ASSERT_TRUE(store.View(c, view));
  EXPECT_EQ(view.uid, "c");
  ASSERT_EQ(view.size, 4);
  for (std::int64_t k = 0; k < 4; ++k) {
    EXPECT_EQ(view.token(k), 7 + k);
    EXPECT_EQ(view.supervised(k), k < 2 ? 0 : 1);
  }
  EXPECT_EQ(store.Fingerprint("c"), ContentFingerprint(Doc("c", {7, 8, 9, 10}, {0, 0, 1, 1})));
  ASSERT_TRUE(store.Retired(a));
  EXPECT_EQ(*store.Retired(a), ContentFingerprint(Doc("a", {1, 2, 3}, {})));
  EXPECT_FALSE(store.View(b, view));  // still unusable
  EXPECT_EQ(store.tokens_held(), 6);
  // A shorter one after a longer one let go (whose storage a store may reuse): nothing of the longer is read.
  const std::uint32_t p = store.Id("p"), q = store.Id("q");
  store.Put(p, Doc("p", {3, 3, 3, 3, 3, 3}, {1, 1, 0, 1, 1, 1}));
  store.Retire(p);
  EXPECT_EQ(store.Put(q, Doc("q", {5, 6}, {0, 1})), DocumentStore::PutResult::kNew);
  ASSERT_TRUE(store.View(q, view));
  ASSERT_EQ(view.size, 2);
  EXPECT_EQ(view.token(0), 5);
  EXPECT_EQ(view.token(1), 6);
  EXPECT_EQ(view.supervised(0), 0);
  EXPECT_EQ(view.supervised(1), 1);
  EXPECT_TRUE(store.Expand("q", out));
  EXPECT_EQ(out.supervised, (std::vector<int>{0, 1}));
  store.Retire(q);
  // Erased (not retired): gone without a trace, and held again as new.
  store.Erase("b");
  EXPECT_FALSE(store.Retired(b));
  EXPECT_EQ(store.Put(b, Doc("b", {1}, {})), DocumentStore::PutResult::kNew);
  ASSERT_TRUE(store.View(b, view));  // a new document: usable
  EXPECT_EQ(view.size, 1);
  held.clear();
  for (const auto id : store.HeldInUidOrder())
    held.push_back(std::string(store.uids().Uid(id)) + ":" + std::to_string(store.Size(id)));
  EXPECT_EQ(held, (std::vector<std::string>{"b:1", "c:4"}));
}

}  // namespace
}  // namespace packoracle::jobs::verify_internal
