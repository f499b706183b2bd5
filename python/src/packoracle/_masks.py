"""What an attention consumer answers, per row, turned into the n × n matrix the core compares with the oracle.

A consumer (``packoracle.fuzz(consumer=f)`` per row, ``microbatch_consumer=g`` per micro-batch) may answer each
row in the form its backend holds:

- a dense matrix n × n (bool, integer or float 0/1; numpy, torch or lists): entry (i, j) nonzero when query i
  may attend key j;
- per-slot segment ids, a 1-D integer array of n: what a varlen kernel run with ``causal=True`` computes from
  them (query i sees key j when j ≤ i and both carry the same id; -1 marks padding, which no query sees);
- a mask function: ``mask(q, k)`` (numpy index arrays, broadcast) or FlexAttention's
  ``mask_mod(b, h, q_idx, kv_idx)`` (torch index tensors; ``b`` is the row's index in the micro-batch);
- a torch ``BlockMask`` (FlexAttention) over the whole micro-batch: row r is read at batch index r, as
  flex_attention reads it: blocks absent from the block mask are never attended, full blocks are attended
  without the mask function, partial blocks through it.

Nothing here states a packing rule: these are the backends' own representations, read as the backend reads
them. The rule the result is compared with (who may attend to whom under the policy) is the core's.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from ._arrays import as_array, is_tensor


class ConsumerAnswerError(ValueError):
    """A consumer answered something that is not an attention mask (a case failure, never a crash)."""


def _is_block_mask(value: Any) -> bool:
    return type(value).__name__ == "BlockMask" and hasattr(value, "mask_mod") and hasattr(value, "kv_num_blocks")


def _arity(fn: Any) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 4
    # The parameters a caller must give: a default binds a loop variable (lambda q, k, d=ids: ...), not an index.
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty)


def _from_mask_function(fn: Any, n: int, row: int, where: str, device: Any = None) -> np.ndarray:
    if _arity(fn) == 2:
        q, k = np.arange(n)[:, None], np.arange(n)[None, :]
        out = fn(q, k)
    else:
        import torch

        tq = torch.arange(n, device=device).view(n, 1)
        tk = torch.arange(n, device=device).view(1, n)
        zero = torch.zeros((), dtype=torch.long, device=device)
        out = fn(torch.full((), row, dtype=torch.long, device=device), zero, tq, tk)
        out = out.cpu() if is_tensor(out) else out
    array = as_array(out, where, "mask function")
    if array.ndim == 0:
        raise ConsumerAnswerError(f"{where}: the mask function returned one value for all {n} × {n} pairs: it must "
                                  f"broadcast over its index arguments")
    return np.broadcast_to(array, (n, n)) if array.shape != (n, n) and array.ndim <= 2 else array


def _block_level(num_blocks: Any, indices: Any, row: int, n_q: int, n_kv: int) -> np.ndarray:
    """The blocks a (kv_num_blocks, kv_indices) pair names for one row (head 0), as a boolean q-blocks × kv-blocks."""
    counts = num_blocks.detach().cpu().numpy()
    idx = indices.detach().cpu().numpy()
    b = min(row, counts.shape[0] - 1)
    out = np.zeros((n_q, n_kv), dtype=bool)
    for qb in range(min(n_q, counts.shape[2])):
        for c in range(int(counts[b, 0, qb])):
            kb = int(idx[b, 0, qb, c])
            if 0 <= kb < n_kv:
                out[qb, kb] = True
    return out


def _from_block_mask(bm: Any, n: int, row: int, where: str) -> np.ndarray:
    q_block, kv_block = bm.BLOCK_SIZE
    n_q, n_kv = -(-n // q_block), -(-n // kv_block)

    def expand(blocks: np.ndarray) -> np.ndarray:
        return np.repeat(np.repeat(blocks, q_block, axis=0), kv_block, axis=1)[:n, :n]

    partial = expand(_block_level(bm.kv_num_blocks, bm.kv_indices, row, n_q, n_kv))
    # The mask function runs where the block mask lives (its closure may hold tensors on a GPU).
    dense = partial & (_from_mask_function(bm.mask_mod, n, row, where, bm.kv_num_blocks.device) != 0)
    if bm.full_kv_num_blocks is not None:
        dense |= expand(_block_level(bm.full_kv_num_blocks, bm.full_kv_indices, row, n_q, n_kv))
    return dense


def _from_segment_ids(ids: np.ndarray, where: str) -> np.ndarray:
    if ids.dtype.kind not in "iub":
        raise ConsumerAnswerError(f"{where}: per-slot segment ids have dtype {ids.dtype}: integers are expected")
    same = (ids[:, None] == ids[None, :]) & (ids[None, :] >= 0)
    return np.tril(same)


def densify(answer: Any, n: int, row: int, where: str) -> np.ndarray:
    """The consumer's answer for one row of n slots (row index `row` in its micro-batch) as a C-contiguous uint8
    n × n matrix, 1 where query i may attend key j. Raises ConsumerAnswerError naming `where` for anything
    else (a wrong shape, a NaN, a value that is no mask)."""
    if isinstance(answer, (str, bytes)):
        raise ConsumerAnswerError(f"{where}: the consumer returned a string ({answer[:40]!r}), not a mask")
    if answer is None:
        raise ConsumerAnswerError(f"{where}: the consumer returned None for a row of {n} slots (return a mask, "
                                  f"segment ids, a mask function or a BlockMask)")
    try:
        if _is_block_mask(answer):
            array = _from_block_mask(answer, n, row, where)
        elif callable(answer) and not is_tensor(answer) and not isinstance(answer, np.ndarray):
            array = _from_mask_function(answer, n, row, where)
        else:
            array = as_array(answer, where, "mask")
            if array.ndim == 1 and array.shape == (n,):
                array = _from_segment_ids(array, where)
    except ConsumerAnswerError:
        raise
    except Exception as e:  # a mask function that raises, an array that is not one
        raise ConsumerAnswerError(f"{where}: the consumer's answer cannot be read as a mask: "
                                  f"{type(e).__name__}: {e}") from None
    if array.shape != (n, n):
        raise ConsumerAnswerError(f"{where}: the consumer returned a mask of shape {tuple(array.shape)} for a row of "
                                  f"{n} slots (expected {n} × {n}, 1 where query i may attend key j; or {n} segment "
                                  f"ids)")
    if array.dtype.kind == "f" and np.isnan(array).any():
        i, j = np.argwhere(np.isnan(array))[0]
        raise ConsumerAnswerError(f"{where}: the consumer's mask holds NaN (first at query {i}, key {j})")
    if array.dtype.kind not in "biuf":
        raise ConsumerAnswerError(f"{where}: the consumer's mask has dtype {array.dtype}: bool or numbers expected")
    return np.ascontiguousarray(array != 0, dtype=np.uint8)
