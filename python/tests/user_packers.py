"""Correct packers written the way users write them, none declaring a policy: the set which_policy must find a
holding policy for (issue 44 item 1). Each is a plain function of the exec request (``packer(request)`` as
packoracle.fuzz calls it) over numpy, in the field names its trainer reads, and each is correct under some
policy; most match no preset exactly. ``SFT`` packers honour the documents' ``supervised`` flags (prompt
masking); the stream packers (pretraining) ignore them and are fuzzed with ``sft_masks=False``. Each
refuses (packoracle.Refuse) an input it cannot pack, as the exec protocol has a packer say so.
"""

from __future__ import annotations

import numpy as np

import packoracle

IGNORE = -100
EOS = 50_000   # a tokenizer's own special ids, far from the generated documents' small ones
BOS = 50_001
PAD = 50_002


def _docs(request):
    return [np.asarray(d["tokens"], dtype=np.int64) for d in request["documents"]]


def _sup(request):
    return [np.asarray(d.get("supervised") or [1] * len(d["tokens"]), dtype=bool) for d in request["documents"]]


def _greedy(lengths, row_length, order=None):
    """Rows of document indices, in ``order`` (default: as given), a document into the current row if it fits,
    else a new row; empty documents skipped; longer than the row: Refuse."""
    rows, used = [], row_length + 1
    for k in (order if order is not None else range(len(lengths))):
        n = lengths[k]
        if n == 0:
            continue
        if n > row_length:
            raise packoracle.Refuse(f"document {k} has {n} tokens, more than {row_length}")
        if used + n > row_length:
            rows.append([])
            used = 0
        rows[-1].append(k)
        used += n
    return rows


def _rows(n_rows, row_length, pad=PAD):
    return (np.full((n_rows, row_length), pad, np.int64), np.full((n_rows, row_length), IGNORE, np.int64),
            np.zeros((n_rows, row_length), np.int64))


def greedy_padded_aligned(request):
    """The issue's packer: greedy rows of several documents, right padded to L, positions reset per document,
    labels aligned with the tokens (-100 at each document's first token, and on prompts), no cu_seqlens."""
    docs, sup, L = _docs(request), _sup(request), request["row_length"]
    rows = _greedy([len(d) for d in docs], L)
    ids, labels, pos = _rows(len(rows), L)
    for r, members in enumerate(rows):
        at = 0
        for k in members:
            n = len(docs[k])
            ids[r, at:at + n] = docs[k]
            labels[r, at:at + n] = np.where(sup[k], docs[k], IGNORE)
            labels[r, at] = IGNORE
            pos[r, at:at + n] = np.arange(n)
            at += n
    return [{"input_ids": ids, "labels": labels, "position_ids": pos}] if rows else []


def greedy_padded_pad_zero(request):
    """The same, padded with id 0, which the generated documents also use (issue 44's own example)."""
    batches = greedy_padded_aligned(request)
    for batch in batches:
        batch["input_ids"][batch["input_ids"] == PAD] = 0
    return batches


def padded_sft_one_per_row(request):
    """The classic SFT collator: one document per row, truncated to L (the tokenizer's truncation=True),
    right padded with the tokenizer's pad id, attention_mask 1 on tokens, labels = input_ids with padding and
    the prompt at -100. No position_ids: the model counts positions over the row."""
    docs, sup, L = _docs(request), _sup(request), request["row_length"]
    kept = [(d[:L], s[:L]) for d, s in zip(docs, sup) if len(d)]
    ids, labels, _ = _rows(len(kept), L, PAD)
    mask = np.zeros((len(kept), L), np.int64)
    for r, (d, s) in enumerate(kept):
        ids[r, :len(d)] = d
        labels[r, :len(d)] = np.where(s, d, IGNORE)
        mask[r, :len(d)] = 1
    return [{"input_ids": ids, "labels": labels, "attention_mask": mask}] if kept else []


def padded_sft_longest(request):
    """The same collator padding to the longest row of its batch instead of L (HF DataCollatorWithPadding's
    padding="longest", LitGPT's get_sft_collate_fn): every row as wide as the widest document, at most L."""
    batches = padded_sft_one_per_row(request)
    for batch in batches:
        width = int(batch["attention_mask"].sum(axis=1).max())
        for name in ("input_ids", "labels", "attention_mask"):
            batch[name] = batch[name][:, :width]
    return batches


def flatten_with_seq_idx(request):
    """A token-budget sampler feeding a flattening collator that writes seq_idx (mamba's and FLA's varlen key)
    instead of cu_seqlens: one flattened row per micro-batch, labels aligned (-100 at each first token),
    position_ids reset."""
    docs, sup, L = _docs(request), _sup(request), request["row_length"]
    out = []
    for members in _greedy([len(d) for d in docs], L):
        ids = np.concatenate([docs[k] for k in members])
        labels = np.concatenate([np.where(sup[k], docs[k], IGNORE) for k in members])
        starts = np.cumsum([0] + [len(docs[k]) for k in members[:-1]])
        labels[starts] = IGNORE
        out.append({"input_ids": ids[None], "labels": labels[None],
                    "position_ids": np.concatenate([np.arange(len(docs[k])) for k in members])[None],
                    "seq_idx": np.concatenate([np.full(len(docs[k]), j) for j, k in enumerate(members)])[None]})
    return out


def flatten_with_cu_seqlens(request):
    """The same sampler feeding transformers' DataCollatorWithFlattening(return_flash_attn_kwargs=True):
    cu_seq_lens_q/k beside the reset position_ids."""
    out = []
    for batch in flatten_with_seq_idx(request):
        seq_idx = batch.pop("seq_idx")[0]
        cu = np.concatenate([[0], np.flatnonzero(np.diff(seq_idx)) + 1, [len(seq_idx)]]).astype(np.int32)
        batch["cu_seq_lens_q"] = batch["cu_seq_lens_k"] = cu
        out.append(batch)
    return out


def group_texts(request):
    """HF run_clm's group_texts: every document followed by the EOS, concatenated, cut into blocks of L (the
    remainder dropped), labels = input_ids (the model shifts). No positions, no boundaries: each block is one
    causal sequence."""
    L = request["row_length"]
    stream = np.concatenate([np.append(d, EOS) for d in _docs(request)] or [np.zeros(0, np.int64)])
    n = len(stream) // L
    if len(stream) == 0:
        return []
    if n == 0:
        raise packoracle.Refuse(f"{len(stream)} tokens make no block of {L}")
    blocks = stream[:n * L].reshape(n, L)
    return [{"input_ids": blocks, "labels": blocks.copy()}]


def llmc_windows(request):
    """llm.c's DataLoader: every document opened by the BOS (<|endoftext|>), concatenated, windows of L + 1
    tokens at stride L: inputs the first L, targets the last L (pre-shifted), no padding."""
    L = request["row_length"]
    stream = np.concatenate([np.insert(d, 0, BOS) for d in _docs(request)] or [np.zeros(0, np.int64)])
    rows = [stream[i:i + L + 1] for i in range(0, len(stream) - L, L)]
    if len(stream) == 0:
        return []
    if not rows:
        raise packoracle.Refuse(f"{len(stream)} tokens make no window of {L} + 1")
    return [{"input_ids": np.stack([w[:-1] for w in rows]), "labels": np.stack([w[1:] for w in rows])}]


def megatron_eod_rows(request):
    """Megatron's GPTDataset without reset flags: every document closed by the EOD, the stream cut into samples
    of L + 1 tokens at stride L, tokens/labels the first and last L, loss_mask all ones, position_ids over the
    row."""
    L = request["row_length"]
    stream = np.concatenate([np.append(d, EOS) for d in _docs(request)] or [np.zeros(0, np.int64)])
    rows = [stream[i:i + L + 1] for i in range(0, len(stream) - L, L)]
    if len(stream) == 0:
        return []
    if not rows:
        raise packoracle.Refuse(f"{len(stream)} tokens make no window of {L} + 1")
    tokens = np.stack([w[:-1] for w in rows])
    return [{"input_ids": tokens, "labels": np.stack([w[1:] for w in rows]),
             "loss_mask": np.ones(tokens.shape, np.float32), "position_ids": np.tile(np.arange(L), (len(rows), 1))}]


def per_document_shift(request):
    """torchtitan-style: every document closed by the EOS, then shifted inside itself (inputs all but its last
    token, labels all but its first), the pieces packed greedily into rows of L, right padded, positions reset
    per document, labels -100 on padding and prompts."""
    docs = [np.append(d, EOS) for d in _docs(request)]
    sup = [np.append(s, True) for s in _sup(request)]
    L = request["row_length"]
    inputs = [d[:-1] for d in docs]
    rows = _greedy([len(i) for i in inputs], L)
    ids, labels, pos = _rows(len(rows), L)
    for r, members in enumerate(rows):
        at = 0
        for k in members:
            n = len(inputs[k])
            ids[r, at:at + n] = inputs[k]
            labels[r, at:at + n] = np.where(sup[k][1:], docs[k][1:], IGNORE)
            pos[r, at:at + n] = np.arange(n)
            at += n
    return [{"input_ids": ids, "labels": labels, "position_ids": pos}] if rows else []


def _pre_shifted_rows(docs, sup, rows, L):
    """Rows of documents with labels pre-shifted inside each document, positions reset, doc_ids (-1 on pad)."""
    ids, labels, pos = _rows(len(rows), L)
    doc_ids = np.full((len(rows), L), -1, np.int64)
    for r, members in enumerate(rows):
        at = 0
        for j, k in enumerate(members):
            d, n = docs[k], len(docs[k])
            ids[r, at:at + n] = d
            labels[r, at:at + n - 1] = np.where(sup[k][1:], d[1:], IGNORE)
            pos[r, at:at + n] = np.arange(n)
            doc_ids[r, at:at + n] = j
            at += n
    return {"input_ids": ids, "labels": labels, "position_ids": pos, "doc_ids": doc_ids}


def first_fit_decreasing(request):
    """Documents sorted longest first, each into the first row with room (best packing of a batch), labels
    pre-shifted inside each document, doc_ids for the attention mask."""
    docs, sup, L = _docs(request), _sup(request), request["row_length"]
    rows, used = [], []
    for k in sorted(range(len(docs)), key=lambda k: -len(docs[k])):
        n = len(docs[k])
        if n == 0:
            continue
        if n > L:
            raise packoracle.Refuse(f"document {k} has {n} tokens, more than {L}")
        r = next((r for r, u in enumerate(used) if u + n <= L), len(rows))
        if r == len(rows):
            rows.append([])
            used.append(0)
        rows[r].append(k)
        used[r] += n
    return [_pre_shifted_rows(docs, sup, rows, L)] if rows else []


def truncating_packer(request):
    """Greedy rows, a document longer than the row cut to L tokens first (never refused), pre-shifted labels,
    doc_ids."""
    L = request["row_length"]
    docs, sup = [d[:L] for d in _docs(request)], [s[:L] for s in _sup(request)]
    rows = _greedy([len(d) for d in docs], L)
    return [_pre_shifted_rows(docs, sup, rows, L)] if rows else []


def splitting_packer(request):
    """Rows filled to the last slot: a document that does not fit is split, its rest opening the next row
    (positions continuing from where it stopped), labels pre-shifted inside each piece's document (a row's
    last slot predicts nothing), doc_ids per piece, the last row right padded."""
    docs, sup, L = _docs(request), _sup(request), request["row_length"]
    pieces, row, used = [], [], 0   # pieces: (doc, start, stop) per row
    for k, d in enumerate(docs):
        start = 0
        while start < len(d):
            take = min(len(d) - start, L - used)
            row.append((k, start, start + take))
            used += take
            start += take
            if used == L:
                pieces.append(row)
                row, used = [], 0
    if row:
        pieces.append(row)
    ids, labels, pos = _rows(len(pieces), L)
    doc_ids = np.full((len(pieces), L), -1, np.int64)
    for r, members in enumerate(pieces):
        at = 0
        for j, (k, a, b) in enumerate(members):
            d, n = docs[k], b - a
            ids[r, at:at + n] = d[a:b]
            nxt = np.where(sup[k][a + 1:b], d[a + 1:b], IGNORE)
            labels[r, at:at + len(nxt)] = nxt
            pos[r, at:at + n] = np.arange(a, b)
            doc_ids[r, at:at + n] = j
            at += n
    return [{"input_ids": ids, "labels": labels, "position_ids": pos, "doc_ids": doc_ids}] if pieces else []


def packed_with_seq_lens(request):
    """torchtune-style PackedDataset rows without its padding document: greedy rows, pre-shifted labels,
    positions reset, seq_lens listing each row's document lengths and the padding as a length of its own."""
    docs, sup, L = _docs(request), _sup(request), request["row_length"]
    rows = _greedy([len(d) for d in docs], L)
    if not rows:
        return []
    batch = _pre_shifted_rows(docs, sup, rows, L)
    del batch["doc_ids"]
    seq_lens = []
    for members in rows:
        lengths = [len(docs[k]) for k in members]
        seq_lens.append(lengths + ([L - sum(lengths)] if sum(lengths) < L else []))
    batch["seq_lens"] = seq_lens
    return [batch]


# name -> (packer, fuzz options): the set test_which_policy.py asks which_policy about.
USER_PACKERS = {
    "greedy_padded_aligned": (greedy_padded_aligned, {}),
    "greedy_padded_pad_zero": (greedy_padded_pad_zero, {"sft_masks": False}),
    "padded_sft_one_per_row": (padded_sft_one_per_row, {}),
    "padded_sft_longest": (padded_sft_longest, {}),
    "flatten_with_seq_idx": (flatten_with_seq_idx, {}),
    "flatten_with_cu_seqlens": (flatten_with_cu_seqlens, {}),
    "group_texts": (group_texts, {"sft_masks": False}),
    "llmc_windows": (llmc_windows, {"sft_masks": False}),
    "megatron_eod_rows": (megatron_eod_rows, {"sft_masks": False}),
    "per_document_shift": (per_document_shift, {}),
    "first_fit_decreasing": (first_fit_decreasing, {}),
    "truncating_packer": (truncating_packer, {}),
    "splitting_packer": (splitting_packer, {}),
    "packed_with_seq_lens": (packed_with_seq_lens, {}),
}
