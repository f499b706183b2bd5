#!/usr/bin/env python3
"""verify's memory bound on a documents-first dump (issue 16, item 3): every document record comes before the
first micro-batch (a legal order: DESIGN §5 asks only that documents precede the micro-batches using them),
so verify holds the whole dataset at once. Its peak RSS, read from the kernel for that process alone
(os.wait4), must stay within 64 MiB plus 8 bytes per document token held (before the compact store, verify
took 108 MiB here against a bound of 107.6 MiB; it now takes about 75).

--shape one-big-step (issue 26, item 1): the same bound on a dump of one optimizer step of 24 micro-batches of
8 x 8,192 slots (gradient accumulation; the producer gives a denominator alone), documents first, with
--jobs 1 and --jobs 2. Holding the step took 93 MiB here against a bound of 75; rows checked as they stream
take about 31 (--jobs 1) and 54 (--jobs 2).

  verify_memory.py --make-dump BIN --packoracle BIN --dir DIR [--mib MIB] [--shape documents-first|one-big-step]

Peak RSS means nothing under AddressSanitizer (its shadow memory): scripts/sanitize.sh leaves this test out.
"""
import argparse
import os
import re
import subprocess
import sys

BASE = 64 << 20  # bytes: the program, its buffers, the step being checked
PER_TOKEN = 8    # bytes per document token held


def peak_rss(argv, stdout_path):
    """Runs argv, its stdout to a file; returns (exit status, peak RSS in bytes) of that process alone."""
    with open(stdout_path, "wb") as out:
        child = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return child.returncode, usage.ru_maxrss * 1024  # Linux: KiB


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--make-dump", required=True)
    ap.add_argument("--packoracle", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--mib", type=int, default=160)
    ap.add_argument("--shape", choices=("documents-first", "one-big-step"), default="documents-first")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    name = args.shape.replace("-", "_")
    dump = os.path.join(args.dir, f"{name}.jsonl")
    if args.shape == "documents-first":
        shape, runs = [str(args.mib), "8192", "8", "3", "--order", "documents-first"], [[]]
    else:  # one step: a step's documents (41 MiB of JSON) already pass 30 MiB
        shape = ["30", "8192", "8", "1", "--order", "documents-first", "--microbatches", "24", "--totals", "denominator"]
        runs = [["--jobs", "1"], ["--jobs", "2"]]
    made = subprocess.run([args.make_dump, dump, "torchtune-packed", *shape],
                          check=True, capture_output=True, text=True).stdout
    print(made.strip())
    tokens = int(re.search(r"(\d+) document tokens", made).group(1))
    bound = BASE + PER_TOKEN * tokens
    failed = False
    for extra in runs:
        report = os.path.join(args.dir, f"{name}.verify.txt")
        status, rss = peak_rss([args.packoracle, "verify", dump, *extra], report)
        text = open(report).read()
        print(f"verify {' '.join(extra)}: exit {status}, peak RSS {rss / 2**20:.1f} MiB for {tokens:,} document "
              f"tokens held ({(rss - BASE) / tokens:.1f} B a token above 64 MiB); bound {bound / 2**20:.1f} MiB")
        if status != 0 or "verdict: clean" not in text:
            print(text[-2000:])
            print(f"FAIL: verify did not find the {args.shape} dump clean")
            failed = True
        elif rss > bound:
            print("FAIL: peak RSS above 64 MiB + 8 B per document token held")
            failed = True
    os.remove(dump)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
