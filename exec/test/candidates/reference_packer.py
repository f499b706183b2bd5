#!/usr/bin/env python3
"""A correct exec candidate (DESIGN §6) for the `reference` preset, in plain Python (stdlib only).

    packoracle fuzz --exec 'python3 exec/test/candidates/reference_packer.py' --preset reference

It packs greedily in the given order (a document goes into the current row if it fits in the space left,
otherwise a new row starts), refuses a document longer than the row under `overflow: error` (the only
refusal the reference policy demands), pads every row on the right to the row length, and emits every
encoding the reference packer emits (labels pre-shifted, positions reset per document, doc_ids, cu_seqlens,
seq_lens, doc_spans) with producer totals under the global token mean. The rules are those of
fixtures/golden/README.md; keys the reference preset does not use are handled only as far as cheap
(bos/eos delimiters, truncate and split overflow).

`--extra` adds a field of the packer's own to each microbatch record, nested as a real collator might:
"packer_own":{"segments":[per row, its doc_ids]} (the kit ignores it; an exec consumer's step view reads it).

The fault scripts next to it import `serve` and pass a hook that misbehaves; `--once MARKER` makes them
misbehave only while the file MARKER does not exist (they create it), so that a restarted candidate works.
"""
import json
import os
import sys


class Refusal(Exception):
    pass


def effective(doc, policy):
    tokens = list(doc["tokens"])
    supervised = list(doc.get("supervised") or [1] * len(tokens))
    if policy.get("bos_id") is not None:
        tokens.insert(0, policy["bos_id"])
        supervised.insert(0, 1)
    if policy.get("eos_id") is not None:
        tokens.append(policy["eos_id"])
        supervised.append(1)
    return tokens, supervised


def layout(docs, policy, row_length):
    """Rows of pieces (doc index, offset in the document, start slot, length), sequential greedy."""
    rows, space = [], 0
    for d, (uid, tokens, _) in enumerate(docs):
        n = len(tokens)
        if n == 0:
            continue
        if n > row_length and policy["overflow"] == "error":
            raise Refusal(f"document {uid} has {n} tokens, more than the row length {row_length} (overflow: error)")
        if n > row_length and policy["overflow"] == "truncate":
            n = row_length
        if policy["overflow"] == "split":
            offset = 0
            while offset < n:
                if space == 0:
                    rows.append([])
                    space = row_length
                take = min(n - offset, space)
                rows[-1].append((d, offset, row_length - space, take))
                space -= take
                offset += take
            continue
        if n > space:
            rows.append([])
            space = row_length
        rows[-1].append((d, 0, row_length - space, n))
        space -= n
    return rows


def encode_row(pieces, docs, policy, row_length):
    ignore, pad = policy["ignore_index"], policy["pad_id"]
    slots = [None] * row_length  # (doc, offset, piece index)
    for p, (d, offset, start, length) in enumerate(pieces):
        for k in range(length):
            slots[start + k] = (d, offset + k, p)
    input_ids, labels, positions, doc_ids, weighted = [], [], [], [], []
    for i, s in enumerate(slots):
        if s is None:
            input_ids.append(pad)
            labels.append(ignore)
            positions.append(0)
            doc_ids.append(-1)
            continue
        d, k, p = s
        _, tokens, supervised = docs[d]
        input_ids.append(tokens[k])
        positions.append(policy["position_base"] + k)
        doc_ids.append(p)
        nxt = slots[i + 1] if i + 1 < row_length else None
        label = ignore
        if nxt is not None and nxt[0] == d and nxt[1] == k + 1:
            if supervised[k + 1]:
                label = tokens[k + 1]
                weighted.append((d, k + 1))
        elif nxt is not None and nxt[1] == 0 and policy["boundary_target"] == "included":
            _, next_tokens, next_supervised = docs[nxt[0]]
            if next_supervised[0]:
                label = next_tokens[0]
                weighted.append((nxt[0], 0))
        labels.append(label)
    cu_seqlens, seq_lens = [0], []
    for i in range(1, row_length + 1):
        if i == row_length or (slots[i] is None) != (slots[i - 1] is None) or (
                slots[i] is not None and slots[i][2] != slots[i - 1][2]):
            seq_lens.append(i - cu_seqlens[-1])
            cu_seqlens.append(i)
    spans = [{"doc_uid": docs[d][0], "start": start, "length": length, "doc_offset": offset}
             for d, offset, start, length in pieces]
    row = {"input_ids": input_ids, "labels": labels, "position_ids": positions, "cu_seqlens": cu_seqlens,
           "seq_lens": seq_lens, "doc_ids": doc_ids, "doc_spans": spans}
    return row, weighted


def pack(request):
    """The answer lines (without newlines) for one request."""
    policy, row_length = request["policy"], request["row_length"]
    docs = []
    for doc in request["documents"]:
        tokens, supervised = effective(doc, policy)
        docs.append((doc["doc_uid"], tokens, supervised))
    try:
        rows = layout(docs, policy, row_length)
    except Refusal as refusal:
        return [json.dumps({"record": "error", "id": request["id"], "message": str(refusal)})]
    losses = request.get("target_losses", {})
    encoded = [encode_row(pieces, docs, policy, row_length) for pieces in rows]
    total = sum(len(weighted) for _, weighted in encoded)
    per_row, dp = request["micro_batch_rows"], request["dp_world_size"]
    batches = {}
    for r, (row, weighted) in enumerate(encoded):
        m = r // per_row
        key = (m % dp, m // dp)
        batch = batches.setdefault(key, {"rows": [], "loss_sum": 0.0})
        batch["rows"].append(row)
        batch["loss_sum"] += sum(losses[docs[d][0]][k] for d, k in weighted)
    lines = []
    for (rank, micro_step), batch in batches.items():
        loss_sum = batch["loss_sum"]
        record = {
            "record": "microbatch", "step": 0, "micro_step": micro_step, "rank": rank, "rows": batch["rows"],
            "producer": {"loss_sum": loss_sum, "denominator": total, "denominator_scope": "global",
                         "loss": loss_sum / total if total else 0.0}}
        if "--extra" in sys.argv:
            record["packer_own"] = {"segments": [row["doc_ids"] for row in batch["rows"]]}
        lines.append(json.dumps(record, separators=(",", ":")))
    lines.append('{"record":"end","id":%d}' % request["id"])
    return lines


def answer(request, out=None):
    out = out or sys.stdout
    out.write("\n".join(pack(request)) + "\n")
    out.flush()


def should_misbehave():
    """True unless --once MARKER was given and MARKER exists (then it is created and True is returned once)."""
    if "--once" not in sys.argv:
        return True
    marker = sys.argv[sys.argv.index("--once") + 1]
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def serve(hook=None):
    """Answers requests from stdin until it closes. `hook(request)` runs first (while the candidate is to
    misbehave) and returns True when it has dealt with the request itself."""
    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline()
        if not line:
            return
        request = json.loads(line)
        if hook is not None and should_misbehave() and hook(request):
            continue
        answer(request)


if __name__ == "__main__":
    serve()
