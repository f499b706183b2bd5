#!/usr/bin/env bash
# Audit throughput: `packoracle verify` on a large generated packed-batch dump, in MiB/s, against
#   (a) raw_parse: the same file read line by line and parsed with nlohmann::json, nothing checked, and
#   (b) python_checker.py: a plain stdlib Python checker of the same invariants.
#   and, to say where verify's time goes, read_records: the kit's PackedBatchReader alone (parse + records),
#   and, where libsimdjson-dev is installed, simdjson_parse: every value visited with simdjson On-Demand, the
#   parse ceiling a fast verifier could build on.
# Goal (issue "Measure"): verify >= 20x the Python checker. The table reports whatever is measured.
#
# Usage: bench/audit/run.sh
# Environment:
#   MB=64                 dump size in MiB (MB=1024 for a 1 GiB run)
#   PRESET=torchtune-packed, ROW_LENGTH=2048, ROWS=8 (rows per micro-batch), SEED=1
#   REPS=3                rounds (each runs every tool once); the table shows medians and the minimum
#   BUILD_DIR=build       the configured build tree (bench on); CXX=g++ for the fallback compile
#   DUMP_DIR=/tmp/packoracle-audit   where the dump goes (reused when it exists; REGEN=1 rewrites it)
#   PERF=1                also `perf record` one verify run and print the inclusive share of its main functions
#   MUTANTS=1             first plant 8 bugs in a small dump and require both checkers to reject each
#
# Builds make_dump, raw_parse, read_records (and simdjson_parse) as CMake targets (audit_make_dump,
# audit_raw_parse, audit_read_records, audit_simdjson_parse) when bench/CMakeLists.txt declares them, otherwise
# compiles them with $CXX against the build tree's packoracle libraries. The packoracle binary is copied
# first, so one binary is timed throughout.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
build="${BUILD_DIR:-build}"
mb="${MB:-64}"
preset="${PRESET:-torchtune-packed}"
row_length="${ROW_LENGTH:-2048}"
rows="${ROWS:-8}"
seed="${SEED:-1}"
reps="${REPS:-3}"
dump_dir="${DUMP_DIR:-/tmp/packoracle-audit}"
cxx="${CXX:-g++}"
here="bench/audit"
# The interpreter itself, not a version-manager shim (pyenv's costs ~0.6 s a start here, charged to nobody).
py="$(python3 -c 'import sys; print(sys.executable)')"

die() { echo "run.sh: $*" >&2; exit 1; }

[[ -f "$build/CMakeCache.txt" ]] || die "$build is not a configured build tree (cmake -S . -B $build -DPACKORACLE_BUILD_BENCH=ON)"
mkdir -p "$dump_dir"
bin_dir="$dump_dir/bin"
mkdir -p "$bin_dir"

# ---- build --------------------------------------------------------------------------------------------
cmake --build "$build" -j2 --target packoracle packoracle_interchange packoracle_properties packoracle_oracle
# A snapshot of the CLI: other engineers rebuild the tree while this runs; every verify run times one binary.
cli="$bin_dir/packoracle"
cp "$build/cli/packoracle" "$cli"
if cmake --build "$build" --target help 2>/dev/null | grep -q 'audit_make_dump'; then
  cmake --build "$build" -j2 --target audit_make_dump audit_raw_parse audit_read_records
  make_dump="$build/bench/audit_make_dump"
  raw_parse="$build/bench/audit_raw_parse"
  read_records="$build/bench/audit_read_records"
  simdjson_parse=""
  if cmake --build "$build" --target help 2>/dev/null | grep -q 'audit_simdjson_parse'; then
    cmake --build "$build" -j2 --target audit_simdjson_parse
    simdjson_parse="$build/bench/audit_simdjson_parse"
  fi
  how="CMake targets audit_make_dump, audit_raw_parse, audit_read_records${simdjson_parse:+, audit_simdjson_parse}"
else
  # Fallback: the same flags as the build tree's RelWithDebInfo (-O2 -g -DNDEBUG) and packoracle_warnings.
  flags=(-std=c++20 -O2 -g -DNDEBUG -Wall -Wextra -Wpedantic -Wshadow)
  inc=(-Ioracle/include -Iproperties/include -Iinterchange/include)
  libs=("$build/interchange/libpackoracle_interchange.a" "$build/properties/libpackoracle_properties.a"
        "$build/oracle/libpackoracle_oracle.a" -lrapidcheck)
  make_dump="$bin_dir/make_dump"
  raw_parse="$bin_dir/raw_parse"
  read_records="$bin_dir/read_records"
  stale() { [[ ! -x "$1" || "$2" -nt "$1" || "${libs[0]}" -nt "$1" ]]; }
  stale "$make_dump" "$here/make_dump.cc" && "$cxx" "${flags[@]}" "${inc[@]}" "$here/make_dump.cc" "${libs[@]}" -o "$make_dump"
  stale "$raw_parse" "$here/raw_parse.cc" && "$cxx" "${flags[@]}" "$here/raw_parse.cc" -lbenchmark -o "$raw_parse"
  stale "$read_records" "$here/read_records.cc" &&
    "$cxx" "${flags[@]}" "${inc[@]}" "$here/read_records.cc" "${libs[@]}" -lbenchmark -o "$read_records"
  simdjson_parse=""
  if [[ -f /usr/include/simdjson.h ]]; then
    simdjson_parse="$bin_dir/simdjson_parse"
    stale "$simdjson_parse" "$here/simdjson_parse.cc" &&
      "$cxx" "${flags[@]}" "$here/simdjson_parse.cc" -lsimdjson -o "$simdjson_parse"
  fi
  how="compiled with $cxx against $build's libraries (no CMake targets)"
fi

# ---- optional: the Python checker must reject planted bugs, as verify does ----------------------------
if [[ "${MUTANTS:-0}" == 1 ]]; then
  small="$dump_dir/mutants_base.jsonl"
  "$make_dump" "$small" "$preset" 1 256 4 "$seed" >/dev/null
  for kind in label weight position segments denominator token rowshift dropspan; do
    if ! python3 "$here/mutate.py" "$small" "$kind" "$dump_dir/mutant.jsonl"; then
      echo "mutant $kind: not applicable to $preset"
      continue
    fi
    v=0; "$cli" verify "$dump_dir/mutant.jsonl" >/dev/null 2>&1 || v=$?
    p=0; "$py" "$here/python_checker.py" "$dump_dir/mutant.jsonl" >/dev/null 2>&1 || p=$?
    echo "mutant $kind: verify exit $v, python_checker exit $p"
    [[ $v == 1 && $p == 1 ]] || die "mutant $kind: both checkers must exit 1"
  done
fi

# ---- the dump -----------------------------------------------------------------------------------------
dump="$dump_dir/audit_${preset}_${mb}MiB_L${row_length}_R${rows}_s${seed}.jsonl"
if [[ ! -f "$dump" || "${REGEN:-0}" == 1 || "$make_dump" -nt "$dump" ]]; then
  "$make_dump" "$dump" "$preset" "$mb" "$row_length" "$rows" "$seed"
fi
bytes=$(stat -c %s "$dump")
cat "$dump" >/dev/null  # every tool reads from the page cache

# ---- timing -------------------------------------------------------------------------------------------
# REPS rounds; each round runs every tool once, so load from other work on the machine falls on all of them
# alike. Wall clock from date(1); user+sys CPU time and peak RSS from /usr/bin/time when it exists (CPU time
# is far less sensitive to a busy machine than wall time). Every run must exit 0: the dump is clean.
times="$dump_dir/times.tsv"
: >"$times"
log="$dump_dir/last_output.txt"
run() {
  local name="$1" round="$2"; shift 2
  local t0 t1 status=0 cpu="0 0 0"
  t0=$(date +%s%N)
  if [[ -x /usr/bin/time ]]; then
    /usr/bin/time -f '%U %S %M' -o "$dump_dir/time.txt" "$@" >"$log" 2>&1 || status=$?
  else
    "$@" >"$log" 2>&1 || status=$?
  fi
  t1=$(date +%s%N)
  if [[ $status != 0 ]]; then
    cat "$log" >&2
    die "$name exited with $status on $dump (expected 0: the dump is clean)"
  fi
  [[ -x /usr/bin/time ]] && cpu="$(tail -1 "$dump_dir/time.txt")"
  printf '%s\t%s\t%s\t%s\n' "$name" "$round" "$(( (t1 - t0) / 1000000 ))" "${cpu// /$'\t'}" >>"$times"
  echo "round $round $name: $(( (t1 - t0) / 1000000 )) ms wall; $(tail -1 "$log")" >&2
}

load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
for ((round = 1; round <= reps; ++round)); do
  run verify "$round" "$cli" verify "$dump"
  grep -q 'verdict: clean' "$log" || { cat "$log" >&2; die "verify did not report the dump clean"; }
  run read_records "$round" "$read_records" "$dump"
  run raw_parse "$round" "$raw_parse" "$dump"
  [[ -n "$simdjson_parse" ]] && run simdjson_parse "$round" "$simdjson_parse" "$dump"
  run python "$round" "$py" "$here/python_checker.py" "$dump"
  grep -q ': clean;' "$log" || { cat "$log" >&2; die "python_checker did not report the dump clean"; }
done
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"

# ---- table --------------------------------------------------------------------------------------------
python3 - "$bytes" "$times" <<'PY'
import statistics, sys
b, path = int(sys.argv[1]), sys.argv[2]
wall, cpu, rss = {}, {}, {}
for line in open(path):
    name, _, ms, user, system, kb = line.rstrip("\n").split("\t")
    wall.setdefault(name, []).append(int(ms) / 1000)
    cpu.setdefault(name, []).append(float(user) + float(system))
    rss[name] = max(rss.get(name, 0), int(kb))
reps = len(wall["verify"])
mib = b / (1 << 20)
med = {k: statistics.median(v) for k, v in wall.items()}
cpu_med = {k: statistics.median(v) for k, v in cpu.items()}
rate = {k: mib / v for k, v in med.items()}
names = {"verify": "`packoracle verify`",
         "read_records": "PackedBatchReader only (parse + records, no checks)",
         "raw_parse": "raw parse (nlohmann-json, nothing checked)",
         "simdjson_parse": "simdjson On-Demand, every value (a fast verifier's ceiling; not verify)",
         "python": "Python checker (stdlib json, same invariants)"}
print(f"| tool | MiB | wall s (median of {reps}; min) | CPU s | MiB/s (wall) | x raw parse | x python | peak RSS |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for k in [t for t in ("verify", "read_records", "raw_parse", "simdjson_parse", "python") if t in med]:
    r = f"{rss[k] / 1024:,.0f} MiB" if rss[k] else "n/a"
    print(f"| {names[k]} | {mib:,.1f} | {med[k]:,.2f} ({min(wall[k]):,.2f}) | {cpu_med[k]:,.2f} | {rate[k]:,.1f} | "
          f"{rate[k] / rate['raw_parse']:.2f} | {rate[k] / rate['python']:.2f} | {r} |")
goal = rate["verify"] / rate["python"]
cpu_goal = cpu_med["python"] / cpu_med["verify"] if cpu_med["verify"] else float("nan")
best = min(wall["python"]) / min(wall["verify"])
print(f"\nverify / Python checker = {goal:.2f}x by median wall clock, {best:.2f}x by best runs, {cpu_goal:.2f}x by "
      f"CPU time (goal >= 20x: {'met' if min(goal, best) >= 20 else 'NOT met'})")
user = {}
for line in open(path):
    name, _, _, u, _, _ = line.rstrip("\n").split("\t")
    user.setdefault(name, []).append(float(u))
v, rr, rp = (statistics.median(user[k]) for k in ("verify", "read_records", "raw_parse"))
if v > 0:
    print(f"rough split of verify's {v:.2f} user-CPU s (medians, by difference of noisy numbers; PERF=1 profiles): "
          f"JSON parse {100 * rp / v:.0f}%, json -> records {100 * (rr - rp) / v:.0f}%, "
          f"checks, copies and the rest {100 * (v - rr) / v:.0f}%")
PY
echo
echo "dump: $dump ($bytes bytes; preset $preset, L=$row_length, $rows rows/micro-batch, seed $seed)"
echo "tools: $how; packoracle at $(git -C "$root" describe --always --dirty 2>/dev/null || echo '?'); $py $("$py" -c 'import sys; print(sys.version.split()[0])')"
echo "machine: nproc $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load average (1/5/15 min) before $load_before, after $load_after"

# ---- optional profile ---------------------------------------------------------------------------------
# Inclusive time (children included) of the functions that matter, from DWARF call graphs (the build has no
# frame pointers). A few hundred samples a second: read the percentages to +-2.
if [[ "${PERF:-0}" == 1 ]] && command -v perf >/dev/null; then
  perf record -q -F 400 --call-graph dwarf,16384 -o "$dump_dir/verify.perf" "$cli" verify "$dump" >/dev/null 2>&1 || true
  echo
  echo "perf: inclusive share of one verify run"
  perf report -i "$dump_dir/verify.perf" --children --stdio --sort symbol -g none 2>/dev/null |
    grep -E '^ +[0-9]+\.[0-9]+%' | grep -v '(inlined)' |
    sed -E 's/nlohmann::json_abi_v[0-9_]+::/nlohmann::/g; s/<[^ ]*( [^ ]*)*>//; s/ +- +- *$//' |
    grep -E 'Verifier::|PackedBatchReader|ParsePackedBatchRecord|FromJson|Ints|to_string|CheckCase|Materialize|Checker::|getline|parser|destroy|Effective|CandidateMicrobatch::|CandidateRow::' |
    cut -c1-120 | head -30
fi
