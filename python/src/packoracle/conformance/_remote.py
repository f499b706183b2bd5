"""A packer that lives in a family environment (``_envs``), driven from the main one over the exec protocol's
framing (DESIGN §6): one ``request`` line in; ``microbatch`` lines and an ``end`` line out, or an ``error`` line
(a refusal). The worker (``_worker``, run by the family venv's interpreter) calls the adapter's real packer
there; what comes back are the library's rows as lists, in its own field names, exactly what the packer returns
in-process, so ``packoracle.fuzz`` reads them as it reads an in-process answer (doc_spans derived by the kit).

A library that raises makes the worker write its traceback to stderr and exit 1 (a crash, a failure of that
case, as §6 says); the packer here raises it with that traceback, and the next request starts a new worker.
Anything that stops an exchange half-way (the fuzz deadline's interrupt) kills the worker for the same reason.
"""

from __future__ import annotations

import atexit
import json
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from typing import IO, Any, Optional

import numpy as np

from .._fuzz import Refuse

# The line the worker writes to stderr before a library's traceback (what comes before it: import warnings).
CRASH_MARKER = "packoracle-worker: the library raised:"


def jsonable(value: Any) -> Any:
    """Tensors, arrays and numpy scalars as lists and numbers, recursively (JSON's own types left as they are)."""
    if hasattr(value, "detach") and hasattr(value, "tolist"):  # a torch tensor, without importing torch
        return value.detach().cpu().tolist()
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


_SHIM: list[str] = []


def packoracle_shim() -> str:
    """A folder holding packoracle alone (a link to this package), for a family interpreter's PYTHONPATH: the main
    venv's libraries must not leak into the family's. It is called site-packages so that a traceback's paths are
    cut as every installed package's are (conformance.portable). One per process, removed at exit."""
    if not _SHIM:
        root = tempfile.mkdtemp(prefix="packoracle-family-")
        atexit.register(shutil.rmtree, root, ignore_errors=True)
        package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        os.makedirs(os.path.join(root, "site-packages"))
        os.symlink(package, os.path.join(root, "site-packages", "packoracle"))
        _SHIM.append(os.path.join(root, "site-packages"))
    return _SHIM[0]


def served_command(python: str, role: str, name: str) -> str:
    """The shell command that serves the role ``name`` names (``_served``: an adapter's reducer, an fla op's
    consumer) with ``python``, a family venv's interpreter, over the exec protocol: what
    ``packoracle.fuzz(exec_reducer=..., exec_consumer=...)`` runs. ``role``: exec_server's flag without its
    dashes ("reducer", "microbatch-consumer"). The environment is the worker's (packoracle alone on the path)."""
    return (f"env -u VIRTUAL_ENV PYTHONNOUSERSITE=1 PYTHONPATH={shlex.quote(packoracle_shim())} "
            f"{shlex.quote(python)} -m packoracle.exec_server --{role} "
            f"{shlex.quote('packoracle.conformance._served:' + name)}")


def without_machine(text: str, command: str) -> str:
    """``text`` (a failure's report) with a served_command written as its portable part: the family venv's
    interpreter and the folder on its path are this machine's (the page must read the same everywhere)."""
    portable = command[command.index(" -m packoracle.exec_server "):].replace(" -m ", "python -m ", 1)
    return text.replace(command, portable)


class FamilyPacker:
    """The packer of adapter ``name`` in the venv of ``python``: callable as an in-process packer is.

    ``ready()`` starts the worker and returns its first line: {"version", "unavailable"} as the family venv sees
    the library. ``close()`` ends the worker (the conformance runner calls it after the adapter's row)."""

    def __init__(self, python: str, name: str, path: Sequence[str] = ()) -> None:
        """``name``: the adapter (or "module:factory", see _worker); ``path``: more folders for the worker's
        sys.path, after packoracle's (where a "module:factory" packer lives)."""
        self.python, self.name, self.path = python, name, tuple(path)
        self._process: Optional[subprocess.Popen] = None
        self._stderr: Optional[IO[str]] = None
        self._shim = packoracle_shim()
        self._ready: Optional[dict] = None

    def ready(self) -> dict:
        if self._process is None:
            self._start()
        assert self._ready is not None  # _start sets it or raises
        return self._ready

    def _start(self) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join((self._shim,) + self.path), PYTHONNOUSERSITE="1")
        env.pop("VIRTUAL_ENV", None)
        self._stderr = tempfile.TemporaryFile("w+")
        self._process = subprocess.Popen([self.python, "-m", "packoracle.conformance._worker", self.name],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                         text=True, bufsize=1, env=env)
        line = self._read_line()
        record = json.loads(line)
        if record.get("record") != "ready":
            raise RuntimeError(f"the {self.name} worker's first line is not a ready record: {line[:200]!r}")
        self._ready = {"version": record.get("version"), "unavailable": record.get("unavailable")}

    def _read_line(self) -> str:
        assert self._process is not None and self._process.stdout is not None
        line = self._process.stdout.readline()
        if line:
            return line
        status = self._process.wait()
        self._process = None
        raise RuntimeError(f"the worker of {self.name} in its family environment exited with status {status}:\n"
                           + self._crash_text())

    def _crash_text(self) -> str:
        assert self._stderr is not None
        self._stderr.seek(0)
        text = self._stderr.read()
        self._stderr.close()
        self._stderr = None
        return text.split(CRASH_MARKER, 1)[1].lstrip() if CRASH_MARKER in text else text[-4000:]

    def __call__(self, request: dict) -> list:
        if self._process is None:
            self._start()
        try:
            return self._exchange(request)
        except Refuse:  # a whole answer: the worker waits for the next request
            raise
        except BaseException:
            if self._process is not None:  # stopped half-way: the worker's next line would be this answer's
                self.close()
            raise

    def _exchange(self, request: dict) -> list:
        assert self._process is not None and self._process.stdin is not None
        self._process.stdin.write(json.dumps(dict(jsonable(request), record="request")) + "\n")
        self._process.stdin.flush()
        answer: list[dict] = []
        while True:
            record = json.loads(self._read_line())
            kind = record.pop("record", None)
            if kind == "end":
                return answer
            if kind == "error":
                raise Refuse(record.get("message", "refused"))
            answer.append(dict(record, record=kind) if kind is not None else record)

    @property
    def pid(self) -> Optional[int]:
        """The worker's process id (None before it starts and after it ends)."""
        return None if self._process is None else self._process.pid

    def close(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
