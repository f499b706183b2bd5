#!/usr/bin/env bash
# The whole test suite: set up and build, then run every test (including a downstream project built
# against the installed package through find_package(packoracle)).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
ctest --test-dir build --output-on-failure -j"$(nproc)"
