#!/usr/bin/env python3
"""Fault: closes its stdin, answers the request it has read and keeps running (only once, with --once MARKER)."""
import os
import sys
import time

from reference_packer import answer, serve


def close(request):
    print("closing stdin", file=sys.stderr, flush=True)
    os.close(0)  # before the answer: once the kit has the answer, the next request meets a closed pipe
    answer(request)
    time.sleep(3600)
    return True


serve(close)
