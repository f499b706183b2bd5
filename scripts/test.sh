#!/usr/bin/env bash
# The test suite, at two depths. Each stage prints its wall time; the first failure stops the script.
#
#   ./scripts/test.sh         what a user needs to trust the kit, in minutes: set up and build (scripts/setup.sh);
#                             every ctest test but those labelled `full` (slow sweeps), a downstream project
#                             built against the installed package included; the Python package built by
#                             `pip install .` into a fresh venv, its tests and the README's Python snippets
#                             (scripts/python_tests.sh); the fast verifier's tests again on the baseline x86-64
#                             build of every function cloned for AVX2 (scripts/baseline_tests.sh, build-baseline/).
#   ./scripts/test.sh --full  everything, what CI runs (.ci/run): the above with every ctest test; the adapters'
#                             real libraries, their tests and the conformance matrix compared with the committed
#                             one (scripts/python_tests.sh --full); each docs/upstream/ report's script run
#                             as released (exit 1) and --with-fix (exit 0) in that venv
#                             (scripts/upstream_checks.sh); the pictures (draw's SVG, verify --html) in
#                             headless Chromium (scripts/browser_checks.sh); the same C++ tests built with ASan +
#                             UBSan, on the baseline build of the AVX2 clones (scripts/sanitize.sh, build-asan/); a
#                             fuzz smoke run of at most 60 s (scripts/fuzz_smoke.sh, build-fuzz/).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/stage.sh
full=0
case "${1:-}" in
  --full) full=1 ;;
  "") ;;
  *) echo "usage: $0 [--full]" >&2; exit 2 ;;
esac
stage "build" ./scripts/setup.sh
if ((full)); then
  stage "tests" ctest --test-dir build --output-on-failure -j"$(nproc)"
  stage "python package and tests" ./scripts/python_tests.sh --full
  stage "upstream reports' scripts (exit 1 as released, 0 --with-fix; 77 skipped)" ./scripts/upstream_checks.sh
  stage "browser checks" ./scripts/browser_checks.sh
  stage "sanitizer tests" ./scripts/sanitize.sh
  stage "fuzz smoke" ./scripts/fuzz_smoke.sh
else
  stage "tests (all but the label full; --full runs them)" \
    ctest --test-dir build --output-on-failure -j"$(nproc)" --label-exclude '^full$'
  stage "fast verifier tests on the baseline build (PACKORACLE_BASELINE_ONLY)" ./scripts/baseline_tests.sh
  stage "python package and tests" ./scripts/python_tests.sh
fi
