"""What an attention consumer answers, per row, turned into the runs of visible keys the core compares with the
oracle (``runs``: per query row, sorted half-open key ranges, the core's MaskRuns) — or into an n × n matrix
(``densify``, for small rows).

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

A compact form is read without an n × n matrix, so a consumer that answers one is checked on rows of real
length (8,192 slots at the defaults): segment ids in O(n), a mask function or a BlockMask's mask_mod evaluated
over chunks of query rows (at most ``_CHUNK_CELLS`` query × key cells at a time). A dense answer is read as it
comes. Reading a function is O(n²) time all the same, so the core generates rows of at most 4,096 slots for a
consumer answering one, and 512 for a dense one (segment ids: 8,192 at the defaults), but for one case in 32 of
the run's full length, one row a micro-batch (properties/mask_runs.h kFullSizeCaseEvery).

Nothing here states a packing rule: these are the backends' own representations, read as the backend reads
them. The rule the result is compared with (who may attend to whom under the policy) is the core's.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._arrays import as_array, is_tensor


class Computed:
    """A micro-batch consumer's answer with what its kernel computes beside what it attends with (DESIGN §4
    efficiency, §12 "Work"): ``microbatch_consumer`` may return ``Computed(masks, pairs=None, extra_rows=())``
    instead of its masks alone.

    - ``masks``: the answer as before, one per row in any form (or one BlockMask / mask function for all rows);
    - ``pairs``: per row, the (query, key) pairs the kernel evaluates whether or not the mask then hides them, in
      any mask form (a dense causal kernel over the padded row: ``lambda q, k: k <= q``); None: each row computes
      what its mask attends;
    - ``extra_rows``: rows the consumer builds beyond the micro-batch's (alignment padding turned into a dense
      dummy row), each a pair ``(length, pairs)``, e.g. ``(7, np.ones((7, 7)))``.

    The core counts per row the pairs of ``pairs`` ∪ the mask, plus every pair of ``extra_rows``, against the
    least the declared rule needs: reported (``FuzzResult.consumer_work``), and an ``efficiency`` finding where
    the policy promises ``consumer_overhead: p`` and a micro-batch computes more than (1 + p/100) times that."""

    __slots__ = ("masks", "pairs", "extra_rows")

    def __init__(self, masks: Any, pairs: Any = None, extra_rows: Any = ()) -> None:
        self.masks = masks
        self.pairs = pairs
        self.extra_rows = extra_rows

    def __repr__(self) -> str:
        return f"Computed(masks=..., pairs={'...' if self.pairs is not None else None}, extra_rows={len(self.extra_rows)})"


class ConsumerAnswerError(ValueError):
    """A consumer answered something that is not an attention mask (a case failure, never a crash)."""


def is_block_mask(value: Any) -> bool:
    """Whether `value` is a FlexAttention BlockMask (read by duck type: torch need not be imported)."""
    return type(value).__name__ == "BlockMask" and hasattr(value, "mask_mod") and hasattr(value, "kv_num_blocks")


def _arity(fn: Any) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 4
    # The parameters a caller must give: a default binds a loop variable (lambda q, k, d=ids: ...), not an index.
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty)


def _from_mask_function(fn: Any, n: int, row: int, where: str, device: Any = None) -> np.ndarray:
    """A mask function on every query and key of the row, as a boolean n × n (one block of every query row)."""
    return _function_block(fn, n, row, where, (0, n), device)


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


def _not_a_mask(answer: Any, n: int, where: str) -> None:
    """Refuses the answers that are no mask in any form (a string, None), naming `where`."""
    if isinstance(answer, (str, bytes)):
        raise ConsumerAnswerError(f"{where}: the consumer returned a string ({answer[:40]!r}), not a mask")
    if answer is None:
        raise ConsumerAnswerError(f"{where}: the consumer returned None for a row of {n} slots (return a mask, "
                                  f"segment ids, a mask function or a BlockMask)")


def densify(answer: Any, n: int, row: int, where: str) -> np.ndarray:
    """The consumer's answer for one row of n slots (row index `row` in its micro-batch) as a C-contiguous uint8
    n × n matrix, 1 where query i may attend key j. Raises ConsumerAnswerError naming `where` for anything
    else (a wrong shape, a NaN, a value that is no mask)."""
    _not_a_mask(answer, n, where)
    try:
        if is_block_mask(answer):
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


# Query × key cells read at a time from a mask function, a BlockMask or a dense answer: 2 Mi cells (about 16 MiB
# of working arrays), e.g. 256 query rows of a row of 8,192 slots.
_CHUNK_CELLS = 1 << 21

Runs = tuple  # (row_offsets int64[n + 1], run_begin int64[runs], run_end int64[runs], source: str)


def _query_chunks(n: int, multiple: int = 1) -> list:
    """[a, b) ranges of query rows covering n, each of at most _CHUNK_CELLS cells (a multiple of `multiple` rows)."""
    step = max(multiple, (_CHUNK_CELLS // max(n, 1)) // multiple * multiple)
    return [(a, min(n, a + step)) for a in range(0, n, step)]


def _block_runs(block: np.ndarray) -> tuple:
    """Per query row of a boolean m × n block: its number of runs, and every run's begin and end, in order."""
    m, n = block.shape
    edges = np.zeros((m, n + 2), dtype=np.int8)
    edges[:, 1:-1] = block
    step = np.diff(edges, axis=1)
    rows, begins = np.nonzero(step == 1)
    _, ends = np.nonzero(step == -1)
    return np.bincount(rows, minlength=m), begins.astype(np.int64), ends.astype(np.int64)


def _assemble(n: int, parts: list, source: str) -> Runs:
    counts = [c for c, _, _ in parts]
    offsets = np.zeros(n + 1, dtype=np.int64)
    if counts:
        np.cumsum(np.concatenate(counts), out=offsets[1:])
    begin = np.concatenate([b for _, b, _ in parts]) if parts else np.zeros(0, dtype=np.int64)
    end = np.concatenate([e for _, _, e in parts]) if parts else np.zeros(0, dtype=np.int64)
    return (offsets, np.ascontiguousarray(begin, dtype=np.int64), np.ascontiguousarray(end, dtype=np.int64), source)


def _checked_block(array: np.ndarray, where: str, queries: tuple, n: int) -> np.ndarray:
    """A block of query rows [a, b) × n keys as booleans, after the checks densify makes of a whole mask."""
    a, b = queries
    if array.dtype.kind == "f" and np.isnan(array).any():
        i, j = np.argwhere(np.isnan(array))[0]
        raise ConsumerAnswerError(f"{where}: the consumer's mask holds NaN (first at query {a + i}, key {j})")
    if array.dtype.kind not in "biuf":
        raise ConsumerAnswerError(f"{where}: the consumer's mask has dtype {array.dtype}: bool or numbers expected")
    if array.shape != (b - a, n):
        raise ConsumerAnswerError(f"{where}: the mask function gave shape {tuple(array.shape)} for queries {a}..{b - 1} "
                                  f"and {n} keys (it must broadcast over its index arguments)")
    return array != 0


def _function_block(fn: Any, n: int, row: int, where: str, queries: tuple, device: Any = None) -> np.ndarray:
    """A mask function evaluated on query rows [a, b) and every key, as a boolean (b − a) × n block."""
    a, b = queries
    if _arity(fn) == 2:
        out = fn(np.arange(a, b)[:, None], np.arange(n)[None, :])
    else:
        import torch

        tq = torch.arange(a, b, device=device).view(b - a, 1)
        tk = torch.arange(n, device=device).view(1, n)
        zero = torch.zeros((), dtype=torch.long, device=device)
        out = fn(torch.full((), row, dtype=torch.long, device=device), zero, tq, tk)
        out = out.cpu() if is_tensor(out) else out
    array = as_array(out, where, "mask function")
    if array.ndim == 0:
        raise ConsumerAnswerError(f"{where}: the mask function returned one value for all {n} × {n} pairs: it must "
                                  f"broadcast over its index arguments")
    if array.shape != (b - a, n) and array.ndim <= 2:
        array = np.broadcast_to(array, (b - a, n))
    return _checked_block(array, where, queries, n)


def _function_runs(fn: Any, n: int, row: int, where: str) -> Runs:
    return _assemble(n, [_block_runs(_function_block(fn, n, row, where, q)) for q in _query_chunks(n)], "function")


def _block_mask_runs(bm: Any, n: int, row: int, where: str) -> Runs:
    """A BlockMask read per chunk of whole block rows: absent blocks never attended, full blocks attended, partial
    blocks through mask_mod (evaluated where the block mask lives: its closure may hold GPU tensors)."""
    q_block, kv_block = bm.BLOCK_SIZE
    n_q, n_kv = -(-n // q_block), -(-n // kv_block)
    partial = _block_level(bm.kv_num_blocks, bm.kv_indices, row, n_q, n_kv)
    full = (_block_level(bm.full_kv_num_blocks, bm.full_kv_indices, row, n_q, n_kv)
            if bm.full_kv_num_blocks is not None else None)

    def expand(blocks: np.ndarray, a: int, b: int) -> np.ndarray:
        rows = blocks[a // q_block:-(-b // q_block)]
        return np.repeat(np.repeat(rows, q_block, axis=0), kv_block, axis=1)[:b - a, :n]

    parts = []
    for a, b in _query_chunks(n, q_block):
        block = expand(partial, a, b) & _function_block(bm.mask_mod, n, row, where, (a, b), bm.kv_num_blocks.device)
        if full is not None:
            block |= expand(full, a, b)
        parts.append(_block_runs(block))
    return _assemble(n, parts, "function")


def _segment_runs(ids: np.ndarray, where: str) -> Runs:
    """Segment ids as a varlen kernel with causal=True reads them: query i sees key j ≤ i of the same id, -1 (any
    negative id) is padding that no query sees. O(n) when each id is one stretch of slots; an id met again after
    another (ids reused) also sees its earlier stretches."""
    if ids.dtype.kind not in "iub":
        raise ConsumerAnswerError(f"{where}: per-slot segment ids have dtype {ids.dtype}: integers are expected")
    ids = ids.astype(np.int64)
    n = len(ids)
    if n == 0:
        return _assemble(0, [], "runs")
    starts = np.concatenate(([0], np.flatnonzero(np.diff(ids) != 0) + 1))
    ends = np.append(starts[1:], n)
    stretch_ids = ids[starts]
    seen = stretch_ids[stretch_ids >= 0]
    slots = np.arange(n, dtype=np.int64)
    if len(np.unique(seen)) == len(seen):  # every id one stretch: one run [stretch start, i] a query
        own = ids >= 0
        begin = np.repeat(starts, ends - starts)[own]
        return _assemble(n, [(own.astype(np.int64), begin, slots[own] + 1)], "runs")
    earlier: dict = {}
    parts = []
    for start, end, sid in zip(starts.tolist(), ends.tolist(), stretch_ids.tolist()):
        length = end - start
        if sid < 0:
            parts.append((np.zeros(length, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)))
            continue
        before = earlier.setdefault(sid, [])
        begins = np.tile(np.array([b for b, _ in before] + [start], dtype=np.int64), (length, 1))
        stops = np.tile(np.array([e for _, e in before] + [0], dtype=np.int64), (length, 1))
        stops[:, -1] = slots[start:end] + 1
        parts.append((np.full(length, len(before) + 1, dtype=np.int64), begins.ravel(), stops.ravel()))
        before.append((start, end))
    return _assemble(n, parts, "runs")


def _dense_runs(array: np.ndarray, n: int, where: str) -> Runs:
    if array.shape != (n, n):
        raise ConsumerAnswerError(f"{where}: the consumer returned a mask of shape {tuple(array.shape)} for a row of "
                                  f"{n} slots (expected {n} × {n}, 1 where query i may attend key j; or {n} segment "
                                  f"ids)")
    return _assemble(n, [_block_runs(_checked_block(array[a:b], where, (a, b), n)) for a, b in _query_chunks(n)], "dense")


def runs(answer: Any, n: int, row: int, where: str) -> Runs:
    """The consumer's answer for one row of n slots (row index `row` in its micro-batch) as the runs of visible keys
    of each query: (row_offsets, run_begin, run_end, source), query i's runs being [run_begin[r], run_end[r]) for
    r in [row_offsets[i], row_offsets[i + 1]); `source` says how the consumer answered, which bounds the rows the
    core generates for it: "runs" (segment ids, O(n) a row: rows of max_row_length), "function" (a mask function,
    mask_mod or BlockMask, read cell by cell: rows of at most 4,096 slots), "dense" (n × n: 512), but for one
    case in 32, which has rows of the run's full length. Raises
    ConsumerAnswerError naming `where` for anything else (a wrong shape, a NaN, a value that is no mask)."""
    _not_a_mask(answer, n, where)
    try:
        if is_block_mask(answer):
            return _block_mask_runs(answer, n, row, where)
        if callable(answer) and not is_tensor(answer) and not isinstance(answer, np.ndarray):
            return _function_runs(answer, n, row, where)
        array = as_array(answer, where, "mask")
        if array.ndim == 1 and array.shape == (n,):
            return _segment_runs(array, where)
        return _dense_runs(array, n, where)
    except ConsumerAnswerError:
        raise
    except Exception as e:  # a mask function that raises, an array that is not one
        raise ConsumerAnswerError(f"{where}: the consumer's answer cannot be read as a mask: "
                                  f"{type(e).__name__}: {e}") from None


def work_runs(computed: Computed, lengths: list, where: str) -> dict:
    """What ``computed`` says the consumer computes, read as runs: ``{"rows": [Runs per row] or None,
    "extra_rows": [Runs, ...]}`` for rows of ``lengths`` slots. Raises ConsumerAnswerError naming `where`."""
    rows = None
    if computed.pairs is not None:
        pairs = computed.pairs
        if callable(pairs) or is_block_mask(pairs):
            pairs = [pairs] * len(lengths)  # one mask function or BlockMask for every row
        if isinstance(pairs, (str, bytes)) or not isinstance(pairs, Sequence) and not (
                is_tensor(pairs) or isinstance(pairs, np.ndarray)):
            raise ConsumerAnswerError(f"{where}: Computed.pairs must hold one answer per row, got {type(pairs).__name__}")
        if len(pairs) != len(lengths):
            raise ConsumerAnswerError(f"{where}: Computed.pairs holds {len(pairs)} answers for a micro-batch of "
                                      f"{len(lengths)} rows")
        rows = [runs(a, n, r, f"{where}, the pairs computed for row {r}") for r, (a, n) in enumerate(zip(pairs, lengths))]
    extra = []
    if isinstance(computed.extra_rows, (str, bytes)) or not isinstance(computed.extra_rows, Sequence):
        raise ConsumerAnswerError(f"{where}: Computed.extra_rows must be a list of (length, pairs), got "
                                  f"{type(computed.extra_rows).__name__}")
    for e, item in enumerate(computed.extra_rows):
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], (int, np.integer))
                and not isinstance(item[0], bool) and item[0] >= 0):
            raise ConsumerAnswerError(f"{where}: Computed.extra_rows[{e}] must be a pair (length >= 0, pairs), got "
                                      f"{item!r:.80}")
        extra.append(runs(item[1], int(item[0]), len(lengths) + e, f"{where}, extra row {e}"))
    return {"rows": rows, "extra_rows": extra}
