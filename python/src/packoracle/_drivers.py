"""The drivers of a loss reducer and an attention consumer: each calls the user's callable on the request the core
hands it and turns the answer (or the exception) into what the core reads, ("ok", value) or ("fault", message).
packoracle.fuzz drives in-process callables through them, and packoracle.exec_server drives the same callables in
another interpreter over the exec protocol (DESIGN §6): one reading of a callable's answer, wherever it runs.
Nothing here needs the compiled core (an exec server's interpreter may not have it)."""

from __future__ import annotations

import traceback
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional

import numpy as np

from ._arrays import is_tensor, scalar
from ._masks import Computed, ConsumerAnswerError, runs, work_runs


class _Hung(BaseException):
    """Raised inside a callable that ran past its deadline (a BaseException: ``except Exception`` in the user's
    code does not swallow it)."""


_PASS_THROUGH = (KeyboardInterrupt, SystemExit, _Hung)  # what a driver never turns into an answer


def _reducer_driver(reducer: Callable[[dict], Any], gradient: bool = False) -> Callable[[dict], tuple]:
    """Drives ``reducer(request)``. With ``gradient`` (fuzz(gradient=True), torch installed) the request's
    ``slot_losses[m][r]`` are float64 leaf tensors with ``requires_grad``; the driver calls ``backward()`` on
    what each micro-batch's answer backpropagates (its ``"backward"``, else its ``"loss"`` when that is a tensor
    with a gradient) and hands the leaves' ``.grad`` to the core beside the totals (``"gradient"``), which
    checks them (the ``gradient`` invariant). Without a backward tensor nothing is handed: not checked."""
    def drive(request: dict) -> tuple:
        leaves = None
        if gradient:
            import torch
            leaves = [[torch.tensor(row, dtype=torch.float64, requires_grad=True) for row in mb]
                      for mb in request["slot_losses"]]
            request["slot_losses"] = leaves
        try:
            answer = reducer(request)
        except _PASS_THROUGH:
            raise
        except BaseException:
            return ("fault", "the loss reducer raised an exception:\n" + traceback.format_exc())
        try:
            if isinstance(answer, Mapping):
                answer = [answer]
            if not isinstance(answer, Sequence) or not all(isinstance(t, Mapping) for t in answer):
                return ("fault", f"the loss reducer must return one dict of totals per micro-batch (loss_sum, "
                                 f"denominator, denominator_scope, loss), got {type(answer).__name__}")
            totals = [{k: scalar(v) for k, v in t.items() if k != "backward"} for t in answer]
            if leaves is not None:
                fault = _backpropagate(answer, leaves, totals)
                if fault:
                    return ("fault", fault)
            return ("ok", totals)
        except _PASS_THROUGH:
            raise
        except BaseException:  # raised by the answer's own code (a Mapping's items(), a tensor's item())
            return ("fault", "reading the loss reducer's answer raised an exception:\n" + traceback.format_exc())
    return drive


def _backpropagate(answer: Sequence[Mapping], leaves: list, totals: list) -> Optional[str]:
    """Calls backward() on each micro-batch's backward tensor (gradients accumulate in the leaves, as over a
    step's micro-batches) and adds each micro-batch's leaves' gradients to its totals as ``"gradient"``; leaves
    nothing reached get zeros. A fault's message, or None."""
    backward = []
    for m, t in enumerate(answer):
        if "backward" in t:
            b = t["backward"]
            if not is_tensor(b) or b.dim() != 0:
                return (f"the loss reducer's answer[{m}]['backward'] must be a 0-dim torch tensor (what it calls "
                        f"backward() on), got {type(b).__name__}" + (f" of shape {tuple(b.shape)}" if is_tensor(b) else ""))
            backward.append(b)  # a detached one backpropagates nothing: every gradient it gives is zero
        elif is_tensor(t.get("loss")) and t["loss"].requires_grad:
            backward.append(t["loss"])
        else:
            backward.append(None)
    if all(b is None for b in backward):
        return None  # nothing backpropagated: `gradient` is not checked
    for b in backward:
        if b is not None and b.requires_grad:
            b.backward(retain_graph=True)
    if len(totals) != len(leaves):
        return None  # the core reports the count of totals; no gradient to hand
    for m, (t, rows) in enumerate(zip(totals, leaves)):
        t["gradient"] = [[0.0] * len(leaf) if leaf.grad is None else leaf.grad.detach().cpu().tolist()
                         for leaf in rows]
    return None


def _consumer_driver(consumer: Callable[[dict, dict], Any]) -> Callable[[dict, dict], tuple]:
    """The per-row form: ``consumer(row, policy)`` answers one row."""
    def drive(row: dict, policy: dict) -> tuple:
        try:
            answer = consumer(row, policy)
        except _PASS_THROUGH:
            raise
        except BaseException:
            return ("fault", "the attention consumer raised an exception:\n" + traceback.format_exc())
        try:
            return ("ok", runs(answer, len(row["input_ids"]), 0, "the attention consumer's answer"))
        except ConsumerAnswerError as e:
            return ("fault", str(e))
        except _PASS_THROUGH:
            raise
        except BaseException:  # raised by the answer's own code (an __array__, a mask function)
            return ("fault", "reading the attention consumer's answer raised an exception:\n" + traceback.format_exc())
    return drive


def _microbatch_consumer_driver(consumer: Callable[..., Any],
                                step_of: Optional[Callable[[dict], Any]] = None) -> Callable[..., tuple]:
    """The micro-batch form: ``consumer(microbatch, policy)`` answers every row of one micro-batch, in order;
    with `step_of` (fuzz(step_view=True): _values.step_viewer) ``consumer(microbatch, policy, step)``, the step
    view of the layout the core hands (the exec server's: of the consume_request's layout and emitted record).
    ("ok", [runs per row]); for an answer wrapped in ``Computed`` (what the consumer computes, _masks.py),
    ("ok", ([runs per row], work)) with work as _masks.work_runs reads it."""
    def drive(microbatch: dict, policy: dict, layout: Optional[dict] = None) -> tuple:
        rows = microbatch["rows"]
        try:
            answer = (consumer(microbatch, policy) if step_of is None or layout is None
                      else consumer(microbatch, policy, step_of(layout)))
        except _PASS_THROUGH:
            raise
        except BaseException:
            return ("fault", "the micro-batch attention consumer raised an exception:\n" + traceback.format_exc())
        try:
            computed = answer if isinstance(answer, Computed) else None
            if computed is not None:
                answer = computed.masks
            if _is_single_mask_source(answer):
                answer = [answer] * len(rows)  # one BlockMask or mask function for the whole batch
            if isinstance(answer, (str, bytes)) or not isinstance(answer, Sequence) and not (
                    is_tensor(answer) or isinstance(answer, np.ndarray)):
                return ("fault", f"the micro-batch attention consumer must return one answer per row (a list, or a "
                                 f"rows × n × n array), got {type(answer).__name__}")
            if len(answer) != len(rows):
                return ("fault", f"the micro-batch attention consumer returned {len(answer)} answers for a "
                                 f"micro-batch of {len(rows)} rows")
            masks = [runs(a, len(row["input_ids"]), r, f"the micro-batch attention consumer's answer for row {r}")
                     for r, (a, row) in enumerate(zip(answer, rows))]
            if computed is None:
                return ("ok", masks)
            return ("ok", (masks, work_runs(computed, [len(row["input_ids"]) for row in rows],
                                            "the micro-batch attention consumer's Computed answer")))
        except ConsumerAnswerError as e:
            return ("fault", str(e))
        except _PASS_THROUGH:
            raise
        except BaseException:  # raised by the answer's own code (an __array__, a mask function, __len__)
            return ("fault", "reading the micro-batch attention consumer's answer raised an exception:\n"
                    + traceback.format_exc())
    return drive


def _is_single_mask_source(answer: Any) -> bool:
    return type(answer).__name__ == "BlockMask" or (callable(answer) and not is_tensor(answer)
                                                     and not isinstance(answer, np.ndarray))
