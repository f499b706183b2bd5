"""The value consumer's driver (``packoracle.fuzz(value_consumer=...)``, DESIGN §12 "Values and gradients"), and
the step view the consumers may ask for (``fuzz(step_view=True)``, §12 "The step a consumer sees").

A value consumer answers what a model computes for a micro-batch: per-position output values (logits, hidden
states). The core (properties/src/value_invariance.cc) calls it on each packed micro-batch and on each document
piece alone, and compares; this driver only runs the callable, reads its answer as float64 rows and, when the
core asks, backpropagates the probe loss the core's ValueRequest states (properties/candidate.h) through the
consumer's parameters. It decides nothing about packing."""
from __future__ import annotations

import sys
import traceback
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional, TypedDict

import numpy as np

from ._arrays import is_tensor

# What the driver lets through (the core remembers it, and raises it again once the run ends).
_PASS_THROUGH = (KeyboardInterrupt, SystemExit)


class StepView(TypedDict):
    """The step around a micro-batch, as ``microbatch_consumer(microbatch, policy, step)`` and
    ``value_consumer(...)`` get it under ``fuzz(step_view=True)``: ``emitted``, the micro-batch exactly as the
    packer returned it (None: the kit's reference packer made the rows, or a piece alone); ``layout``, the core's
    StepLayout (properties/candidate.h) as a dict."""

    emitted: Any
    layout: dict


def step_viewer(emitted: list) -> Callable[[dict], StepView]:
    """The step view of a layout the core hands: `emitted` holds the packer driver's latest answer (a list of
    micro-batches as returned), whose micro-batch ``layout["microbatch"]`` the consumer is looking at."""
    def view(layout: dict) -> StepView:
        m = layout["microbatch"]
        answer = emitted[0] if emitted else None
        answer = [answer] if isinstance(answer, Mapping) else answer  # one micro-batch returned alone
        batch = answer[m] if isinstance(answer, Sequence) and not isinstance(answer, (str, bytes)) and 0 <= m < len(
            answer) else None
        return {"emitted": batch, "layout": layout}
    return view


class ValueAnswerError(ValueError):
    """A value consumer's answer that is not one n × features array per row."""


def parameters_of(consumer: Any, at: str) -> list:
    """The parameters whose gradients fuzz(gradient=True) compares: ``consumer.parameters()`` (a torch Module,
    or any callable that has the method)."""
    method = getattr(consumer, "parameters", None)
    if not callable(method):
        raise TypeError(f"{at}: gradient=True with value_consumer= needs the consumer's parameters: give a torch "
                        f"Module, or a callable with a parameters() method, got {type(consumer).__name__}")
    found = [p for p in method() if getattr(p, "requires_grad", False)]
    if not found:
        raise ValueError(f"{at}: gradient=True: value_consumer.parameters() has no parameter that requires a gradient")
    return found


def _rows_of(answer: Any, lengths: list[int]) -> list:
    """The answer as one 2-D (n × features) tensor or array per row: a rows × n × features (or rows × n) tensor,
    array or list of per-row ones; a longer row is cropped to the row's length (a batch padded to its longest)."""
    if isinstance(answer, (str, bytes)) or not (is_tensor(answer) or isinstance(answer, (np.ndarray, Sequence))):
        raise ValueAnswerError(f"the value consumer must return per-position values for every row (a rows × n × "
                               f"features tensor or array, or one n × features per row), got {type(answer).__name__}")
    if len(answer) != len(lengths):
        raise ValueAnswerError(f"the value consumer returned values for {len(answer)} rows, the micro-batch has "
                               f"{len(lengths)}")
    out = []
    for r, (row, n) in enumerate(zip(answer, lengths)):
        row = row if is_tensor(row) else np.asarray(row, dtype=np.float64)
        if row.ndim == 1:
            row = row[:, None]
        if row.ndim != 2 or row.shape[0] < n:
            raise ValueAnswerError(f"the value consumer's values for row {r} have shape {tuple(row.shape)}, the row "
                                   f"has {n} slots (give n × features, or n)")
        out.append(row[:n])
    return out


def _as_float64(row: Any) -> np.ndarray:
    if is_tensor(row):
        row = row.detach().to("cpu").double().numpy()
    return np.ascontiguousarray(row, dtype=np.float64)


def _probe_gradient(rows: list, slot_weights: list, parameters: list) -> np.ndarray:
    """d/dθ of the probe loss Σ_row Σ_i u_i Σ_f c_f out[i, f], c_f = 1 + f mod 4 (ValueRequest, candidate.h),
    flattened over `parameters` in order; a parameter the loss does not reach contributes zeros."""
    import torch

    for p in parameters:
        p.grad = None
    loss = None
    for row, u in zip(rows, slot_weights):
        if not is_tensor(row) or not row.requires_grad:
            continue
        c = 1.0 + (torch.arange(row.shape[1], device=row.device) % 4).to(row.dtype)
        weights = torch.as_tensor(u, dtype=row.dtype, device=row.device)
        term = (row * weights[:, None] * c[None, :]).sum()
        loss = term if loss is None else loss + term
    if loss is not None:
        loss.backward()
    return np.concatenate([np.zeros(p.numel()) if p.grad is None else p.grad.detach().to("cpu").double().reshape(-1).numpy()
                           for p in parameters])


def value_consumer_driver(consumer: Callable[..., Any], parameters: list,
                          step_of: Optional[Callable[[dict], StepView]] = None) -> Callable[[dict, dict, dict], tuple]:
    """``consumer(microbatch, policy)`` answers per-position values for every row of the micro-batch (the
    ``microbatch`` record of §5, as microbatch_consumer= gets it). The driver returns ("ok", (rows, gradient)):
    float64 n × features arrays, and the parameter gradient when `ask["gradient"]` (else None); ("fault",
    text) when the consumer raised or answered something else. With `step_of` the consumer gets the step view
    as a third argument."""
    def call(microbatch: dict, policy: dict, ask: dict) -> Any:
        return consumer(microbatch, policy) if step_of is None else consumer(microbatch, policy, step_of(ask["layout"]))

    def drive(microbatch: dict, policy: dict, ask: dict) -> tuple:
        lengths = [len(row["input_ids"]) for row in microbatch["rows"]]
        try:
            if ask["gradient"] or "torch" not in sys.modules:
                answer = call(microbatch, policy, ask)
            else:
                import torch

                with torch.no_grad():
                    answer = call(microbatch, policy, ask)
        except _PASS_THROUGH:
            raise
        except BaseException:
            return ("fault", "the value consumer raised an exception:\n" + traceback.format_exc())
        try:
            rows = _rows_of(answer, lengths)
            gradient = _probe_gradient(rows, ask["slot_weights"], parameters) if ask["gradient"] else None
            return ("ok", ([_as_float64(r) for r in rows], gradient))
        except ValueAnswerError as e:
            return ("fault", str(e))
        except _PASS_THROUGH:
            raise
        except BaseException:
            return ("fault", "reading the value consumer's answer raised an exception:\n" + traceback.format_exc())
    return drive
