"""Converters from what real packers return to `microbatch` records of the packed-batch format.

Each converter takes
- the system's NATIVE output (a dict of lists of ints, as realpack stores them, or of tensors/arrays: anything
  with ``.tolist()``),
- the source documents as the producer tokenized them, delimiters included, in the order the producer consumed
  them (Document objects, dicts or token lists; or a DocumentSequence shared by successive calls),
- what the tensors cannot say: step, micro_step, rank, and for stream producers where a window starts,
and returns one validated ``microbatch`` record whose rows carry the producer's own encodings unchanged and
``doc_spans`` derived from the documents (token runs matched against the documents in order; for Megatron and
llm.c, windows of the concatenated stream).

Every converter validates its input and raises ValueError naming the field and the index of the first
inconsistency (a missing field, a wrong shape or type, per-token fields of different lengths, tokens that are
not the given documents in the given order). Values that are merely wrong under a policy (a label, a position,
a cu_seqlens entry) are passed through untouched: judging them is `packoracle verify`'s job.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Optional, Union

from .format import MicrobatchRecord, Span, int_list, microbatch_record, tolist
from .spans import Documents, DocumentSequence, Overflow, match_sequential, sequence_of, stream_spans

Batch = Mapping[str, Any]
"""A batch as a system returns it: field name → tensor, array or (nested) list of ints."""


# ---- input helpers ------------------------------------------------------------------------------------------

def _field(batch: Any, name: str, system: str, *aliases: str, required: bool = True) -> Any:
    if not hasattr(batch, "get"):
        raise ValueError(f"{system}: the batch must be a dict of fields, got {type(batch).__name__}")
    for key in (name,) + aliases:
        if key in batch and batch[key] is not None:
            return tolist(batch[key])
    if required:
        raise ValueError(f"{system}: field '{name}' is missing")
    return None


def _rows2d(value: object, system: str, field: str, *, allow_bool: bool = False) -> list[list[int]]:
    """A [B, T] field (or a single [T] row) as a list of int rows."""
    if not isinstance(value, list):
        raise ValueError(f"{system}: field '{field}' must be a list, got {type(value).__name__}")
    if value and not isinstance(value[0], list):
        value = [value]
    out = []
    for b, row in enumerate(value):
        if not isinstance(row, list):
            raise ValueError(f"{system}: field '{field}[{b}]' must be a row of integers")
        out.append(int_list(row, system, f"{field}[{b}]", allow_bool=allow_bool))
    return out


def _same_shape(system: str, reference_field: str, reference: Sequence[Sequence[int]], field: str,
                rows: Sequence[Sequence[int]]) -> None:
    if len(rows) != len(reference):
        raise ValueError(f"{system}: field '{field}' has {len(rows)} rows, {reference_field} has {len(reference)}")
    for b, (a, r) in enumerate(zip(rows, reference)):
        if len(a) != len(r):
            raise ValueError(f"{system}: field '{field}[{b}]' has {len(a)} entries, {reference_field}[{b}] has {len(r)}")


def _flat_ints(value: object, system: str, field: str) -> list[int]:
    value = tolist(value)
    if isinstance(value, list) and value and isinstance(value[0], list):
        if len(value) != 1:
            raise ValueError(f"{system}: field '{field}' has {len(value)} rows, expected one")
        value = value[0]
    return int_list(value, system, field)


def doc_ids_from_dense_mask(mask: Sequence[Any], *, allowed: Callable[[Any], bool], pad_slots: Sequence[bool],
                            where: str, field: str = "attention_mask") -> list[int]:
    """Per-token segment ids (-1 for padding) from a dense [L][L] mask, `allowed(v)` telling whether entry v lets
    the query attend the key. The mask must be block-causal on non-padding queries (each query sees a
    contiguous run of keys ending at itself, and a run changes only where a new one starts): anything else
    cannot be written as doc_ids and raises ValueError naming the query."""
    n = len(mask)
    ids, current, start_of = [], -1, None
    for i in range(n):
        row = mask[i]
        if not isinstance(row, list) or len(row) != n:
            raise ValueError(f"{where}: field '{field}[{i}]' must have {n} entries (a square mask)")
        if pad_slots[i]:
            ids.append(-1)
            continue
        visible = [j for j in range(n) if allowed(row[j])]
        if not visible or visible[-1] != i or visible != list(range(visible[0], i + 1)):
            raise ValueError(f"{where}: field '{field}[{i}]' is not block-causal (query {i} sees keys "
                             f"{visible}): it cannot be written as doc_ids")
        start = visible[0]
        if start != start_of:
            if start != i:
                raise ValueError(f"{where}: field '{field}[{i}]' is not block-causal (query {i} sees from key "
                                 f"{start}, where no segment starts)")
            current += 1
            start_of = start
        ids.append(current)
    return ids


def _mask_resets(doc_ids: Sequence[int]) -> bool:
    real = [d for d in doc_ids if d >= 0]
    return len(set(real)) > 1


# ---- huggingface/transformers DataCollatorWithFlattening ----------------------------------------------------

def from_hf_flatten(batch: Batch, documents: Documents, *, step: int = 0, micro_step: int = 0, rank: int = 0,
                    producer: Optional[Mapping[str, Any]] = None) -> MicrobatchRecord:
    """HF `DataCollatorWithFlattening` output (input_ids, labels, position_ids, optional cu_seq_lens_q/k
    (or the cu_seqlens alias of later versions), optional seq_idx): one flattened row [1, T] of the features'
    input_ids in order. `documents` are the features' input_ids, in the order given to the collator."""
    system = "DataCollatorWithFlattening"
    ids = _rows2d(_field(batch, "input_ids", system), system, "input_ids")
    if len(ids) != 1:
        raise ValueError(f"{system}: field 'input_ids' has {len(ids)} rows, a flattened batch has one")
    labels = _rows2d(_field(batch, "labels", system), system, "labels")
    _same_shape(system, "input_ids", ids, "labels", labels)
    row: dict[str, Any] = {"input_ids": ids[0], "labels": labels[0]}
    pos = _field(batch, "position_ids", system, required=False)
    if pos is not None:
        pos = _rows2d(pos, system, "position_ids")
        _same_shape(system, "input_ids", ids, "position_ids", pos)
        row["position_ids"] = pos[0]
    cu_q = _field(batch, "cu_seq_lens_q", system, "cu_seqlens", required=False)
    if cu_q is not None:
        cu_q = _flat_ints(cu_q, system, "cu_seq_lens_q")
        cu_k = _field(batch, "cu_seq_lens_k", system, required=False)
        if cu_k is not None:
            cu_k = _flat_ints(cu_k, system, "cu_seq_lens_k")
            for i, (a, b) in enumerate(zip(cu_q, cu_k)):
                if a != b:
                    raise ValueError(f"{system}: field 'cu_seq_lens_k[{i}]' is {b} but cu_seq_lens_q[{i}] is {a} "
                                     "(self-attention: they must be equal)")
            if len(cu_k) != len(cu_q):
                raise ValueError(f"{system}: field 'cu_seq_lens_k' has {len(cu_k)} entries, cu_seq_lens_q "
                                 f"{len(cu_q)}")
        row["cu_seqlens"] = cu_q
    seq_idx = _field(batch, "seq_idx", system, required=False)
    if seq_idx is not None:
        seq_idx = _rows2d(seq_idx, system, "seq_idx")
        _same_shape(system, "input_ids", ids, "seq_idx", seq_idx)
        row["doc_ids"] = seq_idx[0]
    seq = sequence_of(documents)
    row["doc_spans"] = match_sequential(ids[0], seq, where=f"{system} row 0", pad_id=None, pad_from=len(ids[0]))
    return microbatch_record([row], step=step, micro_step=micro_step, rank=rank, producer=producer,
                             flattened=True)


# ---- huggingface/trl DataCollatorForLanguageModeling --------------------------------------------------------

def from_trl_padding_free(batch: Batch, documents: Documents, *, pad_id: Optional[int] = None,
                          overflow: Overflow = "whole", step: int = 0, micro_step: int = 0, rank: int = 0,
                          producer: Optional[Mapping[str, Any]] = None) -> MicrobatchRecord:
    """TRL `DataCollatorForLanguageModeling(padding_free=True)` output (input_ids, labels, position_ids; [1, T]):
    the examples concatenated into one row, right-padded with `pad_id` under pad_to_multiple_of. `documents`
    are the examples in the order given to the collator; for a BFD-packed row, its documents in row order
    (overflow="truncate" when pack_dataset truncated the last one, "split" for bfd_split pieces)."""
    system = "trl DataCollatorForLanguageModeling(padding_free=True)"
    ids = _rows2d(_field(batch, "input_ids", system), system, "input_ids")
    if len(ids) != 1:
        raise ValueError(f"{system}: field 'input_ids' has {len(ids)} rows, a padding-free batch has one")
    labels = _rows2d(_field(batch, "labels", system), system, "labels")
    _same_shape(system, "input_ids", ids, "labels", labels)
    pos = _rows2d(_field(batch, "position_ids", system), system, "position_ids")
    _same_shape(system, "input_ids", ids, "position_ids", pos)
    row: dict[str, Any] = {"input_ids": ids[0], "labels": labels[0], "position_ids": pos[0]}
    mask = _field(batch, "attention_mask", system, required=False)  # TRL <= 0.23.0 without seq_lengths
    if mask is not None:
        mask = _rows2d(mask, system, "attention_mask", allow_bool=True)
        _same_shape(system, "input_ids", ids, "attention_mask", mask)
        row["attention_mask"] = mask[0]
    seq = sequence_of(documents)
    row["doc_spans"] = match_sequential(ids[0], seq, where=f"{system} row 0", pad_id=pad_id, overflow=overflow,
                                        pad_from=None if pad_id is not None else len(ids[0]))
    return microbatch_record([row], step=step, micro_step=micro_step, rank=rank, producer=producer,
                             flattened=True)


def from_hf_padded(batch: Batch, documents: Documents, *, pad_id: Optional[int], step: int = 0, micro_step: int = 0,
                   rank: int = 0, producer: Optional[Mapping[str, Any]] = None) -> MicrobatchRecord:
    """A padded (not flattened) HF batch: `DataCollatorForLanguageModeling(mlm=False)` of transformers, or TRL's
    collator with padding_free=False (input_ids, labels, attention_mask; [B, T], right padding with `pad_id`).
    Each row holds whole documents in order (one per row for ordinary batches)."""
    system = "DataCollatorForLanguageModeling (padded)"
    ids = _rows2d(_field(batch, "input_ids", system), system, "input_ids")
    labels = _rows2d(_field(batch, "labels", system), system, "labels")
    _same_shape(system, "input_ids", ids, "labels", labels)
    mask = _field(batch, "attention_mask", system, required=False)
    if mask is not None:
        mask = _rows2d(mask, system, "attention_mask", allow_bool=True)
        _same_shape(system, "input_ids", ids, "attention_mask", mask)
    pos = _field(batch, "position_ids", system, required=False)
    if pos is not None:
        pos = _rows2d(pos, system, "position_ids")
        _same_shape(system, "input_ids", ids, "position_ids", pos)
    seq = sequence_of(documents)
    rows = []
    for b in range(len(ids)):
        row: dict[str, Any] = {"input_ids": ids[b], "labels": labels[b]}
        if mask is not None:
            row["attention_mask"] = mask[b]
        if pos is not None:
            row["position_ids"] = pos[b]
        row["doc_spans"] = match_sequential(ids[b], seq, where=f"{system} row {b}", pad_id=pad_id)
        if not row["doc_spans"]:
            raise ValueError(f"{system}: field 'input_ids[{b}]' holds no document (only padding)")
        rows.append(row)
    return microbatch_record(rows, step=step, micro_step=micro_step, rank=rank, producer=producer)


# ---- pytorch/torchtune PackedDataset ------------------------------------------------------------------------

def from_torchtune_packed(packs: Union[Batch, Sequence[Batch]], documents: Documents, *, pad_id: int = 0,
                          split_across_pack: bool = False, step: int = 0, micro_step: int = 0, rank: int = 0,
                          producer: Optional[Mapping[str, Any]] = None) -> MicrobatchRecord:
    """torchtune `PackedDataset` packs (tokens, labels, input_pos, seq_lens: one pack, a list of packs in dataset
    order, or a stacked dict of [B, L] tensors), or `padded_collate_packed`'s batch (tokens, labels, input_pos
    and a dense block-causal `mask` [B, L, L], True = may attend, turned into doc_ids). `pad_id` is the
    PackedDataset's padding_idx; `documents` are the samples' tokens in dataset order."""
    system = "torchtune PackedDataset"
    packs = tolist(packs)
    if isinstance(packs, dict):
        packs = _unstack(packs, system)
    if not isinstance(packs, list) or not packs:
        raise ValueError(f"{system}: expected a pack, a list of packs or a stacked batch")
    seq = sequence_of(documents)
    rows = []
    for b, pack in enumerate(packs):
        where = f"{system} pack {b}"
        tokens = int_list(_field(pack, "tokens", where), where, "tokens")
        labels = int_list(_field(pack, "labels", where), where, "labels")
        pos = int_list(_field(pack, "input_pos", where), where, "input_pos")
        for field, values in (("labels", labels), ("input_pos", pos)):
            if len(values) != len(tokens):
                raise ValueError(f"{where}: field '{field}' has {len(values)} entries, tokens has {len(tokens)}")
        row: dict[str, Any] = {"input_ids": tokens, "labels": labels, "position_ids": pos}
        seq_lens = _field(pack, "seq_lens", where, required=False)
        if seq_lens is not None:
            row["seq_lens"] = int_list(seq_lens, where, "seq_lens")
        row["doc_spans"] = match_sequential(tokens, seq, where=where, pad_id=pad_id,
                                            overflow="split" if split_across_pack else "whole")
        mask = _field(pack, "mask", where, required=False)
        if mask is not None:
            pad = _pad_slots(row["doc_spans"], len(tokens))
            row["doc_ids"] = doc_ids_from_dense_mask(mask, allowed=bool, pad_slots=pad, where=where, field="mask")
        rows.append(row)
    return microbatch_record(rows, step=step, micro_step=micro_step, rank=rank, producer=producer)


def _unstack(batch: dict[str, Any], system: str) -> list[dict[str, Any]]:
    """A dict of stacked [B, ...] fields (or one pack of 1-D fields) as a list of per-row dicts."""
    tokens = batch.get("tokens")
    if tokens is None:
        raise ValueError(f"{system}: field 'tokens' is missing")
    if not tokens or not isinstance(tokens[0], list):
        return [batch]
    rows = []
    for b in range(len(tokens)):
        row: dict[str, Any] = {}
        for key, value in batch.items():
            if isinstance(value, list) and len(value) == len(tokens) and (not value or isinstance(value[0], list)):
                row[key] = value[b]
            elif key == "seq_lens":
                raise ValueError(f"{system}: field 'seq_lens' must have one list per row")
        rows.append(row)
    return rows


def _pad_slots(spans: Sequence[Span], n: int) -> list[bool]:
    pad = [True] * n
    for s in spans:
        for i in range(s["start"], s["start"] + s["length"]):
            pad[i] = False
    return pad


# ---- stream producers: Megatron GPTDataset, llm.c, TRL ConstantLengthDataset --------------------------------

WindowStart = Union[int, tuple[int, int], None]
"""Where a stream window starts: a stream offset, (document index, offset in it), or None (the cursor, else the
unique match)."""


def _place_window(seq: DocumentSequence, tokens: Sequence[int], *, where: str, offset: WindowStart,
                  pad_id: Optional[int], allow_padding: bool) -> tuple[int, list[tuple[int, int]]]:
    """The stream offset of a row: `offset` (an int, or (document index, offset in it)), else the cursor, else the
    unique match. Checks every token: the stream's, then padding (pad_id) past the stream's end."""
    stream, stream_where = seq.stream()
    if isinstance(offset, (tuple, list)):
        d, k = offset
        if not 0 <= d < len(seq.documents) or not 0 <= k <= len(seq.documents[d]):
            raise ValueError(f"{where}: window start (document {d}, offset {k}) is outside the documents")
        offset = sum(len(doc) for doc in seq.documents[:d]) + k
    n = len(tokens)

    def fits(o: int) -> bool:
        inside = max(0, min(n, len(stream) - o))
        if o < 0 or o > len(stream) or stream[o:o + inside] != tokens[:inside]:
            return False
        if inside < n and not (allow_padding and all(t == pad_id for t in tokens[inside:])):
            return False
        return inside > 0

    if offset is not None:
        if not fits(offset):
            inside = max(0, min(n, len(stream) - offset))
            for i in range(n):
                want = stream[offset + i] if i < inside else pad_id
                if tokens[i] != want:
                    what = f"stream token {offset + i}" if i < inside else "padding"
                    raise ValueError(f"{where}: field 'input_ids[{i}]' is {tokens[i]}, but the window at stream "
                                     f"offset {offset} has {want} there ({what})")
            raise ValueError(f"{where}: the window at stream offset {offset} is outside the stream")
        return offset, stream_where
    hint = getattr(seq, "stream_pos", None)
    if hint is not None and fits(hint):
        return hint, stream_where
    hits = [o for o in range(len(stream)) if fits(o)]
    if len(hits) == 1:
        return hits[0], stream_where
    if not hits:
        raise ValueError(f"{where}: field 'input_ids' ({tokens[:12]}) is no window of the concatenated documents"
                         f"{' followed by padding ' + str(pad_id) if allow_padding else ''}: give the documents "
                         "in stream order")
    raise ValueError(f"{where}: field 'input_ids' matches the stream at offsets {hits[:6]}: give the window's "
                     "start")


def from_megatron_gpt(samples: Union[Batch, Sequence[Batch]], documents: Documents, *,
                      starts: Optional[Sequence[WindowStart]] = None, pad_id: int = 0,
                      attention_mask: Optional[Literal["auto", "doc_ids"]] = "auto", step: int = 0,
                      micro_step: int = 0, rank: int = 0,
                      producer: Optional[Mapping[str, Any]] = None) -> MicrobatchRecord:
    """Megatron `GPTDataset.__getitem__` samples (tokens, labels, loss_mask, position_ids, optional cu_seqlens
    (trailing repeats kept), optional attention_mask [1, L, L] bool, True = masked), one sample or a list, as
    rows of one micro-batch. `documents` are the dataset's documents in document_index order (EOD included
    when appended), so that the stream is their concatenation; `starts[b]` is where sample b starts: a stream
    offset or (position in documents, offset): sample_index[shuffle_index[i]]. Without starts, the cursor
    (the previous window's start + L) or the unique match is used. `pad_id`: what padding holds in `tokens`
    (0 after GPTDataset's rewrite). attention_mask: "doc_ids" writes the dense mask as doc_ids, "auto" only
    when it isolates documents (a plain causal mask says nothing about segments), None never."""
    system = "Megatron GPTDataset"
    samples = tolist(samples)
    if isinstance(samples, dict):
        samples = _unstack(samples, system)
    if not isinstance(samples, list) or not samples:
        raise ValueError(f"{system}: expected a sample or a list of samples")
    if starts is not None and len(starts) != len(samples):
        raise ValueError(f"{system}: {len(starts)} starts given for {len(samples)} samples")
    if attention_mask not in ("auto", "doc_ids", None):
        raise ValueError(f"{system}: attention_mask must be 'auto', 'doc_ids' or None, got {attention_mask!r}")
    seq = sequence_of(documents)
    rows = []
    for b, sample in enumerate(samples):
        where = f"{system} sample {b}"
        tokens = int_list(_field(sample, "tokens", where), where, "tokens")
        labels = int_list(_field(sample, "labels", where), where, "labels")
        loss_mask = tolist(_field(sample, "loss_mask", where))
        pos = _field(sample, "position_ids", where, required=False)
        row: dict[str, Any] = {"input_ids": tokens, "labels": labels, "loss_mask": loss_mask}
        if pos is not None:
            row["position_ids"] = int_list(pos, where, "position_ids")
        for field in ("labels", "loss_mask", "position_ids"):
            if row.get(field) is not None and len(row[field]) != len(tokens):
                raise ValueError(f"{where}: field '{field}' has {len(row[field])} entries, tokens has {len(tokens)}")
        cu = _field(sample, "cu_seqlens", where, required=False)
        if cu is not None:
            row["cu_seqlens"] = _flat_ints(cu, where, "cu_seqlens")
        offset, stream_where = _place_window(seq, tokens, where=where, offset=None if starts is None else starts[b],
                                             pad_id=pad_id, allow_padding=True)
        seq.stream_pos = offset + len(tokens)
        row["doc_spans"] = stream_spans(stream_where, offset, len(tokens), seq.documents, where=where)
        mask = _field(sample, "attention_mask", where, required=False)
        if mask is not None and attention_mask is not None:
            mask = _square(mask, where, len(tokens))
            ids = doc_ids_from_dense_mask(mask, allowed=lambda v: not v, pad_slots=_pad_slots(row["doc_spans"], len(tokens)),
                                          where=where)
            if attention_mask == "doc_ids" or _mask_resets(ids):
                row["doc_ids"] = ids
        rows.append(row)
    return microbatch_record(rows, step=step, micro_step=micro_step, rank=rank, producer=producer)


def _square(mask: object, where: str, n: int) -> list[Any]:
    """[1, L, L] / [1, 1, L, L] / [L, L] as [L][L]."""
    while isinstance(mask, list) and len(mask) == 1 and isinstance(mask[0], list) and mask[0] and \
            isinstance(mask[0][0], list):
        mask = mask[0]
    if not isinstance(mask, list) or len(mask) != n:
        raise ValueError(f"{where}: field 'attention_mask' must be [L, L] with L = {n}")
    return mask


def from_llmc(batch: Batch, documents: Documents, *, B: int, T: int, stream_offset: WindowStart = None,
              step: int = 0, micro_step: int = 0, rank: int = 0,
              producer: Optional[Mapping[str, Any]] = None) -> MicrobatchRecord:
    """llm.c `DataLoader` batch (inputs, targets: B*T tokens each, flat or [B, T]): rows b of T tokens, the
    targets pre-shifted over the whole buffer. `documents` in shard order, each with its EOT as
    dev/data/fineweb.py prepends it; `stream_offset`: the shard position of inputs[0]
    (idx*P*B*T + rank*B*T), else the cursor or the unique match."""
    system = "llm.c DataLoader"
    if not (isinstance(B, int) and B > 0 and isinstance(T, int) and T > 0):
        raise ValueError(f"{system}: B and T must be positive integers, got B={B!r}, T={T!r}")
    inputs = _flatten_bt(_field(batch, "inputs", system), system, "inputs", B, T)
    targets = _flatten_bt(_field(batch, "targets", system), system, "targets", B, T)
    seq = sequence_of(documents)
    offset, stream_where = _place_window(seq, inputs, where=system, offset=stream_offset, pad_id=None,
                                         allow_padding=False)
    seq.stream_pos = offset + B * T
    rows = []
    for b in range(B):
        row_inputs = inputs[b * T:(b + 1) * T]
        rows.append({"input_ids": row_inputs, "labels": targets[b * T:(b + 1) * T],
                     "doc_spans": stream_spans(stream_where, offset + b * T, T, seq.documents, where=system)})
    return microbatch_record(rows, step=step, micro_step=micro_step, rank=rank, producer=producer)


def _flatten_bt(value: object, system: str, field: str, B: int, T: int) -> list[int]:
    if isinstance(value, list) and value and isinstance(value[0], list):
        if len(value) != B:
            raise ValueError(f"{system}: field '{field}' has {len(value)} rows, B is {B}")
        flat = []
        for b, row in enumerate(value):
            if len(row) != T:
                raise ValueError(f"{system}: field '{field}[{b}]' has {len(row)} entries, T is {T}")
            flat.extend(row)
        value = flat
    value = int_list(value, system, field)
    if len(value) != B * T:
        raise ValueError(f"{system}: field '{field}' has {len(value)} entries, B*T is {B * T}")
    return value


def from_trl_constant_length(examples: Union[Batch, Sequence[Batch]], documents: Documents, *,
                             pad_id: Optional[int] = None, step: int = 0, micro_step: int = 0, rank: int = 0,
                             producer: Optional[Mapping[str, Any]] = None) -> MicrobatchRecord:
    """TRL `ConstantLengthDataset` examples (input_ids, labels: seq_length tokens each, in iteration order): the
    documents, each followed by the concat token when append_concat_token, concatenated and cut every
    seq_length tokens. One row per example, one micro-batch. `documents` include the concat token."""
    system = "trl ConstantLengthDataset"
    examples = tolist(examples)
    if isinstance(examples, dict):
        examples = examples.get("examples", [examples])
    if not isinstance(examples, list) or not examples:
        raise ValueError(f"{system}: expected a list of examples")
    seq = sequence_of(documents)
    rows = []
    for b, ex in enumerate(examples):
        where = f"{system} example {b}"
        ids = int_list(_field(ex, "input_ids", where), where, "input_ids")
        labels = int_list(_field(ex, "labels", where), where, "labels")
        if len(labels) != len(ids):
            raise ValueError(f"{where}: field 'labels' has {len(labels)} entries, input_ids has {len(ids)}")
        offset, stream_where = _place_window(seq, ids, where=where, offset=None, pad_id=pad_id,
                                             allow_padding=pad_id is not None)
        seq.stream_pos = offset + len(ids)
        rows.append({"input_ids": ids, "labels": labels,
                     "doc_spans": stream_spans(stream_where, offset, len(ids), seq.documents, where=where)})
    return microbatch_record(rows, step=step, micro_step=micro_step, rank=rank, producer=producer)
