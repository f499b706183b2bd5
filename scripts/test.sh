#!/usr/bin/env bash
# The whole test suite: set up and build, then run every test (including a downstream project built
# against the installed package through find_package(packoracle)); then the Python package built with
# `pip install .` into a fresh venv and its tests run there (scripts/python_tests.sh); then the pictures
# (draw's SVG, verify --html) opened in headless Chromium (scripts/browser_checks.sh); then the same tests
# built with ASan + UBSan (scripts/sanitize.sh, build-asan/) and a fuzz smoke run of at most 60 s
# (scripts/fuzz_smoke.sh, build-fuzz/). Each stage prints its wall time; the first failure stops the script.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/stage.sh
stage "build" ./scripts/setup.sh
stage "tests" ctest --test-dir build --output-on-failure -j"$(nproc)"
stage "python package and tests" ./scripts/python_tests.sh
stage "browser checks" ./scripts/browser_checks.sh
stage "sanitizer tests" ./scripts/sanitize.sh
stage "fuzz smoke" ./scripts/fuzz_smoke.sh
