"""A micro-batch in the producer's own field names, as the canonical form the C++ core reads (DESIGN §5).

    {"input_ids": [B, L], "labels": [B, L], "position_ids": [B, L], "cu_seq_lens_q": [n + 1], ...}
      → {"micro_step", "rank", "step", "producer", "rows": [{"input_ids": view, ..., "doc_spans": [...]}]}

Every array stays a view of the caller's memory; only the boundary lists that vary per row (cu_seqlens,
seq_lens) and the spans are built here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

import numpy as np

from . import _args, _core
from ._arrays import as_array, check_integral, rows_of, scalar
from ._documents import CoreDocuments
from .dump.format import ROW_FIELDS, SCHEMA_TABLES

# The row fields as the core states them (properties/row_fields.h, through the generated schema the dump writer
# reads too): per-token fields, one value per slot, rows × slots like input_ids; per-row boundary lists, a 1-D
# array for one row, or one list (or a padded 2-D array) per row; and the other names producers use for the same
# fields (HF's flash-attention kwargs and seq_idx, Megatron's get_batch `tokens`, ...).
PER_TOKEN = tuple(f["name"] for f in ROW_FIELDS if f["shape"] == "per_token")
PER_ROW_LISTS = tuple(f["name"] for f in ROW_FIELDS if f["shape"] == "per_row_list")
ALIASES = {alias: f["name"] for f in ROW_FIELDS for alias in f["aliases"]}
# Fields that carry nothing the kit checks beyond what the fields above say (key-side copies of the query
# lengths are compared with them; maxima are derivable).
KEY_SIDE: dict[str, str] = SCHEMA_TABLES["key_side_fields"]
DERIVED = frozenset(SCHEMA_TABLES["derived_fields"])
KNOWN = frozenset(f["name"] for f in ROW_FIELDS) | set(ALIASES) | set(KEY_SIDE) | DERIVED


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
    out_rows = []
    for r in range(rows):
        row = {name: array[r] for name, array in arrays.items()}
        for name, per_row in lists.items():
            row[name] = per_row[r]
        out_rows.append(row)
    if "doc_spans" in fields:
        row_spans = _spans_per_row(fields["doc_spans"], rows, where)
    elif spans is not None:
        targets = _target_slots(arrays, policy)
        row_spans = [spans.match(arrays["input_ids"][r], f"{where}: rows[{r}]", None if targets is None else targets[r],
                                 *_row_evidence(out_rows[r], policy)) for r in range(rows)]
    else:
        raise ValueError(f"{where}: field 'doc_spans' is missing (and no documents to derive it from)")
    for row, row_spans_of in zip(out_rows, row_spans):
        row["doc_spans"] = row_spans_of
    return {"step": step, "micro_step": micro_step, "rank": rank, "rows": out_rows,
            "producer": _producer(producer, where)}


def read_batch(batch: Mapping[str, Any], *, where: str, spans: Optional["SpanMatcher"], step: int, micro_step: int,
               rank: int, producer: Optional[Mapping], ignore: Sequence[str], policy: dict,
               defer_ids: bool = False) -> Any:
    """One batch dict as the core audits it: the core's own reading of it (`_core.batch_view`: the common form,
    a dict of CPU integer tensors or arrays in the fields canonical_microbatch knows, read in one call; views of
    the caller's arrays whose rows the audit reads once), or canonical_microbatch's dict for every other batch,
    which then names whatever is wrong. python/tests/test_batch_view.py pins the two readings.

    ``defer_ids``: the core's reading leaves its scan of input_ids and labels for ids the policy does not allow
    to the audit, which skips it where the audit proves them (a clean batch); `_core.audit_records` then answers
    None for a batch that holds one, and the caller reads the batch again with canonical_microbatch."""
    # `_core.batch_view`, in this frame (check_batch reads every training batch through it): None where the core
    # leaves the batch to canonical_microbatch.
    if type(batch) is dict:
        try:
            given = _producer(producer, where)
        except TypeError:
            pass  # canonical_microbatch raises it, after whatever else it finds first
        else:
            derivation, uids = (None, []) if spans is None else spans.core_reader()
            ids, label_ids = _args.sorted_signed_ids(policy), _args.sorted_signed_ids(policy, labels=True)
            view = _core.batch_view(batch, list(ignore), ids, label_ids, policy.get("ignore_index"), derivation, uids,
                                    step, micro_step, rank, given, defer_ids)
            if view is not None:
                return view
    return canonical_microbatch(batch, where=where, spans=spans, step=step, micro_step=micro_step, rank=rank,
                                producer=producer, ignore=ignore, policy=policy)


def _row_evidence(row: Mapping[str, Any], policy: Optional[Mapping]
                  ) -> tuple[Optional[list[int]], Optional[int], int]:
    """What the row's own encodings say (``_core.row_evidence``: where they start segments, where its marks of
    padding start their trailing run and end their leading one), the evidence SpanMatcher chooses between
    readings by; (None, None, 0) without a policy or where a field does not read."""
    if policy is None:
        return None, None, 0
    try:
        starts, padding_from, padding_until = _core.row_evidence(dict(row, doc_spans=[]), policy)
    except (TypeError, ValueError):
        return None, None, 0  # a field the audit then names
    return list(starts), padding_from, padding_until


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
    boundary tensors, which are what is checked). The reading is the core's (`_core.SpanDerivation`,
    jobs/span_derivation.h): each row left to right, a piece is the rest of the document cut at the previous
    row's end, or else the first unplaced document (in the given order) whose tokens start here, whole or, when
    the policy splits or truncates, cut at the row's end; slots no document matches are left without a span
    (the checks then report them: coverage, padding). A document made only of the pad id, where the rest of the
    row is the pad id too, is read as padding unless a slot it would cover is a target.

    Documents whose tokens collide (one a prefix of another, repeated tokens at a row's end) can be matched
    differently from what the packer did; give doc_spans to remove any doubt. When the greedy reading leaves
    the step unexplained (``misses``, ``unplaced()``), ``finish`` searches every reading of the rows seen for one
    that places every document, and updates the span lists ``match`` returned, in place."""

    SOLVE_STEPS = 20000  # the core's bound (SpanDerivation::kSolveSteps): beyond it the greedy reading stays

    def __init__(self, documents: CoreDocuments, policy: Any):
        """``documents``: as given to the packer ({"doc_uid", "tokens", "supervised"?} dicts, as
        canonical_documents makes them, or a ``_core.Documents``); the core adds the policy's delimiters (a preset
        name or a dict) and matches each document's inputs (under shift: document all but its last token, a
        label only)."""
        self._uids = documents.uids() if isinstance(documents, _core.Documents) else [d["doc_uid"] for d in documents]
        self._core = _core.SpanDerivation(documents, policy)
        self._returned: list[list[dict]] = []  # the lists match() handed out, which finish() updates in place

    @property
    def misses(self) -> int:
        """Rows whose rest is neither a document nor padding."""
        return int(self._core.misses)

    def match(self, tokens: np.ndarray, where: str, targets: Optional[np.ndarray] = None,
              starts: Optional[list[int]] = None, padding_from: Optional[int] = None,
              padding_until: int = 0) -> list[dict]:
        """The spans of one row. ``targets``: which of its slots are targets (see the class docstring).
        ``starts``, ``padding_from``, ``padding_until``: the row's own evidence (``_core.row_evidence``), which
        chooses between readings the tokens allow alike and, under padding: left, says where the leading
        padding ends (the tokens decide every reading; None: unknown)."""
        flags = None if targets is None else np.ascontiguousarray(targets, dtype=np.uint8)
        spans = self._spans(self._core.match(np.ascontiguousarray(tokens, dtype=np.int64), flags, starts,
                                             padding_from, padding_until))
        self._returned.append(spans)
        return spans

    def core_reader(self) -> tuple[Any, list[str]]:
        """The core's span derivation and the documents' uids (what `_core.batch_view` matches rows with)."""
        return self._core, self._uids

    def unplaced(self) -> int:
        """Documents never placed."""
        return int(self._core.unplaced())

    def finish(self) -> bool:
        """Once the step's rows are all matched: where the greedy reading leaves them unexplained (``misses``,
        ``unplaced()``), the core searches, depth-first over the rows seen (at most SOLVE_STEPS steps), for the first
        reading that places every document under the policy's pad id, and replaces the greedy spans with it; False
        when none is found or none was needed (SpanDerivation::Finish, which check_batch and verify apply too)."""
        return self._replaced(self._core.finish())

    def other_readings(self, limit: int) -> list[list[list[dict]]]:
        """Up to ``limit`` other readings of every row matched that place every document, each as the rows'
        span lists in the order matched (SpanDerivation::OtherReadings): what an audit must also hold the rows
        to, where the derivation met a choice. Empty where the reading is the only one."""
        return [[self._spans(row) for row in reading] for reading in self._core.other_readings(limit)]

    def returned(self) -> list[list[dict]]:
        """The span lists match() handed out, in order (finish() updates them in place)."""
        return self._returned

    def _replaced(self, solved: bool) -> bool:
        if solved:
            for spans, new in zip(self._returned, self._core.rows()):
                spans[:] = self._spans(new)
        return bool(solved)

    def _spans(self, spans: list) -> list[dict]:
        uids = self._uids
        return [{"doc_uid": uids[k], "start": start, "length": length, "doc_offset": offset}
                for k, start, length, offset in spans]


# Values scalar() gives back as they are, read without a call each (exact types: a subclass may have item()).
_AS_IS = frozenset({int, float, str})


def _producer(value: Any, where: str) -> Optional[dict]:
    if value is None:
        return None
    if type(value) is dict and _AS_IS.issuperset(map(type, value.values())):
        return dict(value)  # the common form: Python numbers (and the scope's name)
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

    def __init__(self, documents: CoreDocuments, policy: dict):
        self.documents = documents
        self.policy = policy
        self._matcher: Optional[SpanMatcher] = None

    def matcher(self) -> SpanMatcher:
        if self._matcher is None:
            self._matcher = SpanMatcher(self.documents, self.policy)
        return self._matcher

    def read(self, answer: Any) -> list[dict]:
        """The canonical micro-batches of `answer`: one micro-batch (a dict) or a list of them."""
        if isinstance(answer, Mapping):
            answer = [answer]
        if not isinstance(answer, Sequence) or isinstance(answer, (str, bytes)):
            raise TypeError(f"the answer must be a list of micro-batches (dicts), got {type(answer).__name__}")
        out = [self.microbatch(mb, k) for k, mb in enumerate(answer)]
        if self._matcher is not None:
            # The greedy reading may leave the step unexplained (documents made of the pad id at a row's end, read
            # as documents where they were padding, or the other way round): the core then searches for a
            # reading of every row that places every document; the greedy one stays when there is none.
            self._matcher.finish()
        return out

    def other_readings(self, records: list[dict], limit: int) -> list[list[dict]]:
        """`records` (what read() returned) under each other reading of their derived spans (SpanMatcher.
        other_readings), at most `limit`: copies whose rows carry that reading's spans. Empty where no span was
        derived or the reading is the only one."""
        if self._matcher is None:
            return []
        derived = {id(spans): k for k, spans in enumerate(self._matcher.returned())}
        out = []
        for reading in self._matcher.other_readings(limit):
            out.append([dict(mb, rows=[dict(row, doc_spans=reading[derived[id(row["doc_spans"])]])
                                       if id(row.get("doc_spans")) in derived else row for row in mb["rows"]])
                        for mb in records])
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
