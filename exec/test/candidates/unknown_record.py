#!/usr/bin/env python3
"""Fault: answers with a record of an unknown type (only the first request, with --once MARKER)."""
import sys

from reference_packer import serve


def banana(request):
    sys.stdout.write("{\"record\":\"banana\",\"id\":%d}\n" % request["id"])
    sys.stdout.flush()
    return False


serve(banana)
