"""The guard's cost without pytest-benchmark in between (bench/README.md, the sixth and seventh pairs): in one
process, alternating single rounds of the 8 collator calls and the 8 guarded calls of test_bench_guard.py,
`time.process_time`, medians and minimums. Run it once per tree, interleaved, for a before/after:

    PYTHONPATH=$TREE/python/src python bench/python/guard_ab.py 200 after
"""

from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import transformers  # noqa: E402

import test_bench_guard as tb  # noqa: E402
from packoracle import guard  # noqa: E402


def main(rounds: int, label: str) -> None:
    collator = transformers.DataCollatorWithFlattening(return_flash_attn_kwargs=True)
    guarded = guard.wrap_collator(collator, "hf-flatten")
    rows = tb.ROWS_OF_FEATURES
    for f in rows:
        guarded(f)
    alone, checked = [], []
    for _ in range(rounds):
        t0 = time.process_time()
        for f in rows:
            collator(f)
        t1 = time.process_time()
        for f in rows:
            guarded(f)
        t2 = time.process_time()
        alone.append(t1 - t0)
        checked.append(t2 - t1)
    a, g = statistics.median(alone), statistics.median(checked)
    print(f"{label}: collator {a * 1e3:.2f} ms, guarded {g * 1e3:.2f} ms, the guard {(g - a) / len(rows) * 1e6:.0f} us "
          f"a call ({(g / a - 1) * 100:.0f}%); minimums {min(alone) * 1e3:.2f}, {min(checked) * 1e3:.2f} ms "
          f"({(min(checked) / min(alone) - 1) * 100:.0f}%)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200, sys.argv[2] if len(sys.argv) > 2 else "guard")
