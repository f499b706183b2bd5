// UidTable (fastcheck/uid_table.h) and StepDocuments' look-up by uid through it, against std::map on generated
// uids: repeats, prefixes of each other, the empty uid, and enough of them to grow the table several times.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "packoracle/fastcheck/step_check.h"
#include "packoracle/fastcheck/uid_table.h"

namespace packoracle::fastcheck {
namespace {

// Uids drawn from a small alphabet, so that repeats and shared prefixes are common.
rc::Gen<std::vector<std::string>> Uids() {
  return rc::gen::container<std::vector<std::string>>(
      rc::gen::container<std::string>(rc::gen::elementOf(std::string("ab1"))));
}

TEST(UidTable, FindsWhatWasInsertedAndNothingElse) {
  EXPECT_TRUE(rc::check("UidTable against std::map", [] {
    const auto uids = *Uids();
    const auto probes = *Uids();
    std::vector<std::string> ids;  // by id
    std::map<std::string, std::uint32_t> want;
    UidTable table;
    const auto uid_of = [&](std::uint32_t id) { return std::string_view(ids[id]); };
    EXPECT_EQ(table.Find("a", uid_of), UidTable::kNone);  // empty: no entry to probe
    for (const auto& uid : uids) {
      if (want.count(uid)) {
        RC_ASSERT(table.Find(uid, uid_of) == want[uid]);
        continue;
      }
      table.Reserve(ids.size() + 1);
      std::uint32_t& id = table.IdOf(uid, uid_of);
      RC_ASSERT(id == UidTable::kNone);
      id = static_cast<std::uint32_t>(ids.size());
      want[uid] = id;
      ids.push_back(uid);
    }
    for (const auto& uid : probes) {
      const auto it = want.find(uid);
      RC_ASSERT(table.Find(uid, uid_of) == (it == want.end() ? UidTable::kNone : it->second));
    }
    table.Clear();
    for (const auto& uid : uids) RC_ASSERT(table.Find(uid, uid_of) == UidTable::kNone);
  }));
}

TEST(SortByUid, OrdersAsStringViewsCompare) {
  EXPECT_TRUE(rc::check("SortByUid against std::string_view's order", [] {
    // Bytes either side of the zero fill and of the sign bit, uids longer and shorter than the 8-byte prefix.
    const auto uids = *rc::gen::container<std::vector<std::string>>(rc::gen::container<std::string>(
        rc::gen::elementOf(std::string("a\0\x7f\x80\xff", 5))));
    std::vector<std::uint32_t> ids(uids.size());
    for (std::uint32_t k = 0; k < ids.size(); ++k) ids[k] = k;
    SortByUid(ids, [&](std::uint32_t id) { return std::string_view(uids[id]); });
    std::vector<std::string> got, want = uids;
    for (const auto id : ids) got.push_back(uids[id]);
    std::sort(want.begin(), want.end(), [](const std::string& a, const std::string& b) {
      return std::string_view(a) < std::string_view(b);
    });
    RC_ASSERT(got == want);
  }));
}

TEST(StepDocuments, FindsIndexedDocumentsAsAMapKeepingTheLastOfEqualUids) {
  EXPECT_TRUE(rc::check("StepDocuments::Index and Find against std::map", [] {
    const auto uids = *Uids();
    StepDocuments docs;
    std::map<std::string, std::int64_t> want;
    for (std::size_t d = 0; d < uids.size(); ++d) {
      DocumentView view;
      view.uid = uids[d];
      docs.docs.push_back(view);
      want[uids[d]] = static_cast<std::int64_t>(d);  // the last of equal uids, as CheckCase's std::map keeps
    }
    docs.Index();
    for (const auto& uid : *Uids()) {
      const auto it = want.find(uid);
      RC_ASSERT(docs.Find(uid) == (it == want.end() ? -1 : it->second));
    }
  }));
}

TEST(StepDocuments, ResolvesEachUidOnceInTheOrderRowsNameThem) {
  EXPECT_TRUE(rc::check("StepDocuments streamed: resolve once per uid", [] {
    const auto known = *Uids();  // the documents the resolver knows
    const auto named = *Uids();  // the uids the rows name, in order
    std::map<std::string, int> resolved;
    StepDocuments docs;
    docs.resolve = [&](std::string_view uid, DocumentView& view) {
      for (const auto& k : known) {
        if (k != uid) continue;
        ++resolved[k];
        view.uid = k;  // storage that outlives the call (`known`)
        return true;
      }
      return false;
    };
    std::map<std::string, std::int64_t> first;  // each known uid's index: the order rows first name it
    for (const auto& uid : named) {
      const bool is_known = std::find(known.begin(), known.end(), uid) != known.end();
      if (is_known && !first.count(uid)) first.emplace(uid, static_cast<std::int64_t>(first.size()));
      RC_ASSERT(docs.Find(uid) == (is_known ? first[uid] : -1));
    }
    for (const auto& [uid, count] : resolved) RC_ASSERT(count == 1);
    RC_ASSERT(docs.docs.size() == first.size());
  }));
}

}  // namespace
}  // namespace packoracle::fastcheck
