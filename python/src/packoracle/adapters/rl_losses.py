"""The loss reducers of the RL trainers: verl's ``agg_loss`` (each ``loss_agg_mode``) and OpenRLHF's
``aggregate_loss`` (token-level and sample-level), each with the global normalisers its trainer computes.

Neither is in the main venv: verl 0.9.1 pins transformers<5.11 (the venv has 5.24) and pulls in ray;
openrlhf 0.11.2 pins flash-attn==2.8.3 (whose build fails without CUDA) and deepspeed==0.19.6, and its package
``openrlhf.models`` imports flash_attn on import. The adapters exist all the same: ``unavailable()`` says why,
and they run in a venv of their own (how: ``_VERL_WHY``, ``_OPENRLHF_WHY``). ``aggregate_loss`` is loaded
from the distribution's ``openrlhf/models/loss.py`` as OpenRLHF's own tests load it (see ``_openrlhf_loss``).

The packer: the RL trainers reduce per-token losses laid out one sample per row, padded ([bs, response_len]:
verl converts its nested no-padding tensors back with ``to_padded_tensor``, OpenRLHF rolls and masks in the
padded layout), so every document is a row of its own, built by transformers' ``DataCollatorWithFlattening``
called on that one sample (labels -100 at its first token and at unsupervised tokens). The reducer pads each
micro-batch's rows to its longest row (as ``to_padded_tensor`` does), the per-token loss matrix is the kit's
slot losses and the mask is 1 where the slot has a target (labels[i + 1] != -100: the aligned labels of the
collator). What the trainers compute around the function is computed as they do:

- verl (engine ``forward_backward_batch`` + ``ray_trainer._update_actor``): ``batch_num_tokens`` =
  ``loss_mask.sum()`` all-reduced over DP before the micro-batch split (here: summed over every rank's
  micro-batches), ``global_batch_size`` = ``ppo_mini_batch_size * rollout.n`` (the step's samples on all ranks:
  here its rows, masked or not), ``dp_size``, ``loss_scale_factor`` None (the config default). FSDP/DDP
  average the ranks' gradients, so a micro-batch's share of the step objective is ``agg_loss(...) / dp_size``.
- OpenRLHF: ``iter_grad_accum_global_norm`` over each rank's micro-batches (gas = micro-steps per rank), its
  per-rank totals summed as its all-reduce does; DeepSpeed scales each backward by 1/gas and DP averages, so the
  share is ``aggregate_loss(...) / (gas * dp_size)``.

Each micro-batch reports loss_sum = the masked sum (verl: ``agg_loss(..., "token-sum")``; OpenRLHF: the
token-level aggregate with batch_num_tokens 1), the denominator the mode divides it by, and the share as loss.
"""

from __future__ import annotations

from dataclasses import dataclass
import os
from importlib.abc import Loader
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Optional, cast

import numpy as np

if TYPE_CHECKING:
    import torch

from ._base import Adapter, Finding, Packer, Reducer, assign, documents_of, refuse_too_long

VERL_VERSION = "0.9.1"
OPENRLHF_VERSION = "0.11.2"


def per_sample_packer() -> Packer:
    """One document per row (an RL sample), as DataCollatorWithFlattening builds one sample."""
    from transformers import DataCollatorWithFlattening

    collator = DataCollatorWithFlattening()

    def pack(request: dict) -> list[dict]:
        docs = [d for d in documents_of(request) if d["tokens"]]
        if request["policy"]["overflow"] == "error":
            refuse_too_long(docs, request["row_length"], "max response length")
        rows = [dict(collator([{"input_ids": d["tokens"],
                                "labels": [t if s else -100 for t, s in zip(d["tokens"], d["supervised"])]}],
                               return_tensors="pt")) for d in docs]
        return assign(rows, request)

    return pack


def _padded(microbatch: dict, slot_losses: list, ignore_index: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss_mat, loss_mask) [rows, longest row] of one micro-batch: the kit's slot losses, and 1 where the slot
    predicts a label (aligned labels: slot i predicts labels[i + 1]); padding slots 0, as to_padded_tensor."""
    import torch

    rows = microbatch["rows"]
    width = max((len(np.asarray(r["labels"]).reshape(-1)) for r in rows), default=0)
    loss = torch.zeros(len(rows), width, dtype=torch.float64)
    mask = torch.zeros(len(rows), width, dtype=torch.float64)
    for r, row in enumerate(rows):
        labels = np.asarray(row["labels"]).reshape(-1)
        n = len(labels)
        loss[r, :n] = torch.as_tensor(np.asarray(slot_losses[r], dtype=np.float64))
        mask[r, :n - 1] = torch.as_tensor((labels[1:] != ignore_index).astype(np.float64))
    return loss, mask


def _totals(loss_sum: float, denominator: float, share: float) -> dict:
    return {"loss_sum": loss_sum, "denominator": denominator, "denominator_scope": "global", "loss": share}


def verl_reducer(mode: str) -> Reducer:
    from verl.trainer.ppo.core_algos import agg_loss

    def reduce(request: dict) -> list[dict]:
        dp = int(request["dp_world_size"])
        ignore = request["policy"]["ignore_index"]
        mbs = request["microbatches"]
        tensors = [_padded(mb, request["slot_losses"][m], ignore) for m, mb in enumerate(mbs)]
        batch_num_tokens = float(sum(mask.sum() for _, mask in tensors))  # all-reduced over DP, whole step
        # ppo_mini_batch_size * rollout.n: every sample of the step, on all ranks, whatever its mask (a row
        # without a target, such as the kit's all-padding rows, is a sample whose response mask is all 0)
        global_batch_size = sum(len(mb["rows"]) for mb in mbs)
        out = []
        for loss_mat, mask in tensors:
            loss = agg_loss(loss_mat, mask, mode, dp_size=dp, batch_num_tokens=batch_num_tokens,
                            global_batch_size=global_batch_size)
            loss_sum = float(agg_loss(loss_mat, mask, "token-sum"))
            denominator = {"token-mean": batch_num_tokens, "seq-mean-token-sum": global_batch_size,
                           "seq-mean-token-mean": global_batch_size,
                           "seq-mean-token-sum-norm": global_batch_size * mask.shape[-1]}[mode]
            out.append(_totals(loss_sum, float(denominator), float(loss) / dp))  # DDP: mean over ranks
        return out

    return reduce


def _openrlhf_loss() -> ModuleType:
    """``openrlhf.models.loss`` from the installed distribution's files, loaded beside its ``models/utils.py`` as
    OpenRLHF's own tests/test_loss_aggregation.py loads them: importing the package ``openrlhf.models`` runs its
    ``__init__``, which imports the Actor and the ring-attention utilities, hence flash_attn (a CUDA build).
    The code run is the distribution's, byte for byte; only the package ``__init__`` is skipped."""
    import importlib.metadata
    import importlib.util
    import sys
    import types

    package = "_packoracle_openrlhf_models"
    if f"{package}.loss" not in sys.modules:
        models = importlib.metadata.distribution("openrlhf").locate_file("openrlhf/models")
        stub = types.ModuleType(package)
        stub.__path__ = [str(models)]
        sys.modules[package] = stub
        for name in ("utils", "loss"):
            # locate_file gives a pathlib.Path; a .py file's location always has a spec with a loader
            spec = cast("ModuleSpec", importlib.util.spec_from_file_location(
                f"{package}.{name}", cast("os.PathLike[str]", models / f"{name}.py")))
            module = importlib.util.module_from_spec(spec)
            sys.modules[f"{package}.{name}"] = module
            cast("Loader", spec.loader).exec_module(module)
    return sys.modules[f"{package}.loss"]


def _openrlhf_step_info(masks_by_rank: list[list], gas: int) -> tuple[float, float]:
    """(batch_num_tokens, global_batch_size) as iter_grad_accum_global_norm gives them to every micro-batch of
    the step: each rank's window of gas micro-batches counted by the library, its all-reduce (a sum over the
    ranks) done here."""
    from openrlhf.utils.loss_utils import iter_grad_accum_global_norm

    tokens = samples = 0.0
    for masks in masks_by_rank:
        _, info = next(iter(iter_grad_accum_global_norm(iter(masks), None, gas, lambda mask: mask)))
        tokens += float(info["batch_num_tokens"])
        samples += float(info["global_batch_size"])
    return tokens, samples


def openrlhf_reducer(token_level_loss: bool) -> Reducer:
    aggregate_loss = _openrlhf_loss().aggregate_loss

    def reduce(request: dict) -> list[dict]:
        dp = int(request["dp_world_size"])
        ignore = request["policy"]["ignore_index"]
        mbs = request["microbatches"]
        tensors = [_padded(mb, request["slot_losses"][m], ignore) for m, mb in enumerate(mbs)]
        by_rank: dict[int, list] = {}
        for (_, mask), mb in zip(tensors, mbs):
            by_rank.setdefault(int(mb["rank"]), []).append(mask)
        gas = max((len(masks) for masks in by_rank.values()), default=1)  # micro-batches per optimizer step
        batch_num_tokens, global_batch_size = _openrlhf_step_info(list(by_rank.values()), gas)
        out = []
        for loss_mat, mask in tensors:
            loss = aggregate_loss(loss_mat, mask, token_level_loss=token_level_loss, dp_size=dp,
                                  batch_num_tokens=batch_num_tokens, global_batch_size=global_batch_size)
            loss_sum = float(aggregate_loss(loss_mat, mask, token_level_loss=True, batch_num_tokens=1.0))
            # The count the library summed (num_tokens or num_samples, an integer) before its "/ gas", which
            # pre-compensates DeepSpeed's 1/gas (and is exact in float32 only to an ulp).
            denominator = float(round((batch_num_tokens if token_level_loss else global_batch_size) * gas))
            out.append(_totals(loss_sum, denominator, float(loss) / (gas * dp)))  # DeepSpeed's 1/gas, DP mean
        return out

    return reduce


@dataclass(frozen=True)
class _SeparateVenvAdapter(Adapter):
    """An adapter whose distribution cannot share the main venv: unavailable() says why, not only "install"."""

    why_not_here: str = ""

    def unavailable(self) -> Optional[str]:
        reason = super().unavailable()
        if reason is not None and self.installed_version() is None:
            return f"{self.distribution} {self.written_for} is not installed: {self.why_not_here}"
        return reason


def _adapter(name: str, distribution: str, version: str, configuration: str, denominator: str, imports: tuple,
             make_reducer: Callable[[], Reducer], notes: str, findings: dict[str, Any], why_not_here: str) -> Adapter:
    # One document per row, positions reset: the layout of an RL micro-batch; the denominator as the mode says.
    policy = {"preset": "hf-flatten", "boundary_source": "position_reset", "denominator": denominator}
    return _SeparateVenvAdapter(name=name, system=name.split("/")[0], distribution=distribution,
                                written_for=version, configuration=configuration, policy=policy,
                                imports=imports + ("transformers", "torch"), make_packer=per_sample_packer,
                                make_reducer=make_reducer, notes=notes, findings=findings,
                                why_not_here=why_not_here, family=distribution)


_VERL_IMPORTS = ("verl.trainer.ppo.core_algos",)
_VERL_NOTES = ("not installable beside transformers 5.24: verl 0.9.1 requires transformers!=5.6.0,<5.11,>=5.5.3 "
               "(and ray[default], tensordict<=0.10); in a separate venv (torch 2.13.0 CPU, pip install verl==0.9.1 "
               "→ transformers 5.10.4, ray 2.60.0) verl.trainer.ppo.core_algos imports on CPU")
_VERL_WHY = ("it requires transformers!=5.6.0,<5.11,>=5.5.3 and ray[default] (this venv has transformers "
             "5.24): it runs in a venv of its own (python -m venv; pip install torch==2.13.0 verl==0.9.1)")
_OPENRLHF_WHY = ("pip install openrlhf==0.11.2 fails on CPU (flash-attn==2.8.3 cannot be built: its setup.py "
                 "parses torch.version.cuda, None on CPU torch); it runs in a venv of its own with "
                 "pip install --no-deps openrlhf==0.11.2, its other requirements but flash-attn, and "
                 "pip install --no-build-isolation deepspeed==0.19.6")
_OPENRLHF_IMPORTS = ("openrlhf.utils.loss_utils", "deepspeed")  # openrlhf.models.loss: loaded from its file
_OPENRLHF_NOTES = ("pip install openrlhf==0.11.2 fails on CPU: flash-attn==2.8.3 is an sdist whose setup.py needs "
                   "torch in the build env and then parses torch.version.cuda (None on CPU); import "
                   "openrlhf.models.loss fails on flash_attn (openrlhf.models.__init__ → actor → ring_attn_utils), "
                   "so loss.py is loaded from its file (with models/utils.py, which imports deepspeed), as "
                   "OpenRLHF's tests/test_loss_aggregation.py does; openrlhf.utils.loss_utils imports normally")


def _verl(mode: str, denominator: str, findings: dict) -> Adapter:
    return _adapter(f"verl/agg-loss-{mode}", "verl", VERL_VERSION,
                    f"agg_loss(loss_mat, loss_mask, loss_agg_mode={mode!r}, dp_size, batch_num_tokens, "
                    f"global_batch_size) as the engine's ppo_loss calls it", denominator, _VERL_IMPORTS,
                    lambda: verl_reducer(mode), _VERL_NOTES, findings, _VERL_WHY)


def _openrlhf(token_level: bool, denominator: str, findings: dict) -> Adapter:
    kind = "token" if token_level else "sample"
    return _adapter(f"openrlhf/aggregate-loss-{kind}", "openrlhf", OPENRLHF_VERSION,
                    f"aggregate_loss(loss, loss_mask, token_level_loss={token_level}, dp_size, **info) with info "
                    f"from iter_grad_accum_global_norm", denominator, _OPENRLHF_IMPORTS,
                    lambda: openrlhf_reducer(token_level), _OPENRLHF_NOTES, findings, _OPENRLHF_WHY)


def _zero_targets(system: str, call: str) -> Finding:
    return Finding(
        "denominator", "bug",
        f"A step without any valid target (every response mask 0, e.g. the kit's rank holding only an all-padding "
        f"row) makes {system} divide by a zero global token count: {call} returns 0/0 = NaN for every "
        f"micro-batch, where a zero-target step should contribute 0." + (
            " The FSDP engine then skips the update as non-finite (optimizer_step: 'grad_norm is not finite'), "
            "but the step's loss metrics are NaN." if system == "verl" else
            " DeepSpeed backpropagates the NaN (no guard in aggregate_loss or iter_grad_accum_global_norm)."),
        report=f"docs/upstream/{system.lower()}-zero-targets.md")


_VERL_DILUTED = Finding(
    "loss", "allowed",
    "seq-mean-token-mean divides the sum of per-sequence token means by global_batch_size = ppo_mini_batch_size * "
    "rollout.n, which counts samples whose mask is all 0 (d0=[0] has no target, d1=[0 0] one): 0.0625 instead of "
    "the mean over the sequences that have targets, 0.125. agg_loss excludes such sequences only when "
    "global_batch_size is None; keeping the configured count is deliberate (a fixed normaliser under rejection "
    "masking, cf. mlcommons/training#905), and sequence_mean averages over documents with targets.")

_VERL_SEQ_SUM = Finding(
    "denominator", "allowed",
    "seq-mean-token-sum divides the step's token-loss sum by global_batch_size (the number of sequences, 2 for one "
    "row of d0=[0] beside an all-padding row) instead of the number of valid targets: the documented 'sum over "
    "tokens, mean over sequences', which no denominator key expresses (declared global_targets, the objective it "
    "departs from).")

_VERL_SEQ_SUM_NORM = Finding(
    "denominator", "allowed",
    "seq-mean-token-sum-norm divides each micro-batch by global_batch_size * loss_mask.shape[-1], the padded width "
    "of that micro-batch (loss_scale_factor None, the default): one row of 1 slot and one all-padding row of 2 give "
    "2·1 and 2·2, not the step's 3 positions. The docstring says so and advises a constant loss_scale_factor; "
    "with per-micro-batch widths no single all_positions count holds.")


ADAPTERS = (
    _verl("token-mean", "global_targets",
          {"loss": _zero_targets("verl", "agg_loss(..., 'token-mean', batch_num_tokens=0)")}),
    _verl("seq-mean-token-mean", "sequence_mean", {"loss": _VERL_DILUTED}),
    _verl("seq-mean-token-sum", "global_targets", {"loss": _VERL_SEQ_SUM}),
    _verl("seq-mean-token-sum-norm", "all_positions", {"loss": _VERL_SEQ_SUM_NORM}),
    _openrlhf(True, "global_targets",
              {"loss": _zero_targets("OpenRLHF", "aggregate_loss(..., batch_num_tokens=0 / gas)")}),
    _openrlhf(False, "sequence_mean",
              {"loss": _zero_targets("OpenRLHF", "aggregate_loss(..., token_level_loss=False, "
                                                 "global_batch_size=0 / gas)")}),
)
