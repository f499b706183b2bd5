"""Cases per second of attention consumers driven by packoracle.fuzz, in one run (2-core machine: the goal is
≥ 200 cases/s at the mask level and ≥ 20 at the forward level). The baseline is a numpy consumer answering
segment ids (the kit's own cost: generation, densifying, the core's check); each model cell is reported as its
rate and as the share of a case's time the model takes.

    build-venv/bin/python bench/consumers/rates.py [--cases 300]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import packoracle
from packoracle.adapters.transformers_models import ModelConsumer


def segment_ids(microbatch: dict, policy: dict) -> list:
    return [np.asarray(row["doc_ids"]) for row in microbatch["rows"]]


def rate(consumer, cases: int) -> float:
    start = time.perf_counter()
    result = packoracle.fuzz(None, "reference", microbatch_consumer=consumer, cases=cases, seed=1)
    return result.cases / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=300)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    base = rate(segment_ids, args.cases)
    print(f"| consumer | level | cases/s | model's share of a case |\n|---|---|---|---|")
    print(f"| numpy segment ids (baseline) | - | {base:,.0f} | - |")
    for family, attention, level in [("llama", "sdpa", "mask"), ("llama", "eager", "mask"),
                                     ("llama", "flex_attention", "mask"), ("llama", "sdpa", "forward"),
                                     ("llama", "eager", "forward"), ("mistral", "sdpa", "forward"),
                                     ("llama4", "sdpa", "forward")]:
        cell = ModelConsumer(family, attention, "position_ids", False, level)
        drive = cell.consumer()
        packoracle.fuzz(None, "reference", microbatch_consumer=drive, cases=5, seed=2)  # build and warm the model
        r = rate(drive, args.cases)
        print(f"| {family} / {attention} (Trainer use_cache=False) | {level} | {r:,.0f} | {1 - r / base:.0%} |")


if __name__ == "__main__":
    main()
