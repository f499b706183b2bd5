"""check_batch with its id scans left to the audit (the default) against the same build scanning them in
`_core.batch_view` first (`defer_ids=False`), in one process, alternating rounds of each on the 8 × 8192
benchmark batch (workload.py), `time.process_time`, minimums and medians of the rounds' means
(bench/README.md, "A tenth pair"):

    PYTHONPATH=python/src python bench/python/ids_deferred_ab.py 8 500
"""

from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import packoracle  # noqa: E402
from packoracle import _batch  # noqa: E402
from workload import make_workload  # noqa: E402


def main(rounds: int, calls: int) -> None:
    w = make_workload("torch").with_array_documents()
    deferred = _batch._core_view

    def scanned_first(*args):  # the last argument is defer_ids
        return deferred(*args[:-1], False)

    def mean_call() -> float:
        t = time.process_time()
        for _ in range(calls):
            packoracle.check_batch(w.batch, w.documents, "reference", producer=w.producer)
        return (time.process_time() - t) / calls * 1e6

    times: dict[str, list[float]] = {"deferred": [], "scanned first": []}
    try:
        for _ in range(rounds):
            _batch._core_view = deferred
            times["deferred"].append(mean_call())
            _batch._core_view = scanned_first
            times["scanned first"].append(mean_call())
    finally:
        _batch._core_view = deferred
    for side, values in times.items():
        print(f"{side}: {min(values):.0f} us a call by minimums, {statistics.median(values):.0f} by medians")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8, int(sys.argv[2]) if len(sys.argv) > 2 else 500)
