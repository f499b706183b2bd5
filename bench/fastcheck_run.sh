#!/usr/bin/env bash
# Every figure of the fast verifier in one run, each a ratio measured in the same run, printed as one table,
# and the scaling plot written to bench/scaling.svg.
#
#   bench/fastcheck_run.sh          # MB=1024: the 1 GiB dump, generated once into $DUMP_DIR
# Environment: BUILD_DIR (build), MB (1024), DUMP_DIR (/tmp/packoracle-fast), MIN_TIME (0.2 s per benchmark),
#   FUZZ_CASES (5000), SKIP_PYTHON=1 (skip the Python checker: ~2 min and ~2 GiB on 1 GiB).
#
# 1. build/bench/fastcheck_bench (Google Benchmark, JSON): dense mask vs memcpy, row verification vs the oracle
#    and vs one read of the rows, the scaling cases, in-process cases/s fast vs oracle.
# 2. The dump: bench/audit's make_dump, torchtune-packed, 8 rows of 8192 slots per micro-batch.
# 3. On that file, once each, CPU time (user + sys, children included), wall clock and peak RSS (/usr/bin/time):
#    verify (fast path), verify --oracle,
#    simdjson On-Demand visiting every value (the raw parse), nlohmann-json raw parse, the Python checker.
# 4. fuzz --exec --no-decoder with the Python reference candidate, fast path and --oracle: cases/s (with the
#    tiny decoder, fuzz's default, every case goes through the oracle: the two would be the same).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build="${BUILD_DIR:-build}"
mb="${MB:-1024}"
dump_dir="${DUMP_DIR:-/tmp/packoracle-fast}"
min_time="${MIN_TIME:-0.2}"
fuzz_cases="${FUZZ_CASES:-5000}"
py="$(python3 -c 'import sys; print(sys.executable)')"
mkdir -p "$dump_dir"

cmake --build "$build" -j2 --target packoracle fastcheck_bench audit_make_dump audit_raw_parse audit_simdjson_parse
cli="$dump_dir/packoracle"
cp "$build/cli/packoracle" "$cli"  # one binary timed throughout, whatever happens to the tree meanwhile

# ---- 1. benchmarks ---------------------------------------------------------------------------------------
bench_json="$dump_dir/fastcheck_bench.json"
"$build/bench/fastcheck_bench" --benchmark_min_time="$min_time" --benchmark_format=json >"$bench_json"

# ---- 2. the dump -----------------------------------------------------------------------------------------
dump="$dump_dir/audit_torchtune-packed_${mb}MiB_L8192_R8_s1.jsonl"
if [[ ! -f "$dump" ]]; then
  "$build/bench/audit_make_dump" "$dump" torchtune-packed "$mb" 8192 8 1 >&2
fi
cat "$dump" >/dev/null  # every tool reads from the page cache

# ---- 3. the audit ----------------------------------------------------------------------------------------
times="$dump_dir/times.tsv"
: >"$times"
run() {  # name, expected exit status, command...
  local name="$1" want="$2" t0 t1 status=0
  shift 2
  t0=$(date +%s%N)
  /usr/bin/time -f '%U %S %M' -o "$dump_dir/rss.txt" "$@" >"$dump_dir/$name.out" 2>&1 || status=$?
  t1=$(date +%s%N)
  [[ $status == "$want" ]] || { tail -20 "$dump_dir/$name.out" >&2; echo "$name exited $status" >&2; exit 1; }
  read -r user sys kb < <(tail -1 "$dump_dir/rss.txt")
  printf '%s\t%s\t%s\t%s\n' "$name" "$(( (t1 - t0) / 1000000 ))" "$(python3 -c "print($user + $sys)")" "$kb" >>"$times"
  echo "$name: $(( (t1 - t0) / 1000000 )) ms" >&2
}
run verify 0 "$cli" verify --jobs 1 "$dump"  # one core: the figures below are single-threaded (--jobs: shapes.sh)
grep -q 'verdict: clean' "$dump_dir/verify.out"
run simdjson_parse 0 "$build/bench/audit_simdjson_parse" "$dump"
run nlohmann_parse 0 "$build/bench/audit_raw_parse" "$dump"
run verify_oracle 0 "$cli" verify --oracle "$dump"
cmp -s <(grep -v '^packoracle verify' "$dump_dir/verify.out") <(grep -v '^packoracle verify' "$dump_dir/verify_oracle.out") ||
  { echo "verify and verify --oracle disagree" >&2; exit 1; }
[[ "${SKIP_PYTHON:-0}" == 1 ]] || run python 0 "$py" bench/audit/python_checker.py "$dump"

# ---- 4. fuzz over exec -----------------------------------------------------------------------------------
exec_cmd="$py python/candidates/reference.py"
run fuzz_fast 0 "$cli" fuzz --exec "$exec_cmd" --preset reference --cases "$fuzz_cases" --no-decoder
run fuzz_oracle 0 "$cli" fuzz --exec "$exec_cmd" --preset reference --cases "$fuzz_cases" --no-decoder --oracle

# ---- the table -------------------------------------------------------------------------------------------
python3 bench/scaling_plot.py "$bench_json" bench/scaling.svg
python3 - "$bench_json" "$times" "$(stat -c %s "$dump")" "$fuzz_cases" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
rate = {}
for b in report["benchmarks"]:
    if b.get("run_type") == "aggregate" or b.get("error_occurred"):
        continue
    rate[b["name"]] = b.get("bytes_per_second") or b.get("items_per_second")
# Rates from CPU time (user + sys): on a shared, loaded machine wall clock depends on the neighbours, CPU time
# far less. Every tool here runs on one core.
times, wall = {}, {}
for line in open(sys.argv[2]):
    name, ms, cpu, kb = line.split("\t")
    times[name] = (float(cpu), int(kb) / 1024)
    wall[name] = int(ms) / 1000
mib = int(sys.argv[3]) / 2**20
cases = int(sys.argv[4])

def mibs(name): return mib / times[name][0]
def goal(ok): return "met" if ok else "NOT met"

rows = []
for L in (1024, 4096, 8192):
    r = rate[f"BM_DenseMask/{L}"] / rate[f"BM_MaskCopy/{L}"]
    rows.append((f"dense-mask check / memcpy, L={L} ({L*L/2**20:.0f} MiB mask)",
                 f"{rate[f'BM_DenseMask/{L}']/2**30:.1f} GiB/s / {rate[f'BM_MaskCopy/{L}']/2**30:.1f} GiB/s",
                 f"{r:.2f}", ">= 0.5", goal(r >= 0.5)))
fast, oracle, once = rate["BM_FastStep/8192/8"], rate["BM_OracleStep/8192/8"], rate["BM_ReadOnce/8192/8"]
rows.append(("row verification / the oracle (8 x 8192, tokens/s)", f"{fast/1e6:.0f} M / {oracle/1e6:.2f} M",
             f"{fast/oracle:,.0f}x", "-", "-"))
rows.append(("row verification / reading the rows' arrays once", f"{fast/1e6:.0f} M / {once/1e6:.0f} M",
             f"{fast/once:.2f}", "-", "-"))
v = mibs("verify")
rows.append((f"verify on {mib:,.0f} MiB / simdjson raw parse (every value)", f"{v:.0f} / {mibs('simdjson_parse'):.0f} MiB/s",
             f"{v/mibs('simdjson_parse'):.2f}", ">= 0.5", goal(v / mibs("simdjson_parse") >= 0.5)))
rows.append(("verify / nlohmann-json raw parse", f"{v:.0f} / {mibs('nlohmann_parse'):.0f} MiB/s",
             f"{v/mibs('nlohmann_parse'):.1f}", "-", "-"))
rows.append(("verify / verify --oracle", f"{v:.0f} / {mibs('verify_oracle'):.1f} MiB/s",
             f"{v/mibs('verify_oracle'):.1f}x", "-", "-"))
if "python" in times:
    rows.append(("verify / Python checker", f"{v:.0f} / {mibs('python'):.1f} MiB/s", f"{v/mibs('python'):.1f}x",
                 ">= 20x", goal(v / mibs("python") >= 20)))
rss = times["verify"][1]
rows.append(("verify peak RSS", f"{rss:.0f} MiB (--oracle {times['verify_oracle'][1]:.0f} MiB)", "-", "<= 100 MiB",
             goal(rss <= 100)))
cf, co = rate["BM_CasesFast"], rate["BM_CasesOracle"]
rows.append(("property cases/s in-process (reference packer)", f"{cf:,.0f} / {co:,.0f} oracle", f"{cf/co:.1f}x", "-", "-"))
ef, eo = cases / times["fuzz_fast"][0], cases / times["fuzz_oracle"][0]
rows.append(("property cases/s over exec (Python reference)", f"{ef:,.0f} / {eo:,.0f} oracle", f"{ef/eo:.2f}x", "-", "-"))

print("rates from CPU seconds; wall seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in wall.items()) + "\n")
print("| figure | measured | ratio | goal | |")
print("| --- | ---: | ---: | ---: | --- |")
for r in rows:
    print("| " + " | ".join(r) + " |")
ctx = report["context"]
print(f"\nmachine: {ctx.get('num_cpus')} CPUs @ {ctx.get('mhz_per_cpu')} MHz, load average {ctx.get('load_avg')}; "
      f"dump {mib:,.0f} MiB")
PY
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), nproc $(nproc), load $(cut -d' ' -f1-3 /proc/loadavg); packoracle $(git describe --always --dirty)"
