"""Documents when nobody says what they are: a batch's own segments, read from the encoding its policy
declares, taken as its documents. Checked that way, a batch can still be wrong in everything that needs no
documents (its other encodings against this one, positions against segments, targets against the shift
inside a segment, the counts); what it cannot show is a segment that is not a document (two documents
under one segment), so the guard says which checks it ran."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import _core
from .._arrays import as_array, rows_of
from .._batch import canonical_microbatch

CHECKED_WITHOUT_DOCUMENTS = ("segments against each other", "positions against segments",
                             "targets against the shift inside each segment", "counts and denominators")
CHECKED_WITH_DOCUMENTS = ("documents against segments (attention)", "positions", "targets", "counts and denominators",
                          "coverage")


def segment_starts(batch: Mapping[str, Any], policy: Mapping[str, Any]) -> list[tuple[list[int], bool]]:
    """Per row, (starts, read): the slots where a segment starts, read from the encoding the policy declares by
    the core's own reading (``_core.segments``: the one a backend reading that encoding uses), and whether an
    encoding was read at all. A row without one (boundary_source spans or none, or the declared field missing)
    is one segment, as a backend fed it reads it, except where a 2-D attention_mask marks padding. `batch` is
    in canonical field names. A malformed encoding is a ValueError naming it."""
    fields = {name: value for name, value in batch.items() if name != "doc_spans"}
    rows = rows_of(as_array(fields["input_ids"], "batch", "input_ids"), "batch", "input_ids").shape[0]
    canonical = canonical_microbatch(dict(fields, doc_spans=[[] for _ in range(rows)]), where="batch")
    out = []
    for row in canonical["rows"]:
        starts, read = _core.segments_as_fed(row, policy)
        out.append(([int(x) for x in starts], bool(read)))
    return out


def documents_from_segments(batch: Mapping[str, Any], policy: Mapping[str, Any]) -> tuple[list[dict], list[list[dict]]]:
    """([{"doc_uid", "tokens", "supervised"}], doc_spans per row): one document per segment of each row, cut
    where the declared encoding says (`segment_starts`); trailing slots whose token is pad_id and whose label
    is ignored are padding (no document), when the policy pads (`_unpadded_length` says which). A token is
    supervised where its label is not ignored (the label that targets it: its own under aligned labels, the
    previous slot's when pre-shifted): the guard cannot tell a prompt mask from a wrong one without the
    documents."""
    ids = rows_of(as_array(batch["input_ids"], "batch", "input_ids"), "batch", "input_ids")
    labels = rows_of(as_array(batch["labels"], "batch", "labels"), "batch", "labels")
    ignore, docs, spans = policy["ignore_index"], [], []
    row_starts = segment_starts(batch, policy)
    for r in range(ids.shape[0]):
        starts, read = row_starts[r]
        n = _unpadded_length(ids[r], labels[r], starts, read, policy)
        starts = [s for s in starts if s < n] or ([0] if n else [])
        row_spans = []
        for k, s in enumerate(starts):
            e = starts[k + 1] if k + 1 < len(starts) else n
            uid = f"row{r}.seg{k}"
            docs.append({"doc_uid": uid, "tokens": [int(t) for t in ids[r, s:e]],
                         "supervised": _supervised(labels[r], s, e, ignore, policy["label_alignment"])})
            row_spans.append({"doc_uid": uid, "start": s, "length": e - s, "doc_offset": 0})
        spans.append(row_spans)
    return docs, spans


def _unpadded_length(ids: np.ndarray, labels: np.ndarray, starts: list[int], read: bool,
                     policy: Mapping[str, Any]) -> int:
    """Where a row's trailing padding starts, when the policy pads: padding slots hold pad_id with an ignored
    label. Trailing segments made only of such slots are padding (the encoding gave padding segments of its
    own), and the segment before them ends where they start, even if its last tokens look like padding (a
    document may end with the pad id: Megatron's EOD is often token 0). Where the encoding was read, that is all
    (padding folded into the last segment stays in it, as its backend reads it). Where none was (`read` False:
    the row is one segment), padding is the tail of such slots; a document's own trailing pad ids cannot be
    told from padding there."""
    n = len(ids)
    if policy["padding"] == "none":
        return n
    pad = (np.asarray(ids) == policy["pad_id"]) & (np.asarray(labels) == policy["ignore_index"])
    cut = n
    for s in reversed(starts):
        if not pad[s:cut].all():
            break
        cut = s
    if cut == n and not read:
        while cut > 0 and pad[cut - 1]:
            cut -= 1
    return cut


def _supervised(labels: np.ndarray, s: int, e: int, ignore: int, alignment: str) -> list[int]:
    if alignment == "aligned":
        return [1] + [int(labels[i] != ignore) for i in range(s + 1, e)]
    return [1] + [int(labels[i - 1] != ignore) for i in range(s + 1, e)]
