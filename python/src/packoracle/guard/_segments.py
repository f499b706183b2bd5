"""Documents when nobody says what they are: a batch's own segments, read from the encoding its policy
declares, taken as its documents. Checked that way, a batch can still be wrong in everything that needs no
documents (its other encodings against this one, positions against segments, targets against the shift
inside a segment, the counts); what it cannot show is a segment that is not a document (two documents
under one segment), so the guard says which checks it ran."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .._arrays import as_array, rows_of
from .._batch import ALIASES

CHECKED_WITHOUT_DOCUMENTS = ("segments against each other", "positions against segments",
                             "targets against the shift inside each segment", "counts and denominators")
CHECKED_WITH_DOCUMENTS = ("documents against segments (attention)", "positions", "targets", "counts and denominators",
                          "coverage")


def _field(batch: Mapping[str, Any], canonical: str):
    for name, value in batch.items():
        if value is not None and (name == canonical or ALIASES.get(name) == canonical):
            return value
    return None


def _starts(batch: Mapping[str, Any], row: int, n: int, policy: Mapping[str, Any]) -> list[int]:
    """Segment starts of one row under the declared boundary_source (0 always starts one)."""
    source = policy["boundary_source"]
    if source == "cu_seqlens":
        cu = _field(batch, "cu_seqlens")
        if cu is not None:
            cu = as_array(cu, "batch", "cu_seqlens")
            cu = cu if cu.ndim == 1 else cu[row]
            return sorted({0} | {int(c) for c in cu if 0 < int(c) < n})
    if source == "seq_lens":
        lens = _field(batch, "seq_lens")
        if lens is not None:
            lens = as_array(lens, "batch", "seq_lens")
            lens = lens if lens.ndim == 1 else lens[row]
            return sorted({0} | {int(c) for c in np.cumsum(lens) if 0 < int(c) < n})
    if source in ("doc_ids", "attention_mask"):
        ids = _field(batch, "doc_ids" if source == "doc_ids" else "attention_mask")
        if ids is not None:
            ids = rows_of(as_array(ids, "batch", source), "batch", source)[row]
            return [0] + [i for i in range(1, n) if ids[i] != ids[i - 1]]
    if source == "position_reset":
        pos = _field(batch, "position_ids")
        if pos is not None:
            pos = rows_of(as_array(pos, "batch", "position_ids"), "batch", "position_ids")[row]
            return [0] + [i for i in range(1, n) if pos[i] <= pos[i - 1]]
    if source in ("eod_closes", "eod_opens"):
        ids = rows_of(as_array(batch["input_ids"], "batch", "input_ids"), "batch", "input_ids")[row]
        eos = policy.get("eos_id")
        if eos is not None:
            shift = 1 if source == "eod_closes" else 0
            return sorted({0} | {i + shift for i in range(n) if ids[i] == eos and 0 < i + shift < n})
    return [0]  # no boundary encoding (or it is missing): the whole row is one segment


def documents_from_segments(batch: Mapping[str, Any], policy: Mapping[str, Any]) -> tuple[list[dict], list[list[dict]]]:
    """([{"doc_uid", "tokens", "supervised"}], doc_spans per row): one document per segment of each row, cut
    where the declared encoding says; trailing slots whose token is pad_id and whose label is ignored are
    padding (no document), when the policy pads. A token is supervised where its label is not ignored (the
    label that targets it: its own under aligned labels, the previous slot's when pre-shifted): the guard
    cannot tell a prompt mask from a wrong one without the documents."""
    ids = rows_of(as_array(batch["input_ids"], "batch", "input_ids"), "batch", "input_ids")
    labels = rows_of(as_array(batch["labels"], "batch", "labels"), "batch", "labels")
    ignore, docs, spans = policy["ignore_index"], [], []
    for r in range(ids.shape[0]):
        n = ids.shape[1]
        if policy["padding"] != "none":
            while n > 0 and int(ids[r, n - 1]) == policy["pad_id"] and int(labels[r, n - 1]) == ignore:
                n -= 1
        starts = [s for s in _starts(batch, r, ids.shape[1], policy) if s < n] or ([0] if n else [])
        row_spans = []
        for k, s in enumerate(starts):
            e = starts[k + 1] if k + 1 < len(starts) else n
            uid = f"row{r}.seg{k}"
            docs.append({"doc_uid": uid, "tokens": [int(t) for t in ids[r, s:e]],
                         "supervised": _supervised(labels[r], s, e, ignore, policy["label_alignment"])})
            row_spans.append({"doc_uid": uid, "start": s, "length": e - s, "doc_offset": 0})
        spans.append(row_spans)
    return docs, spans


def _supervised(labels: np.ndarray, s: int, e: int, ignore: int, alignment: str) -> list[int]:
    if alignment == "aligned":
        return [1] + [int(labels[i] != ignore) for i in range(s + 1, e)]
    return [1] + [int(labels[i - 1] != ignore) for i in range(s + 1, e)]
