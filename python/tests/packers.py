"""Python packers written the way users write them, for the tests of packoracle.fuzz, the pytest plugin and the
Hypothesis strategies.

A user's packer is a plain function over token lists that returns a dict of numpy arrays, rows × slots (or one
flattened row), in the field names the trainer reads:

    pack_reference(token_lists, row_length)    # the `reference` preset: pre-shifted labels, padded rows
    pack_hf_flatten(token_lists)               # the `hf-flatten` preset: one flattened row per collator call

packoracle.fuzz takes a `packer(request)` callable (the exec request of DESIGN §6 as a dict); the adapters
`as_packer(fn)` and `as_budget_packer(fn)` make one from such a function, the way a user would wrap their own
code. packoracle derives the doc_spans from the request's documents, so the functions never name documents.

Then the buggy variants, each the way a real bug did it (see each docstring), and the loss reducers
(`reduce_token_mean`, correct; `reduce_mean_of_means`, HF before 4.46).
"""

from __future__ import annotations

import json

import numpy as np

import packoracle

IGNORE = -100


class DocumentTooLong(ValueError):
    """What a user's packer raises for a document that does not fit in a row (it never splits one)."""


# ---- correct packers ------------------------------------------------------------------------------------------

def greedy_rows(token_lists, row_length, *, strict_fit=False, first_fit=False):
    """Indices of the documents of each row: in order, a document goes into the current row if it fits in the
    space left, else a new row starts (``first_fit``: into the first row with room). Empty documents are
    skipped. Raises DocumentTooLong for a document longer than the row (``strict_fit``: also for one exactly as
    long: the off-by-one of a buggy packer)."""
    if first_fit:
        return _first_fit_rows(token_lists, row_length)
    rows, current, used = [], [], 0
    for k, tokens in enumerate(token_lists):
        n = len(tokens)
        if n == 0:
            continue
        if n > row_length or (strict_fit and n >= row_length):
            raise DocumentTooLong(f"document {k} has {n} tokens, more than the row length {row_length}")
        if used + n > row_length:
            rows.append(current)
            current, used = [], 0
        current.append(k)
        used += n
    if current:
        rows.append(current)
    return rows


def _first_fit_rows(token_lists, row_length):
    rows, used = [], []
    for k, tokens in enumerate(token_lists):
        n = len(tokens)
        if n == 0:
            continue
        if n > row_length:
            raise DocumentTooLong(f"document {k} has {n} tokens, more than the row length {row_length}")
        r = next((r for r, u in enumerate(used) if u + n <= row_length), len(rows))
        if r == len(rows):
            rows.append([])
            used.append(0)
        rows[r].append(k)
        used[r] += n
    return rows


def _shifted_labels(tokens, supervised, ignore_index):
    """Pre-shifted labels of one document: label i is token i + 1 (if supervised), the last one ignored."""
    tokens = np.asarray(tokens, dtype=np.int64)
    labels = np.full(len(tokens), ignore_index, dtype=np.int64)
    labels[:-1] = tokens[1:]
    if supervised is not None:
        sup = np.asarray(supervised, dtype=bool)
        labels[:-1][~sup[1:]] = ignore_index
    return labels


def pack_reference(token_lists, row_length, *, supervised=None, pad_id=0, ignore_index=IGNORE, strict_fit=False,
                   shift="document", positions="document", first_fit=False):
    """Packs documents into rows of ``row_length`` slots for the ``reference`` preset.

    Greedy in document order (a document never split: one that does not fit in the space left starts a new
    row), rows right-padded with ``pad_id``. Returns {"input_ids", "labels", "position_ids", "doc_ids"}, int64
    arrays of shape rows × row_length: labels pre-shifted per document (label i = token i + 1 of the same
    document; the last token of each document and the padding get ``ignore_index``; so do targets whose
    ``supervised`` flag is 0), positions restarting at 0 for each document, doc_ids numbering the documents of
    the row (-1 on padding). Raises DocumentTooLong for a document longer than the row.

    ``strict_fit``, ``shift="row"`` and ``positions="row"`` are the bugs of the buggy variants below."""
    rows = greedy_rows(token_lists, row_length, strict_fit=strict_fit, first_fit=first_fit)
    shape = (len(rows), row_length)
    input_ids = np.full(shape, pad_id, dtype=np.int64)
    labels = np.full(shape, ignore_index, dtype=np.int64)
    position_ids = np.zeros(shape, dtype=np.int64)
    doc_ids = np.full(shape, -1, dtype=np.int64)
    for r, members in enumerate(rows):
        at = 0
        for j, k in enumerate(members):
            tokens = np.asarray(token_lists[k], dtype=np.int64)
            n = len(tokens)
            input_ids[r, at:at + n] = tokens
            labels[r, at:at + n] = _shifted_labels(tokens, supervised[k] if supervised is not None else None,
                                                   ignore_index)
            position_ids[r, at:at + n] = np.arange(n)
            doc_ids[r, at:at + n] = j
            at += n
        if shift == "row":
            # torchtune before PR #2613: unshifted labels packed, then the whole row shifted by one.
            unshifted = np.full(row_length, ignore_index, dtype=np.int64)
            unshifted[:at] = input_ids[r, :at]
            if supervised is not None:
                sup = np.concatenate([np.asarray(supervised[k], dtype=bool) for k in members])
                unshifted[:at][~sup] = ignore_index
            labels[r] = np.concatenate([unshifted[1:], [ignore_index]])
        if positions == "row":
            # LlamaFactory before PR #7318: position_ids = arange over the packed sequence.
            position_ids[r] = np.arange(row_length)
    return {"input_ids": input_ids, "labels": labels, "position_ids": position_ids, "doc_ids": doc_ids}


def pack_hf_flatten(token_lists, *, supervised=None, separator_id=IGNORE, ignore_index=IGNORE):
    """transformers' DataCollatorWithFlattening(return_flash_attn_kwargs=True) on one batch of features: ONE
    flattened row, shape 1 × total tokens: input_ids concatenated, labels aligned with the tokens
    (``separator_id`` at each document's first token, unsupervised tokens ``ignore_index``; the loss shifts
    inside), position_ids restarting per document, cu_seq_lens_q / cu_seq_lens_k (int32) and max_length_q /
    max_length_k as the flash-attention kwargs."""
    input_ids, labels, position_ids, cu = [], [], [], [0]
    for k, tokens in enumerate(token_lists):
        tokens = [int(t) for t in tokens]
        sup = supervised[k] if supervised is not None else [1] * len(tokens)
        feature_labels = [t if m else ignore_index for t, m in zip(tokens, sup)]
        input_ids += tokens
        labels += ([separator_id] + feature_labels[1:]) if tokens else []
        position_ids += list(range(len(tokens)))
        cu.append(cu[-1] + len(tokens))
    longest = max((b - a for a, b in zip(cu, cu[1:])), default=0)
    cu_seqlens = np.asarray(cu, dtype=np.int32)
    return {"input_ids": np.asarray([input_ids], dtype=np.int64), "labels": np.asarray([labels], dtype=np.int64),
            "position_ids": np.asarray([position_ids], dtype=np.int64), "cu_seq_lens_q": cu_seqlens,
            "cu_seq_lens_k": cu_seqlens.copy(), "max_length_q": longest, "max_length_k": longest}


# ---- adapters: a user's function as the packer(request) callable packoracle.fuzz takes ----------------------

def _tokens(request):
    return [d["tokens"] for d in request["documents"]]


def _supervised(request):
    return [d.get("supervised") or [1] * len(d["tokens"]) for d in request["documents"]]


def as_packer(fn, **kwargs):
    """``fn(token_lists, row_length, supervised=..., **kwargs)`` (a batch dict) as ``packer(request)``: a
    DocumentTooLong becomes packoracle.Refuse (right exactly when the policy says overflow: error)."""
    def packer(request):
        try:
            return fn(_tokens(request), request["row_length"], supervised=_supervised(request), **kwargs)
        except DocumentTooLong as e:
            raise packoracle.Refuse(str(e)) from e
    packer.__name__ = packer.__qualname__ = getattr(fn, "__name__", "packer")
    return packer


def as_budget_packer(fn, **kwargs):
    """``fn(token_lists, supervised=...)`` (one flattened row per call, like a collator) as ``packer(request)``,
    fed by a token-budget sampler: documents in order while they fit in ``row_length`` tokens, one call (one
    micro-batch) per group; a document longer than the budget is refused."""
    def packer(request):
        tokens, sup = _tokens(request), _supervised(request)
        try:
            groups = greedy_rows(tokens, request["row_length"])
        except DocumentTooLong as e:
            raise packoracle.Refuse(str(e)) from e
        return [fn([tokens[k] for k in g], supervised=[sup[k] for k in g], **kwargs) for g in groups]
    packer.__name__ = packer.__qualname__ = getattr(fn, "__name__", "packer")
    return packer


# ---- buggy packers, each the way a real bug did it -----------------------------------------------------------

def pack_row_shifted(token_lists, row_length, *, supervised=None):
    """BUG (torchtune before PR #2613, "Incorrect Labels Shift for Packed Data"): unshifted labels packed, then
    the whole packed row shifted by one, so each document's last token targets the next document's first."""
    return pack_reference(token_lists, row_length, supervised=supervised, shift="row")


def pack_positions_not_reset(token_lists, row_length, *, supervised=None):
    """BUG (LlamaFactory before PR #7318): position_ids = arange(row_length) over the packed row instead of
    restarting at each document."""
    return pack_reference(token_lists, row_length, supervised=supervised, positions="row")


def pack_stack_rows(token_lists, row_length, *, supervised=None):
    """BUG: builds the rows with np.stack, which raises ("need at least one array to stack") on a request with no
    non-empty document; otherwise correct."""
    batch = pack_reference(token_lists, row_length, supervised=supervised)
    rows = [dict(zip(batch, values)) for values in zip(*batch.values())]
    return {name: np.stack([row[name] for row in rows]) for name in batch}


def pack_labels_cut(token_lists, row_length, *, supervised=None):
    """BUG (garbage): the collator "shifts" the already shifted labels by dropping their last column, so labels
    has row_length - 1 slots where input_ids has row_length."""
    batch = pack_reference(token_lists, row_length, supervised=supervised)
    batch["labels"] = batch["labels"][:, :-1]
    return batch


def pack_json_string(token_lists, row_length, *, supervised=None):
    """BUG (garbage): returns the batch serialized as a JSON string (the value meant for a log file)."""
    batch = pack_reference(token_lists, row_length, supervised=supervised)
    return json.dumps({k: v.tolist() for k, v in batch.items()})


def pack_refuse_exact_fit(token_lists, row_length, *, supervised=None):
    """BUG (refusal): refuses a document exactly as long as the row (``>=`` for ``>``), which the policy accepts."""
    return pack_reference(token_lists, row_length, supervised=supervised, strict_fit=True)


# ---- loss reducers (packoracle.fuzz(..., reducer=...)) -------------------------------------------------------

def _counts_and_sums(request):
    """Per micro-batch: (number of valid targets, sum of their losses), reading pre-shifted labels (a target at
    slot i when labels[i] != ignore_index) or aligned ones (slot i predicts labels[i + 1])."""
    policy = request["policy"]
    ignore, aligned = policy["ignore_index"], policy["label_alignment"] == "aligned"
    out = []
    for mb, losses in zip(request["microbatches"], request["slot_losses"]):
        count, total = 0, 0.0
        for row, row_losses in zip(mb["rows"], losses):
            labels = np.asarray(row["labels"])
            valid = labels != ignore
            if aligned:
                valid = np.concatenate([valid[1:], [False]])
            count += int(valid.sum())
            total += float(np.asarray(row_losses, dtype=float)[valid].sum())
        out.append((count, total))
    return out


def reduce_token_mean(request):
    """The Trainer's loss since transformers 4.46 (num_items_in_batch): every micro-batch divides its loss sum
    by the step's count of valid targets over all micro-batches and ranks, so the losses add up to the global
    token mean."""
    per = _counts_and_sums(request)
    total = sum(c for c, _ in per)
    return [{"loss_sum": s, "denominator": total, "denominator_scope": "global", "loss": s / total if total else 0.0}
            for _, s in per]


def reduce_mean_of_means(request):
    """BUG (transformers before 4.46, issue #24725): each micro-batch divided by its own count of valid targets
    (cross_entropy reduction="mean") and gradient accumulation averaging the means, while the policy declares
    global_targets; the totals say so honestly (scope "microbatch")."""
    out = []
    for count, s in _counts_and_sums(request):
        out.append({"loss_sum": s, "denominator": count, "denominator_scope": "microbatch",
                    "loss": s / count if count else 0.0})
    return out


def reduce_own_count_as_global(request):
    """BUG (the same, reported as a global denominator): each micro-batch divides by its own count but claims
    the step's scope."""
    out = []
    for count, s in _counts_and_sums(request):
        out.append({"loss_sum": s, "denominator": count, "denominator_scope": "global",
                    "loss": s / count if count else 0.0})
    return out


# ---- bugs that need size (the zoo's SZ-*, fixtures/bugs/src/sizes.cc, written as Python packers) --------------
# Each is invisible on rows of 16 slots and a handful of documents; packoracle.fuzz at its defaults (rows to
# 8,192 slots, 512 documents) catches it in-process. Each pairs with the policy it claims (SIZE_BUG_POLICIES).

def pack_doc_ids_uint8(token_lists, row_length, *, supervised=None):
    """BUG SZ-01: doc_ids kept in a uint8 tensor (to save memory), so the 257th document of a row gets id 0
    again and a document mask that compares ids lets it attend to the row's first document."""
    batch = pack_reference(token_lists, row_length, supervised=supervised)
    ids = batch["doc_ids"]
    batch["doc_ids"] = np.where(ids >= 0, ids.astype(np.uint8).astype(np.int64), -1)  # padding stays -1
    return batch


def pack_positions_clamped(token_lists, row_length, *, supervised=None):
    """BUG SZ-02: position_ids clamped to the model's max_position_embeddings - 1 (1023, GPT-2's) "to be safe",
    so every token of a document past its 1,024th gets position 1023."""
    batch = pack_reference(token_lists, row_length, supervised=supervised)
    if not len(batch["input_ids"]):
        return []  # no document: no micro-batch
    batch["position_ids"] = np.minimum(batch["position_ids"], 1023)
    batch["cu_seqlens"] = [_row_cu_seqlens(ids) for ids in batch["doc_ids"]]
    return batch


def _row_cu_seqlens(doc_ids):
    """A row's cu_seqlens from its doc_ids (-1 on padding): 0, the end of each document, and the row's end
    (the padding run a segment of its own)."""
    ends = np.flatnonzero(np.diff(doc_ids)) + 1
    return np.concatenate([[0], ends, [len(doc_ids)]]).astype(np.int64)


def pack_cut_at_1000(token_lists, row_length, *, supervised=None):
    """BUG SZ-03: tokenised with truncation=True, max_length=1000 (a default copied from an example), so a longer
    document loses its tail before packing, silently."""
    cut = [list(t)[:1000] for t in token_lists]
    sup = None if supervised is None else [list(s)[:1000] for s in supervised]
    return pack_reference(cut, row_length, supervised=sup)


def pack_cu_seqlens_int16(request):
    """BUG SZ-04: one cu_seqlens over each micro-batch's flattened tokens (THD, rows one after the other) by
    torch.cumsum(lengths, dtype=torch.int16), sliced per row minus the row's start offset: once a micro-batch
    passes 32,767 slots the sums wrap and the later rows' cu_seqlens go negative. A ``packer(request)`` (it
    deals rows into micro-batches of the request's micro_batch_rows)."""
    try:
        batch = pack_reference(_tokens(request), request["row_length"], supervised=_supervised(request))
    except DocumentTooLong as e:
        raise packoracle.Refuse(str(e)) from e
    per_mb = request["micro_batch_rows"]
    rows = len(batch["input_ids"])
    out = []
    for first in range(0, rows, per_mb):
        part = {k: v[first:first + per_mb] for k, v in batch.items()}
        cu, offset = [], 0
        for ids in part["doc_ids"]:
            cu.append((offset + _row_cu_seqlens(ids)).astype(np.int16).astype(np.int64) - offset)
            offset += len(ids)
        part["cu_seqlens"] = cu
        out.append(part)
    return out


# Each SZ-* packer as packoracle.fuzz takes it, with the policy it claims and the invariant that catches it.
SIZE_BUGS = {
    "SZ-01": (as_packer(pack_doc_ids_uint8), {"preset": "reference", "boundary_source": "doc_ids"}, "segments"),
    "SZ-02": (as_packer(pack_positions_clamped), {"preset": "reference", "boundary_source": "cu_seqlens"},
              "positions"),
    "SZ-03": (as_packer(pack_cut_at_1000), "reference", "coverage"),
    "SZ-04": (pack_cu_seqlens_int16, {"preset": "reference", "boundary_source": "cu_seqlens"}, "shape"),
}
