#include <gtest/gtest.h>
#include <packoracle/gtest.h>

#include "my_packer.h"

TEST(MyPacker, KeepsEveryInvariant) { EXPECT_TRUE(packoracle::VerifyPackerKeepsInvariants(MyPacker{})); }

// One test per invariant (not applicable ones are skipped, never passed).
namespace packoracle {
INSTANTIATE_TYPED_TEST_SUITE_P(MyPacker, PackerConformance, ::testing::Types<MyPacker>);
}
