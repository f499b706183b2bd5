"""A Python loss reducer or attention consumer served over the exec protocol (DESIGN §6, "Other roles"), so that
the kit drives a callable living in another interpreter (another venv, other library versions) exactly as it
drives one in-process: ``packoracle.fuzz(..., exec_reducer="CMD")`` or ``packoracle fuzz --exec-reducer CMD``.

In the other interpreter, either a script::

    import packoracle.exec_server
    def reducer(request): ...            # the same callable packoracle.fuzz(reducer=...) takes
    packoracle.exec_server.serve(reducer=reducer)

or without one: ``python -m packoracle.exec_server --reducer mymodule:reducer`` (``--consumer`` per row,
``--microbatch-consumer`` per micro-batch; several roles may be served by one process: records are dispatched
by kind; whatever the callables or their libraries print goes to stderr). The callables get what packoracle.fuzz
hands them in-process (rows as numpy arrays) and answer in the same forms; their answers are read by the same drivers (packoracle._drivers): a consumer's segment ids, dense
mask, mask function, mask_mod or BlockMask travel as the runs of visible keys they mean. An exception, or an
answer that is no answer, becomes an ``error`` record quoting it: the kit fails that case under the role's
invariant. Needs numpy and packoracle's Python sources, not the compiled core.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import IO, Any, Callable, Optional

import numpy as np

from ._drivers import _consumer_driver, _microbatch_consumer_driver, _reducer_driver


def _arrays(microbatch: dict) -> dict:
    """A §5 microbatch record as packoracle.fuzz hands it in-process: each row's per-token lists as numpy arrays
    (integers int64, real numbers float64); a list of objects (the spans) as it is."""
    rows = []
    for row in microbatch["rows"]:
        rows.append({name: np.asarray(value, dtype=np.float64 if any(isinstance(v, float) for v in value)
                                      else np.int64)
                     if isinstance(value, list) and all(isinstance(v, (int, float)) for v in value) else value
                     for name, value in row.items()})
    return dict(microbatch, rows=rows)


def _write(out: IO[str], record: dict) -> None:
    out.write(json.dumps(record) + "\n")


def _runs_record(runs: tuple, row: int) -> dict:
    offsets, begin, end, source = runs
    return {"record": "mask", "row": row, "runs": {"row_offsets": np.asarray(offsets).tolist(),
                                                   "run_begin": np.asarray(begin).tolist(),
                                                   "run_end": np.asarray(end).tolist(), "source": source}}


def _answer(request: dict, reducer: Optional[Callable[[dict], tuple]],
            consumer: Optional[Callable[..., tuple]], per_row: bool) -> list[dict]:
    """The records that answer one request (without ids)."""
    kind = request.get("record")
    if kind == "reduce_request" and reducer is not None:
        request = dict(request, microbatches=[_arrays(mb) for mb in request["microbatches"]],
                       cp_shards=[[[[tuple(c) for c in rank] for rank in row] for row in mb]
                                  for mb in request.get("cp_shards", [])])
        del request["record"], request["id"]
        status, value = reducer(request)
        if status != "ok":
            return [{"record": "error", "message": str(value)}]
        return [{"record": "totals", "totals": value}]
    if kind == "consume_request" and consumer is not None:
        microbatch = _arrays(request["microbatch"])
        if per_row:
            answers = []
            for row in microbatch["rows"]:
                status, value = consumer(row, request["policy"])
                if status != "ok":
                    return [{"record": "error", "message": str(value)}]
                answers.append(value)
        else:
            status, value = consumer(microbatch, request["policy"])
            if status != "ok":
                return [{"record": "error", "message": str(value)}]
            # A Computed answer's work (what the kernel computes, DESIGN §4 efficiency) has no record in the exec
            # protocol yet: its masks travel, its work is measured in-process only.
            answers = value[0] if isinstance(value, tuple) else value
        return [_runs_record(runs, r) for r, runs in enumerate(answers)]
    return [{"record": "error", "message": f"this server plays no role for a {kind!r} record"}]


def serve(*, reducer: Optional[Callable[[dict], Any]] = None, consumer: Optional[Callable[[dict, dict], Any]] = None,
          microbatch_consumer: Optional[Callable[[dict, dict], Any]] = None,
          stdin: Optional[IO[str]] = None, stdout: Optional[IO[str]] = None) -> None:
    """Serves the given roles over the exec protocol until stdin ends: one request line in, its answer out
    (flushed). ``reducer(request)``, ``consumer(row, policy)`` and ``microbatch_consumer(microbatch, policy)``
    are the callables packoracle.fuzz takes in-process. Raises TypeError for no role, or two consumers."""
    if reducer is None and consumer is None and microbatch_consumer is None:
        raise TypeError("serve: give reducer=, consumer= or microbatch_consumer=")
    if consumer is not None and microbatch_consumer is not None:
        raise TypeError("serve: give consumer= (per row) or microbatch_consumer= (per micro-batch), not both")
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    reduce = _reducer_driver(reducer) if reducer is not None else None
    consume = (_microbatch_consumer_driver(microbatch_consumer) if microbatch_consumer is not None
               else _consumer_driver(consumer) if consumer is not None else None)
    for line in stdin:
        request = json.loads(line)
        records = _answer(request, reduce, consume, per_row=consumer is not None)
        if records[-1:] == [] or records[-1]["record"] != "error":
            records.append({"record": "end"})  # an error record is the whole answer
        for record in records:
            record["id"] = request["id"]
            _write(stdout, record)
        stdout.flush()


def _callable(spec: str) -> Callable[..., Any]:
    """module:attribute (the module imported from the current directory or sys.path)."""
    module, _, name = spec.partition(":")
    if not module or not name:
        raise SystemExit(f"packoracle.exec_server: {spec!r} is not module:function")
    sys.path.insert(0, "")
    target: Any = importlib.import_module(module)
    for part in name.split("."):
        target = getattr(target, part)
    return target


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m packoracle.exec_server", description=__doc__.split("\n\n")[0])
    parser.add_argument("--reducer", help="module:function, a loss reducer (request -> totals per micro-batch)")
    parser.add_argument("--consumer", help="module:function, a per-row attention consumer (row, policy)")
    parser.add_argument("--microbatch-consumer", help="module:function, an attention consumer (microbatch, policy)")
    args = parser.parse_args(argv)
    protocol = _protocol_stdout()
    serve(reducer=_callable(args.reducer) if args.reducer else None,
          consumer=_callable(args.consumer) if args.consumer else None,
          microbatch_consumer=_callable(args.microbatch_consumer) if args.microbatch_consumer else None,
          stdout=protocol)


def _protocol_stdout() -> IO[str]:
    """The real stdout, kept for the protocol's lines alone; whatever the served library prints from then on
    (Python's print, a logger made at its import, C code writing to file descriptor 1) goes to stderr, where
    the kit keeps it as the child's stderr tail. A line of theirs on stdout would be a malformed answer."""
    import os

    sys.stdout.flush()
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return protocol


if __name__ == "__main__":
    main()
