#!/usr/bin/env bash
# The device lane: the one script a lent GPU machine runs (bench/gpu/README.md has the exact `run` call). That
# machine reaches no network and has none of the Debian C++ libraries the core builds against, so everything
# comes from bench/gpu/carry/ (made here by bench/gpu/carry.sh, sent with the call's `carry`):
#   1. unpack the carried .debs into a prefix under $TMPDIR (never into /: they would overwrite the image's);
#   2. build and install packoracle (the Python extension and the command) with pip, no index, no build
#      isolation, against that prefix only: CMake's system paths are turned off and, after the build, the
#      CMake cache and the compiler's header dependencies are checked to point into the prefix;
#   3. the kernel cells (bench/gpu/kernels.py: values and gradients vs a float64 reference) and, on CUDA, the
#      consumer column (bench/gpu/consumers.py) as separate stages.
# A failing stage does not stop the later ones that do not need it. Everything it prints, and the tables, land
# in $OUT (the device machine copies $OUT back). Exit status: 1 when any stage failed.
# Knobs (environment): PYTHON (python3), JOBS (build parallelism, nproc), DEVICE (cuda when torch sees one, else
# cpu), CONSUMER_FAMILIES (llama: one model family, as the whole column does not fit a device lease; a
# space-separated list of packoracle.adapters.transformers_models.FAMILIES), CONSUMER_CASES (10), LANE_BUDGET_S (300: the whole lane's seconds; the kernel and consumer stages are cut
# off where they would run past it, so that the summary and $OUT's files are written inside the `run` call's
# timeout_s, which should be a little larger).
set -uo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
carry=$repo/bench/gpu/carry
out=${OUT:-$repo/bench/gpu/out}
python=${PYTHON:-python3}
mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/device-lane.XXXXXX")
prefix=$work/prefix     # the unpacked Debian packages (usr/include, usr/lib/x86_64-linux-gnu, usr/share)
tools=$work/tools       # the carried build wheels (scikit-build-core, nanobind), ahead of the image's
site=$work/site         # packoracle, installed here with --target
export PYTHONUNBUFFERED=1
# pip reads nothing but the carried files: no configured index, find-links or constraints of the host's.
export PIP_CONFIG_FILE=/dev/null
unset PIP_FIND_LINKS PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_CONSTRAINT
exec > >(tee "$out/lane.log") 2>&1
tee_pid=$!

results=()
budget=${LANE_BUDGET_S:-300}
# Seconds left for a stage that may be cut off: the budget less what has run, less 10 s for the summary.
left() { local n=$((budget - SECONDS - 10)); echo $((n > 5 ? n : 5)); }
# `step NAME COMMAND...`: scripts/stage.sh's messages, but a failure is recorded rather than fatal.
step() {
  local name=$1 start=$SECONDS rc=0
  shift
  echo "device_lane.sh: $name ..."
  "$@" || rc=$?
  echo "device_lane.sh: $name took $((SECONDS - start)) s$([ "$rc" = 0 ] || echo " (exit $rc)")"
  results+=("$(printf '%-32s %4d s  exit %d' "$name" $((SECONDS - start)) "$rc")")
  return "$rc"
}

environment() {
  "$python" - <<'EOF'
import os, platform, sys, sysconfig
import torch
cuda = torch.cuda.is_available()
print("python", platform.python_version(), sys.executable)
print("torch", torch.__version__, "cuda", torch.version.cuda, "device", torch.cuda.get_device_name() if cuda else "none")
include = sysconfig.get_paths()["include"]
print("Python.h", include, "present" if os.path.exists(os.path.join(include, "Python.h")) else "MISSING")
EOF
  echo "cores $(nproc); $(${CXX:-c++} --version | head -1); $(cmake --version | head -1); ninja $(ninja --version)"
}

# dpkg-deb where there is one; else the .deb's data member by ar and tar (a .deb is an ar archive).
unpack() {
  mkdir -p "$prefix"
  local deb member
  for deb in "$carry"/debs/*.deb; do
    if command -v dpkg-deb >/dev/null; then
      dpkg-deb -x "$deb" "$prefix"
    else
      # Written to a file first: tar detects the compression (xz here) from a file, not from a pipe.
      member=$(ar t "$deb" | grep '^data\.tar')
      ar p "$deb" "$member" >"$work/$member"
      tar -x -f "$work/$member" -C "$prefix"
      rm "$work/$member"
    fi
  done
  ls "$prefix/usr/lib/x86_64-linux-gnu/cmake" "$prefix/usr/share/cmake" | tr '\n' ' '
  echo
}

build_tools() {
  "$python" -m pip install --quiet --no-index --no-deps --no-compile --target "$tools" "$carry"/wheels/*.whl
}

# pip builds the wheel with scikit-build-core (pyproject.toml's settings) in $work/build, kept for the checks.
build() {
  local paths="$prefix/usr;$prefix/usr/lib/x86_64-linux-gnu/cmake;$prefix/usr/share/cmake"
  PYTHONPATH=$tools CMAKE_BUILD_PARALLEL_LEVEL=${JOBS:-$(nproc)} "$python" -m pip install --no-index \
    --no-build-isolation --no-deps --no-compile --target "$site" \
    -C build-dir="$work/build" -C build.verbose=false \
    -C "cmake.define.CMAKE_PREFIX_PATH=$paths" \
    -C cmake.define.CMAKE_FIND_USE_CMAKE_SYSTEM_PATH=OFF \
    -C cmake.define.CMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
    -C cmake.define.CMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF \
    -C cmake.define.PACKORACLE_CCACHE=OFF \
    . >"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; return 1; }
  tail -2 "$out/build.log"
}

# The build must have used the prefix alone: every package CMake found lies in it, and no header of those
# libraries came from /usr/include (the compiler searches it by default, so a header missing from the prefix
# would be taken from the host unseen; on the device there is none, and the build would break there).
from_prefix_only() {
  local cache=$work/build/CMakeCache.txt bad
  grep -E '^(nlohmann_json|rapidcheck|GTest|xtensor|xtl|xsimd|CLI11|simdjson)_DIR' "$cache"
  bad=$(grep -E '^(nlohmann_json|rapidcheck|GTest|xtensor|xtl|xsimd|CLI11|simdjson)_DIR' "$cache" |
        grep -v "=$prefix/" || true)
  [ -z "$bad" ] || { echo "found outside the prefix: $bad"; return 1; }
  bad=$(ninja -C "$work/build" -t deps | grep -E '^ +/usr/include/(nlohmann|rapidcheck|gtest|gmock|xtensor|xtl|xsimd|CLI|simdjson)' |
        sort -u || true)
  [ -z "$bad" ] || { echo "headers from the host: $bad"; return 1; }
  echo "every package and header from $prefix ($(ninja -C "$work/build" -t deps | grep -c "^ *$prefix/") header reads)"
}

# The extension links RapidCheck, libstdc++ and simdjson in statically (python/CMakeLists.txt): it must load with
# nothing from the prefix on the library path, as a user's wheel would.
loads() {
  local module
  module=$(ls "$site"/packoracle/_core*.so)
  ldd "$module" | sed 's/^/  /'
  ! ldd "$module" | grep -q 'not found' || return 1
  PYTHONPATH=$site "$python" -c 'import packoracle, packoracle._core as c; print("packoracle", packoracle.__file__)'
}

# The kernels need torch alone, not packoracle: they run whether or not the build succeeded.
kernels() {
  timeout "$(left)" "$python" bench/gpu/kernels.py --device "$device" --self-test --out "$out/kernels.md" 2>"$out/kernels.log"
}

consumers() {
  local family only=()
  for family in ${CONSUMER_FAMILIES:-llama}; do only+=(--only "$family"); done
  PYTHONPATH=$site timeout "$(left)" "$python" bench/gpu/consumers.py --device cuda "${only[@]}" \
    --cases "${CONSUMER_CASES:-10}" --out "$out/consumers_gpu.md" 2>"$out/consumers.log"
  local rc=$?
  [ $rc != 124 ] || echo "consumer column cut off at the lane's budget: the cells run so far are in consumers.log"
  tail -5 "$out/consumers.log"
  [ -f "$out/consumers_gpu.md" ] && cat "$out/consumers_gpu.md"
  return $rc
}

echo "device_lane.sh: $(date -u +%FT%TZ) in $repo, work $work, results $out"
step "environment" environment
device=${DEVICE:-$("$python" -c 'import torch; print("cuda" if torch.cuda.is_available() else "cpu")')}
built=0
step "unpack carried .debs" unpack &&
  step "carried build wheels" build_tools &&
  step "build packoracle (pip, prefix)" build &&
  step "prefix-only check" from_prefix_only &&
  step "extension loads" loads && built=1
step "kernels on $device" kernels
if [ "$device" = cuda ] && [ $built = 1 ]; then
  step "consumer column on cuda" consumers
else
  echo "device_lane.sh: consumer column skipped (device $device, packoracle built: $built)"
fi
echo "device_lane.sh: summary"
printf '  %s\n' "${results[@]}" | tee "$out/summary.txt"
status=0
grep -qv 'exit 0$' "$out/summary.txt" && status=1
exec >&- 2>&-
wait "$tee_pid"  # lane.log complete before $OUT is copied back
exit "$status"
