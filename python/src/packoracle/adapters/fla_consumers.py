"""flash-linear-attention 0.6.0 (fla-org/flash-linear-attention): the pure-torch reference ops that take
``cu_seqlens``, as attention consumers (the linear-attention and sparse-attention varlen paths, whose recurrent
state must reset at every document). Every Triton kernel of ``fla.ops`` needs a GPU; these naive references
run on CPU and are what the kernels are tested against upstream. The family environment ``fla``
(requirements/fla.lock: flash-linear-attention 0.6.0 and triton 3.9.0, which ``import fla.ops`` needs).

Each builder is a micro-batch consumer (``packoracle.fuzz(..., microbatch_consumer=...)``): for each row it
calls the op on random inputs ``[1, T, H, K]`` (varlen takes batch size 1) with the row's ``cu_seqlens`` as the
producer gave them (``cu_seqlens``, or ``cu_seq_lens_q``), and answers the row's real dependency matrix:
``dep[t][s] = 1`` when an output at slot t has a non-zero gradient with respect to an input at slot s (q, k, v,
the gates). Under ``cu_seqlens`` that must be the document-causal mask; a state that leaks over a boundary
shows as a dependency across it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np

if TYPE_CHECKING:
    from ._base import Finding

WRITTEN_FOR = "0.6.0"
HEADS, DIM = 2, 4


def _inputs(T: int, op: str, generator: Any) -> list:
    """The op's tensor inputs for one row, each requiring a gradient (gates in their documented ranges)."""
    import torch

    def leaf(*shape: int, transform: Callable[[Any], Any] = lambda x: x) -> Any:
        return transform(torch.randn(*shape, generator=generator, dtype=torch.float64)).detach().requires_grad_()

    q, v = leaf(1, T, HEADS, DIM), leaf(1, T, HEADS, DIM)
    k = leaf(1, T, HEADS, DIM, transform=lambda x: torch.nn.functional.normalize(x, dim=-1))
    g = leaf(1, T, HEADS, transform=lambda x: -x.abs())               # log decay, <= 0
    beta = leaf(1, T, HEADS, transform=torch.sigmoid)                 # in (0, 1)
    return [q, k, v, g, beta]


def _run(op: str, tensors: list, cu_seqlens: Any) -> Any:
    """The op's output [1, T, H, V] (fla's own call, as its tests make it)."""
    if op == "gated_delta_product":
        from fla.ops.gated_delta_product.naive import naive_recurrent_gated_delta_product

        q, k, v, g, beta = tensors
        out, _ = naive_recurrent_gated_delta_product(q, k, v, g, beta, DIM ** -0.5, cu_seqlens=cu_seqlens)
        return out
    raise ValueError(f"fla_consumers: unknown op {op!r}")


def dependency(op: str, cu_seqlens: list, T: int, seed: int = 0) -> np.ndarray:
    """dep[t][s]: does the op's output at slot t read any input at slot s (autograd, one backward per slot)."""
    import torch

    tensors = _inputs(T, op, torch.Generator().manual_seed(seed))
    out = _run(op, tensors, torch.tensor(cu_seqlens, dtype=torch.long))
    dep = np.zeros((T, T), dtype=np.int8)
    for t in range(T):
        grads = torch.autograd.grad(out[0, t].sum(), tensors, retain_graph=True, allow_unused=True)
        for grad in grads:
            if grad is not None:
                dep[t] |= (grad[0].reshape(T, -1).abs().sum(dim=-1) > 0).numpy().astype(np.int8)
    return dep


def _cu_seqlens(row: dict) -> list:
    for name in ("cu_seqlens", "cu_seq_lens_q", "cu_seqlens_q"):
        if name in row and row[name] is not None:
            return [int(x) for x in np.asarray(row[name]).reshape(-1)]
    raise ValueError(f"fla consumers read cu_seqlens; the row has only {sorted(row)}")


def consumer(op: str) -> Callable[[dict, dict], list]:
    """The micro-batch consumer of one op: each row's dependency matrix."""
    def consume(microbatch: dict, policy: dict) -> list:
        answers = []
        for row in microbatch["rows"]:
            T = len(np.asarray(row["input_ids"]).reshape(-1))
            answers.append(dependency(op, _cu_seqlens(row), T))
        return answers

    return consume


@dataclass(frozen=True)
class FlaConsumer:
    """One naive op as a consumer: its name, the call, the policy whose rows it is fed (varlen: one flattened row
    with cu_seqlens, hf-flatten). A cell of the matrix's mask builders (conformance._consumers.run_builders), run
    in the fla environment: its consumer served there by packoracle.exec_server, fuzz's exec_consumer."""

    name: str
    op: str
    call: str
    policy: str = "hf-flatten"
    family: str = "fla"
    written_for: str = WRITTEN_FOR
    finding: Optional[Finding] = None  # the examined failure, as a mask builder's (None: it holds)

    def replay(self, reproduce: str) -> str:
        return (f"packoracle.conformance.replay_consumer({self.name!r}, \"{reproduce}\")  # from the main venv, "
                f"the op in the {self.family} environment")


CONSUMERS = (
    FlaConsumer("fla/naive-gated-delta-product", "gated_delta_product",
                "naive_recurrent_gated_delta_product(q, k, v, g, beta, scale, cu_seqlens=cu_seqlens)"),
)


def smoke(cases: int = 30, seed: int = 20261201) -> str:
    """Fuzzes every naive op here (run in the fla environment's interpreter): "holds" or the first failure's
    report. The step before its cells join the matrix's consumer column over the exec protocol's consumer role."""
    from .._fuzz import SMALL_CASES, Counterexample, fuzz

    for c in CONSUMERS:
        try:
            fuzz(None, c.policy, microbatch_consumer=consumer(c.op), cases=cases, seed=seed, name=c.name,
                 **SMALL_CASES)
        except Counterexample as e:
            return f"{c.name}: {e.invariant}\n{e.report}"
    return "holds"
