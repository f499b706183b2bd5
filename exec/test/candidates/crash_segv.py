#!/usr/bin/env python3
"""Fault: killed by SIGSEGV on a request (only the first, with --once MARKER)."""
import os
import resource
import signal
import sys

from reference_packer import serve


def crash(request):
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file
    print("about to crash on request %d" % request["id"], file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGSEGV)


serve(crash)
