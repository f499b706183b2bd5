// The typed suite of packoracle/gtest.h (PackerConformance, one test per invariant) run on a candidate inside a
// test of the kit itself: Check(invariant) is what the suite's test of that invariant runs, so that a test can
// expect it to fail on a candidate that breaks the invariant (EXPECT_NONFATAL_FAILURE) and pass on its twin.
#pragma once

#include "packoracle/gtest.h"

namespace packoracle {

template <class T>
struct ConformanceProbe : PackerConformance<T> {
  void TestBody() override {}
  using PackerConformance<T>::Check;
};

}  // namespace packoracle
