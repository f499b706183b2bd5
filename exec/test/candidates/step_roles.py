#!/usr/bin/env python3
"""Consumers over the exec protocol that see the whole step (DESIGN §6, "Other roles"; §12), standard library
only: what a consume_request's `layout` and `emitted` fields and the `work` record carry, and the value consumer's
value_request. One process serves consume_request and value_request records, dispatched by kind.

    step_roles.py --bug cp-divided   a CP rank takes cu_seqlens // cp_size as its local boundaries (attention)
    step_roles.py --bug cp-held      its twin: each slot's document from the slots the rank really holds
    step_roles.py --bug dense-dummy  right masks; a work record with the alignment padding as a dense dummy row
    step_roles.py --bug aligned      its twin: the padding left out of the work (nothing computed)
    step_roles.py --bug emitted      segment ids read from the packer's own record (`emitted`, the field
                                     `packer_own` that reference_packer.py --extra writes); an error without it
    step_roles.py --bug reset-leak   values: a running state over the row's tokens, never reset (packing_invariance)
    step_roles.py --bug reset        its twin: the state reset at every document's first slot
    step_roles.py --bug mean-grad    values right; the gradient averaged over the micro-batch's pieces (gradient)
    step_roles.py --bug value-hang   values: hangs on a row holding two documents
    step_roles.py --bug value-crash  values: aborts (SIGABRT) on a row holding two documents

The value consumer answers one feature per slot, out[i] = w · s_i with s_i the running sum of 0.1·(token mod 7)
and w = 1, and when asked the probe loss's gradient with respect to w: Σ_i u_i · s_i (c_0 = 1).
"""
import json
import os
import sys
import time

BUG = sys.argv[sys.argv.index("--bug") + 1] if "--bug" in sys.argv else "reset"
ALIGN = 8


def segment_runs(segment):
    """Causal attention within each segment id (-1: seen by nobody), as runs of visible keys per query."""
    offsets, begin, end, blocks = [0], [], [], {}
    for i, s in enumerate(segment):
        if s >= 0:
            mine = blocks.setdefault(s, [])
            if mine and mine[-1][1] == i:
                mine[-1][1] = i + 1
            else:
                mine.append([i, i + 1])
            for b, e in mine:
                begin.append(b)
                end.append(e)
        offsets.append(len(begin))
    return {"row_offsets": offsets, "run_begin": begin, "run_end": end, "source": "runs"}


def document(slot, bounds):
    d = 0
    while d + 1 < len(bounds) and bounds[d + 1] <= slot:
        d += 1
    return d


def cp_segments(row, layout, r):
    cu, ids = row["cu_seqlens"], row["doc_ids"]
    divided = [c // layout["context_parallel_size"] for c in cu]
    segment = [-1] * len(ids)
    for chunks in layout["cp_shards"][r]:
        local = 0
        for start, end in chunks:
            for g in range(start, end):
                if ids[g] >= 0:
                    segment[g] = document(g, cu) if BUG == "cp-held" else document(local, divided)
                local += 1
    return segment


def span_segments(row):
    segment = [-1] * len(row["input_ids"])
    for k, span in enumerate(row["doc_spans"]):
        for i in range(span["start"], span["start"] + span["length"]):
            segment[i] = k
    return segment


def consume(request):
    rows, out = request["microbatch"]["rows"], []
    if BUG == "emitted" and "emitted" not in request:
        return [{"record": "error", "message": "no emitted record: this consumer reads the packer's own field"}]
    for r, row in enumerate(rows):
        if BUG.startswith("cp-"):
            segment = cp_segments(row, request["layout"], r)
        elif BUG == "emitted":
            segment = request["emitted"]["packer_own"]["segments"][r]
        else:
            segment = span_segments(row)
        out.append({"record": "mask", "row": r, "runs": segment_runs(segment)})
    if BUG in ("dense-dummy", "aligned"):
        tokens = sum(sum(1 for s in span_segments(row) if s >= 0) for row in rows)
        pad = -tokens % ALIGN
        dense = {"row_offsets": list(range(pad + 1)), "run_begin": [0] * pad, "run_end": [pad] * pad}
        out.append({"record": "work", "extra_rows": [dense] if BUG == "dense-dummy" and pad else []})
    return out


def two_documents(row):
    return len({d for d in row["doc_ids"] if d >= 0}) > 1


def values(request):
    rows = request["microbatch"]["rows"]
    if any(two_documents(row) for row in rows):
        if BUG == "value-hang":
            time.sleep(3600)
        if BUG == "value-crash":
            sys.stderr.write("about to abort on a packed row\n")
            sys.stderr.flush()
            os.abort()
    out, gradient, pieces = [], 0.0, 0
    for r, row in enumerate(rows):
        ids, state, slots = row["doc_ids"], 0.0, []
        for i, token in enumerate(row["input_ids"]):
            if BUG != "reset-leak" and (i == 0 or ids[i] != ids[i - 1]):
                state = 0.0
            state += 0.1 * (token % 7) if ids[i] >= 0 else 0.0
            slots.append([state])
            if request["gradient"]:
                gradient += request["slot_weights"][r][i] * state
        pieces += len(row["doc_spans"])
        out.append({"record": "values", "row": r, "values": slots})
    if request["gradient"]:
        mean = gradient / max(pieces, 1)  # the bug: a loss averaged over the micro-batch's pieces
        out.append({"record": "gradient", "parameter_gradient": [mean if BUG == "mean-grad" else gradient]})
    return out


for line in sys.stdin:
    request = json.loads(line)
    answer = values(request) if request["record"] == "value_request" else consume(request)
    if not answer or answer[-1]["record"] != "error":
        answer.append({"record": "end"})
    for record in answer:
        record["id"] = request["id"]
        sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()
