"""The batch every Python benchmark checks: 8 rows x 8192 slots of int64, packed as a correct packer does it for
the `reference` preset (DESIGN §3: document isolation).

Documents of 20 to 2,000 tokens (uniform, numpy's PCG64 with a fixed seed; token ids 1..50256, so never the pad
id) are placed in order, greedy and sequential, as python/candidates/reference.py does: a document that does not
fit in the space left closes the row and opens the next one; the first document that does not fit in row 8 is
left out, so every listed document is in the batch, whole. Each row then holds

  input_ids     the documents' tokens, then pad_id 0 to the end of the row (right padding)
  labels        pre-shifted: labels[i] = the next token of the same document; -100 at each document's last slot
                (the boundary target is excluded, there is no row-end target) and on padding
  position_ids  the offset in the document (reset to 0 at every document start); 0 on padding
  doc_ids       the piece's index in its row, -1 on padding
  doc_spans     {doc_uid, start, length, doc_offset} per document (the ground truth the checks compare with)

`producer` holds the micro-batch's totals as a reference loss reducer reports them under global_targets with one
rank and one micro-batch: denominator = the number of weighted labels.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np

SEED = 20261201
ROWS = 8
ROW_LENGTH = 8192
MIN_DOC, MAX_DOC = 20, 2000
SHORT_DOCS = (2, 200)  # short documents (chat turns, SFT samples): about 650 in a batch, per-document costs dominate
VOCAB = 50257
PAD_ID = 0
IGNORE = -100


@dataclass
class Workload:
    batch: dict[str, Any]          # input_ids, labels, position_ids, doc_ids (torch or numpy, ROWS x ROW_LENGTH), doc_spans
    documents: dict[str, Any]      # {uid: tokens as a list of ints (or arrays)}, in packing order
    producer: dict[str, Any]       # loss_sum, denominator, denominator_scope, loss
    valid_targets: int

    def without_spans(self) -> dict[str, Any]:
        return {k: v for k, v in self.batch.items() if k != "doc_spans"}

    def with_array_documents(self) -> "Workload":
        """The same workload with each document's tokens as a numpy int64 array instead of a list."""
        docs = {uid: np.asarray(tokens, dtype=np.int64) for uid, tokens in self.documents.items()}
        return Workload(batch=self.batch, documents=docs, producer=self.producer, valid_targets=self.valid_targets)


def make_workload(kind: str = "torch", seed: int = SEED, rows: int = ROWS, row_length: int = ROW_LENGTH,
                  doc_lengths: tuple[int, int] = (MIN_DOC, MAX_DOC)) -> Workload:
    """`kind`: "torch" (CPU int64 tensors; needs torch) or "numpy" (int64 arrays). `doc_lengths`: each document's
    token count is drawn uniformly from this closed range."""
    rng = np.random.default_rng(seed)
    input_ids = np.full((rows, row_length), PAD_ID, np.int64)
    labels = np.full((rows, row_length), IGNORE, np.int64)
    positions = np.zeros((rows, row_length), np.int64)
    doc_ids = np.full((rows, row_length), -1, np.int64)
    spans: list[list[dict]] = [[] for _ in range(rows)]
    documents: dict[str, list] = {}
    r, used = 0, 0
    while True:
        n = int(rng.integers(doc_lengths[0], doc_lengths[1] + 1))
        if used + n > row_length:
            r, used = r + 1, 0
            if r == rows:
                break
        tokens = rng.integers(1, VOCAB, n, dtype=np.int64)
        uid = f"d{len(documents)}"
        documents[uid] = tokens.tolist()
        input_ids[r, used:used + n] = tokens
        labels[r, used:used + n - 1] = tokens[1:]
        positions[r, used:used + n] = np.arange(n)
        doc_ids[r, used:used + n] = len(spans[r])
        spans[r].append({"doc_uid": uid, "start": used, "length": n, "doc_offset": 0})
        used += n
    valid = int((labels != IGNORE).sum())
    loss_sum = 2.5 * valid  # any value: the kit checks the denominator and loss = loss_sum / denominator here
    producer = {"loss_sum": loss_sum, "denominator": valid, "denominator_scope": "global", "loss": loss_sum / valid}
    arrays = {"input_ids": input_ids, "labels": labels, "position_ids": positions, "doc_ids": doc_ids}
    if kind == "torch":
        import torch
        arrays = {k: torch.from_numpy(v) for k, v in arrays.items()}
    elif kind != "numpy":
        raise ValueError(f"kind must be 'torch' or 'numpy', got {kind!r}")
    batch = dict(arrays, doc_spans=spans)
    return Workload(batch=batch, documents=documents, producer=producer, valid_targets=valid)


def corrupted(w: Workload, *, label: bool = True, position: bool = True) -> Workload:
    """A copy of `w` with one wrong label (row 3: a weighted label one off) and/or one wrong position (row 5:
    a position one off in the middle of a document)."""
    batch = {k: (v.clone() if hasattr(v, "clone") else v.copy()) if k != "doc_spans" else copy.deepcopy(v)
             for k, v in w.batch.items()}
    if label:
        span = batch["doc_spans"][3][1]
        i = span["start"] + span["length"] // 2
        batch["labels"][3, i] += 1
    if position:
        span = batch["doc_spans"][5][2]
        i = span["start"] + span["length"] // 3
        batch["position_ids"][5, i] += 1
    return Workload(batch=batch, documents=w.documents, producer=dict(w.producer), valid_targets=w.valid_targets)
