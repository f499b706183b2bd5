"""The `packed-batch` JSON Lines format, version 1 (DESIGN.md §5, conventions.md §5): records, validation, writer.

One JSON object per line, each with a "record" field:

- ``header`` (first line, exactly once): schema, version, producer, special_ids, dp_world_size,
  grad_accum_steps, policy (one flat object: a preset name and/or the keys of DESIGN §3);
- ``document`` (optional, recommended): doc_uid, tokens (delimiters included as the producer adds them),
  supervised (0/1 per token);
- ``microbatch``: step, micro_step, rank, rows (input_ids, labels, optional loss_mask, position_ids,
  cu_seqlens, seq_lens, doc_ids, attention_mask, and doc_spans: the ground truth), optional producer totals;
- ``step`` (optional): per-step totals as the producer reports them.

Every ``*_record`` function validates what it builds and raises ``ValueError`` naming the record, the field
and the index of the first problem. ``validate_record`` checks a record built elsewhere, ``validate_lines``
a whole file (header first and once, unique document uids, spans that name known documents and hold their
tokens).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import IO, Any, Literal, Optional, Protocol, TypedDict, TypeVar, Union, cast, overload

SCHEMA = "packed-batch"
VERSION = 1

# ---- types --------------------------------------------------------------------------------------------------
#
# The records as the ``*_record`` functions return them (TypedDicts: plain dicts at run time). Aliases are
# written with Optional/Union: the module runs on Python 3.9 without the extension.

DenominatorScope = Literal["microbatch", "step", "global"]
"""What a producer's `denominator` counts: one micro-batch, one optimizer step (all ranks), or the whole run
(DENOMINATOR_SCOPES below, read from the core's table; a test holds the two the same)."""


class SupportsToList(Protocol):
    """A tensor or an array: anything with ``.tolist()`` (torch.Tensor, numpy.ndarray)."""

    def tolist(self) -> Any: ...


IntsLike = Union[Sequence[int], SupportsToList]
"""A flat run of integers: a list or tuple of ints, or a 1-D tensor or array."""


class Span(TypedDict):
    """One piece of a document in a row: slots ``[start, start + length)`` hold the document's tokens
    ``[doc_offset, doc_offset + length)``."""

    doc_uid: str
    start: int
    length: int
    doc_offset: int


class _RowFields(TypedDict):
    input_ids: list[int]
    labels: list[int]
    doc_spans: list[Span]


class Row(_RowFields, total=False):
    """One row of a ``microbatch`` record: input_ids, labels and doc_spans (the ground truth), and the producer's
    optional encodings (loss_mask entries are ints where integral)."""

    loss_mask: list[float]
    position_ids: list[int]
    cu_seqlens: list[int]
    seq_lens: list[int]
    doc_ids: list[int]
    attention_mask: list[int]


class _ProducerFields(TypedDict):
    system: str
    component: str
    version: Optional[str]


class Producer(_ProducerFields, total=False):
    """Who wrote a dump: the system (e.g. "pytorch/torchtune"), its component, its version, and free-form extra."""

    extra: dict[str, Any]


class ProducerTotals(TypedDict, total=False):
    """What the producer computed for a micro-batch: any non-empty subset of loss_sum, denominator (with its
    scope) and loss; grad_scale optional."""

    loss_sum: float
    denominator: float
    denominator_scope: DenominatorScope
    loss: float
    grad_scale: float


class HeaderRecord(TypedDict):
    """The first line of a dump."""

    record: Literal["header"]
    schema: str
    version: int
    producer: Producer
    special_ids: dict[str, Optional[int]]
    dp_world_size: int
    grad_accum_steps: int
    policy: dict[str, Any]


class DocumentRecord(TypedDict):
    """A source document: its tokens (delimiters included as the producer adds them) and 0/1 supervision."""

    record: Literal["document"]
    doc_uid: str
    tokens: list[int]
    supervised: list[int]


class _MicrobatchFields(TypedDict):
    record: Literal["microbatch"]
    step: int
    micro_step: int
    rank: int
    rows: list[Row]


class MicrobatchRecord(_MicrobatchFields, total=False):
    """One micro-batch of one rank: its rows, whether it is flattened, and the producer's totals."""

    flattened: bool
    producer: ProducerTotals


StepRecord = dict[str, Any]
"""A ``step`` record: {"record": "step", "step": int, "rank"?: int, and the producer's per-step totals}."""

Record = Union[HeaderRecord, DocumentRecord, MicrobatchRecord, StepRecord]
"""Any record of the format."""

_R = TypeVar("_R", bound=Mapping[str, Any])

def _load_schema() -> dict[str, Any]:
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "schema.json")) as f:
        schema: dict[str, Any] = json.load(f)
    return schema


# The formats' tables as the core states them, each once (policy keys: oracle/src/policy.cc Keys(); row fields:
# properties/row_fields.h): `packoracle schema`'s output, committed beside this module so that the writer runs
# without the extension. ctest schema.committed_copy_is_current fails where it differs from the core's.
SCHEMA_TABLES: dict[str, Any] = _load_schema()

# DESIGN §3: every policy key, in canonical order, with what it takes (PolicyKeyDomain: its closed `values`, or
# `open` to other values too: any integer (null ahead of them for eos_id and bos_id), "multiple_of:k", a preset).
_KEY_DOMAINS: dict[str, dict[str, Any]] = {d["key"]: d for d in SCHEMA_TABLES["policy_keys"]}
POLICY_KEYS = tuple(_KEY_DOMAINS)
# Keys added after version 1, with their defaults: a resolved policy leaves each out at its default, as the core
# does (KeysAfterVersionOne), so that a resolved policy of version 1 stays byte for byte the same.
KEYS_AFTER_VERSION_ONE = {d["key"]: d["default"] for d in _KEY_DOMAINS.values() if d["after_version_one"]}
# Every preset, fully resolved, as `packoracle presets --format json` prints it.
PRESETS: dict[str, dict[str, Any]] = SCHEMA_TABLES["presets"]

# What a producer's denominator counts (DenominatorScope, properties/candidate.h).
DENOMINATOR_SCOPES = tuple(SCHEMA_TABLES["denominator_scopes"])
# A `producer` object's totals, each a number, and the field of the denominator's scope (kProducerTotalsFields,
# properties/candidate.h).
PRODUCER_TOTALS = tuple(f["name"] for f in SCHEMA_TABLES["producer_fields"] if f["value"] == "number")
_SCOPE_FIELD: str = next(f["name"] for f in SCHEMA_TABLES["producer_fields"] if f["value"] == "scope")
# A row's fields in the order the writers write them (DESIGN §5), and the optional integer ones among them.
ROW_FIELDS: tuple[dict[str, Any], ...] = tuple(SCHEMA_TABLES["row_fields"])
ROW_INT_FIELDS = tuple(f["name"] for f in ROW_FIELDS if not f["required"] and f["value"] in ("integer", "zero_one"))


def is_int(value: object) -> bool:
    """A JSON integer: int (not bool) or anything with __index__ that is not a bool."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return hasattr(value, "__index__") and not isinstance(value, float)


def is_number(value: object) -> bool:
    """A JSON number: int or float, not bool."""
    return not isinstance(value, bool) and isinstance(value, (int, float))


def tolist(x: object) -> Any:
    """Tensors, arrays and sequences as (nested) Python lists: `.tolist()` when there is one."""
    if hasattr(x, "tolist"):
        return x.tolist()
    if isinstance(x, (list, tuple)):
        return [tolist(v) for v in x]
    return x


@overload
def int_list(value: object, where: str, field: str, *, allow_bool: bool = False,
             allow_none: Literal[False] = False) -> list[int]: ...
@overload
def int_list(value: object, where: str, field: str, *, allow_bool: bool = False,
             allow_none: bool) -> Optional[list[int]]: ...
def int_list(value: object, where: str, field: str, *, allow_bool: bool = False,
             allow_none: bool = False) -> Optional[list[int]]:
    """A flat list of ints from a list, tuple, tensor or array; bools become 0/1 when allowed; integral floats
    (float32 masks) become ints. Raises ValueError naming `where`, the field and the index."""
    value = tolist(value)
    if value is None and allow_none:
        return None
    if not isinstance(value, list):
        raise ValueError(f"{where}: field '{field}' must be a list of integers, got {type(value).__name__}")
    out: list[int] = []
    for i, v in enumerate(value):
        if isinstance(v, bool):
            if not allow_bool:
                raise ValueError(f"{where}: field '{field}[{i}]' is a boolean, expected an integer")
            out.append(int(v))
        elif is_int(v):
            out.append(int(v))
        elif isinstance(v, float) and v.is_integer() and allow_bool:
            out.append(int(v))
        else:
            raise ValueError(f"{where}: field '{field}[{i}]' must be an integer, got {v!r}")
    return out


def _check_int(value: object, where: str, field: str, minimum: Optional[int] = None) -> None:
    if not is_int(value):
        raise ValueError(f"{where}: field '{field}' must be an integer, got {value!r}")
    if minimum is not None and cast(int, value) < minimum:  # is_int: an int or an integer scalar
        raise ValueError(f"{where}: field '{field}' must be >= {minimum}, got {value}")


def _check_str(value: object, where: str, field: str) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}: field '{field}' must be a non-empty string, got {value!r}")


# ---- policy -------------------------------------------------------------------------------------------------
#
# The policy rules are the core's (oracle/src/policy.cc: keys, values and the contradictions between them):
# where the extension is built, validate_policy and resolve_policy ask it. The writer must also run on a
# training machine without the build; there the table above checks keys and values alone (what the format
# needs to write a header), and `packoracle verify` applies the rest (python/tests/test_lazy_import.py writes a
# dump there, the extension absent). python/tests/test_format_without_core.py pins the table to the core on every
# policy its tests generate.

def _core() -> Any:
    try:
        from .. import _core as core
    except ImportError:  # the dump writer without the extension
        return None
    return core


def validate_policy(policy: _R, where: str = "policy") -> _R:
    """A policy object: a preset and/or DESIGN §3 keys, each with an allowed value (and, where the extension is
    built, no contradiction between them). Returns it unchanged."""
    _resolve(policy, where)
    return policy


def resolve_policy(policy: Mapping[str, Any]) -> dict[str, Any]:
    """The fully resolved policy: the preset's keys (reference when there is none) with the overrides applied."""
    return _resolve(policy, "policy")


def _resolve(policy: object, where: str) -> dict[str, Any]:
    if not isinstance(policy, dict):
        raise ValueError(f"{where}: a policy must be an object, got {type(policy).__name__}")
    if not policy:
        raise ValueError(f"{where}: a policy needs a preset or some keys of DESIGN §3")
    core = _core()
    if core is None:
        return resolve_policy_without_core(policy, where)
    try:
        resolved: dict[str, Any] = core.resolve_policy(policy)
        return resolved
    except ValueError as e:
        message = str(e)
        raise ValueError(f"{where}: {message[len('policy: '):] if message.startswith('policy: ') else message}") from None


def validate_policy_without_core(policy: _R, where: str = "policy") -> _R:
    """The table's check alone: known keys with allowed values (no contradictions: those need the core)."""
    for key, value in policy.items():
        if key not in _KEY_DOMAINS:
            raise ValueError(f"{where}: unknown policy key '{key}' (known keys: {', '.join(POLICY_KEYS)})")
        _check_policy_value(_KEY_DOMAINS[key], value, f"{where}.{key}")
    return policy


def _same_json_value(a: object, b: object) -> bool:
    """a == b as JSON values: null, true and false are themselves only (true is not 1), a string is not a number."""
    if a is None or b is None or isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    return is_int(a) and is_int(b) and a == b


def _check_policy_value(domain: Mapping[str, Any], value: object, at: str) -> None:
    """`value` is one `domain` takes (PolicyKeyDomain): one of its values, or for an open domain one of the open
    set its key states (the preset names; "multiple_of:k"; any integer)."""
    if any(_same_json_value(value, v) for v in domain["values"]):
        return
    key = domain["key"]
    if domain["open"] and key == "preset":
        if value is None or value in PRESETS:  # null: no preset (the reference's keys under the given ones)
            return
        raise ValueError(f"{at}: unknown preset {value!r} (known: {', '.join(PRESETS)})")
    if domain["open"] and key == "pad_to":
        if isinstance(value, str) and value.startswith("multiple_of:"):
            k = value[len("multiple_of:"):]
            if k.isdigit() and int(k) >= 1:
                return
    elif domain["open"] and is_int(value):
        return
    raise ValueError(f"{at}: must be {domain['takes']}, got {value!r}")


def resolve_policy_without_core(policy: Mapping[str, Any], where: str = "policy") -> dict[str, Any]:
    """resolve_policy by the table alone (validate_policy_without_core), for a machine without the extension."""
    validate_policy_without_core(policy, where)
    base = dict(PRESETS[policy.get("preset") or "reference"])
    base.update(policy)
    if not policy.get("preset"):
        base["preset"] = None
    for key, default in KEYS_AFTER_VERSION_ONE.items():
        if key in base and base[key] == default:  # (a key whose default is null may be absent: nothing to drop)
            del base[key]  # the core leaves the key out at its default (a resolved policy of version 1)
    return base


def make_policy(preset: Optional[str] = None, **overrides: Any) -> dict[str, Any]:
    """{"preset": preset, **overrides}, validated: e.g. make_policy("torchtune-packed", pad_id=99)."""
    policy: dict[str, Any] = {}
    if preset is not None:
        policy["preset"] = preset
    policy.update(overrides)
    return validate_policy(policy)


# ---- records ------------------------------------------------------------------------------------------------

def header_record(*, system: str, component: str, version: Optional[str] = None, policy: Mapping[str, Any],
                  special_ids: Optional[Mapping[str, Optional[int]]] = None, dp_world_size: int = 1,
                  grad_accum_steps: int = 1, extra: Optional[dict[str, Any]] = None) -> HeaderRecord:
    """The first line of a dump. `special_ids` maps pad/bos/eos/eod (and e.g. separator) to ids or None."""
    producer: Producer = {"system": system, "component": component, "version": version}
    if extra:
        producer["extra"] = extra
    record: HeaderRecord = {"record": "header", "schema": SCHEMA, "version": VERSION, "producer": producer,
              "special_ids": dict(special_ids or {}), "dp_world_size": dp_world_size,
              "grad_accum_steps": grad_accum_steps, "policy": dict(policy)}
    return validate_record(record)


def document_record(doc_uid: str, tokens: IntsLike, supervised: Optional[IntsLike] = None) -> DocumentRecord:
    """A ``document`` record: the tokens as the producer tokenized them (delimiters included) and their 0/1
    supervision (all 1 when not given; bools become 0/1)."""
    token_list = int_list(tokens, f"document '{doc_uid}'", "tokens")
    supervised_list = [1] * len(token_list) if supervised is None else int_list(
        supervised, f"document '{doc_uid}'", "supervised", allow_bool=True)
    record: DocumentRecord = {"record": "document", "doc_uid": doc_uid, "tokens": token_list,
                              "supervised": supervised_list}
    return validate_record(record)


def span(doc_uid: str, start: int, length: int, doc_offset: int) -> Span:
    """A doc_spans entry: slots [start, start + length) of the row hold tokens [doc_offset, ...) of doc_uid."""
    return {"doc_uid": doc_uid, "start": start, "length": length, "doc_offset": doc_offset}


def _row_values(row: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A row's fields as written, in the table's order (ROW_FIELDS): lists of ints (bools as 0/1 for a 0/1
    field), of numbers for a real one, the spans as dicts; an optional field that is None is left out."""
    out: dict[str, Any] = {}
    for field in ROW_FIELDS:
        name, value = field["name"], row.get(field["name"])
        if field["shape"] == "spans":
            out[name] = [dict(s) for s in row.get(name, [])]
        elif value is None and not field["required"]:
            continue
        elif field["value"] == "real":
            out[name] = _real_list(value, where, name)
        else:
            out[name] = int_list(value, where, name, allow_bool=field["value"] == "zero_one")
    return out


def microbatch_record(rows: Iterable[Mapping[str, Any]], *, step: int = 0, micro_step: int = 0, rank: int = 0,
                      producer: Optional[Mapping[str, Any]] = None,
                      flattened: Optional[bool] = None) -> MicrobatchRecord:
    """A micro-batch: `rows` is a list of row dicts (input_ids, labels, doc_spans, optional encodings).
    Optional encodings that are None are left out. `producer` keys whose value is None are left out, and a
    producer with nothing left is left out: its totals are any non-empty subset of loss_sum, denominator
    (with denominator_scope) and loss (DESIGN §5), each checked by verify for what it says."""
    out_rows: list[Row] = []
    for r, row in enumerate(rows):
        where = f"microbatch (step {step}, micro_step {micro_step}, rank {rank}) rows[{r}]"
        out = _row_values(row, where)
        out_rows.append(cast(Row, out))  # the Row's fields are checked by validate_record below
    record: MicrobatchRecord = {"record": "microbatch", "step": step, "micro_step": micro_step, "rank": rank,
                                "rows": out_rows}
    if flattened is not None:
        record["flattened"] = flattened
    if producer is not None:
        given = {k: v for k, v in producer.items() if v is not None}
        if given:
            record["producer"] = cast(ProducerTotals, given)  # checked by validate_record below
    return validate_record(record)


def step_record(step: int, *, rank: Optional[int] = None, **totals: Any) -> StepRecord:
    """A ``step`` record: the producer's per-step totals (keywords whose value is None are left out)."""
    record: StepRecord = {"record": "step", "step": step}
    if rank is not None:
        record["rank"] = rank
    record.update({k: v for k, v in totals.items() if v is not None})
    return validate_record(record)


def _real_list(values: object, where: str, name: str) -> list[float]:
    values = tolist(values)
    if not isinstance(values, list):
        raise ValueError(f"{where}: field '{name}' must be a list of numbers")
    out: list[float] = []
    for i, v in enumerate(values):
        if isinstance(v, bool):
            v = int(v)
        if not is_number(v):
            raise ValueError(f"{where}: field '{name}[{i}]' must be a number, got {v!r}")
        out.append(int(v) if float(v).is_integer() else float(v))
    return out


# ---- validation ---------------------------------------------------------------------------------------------

def validate_record(record: _R, where: Optional[str] = None) -> _R:
    """Checks one record against the format (required fields, types, equal lengths). Returns it."""
    if not isinstance(record, dict):
        raise ValueError(f"{where or 'record'}: not a JSON object")
    kind = record.get("record")
    where = where or f"{kind} record"
    if kind == "header":
        _validate_header(record, where)
    elif kind == "document":
        _validate_document(record, where)
    elif kind == "microbatch":
        _validate_microbatch(record, where)
    elif kind == "step":
        _check_int(record.get("step"), where, "step", 0)
        if "rank" in record:
            _check_int(record["rank"], where, "rank", 0)
    else:
        raise ValueError(f"{where}: field 'record' must be header, document, microbatch or step, got {kind!r}")
    return record


def _require(record: Mapping[str, Any], field: str, where: str) -> Any:
    if field not in record:
        raise ValueError(f"{where}: field '{field}' is missing")
    return record[field]


def _validate_header(h: Mapping[str, Any], where: str) -> None:
    if _require(h, "schema", where) != SCHEMA:
        raise ValueError(f"{where}: field 'schema' must be {SCHEMA!r}, got {h['schema']!r}")
    if _require(h, "version", where) != VERSION:
        raise ValueError(f"{where}: field 'version' must be {VERSION}, got {h['version']!r}")
    producer = _require(h, "producer", where)
    if not isinstance(producer, dict):
        raise ValueError(f"{where}: field 'producer' must be an object")
    for field in ("system", "component"):
        _check_str(producer.get(field), where, f"producer.{field}")
    if producer.get("version") is not None and not isinstance(producer["version"], str):
        raise ValueError(f"{where}: field 'producer.version' must be a string or null")
    if "extra" in producer and not isinstance(producer["extra"], dict):
        raise ValueError(f"{where}: field 'producer.extra' must be an object")
    special = _require(h, "special_ids", where)
    if not isinstance(special, dict):
        raise ValueError(f"{where}: field 'special_ids' must be an object")
    for key, value in special.items():
        if value is not None and not is_int(value):
            raise ValueError(f"{where}: field 'special_ids.{key}' must be an integer or null, got {value!r}")
    _check_int(_require(h, "dp_world_size", where), where, "dp_world_size", 1)
    _check_int(_require(h, "grad_accum_steps", where), where, "grad_accum_steps", 1)
    validate_policy(_require(h, "policy", where), f"{where}: policy")


def _validate_document(d: Mapping[str, Any], where: str) -> None:
    uid = _require(d, "doc_uid", where)
    _check_str(uid, where, "doc_uid")
    where = f"document '{uid}'"
    tokens = _require(d, "tokens", where)
    int_list(tokens, where, "tokens")
    if not isinstance(tokens, list):
        raise ValueError(f"{where}: field 'tokens' must be a JSON array")
    supervised = _require(d, "supervised", where)
    if not isinstance(supervised, list):
        raise ValueError(f"{where}: field 'supervised' must be a JSON array")
    for i, v in enumerate(supervised):
        if v not in (0, 1) or isinstance(v, bool):
            raise ValueError(f"{where}: field 'supervised[{i}]' must be 0 or 1, got {v!r}")
    if len(supervised) != len(tokens):
        raise ValueError(f"{where}: field 'supervised' has {len(supervised)} entries, tokens has {len(tokens)}")


def _validate_microbatch(m: Mapping[str, Any], where: str) -> None:
    for field in ("step", "micro_step", "rank"):
        _check_int(_require(m, field, where), where, field, 0)
    where = f"microbatch (step {m['step']}, micro_step {m['micro_step']}, rank {m['rank']})"
    rows = _require(m, "rows", where)
    if not isinstance(rows, list) or not rows:
        raise ValueError(f"{where}: field 'rows' must be a non-empty array")
    if "flattened" in m:
        if not isinstance(m["flattened"], bool):
            raise ValueError(f"{where}: field 'flattened' must be true or false")
        if m["flattened"] and len(rows) != 1:
            raise ValueError(f"{where}: field 'rows' has {len(rows)} rows, a flattened micro-batch has exactly one")
    for r, row in enumerate(rows):
        _validate_row(row, f"{where} rows[{r}]")
    if "producer" in m and m["producer"] is not None:
        _validate_producer(m["producer"], f"{where} producer")


def _validate_row(row: object, where: str) -> None:
    if not isinstance(row, dict):
        raise ValueError(f"{where}: a row must be an object")
    n = 0
    for field in ROW_FIELDS:
        name = field["name"]
        if field["shape"] == "spans":
            _validate_spans(_require(row, name, where), where, name, n)
        elif field["required"] or row.get(name) is not None:
            values = _require(row, name, where)
            _validate_row_values(values, field, where)
            if field is ROW_FIELDS[0]:
                n = len(values)
            elif field["shape"] == "per_token" and len(values) != n:
                raise ValueError(f"{where}: field '{name}' has {len(values)} entries, {ROW_FIELDS[0]['name']} has {n}")


def _validate_row_values(values: object, field: Mapping[str, Any], where: str) -> None:
    """One array field of a row, by its value in the table: integers, 0 or 1, real numbers."""
    name = field["name"]
    if not isinstance(values, list):
        raise ValueError(f"{where}: field '{name}' must be a JSON array")
    if field["value"] == "real":
        for i, v in enumerate(values):
            if not is_number(v):
                raise ValueError(f"{where}: field '{name}[{i}]' must be a number, got {v!r}")
        return
    int_list(values, where, name)
    if field["value"] == "zero_one":
        for i, v in enumerate(values):
            if v not in (0, 1):
                raise ValueError(f"{where}: field '{name}[{i}]' must be 0 or 1, got {v!r}")


def _validate_spans(spans: object, where: str, name: str, n: int) -> None:
    if not isinstance(spans, list):
        raise ValueError(f"{where}: field '{name}' must be an array")
    covered = [False] * n
    for s, sp in enumerate(spans):
        at = f"{where} {name}[{s}]"
        if not isinstance(sp, dict):
            raise ValueError(f"{at}: a span must be an object")
        _check_str(sp.get("doc_uid"), at, "doc_uid")
        _check_int(_require(sp, "start", at), at, "start", 0)
        _check_int(_require(sp, "length", at), at, "length", 1)
        _check_int(_require(sp, "doc_offset", at), at, "doc_offset", 0)
        if sp["start"] + sp["length"] > n:
            raise ValueError(f"{at}: field 'length' runs to slot {sp['start'] + sp['length']}, past the row's {n} slots")
        for i in range(sp["start"], sp["start"] + sp["length"]):
            if covered[i]:
                raise ValueError(f"{at}: field 'start' overlaps another span at slot {i}")
            covered[i] = True


def _validate_producer(p: object, where: str) -> None:
    if not isinstance(p, dict):
        raise ValueError(f"{where}: must be an object")
    # grad_scale: a number a writer may add (torchtune's world_size/num_tokens); the core reads no such field.
    for field in PRODUCER_TOTALS + ("grad_scale",):
        if p.get(field) is not None and not is_number(p[field]):
            raise ValueError(f"{where}: field '{field}' must be a number, got {p[field]!r}")
    scope = p.get(_SCOPE_FIELD)
    if scope is not None and scope not in DENOMINATOR_SCOPES:
        raise ValueError(f"{where}: field '{_SCOPE_FIELD}' must be one of {', '.join(DENOMINATOR_SCOPES)}, "
                         f"got {scope!r}")
    # Any non-empty subset of the totals, the scope exactly with the denominator (ProducerTotalsProblem's rule,
    # properties/candidate.h; its messages are the core's own, these the writer's).
    if p.get("denominator") is not None and scope is None:
        raise ValueError(f"{where}: field '{_SCOPE_FIELD}' is missing (a denominator needs its scope)")
    if p.get("denominator") is None and scope is not None:
        raise ValueError(f"{where}: field '{_SCOPE_FIELD}' is given without a denominator (the scope says what "
                         "a denominator counts)")
    if all(p.get(field) is None for field in PRODUCER_TOTALS):
        raise ValueError(f"{where}: gives none of {', '.join(PRODUCER_TOTALS)}: give those the producer has, or no "
                         "producer at all")


def unique_uid(seen: set[str], uid: str, where: str) -> None:
    """Adds `uid` to `seen`; a uid given twice in one list of documents is a ValueError naming it at `where`."""
    if uid in seen:
        raise ValueError(f"{where}: field 'doc_uid' repeats {uid!r} (uids must be unique)")
    seen.add(uid)


def _same_document_again(documents: Mapping[str, tuple[list[int], Optional[list[int]]]],
                         record: Mapping[str, Any], where: str) -> None:
    """A document record whose uid was given before must repeat that record (a dump of several ranks writes a
    document once per rank that holds it); other content is a ValueError naming the first difference, as
    `packoracle verify` reads it (jobs/src/verify_documents.cc)."""
    uid = record["doc_uid"]
    if uid not in documents:
        return
    tokens, supervised = documents[uid]
    again = record["tokens"]
    if len(again) != len(tokens):
        raise ValueError(f"{where}: doc_uid '{uid}' was given before with other content ({len(again)} tokens where "
                         f"the earlier record has {len(tokens)})")
    supervised_again = record.get("supervised") or [1] * len(again)
    supervised = supervised or [1] * len(tokens)
    for k in range(len(tokens)):
        if again[k] != tokens[k]:
            raise ValueError(f"{where}: doc_uid '{uid}' was given before with other content (token {k} is {again[k]} "
                             f"where the earlier record has {tokens[k]})")
        if supervised_again[k] != supervised[k]:
            raise ValueError(f"{where}: doc_uid '{uid}' was given before with other content (supervised[{k}] is "
                             f"{supervised_again[k]} where the earlier record has {supervised[k]})")


def validate_lines(lines: Iterable[Union[str, Mapping[str, Any]]], where: str = "dump") -> list[dict[str, Any]]:
    """Validates a whole dump given as an iterable of JSON lines (or record dicts): the header first and once,
    every record, document uids that repeat only their record, and every span against its document's tokens (token conservation).
    Returns the parsed records."""
    records: list[dict[str, Any]] = []
    documents: dict[str, tuple[list[int], Optional[list[int]]]] = {}  # uid -> (tokens, supervised)
    for number, line in enumerate(lines, 1):
        at = f"{where}:{number}"
        if isinstance(line, str):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{at}: not JSON ({e})") from None
        else:
            record = line
        validate_record(record, None)
        kind = record["record"]
        if (kind == "header") != (not records):
            raise ValueError(f"{at}: the header must be the first record and appear once")
        if kind == "document":
            _same_document_again(documents, record, at)
            documents[record["doc_uid"]] = (record["tokens"], record.get("supervised"))
        if kind == "microbatch" and documents:
            for r, row in enumerate(record["rows"]):
                for s, sp in enumerate(row["doc_spans"]):
                    tokens = documents[sp["doc_uid"]][0] if sp["doc_uid"] in documents else None
                    span_at = f"{at}: rows[{r}] doc_spans[{s}]"
                    if tokens is None:
                        raise ValueError(f"{span_at}: field 'doc_uid' names an unknown document '{sp['doc_uid']}'")
                    if sp["doc_offset"] + sp["length"] > len(tokens):
                        raise ValueError(f"{span_at}: field 'length' runs past the end of '{sp['doc_uid']}'")
                    for t in range(sp["length"]):
                        got = row["input_ids"][sp["start"] + t]
                        want = tokens[sp["doc_offset"] + t]
                        if got != want:
                            raise ValueError(f"{span_at}: input_ids[{sp['start'] + t}] is {got}, but token "
                                             f"{sp['doc_offset'] + t} of '{sp['doc_uid']}' is {want}")
        records.append(record)
    if not records:
        raise ValueError(f"{where}: empty (no header)")
    return records


# ---- writer -------------------------------------------------------------------------------------------------

class DumpWriter:
    """Writes one dump, a record per line, validating each. Use as a context manager:

        with DumpWriter("run.jsonl") as w:
            w.header(system="pytorch/torchtune", component="PackedDataset", policy={"preset": "torchtune-packed"})
            w.documents(docs)
            w.write(microbatch_record_dict)
    """

    def __init__(self, target: Union[str, os.PathLike[str], IO[str]]) -> None:
        """`target`: a path (opened for writing, closed by close()) or an open text file (left open)."""
        self._own = isinstance(target, (str, os.PathLike))
        self._f: IO[str] = open(target, "w", encoding="utf-8") if isinstance(target, (str, os.PathLike)) else target
        self._header = False
        self._uids: set[str] = set()

    def __enter__(self) -> DumpWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the file when the writer opened it."""
        if self._own and not self._f.closed:
            self._f.close()

    def write(self, record: _R) -> _R:
        """Validates a record (and its place in the dump: the header first and once, each document once, spans
        that name written documents), writes it as one line and returns it."""
        validate_record(record)
        kind = record["record"]
        if kind == "header":
            if self._header:
                raise ValueError("header: a dump has exactly one header")
            self._header = True
        elif not self._header:
            raise ValueError(f"{kind} record: the header must come first")
        if kind == "document":
            if record["doc_uid"] in self._uids:
                raise ValueError(f"document '{record['doc_uid']}': written twice")
            self._uids.add(record["doc_uid"])
        if kind == "microbatch" and self._uids:
            for r, row in enumerate(record["rows"]):
                for s, sp in enumerate(row["doc_spans"]):
                    if sp["doc_uid"] not in self._uids:
                        raise ValueError(f"microbatch rows[{r}] doc_spans[{s}]: field 'doc_uid' names a document "
                                         f"'{sp['doc_uid']}' that was not written")
        self._f.write(json.dumps(record, separators=(",", ":")) + "\n")
        return record

    def header(self, *, system: str, component: str, version: Optional[str] = None, policy: Mapping[str, Any],
               special_ids: Optional[Mapping[str, Optional[int]]] = None, dp_world_size: int = 1,
               grad_accum_steps: int = 1, extra: Optional[dict[str, Any]] = None) -> HeaderRecord:
        """Writes ``header_record(...)`` with these fields."""
        return self.write(header_record(system=system, component=component, version=version, policy=policy,
                                        special_ids=special_ids, dp_world_size=dp_world_size,
                                        grad_accum_steps=grad_accum_steps, extra=extra))

    def document(self, doc_uid: str, tokens: IntsLike, supervised: Optional[IntsLike] = None) -> DocumentRecord:
        """Writes ``document_record(doc_uid, tokens, supervised)``."""
        return self.write(document_record(doc_uid, tokens, supervised))

    def documents(self, documents: Iterable[Any]) -> None:
        """Document records for Document objects (see spans.py) or (uid, tokens[, supervised]) tuples."""
        for d in documents:
            if hasattr(d, "uid"):
                self.document(d.uid, d.tokens, d.supervised)
            else:
                self.document(*d)

    def microbatch(self, rows: Iterable[Mapping[str, Any]], *, step: int = 0, micro_step: int = 0, rank: int = 0,
                   producer: Optional[Mapping[str, Any]] = None, flattened: Optional[bool] = None) -> MicrobatchRecord:
        """Writes ``microbatch_record(rows, ...)`` with these fields."""
        return self.write(microbatch_record(rows, step=step, micro_step=micro_step, rank=rank, producer=producer,
                                            flattened=flattened))

    def step(self, step: int, *, rank: Optional[int] = None, **totals: Any) -> StepRecord:
        """Writes ``step_record(step, rank=rank, **totals)``: the producer's per-step totals are open-ended
        (``num_items_in_batch``, the logged loss, ...; DESIGN §5)."""
        return self.write(step_record(step, rank=rank, **totals))
