"""pytorch/torchtune 0.6.1 (the last PyPI release): PackedDataset + padded_collate_packed.

What the adapter decides, as a user's data loader would:
- the documents (policy delimiters added, empty ones left out as a dataset filter drops them) become the
  samples of a map-style dataset, ``{"tokens": tokens, "labels": tokens with unsupervised ones at -100}``
  (what torchtune's text-completion / SFT transforms emit in 0.6.1: labels NOT shifted);
- ONE ``PackedDataset(samples, max_seq_len=row_length, padding_idx=pad_id, split_across_pack=...)`` packs
  them all; its packs, in order, are the rows; micro-batch m = packs [m·B, (m+1)·B) collated by one
  ``padded_collate_packed`` call (DataLoader(batch_size=B, collate_fn=padded_collate_packed), no shuffle),
  to rank m mod dp (``assign``).

What is returned is the library's tensors unchanged, under the kit's names: ``tokens`` → input_ids,
``input_pos`` → position_ids, ``labels`` as they are. Boundaries come twice: ``seq_lens`` of each pack (the
PackedDataset item; the collator reads them and does not return them) and the collator's dense (B, L, L) bool
``mask`` (CPU: no flex BlockMask without CUDA SM ≥ 7.5), turned into per-token segment ids by
``packoracle.dump.doc_ids_from_dense_mask`` with no slot marked as padding beforehand: torchtune's mask gives
the padding its own causal block, so the padding becomes a segment of its own (the kit compares ids only for
changes, and ignores how padding is cut). doc_spans are not given: PackedDataset packs only tokens / labels /
input_pos / seq_lens, so no provenance column can travel; the kit derives them from the documents' tokens.

Labels in 0.6.1: the recipes (full_finetune_distributed.py, in the wheel's ``recipes/`` folder) shift them
over the whole packed row, ``torch.hstack((labels[..., 1:], ignore))``: the target of slot i is labels[i+1]
and the last slot has none. That is ``label_alignment: aligned``, so the kit applies exactly that shift and
the adapter does not copy recipe code. The declared policy keeps the intent of torchtune (the
``torchtune-packed`` preset, main@bd2a0fc after PR #2613): no prediction targets the first token of the next
sample. 0.6.1 trains that cross-sample target; the kit finds it, and the Finding below explains it.

No loss reducer: the loss arithmetic (count ``labels != ignore`` before the shift, ``loss_fn(...) *
current_num_tokens``, all-reduce, ``scale_grads(model, world_size / num_tokens)``) is written inline in the
recipe's ``train()``, and ``recipes/__init__.py`` raises ModuleNotFoundError on purpose ("The torchtune
recipes directory isn't a package"). Driving it would mean copying recipe code, which is not the library.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
import io

from .._fuzz import Refuse
from ._base import Adapter, Finding, Packer, assign, documents_of

WRITTEN_FOR = "0.6.1"


def _samples(request: dict) -> list[dict]:
    """The dataset a user's transform yields: tokens, and labels = tokens with unsupervised ones ignored."""
    ignore = request["policy"]["ignore_index"]
    return [{"tokens": d["tokens"], "labels": [t if s else ignore for t, s in zip(d["tokens"], d["supervised"])]}
            for d in documents_of(request) if d["tokens"]]


def _packs(request: dict, split_across_pack: bool) -> list[dict]:
    """PackedDataset's packs in order; its own ValueError for a sample longer than max_seq_len is a refusal."""
    from torchtune.datasets import PackedDataset

    samples = _samples(request)
    if not samples:
        return []
    try:
        # Its tqdm bar ("Packing dataset") is drawn on stderr for every request: sent nowhere (tqdm reads
        # TQDM_DISABLE only when imported, so the stream is the one way to silence it from here).
        with contextlib.redirect_stderr(io.StringIO()):
            packed = PackedDataset(samples, max_seq_len=request["row_length"],
                                   padding_idx=request["policy"]["pad_id"], split_across_pack=split_across_pack)
    except ValueError as e:  # "Dataset sample is too long (n > L). Please set `split_across_pack=True` ..."
        raise Refuse(f"torchtune PackedDataset: {e}") from None
    return [packed[i] for i in range(len(packed))]


def _kit_fields(collated: dict, packs: list[dict]) -> dict:
    """The collated batch under the kit's names, tensors unchanged; the dense mask as segment ids."""
    from ..dump import doc_ids_from_dense_mask

    mask = collated["mask"]
    n = mask.shape[-1]
    doc_ids = [doc_ids_from_dense_mask(mask[b].tolist(), allowed=bool, pad_slots=[False] * n,
                                       where=f"padded_collate_packed row {b}", field="mask")
               for b in range(mask.shape[0])]
    return {"input_ids": collated["tokens"], "labels": collated["labels"], "position_ids": collated["input_pos"],
            "seq_lens": [p["seq_lens"] for p in packs], "doc_ids": doc_ids}


def packed_packer(split_across_pack: bool) -> Packer:
    from torchtune.data import padded_collate_packed

    def pack(request: dict) -> list[dict]:
        out = []
        for mb in assign(_packs(request, split_across_pack), request):
            packs = mb.pop("rows")
            out.append(dict(mb, **_kit_fields(padded_collate_packed(packs), packs)))
        return out

    return pack


def dump_packed(split_across_pack: bool) -> Callable[[dict, list], list[dict]]:
    """packoracle.dump.from_torchtune_packed on each micro-batch's packs as PackedDataset returned them (the
    answer's input_ids / labels / position_ids / seq_lens are those packs' tensors, renamed back)."""

    def dump(request: dict, answer: list) -> list[dict]:
        from ..dump import DocumentSequence, from_torchtune_packed

        seq = DocumentSequence([{"doc_uid": d["doc_uid"], "tokens": d["tokens"]} for d in documents_of(request)
                                if d["tokens"]])
        records = []
        for mb in answer:
            packs = [{"tokens": mb["input_ids"][b], "labels": mb["labels"][b], "input_pos": mb["position_ids"][b],
                      "seq_lens": mb["seq_lens"][b]} for b in range(len(mb["seq_lens"]))]
            record = from_torchtune_packed(packs, seq, pad_id=request["policy"]["pad_id"],
                                           split_across_pack=split_across_pack)
            records.append(dict(record, step=mb["step"], micro_step=mb["micro_step"], rank=mb["rank"]))
        return records

    return dump


# Examined (see the module docstring): 0.6.1's labels are the sample's own tokens, and the recipe's row-wide
# shift makes labels[start of sample k+1] the target of the last token of sample k.
CROSS_SAMPLE_TARGET = Finding(
    "targets", "bug",
    "two samples [3, 4] and [5, 6] packed into one row: PackedDataset returns labels [3, 4, 5, 6] (0.6.1's "
    "datasets leave labels unshifted: \"No need to offset labels by 1 - happens in the recipe\"), and the recipe "
    "shifts the whole row (torch.hstack((labels[..., 1:], ignore))), so the prediction made from 4, the last "
    "token of the first sample, is trained to produce 5, the first token of the next, unrelated sample, although "
    "the block-causal mask and input_pos isolate the samples. Right: that label is -100, as on main since PR "
    "#2613 (labels shifted per sample in the dataset, the recipes' shift removed), which no PyPI release has",
    "https://github.com/meta-pytorch/torchtune/pull/2613", report="docs/upstream/torchtune-row-shift.md")

_POLICY = {"preset": "torchtune-packed", "label_alignment": "aligned"}

ADAPTERS = (
    Adapter(name="torchtune/packed", system="torchtune", distribution="torchtune", written_for=WRITTEN_FOR,
            configuration="PackedDataset(ds, max_seq_len=L, padding_idx=pad, split_across_pack=False) + "
                          "padded_collate_packed + the recipe's row shift",
            policy=_POLICY, imports=("torchao", "torchtune.datasets", "torchtune.data"),
            make_packer=lambda: packed_packer(False), dump=dump_packed(False),
            notes="labels unshifted in 0.6.1 and shifted over the row by the recipe (label_alignment aligned); "
                  "the boundary target stays excluded, torchtune's intent (PR #2613): 0.6.1 trains it. "
                  "Boundaries: seq_lens of the packs, and the collator's dense CPU mask converted to doc_ids. "
                  "No loss reducer: the loss arithmetic is inline in the recipe's train(), and recipes/ is not "
                  "importable by design (its __init__ raises ModuleNotFoundError)",
            findings={"pack": CROSS_SAMPLE_TARGET}),
    Adapter(name="torchtune/packed-split", system="torchtune", distribution="torchtune", written_for=WRITTEN_FOR,
            configuration="PackedDataset(ds, max_seq_len=L, padding_idx=pad, split_across_pack=True) + "
                          "padded_collate_packed + the recipe's row shift",
            policy=dict(_POLICY, overflow="split"), imports=("torchao", "torchtune.datasets", "torchtune.data"),
            make_packer=lambda: packed_packer(True), dump=dump_packed(True),
            notes="as torchtune/packed, a sample cut at the row end continues the next pack with input_pos "
                  "counting on modulo max_seq_len (split_positions modulo); under the recipe's row shift the "
                  "last slot of a row has no target (row_end_target none), so a cut sample loses that one "
                  "target. No loss reducer (see torchtune/packed)",
            findings={"pack": CROSS_SAMPLE_TARGET}),
)
