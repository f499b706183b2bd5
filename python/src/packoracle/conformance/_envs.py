"""The family environments: a library that cannot share the main venv (its pins conflict with transformers 5.24.0
or torch 2.13.0, or its plain install fails on CPU) runs in a venv of its own, built from
``requirements/<family>.lock`` and cached outside the clone.

    venv = ensure("verl")     # ~/.cache/packoracle/envs/verl-<hash of the lock and the recipe>/ (built once)

The cache key is the lock's requirement lines, the family's recipe and the interpreter's version, so editing a
pin builds a new venv (and removes the family's older ones) and never patches an old one. Building takes a file lock (two runs on one machine build once) and
writes ``complete`` last: a venv without it (a build that was interrupted) is removed and built again. pip's
own cache (``~/.cache/pip``) keeps the downloads, so a rebuilt venv costs the unpacking only.

The recipe is the one the main venv follows (scripts/python_tests.sh): torch 2.13.0 first and alone, then every
other version of the lock with ``--no-deps`` (the lock is a whole ``pip freeze``, so nothing is resolved again,
and a family whose distribution's own requirements cannot be met on CPU installs what it really imports).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Optional

# Bumped when the steps of _build change: every cached venv is then built afresh.
RECIPE = "1"
TORCH = "torch==2.13.0"


@dataclass(frozen=True)
class Family:
    """One environment: its lock (``requirements/<name>.lock``), whether torch goes first, and whether the lock
    holds an sdist whose build imports torch (deepspeed), which then builds in the venv itself.

    ``ignore_requires_python``: the lock holds a release whose Requires-Python excludes this interpreter although
    the code runs on it (megatron-core >= 0.17 declares 3.12 and ships cp311 wheels); pip then installs the lock
    with --ignore-requires-python. It is left out of the repr (the cache key of every other family is that repr,
    unchanged) and joins the key only where it is set (venv_dir)."""

    name: str
    torch: bool = True
    no_build_isolation: bool = False
    ignore_requires_python: bool = field(default=False, repr=False)

    @property
    def lock(self) -> str:
        return f"requirements/{self.name}.lock"


FAMILIES = {f.name: f for f in (
    Family("grain", torch=False),
    Family("litgpt"),
    Family("verl"),
    Family("openrlhf", no_build_isolation=True),
    Family("areal"),
    Family("fla"),
    Family("axolotl"),
    Family("llamafactory"),
    Family("megatron", ignore_requires_python=True),
)}


class EnvironmentUnavailable(Exception):
    """The family's venv cannot be had here (its lock is not found, or building it failed): why, in words."""


def cache_root() -> str:
    """Where the venvs live: $PACKORACLE_ENV_CACHE, else ~/.cache/packoracle/envs (outside any clone)."""
    return os.environ.get("PACKORACLE_ENV_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "packoracle",
                                                                  "envs")


def lock_path(family: Family) -> str:
    """The lock file: $PACKORACLE_REQUIREMENTS/<name>.lock, else requirements/<name>.lock in the working directory
    (CI runs from the repository root) or in the source tree this package was imported from."""
    candidates = [os.path.join(os.environ["PACKORACLE_REQUIREMENTS"], f"{family.name}.lock")] if os.environ.get(
        "PACKORACLE_REQUIREMENTS") else []
    candidates.append(os.path.abspath(family.lock))
    here = os.path.dirname(os.path.abspath(__file__))  # python/src/packoracle/conformance in a checkout
    candidates.append(os.path.normpath(os.path.join(here, "..", "..", "..", "..", family.lock)))
    for path in candidates:
        if os.path.isfile(path):
            return path
    raise EnvironmentUnavailable(f"{family.lock} is not found (run from the repository root, or set "
                                 f"PACKORACLE_REQUIREMENTS to the folder holding it)")


def venv_dir(family: Family) -> str:
    """The cached venv's folder: <cache root>/<name>-<16 hex digits of the key>. The key reads the lock's
    requirement lines only (its comments can change without a rebuild)."""
    with open(lock_path(family)) as f:
        lines = [line.split("#")[0].strip() for line in f]
    lock = "\n".join(line for line in lines if line)
    parts = [lock, repr(family), RECIPE, sys.version.split()[0]]
    if family.ignore_requires_python:  # only where set: the other families' keys stay what they were
        parts.append("--ignore-requires-python")
    key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]
    return os.path.join(cache_root(), f"{family.name}-{key}")


def _prune(venv: str) -> None:
    """Removes the family's other venvs (built from earlier locks), so that the cache holds one per family."""
    folder, name = os.path.split(venv)
    family = name.rsplit("-", 1)[0]
    for other in os.listdir(folder):
        path = os.path.join(folder, other)
        if other != name and other.rsplit("-", 1)[0] == family and os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
            with contextlib.suppress(OSError):
                os.remove(path + ".lock")


def python_of(venv: str) -> str:
    return os.path.join(venv, "bin", "python")


def ensure(name: str, log: Optional[Callable[[str], None]] = None) -> str:
    """The family's venv, built first if the cache does not hold it; EnvironmentUnavailable says why not."""
    if name not in FAMILIES:
        raise EnvironmentUnavailable(f"no family environment called {name!r}; there are: {', '.join(FAMILIES)}")
    family = FAMILIES[name]
    venv = venv_dir(family)
    if os.path.isfile(os.path.join(venv, "complete")):
        return venv
    os.makedirs(cache_root(), exist_ok=True)
    with _locked(venv + ".lock"):
        if os.path.isfile(os.path.join(venv, "complete")):  # built by another run while this one waited
            return venv
        shutil.rmtree(venv, ignore_errors=True)
        start = time.perf_counter()
        if log:
            log(f"conformance: building the {name} environment in {venv} from {lock_path(family)}")
        try:
            _build(family, venv)
        except subprocess.CalledProcessError as e:
            shutil.rmtree(venv, ignore_errors=True)
            tail = (e.stdout or "").strip().splitlines()[-3:]
            raise EnvironmentUnavailable(f"building the {name} environment failed ({' '.join(e.cmd[2:5])}...: "
                                         f"{' / '.join(tail)})") from None
        with open(os.path.join(venv, "complete"), "w") as f:
            f.write(f"built in {time.perf_counter() - start:.0f} s\n")
        _prune(venv)
        if log:
            log(f"conformance: the {name} environment took {time.perf_counter() - start:.0f} s")
    return venv


def _build(family: Family, venv: str) -> None:
    """python -m venv, torch first and alone (when the family has it), then the lock without resolving."""
    # The base interpreter, not this venv's: a venv made from inside a venv would otherwise point at it.
    base = getattr(sys, "_base_executable", sys.executable)
    _run([base, "-m", "venv", venv])
    pip = [python_of(venv), "-m", "pip", "install", "--quiet", "--progress-bar", "off"]
    if family.torch:
        _run(pip + [TORCH])
    if family.no_build_isolation:
        _run(pip + ["setuptools", "wheel"])
    _run(pip + ["--no-deps"] + (["--no-build-isolation"] if family.no_build_isolation else []) +
         (["--ignore-requires-python"] if family.ignore_requires_python else []) + ["-r", lock_path(family)])


def _run(command: list) -> None:
    subprocess.run(command, check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
