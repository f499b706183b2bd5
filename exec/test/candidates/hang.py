#!/usr/bin/env python3
"""Fault: never answers a request (only the first, with --once MARKER): sleeps past any timeout."""
import time

from reference_packer import serve


def hang(request):
    time.sleep(3600)


serve(hang)
