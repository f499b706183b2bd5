"""Micro-batch consumers that look at the whole step (packoracle.fuzz(step_view=True)): each states one reported
mechanism that the canonical micro-batch alone cannot show, and its fixed twin.

- boundary metadata under a key the model never reads: a model whose varlen path reads only the flash-attention
  kwargs ``cu_seq_lens_q`` of the batch it is handed (transformers' flash path) attends over the whole row when
  the collator wrote the boundaries under another key (``cu_seqlens``); the kit's canonical reading accepts both
  keys, so only the emitted batch shows it;
- per-rank boundary arithmetic under context parallelism: a CP rank builds its local cu_seqlens as
  ``cu_seqlens // cp_size`` (right only for per-document load balancing of documents whose length 2·cp
  divides), or maps its tokens through a flat zigzag partition of the row while the step dealt them per
  document; fixed: the local boundaries of the slots the rank was really handed (``cp_shards``)."""
from __future__ import annotations

import numpy as np

# ---- the key the model never reads -------------------------------------------------------------------------


def reads_flash_kwargs(microbatch: dict, policy: dict, step: dict) -> list:
    """Segment ids per row from the emitted batch's ``cu_seq_lens_q`` (one flattened row, as the collator emits
    it); without it, plain causal attention over the whole row (one segment)."""
    n = len(microbatch["rows"][0]["input_ids"])
    emitted = step["emitted"]
    cu = None if emitted is None else emitted.get("cu_seq_lens_q")
    if cu is None:
        return [np.zeros(n, dtype=np.int64)]
    cu = np.asarray(cu, dtype=np.int64)
    return [np.repeat(np.arange(len(cu) - 1), np.diff(cu))]


def reads_canonical_cu_seqlens(microbatch: dict, policy: dict) -> list:
    """The same model written against the kit's canonical rows: it finds boundaries under either key."""
    cu = np.asarray(microbatch["rows"][0]["cu_seqlens"], dtype=np.int64)
    return [np.repeat(np.arange(len(cu) - 1), np.diff(cu))]


def boundaries_under(key: str):
    """transformers' DataCollatorWithFlattening output with the boundaries written under `key`."""
    from .packers import as_budget_packer, pack_hf_flatten

    def collate(token_lists, *, supervised=None):
        batch = pack_hf_flatten(token_lists, supervised=supervised)
        cu = batch.pop("cu_seq_lens_q")
        batch.pop("cu_seq_lens_k")
        batch[key] = cu
        return batch

    collate.__name__ = f"collator_writing_{key}"
    return as_budget_packer(collate)


# ---- per-rank boundary arithmetic under context parallelism -----------------------------------------------


def _documents(row: dict) -> np.ndarray:
    """The document index of each slot from the row's cu_seqlens (-1 on padding, from doc_ids)."""
    n = len(row["input_ids"])
    doc = np.searchsorted(np.asarray(row["cu_seqlens"]), np.arange(n), side="right") - 1
    doc[np.asarray(row["doc_ids"]) < 0] = -1
    return doc


def _held(chunks: list) -> np.ndarray:
    return np.concatenate([np.arange(s, e) for s, e in chunks]) if chunks else np.zeros(0, dtype=np.int64)


def _per_rank(local_labels):
    """A consumer that computes each CP rank's segment ids from what the rank holds and assembles the row (the
    attention the group computes): ``local_labels(row, cp, scheme, rank, held)`` → one id per held slot."""
    def consume(microbatch: dict, policy: dict, step: dict) -> list:
        layout = step["layout"]
        cp, scheme = layout["context_parallel_size"], layout["context_parallel_scheme"]
        out = []
        for row, shards in zip(microbatch["rows"], layout["cp_shards"]):
            seg = np.full(len(row["input_ids"]), -1, dtype=np.int64)
            for k, chunks in enumerate(shards):
                held = _held(chunks)
                seg[held] = local_labels(row, cp, scheme, k, held)
            out.append(seg)
        return out
    consume.__name__ = consume.__qualname__ = local_labels.__name__
    return consume


def _cu_divided_by_cp(row: dict, cp: int, scheme: str, rank: int, held: np.ndarray) -> np.ndarray:
    local_cu = np.asarray(row["cu_seqlens"]) // cp
    labels = np.searchsorted(local_cu, np.arange(len(held)), side="right") - 1
    return np.where(np.asarray(row["doc_ids"])[held] < 0, -1, labels)


def _flat_zigzag(row: dict, cp: int, scheme: str, rank: int, held: np.ndarray) -> np.ndarray:
    n = len(row["input_ids"])
    bounds = [j * n // (2 * cp) for j in range(2 * cp + 1)]
    assumed = np.concatenate([np.arange(bounds[j], bounds[j + 1]) for j in (rank, 2 * cp - 1 - rank)])
    labels = np.full(len(held), -1, dtype=np.int64)
    m = min(len(held), len(assumed))
    labels[:m] = _documents(row)[assumed[:m]]
    return labels


def _from_the_shards(row: dict, cp: int, scheme: str, rank: int, held: np.ndarray) -> np.ndarray:
    return _documents(row)[held]


cu_seqlens_divided_by_cp = _per_rank(_cu_divided_by_cp)
flat_zigzag_partition = _per_rank(_flat_zigzag)
boundaries_of_the_held_shards = _per_rank(_from_the_shards)
