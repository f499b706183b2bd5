"""A Python loss reducer or attention consumer served over the exec protocol (DESIGN §6, "Other roles"), so that
the kit drives a callable living in another interpreter (another venv, other library versions) exactly as it
drives one in-process: ``packoracle.fuzz(..., exec_reducer="CMD")`` or ``packoracle fuzz --exec-reducer CMD``.

In the other interpreter, either a script::

    import packoracle.exec_server
    def reducer(request): ...            # the same callable packoracle.fuzz(reducer=...) takes
    packoracle.exec_server.serve(reducer=reducer)

or without one: ``python -m packoracle.exec_server --reducer mymodule:reducer`` (``--consumer`` per row,
``--microbatch-consumer`` per micro-batch, ``--value-consumer`` per-position outputs; several roles may be served
by one process: records are dispatched by kind; whatever the callables or their libraries print goes to stderr).
``--step-view`` (``serve(step_view=True)``), as ``packoracle.fuzz(step_view=True)``, hands the micro-batch and
value consumers a third argument, the packoracle.StepView of the request: ``emitted`` (the exec packer's own
record of the micro-batch, None where the packer is not an exec process) and ``layout``. A micro-batch
consumer's ``packoracle.Computed`` answer travels as a ``work`` record after its masks (DESIGN §4 efficiency),
and a value consumer asked for a gradient answers it from ``parameters()`` as in-process. The callables get what packoracle.fuzz
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
from ._values import StepView, parameters_of, value_consumer_driver


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


def _runs(runs: tuple) -> dict:
    offsets, begin, end, source = runs
    return {"row_offsets": np.asarray(offsets).tolist(), "run_begin": np.asarray(begin).tolist(),
            "run_end": np.asarray(end).tolist(), "source": source}


def _runs_record(runs: tuple, row: int) -> dict:
    return {"record": "mask", "row": row, "runs": _runs(runs)}


def _work_record(work: dict) -> dict:
    """A Computed answer's work (_masks.work_runs) as the `work` record that follows the masks (DESIGN §6)."""
    rows = work["rows"]
    return {"record": "work", "rows": None if rows is None else [_runs(r) for r in rows],
            "extra_rows": [_runs(r) for r in work["extra_rows"]]}


def step_of(request: dict) -> Callable[[dict], StepView]:
    """The step view of a request (its `layout` as the in-process one has it: cp_shards chunks as tuples), with
    the exec packer's own record of the micro-batch when the request carries one."""
    def view(layout: dict) -> StepView:
        layout = dict(layout, cp_shards=[[[tuple(c) for c in rank] for rank in row] for row in layout["cp_shards"]])
        return {"emitted": request.get("emitted"), "layout": layout}
    return view


class _Roles:
    """The callables served, each behind its driver (the value consumer's built on the request's step view, and
    with its parameters when a request asks for a gradient)."""

    def __init__(self, reducer: Optional[Callable[..., Any]], consumer: Optional[Callable[..., Any]],
                 microbatch_consumer: Optional[Callable[..., Any]], value_consumer: Optional[Callable[..., Any]],
                 step_view: bool):
        self.reduce = _reducer_driver(reducer) if reducer is not None else None
        self.consumer, self.microbatch_consumer, self.value_consumer = consumer, microbatch_consumer, value_consumer
        self.step_view = step_view
        self.parameters: Optional[list] = None

    def consume(self, request: dict) -> Callable[..., tuple]:
        if self.consumer is not None:
            return _consumer_driver(self.consumer)
        assert self.microbatch_consumer is not None
        return _microbatch_consumer_driver(self.microbatch_consumer, step_of(request) if self.step_view else None)

    def values(self, request: dict) -> Callable[[dict, dict, dict], tuple]:
        assert self.value_consumer is not None
        if request.get("gradient") and self.parameters is None:
            self.parameters = parameters_of(self.value_consumer, "packoracle.exec_server")
        return value_consumer_driver(self.value_consumer, self.parameters or [],
                                     step_of(request) if self.step_view else None)


def _values_answer(request: dict, roles: _Roles) -> list[dict]:
    """A value_request's records: one `values` record per row, then the `gradient` record when asked."""
    try:
        drive = roles.values(request)
    except (TypeError, ValueError) as e:
        return [{"record": "error", "message": str(e)}]
    ask = {"gradient": bool(request.get("gradient")), "slot_weights": request.get("slot_weights", []),
           "layout": request["layout"]}
    status, value = drive(_arrays(request["microbatch"]), request["policy"], ask)
    if status != "ok":
        return [{"record": "error", "message": str(value)}]
    rows, gradient = value
    records = [{"record": "values", "row": r, "values": row.tolist()} for r, row in enumerate(rows)]
    if gradient is not None:
        records.append({"record": "gradient", "parameter_gradient": np.asarray(gradient).tolist()})
    return records


def _answer(request: dict, roles: _Roles) -> list[dict]:
    """The records that answer one request (without ids)."""
    kind = request.get("record")
    reducer = roles.reduce
    per_row = roles.consumer is not None
    consumer = roles.consume(request) if roles.consumer is not None or roles.microbatch_consumer is not None else None
    if kind == "value_request" and roles.value_consumer is not None:
        return _values_answer(request, roles)
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
            status, value = consumer(microbatch, request["policy"], request.get("layout"))
            if status != "ok":
                return [{"record": "error", "message": str(value)}]
            if isinstance(value, tuple):  # a Computed answer: its masks, then what the kernel computes
                return [_runs_record(runs, r) for r, runs in enumerate(value[0])] + [_work_record(value[1])]
            answers = value
        return [_runs_record(runs, r) for r, runs in enumerate(answers)]
    return [{"record": "error", "message": f"this server plays no role for a {kind!r} record"}]


def serve(*, reducer: Optional[Callable[[dict], Any]] = None, consumer: Optional[Callable[[dict, dict], Any]] = None,
          microbatch_consumer: Optional[Callable[..., Any]] = None,
          value_consumer: Optional[Callable[..., Any]] = None, step_view: bool = False,
          stdin: Optional[IO[str]] = None, stdout: Optional[IO[str]] = None) -> None:
    """Serves the given roles over the exec protocol until stdin ends: one request line in, its answer out
    (flushed). ``reducer(request)``, ``consumer(row, policy)``, ``microbatch_consumer(microbatch, policy)`` and
    ``value_consumer(microbatch, policy)`` are the callables packoracle.fuzz takes in-process; ``step_view=True``
    hands the last two the step view as a third argument, as fuzz(step_view=True). Raises TypeError for no
    role, two consumers, or a step view no consumer takes."""
    if reducer is None and consumer is None and microbatch_consumer is None and value_consumer is None:
        raise TypeError("serve: give reducer=, consumer=, microbatch_consumer= or value_consumer=")
    if consumer is not None and microbatch_consumer is not None:
        raise TypeError("serve: give consumer= (per row) or microbatch_consumer= (per micro-batch), not both")
    if step_view and microbatch_consumer is None and value_consumer is None:
        raise TypeError("serve: step_view=True hands the step to microbatch_consumer= or value_consumer=: give one")
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    roles = _Roles(reducer, consumer, microbatch_consumer, value_consumer, step_view)
    for line in stdin:
        request = json.loads(line)
        records = _answer(request, roles)
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
    parser.add_argument("--value-consumer", help="module:function, a value consumer (microbatch, policy) -> "
                                                 "per-position outputs")
    parser.add_argument("--step-view", action="store_true",
                        help="hand the micro-batch and value consumers the step view (a third argument), as "
                             "packoracle.fuzz(step_view=True)")
    args = parser.parse_args(argv)
    protocol = _protocol_stdout()
    serve(reducer=_callable(args.reducer) if args.reducer else None,
          consumer=_callable(args.consumer) if args.consumer else None,
          microbatch_consumer=_callable(args.microbatch_consumer) if args.microbatch_consumer else None,
          value_consumer=_callable(args.value_consumer) if args.value_consumer else None,
          step_view=args.step_view, stdout=protocol)


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
