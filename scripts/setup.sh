#!/usr/bin/env bash
# Installs the Debian packages packoracle needs (only those missing), then configures and builds it in build/.
# Used by scripts/run.sh and scripts/test.sh; safe to run again (it only rebuilds what changed).
# `setup.sh --deps` installs the packages only (scripts/sanitize.sh and scripts/fuzz_smoke.sh build elsewhere).
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(g++ cmake ninja-build pkg-config python3 python3-dev python3-venv
          libgtest-dev libgmock-dev libbenchmark-dev librapidcheck-dev
          libxtensor-dev xtl-dev libxsimd-dev nlohmann-json3-dev libcli11-dev libsimdjson-dev
          clang libclang-rt-14-dev ccache)  # clang: the libFuzzer targets (fuzz/); libclang-rt: libFuzzer, ASan, UBSan
# python3-dev, python3-venv: `pip install .` builds the extension module (scripts/python_tests.sh)
# ccache: CMake compiles through it when installed (CMakeLists.txt), so `pip install .` after this build, or a
# rebuild in a fresh clone of the same path, is mostly cache hits

echo "setup: checking the ${#PACKAGES[@]} Debian packages packoracle builds with"
missing=()
for package in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if ((${#missing[@]})); then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "setup: installing missing Debian packages: ${missing[*]}"
  $sudo apt-get update
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${missing[@]}"
fi

if [ "${1:-}" = "--deps" ]; then exit 0; fi

echo "setup: configuring build/ (CMake, RelWithDebInfo)"
mkdir -p build
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >build/configure.log 2>&1 ||
  { cat build/configure.log; exit 1; }
echo "setup: building build/ on $(nproc) cores (a first build: 269 s on 2 quiet cores, 18 minutes at load 10)"
cmake --build build -j"$(nproc)" 2>&1 | scripts/build_progress.sh setup
