#!/usr/bin/env bash
# verify on dumps of every shape (issue 16, items 3 and 4), in one run: interleaved and documents-first, short
# and long documents, one file and eight rank files, and one step of 140 micro-batches (issue 26). On each: verify --jobs 1 and --jobs 2, the Python
# checker (bench/audit/python_checker.py) and the single-threaded simdjson parse of the same bytes
# (bench/audit/simdjson_parse.cc), wall and CPU seconds and peak RSS of each; then the table, printed and
# written into bench/README.md between <!-- audit-shapes:begin --> and <!-- audit-shapes:end -->.
#
#   bench/audit/shapes.sh            # MB=256 per shape: about 5 minutes on 2 cores, dumps kept in $DUMP_DIR
# Environment: BUILD_DIR (build), MB (256), DUMP_DIR (/tmp/packoracle-shapes), README (bench/README.md; "-": print only),
#   REPS (3: rounds of verify and simdjson, the fastest wall time kept; the Python checker runs once).
#
# Ratios divide rates of the same run. The goals are on wall clock (two cores are what --jobs 2 buys), so
# the load average at the start and the end is printed with the table: on a shared machine the neighbours
# move every figure.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
build="${BUILD_DIR:-build}"
mb="${MB:-256}"
dump_dir="${DUMP_DIR:-/tmp/packoracle-shapes}"
readme="${README:-bench/README.md}"
reps="${REPS:-3}"
py="$(python3 -c 'import sys; print(sys.executable)')"
mkdir -p "$dump_dir"

cmake --build "$build" -j2 --target packoracle audit_make_dump audit_simdjson_parse >&2
cli="$dump_dir/packoracle"
cp "$build/cli/packoracle" "$cli"  # one binary timed throughout
make_dump="$build/cli/audit_make_dump"  # cli/ defines the target when the tests are built, bench/ otherwise
[[ -x "$make_dump" ]] || make_dump="$build/bench/audit_make_dump"
simdjson_parse="$build/bench/audit_simdjson_parse"
load_start="$(cut -d' ' -f1-3 /proc/loadavg)"

# name | make_dump arguments after OUT (L = 8192 slots; rank files: 2 rows a micro-batch, 4 micro-batches a rank a step)
shapes=(
  "interleaved|torchtune-packed $mb 8192 8 1"
  "documents-first|torchtune-packed $mb 8192 8 1 --order documents-first"
  "short documents|torchtune-packed $mb 8192 8 1 --documents short"
  "long documents|torchtune-packed $mb 8192 8 1 --documents long"
  "8 rank files|torchtune-packed $mb 8192 2 1 --ranks 8"
  "8 rank files, documents-first|torchtune-packed $mb 8192 2 1 --ranks 8 --order documents-first"
  # Gradient accumulation: one optimizer step of 140 micro-batches (9.2 M slots, 240 MiB; 200 MiB written: the
  # first step already passes it), documents first, the producer's denominator alone (issue 26).
  "one big step, documents-first, 140 micro-batches|torchtune-packed 200 8192 8 1 --order documents-first --microbatches 140 --totals denominator"
)

times="$dump_dir/times.tsv"
: >"$times"
rm -f "$dump_dir/sizes.tsv.new"
run() {  # shape, tool, expected exit status, command...
  local shape="$1" tool="$2" want="$3" t0 t1 status=0
  shift 3
  t0=$(date +%s%N)
  /usr/bin/time -f '%U %S %M' -o "$dump_dir/rss.txt" "$@" >"$dump_dir/out.txt" 2>&1 || status=$?
  t1=$(date +%s%N)
  [[ $status == "$want" ]] || { tail -20 "$dump_dir/out.txt" >&2; echo "$shape / $tool exited $status" >&2; exit 1; }
  read -r user sys kb < <(tail -1 "$dump_dir/rss.txt")
  printf '%s\t%s\t%s\t%s\t%s\n' "$shape" "$tool" "$(( (t1 - t0) / 1000000 ))" "$(python3 -c "print($user + $sys)")" "$kb" >>"$times"
  echo "$shape / $tool: $(( (t1 - t0) / 1000000 )) ms" >&2
}

for entry in "${shapes[@]}"; do
  shape="${entry%%|*}"
  read -r -a make_args <<<"${entry#*|}"
  stem="$dump_dir/$(echo "$shape" | tr -c 'a-z0-9\n' '_').jsonl"
  made="$stem.made"
  if [[ ! -s "$made" ]]; then  # its summary line is written once the dump is complete
    "$make_dump" "$stem" "${make_args[@]}" >"$made.new"
    mv "$made.new" "$made"
  fi
  mapfile -t files < <(ls "$stem" 2>/dev/null || ls "${stem%.jsonl}".rank*.jsonl)
  cat "${files[@]}" >/dev/null  # every tool reads from the page cache
  for ((round = 0; round < reps; ++round)); do  # round-robin: the neighbours' load falls on all three alike
    run "$shape" verify_j1 0 "$cli" verify --jobs 1 "${files[@]}"
    grep -q 'verdict: clean' "$dump_dir/out.txt" || { echo "$shape: verify did not find the dump clean" >&2; exit 1; }
    cp "$dump_dir/out.txt" "$dump_dir/verify_j1.txt"
    run "$shape" verify_j2 0 "$cli" verify --jobs 2 "${files[@]}"
    cmp -s "$dump_dir/out.txt" "$dump_dir/verify_j1.txt" || { echo "$shape: --jobs 2 and --jobs 1 differ" >&2; exit 1; }
    run "$shape" simdjson 0 sh -c 'for f in "$@"; do "'"$simdjson_parse"'" "$f" >/dev/null || exit 1; done' sh "${files[@]}"
  done
  run "$shape" python 0 "$py" bench/audit/python_checker.py "${files[@]}"
  printf '%s\t%s\t%s\t%s\n' "$shape" "$(cat "${files[@]}" | wc -c)" "${#files[@]}" \
    "$(grep -o '[0-9]* document tokens' "$made" | cut -d' ' -f1)" >>"$dump_dir/sizes.tsv.new"
done
mv "$dump_dir/sizes.tsv.new" "$dump_dir/sizes.tsv"
load_end="$(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$times" "$dump_dir/sizes.tsv" "$readme" "$load_start" "$load_end" \
  "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), nproc $(nproc)" "$(git describe --always --dirty)" "$reps" <<'PY'
import sys
sys.path.insert(0, "bench/generation")
from readme_table import replace_between_markers

times_path, sizes_path, readme, load_start, load_end, machine, commit, reps = sys.argv[1:9]
runs, peak = {}, {}
for line in open(times_path):
    shape, tool, ms, cpu, kb = line.rstrip("\n").split("\t")
    run = (int(ms) / 1000, float(cpu), int(kb) / 1024)
    if (shape, tool) not in runs or run[0] < runs[(shape, tool)][0]:
        runs[(shape, tool)] = run  # the fastest round: the one the neighbours disturbed least
    peak[(shape, tool)] = max(peak.get((shape, tool), 0), run[2])
sizes = []
for line in open(sizes_path):
    shape, size, files, tokens = line.rstrip("\n").split("\t")
    sizes.append((shape, int(size) / 2**20, int(files), int(tokens)))

def ok(good): return "met" if good else "**not met**"

out = ["| shape | MiB | files | verify --jobs 1 | verify --jobs 2 | simdjson parse | Python checker | "
       "--jobs 2 / Python (≥ 20×) | --jobs 2 / simdjson (≥ 1.5×) | --jobs 1 / simdjson | --jobs 1 / Python by CPU time | "
       "peak RSS --jobs 1 / 2 | RSS bound | |",
       "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
for shape, mib, files, tokens in sizes:
    rate = {tool: mib / runs[(shape, tool)][0] for tool in ("verify_j1", "verify_j2", "simdjson", "python")}
    vs_python = rate["verify_j2"] / rate["python"]
    vs_simd = rate["verify_j2"] / rate["simdjson"]
    rss1, rss2 = peak[(shape, "verify_j1")], peak[(shape, "verify_j2")]  # the highest of the rounds
    # Documents-first holds every document at once: 64 MiB + 8 B a token; interleaved dumps: 100 MiB.
    first = "documents-first" in shape
    bound = 64 + 8 * tokens / 2**20 if first else 100
    cell = lambda tool: f"{rate[tool]:.0f} MiB/s ({runs[(shape, tool)][0]:.1f} s, CPU {runs[(shape, tool)][1]:.1f} s)"
    out.append(f"| {shape} | {mib:.0f} | {files} | {cell('verify_j1')} | {cell('verify_j2')} | {cell('simdjson')} | "
               f"{cell('python')} | {vs_python:.1f}× | {vs_simd:.2f}× | {rate['verify_j1'] / rate['simdjson']:.2f}× | "
               f"{runs[(shape, 'python')][1] / runs[(shape, 'verify_j1')][1]:.1f}× | "
               f"{rss1:.0f} / {rss2:.0f} MiB | {bound:.0f} MiB | "
               f"{ok(vs_python >= 20)}, {ok(vs_simd >= 1.5)}, RSS {ok(max(rss1, rss2) <= bound)} |")
out.append("")
out.append(f"`bench/audit/shapes.sh` at {commit}: {machine}; load average {load_start} at the start, {load_end} at "
           f"the end; rates from wall clock, the fastest of {reps} rounds for verify and simdjson (the Python checker once); the RSS bound of a documents-first dump is 64 MiB + 8 B for each of its "
           f"document tokens (all held at once), 100 MiB otherwise.")
text = "\n".join(out) + "\n"
print(text)
if readme != "-":
    replace_between_markers(readme, "audit-shapes", text)
PY
