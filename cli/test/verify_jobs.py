#!/usr/bin/env python3
"""verify --jobs N gives what --jobs 1 gives, byte for byte (issue 16, item 4), and progress only on a terminal
(item 6).

  verify_jobs.py --packoracle BIN --make-dump BIN --source-dir DIR --dir DIR

1. Every dump of the repository (examples/dumps, the fuzz corpus of packed-batch files, broken ones included):
   stdout, stderr and exit status of --jobs 1 against --jobs 2, 3 and 8 (text and --format json).
2. Several files at once: generated dumps of four rank files, interleaved and documents-first; the corpus
   files two by two (their policies differ: the same refusal); a rank file with a line broken in the middle.
3. Progress: with stderr not a terminal nothing is added (stderr empty on a clean dump); with stderr a pty the
   progress line appears (PACKORACLE_PROGRESS_AFTER=0 starts it at once) and stdout is unchanged.
"""
import argparse
import glob
import os
import pty
import subprocess
import sys

failures = []


def run(argv, env=None):
    p = subprocess.run(argv, capture_output=True, env=env)
    return p.returncode, p.stdout, p.stderr


def same(bin_, files, extra=()):
    base = run([bin_, "verify", *files, "--jobs", "1", *extra])
    for jobs in ("2", "3", "8"):  # 8: four rank files parsed ahead at once (fewer jobs than files: one thread)
        got = run([bin_, "verify", *files, "--jobs", jobs, *extra])
        if got != base:
            failures.append(f"--jobs {jobs} differs from --jobs 1 on {' '.join(files)} {' '.join(extra)}: "
                            f"exit {got[0]} vs {base[0]}\n{got[2][-500:]!r}\n{base[2][-500:]!r}")
    return base


def generated(make_dump, out_dir):
    dumps = []
    for order in ("interleaved", "documents-first"):
        stem = os.path.join(out_dir, f"ranks_{order}.jsonl")
        subprocess.run([make_dump, stem, "torchtune-packed", "3", "512", "2", "5", "--order", order, "--ranks", "4"],
                       check=True, capture_output=True)
        dumps.append(sorted(glob.glob(os.path.join(out_dir, f"ranks_{order}.rank*.jsonl"))))
    return dumps


def broken_copy(path, out):
    lines = open(path, "rb").read().split(b"\n")
    k = len(lines) // 2
    lines[k] = lines[k][: len(lines[k]) // 2]  # cut in the middle: not JSON
    open(out, "wb").write(b"\n".join(lines))
    return out


def progress_on_a_pty(bin_, files):
    env = dict(os.environ, PACKORACLE_PROGRESS_AFTER="0")
    master, slave = pty.openpty()
    p = subprocess.Popen([bin_, "verify", *files], stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    err = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the pty
            break
        if not chunk:
            break
        err += chunk
    out = p.stdout.read()
    p.wait()
    os.close(master)
    return p.returncode, out, err


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--packoracle", required=True)
    ap.add_argument("--make-dump", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--dir", required=True)
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    bin_ = args.packoracle

    repo = sorted(glob.glob(os.path.join(args.source_dir, "examples/dumps/*.jsonl")) +
                  glob.glob(os.path.join(args.source_dir, "fuzz/corpus/packed_batch/*.jsonl")))
    for path in repo:
        same(bin_, [path])
    for path in repo[:8]:
        same(bin_, [path], ("--format", "json"))
    for a, b in zip(repo[::2], repo[1::2]):
        same(bin_, [a, b])

    interleaved, documents_first = generated(args.make_dump, args.dir)
    for files in (interleaved, documents_first):
        status, out, err = same(bin_, files)
        if status != 0 or b"verdict: clean" not in out:
            failures.append(f"the generated rank files {files[0]}... are not clean: exit {status}\n{err[-500:]!r}")
        same(bin_, files, ("--format", "json"))
    broken = broken_copy(interleaved[2], os.path.join(args.dir, "broken.rank2.jsonl"))
    status, _, err = same(bin_, interleaved[:2] + [broken] + interleaved[3:])
    if status != 2 or b"broken.rank2.jsonl:" not in err:
        failures.append(f"a broken rank file: exit {status}, {err!r}")

    # Progress: nothing extra off a terminal, a line on one, and the same report either way.
    status, out, err = run([bin_, "verify", *interleaved], env=dict(os.environ, PACKORACLE_PROGRESS_AFTER="0"))
    if err:
        failures.append(f"stderr not a terminal, yet verify wrote to it: {err[:200]!r}")
    status_tty, out_tty, err_tty = progress_on_a_pty(bin_, interleaved)
    if (status_tty, out_tty) != (status, out):
        failures.append("stderr on a terminal changed the report")
    if b"MiB read" not in err_tty or b"steps" not in err_tty:
        failures.append(f"no progress line on a terminal: {err_tty[:300]!r}")

    print(f"{len(repo)} repository dumps, {len(interleaved)}-file generated dumps: "
          f"{'all the same' if not failures else f'{len(failures)} failure(s)'}")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
