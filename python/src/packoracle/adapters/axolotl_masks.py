"""axolotl 0.19.0's boundary builders (``axolotl/monkeypatch/utils.py``) as attention consumers (the mask level),
run in the family environment ``axolotl`` and served there by ``packoracle.exec_server`` (as the fla naive ops
are): cells of the matrix's mask builders (``conformance._consumers.run_builders``).

- ``get_unpad_data(attention_mask)``: the ``_get_unpad_data`` that ``patch_for_multipack`` puts into a
  remote-code model (monkeypatch/multipack.py), called there on the multipack collator's ``attention_mask`` (each
  sample's index 1..k in its row, 0 for padding). It returns the indices of the non-padding slots of the
  flattened batch and ``cu_seqlens`` over them; the model gathers q/k/v with the indices and runs
  ``flash_attn_varlen_func(..., cu_seqlens, causal=True)``, which is what the answer here states: each gathered
  slot's segment of ``cu_seqlens``, -1 for padding.
- ``get_cu_seqlens_from_pos_ids(position_ids)``: the cu_seqlens of the xformers, StableLM flash and ring-attention
  patches (attention/xformers.py, stablelm_attn_hijack_flash.py, ring_attn/patch.py): per row, a document starts
  where the position is 0, a trailing run of 0 positions is the row's padding, and the rows' cu_seqlens are padded
  to one width with their largest value (zero-length segments). Each row's segments, read as a varlen kernel with
  causal=True reads them.

get_cu_seqlens_from_pos_ids leaks where a row ends in two or more one-token documents (each at position 0, taken
for the row's padding): the examined finding ``_TRAILING``, reported in
docs/upstream/axolotl-trailing-single-token-documents.md.

The feed is the multipack collator's (axolotl_pack: the kit's reference rows under the same policy): doc ids
re-spelled 1..k in the row in order, 0 for padding, for get_unpad_data; the rows' position_ids for
get_cu_seqlens_from_pos_ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from ._base import Finding
from .axolotl_pack import POLICY, WRITTEN_FOR


def multipack_mask(doc_ids: Any) -> np.ndarray:
    """A row's doc ids (any integers, -1 padding) as V2BatchSamplerDataCollatorForSeq2Seq writes attention_mask:
    the sample's index in the row, 1..k in order of appearance, 0 for padding."""
    ids = np.asarray(doc_ids, dtype=np.int64).reshape(-1)
    mask = np.zeros(len(ids), dtype=np.int64)
    index, previous = 0, None
    for j, d in enumerate(ids):
        if d < 0:
            continue
        if d != previous:
            index, previous = index + 1, d
        mask[j] = index
    return mask


def _segments(cu_seqlens: list, slots: Any, total: int) -> np.ndarray:
    """Segment ids of `total` slots: the k-th span [cu[k], cu[k+1]) of `slots` (their indices) gets k, -1 the rest."""
    out = np.full(total, -1, dtype=np.int64)
    for k, (a, b) in enumerate(zip(cu_seqlens[:-1], cu_seqlens[1:])):
        out[np.asarray(slots[a:b], dtype=np.int64)] = k
    return out


def unpad_data(microbatch: dict, policy: dict) -> list:
    """get_unpad_data on the micro-batch's multipack attention_mask [B, L], as the patched remote-code model calls
    it; the varlen kernel's segments of each row."""
    import torch
    from axolotl.monkeypatch.utils import get_unpad_data

    mask = np.stack([multipack_mask(r["doc_ids"]) for r in microbatch["rows"]])
    indices, cu_seqlens, _ = get_unpad_data(torch.as_tensor(mask))
    rows, n = mask.shape
    return list(_segments(cu_seqlens.tolist(), indices.tolist(), rows * n).reshape(rows, n))


def cu_seqlens_from_position_ids(microbatch: dict, policy: dict) -> list:
    """get_cu_seqlens_from_pos_ids on the micro-batch's position_ids [B, L]; each row's cu_seqlens (its padding
    entries are zero-length segments) as the row's varlen segments."""
    import torch
    from axolotl.monkeypatch.utils import get_cu_seqlens_from_pos_ids

    positions = np.stack([np.asarray(r["position_ids"], dtype=np.int64).reshape(-1) for r in microbatch["rows"]])
    cu_seqlens, _ = get_cu_seqlens_from_pos_ids(torch.as_tensor(positions))
    n = positions.shape[1]
    return [_segments(row, list(range(n)), n) for row in cu_seqlens.tolist()]


@dataclass(frozen=True)
class AxolotlBuilder:
    """One boundary builder as a cell of the matrix's mask builders, run in the axolotl environment: its consumer
    (``build``) served there by packoracle.exec_server (``conformance._served``), fuzz's exec_consumer."""

    name: str
    call: str
    build: Callable[[dict, dict], list]
    policy: dict = field(default_factory=lambda: dict(POLICY))
    family: str = "axolotl"
    written_for: str = WRITTEN_FOR
    finding: Optional[Finding] = None  # the examined failure, as a mask builder's (None: it holds)

    def replay(self, reproduce: str) -> str:
        return (f"packoracle.conformance.replay_consumer({self.name!r}, \"{reproduce}\")  # from the main venv, "
                f"the builder in the {self.family} environment")


_TRAILING = Finding(
    "attention", "bug",
    "get_cu_seqlens_from_pos_ids counts a row's trailing run of 0 positions as its padding, so two or more "
    "one-token documents at the end of a row (no padding after them, or one slot) become one sequence: the last "
    "attends the ones before it (position_ids [[0, 1, 2, 0, 0]] give cu_seqlens [[0, 3, 5]]). axolotl's default "
    "min_sample_len 2 drops one-token samples", report="docs/upstream/axolotl-trailing-single-token-documents.md")

BUILDERS = (
    AxolotlBuilder("axolotl/get-unpad-data",
                   "get_unpad_data(attention_mask) → indices, cu_seqlens → flash_attn_varlen_func(causal=True)",
                   unpad_data),
    AxolotlBuilder("axolotl/cu-seqlens-from-pos-ids",
                   "get_cu_seqlens_from_pos_ids(position_ids) → cu_seqlens per row → varlen kernel, causal=True",
                   cu_seqlens_from_position_ids, finding=_TRAILING),
)
