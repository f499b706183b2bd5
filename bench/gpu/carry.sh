#!/usr/bin/env bash
# Fetches, on a machine WITH network (this one), what the device lane needs that the device image lacks, into
# bench/gpu/carry/ (ignored by git; a `run` call names it in `carry`). The device reaches no network: no apt, no
# PyPI. Its image has Python 3.12, torch, transformers, triton, nanobind, scikit-build-core, cmake, ninja, but
# none of the Debian C++ libraries the core builds against. So:
#   debs/    the Debian 12 (bookworm) -dev packages CMakeLists.txt's find_package calls need, unpacked there
#            into a prefix by device_lane.sh (headers, static libraries, CMake config files);
#   wheels/  Python 3.12 wheels of the two build tools pyproject.toml pins exactly (scikit-build-core 1.1.2,
#            nanobind 2.12.0): the image has both, at versions nobody has read; the extension is compiled
#            against nanobind's own sources, so the pinned one is carried rather than trusted.
# Safe to run again: it empties carry/ first. Prints the total size, which must stay well under the 64 MiB a
# device call may carry (the rest of the working tree travels too).
set -euo pipefail
cd "$(dirname "$0")"
carry=carry

# Every package a find_package call of the Python build reaches (CMakeLists.txt, fastcheck/, python/):
# nlohmann_json, rapidcheck, GTest (its config names GMock's libraries too, so both), xtensor (-> xtl; xsimd
# only with XTENSOR_USE_XSIMD, carried as scripts/setup.sh installs it), CLI11 (the `packoracle` command the
# wheel ships), simdjson (header only: fastcheck compiles simdjson.cpp in; the .so package is carried because
# simdjson's CMake targets file checks that the shared library it names exists).
DEBS=(nlohmann-json3-dev librapidcheck-dev libgtest-dev libgmock-dev libxtensor-dev xtl-dev libxsimd-dev
      libcli11-dev libsimdjson-dev libsimdjson14)
WHEELS=(scikit-build-core==1.1.2 nanobind==2.12.0)

fetch_debs() {
  mkdir -p "$carry/debs"
  (cd "$carry/debs" && apt-get download "${DEBS[@]}")
}

fetch_wheels() {
  # Pure-Python wheels both, but asked for as the device's interpreter would (3.12, manylinux x86-64).
  python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$carry/wheels" "${WHEELS[@]}"
}

rm -rf "$carry"
fetch_debs
fetch_wheels
ls -l "$carry"/debs "$carry"/wheels
echo "carry.sh: $(du -sh "$carry" | cut -f1) in bench/gpu/$carry ($(du -sb "$carry" | cut -f1) bytes; a device call carries at most 64 MiB)"
