#!/usr/bin/env python3
# BUGGY exec candidate, mimics bugzoo PO-01 llamafactory-neat-packing-no-position-ids (hiyouga/LlamaFactory
# PR #7318): neat_packing built the block-diagonal document mask from segment indices but left the model's
# default position_ids, arange(L) along the packed row, so every later document in a row got shifted RoPE
# positions (zoo INV-07). Everything else is the reference packer's (reference.py): documents isolated by
# doc_ids, labels and totals right. Run it with
#   packoracle fuzz --exec 'python3 python/candidates/buggy_po01_positions_not_reset.py' --preset reference
# and the kit reports `positions` on any row whose second document starts after slot 0.
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import serve  # noqa: E402
import reference  # noqa: E402


def pack(request):
    rows = reference.pack(request)
    for row in rows:
        row["position_ids"] = list(range(len(row["input_ids"])))  # THE BUG: the model's default positions
    return rows


if __name__ == "__main__":
    serve(pack)
