"""The device lane's kernel cells: causal attention over a packed row (documents laid end to end, cu_seqlens
marking where each starts) by the kernels a trainer calls, compared, values and q/k/v gradients, with a float64
reference that attends inside each document alone.

    python bench/gpu/kernels.py --device cuda --out $OUT/kernels.md   # bench/gpu/device_lane.sh runs this
    python bench/gpu/kernels.py --device cpu --self-test              # the comparison shown to fail

Kernels: sdpa with a dense boolean mask; FlexAttention with a BlockMask built from document ids (compiled on
CUDA; eager and forward only on CPU, where it has no backward); torch's own varlen attention
(torch.nn.attention.varlen.varlen_attn) where the installed torch has it; flash_attn.flash_attn_varlen_func and
flash_attn_interface's (flash-attention 3) where importable. Cases: many short documents, remainder tiles
(lengths that are no multiple of 64 or 128), empty segments (repeated cu_seqlens entries), one long document.

A kernel that cannot run here is reported "n/a" with the reason, never as passing. Exit status 1 when a cell
fails or errs (and, with --self-test, when a deliberately wrong mask is not caught)."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import math
import sys
import time
from typing import Callable, Optional

import torch
import torch.nn.functional as F

# Per dtype: the largest error allowed, relative to max(1, max |reference|) of the tensor compared. bf16 keeps 8
# bits of mantissa (steps of 2^-8 near 1) and the kernels accumulate in fp32, so a few steps; fp32 allows TF32-
# like rounding in Triton's matmuls. A wrong mask moves outputs by O(0.1..1): far above both.
TOLERANCE = {torch.float32: 2e-3, torch.bfloat16: 4e-2, torch.float16: 1e-2}


@dataclasses.dataclass
class Case:
    name: str
    lengths: list[int]  # document lengths in order; 0 is an empty segment (a repeated cu_seqlens entry)

    @property
    def total(self) -> int:
        return sum(self.lengths)

    def describe(self) -> str:
        empty = self.lengths.count(0)
        tail = f", {empty} empty" if empty else ""
        return f"{len(self.lengths)} segments{tail}, {self.total} tokens"


def cases(device: str, seed: int) -> list[Case]:
    """The same shapes on every device except the long document, which is shorter on CPU (time, not meaning)."""
    rng = torch.Generator().manual_seed(seed)
    short = torch.randint(1, 18, (64,), generator=rng).tolist()
    return [
        Case("many_short", short),                                  # 64 documents of 1..17 tokens
        Case("remainder_tiles", [100, 37, 129, 63, 1, 255]),        # 585 tokens: 9 tiles of 64 and 9 over
        Case("empty_segments", [0, 5, 0, 0, 40, 0, 77, 1, 0]),      # cu_seqlens 0,0,5,5,5,45,45,122,123,123
        Case("one_long", [2048 if device.startswith("cuda") else 320]),
    ]


@dataclasses.dataclass
class Packed:
    """What the kernels are handed: cu_seqlens (int32, with the empty segments' repeats), the longest
    document, and one document id per token (for the masks; empty segments own no token)."""
    cu: torch.Tensor
    max_len: int
    doc: torch.Tensor

    @staticmethod
    def of(case: Case, device: str) -> "Packed":
        cu = torch.tensor([0] + list(torch.tensor(case.lengths).cumsum(0).tolist()), dtype=torch.int32)
        doc = torch.repeat_interleave(torch.arange(len(case.lengths)), torch.tensor(case.lengths))
        return Packed(cu.to(device), max(case.lengths), doc.to(device))


# ---- the reference: each document alone, in float64, with its own causal mask (no shared mask code) ----

def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: list[int]) -> torch.Tensor:
    """q, k, v: (T, H, D) float64. Attention inside each document alone; empty segments contribute nothing."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    outs, start = [], 0
    for n in lengths:
        if n == 0:
            continue
        qs, ks, vs = (x[start:start + n].transpose(0, 1) for x in (q, k, v))  # (H, n, D)
        scores = (qs @ ks.transpose(-1, -2)) * scale
        causal = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
        outs.append((scores.masked_fill(~causal, float("-inf")).softmax(-1) @ vs).transpose(0, 1))
        start += n
    return torch.cat(outs)


# ---- the kernels: each takes q, k, v as (T, H, D) and returns (T, H, D) ----

def dense_mask(doc: torch.Tensor) -> torch.Tensor:
    """Block-diagonal causal: query i sees key j when both lie in the same document and j <= i."""
    pos = torch.arange(doc.numel(), device=doc.device)
    return (doc[:, None] == doc[None, :]) & (pos[:, None] >= pos[None, :])


def sdpa_with(mask_of: Callable[[torch.Tensor], torch.Tensor]) -> Callable:
    def run(q, k, v, packed: Packed):
        q4, k4, v4 = (x.transpose(0, 1).unsqueeze(0) for x in (q, k, v))  # (1, H, T, D)
        out = F.scaled_dot_product_attention(q4, k4, v4, attn_mask=mask_of(packed.doc))
        return out.squeeze(0).transpose(0, 1)
    return run


def wrong_causal_only(doc: torch.Tensor) -> torch.Tensor:
    """Self-test: causal across the whole row, no document boundary (documents read their predecessors)."""
    return dense_mask(torch.zeros_like(doc))


def wrong_off_by_one(doc: torch.Tensor) -> torch.Tensor:
    """Self-test: every boundary one token late (each document's first token counted in the one before)."""
    return dense_mask(torch.cat([doc[:1], doc[:-1]]))


_flex_compiled: dict[str, Callable] = {}


def flex(q, k, v, packed: Packed):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    doc = packed.doc

    def same_document_causal(b, h, qi, ki):
        return (doc[qi] == doc[ki]) & (qi >= ki)

    device = str(q.device)
    n = doc.numel()
    block_mask = create_block_mask(same_document_causal, None, None, n, n, device=device)
    if device.startswith("cuda"):  # eager flex on CUDA is a slow reference path; trainers compile it
        fn = _flex_compiled.setdefault(device, torch.compile(flex_attention, dynamic=False))
    else:
        fn = flex_attention
    q4, k4, v4 = (x.transpose(0, 1).unsqueeze(0) for x in (q, k, v))
    return fn(q4, k4, v4, block_mask=block_mask).squeeze(0).transpose(0, 1)


def torch_varlen(q, k, v, packed: Packed):
    from torch.nn.attention.varlen import varlen_attn

    # torch 2.10/2.11 take is_causal=True; later releases a window (-1, 0) for causal.
    params = inspect.signature(varlen_attn).parameters
    causal = {"is_causal": True} if "is_causal" in params else {"window_size": (-1, 0)}
    out = varlen_attn(q, k, v, packed.cu, packed.cu, packed.max_len, packed.max_len, **causal)
    return out[0] if isinstance(out, tuple) else out


def flash_varlen(module: str) -> Callable:
    def run(q, k, v, packed: Packed):
        fn = importlib.import_module(module).flash_attn_varlen_func
        out = fn(q, k, v, packed.cu, packed.cu, packed.max_len, packed.max_len, causal=True)
        return out[0] if isinstance(out, tuple) else out  # some flash-attention 3 builds also return the lse
    return run


# ---- availability: why a kernel cannot run here (None: it can) ----

def missing_module(name: str) -> Optional[str]:
    try:
        importlib.import_module(name)
        return None
    except Exception as e:  # ImportError, or a build for another CUDA/torch raising on import
        return f"import {name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def varlen_missing() -> Optional[str]:
    why = missing_module("torch.nn.attention.varlen")
    if why:
        return f"torch {torch.__version__} has no torch.nn.attention.varlen"
    if not hasattr(importlib.import_module("torch.nn.attention.varlen"), "varlen_attn"):
        return f"torch {torch.__version__}: torch.nn.attention.varlen has no varlen_attn"
    return None


@dataclasses.dataclass
class Kernel:
    name: str
    run: Callable
    missing: Callable[[], Optional[str]]
    dtypes_cuda: tuple
    backward_cpu: bool = True
    expect_fail: bool = False  # the self-test's wrong masks


def kernels(self_test: bool) -> list[Kernel]:
    out = [
        Kernel("sdpa dense mask", sdpa_with(dense_mask), lambda: None, (torch.float32, torch.bfloat16)),
        Kernel("flex_attention", flex, lambda: missing_module("torch.nn.attention.flex_attention"),
               (torch.float32, torch.bfloat16), backward_cpu=False),
        Kernel("torch varlen_attn", torch_varlen, varlen_missing, (torch.bfloat16,)),
        Kernel("flash_attn 2 varlen", flash_varlen("flash_attn"), lambda: missing_module("flash_attn"),
               (torch.bfloat16,)),
        Kernel("flash_attn 3 varlen", flash_varlen("flash_attn_interface"),
               lambda: missing_module("flash_attn_interface"), (torch.bfloat16,)),
    ]
    if self_test:
        out += [Kernel("SELF-TEST sdpa causal only", sdpa_with(wrong_causal_only), lambda: None,
                       (torch.float32,), expect_fail=True),
                Kernel("SELF-TEST sdpa boundary +1", sdpa_with(wrong_off_by_one), lambda: None,
                       (torch.float32,), expect_fail=True)]
    return out


# ---- one cell: a kernel, a dtype, a case ----

@dataclasses.dataclass
class Cell:
    kernel: str
    dtype: str
    case: str
    verdict: str             # pass, pass (values only), FAIL, ERROR, n/a
    diffs: dict[str, Optional[float]]
    detail: str = ""
    seconds: float = 0.0


def max_diff(got: Optional[torch.Tensor], want: torch.Tensor) -> Optional[float]:
    return None if got is None else (got.double() - want).abs().max().item()


def judge(diffs, refs, finite: bool, dtype) -> tuple[str, str]:
    if not finite:
        return "FAIL", "NaN or Inf in the kernel's output or gradients"
    over = [f"{name} {d:.2e} > {TOLERANCE[dtype] * max(1.0, refs[name].abs().max().item()):.2e}"
            for name, d in diffs.items()
            if d is not None and d > TOLERANCE[dtype] * max(1.0, refs[name].abs().max().item())]
    return ("FAIL", "; ".join(over)) if over else ("pass", "")


def run_cell(kernel: Kernel, case: Case, dtype, device: str, seed: int) -> Cell:
    cell = Cell(kernel.name, str(dtype).replace("torch.", ""), case.name, "n/a", dict.fromkeys(("out", "dq", "dk", "dv")))
    heads, dim = (4, 64) if device.startswith("cuda") else (2, 16)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    # Inputs rounded to the kernel's dtype first, so that the reference sees exactly the kernel's inputs.
    q, k, v, dout = (torch.randn(case.total, heads, dim, generator=gen).to(dtype).double().to(device)
                     for _ in range(4))
    with_grad = kernel.backward_cpu or device.startswith("cuda")
    ref_in = [x.clone().requires_grad_(True) for x in (q, k, v)]
    ref_out = reference(*ref_in, case.lengths)
    ref_out.backward(dout)
    refs = {"out": ref_out.detach(), "dq": ref_in[0].grad, "dk": ref_in[1].grad, "dv": ref_in[2].grad}
    ins = [x.to(dtype).requires_grad_(with_grad) for x in (q, k, v)]
    start = time.perf_counter()
    try:
        out = kernel.run(*ins, Packed.of(case, device))
        if with_grad:
            out.backward(dout.to(dtype))
        if device.startswith("cuda"):
            torch.cuda.synchronize()
    except Exception as e:
        message = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:110]
        # On CUDA every kernel listed as available is meant to run: an exception is an error. Elsewhere it is
        # the kernel saying it has no implementation for this device or dtype.
        cell.verdict, cell.detail = ("ERROR", message) if device.startswith("cuda") else ("n/a", message)
        return cell
    cell.seconds = time.perf_counter() - start
    got = {"out": out.detach(), "dq": ins[0].grad, "dk": ins[1].grad, "dv": ins[2].grad}
    cell.diffs = {name: max_diff(got[name], refs[name]) for name in refs}
    finite = all(torch.isfinite(t).all().item() for t in got.values() if t is not None)
    cell.verdict, cell.detail = judge(cell.diffs, refs, finite, dtype)
    if not with_grad and cell.verdict == "pass":
        cell.verdict, cell.detail = "pass (values only)", f"no backward on {device}"
    return cell


def run_all(device: str, seed: int, self_test: bool, only: list[str]) -> tuple[list[Cell], list[Kernel]]:
    cells, ks = [], kernels(self_test)
    for kernel in ks:
        dtypes = kernel.dtypes_cuda if device.startswith("cuda") else (torch.float32,)
        why = kernel.missing()
        if why:  # one row per dtype: the reason is the same for every case
            cells += [Cell(kernel.name, str(dtype).replace("torch.", ""), "all", "n/a",
                           dict.fromkeys(("out", "dq", "dk", "dv")), why) for dtype in dtypes]
            continue
        for case in cases(device, seed):
            if only and case.name not in only:
                continue
            for dtype in dtypes:
                cell = run_cell(kernel, case, dtype, device, seed)
                print(f"kernels: {cell.kernel} {cell.dtype} {cell.case}: {cell.verdict} {cell.detail}",
                      file=sys.stderr, flush=True)
                cells.append(cell)
    return cells, ks


def table(cells: list[Cell], device: str, seed: int) -> str:
    def num(x):
        return "-" if x is None else f"{x:.1e}"
    name = torch.cuda.get_device_name() if device.startswith("cuda") else "cpu"
    lines = [f"torch {torch.__version__}, CUDA {torch.version.cuda}, device {name}, seed {seed}; "
             f"cases: " + "; ".join(f"{c.name} ({c.describe()})" for c in cases(device, seed)),
             "",
             "| kernel | dtype | case | max abs diff out | dq | dk | dv | verdict | detail | s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for c in cells:
        d = c.diffs
        lines.append(f"| {c.kernel} | {c.dtype} | {c.case} | {num(d['out'])} | {num(d['dq'])} | {num(d['dk'])} | "
                     f"{num(d['dv'])} | {c.verdict} | {c.detail.replace('|', '/')} | {c.seconds:.2f} |")
    return "\n".join(lines) + "\n"


def self_test_holds(cells: list[Cell], ks: list[Kernel], device: str, seed: int) -> bool:
    """Each wrong mask must FAIL on every case with two or more non-empty documents."""
    multi = {c.name for c in cases(device, seed) if sum(n > 0 for n in c.lengths) >= 2}
    wrong = {k.name for k in ks if k.expect_fail}
    missed = [c for c in cells if c.kernel in wrong and c.case in multi and c.verdict != "FAIL"]
    for c in missed:
        print(f"kernels: self-test: {c.kernel} on {c.case} was not caught ({c.verdict})", file=sys.stderr)
    return not missed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--seed", type=int, default=20261207)
    parser.add_argument("--case", action="append", default=[], help="run only this case; repeatable")
    parser.add_argument("--self-test", action="store_true",
                        help="add two deliberately wrong masks, which must be reported as failing")
    parser.add_argument("--out", metavar="FILE", help="also write the Markdown table here")
    args = parser.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"kernels: torch {torch.__version__} sees no CUDA device", file=sys.stderr)
        return 2
    cells, ks = run_all(args.device, args.seed, args.self_test, args.case)
    text = table(cells, args.device, args.seed)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    wrong = {k.name for k in ks if k.expect_fail}
    real_bad = [c for c in cells if c.verdict in ("FAIL", "ERROR") and c.kernel not in wrong]
    print(f"kernels: {len(real_bad)} failing or erring cells of {len(cells) - sum(c.kernel in wrong for c in cells)}")
    self_ok = True
    if args.self_test:
        self_ok = self_test_holds(cells, ks, args.device, args.seed)
        print(f"kernels: self-test {'held: every wrong mask was caught' if self_ok else 'FAILED: a wrong mask passed'}")
    return 0 if not real_bad and self_ok else 1


if __name__ == "__main__":
    sys.exit(main())
