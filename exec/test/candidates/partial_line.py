#!/usr/bin/env python3
"""Fault: writes the beginning of a record, no newline, and exits with status 0 (only the first, with --once)."""
import os
import sys

from reference_packer import serve


def partial(request):
    sys.stdout.write("{\"record\":\"microbatch\",\"step\":0,\"ro")
    sys.stdout.flush()
    os._exit(0)


serve(partial)
