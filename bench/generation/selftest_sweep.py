#!/usr/bin/env python3
"""`packoracle selftest` over many seeds: is every bundled bug caught by its invariant on every seed?

    python3 bench/generation/selftest_sweep.py --bin build/cli/packoracle --seeds 100 [--jobs 2]
        [--readme docs/generation.md] [--check]

Runs `packoracle selftest --seed S --format json` for S = 1..N (in parallel), then prints per bundled
candidate the seeds on which it did not behave as expected, and the median and worst cases to failure (a
buggy candidate) over the seeds. --readme rewrites the table between the README's
`<!-- selftest-sweep:begin -->` and `<!-- selftest-sweep:end -->` markers; --check exits 1 when any
candidate misbehaved on any seed (the ctest `selftest.sweep` runs 20 seeds this way).
"""
import argparse
import concurrent.futures
import json
import statistics
import subprocess
import sys
import time

from readme_table import replace_between_markers



def run_seed(binary: str, seed: int) -> list:
    out = subprocess.run([binary, "selftest", "--seed", str(seed), "--format", "json"],
                         capture_output=True, text=True)
    if out.returncode not in (0, 1):
        raise SystemExit(f"packoracle selftest --seed {seed} exited {out.returncode}: {out.stderr.strip()}")
    try:
        return json.loads(out.stdout)
    except json.JSONDecodeError as e:
        raise SystemExit(f"packoracle selftest --seed {seed}: output is not JSON ({e})")


def sweep(binary: str, seeds: int, jobs: int) -> dict:
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(run_seed, binary, s): s for s in range(1, seeds + 1)}
        for f in concurrent.futures.as_completed(futures):
            results[futures[f]] = f.result()
    return results


def table(results: dict, seconds: float) -> tuple:
    by_id = {}
    for seed, rows in sorted(results.items()):
        for row in rows:
            by_id.setdefault(row["id"], []).append((seed, row))
    lines = [f"{len(results)} seeds (1..{len(results)}), `packoracle selftest --seed S` at its default case count; "
             f"{seconds:.0f} s in all.", "",
             "| bundled bug | caught by | seeds caught | cases to failure: median | worst |",
             "|---|---|---|---|---|"]
    misses = []
    for cid, runs in by_id.items():
        bad = [seed for seed, row in runs if not row["as_expected"]]
        misses += [(cid, s) for s in bad]
        if runs[0][1]["expected"] == "pass":
            continue
        cases = [row["cases"] for _, row in runs if row["verdict"] == "caught"]
        med = statistics.median(cases) if cases else "-"
        worst = max(cases) if cases else "-"
        lines.append(f"| {cid} {runs[0][1]['name']} | {runs[0][1]['expected']} | {len(runs) - len(bad)}/{len(runs)} "
                     f"| {med:g} | {worst} |" if cases else
                     f"| {cid} {runs[0][1]['name']} | {runs[0][1]['expected']} | 0/{len(runs)} | - | - |")
    correct = [cid for cid, runs in by_id.items() if runs[0][1]["expected"] == "pass"]
    bad_correct = sorted({cid for cid, _ in misses if cid in correct})
    lines += ["", f"The {len(correct)} correct candidates passed on every seed." if not bad_correct else
              f"Correct candidates that failed on some seed: {', '.join(bad_correct)}."]
    return "\n".join(lines) + "\n", misses


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="build/cli/packoracle", help="the packoracle binary")
    ap.add_argument("--seeds", type=int, default=100, help="seeds 1..N (default 100)")
    ap.add_argument("--jobs", type=int, default=2, help="seeds run at once (default 2)")
    ap.add_argument("--readme", help="rewrite the table between the selftest-sweep markers of this file")
    ap.add_argument("--check", action="store_true", help="exit 1 when any candidate misbehaved on any seed")
    a = ap.parse_args()
    if a.seeds < 1 or a.jobs < 1:
        ap.error("--seeds and --jobs must be at least 1")
    start = time.monotonic()
    results = sweep(a.bin, a.seeds, a.jobs)
    text, misses = table(results, time.monotonic() - start)
    print(text, end="")
    for cid, seed in misses:
        print(f"MISSED: {cid} did not behave as expected on seed {seed} "
              f"(replay: {a.bin} selftest --only {cid} --seed {seed})", file=sys.stderr)
    if a.readme:
        replace_between_markers(a.readme, "selftest-sweep", text)
    return 1 if a.check and misses else 0


if __name__ == "__main__":
    sys.exit(main())
