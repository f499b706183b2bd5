#!/usr/bin/env python3
"""A loss reducer and an attention consumer over the exec protocol (DESIGN §6, "Other roles"), standard library
only, one process for both roles: records are dispatched by kind (`reduce_request`, `consume_request`).

    roles.py                 right: global token mean; doc_ids read as causal segment ids
    roles.py --bug own-count the reducer divides each micro-batch by its own count, claiming the global scope
    roles.py --bug join      the consumer joins the documents of a row (one segment for every non-pad slot)
    roles.py --bug hang      both hang on a request with more than one row (or micro-batch)
    roles.py --bug crash     both abort (SIGABRT) on a request with more than one row (or micro-batch)
    roles.py --bug wrong-id  both answer a request with more than one row for another id
    roles.py --bug error     both answer a request with more than one row with an error record (and live on)
"""
import json
import os
import sys
import time

BUG = sys.argv[sys.argv.index("--bug") + 1] if "--bug" in sys.argv else None


def misbehave(big):
    """The fault bugs, on a request big enough that shrinking has somewhere to go."""
    if not big:
        return
    if BUG == "hang":
        time.sleep(3600)
    if BUG == "crash":
        sys.stderr.write("about to abort on a big request\n")
        sys.stderr.flush()
        os.abort()


def counts_and_sums(request):
    """Per micro-batch: (valid targets, sum of their losses), from the labels as the policy aligns them."""
    policy = request["policy"]
    ignore, aligned = policy["ignore_index"], policy["label_alignment"] == "aligned"
    out = []
    for mb, losses in zip(request["microbatches"], request["slot_losses"]):
        count, total = 0, 0.0
        for row, row_losses in zip(mb["rows"], losses):
            labels = row["labels"]
            valid = [label != ignore for label in labels]
            if aligned:
                valid = valid[1:] + [False]
            count += sum(valid)
            total += sum(loss for loss, v in zip(row_losses, valid) if v)
        out.append((count, total))
    return out


def reduce(request):
    misbehave(len(request["microbatches"]) > 1)
    per = counts_and_sums(request)
    everything = sum(c for c, _ in per)
    totals = []
    for count, s in per:
        n = count if BUG == "own-count" else everything
        totals.append({"loss_sum": s, "denominator": n, "denominator_scope": "global", "loss": s / n if n else 0.0})
    return [{"record": "totals", "totals": totals}]


def runs(ids):
    """doc_ids as a varlen kernel reads segment ids (causal within a segment, -1 seen by nobody), as runs."""
    offsets, begin, end = [0], [], []
    start = 0
    for i, d in enumerate(ids):
        if i == 0 or d != ids[i - 1]:
            start = i
        if d >= 0:
            begin.append(start)
            end.append(i + 1)
        offsets.append(len(begin))
    return {"row_offsets": offsets, "run_begin": begin, "run_end": end, "source": "runs"}


def consume(request):
    rows = request["microbatch"]["rows"]
    misbehave(len(rows) > 1)
    out = []
    for r, row in enumerate(rows):
        ids = row["doc_ids"]
        if BUG == "join":
            ids = [0 if d >= 0 else -1 for d in ids]
        out.append({"record": "mask", "row": r, "runs": runs(ids)})
    return out


for line in sys.stdin:
    request = json.loads(line)
    big = len(request.get("microbatches") or request.get("microbatch", {}).get("rows", [])) > 1
    if BUG == "error" and big:
        sys.stdout.write(json.dumps({"record": "error", "id": request["id"], "message": "cannot answer"}) + "\n")
        sys.stdout.flush()
        continue
    answer = reduce(request) if request["record"] == "reduce_request" else consume(request)
    rid = request["id"] + 1000 if BUG == "wrong-id" and big else request["id"]
    for record in answer + [{"record": "end"}]:
        record["id"] = rid
        sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()
