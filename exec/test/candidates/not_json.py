#!/usr/bin/env python3
"""Fault: answers with a line that is not JSON (only the first request, with --once MARKER)."""
import sys

from reference_packer import serve


def chatter(request):
    sys.stdout.write("packing request %d...\n" % request["id"])
    sys.stdout.flush()
    return False  # then the real answer, which comes too late: the kit has stopped reading


serve(chatter)
