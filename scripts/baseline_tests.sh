#!/usr/bin/env bash
# The fast verifier's tests (fastcheck_tests: the differential tests against CheckCase, the readers, the clean-row
# path) on the baseline x86-64 build of every function the normal build also clones for AVX2
# (PACKORACLE_BASELINE_ONLY, fastcheck/clones.h), in build-baseline/; and ctest clones.as_configured there, which
# fails if any AVX2 clone is left. The option changes the commands of the few sources holding such functions only,
# so after build/ every other compilation is a ccache hit: about 15 s of build and 6 s of tests on two cores.
# Part of ./scripts/test.sh (the sanitizer build of --full runs the whole suite so too); safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-baseline -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPACKORACLE_BASELINE_ONLY=ON \
      -DPACKORACLE_BUILD_BENCH=OFF >/dev/null
cmake --build build-baseline --target fastcheck_tests -j"$(nproc)" 2>&1 | scripts/build_progress.sh baseline
ctest --test-dir build-baseline --output-on-failure -R '^clones\.as_configured$'
# fastcheck_tests as its ctest entries run it (gtest_discover_tests, fastcheck/test/CMakeLists.txt), in one process.
RC_PARAMS="seed=20261129 max_success=200" build-baseline/fastcheck/test/fastcheck_tests --gtest_brief=1
