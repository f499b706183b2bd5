"""Shared plumbing of the example exec candidates (DESIGN §6): the stdin/stdout loop, effective documents,
micro-batch assignment and the producer totals a loss reducer computes from the labels it emitted.

Not a candidate itself. Each candidate is a script next to this file that defines `pack(request)` returning a
list of rows and calls `serve(pack)`. A row is a dict with the encodings to send (input_ids, labels,
position_ids, ...), its doc_spans, and "_targets": per prediction i, the (doc_uid, token index) its label
points at, or None (used only to look the loss up in the request's target_losses).
"""

import json
import sys


class Refuse(Exception):
    """The candidate refuses the input (exec protocol `error` record), e.g. overflow: error and a document
    longer than the row."""


def effective_documents(request):
    """The request's documents with the policy's delimiters added: [bos] + tokens + [eos]. Delimiters are
    supervised. Returns dicts {uid, tokens, supervised}."""
    policy = request["policy"]
    out = []
    for d in request["documents"]:
        tokens = list(d["tokens"])
        sup = list(d.get("supervised") or [1] * len(tokens))
        if policy.get("bos_id") is not None:
            tokens, sup = [policy["bos_id"]] + tokens, [1] + sup
        if policy.get("eos_id") is not None:
            tokens, sup = tokens + [policy["eos_id"]], sup + [1]
        out.append({"uid": d["doc_uid"], "tokens": tokens, "supervised": sup})
    return out


def spans_of(slots):
    """doc_spans from per-slot (doc, offset) or None (padding): one span per contiguous piece."""
    spans = []
    for i, s in enumerate(slots):
        if s is None:
            continue
        doc, k = s
        last = spans[-1] if spans else None
        if last and last["doc_uid"] == doc["uid"] and last["start"] + last["length"] == i and \
                last["doc_offset"] + last["length"] == k:
            last["length"] += 1
        else:
            spans.append({"doc_uid": doc["uid"], "start": i, "length": 1, "doc_offset": k})
    return spans


def weights_of(row, policy):
    """The weight of every prediction as a loss function reads the row's labels (and loss_mask)."""
    labels, n, ignore = row["labels"], len(row["labels"]), policy["ignore_index"]
    if policy["label_alignment"] == "aligned":
        w = [1.0 if i + 1 < n and labels[i + 1] != ignore else 0.0 for i in range(n)]
    else:
        w = [1.0 if labels[i] != ignore else 0.0 for i in range(n)]
    if row.get("loss_mask") is not None:
        w = [a * b for a, b in zip(w, row["loss_mask"])]
    return w


def count_of(row, policy):
    """What the producer counts for the denominator: slots (all_positions), labels != ignore_index
    (count_basis unshifted_labels) or the weights."""
    if policy["denominator"] == "all_positions":
        return float(len(row["input_ids"]))
    if policy["count_basis"] == "unshifted_labels":
        return float(sum(1 for v in row["labels"] if v != policy["ignore_index"]))
    return sum(weights_of(row, policy))


def loss_sum_of(row, policy, target_losses):
    total = 0.0
    for w, ref in zip(weights_of(row, policy), row["_targets"]):
        if w > 0 and ref is not None:
            uid, k = ref
            losses = target_losses.get(uid, [])
            total += w * (losses[k] if k < len(losses) else 0.0)
    return total


def assign(rows, request):
    """Row k goes to micro-batch m = k // micro_batch_rows, rank m % dp_world_size, micro_step
    m // dp_world_size (as the kit's reference packer does). Returns [(rank, micro_step, rows)]."""
    per = request["micro_batch_rows"]
    dp = request["dp_world_size"]
    groups = []
    for k, row in enumerate(rows):
        m = k // per
        if m == len(groups):
            groups.append((m % dp, m // dp, []))
        groups[m][2].append(row)
    return groups


def reference_totals(groups, policy, target_losses):
    """Producer totals of every micro-batch under the policy's declared denominator: global_targets and
    all_positions divide by the step's count over every rank, rank_mean by the rank's, microbatch_mean (and
    sequence_mean, whose totals report the micro-batch's count) by the micro-batch's own. Zero is reported as
    a zero denominator and a zero loss, never divided by."""
    counts = [sum(count_of(r, policy) for r in rows) for _, _, rows in groups]
    per_rank = {}
    for (rank, _, _), c in zip(groups, counts):
        per_rank[rank] = per_rank.get(rank, 0.0) + c
    total = sum(counts)
    out = []
    for (rank, _, rows), c in zip(groups, counts):
        loss_sum = sum(loss_sum_of(r, policy, target_losses) for r in rows)
        if policy["denominator"] in ("global_targets", "all_positions"):
            den, scope = total, "global"
        elif policy["denominator"] == "rank_mean":
            den, scope = per_rank[rank], "step"
        else:
            den, scope = c, "microbatch"
        den = int(den) if float(den).is_integer() else den
        out.append({"loss_sum": loss_sum, "denominator": den, "denominator_scope": scope,
                    "loss": loss_sum / den if den > 0 else 0.0})
    return out


def microbatch_records(groups, totals):
    records = []
    for (rank, micro_step, rows), producer in zip(groups, totals):
        clean = [{k: v for k, v in row.items() if not k.startswith("_")} for row in rows]
        records.append({"record": "microbatch", "step": 0, "micro_step": micro_step, "rank": rank, "rows": clean,
                        "producer": producer})
    return records


def answer(request, pack, totals=reference_totals):
    """The records answering one request: micro-batches then end, or one error record."""
    rid = request.get("id")
    try:
        rows = pack(request)
        groups = assign(rows, request)
        records = microbatch_records(groups, totals(groups, request["policy"], request.get("target_losses") or {}))
    except Refuse as e:
        return [{"record": "error", "id": rid, "message": str(e)}]
    return records + [{"record": "end", "id": rid}]


def serve(pack, totals=reference_totals, stdin=None, stdout=None):
    """The exec protocol loop: one request per line on stdin, the answer on stdout, flushed after each."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    for line in stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except json.JSONDecodeError as e:
            stdout.write(json.dumps({"record": "error", "id": None, "message": f"not JSON: {e}"}) + "\n")
            stdout.flush()
            continue
        if request.get("record") != "request":
            continue  # nothing else is addressed to a candidate
        try:
            records = answer(request, pack, totals)
        except Exception as e:  # a bug of the candidate: say so rather than die mid-answer
            records = [{"record": "error", "id": request.get("id"),
                        "message": f"internal error: {type(e).__name__}: {e}"}]
        for record in records:
            stdout.write(json.dumps(record, separators=(",", ":")) + "\n")
        stdout.flush()


# ---- the sequential greedy packer shared by the reference-style candidates ----------------------------------

def greedy_rows(docs, L, overflow):
    """Pieces per row, documents in the given order: a document goes into the current row if it fits in the space
    left, else a new row starts. overflow error refuses a document longer than L, truncate keeps its first L
    tokens, split fills every row to the end and carries the rest into the next row, drop leaves it out (axolotl's
    excess_length_strategy: drop). Empty documents are skipped. Returns [[(doc, first offset, length), ...], ...]."""
    rows, cur, used = [], [], 0
    for doc in docs:
        n = len(doc["tokens"])
        if n == 0:
            continue
        if n > L and overflow == "error":
            raise Refuse(f"overflow: error and document '{doc['uid']}' has {n} tokens (delimiters included), "
                         f"more than the row length {L}")
        if n > L and overflow == "drop":
            continue
        if overflow == "split":
            k = 0
            while k < n:
                take = min(L - used, n - k)
                cur.append((doc, k, take))
                used += take
                k += take
                if used == L:
                    rows.append(cur)
                    cur, used = [], 0
            continue
        n = min(n, L)  # truncate keeps the first L tokens
        if used + n > L:
            rows.append(cur)
            cur, used = [], 0
        cur.append((doc, 0, n))
        used += n
    if cur:
        rows.append(cur)
    return rows


def slots_of(pieces):
    """Per slot: (doc, offset, piece's first offset)."""
    slots = []
    for doc, k0, length in pieces:
        slots.extend((doc, k0 + t, k0) for t in range(length))
    return slots
