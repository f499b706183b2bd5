#!/usr/bin/env python3
# Correct exec candidate for the `reference` preset (the lesson's document isolation), DESIGN §6:
#   packoracle fuzz --exec 'python3 python/candidates/reference.py' --preset reference
# Greedy sequential packing in document order (a document that does not fit in the space left starts a new row),
# rows padded to the row length with pad_id (on the right, or on the left under padding: left); pre-shifted labels, each document shifted on its own (the
# prediction into the next document excluded, unless the policy includes boundary targets); positions reset per
# document; doc_ids per piece (-1 on padding); producer totals under the declared denominator (global_targets:
# every micro-batch divides by the step's count of valid targets). Refuses a document longer than the row
# under overflow: error (truncate, split and drop are honoured). Mimics no bug.
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import effective_documents, greedy_rows, serve, slots_of, spans_of  # noqa: E402


def encode_row(pieces, request):
    policy, L = request["policy"], request["row_length"]
    ignore, base = policy["ignore_index"], policy["position_base"]
    slots = slots_of(pieces)
    content = len(slots)
    width = content
    if policy["padding"] in ("right", "left"):
        if policy["pad_to"] == "row_len":
            width = L
        else:
            k = int(policy["pad_to"].split(":")[1])
            width = -(-content // k) * k
    if policy["padding"] == "left":  # every pad slot before the row's first token
        slots = [None] * (width - content) + slots
    else:
        slots += [None] * (width - content)
    labels, targets, positions, doc_ids = [], [], [], []
    piece_id, last_piece = -1, None
    for i, s in enumerate(slots):
        if s is None:
            labels.append(ignore)
            targets.append(None)
            if policy["pad_positions"] == "continue":
                prev = positions[-1] if positions else base - 1
                positions.append(min(prev + 1, base + L - 1))
            else:
                positions.append(0)
            doc_ids.append(-1)
            continue
        doc, k, first = s
        nxt = slots[i + 1] if i + 1 < width else None
        label, target = ignore, None
        if nxt is not None and nxt[0] is doc and nxt[1] == k + 1:
            if doc["supervised"][k + 1]:
                label, target = doc["tokens"][k + 1], (doc["uid"], k + 1)
        elif nxt is not None and nxt[1] == 0:
            if policy["boundary_target"] == "included" and nxt[0]["supervised"][0]:
                label, target = nxt[0]["tokens"][0], (nxt[0]["uid"], 0)
        elif i == width - 1 and policy["row_end_target"] == "next_in_doc" and k + 1 < len(doc["tokens"]):
            if doc["supervised"][k + 1]:
                label, target = doc["tokens"][k + 1], (doc["uid"], k + 1)
        labels.append(label)
        targets.append(target)
        if policy["positions"] == "row_continuous":
            positions.append(base + i)
        elif policy["split_positions"] == "modulo":
            positions.append(base + k % L)
        elif policy["split_positions"] == "restart":
            positions.append(base + k - first)
        else:
            positions.append(base + k)
        if (doc["uid"], first) != last_piece:
            piece_id += 1
            last_piece = (doc["uid"], first)
        doc_ids.append(piece_id)
    input_ids = [s[0]["tokens"][s[1]] if s is not None else policy["pad_id"] for s in slots]
    return {"input_ids": input_ids, "labels": labels, "position_ids": positions, "doc_ids": doc_ids,
            "doc_spans": spans_of([(s[0], s[1]) if s is not None else None for s in slots]), "_targets": targets}


def pack(request):
    docs = effective_documents(request)
    rows = greedy_rows(docs, request["row_length"], request["policy"]["overflow"])
    return [encode_row(pieces, request) for pieces in rows]


if __name__ == "__main__":
    serve(pack)
