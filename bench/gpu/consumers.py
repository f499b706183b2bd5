"""The consumer column's GPU cells: the tiny models of packoracle.adapters.transformers_models on CUDA, under
the kernels this repository's CI cannot run (SDPA and FlexAttention on a GPU, flash-attention 2/3 varlen where
installed), every feed × use_cache setting, at the forward level (FlexAttention has a backward on CUDA).

    python bench/gpu/consumers.py --device cuda --out consumers_gpu.md   # bench/gpu/device_lane.sh runs this
    python bench/gpu/consumers.py --device cpu --only llama                # a dry run of the code path

Writes the same table as docs/conformance.md's consumer column, with each cell's time, and exits 1 when a leak
has no examined finding (as `packoracle conformance` does)."""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import sys
import time


def attentions(device: str) -> list[str]:
    from packoracle.adapters.transformers_models import ATTENTION

    if device == "cpu":
        return list(ATTENTION)
    out = ["sdpa", "flex_attention", "eager"]
    if importlib.util.find_spec("flash_attn") is not None:
        out.append("flash_attention_2")
    if importlib.util.find_spec("flash_attn_interface") is not None:
        out.append("flash_attention_3")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="torch device (default cuda)")
    parser.add_argument("--cases", type=int, default=100, help="generated cases per cell (default 100)")
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--only", action="append", default=[], metavar="FAMILY", help="a model family; repeatable")
    parser.add_argument("--out", metavar="FILE", help="write the Markdown table here (default: standard output)")
    args = parser.parse_args()
    import torch

    from packoracle.adapters.transformers_models import CACHE, FAMILIES, FEEDS, ModelConsumer
    from packoracle.conformance._consumers import consumer_table, run_cell, unexplained_cells

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"consumers: torch {torch.__version__} sees no CUDA device", file=sys.stderr)
        return 2
    unknown = [f for f in args.only if f not in FAMILIES]
    if unknown:
        parser.error(f"--only: no family {', '.join(unknown)} (there are {', '.join(FAMILIES)})")
    families = args.only or list(FAMILIES)
    started = time.perf_counter()
    cells = []
    for family, attention, feed, cache in itertools.product(families, attentions(args.device), FEEDS, CACHE.values()):
        consumer = ModelConsumer(family, attention, feed, cache, "forward", args.device)
        cell = run_cell(consumer, args.cases, args.seed)
        cells.append(cell)
        detail = f" ({cell.detail})" if cell.detail else ""
        print(f"{consumer.name} [{args.device}]: {cell.verdict}{detail} [{cell.seconds:.1f} s]", file=sys.stderr,
              flush=True)
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else args.device
    text = (f"Consumer column on {name} (torch {torch.__version__}, {args.cases} cases a cell, seed {args.seed}, "
            f"{time.perf_counter() - started:.0f} s):\n\n" + consumer_table(cells, page="docs/conformance.md"))
    if args.out:
        open(args.out, "w").write(text)
    else:
        sys.stdout.write(text)
    for line in unexplained_cells(cells):
        print(f"consumers: {line}", file=sys.stderr)
    return 1 if unexplained_cells(cells) else 0


if __name__ == "__main__":
    sys.exit(main())
