"""The packoracle pytest plugin: fuzz your packer from a test, see the kit's report when it fails, and keep every
minimal failing case as a regression replayed first on the next run.

Installed with the package (the ``pytest11`` entry point ``packoracle``); without installing, load it with
``pytest -p packoracle.pytest_plugin``. In a test::

    def test_my_packer(packoracle_fuzz):
        packoracle_fuzz(my_packer, "reference")          # packoracle.fuzz with the options below as defaults

    @pytest.mark.packoracle(policy="hf-flatten", cases=200)
    def test_my_collator(packoracle_fuzz):
        result = packoracle_fuzz(my_collator_packer)      # policy and cases from the marker
        assert "targets" in result.checked

Options (command line, or the ini keys of the same name with underscores: ``packoracle_cases`` ...):

- ``--packoracle-cases N``: cases per fuzz call (default: packoracle.fuzz's, 1000);
- ``--packoracle-seed S``: the seed of the generated cases (default: packoracle.fuzz's fixed seed);
- ``--packoracle-regressions DIR``: where minimal failing cases are saved and replayed from (default
  ``.packoracle/regressions`` under the rootdir; a relative DIR is taken from the current directory on the
  command line, from the rootdir in the ini file; ``none`` neither saves nor replays).

A call at the defaults generates what ``packoracle fuzz`` generates: 1000 cases of every profile, sizes climbing
to rows of 8,192 slots and 512 documents a case; for a plain Python packer that is about 8 s of one core (some 130 cases/s).
For a quick test of small cases give ``max_row_length=16, max_documents=8`` (in the call or the marker), or
fewer cases.

What wins, most specific first: an argument of the ``packoracle_fuzz(...)`` call, the test's
``@pytest.mark.packoracle(...)``, the command line, the ini file, packoracle.fuzz's defaults.

A failing fuzz call raises ``packoracle.Counterexample`` (an AssertionError; ``pytest.raises`` catches it as
usual). The test's failure is pytest's own: the test's line, then the exception, whose message is the kit's
report (the broken invariant, the minimal case drawn, the ``Replay:`` line); packoracle's frames are left out
(``__tracebackhide__``). The plugin adds a ``packoracle`` section to that report: the invariant, the first
failing case and the shrink steps, the reproduce string and, through the fixture, the regression file saved or
replayed. This holds for any Counterexample a test raises, ``packoracle.fuzz`` called directly included.
Through the fixture the minimal case is also saved in the regressions directory (the fixtures/regressions
format) and, on later runs, every saved case of the same candidate name and policy is replayed before the
generated cases. The candidate name is the packer's ``__qualname__`` (the reducer's, without a packer), or the
``name=`` given to the call: give one to a lambda or a closure so that its regressions are kept apart from
other packers'. Requires pytest 7 or later.

Loading the plugin (every pytest session, where the package is installed) imports neither the C++ extension
packoracle._core nor numpy, torch or Hypothesis: the kit is imported inside the fixture, when a test uses it.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import warnings
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

import pytest

if TYPE_CHECKING:
    from ._fuzz import FuzzResult

DEFAULT_REGRESSIONS = os.path.join(".packoracle", "regressions")
_STATE = pytest.StashKey["_State"]()
# Per test: (the Counterexample the fixture raised, what the fixture did with its case), for the report section.
_NOTES = pytest.StashKey["list[tuple[BaseException, str]]"]()
# The title of the section a failing Counterexample adds to the test's report.
SECTION = "packoracle"


class PackoracleRegressionWarning(UserWarning):
    """A saved regression file that could not be replayed (unreadable, or written by another kit version)."""


class _State:
    def __init__(self, cases: Optional[int], seed: Optional[int], regressions: Optional[Path]):
        self.cases, self.seed, self.regressions = cases, seed, regressions
        self.saved: list[str] = []
        self.replayed = 0


# ---- options --------------------------------------------------------------------------------------------------

def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("packoracle", "packoracle: property-based checks of sequence packing")
    group.addoption("--packoracle-cases", dest="packoracle_cases", metavar="N", default=None,
                    help="cases per packoracle_fuzz call (default: ini packoracle_cases, else 1000)")
    group.addoption("--packoracle-seed", dest="packoracle_seed", metavar="S", default=None,
                    help="seed of the generated cases (default: ini packoracle_seed, else packoracle's fixed seed)")
    group.addoption("--packoracle-regressions", dest="packoracle_regressions", metavar="DIR", default=None,
                    help=f"where minimal failing cases are saved and replayed from (default: {DEFAULT_REGRESSIONS} "
                         f"under the rootdir; 'none' neither saves nor replays)")
    parser.addini("packoracle_cases", "cases per packoracle_fuzz call", default="")
    parser.addini("packoracle_seed", "seed of packoracle's generated cases", default="")
    parser.addini("packoracle_regressions", "directory of saved packoracle regressions, relative to the rootdir",
                  default="")


def _integer(value: Any, what: str, minimum: int) -> Optional[int]:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        number = int(str(value).strip(), 0)
    except ValueError:
        raise pytest.UsageError(f"{what}: expected an integer, got {value!r}") from None
    if number < minimum:
        raise pytest.UsageError(f"{what}: expected an integer >= {minimum}, got {number}")
    return number


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "packoracle(policy=None, cases=None, seed=None, **fuzz_options): defaults of the packoracle_fuzz fixture "
        "for this test (any keyword packoracle.fuzz takes)")
    cli, ini = config.getoption("packoracle_cases"), config.getini("packoracle_cases")
    cases = _integer(cli, "--packoracle-cases", 1) if cli is not None else _integer(ini, "ini packoracle_cases", 1)
    cli, ini = config.getoption("packoracle_seed"), config.getini("packoracle_seed")
    seed = _integer(cli, "--packoracle-seed", 0) if cli is not None else _integer(ini, "ini packoracle_seed", 0)
    cli, ini = config.getoption("packoracle_regressions"), config.getini("packoracle_regressions")
    if cli is not None:
        where, base = cli, Path(config.invocation_params.dir)
    elif ini:
        where, base = ini, config.rootpath
    else:
        where, base = DEFAULT_REGRESSIONS, config.rootpath
    regressions = None if where.strip().lower() == "none" else (base / where).resolve()
    config.stash[_STATE] = _State(cases, seed, regressions)


def pytest_report_header(config: pytest.Config) -> str:
    state = config.stash[_STATE]
    cases = state.cases if state.cases is not None else "default"
    seed = state.seed if state.seed is not None else "default"
    return f"packoracle: cases={cases}, seed={seed}, regressions={state.regressions or 'none'}"


# ---- the fixture ----------------------------------------------------------------------------------------------

def _name_of(obj: Any) -> str:
    return getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(obj).__name__


def _same_case(saved: dict, seen: dict) -> bool:
    keys = ("row_length", "micro_batch_rows", "dp_world_size", "policy", "documents", "target_losses")
    return all(_plain(saved.get(k)) == _plain(seen.get(k)) for k in keys)


def _plain(value: Any) -> Any:
    """A request's value as JSON would give it (arrays as lists), to compare a replayed case with a saved one."""
    return json.loads(json.dumps(value, default=lambda v: v.tolist() if hasattr(v, "tolist") else str(v)))


def _saved_check(saved: dict) -> dict:
    """The options a saved case was checked under beyond itself: its ``check`` object (optimizer_steps,
    select_top_fraction), as packoracle.fuzz's keywords; {} for a file without one."""
    check = saved.get("check")
    if not isinstance(check, dict):
        return {}
    return {k: check[k] for k in ("optimizer_steps", "select_top_fraction") if k in check}


def _saved_regressions(directory: Optional[Path], candidate: str, policy: dict) -> list[tuple[Path, dict]]:
    """The saved cases of this candidate and policy, in file-name order."""
    if directory is None or not directory.is_dir():
        return []
    out = []
    for path in sorted(directory.glob("*.json")):
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            warnings.warn(PackoracleRegressionWarning(f"packoracle: cannot read saved regression {path}: {e}"))
            continue
        if not isinstance(saved, dict) or saved.get("schema") != "packoracle-regression":
            continue
        request = saved.get("request")
        if not isinstance(request, dict):
            request = {}
        if saved.get("candidate") == candidate and _plain(request.get("policy")) == _plain(policy):
            out.append((path, saved))
    return out


class PackoracleFuzz:
    """The ``packoracle_fuzz`` fixture's value: ``packoracle_fuzz(packer, policy=None, **options)`` runs
    ``packoracle.fuzz(packer, policy, **options)`` with the test's marker and the session's options as
    defaults, replays the saved regressions of this packer and policy first, and saves the minimal failing
    case. Returns the FuzzResult; raises packoracle.Counterexample."""

    def __init__(self, state: _State, marker_options: dict, item: Optional[pytest.Item] = None):
        self._state = state
        self._marker = marker_options
        self._item = item
        self.last_result: Optional[FuzzResult] = None

    @property
    def regressions_dir(self) -> Optional[Path]:
        """Where failing cases are saved and replayed from (None: neither)."""
        return self._state.regressions

    def options(self, **explicit: Any) -> dict:
        """The keyword arguments a call with ``explicit`` ones hands to packoracle.fuzz."""
        options: dict = {}
        if self._state.cases is not None:
            options["cases"] = self._state.cases
        if self._state.seed is not None:
            options["seed"] = self._state.seed
        options.update(self._marker)
        options.update({k: v for k, v in explicit.items() if v is not None})
        if "time" in explicit and "cases" not in explicit and "cases" not in self._marker:
            options.pop("cases", None)  # a time budget given in the test is not cut short by --packoracle-cases
        return options

    def __call__(self, packer: Optional[Callable[[dict], Any]] = None, policy: Any = None,
                 **explicit: Any) -> FuzzResult:
        __tracebackhide__ = True
        import packoracle
        from ._policy import resolve

        options = self.options(policy=policy, **explicit)
        policy = options.pop("policy", None)
        if policy is None:
            raise TypeError("packoracle_fuzz: give a policy: packoracle_fuzz(packer, \"reference\") or "
                            "@pytest.mark.packoracle(policy=\"reference\") on the test")
        roles = (packer, options.get("reducer"), options.get("consumer"))
        options["name"] = options.get("name") or _name_of(next((f for f in roles if f is not None), packer))
        if options.get("reproduce") is not None or self._state.regressions is None:
            self.last_result = packoracle.fuzz(packer, policy, **options)
            return self.last_result
        directory = self._state.regressions
        self._replay_saved(packer, policy, resolve(policy), options, directory)
        try:
            self.last_result = packoracle.fuzz(packer, policy, save_regressions=str(directory), **options)
        except packoracle.Counterexample as e:
            if e.regression:
                self._state.saved.append(e.regression)
                self._note(e, f"regression: saved as {e.regression}; the next run replays it first (delete the "
                              f"file once it is no longer wanted)")
            raise
        return self.last_result

    def _note(self, e: BaseException, note: str) -> None:
        """What the fixture did with the failing case, for the report's packoracle section (the exception's own
        text stays the kit's report, the same as packoracle.fuzz's)."""
        if self._item is not None:
            self._item.stash.setdefault(_NOTES, []).append((e, note))

    def _replay_saved(self, packer: Optional[Callable[[dict], Any]], policy: Any, resolved: dict, options: dict,
                      directory: Path) -> None:
        __tracebackhide__ = True
        import packoracle

        base_options = {k: v for k, v in options.items() if k not in ("cases", "seed", "time")}
        for path, saved in _saved_regressions(directory, options["name"], resolved):
            # the schedule and selection the case failed under (saved only where not at their defaults)
            replay_options = {**_saved_check(saved), **base_options}
            seen: list = []
            recorder = None
            if packer is not None:
                user_packer: Callable[[dict], Any] = packer

                @functools.wraps(packer)  # the replay line and the report name the user's packer, not this
                def recorder(request: dict, _packer: Callable[[dict], Any] = user_packer, _seen: list = seen) -> Any:
                    _seen.append(request)
                    return _packer(request)
            try:
                packoracle.fuzz(recorder, policy, reproduce=saved.get("reproduce", ""), **replay_options)
            except packoracle.Counterexample as e:
                self._state.replayed += 1
                e.regression = str(path)
                self._note(e, f"regression: this is the saved regression {path}, replayed before the generated "
                              f"cases: it fails again")
                raise
            except ValueError as e:  # a reproduce string this kit (or these options) cannot replay
                warnings.warn(PackoracleRegressionWarning(
                    f"packoracle: cannot replay saved regression {path} ({e}); was it written with other options "
                    f"(max_row_length, decoder) or another kit version?"))
                continue
            if seen and not _same_case(saved.get("request") or {}, seen[0]):
                warnings.warn(PackoracleRegressionWarning(
                    f"packoracle: saved regression {path} replays as a different case than the one saved (other "
                    f"options, such as max_row_length, or another kit version): its case was not checked"))
                continue
            self._state.replayed += 1


@pytest.fixture
def packoracle_fuzz(request: pytest.FixtureRequest) -> PackoracleFuzz:
    """``packoracle_fuzz(packer, policy=None, **options)``: packoracle.fuzz with --packoracle-cases,
    --packoracle-seed and the test's ``@pytest.mark.packoracle(...)`` as defaults; replays the saved
    regressions first and saves the minimal failing case (see the plugin's docstring)."""
    marker_options: dict = {}
    for mark in reversed(list(request.node.iter_markers("packoracle"))):  # the closest marker wins
        if mark.args:
            if len(mark.args) > 1:
                raise TypeError("@pytest.mark.packoracle takes one positional argument, the policy")
            marker_options["policy"] = mark.args[0]
        marker_options.update(mark.kwargs)
    return PackoracleFuzz(request.config.stash[_STATE], marker_options, request.node)


# ---- the report -----------------------------------------------------------------------------------------------

@pytest.hookimpl(hookwrapper=True)  # the old-style wrapper: pytest 7 has no wrapper=True
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """A test that fails with a packoracle.Counterexample keeps pytest's own failure text (the test's line, the
    exception with the kit's report as its message: the broken invariant, the minimal case drawn, the replay
    line; packoracle.fuzz's frame is hidden by its ``__tracebackhide__``, as are the fixture's); the report gains
    a section with what the exception's attributes say and what the fixture did with the case."""
    outcome = yield
    report = outcome.get_result()
    stashed = item.stash.get(_NOTES, [])
    if stashed and call.when == "call":  # the fixture runs in the call: let its exceptions (and frames) go with it
        del item.stash[_NOTES]
    excinfo = call.excinfo
    if excinfo is not None and report.failed and _is_counterexample(excinfo.value):
        notes = [note for e, note in stashed if e is excinfo.value]
        report.sections.append((SECTION, _section(excinfo.value, notes)))


def _section(e: Any, notes: list[str]) -> str:
    """The packoracle section of a failing test's report: the Counterexample's attributes (not pieces of its
    text, which pytest shows above it in full) and, through the fixture, what became of the case."""
    found = f" (first failing case: {e.cases} of the run; shrunk in {e.shrinks} steps)" if e.cases else ""
    lines = [f"invariant: {e.invariant or 'none named'}{found}", f"reproduce: {e.reproduce}"]
    lines.extend(notes or ([f"regression: {e.regression}"] if e.regression else []))
    return "\n".join(lines) + "\n"


def _is_counterexample(value: BaseException) -> bool:
    # Without packoracle._fuzz loaded nothing raised a Counterexample: other projects' failures import nothing,
    # and a test that never used the kit leaves packoracle._core unloaded.
    fuzz = sys.modules.get("packoracle._fuzz")
    counterexample = getattr(fuzz, "Counterexample", None)
    return counterexample is not None and isinstance(value, counterexample)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is None or not (state.saved or state.replayed):
        return
    terminalreporter.section("packoracle")
    if state.replayed:
        terminalreporter.write_line(f"replayed {state.replayed} saved regression(s) from {state.regressions}")
    for path in state.saved:
        terminalreporter.write_line(f"saved the minimal failing case as {path} (replayed first on the next run)")
