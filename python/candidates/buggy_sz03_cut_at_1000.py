#!/usr/bin/env python3
# BUGGY exec candidate, the kit's SZ-03: the tokenisation step ran with truncation=True, max_length=1000 (a
# default copied from an example), so a document longer than 1,000 tokens loses its tail before the
# reference packer sees it, silently (coverage). Invisible on small rows; a fuzz session that grows finds it:
#   packoracle fuzz --exec 'python3 python/candidates/buggy_sz03_cut_at_1000.py' --preset reference --time 90
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import serve  # noqa: E402
from reference import pack as reference_pack  # noqa: E402

MAX_LENGTH = 1000


def pack(request):
    cut = dict(request, documents=[dict(d, tokens=d["tokens"][:MAX_LENGTH],
                                        supervised=(d.get("supervised") or [1] * len(d["tokens"]))[:MAX_LENGTH])
                                   for d in request["documents"]])
    return reference_pack(cut)


if __name__ == "__main__":
    serve(pack)
