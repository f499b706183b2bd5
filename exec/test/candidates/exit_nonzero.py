#!/usr/bin/env python3
"""Fault: exits with status 3 on a request, after a message on stderr (only the first, with --once)."""
import sys

from reference_packer import serve


def leave(request):
    print("fatal: cannot pack request %d" % request["id"], file=sys.stderr, flush=True)
    sys.exit(3)


serve(leave)
