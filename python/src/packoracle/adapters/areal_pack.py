"""inclusionAI/AReaL 1.0.4: the packed micro-batches of its SFT/RL engine. ``areal.utils.data``'s
``split_padded_tensor_dict_into_mb_list`` groups the padded samples of a batch into micro-batches of at most
``max_tokens_per_mb`` tokens (first-fit-decreasing, ``MicroBatchSpec.packing_algorithm`` "ffd"), and
``pack_tensor_dict`` packs each into one stream with ``cu_seqlens``. The family environment ``areal``
(requirements/areal.lock: ``pip install --no-deps areal`` and what ``areal.utils.data`` imports; its own pins ask
for torch < 2.11). Before the split the engine gives the padded batch ``position_ids``
(``amend_position_ids``, ``engine/fsdp_engine.py:1853``), packed with the rest.

The adapter feeds the library as the engine does. The batch: one sample per document, right-padded to the
longest, ``attention_mask`` the sample's tokens, ``loss_mask`` the supervised tokens rolled by -1 on the padded
batch (``trainer/sft/lm_engine.py:29``: ``torch.roll(data["loss_mask"].bool(), -1, dims=-1)``, so the mask is
indexed like the predictions and a sample's last slot takes its row's padding, 0). The labels: the packed
``input_ids`` rolled by -1 over the stream (``engine/fsdp_engine.py:1992``, ``torch.roll(inputs["input_ids"],
shifts=-1, dims=-1)``): pre-shifted targets, a sample's last slot targeting the next sample's first token with
loss mask 0. ``max_tokens_per_mb`` is the kit's row length; each micro-batch's packed stream is a row. The
micro-batches' order is the library's (``forward_indices``), which also says where each document went
(``doc_spans``: documents with the same tokens are told apart).
"""

from __future__ import annotations

import re
from types import ModuleType
from typing import Any, Callable, cast

import numpy as np

from .._fuzz import Refuse
from ._base import Adapter, Finding, Packer, Reducer, assign, documents_of

WRITTEN_FOR = "1.0.4"


def _padded_batch(docs: list[dict], pad_id: int) -> dict:
    import torch

    width = max(len(d["tokens"]) for d in docs)
    ids = torch.full((len(docs), width), pad_id, dtype=torch.long)
    attention = torch.zeros(len(docs), width, dtype=torch.bool)
    supervised = torch.zeros(len(docs), width, dtype=torch.bool)
    for r, d in enumerate(docs):
        n = len(d["tokens"])
        ids[r, :n] = torch.tensor(d["tokens"])
        attention[r, :n] = True
        supervised[r, :n] = torch.tensor(d["supervised"], dtype=torch.bool)
    return {"input_ids": ids, "attention_mask": attention,
            "loss_mask": torch.roll(supervised, -1, dims=-1)}  # lm_engine.py:29


# seqpack.ffd_allocate's guard (utils/seqpack.py:239): ``if any(v > capacity for v in values): raise
# RuntimeError(f"Values {values} is larger than capacity {capacity}")`` (values: a numpy array of the samples'
# token counts), checked before it packs anything. It is the library's refusal of a sample longer than
# max_tokens_per_mb (the kit's overflow: error); any other RuntimeError (the allocator's "Cannot allocate values
# ...", a torch error) is not one and stays a crash.
_OVER_CAPACITY = re.compile(r"^Values \[[\d,\s]*\] is larger than capacity \d+$")


def _refusing_over_long(split: Callable[..., Any], batch: dict, spec: Any) -> Any:
    """split(batch, spec), with AReaL's over-capacity RuntimeError answered as the kit's refusal."""
    try:
        return split(batch, spec)
    except RuntimeError as e:
        if not _OVER_CAPACITY.match(str(e)):
            raise
        raise Refuse(f"areal seqpack.ffd_allocate refuses the batch: {e}") from None


def packed_packer() -> Packer:
    import torch
    from areal.api.cli_args import MicroBatchSpec
    from areal.utils.data import amend_position_ids, pack_tensor_dict, split_padded_tensor_dict_into_mb_list

    def pack(request: dict) -> list[dict]:
        docs = [d for d in documents_of(request) if d["tokens"]]
        if not docs:
            return []
        batch = amend_position_ids(_padded_batch(docs, request["policy"]["pad_id"]))  # fsdp_engine.py:1853
        mbl = _refusing_over_long(split_padded_tensor_dict_into_mb_list, batch,
                                  MicroBatchSpec(max_tokens_per_mb=request["row_length"]))
        order = iter(mbl.forward_indices or range(len(docs)))
        rows = []
        for mb in mbl.mbs:
            packed = pack_tensor_dict(dict(mb))
            cu = packed["cu_seqlens"].tolist()
            spans = [{"doc_uid": docs[next(order)]["doc_uid"], "start": cu[k], "length": cu[k + 1] - cu[k],
                      "doc_offset": 0} for k in range(len(cu) - 1)]
            rows.append({"input_ids": packed["input_ids"],
                         "labels": torch.roll(packed["input_ids"], shifts=-1, dims=-1),  # fsdp_engine.py:1992
                         "loss_mask": packed["loss_mask"].long(), "position_ids": packed["position_ids"],
                         "cu_seqlens": packed["cu_seqlens"],
                         "doc_spans": spans})
        return assign(rows, request)

    return pack


def _lm_engine() -> ModuleType:
    """``areal/trainer/sft/lm_engine.py`` loaded from the installed distribution's file: importing the package
    ``areal.trainer`` runs its ``__init__``, which imports the DPO trainer and its dataloader, hence ``datasets``
    (not in requirements/areal.lock: the SFT loss does not need it). The code run is the file's, byte for byte;
    only the package ``__init__`` is skipped (as rl_losses loads OpenRLHF's loss.py)."""
    import importlib.metadata
    import importlib.util
    import sys

    name = "_packoracle_areal_lm_engine"
    if name not in sys.modules:
        path = importlib.metadata.distribution("areal").locate_file("areal/trainer/sft/lm_engine.py")
        spec = importlib.util.spec_from_file_location(name, cast("Any", path))
        module = importlib.util.module_from_spec(cast("Any", spec))
        sys.modules[name] = module
        cast("Any", spec).loader.exec_module(module)
    return sys.modules[name]


def _single_process_group() -> None:
    """A one-process gloo group, so that compute_total_loss_weight's all_reduce runs (the identity on one
    process: the kit hands it every rank's micro-batches, so their sum is the all-reduced total)."""
    import tempfile

    import torch.distributed as dist

    if not dist.is_initialized():
        store = tempfile.NamedTemporaryFile(prefix="packoracle-areal-", delete=False).name
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)


def sft_reducer() -> Reducer:
    """The SFT engine's loss over the kit's step (``trainer/sft/lm_engine.py`` train_lm: ``loss_fn``
    compute_packed_sft_loss, ``loss_weight_fn`` = ``loss_mask.count_nonzero()``), each packed row one engine
    micro-batch: logprobs = minus the kit's slot losses (float32, as the engine's), its loss scaled as
    ``_compute_logprobs_and_loss`` scales it, ``local_weight / total_loss_weight * dp_size``
    (``fsdp_engine.py:2120``, loss_multiplier = dp size; 0 for a micro-batch without a trained token, as there)
    with ``total_loss_weight`` from ``compute_total_loss_weight`` (every rank's micro-batches: its all-reduce).
    DDP averages the ranks' gradients, so a row's share of the step objective is that scaled loss / dp_size."""
    import torch
    from areal.engine.core.train_engine import compute_total_loss_weight

    compute_packed_sft_loss = _lm_engine().compute_packed_sft_loss
    _single_process_group()

    def engine_input(row: dict) -> dict:
        return {"cu_seqlens": torch.as_tensor(np.asarray(row["cu_seqlens"]).reshape(-1)),
                "loss_mask": torch.as_tensor(np.asarray(row["loss_mask"]).reshape(-1))}

    def weight(mb: dict) -> Any:
        return mb["loss_mask"].count_nonzero()  # lm_engine.py's loss_weight_fn

    def reduce(request: dict) -> list[dict]:
        from types import SimpleNamespace

        dp = int(request["dp_world_size"])
        rows = [[engine_input(row) for row in mb["rows"]] for mb in request["microbatches"]]
        total = compute_total_loss_weight(SimpleNamespace(mbs=[r for mb in rows for r in mb]), weight, None)
        out = []
        for m, mb in enumerate(rows):
            loss_sum = share = 0.0
            for r, inputs in enumerate(mb):
                logprobs = -torch.as_tensor(np.asarray(request["slot_losses"][m][r], dtype=np.float32))
                loss_sum += float(torch.where(inputs["loss_mask"].bool(), -logprobs, 0).sum())
                if weight(inputs) == 0:  # fsdp_engine.py:2063: logits.mean() * 0.0
                    continue
                loss = compute_packed_sft_loss(logprobs, torch.zeros_like(logprobs), inputs)
                share += float(loss * (weight(inputs) / total * dp)) / dp
            out.append({"loss_sum": loss_sum, "denominator": float(total), "denominator_scope": "global",
                        "loss": share})
        return out

    return reduce


# Pre-shifted targets with a separate loss mask; the boundary prediction is masked (the rolled per-sample mask).
POLICY = {"preset": "hf-flatten", "label_alignment": "pre_shifted", "loss_mask": True,
          "boundary_source": "cu_seqlens", "padding": "none", "boundary_target": "excluded"}

_WRAPS = Finding(
    "targets", "bug",
    "The SFT trainer rolls the padded batch's loss mask by -1 (lm_engine.py:29) and the engine the packed stream "
    "for the labels (fsdp_engine.py:1992). The batch's longest sample has no padding, so its last slot's mask "
    "wraps to its own first token's: when that token is trained (no prompt), the prediction made at the sample's "
    "last token is trained against the next packed sample's first token (d0=[11] alone: its last slot targets "
    "11, the stream wrapped).", report="docs/upstream/areal-rolled-mask-wraps.md")

ADAPTERS = (
    Adapter(name="areal/packed-mb", system="areal", distribution="areal", written_for=WRITTEN_FOR,
            configuration="split_padded_tensor_dict_into_mb_list(batch, MicroBatchSpec(max_tokens_per_mb=L)); "
                          "pack_tensor_dict(mb) for each; labels torch.roll(input_ids, -1) as the FSDP engine; "
                          "loss: compute_packed_sft_loss(logprobs, entropy, mb) × loss_mask.count_nonzero() / "
                          "compute_total_loss_weight(...) × dp_size, as train_lm and the engine scale it",
            policy=POLICY, imports=("areal.utils.data", "areal.api.cli_args", "torch"),
            make_packer=packed_packer, make_reducer=sft_reducer, family="areal",
            # The loss role meets the packer's wrap first: the reducer trains the wrapped slot as the mask says.
            findings={"pack": _WRAPS, "loss": _WRAPS},
            notes="installed with --no-deps (areal 1.0.4 pins torch<2.11 and ~280 packages); samples padded as "
                  "the engine's batch, the loss mask rolled as lm_engine.py does, labels rolled over the packed "
                  "stream as fsdp_engine.py does; lm_engine.py (compute_packed_sft_loss) is loaded from its file, "
                  "as the package areal.trainer imports datasets, which the SFT loss does not need; a sample "
                  "longer than max_tokens_per_mb: seqpack.ffd_allocate's RuntimeError \"Values [...] is larger "
                  "than capacity N\", the library's refusal (overflow: error), answered as the kit's refusal "
                  "(any other exception stays a crash)"),
)
