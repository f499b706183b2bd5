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
  store.ForEach([&](const std::string& uid, std::int64_t size) { order.push_back(uid + ":" + std::to_string(size)); });
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

}  // namespace
}  // namespace packoracle::jobs::verify_internal
