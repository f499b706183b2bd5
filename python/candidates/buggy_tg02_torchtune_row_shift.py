#!/usr/bin/env python3
# BUGGY exec candidate, mimics bugzoo TG-02 torchtune-packed-label-shift (pytorch/torchtune PR #2613,
# "Incorrect Labels Shift for Packed Data"): samples were packed with UNSHIFTED labels (the token, -100 on
# unsupervised tokens and padding) and the recipes shifted the whole packed row,
# labels = hstack(labels[..., 1:], ignore_labels_cache), so each sample's last token targets the next sample's
# first token (a boundary target the torchtune-packed policy excludes; zoo INV-09).
# Packing, padding, input_pos, seq_lens and the loss are torchtune's, as in torchtune_packed.py. Run it with
#   packoracle fuzz --exec 'python3 python/candidates/buggy_tg02_torchtune_row_shift.py' --preset torchtune-packed
# and the kit reports `targets` on any pack holding two documents.
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import effective_documents, serve  # noqa: E402
from torchtune_packed import IGNORE, PackedDataset  # noqa: E402


def unshifted_sample(doc, policy):
    """Before PR #2613: labels aligned with the tokens (the recipe shifts later)."""
    ignore = policy["ignore_index"]
    return {"tokens": list(doc["tokens"]),
            "labels": [t if m else ignore for t, m in zip(doc["tokens"], doc["supervised"])],
            "refs": [(doc["uid"], k) for k in range(len(doc["tokens"]))], "uid": doc["uid"]}


def pack(request):
    policy = request["policy"]
    samples = [unshifted_sample(d, policy) for d in effective_documents(request)]
    ds = PackedDataset(samples, request["row_length"], policy["pad_id"], policy["overflow"] == "split", policy)
    rows = []
    for p in ds.packs:
        spans, start = [], 0
        for uid, k0, n in p["pieces"]:
            spans.append({"doc_uid": uid, "start": start, "length": n, "doc_offset": k0})
            start += n
        # THE BUG: the recipe shifts the packed row as a whole.
        labels = p["labels"][1:] + [IGNORE]
        refs = [ref if label != policy["ignore_index"] else None for ref, label in zip(p["refs"][1:] + [None], labels)]
        rows.append({"input_ids": p["tokens"], "labels": labels, "position_ids": p["input_pos"],
                     "seq_lens": p["seq_lens"], "doc_spans": spans, "_targets": refs})
    return rows


if __name__ == "__main__":
    serve(pack)
