#!/usr/bin/env bash
# A short libFuzzer run of each fuzz target (fuzz/), built with clang++ in build-fuzz/ (ASan + UBSan, no
# recovery), over a copy of its seed corpus with its dictionary. At most FUZZ_SECONDS (default 60) in all.
# Exit non-zero when a target crashes; the input is left in build-fuzz/artifacts/. Part of scripts/test.sh.
#
# A long campaign (not in CI), e.g. 10 million executions per target (fast_batch_fuzzer takes packed_batch's
# dictionary and corpus):
#   nice -n 10 ./build-fuzz/fuzz/packed_batch_fuzzer -runs=10000000 -dict=fuzz/packed_batch.dict \
#        -artifact_prefix=build-fuzz/artifacts/ build-fuzz/work/packed_batch fuzz/corpus/packed_batch
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --deps >/dev/null

cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
      -DPACKORACLE_BUILD_FUZZERS=ON -DPACKORACLE_BUILD_TESTS=OFF -DPACKORACLE_BUILD_BENCH=OFF \
      -DPACKORACLE_BUILD_CLI=OFF -DPACKORACLE_INSTALL=OFF >/dev/null
targets=(packed_batch fast_batch exec_answer)
# Seed corpus and dictionary of each target: fast_batch (the simdjson reader, differential against the
# nlohmann one) reads the same files as packed_batch.
declare -A seeds=([packed_batch]=packed_batch [fast_batch]=packed_batch [exec_answer]=exec_answer)
echo "fuzz_smoke: building the libFuzzer targets in build-fuzz/"
cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]/%/_fuzzer}" 2>&1 | scripts/build_progress.sh fuzz_smoke

total=${FUZZ_SECONDS:-60}
per=$((total / ${#targets[@]}))
mkdir -p build-fuzz/artifacts
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/work/$t"
  echo "fuzz_smoke: $t for $per s"
  # New inputs go to build-fuzz/work/<t> (the first directory); the seed corpus is only read.
  ./build-fuzz/fuzz/"${t}_fuzzer" -max_total_time="$per" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -dict="fuzz/${seeds[$t]:-$t}.dict" -artifact_prefix="build-fuzz/artifacts/$t-" "build-fuzz/work/$t" \
      "fuzz/corpus/${seeds[$t]:-$t}" \
      2> "build-fuzz/$t.log" || { tail -n 60 "build-fuzz/$t.log"; echo "fuzz_smoke: $t FAILED (input in build-fuzz/artifacts/)"; exit 1; }
  grep -E '^stat::number_of_executed_units' "build-fuzz/$t.log" | sed "s/^/fuzz_smoke: $t /"
done
