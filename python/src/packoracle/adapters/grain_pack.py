"""google/grain 0.2.18: the packing transformations of ``grain.experimental`` that JAX trainers put before the
model, ``FirstFitPackIterDataset``, ``BestFitPackIterDataset`` and ``ConcatThenSplitIterDataset``. numpy only
(no torch, no transformers): the family environment ``grain`` (requirements/grain.lock).

Each document becomes one element ``{"input_ids": tokens, "labels": tokens with ignore_index where a token is
not supervised}`` (int32 arrays, the features a trainer's tokenizing map makes), fed in order through
``MapDataset.source(...).to_iter_dataset()``; the packer is iterated to exhaustion, every yielded element is a
row. grain pads every feature to its ``length_struct`` length (``padding_struct``: 0 for inputs, the ignore
index for labels) and adds ``<feature>_segment_ids`` (1..k in the row, 0 for padding) and
``<feature>_positions`` (the offset in the element, 0 for padding). What comes back is given unchanged, under
the kit's names: ``input_ids_segment_ids`` as ``doc_ids`` (its padding id 0 as the kit's -1),
``input_ids_positions`` as ``position_ids``
(the labels' copies are the same arrays, checked here, not given twice). A third feature, ``doc_index`` (the
element's number, packed as the others are), gives each row's ``doc_spans``: where grain put each document, so
that documents with the same tokens are told apart (first fit reorders them).

grain neither shifts nor masks labels: the model shifts (``label_alignment: aligned``), and nothing stops the
prediction made at a document's last slot from reaching the next document's first label in the same row (the
segment ids are for attention). Hence ``boundary_target: included`` as the library lays it out.

The adapter's part: rows are dealt into micro-batches and ranks by ``assign`` (grain's per-host sharding comes
before packing, not modelled); empty documents are left out (a zero-length element is a no-op for the packer).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._fuzz import Refuse
from ._base import Adapter, Packer, assign, documents_of

WRITTEN_FOR = "0.2.18"
_FEATURES = ("input_ids", "labels")


def _elements(request: dict) -> tuple[list[dict], list[str]]:
    """The elements, and the uid of each (element k carries k + 1 in its ``doc_index`` feature)."""
    ignore = request["policy"]["ignore_index"]
    docs = [d for d in documents_of(request) if d["tokens"]]
    return [{"input_ids": np.asarray(d["tokens"], np.int32),
             "labels": np.asarray([t if s else ignore for t, s in zip(d["tokens"], d["supervised"])], np.int32),
             "doc_index": np.full(len(d["tokens"]), k + 1, np.int32)} for k, d in enumerate(docs)], \
        [d["doc_uid"] for d in docs]


def _spans(element: dict, uids: list[str]) -> list[dict]:
    """Where grain put each document: the runs of the packed ``doc_index`` feature (packed as every feature is,
    so it says where the library placed each element: two documents with the same tokens are told apart)."""
    index, positions = element["doc_index"], element["doc_index_positions"]
    spans: list[dict] = []
    for slot, value in enumerate(index.tolist()):
        if value == 0:
            continue
        if spans and spans[-1]["doc_uid"] == uids[value - 1] and spans[-1]["start"] + spans[-1]["length"] == slot:
            spans[-1]["length"] += 1
        else:
            spans.append({"doc_uid": uids[value - 1], "start": slot, "length": 1, "doc_offset": int(positions[slot])})
    return spans


def _row(element: dict, uids: list[str]) -> dict:
    """One packed element under the kit's names; the labels' segment ids and positions must be the inputs'."""
    for suffix in ("segment_ids", "positions"):
        if not np.array_equal(element[f"input_ids_{suffix}"], element[f"labels_{suffix}"]):
            raise AssertionError(f"grain gave labels_{suffix} {element[f'labels_{suffix}'].tolist()} unlike "
                                 f"input_ids_{suffix} {element[f'input_ids_{suffix}'].tolist()}")
    return {"doc_spans": _spans(element, uids), "input_ids": element["input_ids"], "labels": element["labels"],
            # grain's padding segment is 0, the kit's doc_ids padding value is -1: the same fact, re-spelled
            "doc_ids": np.where(element["input_ids_segment_ids"] == 0, -1, element["input_ids_segment_ids"]),
            "position_ids": element["input_ids_positions"]}


def grain_packer(kind: str, **options: Any) -> Packer:
    """`kind`: "first_fit", "best_fit" or "concat_then_split"; `options` go to the transformation as given."""
    import grain
    from grain import experimental as gx

    def pack(request: dict) -> list[dict]:
        elements, uids = _elements(request)
        if not elements:
            return []
        length = request["row_length"]
        lengths = {f: length for f in _FEATURES + ("doc_index",)}
        source = grain.MapDataset.source(elements).to_iter_dataset()
        if kind == "concat_then_split":
            dataset = gx.ConcatThenSplitIterDataset(source, length_struct=lengths, **options)
        else:
            cls = gx.FirstFitPackIterDataset if kind == "first_fit" else gx.BestFitPackIterDataset
            dataset = cls(source, length_struct=lengths,
                          padding_struct={"input_ids": request["policy"]["pad_id"],
                                          "labels": request["policy"]["ignore_index"], "doc_index": 0},
                          **options)
        try:
            rows = [_row(e, uids) for e in dataset]
        except ValueError as e:  # first/best fit refuse an element longer than its length_struct
            if "must be truncated to max length" in str(e):
                raise Refuse(f"grain: {str(e).splitlines()[0]}") from None
            raise
        return assign(rows, request)

    return pack


# Padding keys: the segment id 0 puts every padding slot in one segment of its own (a model's segment mask
# compares ids); padding positions 0; a document longer than the row is refused (the ValueError above).
POLICY = {"preset": "hf-padded", "boundary_source": "doc_ids", "attention": "doc_causal", "pad_keys": "own_segment",
          "positions": "doc_reset", "pad_positions": "zero", "boundary_target": "included", "overflow": "error"}

_CALL = ("{cls}(MapDataset.source(elements).to_iter_dataset(), length_struct={{'input_ids': L, 'labels': L}}, "
         "num_packing_bins=4, padding_struct={{'input_ids': pad_id, 'labels': -100}})")


def _adapter(kind: str, cls: str) -> Adapter:
    return Adapter(name=f"grain/{kind.replace('_', '-')}", system="grain", distribution="grain",
                   written_for=WRITTEN_FOR, configuration=_CALL.format(cls=cls), policy=POLICY,
                   imports=("grain", "grain.experimental"),
                   make_packer=lambda: grain_packer(kind, num_packing_bins=4), family="grain",
                   notes="each document an element {input_ids, labels}; the packed element's segment ids and "
                         "positions given unchanged (as doc_ids, padding segment 0 written -1, and position_ids); labels not shifted (the model "
                         "shifts)")


ADAPTERS = (_adapter("first_fit", "FirstFitPackIterDataset"), _adapter("best_fit", "BestFitPackIterDataset"))
