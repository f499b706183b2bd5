#!/usr/bin/env python3
"""Not a fault: writes --bytes N (default 8 MiB) of log on stderr for every request, then answers correctly."""
import sys

from reference_packer import serve

SIZE = int(sys.argv[sys.argv.index("--bytes") + 1]) if "--bytes" in sys.argv else 8 << 20
LINE = b"debug: still packing, nothing to see here " + b"." * 57 + b"\n"  # 100 bytes


def log(request):
    err = sys.stderr.buffer
    err.write(LINE * (SIZE // len(LINE)))
    err.write(b"last log line of request %d\n" % request["id"])
    err.flush()
    return False


serve(log)
