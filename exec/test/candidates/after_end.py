#!/usr/bin/env python3
"""Fault: more output after a complete answer: in the same write as the answer (--same) or a moment later."""
import sys
import time

from reference_packer import pack, serve

SAME = "--same" in sys.argv


def chatter(request):
    answer = "\n".join(pack(request)) + "\n"
    if SAME:
        sys.stdout.write(answer + "also this\n")  # one write of under 4 KiB: the kit reads it whole
        sys.stdout.flush()
    else:
        sys.stdout.write(answer)
        sys.stdout.flush()
        time.sleep(0.05)
        sys.stdout.write("also this\n")
        sys.stdout.flush()
    return True


serve(chatter)
