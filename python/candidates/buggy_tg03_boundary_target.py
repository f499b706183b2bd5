#!/usr/bin/env python3
# BUGGY exec candidate, mimics bugzoo TG-03 torchtitan-boundary-target (pytorch/torchtitan PR #4075, "Mask loss
# at document boundaries"): with document packing the labels were the window shifted by one, label = x[1:], so the
# last token of each document (its EOS, when there is one) keeps a target: the first token of the next document
# in the row. Everything else is the reference packer's (reference.py); the denominator counts the extra
# targets too, as the buggy loss did (zoo INV-09, INV-13). Run it with
#   packoracle fuzz --exec 'python3 python/candidates/buggy_tg03_boundary_target.py' --preset reference
# and the kit reports `targets` on any row holding two documents.
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import serve  # noqa: E402
import reference  # noqa: E402


def pack(request):
    rows = reference.pack(request)
    for row in rows:
        starts = {(s["start"], s["doc_uid"]): s for s in row["doc_spans"]}
        for s in row["doc_spans"]:
            end = s["start"] + s["length"]
            nxt = [t for (start, _), t in starts.items() if start == end]
            if nxt and nxt[0]["doc_offset"] == 0:
                # THE BUG: label = x[1:] over the window keeps the prediction into the next document.
                row["labels"][end - 1] = row["input_ids"][end]
                row["_targets"][end - 1] = (nxt[0]["doc_uid"], 0)
    return rows


if __name__ == "__main__":
    serve(pack)
