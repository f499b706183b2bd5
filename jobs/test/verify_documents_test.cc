// DocumentStore (jobs/src/verify_documents.h): what goes in comes out exactly, whatever form it is packed in.
#include <gtest/gtest.h>

#include <limits>

#include "../src/verify_documents.h"

namespace packoracle::jobs::verify_internal {
namespace {

Document Doc(std::string uid, std::vector<Token> tokens, std::vector<int> supervised) {
  return Document{std::move(uid), std::move(tokens), std::move(supervised)};
}

void ExpectRoundTrip(const Document& d) {
  DocumentStore store;
  EXPECT_TRUE(store.Put(d));
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

TEST(DocumentStore, ARepeatedUidReplacesAndErasedOnesAreGone) {
  DocumentStore store;
  EXPECT_TRUE(store.Put(Doc("b", {1, 2}, {})));
  EXPECT_TRUE(store.Put(Doc("a", {1, 2, 3}, {})));
  EXPECT_FALSE(store.Put(Doc("b", {5, 6, 7, 8}, {0, 1, 1, 1})));
  EXPECT_EQ(store.tokens_held(), 7);
  std::vector<std::string> order;
  store.ForEach([&](const std::string& uid, std::int64_t size) { order.push_back(uid + ":" + std::to_string(size)); });
  EXPECT_EQ(order, (std::vector<std::string>{"a:3", "b:4"}));  // uid order, the replaced size
  store.Erase("a");
  Document out;
  EXPECT_FALSE(store.Expand("a", out));
  EXPECT_EQ(store.Size("a"), -1);
  EXPECT_FALSE(store.Contains("a"));
  EXPECT_EQ(store.tokens_held(), 4);
}

}  // namespace
}  // namespace packoracle::jobs::verify_internal
