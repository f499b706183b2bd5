#!/usr/bin/env python3
"""Fault: answers at once, but hangs on any request holding a document of 4 tokens or more (a candidate
whose packing loop never ends on long documents). Used to check the adaptive deadline: once it has hung,
shrinking its hanging case costs about a second a step, not the whole --timeout."""
import time

from reference_packer import serve


def hang_on_long(request):
    if any(len(d["tokens"]) >= 4 for d in request["documents"]):
        time.sleep(3600)
    return False


serve(hang_on_long)
