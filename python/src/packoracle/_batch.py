"""A micro-batch in the producer's own field names, as the canonical form the C++ core reads (DESIGN §5).

    {"input_ids": [B, L], "labels": [B, L], "position_ids": [B, L], "cu_seq_lens_q": [n + 1], ...}
      → {"micro_step", "rank", "step", "producer", "rows": [{"input_ids": view, ..., "doc_spans": [...]}]}

Every array stays a view of the caller's memory; only the boundary lists that vary per row (cu_seqlens,
seq_lens) and the spans are built here.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any, Optional

import numpy as np

from . import _args, _core
from ._arrays import as_array, check_integral, rows_of

# Per-token fields: one value per slot, rows × slots like input_ids.
PER_TOKEN = ("input_ids", "labels", "loss_mask", "position_ids", "doc_ids", "attention_mask")
# Per-row boundary lists: a 1-D array for one row, or one list (or a padded 2-D array) per row.
PER_ROW_LISTS = ("cu_seqlens", "seq_lens")
# Other names producers use for the same fields (HF's flash-attention kwargs and seq_idx, Megatron, ...).
ALIASES = {
    "cu_seq_lens_q": "cu_seqlens",
    "cu_seqlens_q": "cu_seqlens",
    "seq_idx": "doc_ids",
    "segment_ids": "doc_ids",
    "document_ids": "doc_ids",
    "sequence_lengths": "seq_lens",
}
# Fields that carry nothing the kit checks beyond what the fields above say (key-side copies of the query
# lengths are compared with them; maxima are derivable).
KEY_SIDE = {"cu_seq_lens_k": "cu_seq_lens_q", "cu_seqlens_k": "cu_seqlens_q"}
DERIVED = frozenset({"max_length_q", "max_length_k", "max_seqlen_q", "max_seqlen_k", "max_seqlen"})
KNOWN = frozenset(PER_TOKEN + PER_ROW_LISTS + ("doc_spans",)) | set(ALIASES) | set(KEY_SIDE) | DERIVED


def canonical_fields(batch: Mapping[str, Any], where: str, ignore: Sequence[str] = ()) -> dict[str, Any]:
    """The batch's fields under their canonical names; unknown ones are a ValueError (unless in `ignore`)."""
    if not isinstance(batch, Mapping):
        raise TypeError(f"{where}: a batch is a dict of arrays (input_ids, labels, ...), got {type(batch).__name__}")
    fields: dict[str, Any] = {}
    for name, value in batch.items():
        if name in ignore or name in DERIVED or value is None:
            continue
        if name not in KNOWN:
            raise ValueError(f"{where}: unknown field {name!r} (the kit reads {', '.join(sorted(KNOWN))}; pass "
                             f"ignore=[{name!r}] to leave it out)")
        if name in KEY_SIDE:
            continue
        canonical = ALIASES.get(name, name)
        if canonical in fields:
            raise ValueError(f"{where}: fields {name!r} and its other name both given: give one")
        fields[canonical] = value
    for key, query in KEY_SIDE.items():
        if key in batch and batch[key] is not None and query in batch:
            k, q = as_array(batch[key], where, key), as_array(batch[query], where, query)
            if k.shape != q.shape or not np.array_equal(k, q):
                raise ValueError(f"{where}: field {key!r} differs from {query!r}: the kit checks self-attention "
                                 f"packing, where both are the same boundaries")
    for name in ("input_ids", "labels"):
        if name not in fields:
            raise ValueError(f"{where}: field {name!r} is missing")
    return fields


def _per_row_lists(value: Any, rows: int, where: str, field: str) -> list[np.ndarray]:
    """cu_seqlens or seq_lens as one 1-D array per row."""
    if isinstance(value, (list, tuple)) and value and not np.isscalar(value[0]):
        lists = [as_array(v, where, f"{field}[{r}]") for r, v in enumerate(value)]
    else:
        array = as_array(value, where, field)
        if array.ndim == 1:
            if rows != 1:
                raise ValueError(f"{where}: field {field!r} is one list for {rows} rows: give one per row (a list of "
                                 f"arrays, or rows × k)")
            lists = [array]
        elif array.ndim == 2:
            lists = list(array)
        else:
            raise ValueError(f"{where}: field {field!r} has {array.ndim} dimensions: expected one list per row")
    if len(lists) != rows:
        raise ValueError(f"{where}: field {field!r} has {len(lists)} rows, input_ids has {rows}")
    for r, a in enumerate(lists):
        check_integral(a, where, f"{field}[{r}]")
        if a.ndim != 1:
            raise ValueError(f"{where}: field '{field}[{r}]' must be one-dimensional")
    return lists


def _spans_per_row(value: Any, rows: int, where: str) -> list[list]:
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{where}: field 'doc_spans' must be a list (of spans, or one list per row)")
    per_row = value if value and isinstance(value[0], (list, tuple)) and not _is_span_tuple(value[0]) else [value]
    if rows == 1 and len(per_row) != 1:
        per_row = [value]
    if len(per_row) != rows:
        raise ValueError(f"{where}: field 'doc_spans' has {len(per_row)} rows, input_ids has {rows}")
    return [list(spans) for spans in per_row]


def _is_span_tuple(value: Any) -> bool:
    return isinstance(value, tuple) and len(value) == 4 and isinstance(value[0], str)


def canonical_microbatch(batch: Mapping[str, Any], *, where: str, spans: Optional["SpanMatcher"] = None,
                         step: int = 0, micro_step: int = 0, rank: int = 0, producer: Optional[Mapping] = None,
                         ignore: Sequence[str] = (), policy: Optional[dict] = None) -> dict:
    """The canonical micro-batch of one batch dict (see the module docstring). `spans` derives doc_spans when
    the batch has none (by matching the rows' tokens against the documents). With `policy`, input_ids and
    labels are checked to hold token ids (negative values only where the policy declares them)."""
    fields = canonical_fields(batch, where, ignore)
    arrays: dict[str, np.ndarray] = {}
    for name in PER_TOKEN:
        if name not in fields:
            continue
        array = as_array(fields[name], where, name, floats=name == "loss_mask")
        if name == "attention_mask" and array.ndim > 2:
            raise ValueError(f"{where}: field 'attention_mask' is a dense mask of shape {tuple(array.shape)}: give the "
                             f"boundaries as doc_ids (packoracle.dump.doc_ids_from_dense_mask derives them)")
        if name != "loss_mask":
            check_integral(array, where, name)
        elif array.dtype.kind not in "iubf":
            raise TypeError(f"{where}: field 'loss_mask' has dtype {array.dtype}: numbers are expected")
        if policy is not None and name in ("input_ids", "labels"):
            _args.non_negative_ids(array, _args.signed_ids(policy, labels=name == "labels"), where, name)
        arrays[name] = rows_of(array, where, name)
    shape = arrays["input_ids"].shape
    for name, array in arrays.items():
        if array.shape != shape:
            raise ValueError(f"{where}: field {name!r} has shape {tuple(array.shape)}, input_ids has {tuple(shape)}")
    rows = shape[0]
    lists = {name: _per_row_lists(fields[name], rows, where, name) for name in PER_ROW_LISTS if name in fields}
    if "doc_spans" in fields:
        row_spans = _spans_per_row(fields["doc_spans"], rows, where)
    elif spans is not None:
        targets = _target_slots(arrays, policy)
        row_spans = [spans.match(arrays["input_ids"][r], f"{where}: rows[{r}]", None if targets is None else targets[r])
                     for r in range(rows)]
    else:
        raise ValueError(f"{where}: field 'doc_spans' is missing (and no documents to derive it from)")
    out_rows = []
    for r in range(rows):
        row = {name: array[r] for name, array in arrays.items()}
        for name, per_row in lists.items():
            row[name] = per_row[r]
        row["doc_spans"] = row_spans[r]
        out_rows.append(row)
    return {"step": step, "micro_step": micro_step, "rank": rank, "rows": out_rows,
            "producer": _producer(producer, where)}


def _target_slots(arrays: Mapping[str, np.ndarray], policy: Optional[Mapping]) -> Optional[np.ndarray]:
    """Which slots carry a target as the producer wrote them (a label that is not ignored, and a loss_mask that
    is not 0 where there is one): the evidence SpanMatcher reads a run of pad ids by (padding is never a
    target). None without a policy (the ignore index unknown)."""
    if policy is None or "labels" not in arrays or policy.get("ignore_index") is None:
        return None
    targets = arrays["labels"] != policy["ignore_index"]
    if "loss_mask" in arrays:
        targets &= arrays["loss_mask"] != 0
    return targets


class SpanMatcher:
    """Derives doc_spans for batches that carry none, from the documents alone (never from the producer's
    boundary tensors, which are what is checked): each row is read left to right; a piece is the rest of the
    document cut at the previous row's end, or else the first unplaced document (in the given order) whose
    tokens start here, whole or, when the policy splits or truncates, cut at the row's end. Slots where no
    document matches are left without a span: the checks then report them (coverage, padding).

    Documents whose tokens collide (one a prefix of another, repeated tokens at a row's end) can be matched
    differently from what the packer did; give doc_spans to remove any doubt. When the greedy reading leaves
    the step unexplained (``misses``: slots left without a span that do not hold the pad id; ``unplaced()``:
    documents never placed), ``solve`` searches every reading of the rows seen for one that places every
    document, padding being a trailing run of the pad id.

    A document made only of the pad id, where the rest of the row is the pad id too, is read as padding unless
    a slot it would cover is a target (a label that is not ignored, with a loss_mask that is not 0 where there
    is one): padding is never a target. Read as a document there, padding would need the document's positions
    and targets, a false counterexample for a packer that put that document elsewhere (under
    `pad_positions: any` padding holds any position). One that covers no target anywhere is left to the search,
    which places it where nothing else explains the rows."""

    SOLVE_STEPS = 20000  # the search's bound: beyond it the greedy reading stays

    def __init__(self, effective_documents: list[dict], overflow: str, pad_id: Optional[int] = None):
        self.docs = effective_documents
        self.pad_id = pad_id
        self.misses = 0
        self.seen: list[tuple[np.ndarray, list]] = []  # every row matched, with its span list (updated in place)
        self.targets: list[Optional[np.ndarray]] = []  # per row seen: which slots are targets (None: unknown)
        self.cut = overflow in ("split", "truncate")
        self.split = overflow == "split"
        self.placed = [len(d["tokens"]) == 0 for d in effective_documents]
        self.all_pad = [pad_id is not None and len(d["tokens"]) > 0 and bool((np.asarray(d["tokens"]) == pad_id).all())
                        for d in effective_documents]
        self.by_first: dict[int, list[int]] = {}
        for k, d in enumerate(effective_documents):
            if len(d["tokens"]):
                self.by_first.setdefault(int(d["tokens"][0]), []).append(k)
        self.open: Optional[tuple[int, int]] = None  # (document, offset) continued in the next row

    def match(self, tokens: np.ndarray, where: str, targets: Optional[np.ndarray] = None) -> list[dict]:
        """The spans of one row. ``targets``: which of its slots are targets (see the class docstring)."""
        spans: list[dict] = []
        i, n = 0, len(tokens)
        self.seen.append((tokens, spans))
        self.targets.append(targets)
        k: Optional[int]
        if self.open is not None:
            k, offset = self.open
            self.open = None
            rest = self.docs[k]["tokens"][offset:]
            m = _common_prefix(tokens, 0, rest)
            if m:
                spans.append({"doc_uid": self.docs[k]["doc_uid"], "start": 0, "length": m, "doc_offset": offset})
                if m < len(rest) and self.split:
                    self.open = (k, offset + m)
                i = m
        while i < n:
            k = self._next_document(tokens, i, len(self.seen) - 1)
            if k is not None and k != self._first_unplaced() and self._padding_from(tokens, i):
                k = None  # as solve() chooses: a document out of order only where the rest is not padding
            if k is None:
                # the rest is unexplained unless it is padding (the pad id to the row's end)
                if self.pad_id is None or not bool((np.asarray(tokens[i:]) == self.pad_id).all()):
                    self.misses += 1
                break
            doc = self.docs[k]["tokens"]
            m = min(len(doc), n - i)
            spans.append({"doc_uid": self.docs[k]["doc_uid"], "start": i, "length": m, "doc_offset": 0})
            self.placed[k] = True
            if m < len(doc) and self.split:
                self.open = (k, m)
            i += m
        return spans

    def unplaced(self) -> int:
        return sum(1 for placed in self.placed if not placed)

    def _first_unplaced(self) -> Optional[int]:
        return next((k for k, placed in enumerate(self.placed) if not placed), None)

    def _padding_from(self, tokens: np.ndarray, i: int) -> bool:
        return self.pad_id is not None and bool((np.asarray(tokens[i:]) == self.pad_id).all())

    def solve(self, pad_id: int) -> bool:
        """Depth-first over the rows seen: at each slot a continued piece, padding when the rest of the row is
        the pad id, or an unplaced document that matches (cut at the row's end where the policy splits or
        truncates), in the documents' order. The first reading that places every document replaces the greedy spans; False when none is
        found within SOLVE_STEPS."""
        rows = [np.asarray(t) for t, _ in self.seen]
        docs = [np.asarray(d["tokens"]) for d in self.docs]
        placed = [len(d) == 0 for d in docs]
        found: list[list[dict]] = [[] for _ in rows]
        budget = [self.SOLVE_STEPS]

        def row_from(r: int, i: int, open_piece: Optional[tuple[int, int]], acc: list) -> bool:
            budget[0] -= 1
            if budget[0] < 0:
                return False
            if r == len(rows):
                return all(placed) and open_piece is None
            tokens, n = rows[r], len(rows[r])
            if i == n:
                found[r] = list(acc)
                return row_from(r + 1, 0, open_piece, [])
            if i == 0 and open_piece is not None:  # the rest of a document cut at the previous row's end
                cut, offset = open_piece
                rest = docs[cut][offset:]
                m = _common_prefix(tokens, 0, rest)
                if m:
                    nxt = (cut, offset + m) if m < len(rest) and self.split else None
                    span = {"doc_uid": self.docs[cut]["doc_uid"], "start": 0, "length": m, "doc_offset": offset}
                    if row_from(r, m, nxt, acc + [span]):
                        return True
                return False
            # Choices in the order packers make them: the first document not yet placed, if it matches here;
            # else padding, when the rest of the row is the pad id (what the greedy reading could not explain
            # is most often a document of pad ids read where the packer left padding); else any other
            # document that matches, in the documents' order.
            matching = [k for k in self.by_first.get(int(tokens[i]), ()) if not placed[k]
                        and ((min(len(docs[k]), n - i) == len(docs[k]) or self.cut)
                             and _common_prefix(tokens, i, docs[k][:min(len(docs[k]), n - i)]) == min(len(docs[k]), n - i))]
            first = next((k for k, p in enumerate(placed) if not p), None)
            # None: padding (the rest of the row is the pad id)
            choices: list[Optional[int]] = ([first] if first in matching else []) + [None] + [k for k in matching if k != first]
            for k in choices:
                if k is None:
                    if bool((tokens[i:] == pad_id).all()):
                        found[r] = list(acc)
                        if row_from(r + 1, 0, None, []):
                            return True
                    continue
                m = min(len(docs[k]), n - i)
                placed[k] = True
                nxt = (k, m) if m < len(docs[k]) and self.split else None
                span = {"doc_uid": self.docs[k]["doc_uid"], "start": i, "length": m, "doc_offset": 0}
                # a piece cut at the row's end ends the row and continues in the next one
                if row_from(r, i + m, nxt, acc + [span]):
                    return True
                placed[k] = False
            return False

        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 10000))
        try:
            if not row_from(0, 0, None, []):
                return False
        finally:
            sys.setrecursionlimit(limit)
        for (_, spans), new in zip(self.seen, found):
            spans[:] = new
        self.placed = placed
        self.misses = 0
        return True

    def _padding_rather_than(self, k: int, r: int, i: int) -> bool:
        """Whether slots i.. of row r, where document k (made of the pad id) would go, read as padding: the
        rest of the row is the pad id and none of the slots the document would cover is a target."""
        if not self.all_pad[k]:
            return False
        tokens, _ = self.seen[r]
        if not bool((np.asarray(tokens[i:]) == self.pad_id).all()):
            return False
        targets = self.targets[r]
        m = min(len(self.docs[k]["tokens"]), len(tokens) - i)
        return targets is None or not bool(np.asarray(targets[i:i + m]).any())

    def _next_document(self, tokens: np.ndarray, i: int, r: int) -> Optional[int]:
        for k in self.by_first.get(int(tokens[i]), ()):
            if self.placed[k] or self._padding_rather_than(k, r, i):
                continue
            doc = self.docs[k]["tokens"]
            m = min(len(doc), len(tokens) - i)
            if (m == len(doc) or self.cut) and _common_prefix(tokens, i, doc[:m]) == m:
                return k
        return None


def _common_prefix(tokens: np.ndarray, start: int, doc: np.ndarray) -> int:
    """How many of `doc`'s tokens match tokens[start:], from the first."""
    m = min(len(doc), len(tokens) - start)
    if m <= 0:
        return 0
    same = np.asarray(tokens[start:start + m]) == np.asarray(doc[:m])
    return m if same.all() else int(np.argmin(same))


def scalar(value: Any) -> Any:
    """A numpy scalar or a one-element tensor as the Python number it holds; anything else as it is."""
    return value.item() if hasattr(value, "item") and not isinstance(value, (int, float)) else value


def _producer(value: Any, where: str) -> Optional[dict]:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise TypeError(f"{where}: field 'producer' must be a dict, got {type(value).__name__}")
    out = {}
    for k, v in value.items():
        try:
            out[k] = scalar(v)
        except (TypeError, ValueError, RuntimeError) as e:  # a tensor of more than one element, ...
            raise TypeError(f"{where}: producer field {k!r} must be a number, got {type(v).__name__} ({e})") from None
    return out


class Microbatches:
    """Reads the micro-batches of one step: micro-batch records ({"rows": [...]}) or batches in the producer's
    own field names ({"input_ids": tensor, ...}), one or a list of them. A batch without doc_spans gets them
    from the documents (SpanMatcher over the documents as the policy's delimiters make them), read in order
    across the step's micro-batches."""

    def __init__(self, documents: list, policy: dict):
        self.documents = documents
        self.policy = policy
        self._effective: Optional[list] = None
        self._matcher: Optional[SpanMatcher] = None

    @property
    def effective(self) -> Optional[list]:
        """The documents as placed (the policy's delimiters added), once a span match needed them."""
        return self._effective

    def matcher(self) -> SpanMatcher:
        if self._matcher is None:
            if self._effective is None:
                self._effective = _core.effective_documents(self.documents, self.policy)
            pad = self.policy.get("pad_id")
            self._matcher = SpanMatcher(self._effective, self.policy["overflow"], None if pad is None else int(pad))
        return self._matcher

    def read(self, answer: Any) -> list[dict]:
        """The canonical micro-batches of `answer`: one micro-batch (a dict) or a list of them."""
        if isinstance(answer, Mapping):
            answer = [answer]
        if not isinstance(answer, Sequence) or isinstance(answer, (str, bytes)):
            raise TypeError(f"the answer must be a list of micro-batches (dicts), got {type(answer).__name__}")
        out = [self.microbatch(mb, k) for k, mb in enumerate(answer)]
        matched = self._matcher
        pad = self.policy.get("pad_id")
        if matched is not None and pad is not None and matched.misses + matched.unplaced() > 0:
            # The greedy reading left the step unexplained (documents made of the pad id at a row's end, read
            # as documents where they were padding, or the other way round): search for a reading of every row
            # that places every document; the greedy one stays when there is none.
            matched.solve(int(pad))
        return out

    def microbatch(self, mb: Any, k: int) -> dict:
        where = f"microbatches[{k}]"
        if not isinstance(mb, Mapping):
            raise TypeError(f"{where}: a micro-batch must be a dict, got {type(mb).__name__}")
        meta: dict[str, Any] = {"step": _args.integer(scalar(mb.get("step", 0)), where, "field 'step'", 0, _args.INT64_MAX),
                "micro_step": _args.integer(scalar(mb.get("micro_step", k)), where, "field 'micro_step'", 0,
                                            _args.INT64_MAX),
                "rank": _args.integer(scalar(mb.get("rank", 0)), where, "field 'rank'", 0, _args.INT64_MAX),
                "producer": _producer(mb.get("producer"), where)}
        if "rows" not in mb:
            batch = {n: v for n, v in mb.items() if n not in ("record", "step", "micro_step", "rank", "producer")}
            return canonical_microbatch(batch, where=where, spans=self._spans_for(batch), policy=self.policy, **meta)
        rows = mb["rows"]
        if not isinstance(rows, Sequence) or isinstance(rows, (str, bytes)):
            raise TypeError(f"{where}: field 'rows' must be a list of rows, got {type(rows).__name__}")
        out: dict[str, Any] = dict(meta, rows=[])
        for r, row in enumerate(rows):
            if not isinstance(row, Mapping):
                raise TypeError(f"{where}: rows[{r}] must be a dict, got {type(row).__name__}")
            one = canonical_microbatch(row, where=f"{where}: rows[{r}]", spans=self._spans_for(row), policy=self.policy)
            if len(one["rows"]) != 1:
                raise ValueError(f"{where}: rows[{r}]: field 'input_ids' must be one row, got {len(one['rows'])}")
            out["rows"].append(one["rows"][0])
        return out

    def _spans_for(self, batch: Mapping) -> Optional[SpanMatcher]:
        return None if "doc_spans" in batch else self.matcher()
