"""packoracle conformance: the kit against every real library in every configuration it has an adapter for.

For each adapter: a fixed-seed fuzz of its packer alone ("pack") and, when it has one, of its packer with its
loss reducer ("loss"), plus the realpack inputs (the two fixed inputs the realpack recordings use, on one rank
and on two). Each failure is matched with the adapter's examined Finding; the matrix is written as Markdown
(the README's table and a page with every counterexample drawn) and JSON. The output depends on nothing but
the installed libraries (no times, no paths), so CI regenerates it and compares it with the committed one.

    packoracle-conformance --markdown docs/conformance.md --readme README.md --readme docs/libraries.md
    packoracle-conformance --check docs/conformance.md --readme README.md --readme docs/libraries.md   # CI: fail on any change

(`packoracle-conformance`, the console script, is `python -m packoracle.conformance`; `packoracle conformance`
runs the latter.)

run() does the work (here), _render writes the Markdown and JSON, __main__ is the command line.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional, cast

from .. import _core
from .. import adapters as _adapters
from .._checks import check_step, verify
from .._fuzz import DEFAULT_TIMEOUT, Counterexample, Refuse, fuzz
from ..report import Report
from ._remote import without_machine

if TYPE_CHECKING:
    from ..adapters._base import Packer

DEFAULT_CASES = 300
DEFAULT_SEED = 20261201

# The realpack inputs (fixtures/realpack/README.md): set A is the lesson's shape, set B mixes lengths.
REALPACK_INPUTS = {
    "A": [[11, 12, 13], [21, 22, 23, 24, 25, 26]],
    "B": [[1, 2, 3, 4, 5], [6, 7], [8, 9, 10, 11, 12, 13, 14], [15]],
}
REALPACK_ROW_LENGTH = 8


@dataclass
class Outcome:
    """One fuzz of one role: "holds", "fails" (invariant, counterexample) or "cannot run" (why)."""

    verdict: str
    invariant: str = ""
    counterexample: str = ""
    reproduce: str = ""
    cases: int = 0
    seconds: float = 0.0


@dataclass
class Row:
    adapter: _adapters.Adapter
    version: Optional[str]
    unavailable: Optional[str]
    roles: dict = field(default_factory=dict)      # "pack"/"loss" → Outcome
    realpack: dict = field(default_factory=dict)   # "A·1 rank" → "holds" | "fails: inv" | "refused: ..."
    environment: str = "main"                      # the venv it ran in: "main" or a family's name (_envs)
    role_notes: dict = field(default_factory=dict)  # role → why it was not run although the library was

    def explanation(self, role: str) -> tuple[str, Optional[_adapters.Finding]]:
        """("explained"|"unexplained"|"stale"|"", finding) for one role."""
        outcome, finding = self.roles.get(role), self.adapter.findings.get(role)
        if outcome is None or outcome.verdict == "cannot run":
            return "", finding
        if outcome.verdict == "fails":
            if finding is not None and finding.invariant == outcome.invariant:
                return "explained", finding
            return "unexplained", finding
        return ("stale", finding) if finding is not None else ("", None)


# Where a traceback's files live on this machine: a venv's site-packages, a source tree's python/src, the
# interpreter's own lib/python3.X. Cut, so that the page reads the same on every machine.
_MACHINE_PATH = re.compile(r'File "(?:[^"]*/site-packages/|[^"]*/python/src/|[^"]*/lib/python3\.\d+/)')


# The kit's own frames: their line numbers move with every edit of the kit, the libraries' are pinned.
_KIT_LINE = re.compile(r'(File "packoracle/[^"]+"), line \d+,')


def portable(text: str) -> str:
    """A report with the machine's paths cut from its traceback lines (File "olmo_core/data/utils.py", ...) and
    the line numbers of the kit's own frames (File "packoracle/_fuzz.py", in drive), so that the page changes
    only when a verdict or a library does."""
    return _KIT_LINE.sub(r"\1,", _MACHINE_PATH.sub('File "', text))


# The deadline of each answer of a family row's roles: their process's first answer includes its start-up (an
# interpreter importing verl, ray and transformers: half a minute on a loaded 2-core machine).
FAMILY_TIMEOUT = 600.0


def _fuzz_role(adapter: _adapters.Adapter, role: str, cases: int, seed: int,
               packer: Optional[Packer] = None, exec_reducer: Optional[str] = None,
               reproduce: Optional[str] = None) -> Outcome:
    """One role fuzzed: `packer` is the adapter's own unless given (a family row's, driven in its venv); a
    family row's loss reducer is `exec_reducer`, the command serving it in its venv (_remote.served_command)."""
    packer = packer if packer is not None else adapter.packer()
    reducer = adapter.reducer() if role == "loss" and exec_reducer is None else None
    exec_reducer = exec_reducer if role == "loss" else None
    start = time.perf_counter()
    try:
        result = fuzz(packer, adapter.resolved_policy(), reducer=reducer, cases=cases, seed=seed,
                      max_row_length=adapter.max_row_length, max_documents=adapter.max_documents,
                      name=f"{adapter.name} ({role})", sft_masks=adapter.sft_masks, reproduce=reproduce,
                      exec_reducer=exec_reducer, timeout=FAMILY_TIMEOUT if adapter.family else DEFAULT_TIMEOUT)
    except Counterexample as e:  # the report without its replay line: the page prints its own
        if reproduce is not None:
            raise
        report = portable(e.report if exec_reducer is None else without_machine(e.report, exec_reducer))
        return Outcome("fails", e.invariant or "", report.rstrip() + "\n", e.reproduce, 0,
                       time.perf_counter() - start)
    return Outcome("holds", cases=result.cases, seconds=time.perf_counter() - start)


def _realpack_request(docs: list, dp: int, policy: dict) -> dict:
    documents = [{"doc_uid": f"d{k}", "tokens": list(t), "supervised": [1] * len(t)} for k, t in enumerate(docs)]
    return {"id": 0, "row_length": REALPACK_ROW_LENGTH, "micro_batch_rows": 1, "dp_world_size": dp,
            "policy": policy, "documents": documents, "target_losses": {}}


def _dump_verdict(adapter: _adapters.Adapter, request: dict, answer: Any, in_process: Report) -> str:
    """The adapter's packoracle.dump converter on the library's output, written as a dump and read by verify:
    "" when verify's verdict is the in-process one, else what differs."""
    import os
    import tempfile

    from ..dump import DumpWriter

    with tempfile.TemporaryDirectory(prefix="packoracle-conformance-") as tmp:
        path = os.path.join(tmp, "dump.jsonl")
        try:
            # _realpack calls this only for an adapter with a dump converter
            records = cast("Callable[[dict, Any], list]", adapter.dump)(request, answer)
            with DumpWriter(path) as w:
                w.header(system=adapter.system, component=adapter.configuration, version=adapter.installed_version(),
                         policy=dict(request["policy"]), dp_world_size=request["dp_world_size"])
                # As a dumper writes them: the documents as the system consumed them (its delimiters added).
                for d in _adapters.documents_of(request):
                    w.document(d["doc_uid"], d["tokens"], d["supervised"])
                for record in records:
                    w.write(dict(record, record="microbatch"))
            dumped = verify(path)
        except (TypeError, ValueError) as e:
            return f"the dump is refused: {e}"
    if dumped.ok == in_process.ok and _invariants(dumped) == _invariants(in_process):
        return ""
    return f"verify says {_invariants(dumped) or 'clean'}, in-process {_invariants(in_process) or 'clean'}"


def _invariants(report: Report) -> str:
    return ", ".join(sorted({v.invariant for v in report.violations}))


def _realpack(adapter: _adapters.Adapter, packer: Packer) -> dict:
    """The packer on the realpack inputs, each checked as one step by check_step (and, through the adapter's
    dump converter, by verify: the two verdicts must agree)."""
    policy = adapter.resolved_policy().to_dict()
    out = {}
    for name, docs in REALPACK_INPUTS.items():
        for dp in (1, 2):
            label = f"{name}·{dp} rank{'s' if dp > 1 else ''}"
            request = _realpack_request(docs, dp, policy)
            try:
                _core.effective_documents(request["documents"], policy)
            except ValueError as e:  # e.g. a token of the inputs is the policy's EOD id
                out[label] = f"not run: the inputs do not suit the policy ({e})"
                continue
            try:
                answer = packer(request)
            except Refuse as e:
                out[label] = f"refused: {e}"
                continue
            except Exception as e:  # the library raised: that is its verdict on this input
                out[label] = f"fails: the packer raised {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                continue
            try:
                report = check_step(answer, request["documents"], policy, dp_world_size=dp,
                                    row_length=REALPACK_ROW_LENGTH)
            except (TypeError, ValueError) as e:  # as fuzz reads such an answer: the shape invariant
                out[label] = f"fails: shape (the answer is not a packed batch: {str(e).splitlines()[0]})"
                continue
            out[label] = "holds" if report.ok else "fails: " + _invariants(report)
            if adapter.dump is not None:
                differs = _dump_verdict(adapter, request, answer, report)
                out[label] += f" (dump → verify: {differs})" if differs else " (dump → verify: same)"
    return out


def _apply_env(adapter: _adapters.Adapter) -> None:
    """The environment the adapter documents for a CPU user (values the user set already win). Torch's thread
    count is read once at start-up, so OMP_NUM_THREADS is applied to a torch already imported too: the kit's
    cases are tiny, and on a shared 2-core machine a thread pool costs more than it gives."""
    import os

    for key, value in adapter.env.items():
        os.environ.setdefault(key, value)
    if "OMP_NUM_THREADS" in adapter.env and "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def run(cases: int = DEFAULT_CASES, seed: int = DEFAULT_SEED, only: Sequence[str] = (),
        progress: Optional[Callable[[str], None]] = None) -> list[Row]:
    """Runs every adapter (or those named in `only`) and returns the matrix rows."""
    def named(a: _adapters.Adapter, n: str) -> bool:
        return n in (a.name, a.system) or a.name.startswith(n + "/")

    everything = _adapters.all_adapters()
    selected = [a for a in everything if not only or any(named(a, n) for n in only)]
    unknown = [n for n in only if not any(named(a, n) for a in everything)]
    if unknown:
        raise KeyError(f"conformance: no adapter or system called {', '.join(map(repr, unknown))}")
    rows = []
    for adapter in selected:
        row, roles = _row(adapter, progress)
        try:
            _run_roles(row, roles, cases, seed, progress)
        finally:
            roles.close()
        rows.append(row)
    return rows


@dataclass
class _Roles:
    """What a row's roles are driven with: its packer (in-process, or a family venv's worker) and, for a family
    row, the command serving its loss reducer in that venv; close() ends the worker."""

    packer: Optional[Packer] = None
    exec_reducer: Optional[str] = None
    close: Callable[[], None] = lambda: None


def _row(adapter: _adapters.Adapter, progress: Optional[Callable[[str], None]]) -> tuple[Row, _Roles]:
    _apply_env(adapter)
    if adapter.family:
        return _family_row(adapter, progress)
    row = Row(adapter, adapter.installed_version(), adapter.unavailable())
    return row, _Roles(adapter.packer() if row.unavailable is None else None)


def replay(name: str, role: str, reproduce: str) -> None:
    """Replays one failure of the matrix (the page's replay line): adapter ``name``'s ``role`` ("pack" or
    "loss") on the case of ``reproduce``, its library where the matrix runs it (a family row's in its venv,
    over the exec protocol). Raises the Counterexample; returns when the case passes."""
    adapter = _adapters.get(name)
    if role not in ("pack", "loss") or (role == "loss" and adapter.make_reducer is None):
        allowed = "'pack' or 'loss'" if adapter.make_reducer is not None else "'pack' (it has no loss reducer)"
        raise ValueError(f"replay: role must be {allowed} for {name}, got {role!r}")
    row, roles = _row(adapter, None)
    try:
        if row.unavailable is not None:
            raise RuntimeError(f"replay: {name} cannot run here: {row.unavailable}")
        _fuzz_role(adapter, role, 1, DEFAULT_SEED, roles.packer, roles.exec_reducer, reproduce=reproduce)
    finally:
        roles.close()


def _run_roles(row: Row, driven: _Roles, cases: int, seed: int,
               progress: Optional[Callable[[str], None]]) -> None:
    adapter = row.adapter
    roles = ["pack"] + (["loss"] if adapter.make_reducer is not None else [])
    for role in roles:
        if row.unavailable is not None or role in row.role_notes:
            row.roles[role] = Outcome("cannot run")
            continue
        row.roles[role] = _fuzz_role(adapter, role, cases, seed, driven.packer, driven.exec_reducer)
        if progress:
            o = row.roles[role]
            rate = f", {o.cases / o.seconds:.0f} cases/s" if o.cases and o.seconds > 0 else ""
            progress(f"{adapter.name} ({role}): {o.verdict} {o.invariant} [{o.seconds:.1f} s{rate}]")
    if row.unavailable is None and driven.packer is not None:
        row.realpack = _realpack(adapter, driven.packer)


def _family_row(adapter: _adapters.Adapter, progress: Optional[Callable[[str], None]]) -> tuple[Row, _Roles]:
    """The row of an adapter whose library lives in a family environment: that venv built (or found in the
    cache), the library's version and availability as it sees them, its packer driven there (a worker,
    _remote.FamilyPacker) and its loss reducer served there (packoracle.exec_server, fuzz's exec_reducer)."""
    from ._envs import EnvironmentUnavailable, ensure, python_of
    from ._remote import FamilyPacker, served_command

    try:
        venv = ensure(adapter.family, log=progress)
    except EnvironmentUnavailable as e:
        return Row(adapter, None, f"the {adapter.family} environment is not available: {e}",
                   environment=adapter.family), _Roles()
    remote = FamilyPacker(python_of(venv), adapter.name)
    try:
        ready = remote.ready()
    except RuntimeError as e:
        remote.close()
        return Row(adapter, None, f"its worker did not start in the {adapter.family} environment: "
                                  f"{str(e).strip().splitlines()[-1]}", environment=adapter.family), _Roles()
    row = Row(adapter, ready["version"], ready["unavailable"], environment=adapter.family)
    reducer = served_command(python_of(venv), "reducer", adapter.name) if adapter.make_reducer is not None else None
    return row, _Roles(remote if adapter.make_packer is not None else None, reducer, remote.close)


from ._consumers import replay_consumer  # noqa: E402,F401 (the page's replay line of a family consumer)
from ._render import counterexamples_page, matrix_table, splice_readme, to_json, unexplained  # noqa: E402


def findings() -> list[tuple[str, _adapters.Finding]]:
    """Every examined finding the matrix states, with where: each adapter's per role ("<adapter> (<role>)"), the
    consumer column's ("consumer F1", ...) and the mask builders' (family environments' included). A bug's
    ``report`` names its upstream-ready report in docs/upstream/ (python/tests/test_upstream_reports.py checks
    each exists, with its script)."""
    from ..adapters.mask_builders import BUILDERS
    from ..adapters.transformers_models import FINDINGS
    from ._consumers import family_builders

    out = [(f"{a.name} ({role})", f) for a in _adapters.all_adapters() for role, f in a.findings.items()]
    out += [(f"consumer F{k}", f) for k, f in enumerate(FINDINGS, 1)]
    out += [(b.name, b.finding) for b in BUILDERS + family_builders() if b.finding is not None]
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line (`packoracle conformance ARGS`) as a function; returns its exit code."""
    from .__main__ import main as command_line

    return command_line(argv)
