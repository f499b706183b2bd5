#!/usr/bin/env python3
"""Fault: abort() (SIGABRT) on a request (only the first, with --once MARKER)."""
import os
import resource
import sys

from reference_packer import serve


def crash(request):
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file
    print("assertion failed: rows >= 0", file=sys.stderr, flush=True)
    os.abort()


serve(crash)
