#!/usr/bin/env bash
# The whole test suite built with AddressSanitizer + UndefinedBehaviorSanitizer (g++, no recovery: the first
# finding aborts its test) in build-asan/, then run. Part of scripts/test.sh; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --deps >/dev/null

# -O1 -g1, as the sanitizers' own documentation advises: a sanitized -O2 -g build of the tree took 20 minutes
# of CI's 60 on two cores (one heavy unit, properties/src/check.cc: 63 s at -O2 -g, 27 s at -O1 -g1); line
# tables are all a report's stack needs.
#
# Built with PACKORACLE_BASELINE_ONLY too: every function the normal build clones for AVX2 (fastcheck/clones.h) is
# here its baseline x86-64 build alone, so the whole suite, the fast verifier's differential tests among them,
# runs the code a machine without AVX2 runs, at no extra build (the quick ./scripts/test.sh runs the AVX2 clones
# the machine picks; a second build of the fast verifier's tests there would cost minutes on two cores).
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPACKORACLE_SANITIZE=ON -DPACKORACLE_BASELINE_ONLY=ON \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
      -DPACKORACLE_BUILD_BENCH=OFF >/dev/null
echo "sanitize: building build-asan/ (ASan + UBSan)"
cmake --build build-asan -j"$(nproc)" 2>&1 | scripts/build_progress.sh sanitize

# Excluded, and only this: install.FindPackageConsumer installs the kit and builds a downstream project
# against it with plain flags; the installed libraries are ASan-instrumented, so that project cannot link
# (undefined __asan_* symbols). It tests packaging, not memory safety, and runs in the normal build.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:strict_init_order=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
ctest --test-dir build-asan --output-on-failure -j"$(nproc)" -E '^(install\.FindPackageConsumer|selftest\.sweep|verify\.memory_bound|verify\.memory_bound_one_big_step)$'
