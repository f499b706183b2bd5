"""What a default consumer run costs, and what reading an answer of 8,192 slots takes (bench/README.md,
"Attention consumers at real row lengths").

    PYTHONPATH=python/src python bench/consumers/consumer_rows.py [--cases N]

Prints, per answer form, the wall time of ``packoracle.fuzz(None, "reference", microbatch_consumer=...)`` at its
defaults (or ``--cases``) and the longest row it generated; then the peak memory (tracemalloc) and time of
packoracle._masks.runs on one answer of 8,192 slots (64 documents of 128 tokens) in each form.
"""

import argparse
import time
import tracemalloc

import numpy as np
import torch

import packoracle
from packoracle import _masks


def segment_ids(microbatch, policy):
    return [row["doc_ids"] for row in microbatch["rows"]]


def mask_mod(microbatch, policy):
    docs = torch.as_tensor(np.stack([np.asarray(row["doc_ids"]) for row in microbatch["rows"]]))
    return lambda b, h, q, kv: (docs[b, q] == docs[b, kv]) & (docs[b, kv] >= 0) & (kv <= q)


def dense(microbatch, policy):
    out = []
    for row in microbatch["rows"]:
        d = np.asarray(row["doc_ids"])
        out.append(np.tril((d[:, None] == d[None, :]) & (d[None, :] >= 0)))
    return out


def run(consumer, cases):
    start = time.perf_counter()
    kwargs = {"cases": cases} if cases else {}
    result = packoracle.fuzz(None, "reference", microbatch_consumer=consumer, stats=True, **kwargs)
    return time.perf_counter() - start, result.cases, result.generated["row_length"]["max"]


def conversion(answer, n):
    tracemalloc.start()
    start = time.perf_counter()
    _masks.runs(answer, n, 0, "bench")
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return seconds, peak


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=0, help="cases a run (0: fuzz's default)")
    args = parser.parse_args()
    for name, consumer in [("segment ids", segment_ids), ("mask_mod", mask_mod), ("dense n x n", dense)]:
        seconds, cases, longest = run(consumer, args.cases)
        print(f"fuzz, {name:12}: {cases} cases in {seconds:.1f} s, longest row {longest} slots")
    n = 8192
    ids = np.repeat(np.arange(64), n // 64)
    t = torch.as_tensor(ids)
    forms = {"segment ids": ids,
             "mask (q, k)": lambda q, k: (ids[q] == ids[k]) & (k <= q),
             "mask_mod": lambda b, h, q, kv: (t[q] == t[kv]) & (kv <= q),
             "dense n x n": np.tril(ids[:, None] == ids[None, :])}
    for name, answer in forms.items():
        seconds, peak = conversion(answer, n)
        print(f"runs() of {n} slots, {name:12}: {seconds * 1000:.0f} ms, peak {peak / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
