#!/usr/bin/env bash
# Builds and runs oracle_bench, then prints each case's CPU ns per slot and its ratio to BM_CopyBaseline of
# the same row length L (a memcpy of the same number of int64 slots, measured in the same run); then
# decoder_bench: the tiny decoder's CPU time per row and its ratio to BM_MaterializeRow of the same L.
# Usage: bench/run.sh [extra Google Benchmark flags, e.g. --benchmark_repetitions=5]
# Environment: BUILD_DIR (default build), MIN_TIME (default 0.05; benchmark 1.7.1 takes a plain double).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build="${BUILD_DIR:-build}"
min_time="${MIN_TIME:-0.05}"

# Configure only when the build tree is missing or was configured with the bench off.
if [[ ! -f "$build/CMakeCache.txt" ]] || grep -q '^PACKORACLE_BUILD_BENCH:BOOL=OFF' "$build/CMakeCache.txt"; then
  generator=()
  [[ ! -f "$build/CMakeCache.txt" ]] && command -v ninja >/dev/null && generator=(-G Ninja)
  cmake -S . -B "$build" "${generator[@]}" -DPACKORACLE_BUILD_BENCH=ON
fi
cmake --build "$build" --target oracle_bench decoder_bench

out="$(mktemp "${TMPDIR:-/tmp}/oracle_bench.XXXXXX.json")"
dec="$(mktemp "${TMPDIR:-/tmp}/decoder_bench.XXXXXX.json")"
trap 'rm -f "$out" "$dec"' EXIT
"$build/bench/oracle_bench" --benchmark_min_time="$min_time" --benchmark_format=json "$@" >"$out"

python3 - "$out" <<'PY'
import json, statistics, sys

with open(sys.argv[1]) as f:
    report = json.load(f)
ctx = report["context"]
to_ns = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}

# With --benchmark_repetitions the medians are used (the aggregate, or the median of the repetitions).
runs = {}
for b in report["benchmarks"]:
    if b.get("error_occurred"):
        print(f"{b['name']}: ERROR {b.get('error_message', '')}", file=sys.stderr)
        continue
    if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
        continue
    name = b.get("run_name", b["name"])
    ns_per_slot = b["cpu_time"] * to_ns[b["time_unit"]] / b["slots"]
    entry = runs.setdefault(name, {"slots": int(b["slots"]), "iter": [], "median": None})
    if b.get("run_type") == "aggregate":
        entry["median"] = ns_per_slot
    else:
        entry["iter"].append(ns_per_slot)

rows = []
for name, e in runs.items():
    case, _, arg = name.partition("/")
    value = e["median"] if e["median"] is not None else statistics.median(e["iter"])
    rows.append((case, int(arg), e["slots"], value))
baseline = {L: v for case, L, _, v in rows if case == "BM_CopyBaseline"}
order = {"BM_CopyBaseline": 0, "BM_Materialize": 1, "BM_Denominators": 2, "BM_AttentionGrid": 3}
rows.sort(key=lambda r: (order.get(r[0], 9), r[0], r[1]))

print(f"{ctx.get('num_cpus', '?')} CPUs @ {ctx.get('mhz_per_cpu', '?')} MHz, "
      f"library_build_type={ctx.get('library_build_type', '?')}, load_avg={ctx.get('load_avg', '?')}")
print("| case | L | slots | CPU ns/slot | x copy |")
print("| --- | ---: | ---: | ---: | ---: |")
for case, L, slots, v in rows:
    ratio = f"{v / baseline[L]:,.0f}" if L in baseline else "n/a"
    if case == "BM_CopyBaseline":
        ratio = "1"
    print(f"| {case}/{L} | {L} | {slots} | {v:,.3f} | {ratio} |")
PY

"$build/bench/decoder_bench" --benchmark_min_time="$min_time" --benchmark_format=json "$@" >"$dec"
python3 - "$dec" <<'PY'
import json, statistics, sys

with open(sys.argv[1]) as f:
    report = json.load(f)
to_us = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
runs = {}
for b in report["benchmarks"]:
    if b.get("error_occurred") or (b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median"):
        continue
    name = b.get("run_name", b["name"])
    runs.setdefault(name, []).append((b["cpu_time"] * to_us[b["time_unit"]], int(b.get("docs", 0))))
rows = []
for name, values in runs.items():
    case, _, arg = name.partition("/")
    rows.append((case, int(arg), statistics.median(v for v, _ in values), values[0][1]))
base = {L: v for case, L, v, _ in rows if case == "BM_MaterializeRow"}
order = {"BM_MaterializeRow": 0, "BM_DecoderRow": 1, "BM_DecoderInvariance": 2}
rows.sort(key=lambda r: (order.get(r[0], 9), r[1]))
print()
print("| case | L | docs | CPU us/row | x Materialize row |")
print("| --- | ---: | ---: | ---: | ---: |")
for case, L, v, docs in rows:
    ratio = f"{v / base[L]:,.1f}" if L in base else "n/a"
    print(f"| {case}/{L} | {L} | {docs} | {v:,.1f} | {ratio} |")
PY
