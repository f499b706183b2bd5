#!/usr/bin/env python3
"""Fault: answers a request under another id (only the first, with --once MARKER)."""
import sys

from reference_packer import serve


def wrong(request):
    sys.stdout.write("{\"record\":\"end\",\"id\":%d}\n" % (request["id"] + 1000))
    sys.stdout.flush()
    return True


serve(wrong)
