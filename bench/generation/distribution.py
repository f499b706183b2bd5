#!/usr/bin/env python3
"""What `packoracle fuzz` generates, and how fast, with the Python reference exec candidate.

    python3 bench/generation/distribution.py --bin build/cli/packoracle [--before OLD_BIN] [--time 60]
        [--readme docs/generation.md]

Runs `fuzz --exec 'python3 exec/test/candidates/reference_packer.py' --preset reference --format json` twice per
binary, with --cases 1000 and with --time T, and prints one markdown table of the "generated" figures
(documents per case and per row, row lengths, tokens, shared rows, refusals, empty and zero-target steps)
with cases/s and tokens/s. --before adds the same columns for an older binary (one built from an earlier
commit), measured in the same run. --readme rewrites the table between `<!-- generation:begin -->` and
`<!-- generation:end -->`.
"""
import argparse
import json
import os
import subprocess
import sys

from readme_table import replace_between_markers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CANDIDATE = "python3 " + os.path.join(ROOT, "exec", "test", "candidates", "reference_packer.py")


def fuzz(binary: str, budget: list) -> dict:
    out = subprocess.run([binary, "fuzz", "--exec", CANDIDATE, "--preset", "reference", "--format", "json"] + budget,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{binary} fuzz {' '.join(budget)} exited {out.returncode}: {out.stderr.strip()[-400:]}")
    j = json.loads(out.stdout)
    if "generated" not in j:
        raise SystemExit(f"{binary}: its fuzz --format json says nothing of what it generated (too old?)")
    return j


def column(j: dict) -> dict:
    g = j["generated"]
    s = g["shares"]
    tokens = g["tokens_per_case"]["mean"] * g["cases"]
    pct = lambda x: f"{100 * x:.1f}%"
    spread = lambda d: f"{d['median']} / {d['p90']} / {d['max']}"
    return {
        "cases": f"{j['cases']:,}",
        "documents per case (median / p90 / max)": spread(g["documents_per_case"]),
        "row length L (median / p90 / max)": spread(g["row_length"]),
        "tokens per case (median / p90 / max)": spread(g["tokens_per_case"]),
        "most documents in one row (max)": str(g["most_documents_in_a_row"]["max"]),
        "cases with 2+ documents in a row (goal ≥ 60%)": pct(s["shared_row"]),
        "refused (goal ≤ 10%)": pct(s["refused"]),
        "no document (goal ≤ 5%)": pct(s["no_documents"]),
        "zero-target steps": pct(s["zero_targets"]),
        "with SFT masks": pct(s["sft_masks"]),
        "ranks (max)": str(g["ranks"]["max"]),
        "cases/s": f"{j['cases_per_second']:,.0f}",
        "tokens/s": f"{tokens / max(j['seconds'], 1e-9):,.0f}",
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="build/cli/packoracle")
    ap.add_argument("--before", help="an older packoracle binary, measured the same way")
    ap.add_argument("--time", type=float, default=60.0, help="the time-budget run's seconds (default 60)")
    ap.add_argument("--readme")
    a = ap.parse_args()
    runs = []
    for label, binary in ([("before", a.before)] if a.before else []) + [("now", a.bin)]:
        runs.append((f"{label}: --cases 1000", column(fuzz(binary, ["--cases", "1000"]))))
        runs.append((f"{label}: --time {a.time:g}", column(fuzz(binary, ["--time", str(a.time)]))))
    rows = list(runs[0][1].keys())
    lines = ["| `fuzz --exec reference_packer.py --preset reference` | " + " | ".join(n for n, _ in runs) + " |",
             "|---|" + "---:|" * len(runs)]
    lines += [f"| {r} | " + " | ".join(c[r] for _, c in runs) + " |" for r in rows]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if a.readme:
        replace_between_markers(a.readme, "generation", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
