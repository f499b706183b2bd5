"""A packed-batch dump of one 4,096-slot row shaped as Megatron's GPTDataset packs it (documents closed by
EOD 0, positions reset after each EOD), with the training copy's bug in one place: the positions do not
restart at the document that starts at slot 1,030. What the browser checks draw to see a long row windowed."""

import json

EOD = 0
ROW = 4096
# Lengths (EOD included); the last document runs past the row.
LENGTHS = [300, 420, 310, 500, 800, 900, 700, 400]
BUGGY_DOCUMENT = 3  # starts at slot 1,030


def documents():
    out = []
    for k, length in enumerate(LENGTHS):
        tokens = [1 + (k * 131 + t) % 997 for t in range(length - 1)] + [EOD]
        tokens = [t if t != 99 else 98 for t in tokens]  # 99 is the padding id
        out.append({"record": "document", "doc_uid": f"doc{k}", "tokens": tokens, "supervised": [1] * length})
    return out


def row(docs):
    input_ids, positions, doc_ids, spans = [], [], [], []
    position = 0
    for k, doc in enumerate(docs):
        take = min(len(doc["tokens"]), ROW - len(input_ids))
        if take <= 0:
            break
        if k != BUGGY_DOCUMENT:
            position = 0
        spans.append({"doc_uid": doc["doc_uid"], "start": len(input_ids), "length": take, "doc_offset": 0})
        for t in range(take):
            input_ids.append(doc["tokens"][t])
            positions.append(position)
            doc_ids.append(k)
            position += 1
        last = (doc, take)
    doc, take = last
    labels = input_ids[1:] + [doc["tokens"][take]]
    loss_mask = [0 if t == EOD else 1 for t in input_ids]
    return {"input_ids": input_ids, "labels": labels, "loss_mask": loss_mask, "position_ids": positions,
            "doc_ids": doc_ids, "doc_spans": spans}


def write(path):
    header = {"record": "header", "schema": "packed-batch", "version": 1,
              "producer": {"system": "packoracle-browser-checks", "component": "long_row.py"},
              "special_ids": {"pad": 99, "bos": None, "eos": None, "eod": EOD}, "dp_world_size": 1,
              "grad_accum_steps": 1, "policy": {"preset": "megatron-gpt-docmask", "pad_id": 99}}
    docs = documents()
    micro = {"record": "microbatch", "step": 0, "micro_step": 0, "rank": 0, "rows": [row(docs)]}
    with open(path, "w") as f:
        for record in [header, *docs, micro]:
            f.write(json.dumps(record, separators=(",", ":")) + "\n")
    return path


if __name__ == "__main__":
    import sys
    write(sys.argv[1])
