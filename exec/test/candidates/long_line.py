#!/usr/bin/env python3
"""Fault: one line of --bytes N bytes (default 100 MiB) as the answer (only the first request, with --once)."""
import sys

from reference_packer import serve

SIZE = int(sys.argv[sys.argv.index("--bytes") + 1]) if "--bytes" in sys.argv else 100 << 20


def flood(request):
    out = sys.stdout.buffer
    out.write(b"{\"record\":\"microbatch\",\"padding\":\"")
    chunk = b"x" * (1 << 20)
    for _ in range(SIZE >> 20):
        out.write(chunk)
    out.write(b"\"}\n")
    out.flush()
    return True


serve(flood)
