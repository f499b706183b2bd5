// ReproduceString: what ToString writes, Parse reads back; what is not a reproduce string is refused, naming
// the part that is wrong.
#include "packoracle/properties/reproduce_string.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "packoracle/oracle/error.h"

namespace packoracle {
namespace {

RC_GTEST_PROP(ReproduceStringProperties, ParseReadsBackWhatToStringWrites, ()) {
  ReproduceString r;
  r.seed = *rc::gen::arbitrary<std::uint64_t>();
  r.case_index = *rc::gen::inRange(0, 1 << 30);
  r.size = *rc::gen::inRange(0, 101);
  r.profile = *rc::gen::element<std::string>("edges", "short", "large", "collide");
  r.path = *rc::gen::container<std::vector<int>>(rc::gen::inRange(0, 5000));
  r.edits = *rc::gen::container<std::vector<std::string>>(
      rc::gen::element<std::string>("x2", "t0,4", "d", "r1", "L1296"));
  const ReproduceString back = ReproduceString::Parse(r.ToString());
  RC_ASSERT(back.seed == r.seed);
  RC_ASSERT(back.case_index == r.case_index);
  RC_ASSERT(back.size == r.size);
  RC_ASSERT(back.profile == r.profile);
  RC_ASSERT(back.path == r.path);
  RC_ASSERT(back.edits == r.edits);
  RC_ASSERT(back.ToString() == r.ToString());
}

TEST(ReproduceString, ReadsTheReadmeExample) {
  const auto r = ReproduceString::Parse("v1:20261129:77:29:collide:1.1.3.0.0.0.0.0");
  EXPECT_EQ(r.seed, 20261129u);
  EXPECT_EQ(r.case_index, 77);
  EXPECT_EQ(r.size, 29);
  EXPECT_EQ(r.profile, "collide");
  EXPECT_EQ(r.path, (std::vector<int>{1, 1, 3, 0, 0, 0, 0, 0}));
  EXPECT_TRUE(r.edits.empty());
  EXPECT_EQ(ReproduceString::Parse("v1:1:2:3:large:").CaseString(), "v1:1:2:3:large:");
}

TEST(ReproduceString, RefusesWhatIsNotOne) {
  struct Bad {
    const char* text;
    const char* names;  // what the message must name
  };
  for (const Bad& bad : {Bad{"", "is not of the form"}, Bad{"v2:1:2:3:edges:", "is not of the form"},
                         Bad{"v1:1:2:3:edges", "is not of the form"}, Bad{"v1:12abc:2:3:edges:", "seed '12abc'"},
                         Bad{"v1:1:-1:3:edges:", "case '-1'"}, Bad{"v1:1:2:101:edges:", "size '101'"},
                         Bad{"v1:1:2: 3:edges:", "size ' 3'"}, Bad{"v1:1:2:3::", "profile is empty"},
                         Bad{"v1:1:2:3:edges:1.2x", "shrink step '2x'"},
                         Bad{"v1:99999999999999999999:2:3:edges:", "seed '99999999999999999999'"}}) {
    try {
      ReproduceString::Parse(bad.text);
      ADD_FAILURE() << "accepted '" << bad.text << "'";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(bad.names), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace packoracle
