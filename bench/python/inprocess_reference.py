"""python/candidates/reference.py as an in-process packer for packoracle.fuzz, answering exactly what its exec
process answers: common.serve → common.answer does pack(request), assign(rows, request) (row k to micro-batch
k // micro_batch_rows, rank m % dp_world_size, micro_step m // dp_world_size), the producer totals of
reference_totals (the declared denominator over the step), and microbatch_records (the rows without their
"_" keys, such as "_targets"); a common.Refuse becomes the protocol's error record, here packoracle.Refuse.
The only difference left is the transport: Python objects instead of JSON lines over pipes.
"""

from __future__ import annotations

import os
import sys

import packoracle

CANDIDATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "candidates")
sys.path.insert(0, os.path.normpath(CANDIDATES))

import common  # noqa: E402  (the same module object reference.py imports)
import reference  # noqa: E402


def packer(request: dict) -> list:
    try:
        rows = reference.pack(request)
    except common.Refuse as e:
        raise packoracle.Refuse(str(e)) from None
    groups = common.assign(rows, request)
    totals = common.reference_totals(groups, request["policy"], request.get("target_losses") or {})
    return common.microbatch_records(groups, totals)


# The CLI's batches (cli/fuzz_command.cc): kBatch cases per Verify call, batch 0 with the run's seed, batch b
# with SplitMix64(seed + b); each batch draws its own profile.
K_BATCH = 32
_MASK = (1 << 64) - 1


def batch_seed(seed: int, batch: int) -> int:
    if batch == 0:
        return seed
    x = (seed + batch + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def fuzz_like_the_cli(cases: int, seed: int, decoder: bool) -> list:
    """packoracle.fuzz over exactly the cases `packoracle fuzz --cases N --seed S` generates: one call per batch
    of 32. Returns the FuzzResults."""
    results = []
    for b in range((cases + K_BATCH - 1) // K_BATCH):
        n = min(K_BATCH, cases - b * K_BATCH)
        results.append(packoracle.fuzz(packer, "reference", cases=n, seed=batch_seed(seed, b), decoder=decoder,
                                       name="reference"))
    return results
