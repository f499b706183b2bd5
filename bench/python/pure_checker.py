"""A straightforward pure-Python checker of one micro-batch: the baseline check_batch is measured against.

It checks the invariants of DESIGN §4 that apply to a document-packed micro-batch under the `reference`
policy family (pre-shifted labels, no loss_mask, doc_reset positions continuing over a split, boundary targets
excluded, no row-end target, right padding, global_targets over one micro-batch), from the batch's doc_spans:

  shape        every per-token array is rows x L, like input_ids; rows exactly L long (padded to the row length)
  coverage     every span names a known document, lies inside its row and its document, holds the document's
               tokens in order, overlaps no other span; whole documents (overflow: error); every document once;
               every other slot is padding: the pad id, after the last document token of its row
  segments     doc_ids are constant within a span, different between spans, -1 on padding; position resets
               (position == base) fall exactly at the spans' starts
  positions    position = base + offset in the document for every document slot
  targets      labels[i] is the next token of the same document when slot i+1 holds it, else ignore_index
               (the boundary and the row end excluded; padding never a target)
  denominator  the valid-target count (labels != ignore_index) equals the count the spans imply, and the
               producer's denominator; its loss is loss_sum / denominator

Python lists and loops only (the tensors are read with .tolist()). Returns a list of
(invariant, row, slot, message); empty when the batch is clean.
"""

from __future__ import annotations

from typing import Any, Optional

PER_TOKEN = ("input_ids", "labels", "position_ids", "doc_ids")


def _rows(value: Any) -> list:
    value = value.tolist() if hasattr(value, "tolist") else value
    if value and not isinstance(value[0], list):
        value = [value]
    return value


def _supported(policy: dict) -> None:
    want = {"label_alignment": "pre_shifted", "loss_mask": False, "positions": "doc_reset",
            "boundary_target": "excluded", "row_end_target": "none", "padding": "right", "pad_to": "row_len",
            "overflow": "error", "eos_id": None, "bos_id": None, "denominator": "global_targets",
            "count_basis": "targets"}
    for key, value in want.items():
        if policy.get(key) != value:
            raise NotImplementedError(f"pure_checker: policy key {key}={policy.get(key)!r} is not supported "
                                      f"(only the reference family: {key}={value!r})")


def check(batch: dict, documents: dict, policy: dict, producer: Optional[dict] = None,
          row_length: Optional[int] = None) -> list:
    _supported(policy)
    out = []
    pad, ignore, base = policy["pad_id"], policy["ignore_index"], policy["position_base"]
    arrays = {name: _rows(batch[name]) for name in PER_TOKEN if batch.get(name) is not None}
    ids = arrays["input_ids"]
    rows = len(ids)
    L = row_length or max(len(r) for r in ids)
    spans = batch["doc_spans"]
    if rows == 1 and spans and isinstance(spans[0], dict):
        spans = [spans]

    # shape
    for name, value in arrays.items():
        if len(value) != rows:
            out.append(("shape", None, None, f"{name} has {len(value)} rows, input_ids has {rows}"))
            return out
        for r in range(rows):
            if len(value[r]) != len(ids[r]):
                out.append(("shape", r, None, f"{name} has {len(value[r])} entries, input_ids has {len(ids[r])}"))
    for r in range(rows):
        if len(ids[r]) != L:
            out.append(("shape", r, None, f"{len(ids[r])} slots, but rows are padded to {L}"))
    if len(spans) != rows:
        out.append(("shape", None, None, f"doc_spans has {len(spans)} rows, input_ids has {rows}"))
    if out:
        return out

    labels = arrays["labels"]
    positions = arrays.get("position_ids")
    doc_ids = arrays.get("doc_ids")
    docs = {uid: tokens.tolist() if hasattr(tokens, "tolist") else list(tokens) for uid, tokens in documents.items()}
    placed = {}
    expected_count = 0
    count = 0
    for r in range(rows):
        n = len(ids[r])
        row_ids, row_labels = ids[r], labels[r]
        owner: list = [None] * n  # (uid, offset in document, span index)

        # coverage
        for s, span in enumerate(spans[r]):
            uid, start, length, offset = span["doc_uid"], span["start"], span["length"], span["doc_offset"]
            tokens = docs.get(uid)
            if tokens is None:
                out.append(("coverage", r, start, f"a span names document {uid!r}, which is not a document"))
                continue
            if length <= 0 or start < 0 or start + length > n or offset < 0 or offset + length > len(tokens):
                out.append(("coverage", r, start, f"the span of {uid!r} lies outside its row or its document"))
                continue
            if offset != 0 or length != len(tokens):
                out.append(("coverage", r, start, f"{uid!r} is cut ({offset}+{length} of {len(tokens)} tokens) "
                                                  f"under overflow: error"))
            if uid in placed:
                out.append(("coverage", r, start, f"{uid!r} is placed twice (also in row {placed[uid]})"))
            placed[uid] = r
            for t in range(length):
                i = start + t
                if owner[i] is not None:
                    out.append(("coverage", r, i, "slot claimed by two spans"))
                    break
                owner[i] = (uid, offset + t, s)
                if row_ids[i] != tokens[offset + t]:
                    out.append(("coverage", r, i, f"holds {row_ids[i]}, token {offset + t} of {uid!r} is "
                                                  f"{tokens[offset + t]}"))
                    break
        last = max((i for i in range(n) if owner[i] is not None), default=-1)
        for i in range(n):
            if owner[i] is None:
                if row_ids[i] != pad:
                    out.append(("coverage", r, i, f"holds {row_ids[i]}: neither a document token nor the pad id"))
                    break
                if i < last:
                    out.append(("coverage", r, i, "padding before a document token (right padding)"))
                    break

        # segments: doc_ids
        if doc_ids is not None:
            row_doc_ids = doc_ids[r]
            seen_ids = {}
            for i in range(n):
                o = owner[i]
                if o is None:
                    if row_doc_ids[i] != -1:
                        out.append(("segments", r, i, f"doc_ids is {row_doc_ids[i]} on padding, expected -1"))
                        break
                    continue
                s = o[2]
                if s not in seen_ids:
                    if row_doc_ids[i] in seen_ids.values():
                        out.append(("segments", r, i, f"doc_ids {row_doc_ids[i]} is shared by two documents"))
                        break
                    seen_ids[s] = row_doc_ids[i]
                elif row_doc_ids[i] != seen_ids[s]:
                    out.append(("segments", r, i, f"doc_ids changes inside a document ({seen_ids[s]} to "
                                                  f"{row_doc_ids[i]})"))
                    break

        # segments (position resets) and positions
        if positions is None:
            out.append(("positions", r, None, "no position_ids, but the policy resets positions per document"))
        else:
            row_pos = positions[r]
            for i in range(n):
                o = owner[i]
                if o is None:
                    continue
                span_start = i == 0 or owner[i - 1] is None or owner[i - 1][2] != o[2]
                if (row_pos[i] == base) != span_start:
                    out.append(("segments", r, i, f"position resets say {'a' if row_pos[i] == base else 'no'} "
                                                  f"document start, the spans say {'one' if span_start else 'none'}"))
                    break
            for i in range(n):
                o = owner[i]
                if o is not None and row_pos[i] != base + o[1]:
                    out.append(("positions", r, i, f"position {row_pos[i]}, the policy says {base + o[1]}"))
                    break

        # targets (the first wrong label of the row is reported; the count goes on)
        wrong = False
        for i in range(n):
            o = owner[i]
            want = ignore
            if o is not None and i + 1 < n:
                nxt = owner[i + 1]
                if nxt is not None and nxt[2] == o[2] and nxt[1] == o[1] + 1:
                    want = docs[o[0]][o[1] + 1]
                    expected_count += 1
            if row_labels[i] != ignore:
                count += 1
            if row_labels[i] != want and not wrong:
                out.append(("targets", r, i, f"label {row_labels[i]}, expected {want}"))
                wrong = True

    for uid in docs:
        if uid not in placed and docs[uid]:
            out.append(("coverage", None, None, f"document {uid!r} is in no row"))

    # denominator
    out.extend(check_totals(count, expected_count, producer))
    return out


def check_totals(count: int, expected_count: int, producer: Optional[dict]) -> list:
    """The count of weighted labels and the producer's denominator and loss against the documents' count (both
    checkers share it: scalar work, once per batch)."""
    out = []
    if count != expected_count:
        out.append(("denominator", None, None, f"{count} weighted labels, the documents give {expected_count}"))
    if producer is not None:
        den = producer["denominator"]
        if den != expected_count:
            out.append(("denominator", None, None, f"divided by {den}, the step has {expected_count} valid targets"))
        loss = producer.get("loss")
        if loss is not None and den > 0 and abs(loss - producer["loss_sum"] / den) > 1e-12 * max(1.0, abs(loss)):
            out.append(("loss", None, None, f"loss {loss} is not loss_sum / denominator"))
    return out
