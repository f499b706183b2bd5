"""The family side of ``_remote.FamilyPacker``: ``python -m packoracle.conformance._worker ADAPTER``, run by a
family venv's interpreter (ADAPTER: an adapter's name, or "module:factory" for a packer outside
packoracle.adapters, importable from the worker's path). It first writes ``{"record": "ready", "version", "unavailable"}`` (the library as this
venv sees it), then answers each ``request`` line with the adapter's real packer: its micro-batches as
``microbatch`` lines (the library's rows, as lists) and an ``end`` line, or an ``error`` line when the packer
refuses. When the library raises, the traceback goes to stderr and the worker exits 1: a crash (DESIGN §6)."""

from __future__ import annotations

import importlib
import json
import sys
import traceback
from typing import Any, Callable, Optional, TextIO, cast

from .. import adapters
from .._fuzz import Refuse
from ._remote import CRASH_MARKER, jsonable


def _write(out: TextIO, record: dict) -> None:
    out.write(json.dumps(record) + "\n")
    out.flush()


def _answer_records(answer: Any, request_id: Any) -> list[dict]:
    """The packer's answer as protocol lines: each micro-batch (a microbatch record, or a batch in the library's
    own field names) one line, then the end line."""
    batches = answer if isinstance(answer, (list, tuple)) else [answer]
    lines = [dict(jsonable(b), record=b.get("record", "microbatch")) if isinstance(b, dict) else
             {"record": "microbatch", "rows": jsonable(b)} for b in batches]
    return lines + [{"record": "end", "id": request_id}]


def _packer(name: str, stdout: TextIO) -> Optional[Callable[[dict], Any]]:
    """The packer to serve, after the ready line: an adapter's (None when its library cannot run here), or, for
    "module:factory", what that factory returns (a packer outside packoracle.adapters: the tests' own)."""
    if ":" in name:
        module, factory = name.split(":", 1)
        _write(stdout, {"record": "ready", "version": None, "unavailable": None})
        return cast("Callable[[], Callable[[dict], Any]]", getattr(importlib.import_module(module), factory))()
    adapter = adapters.get(name)
    unavailable = adapter.unavailable()
    _write(stdout, {"record": "ready", "version": adapter.installed_version(), "unavailable": unavailable})
    if unavailable is not None:
        return None
    packer = adapter.packer()
    if packer is None:
        raise SystemExit(f"_worker: adapter {name!r} has no packer")
    return packer


def serve(name: str, stdin: TextIO, stdout: TextIO) -> int:
    packer = _packer(name, stdout)
    if packer is None:
        return 0
    for line in stdin:
        request = json.loads(line)
        try:
            answer = packer(request)
        except Refuse as e:
            _write(stdout, {"record": "error", "id": request.get("id"), "message": str(e) or "refused"})
            continue
        except Exception:
            print(CRASH_MARKER, file=sys.stderr)
            traceback.print_exc(file=sys.stderr)
            sys.stderr.flush()
            return 1
        for record in _answer_records(answer, request.get("id")):
            _write(stdout, record)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m packoracle.conformance._worker ADAPTER")
    # The protocol keeps the real stdout; whatever the library prints (Python or C) goes to stderr instead.
    import os

    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    sys.exit(serve(sys.argv[1], sys.stdin, protocol))
