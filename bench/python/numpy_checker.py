"""A vectorised numpy checker of the same invariants as pure_checker.py, on the same batch: the second baseline.

From the doc_spans it builds, once per span with slice assignments, what every slot of the rows x L batch should
hold (the token, the label, the position, which span owns it), then compares the whole arrays at once:

  shape        per-token arrays rows x L like input_ids; doc_spans one list per row
  coverage     spans name known documents, lie inside their row and document, whole documents (overflow: error),
               each document once; no slot claimed twice; input_ids == the expected tokens (document tokens in
               their spans, the pad id elsewhere); no padding before a document token of its row
  segments     doc_ids constant within each span (== its value at the span's start), distinct between the
               spans of a row, -1 on padding; (position_ids == base) exactly at the spans' starts
  positions    position_ids == base + offset in the document on every document slot
  targets      labels == the expected labels (next token of the same document; ignore_index at each span's last
               slot and on padding)
  denominator  count(labels != ignore_index) == the spans' valid targets == the producer's denominator; loss =
               loss_sum / denominator

Returns a list of (invariant, row, slot, message), the first offending slot of each kind; empty when clean.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from pure_checker import _supported, check_totals

PER_TOKEN = ("input_ids", "labels", "position_ids", "doc_ids")


def _array(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):  # a CPU torch tensor: a view of its storage
        value = value.detach().numpy()
    a = np.asarray(value)
    return a.reshape(1, -1) if a.ndim == 1 else a


def _first(mask: np.ndarray) -> tuple[int, int]:
    flat = int(np.flatnonzero(mask.ravel())[0])
    return divmod(flat, mask.shape[1])


def check(batch: dict, documents: dict, policy: dict, producer: Optional[dict] = None,
          row_length: Optional[int] = None) -> list:
    _supported(policy)
    out = []
    pad, ignore, base = policy["pad_id"], policy["ignore_index"], policy["position_base"]
    arrays = {name: _array(batch[name]) for name in PER_TOKEN if batch.get(name) is not None}
    ids = arrays["input_ids"]
    rows, n = ids.shape
    L = row_length or n
    for name, a in arrays.items():
        if a.shape != ids.shape:
            out.append(("shape", None, None, f"{name} has shape {a.shape}, input_ids has {ids.shape}"))
    if n != L:
        out.append(("shape", None, None, f"{n} slots, but rows are padded to {L}"))
    spans = batch["doc_spans"]
    if rows == 1 and spans and isinstance(spans[0], dict):
        spans = [spans]
    if len(spans) != rows:
        out.append(("shape", None, None, f"doc_spans has {len(spans)} rows, input_ids has {rows}"))
    if out:
        return out

    docs = {uid: np.asarray(tokens, dtype=np.int64) for uid, tokens in documents.items()}
    exp_ids = np.full((rows, n), pad, dtype=np.int64)
    exp_labels = np.full((rows, n), ignore, dtype=np.int64)
    exp_pos = np.zeros((rows, n), dtype=np.int64)
    cover = np.zeros((rows, n), dtype=np.int32)
    starts = np.zeros((rows, n), dtype=bool)
    ramp = np.arange(n, dtype=np.int64)
    placed: dict[str, int] = {}
    expected_count = 0
    for r, row_spans in enumerate(spans):
        for span in row_spans:
            uid, a, length, off = span["doc_uid"], span["start"], span["length"], span["doc_offset"]
            tokens = docs.get(uid)
            if tokens is None:
                out.append(("coverage", r, a, f"a span names document {uid!r}, which is not a document"))
                continue
            if length <= 0 or a < 0 or a + length > n or off < 0 or off + length > len(tokens):
                out.append(("coverage", r, a, f"the span of {uid!r} lies outside its row or its document"))
                continue
            if off != 0 or length != len(tokens):
                out.append(("coverage", r, a, f"{uid!r} is cut under overflow: error"))
            if uid in placed:
                out.append(("coverage", r, a, f"{uid!r} is placed twice (also in row {placed[uid]})"))
            placed[uid] = r
            b = a + length
            cover[r, a:b] += 1
            starts[r, a] = True
            exp_ids[r, a:b] = tokens[off:off + length]
            exp_labels[r, a:b - 1] = tokens[off + 1:off + length]
            exp_pos[r, a:b] = ramp[:length] + (base + off)
            expected_count += length - 1
    for uid, tokens in docs.items():
        if uid not in placed and len(tokens):
            out.append(("coverage", None, None, f"document {uid!r} is in no row"))

    covered = cover > 0
    if (cover > 1).any():
        out.append(("coverage", *_first(cover > 1), "slot claimed by two spans"))
    wrong = ids != exp_ids
    if wrong.any():
        out.append(("coverage", *_first(wrong), "neither the document token its span says nor the pad id"))
    later = np.maximum.accumulate(covered[:, ::-1], axis=1)[:, ::-1]
    early_pad = ~covered & later
    if early_pad.any():
        out.append(("coverage", *_first(early_pad), "padding before a document token (right padding)"))

    doc_ids = arrays.get("doc_ids")
    if doc_ids is not None:
        start_at = np.maximum.accumulate(np.where(starts, ramp, 0), axis=1)
        first_value = np.take_along_axis(doc_ids, start_at, axis=1)
        bad = np.where(covered, doc_ids != first_value, doc_ids != -1)
        if bad.any():
            out.append(("segments", *_first(bad), "doc_ids do not follow the spans (-1 on padding)"))
        for r in range(rows):
            values = doc_ids[r][starts[r]]
            if len(np.unique(values)) != len(values):
                out.append(("segments", r, None, "two documents share a doc_ids value"))

    positions = arrays.get("position_ids")
    if positions is None:
        out.append(("positions", None, None, "no position_ids, but the policy resets positions per document"))
    else:
        resets = (positions == base) & covered
        if (resets != starts).any():
            out.append(("segments", *_first(resets != starts), "position resets disagree with the spans' starts"))
        bad = covered & (positions != exp_pos)
        if bad.any():
            out.append(("positions", *_first(bad), "position is not base + offset in the document"))

    labels = arrays["labels"]
    bad = labels != exp_labels
    if bad.any():
        out.append(("targets", *_first(bad), "label is not the next token of the same document (or ignore_index)"))

    count = int(np.count_nonzero(labels != ignore))
    out.extend(check_totals(count, expected_count, producer))
    return out
