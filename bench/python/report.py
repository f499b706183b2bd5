#!/usr/bin/env python3
"""Prints the tables of bench/python/run.sh from pytest-benchmark JSON files: times, and ratios of times measured
in the same run (the figures that count on a shared machine), with the goals of issue 13.

    python3 report.py CHECK_JSON [FUZZ_JSON [GUARD_JSON]]

Times are medians (min in brackets). check and binding benchmarks run with time.process_time (CPU time of
this process); the fuzz ones with the wall clock, and their CPU time (for exec: the kit's and the candidate's)
is in extra_info.
"""

import json
import statistics
import sys


SLOTS = 8 * 8192  # the check benchmarks' micro-batch (workload.py)


def load(path):
    with open(path) as f:
        return json.load(f)["benchmarks"]


def fmt_time(s):
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.1f} µs"


def table(header, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda r: "  ".join(str(x).rjust(w) if k else str(x).ljust(w) for k, (x, w) in enumerate(zip(r, widths)))
    print(line(header))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line(r))
    print()


def CASES_FMT(cases, seconds):
    return f"{cases / seconds:,.0f} cases/s"


def verdict(ok):
    return "met" if ok else "NOT met"


def check_tables(benchmarks):
    by = {b["name"]: b["stats"] for b in benchmarks}
    med = {n: s["median"] for n, s in by.items()}
    mn = {n: s["min"] for n, s in by.items()}
    print("== check: one 8 x 8192 int64 micro-batch (CPU time per batch; ns per slot of its 65,536)")
    table(["benchmark", "median", "min", "ns/slot", "rounds"],
          [[n, fmt_time(med[n]), fmt_time(mn[n]), f"{med[n] / SLOTS * 1e9:.1f}", by[n]["rounds"]]
           for n in sorted(by, key=lambda n: med[n]) if not n.startswith(("resolve", "canonical", "effective", "span_", "read_"))])
    rows = []
    for docs in ("lists", "arrays"):
        for mode in ("spans", "derived"):
            cb = f"check_batch_{mode}[docs={docs}]"
            if cb not in med:
                continue
            for base, goal in (("pure_checker", 100), ("numpy_checker", 10)):
                b = f"{base}[docs={docs}]"
                if b in med:
                    r, rmin = med[b] / med[cb], mn[b] / mn[cb]
                    rows.append([f"{base} / check_batch_{mode}", docs, f"{r:,.1f}x", f"{rmin:,.1f}x", f">= {goal}x",
                                 verdict(r >= goal)])
        for mode in ("spans", "derived"):
            cb, py = f"check_batch_{mode}[docs={docs}]", f"check_batch_{mode}_python_reader[docs={docs}]"
            if cb in med and py in med:
                rows.append([f"python reader / core reader, {mode}", docs, f"{med[py] / med[cb]:,.2f}x",
                             f"{mn[py] / mn[cb]:,.2f}x", "-", "-"])
    if rows:
        table(["ratio", "documents", "median", "min", "goal", "goal"], rows)
    else:
        print("(no check_batch figures: packoracle._core.audit_records was not built)\n")

    # What check_batch converts before the audit: the policy, the documents (core_documents) and the batch
    # (batch_view; with the spans derived, the span derivation too). The rest is the C++ audit.
    parts = ["resolve_policy", "core_documents", "batch_view"]
    short = {"resolve_policy": "resolve", "core_documents": "documents", "batch_view": "batch"}
    rows = []
    for docs in ("lists", "arrays"):
        def get(name):
            for key in (f"{name}[docs={docs}]", name):
                if key in med:
                    return med[key]
            return None
        for mode in ("spans", "derived"):
            values = {p: get(p) for p in parts}
            if mode == "derived":
                values["batch_view"] = get("batch_view_derived")
            if any(v is None for v in values.values()):
                continue
            total = sum(values.values())
            cb = med.get(f"check_batch_{mode}[docs={docs}]")
            row = [f"{docs}, {mode}"] + [fmt_time(values[p]) for p in parts] + [fmt_time(total)]
            if cb is None:
                rows.append(row + ["-", "-", "-"])
            else:
                rows.append(row + [fmt_time(cb), fmt_time(cb - total), f"{total / cb:.1%}"])
    if rows:
        print("== binding: what check_batch converts, as a share of it (medians; with the spans derived, batch is "
              "batch_view_derived, the span derivation included; rest = check_batch - conversion: the C++ audit)")
        table(["documents"] + [short[p] for p in parts] + ["conversion", "check_batch", "rest", "share"], rows)
    else:
        print("(no binding figures: packoracle._core.batch_view was not built)\n")


def fuzz_tables(benchmarks):
    groups = {}
    for b in benchmarks:
        groups.setdefault(b["group"], {})[b["name"].split("[")[0].replace("test_", "")] = b
    for group, runs in sorted(groups.items()):
        print(f"== {group} (reference packer, same seed)")
        rows = []
        for name in ("inprocess_cli_batches", "inprocess_one_call", "exec"):
            b = runs.get(name)
            if b is None:
                continue
            cases = b["extra_info"]["cases"]
            wall, cpu = b["stats"]["median"], statistics.median(b["extra_info"]["cpu_s"])
            rows.append([name, cases, fmt_time(wall), f"{cases / wall:,.0f}", fmt_time(cpu), f"{cases / cpu:,.0f}",
                         b["stats"]["rounds"], ",".join(b["extra_info"].get("profiles", []))])
        table(["run", "cases", "wall", "cases/s", "CPU", "cases/s (CPU)", "rounds", "profiles"], rows)
        ex = runs.get("exec")
        b = runs.get("inprocess_cli_batches")
        if b is not None and "exec_wall_s" in b["extra_info"]:
            e = b["extra_info"]
            walls = [x / y for x, y in zip(e["exec_wall_s"], e["wall_s"])]
            cpus = [x / y for x, y in zip(e["exec_cpu_s"], e["cpu_s"])]
            r = statistics.median(walls)
            print(f"  exec / in-process, same cases, alternating rounds ({len(walls)}): wall median {r:.2f}x "
                  f"(range {min(walls):.2f}-{max(walls):.2f}), CPU median {statistics.median(cpus):.2f}x "
                  f"(range {min(cpus):.2f}-{max(cpus):.2f}); goal >= 3x by median wall: {verdict(r >= 3)}")
            print(f"    in those rounds: in-process {CASES_FMT(e['cases'], statistics.median(e['wall_s']))}, exec "
                  f"{CASES_FMT(e['cases'], statistics.median(e['exec_wall_s']))} (wall)")
        for name in ("inprocess_cli_batches", "inprocess_one_call"):
            b = runs.get(name)
            if b is None or ex is None:
                continue
            r_wall = ex["stats"]["median"] / b["stats"]["median"]
            r_cpu = statistics.median(ex["extra_info"]["cpu_s"]) / statistics.median(b["extra_info"]["cpu_s"])
            same = "same cases" if name == "inprocess_cli_batches" else "one profile for all cases: not the same cases"
            print(f"  exec (its own rounds) / {name}: median {r_wall:.2f}x wall, {r_cpu:.2f}x CPU ({same})")
        print()


def guard_table(benchmarks):
    """The guard's overhead on an 8 × 8192 batch: (guarded collator − collator) against the collator (goal ≤ 10%)
    and against collator + forward (goal ≤ 5%; the forward is left out with -k "not forward")."""
    med = {b["name"]: b["stats"]["median"] for b in benchmarks}
    collator, guarded = med["test_collator_alone"], med["test_collator_guarded"]
    forward = med.get("test_forward_small_llama")
    print("The guard (8 × 8192 batch, CPU time, medians)")
    rows = [["collator alone", fmt_time(collator)], ["collator guarded (every=1)", fmt_time(guarded)]]
    python_reader = med.get("test_collator_guarded_python_reader")
    if python_reader is not None:
        rows.append(["collator guarded, batches read by canonical_microbatch", fmt_time(python_reader)])
    if forward is not None:
        rows.append(["forward, small Llama", fmt_time(forward)])
    table(["", "time"], rows)
    if python_reader is not None:
        print(f"  with the Python batch reader: {(python_reader - collator) / collator * 100:.0f}% of the collator")
    overhead = guarded - collator
    line = f"  guard overhead: {fmt_time(overhead)} per batch = {overhead / collator * 100:.0f}% of the collator (goal <= 10%)"
    if forward is not None:
        line += f", {overhead / (collator + forward) * 100:.2f}% of collator + forward (goal <= 5%)"
    print(line)
    print()


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    check_tables(load(argv[1]))
    if len(argv) > 2:
        fuzz_tables(load(argv[2]))
    if len(argv) > 3:
        guard_table(load(argv[3]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
