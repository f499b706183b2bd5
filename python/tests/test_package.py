"""The package as a user meets it: submodules reachable from ``import packoracle`` without importing them by
name (loaded on first use, so that ``import packoracle`` stays free of torch, transformers and Hypothesis), and
a Counterexample that carries how it was found (issue 25)."""

import subprocess
import sys
import textwrap

import pytest

import packoracle
from tests.packers import as_packer, pack_row_shifted

SUBMODULES = ("adapters", "conformance", "dump", "guard", "strategies")


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_import_packoracle_imports_no_heavy_dependency_and_no_submodule_it_does_not_need():
    out = _run("""
        import sys
        import packoracle
        print(sorted(m for m in ("torch", "transformers", "hypothesis", "packoracle.guard", "packoracle.adapters",
                                 "packoracle.conformance", "packoracle.strategies") if m in sys.modules))
    """)
    assert out.strip() == "[]"


def test_submodules_are_reachable_as_attributes_after_import_packoracle():
    out = _run("""
        import sys
        import packoracle
        assert "packoracle.guard" not in sys.modules
        assert callable(packoracle.guard.check_step)     # issue 25: this was an AttributeError
        assert sys.modules["packoracle.guard"] is packoracle.guard
        assert callable(packoracle.strategies.requests)
        assert callable(packoracle.dump.DumpWriter)
        assert packoracle.adapters.__name__ == "packoracle.adapters"
        assert packoracle.conformance.__name__ == "packoracle.conformance"
        assert {"adapters", "conformance", "dump", "guard", "strategies"} <= set(dir(packoracle))
        try:
            packoracle.no_such_name
        except AttributeError as e:
            assert "no_such_name" in str(e), e
        else:
            raise AssertionError("an unknown attribute must be an AttributeError")
        print("ok")
    """)
    assert out.strip() == "ok"


@pytest.mark.parametrize("name", SUBMODULES)
def test_each_submodule_is_the_module_of_that_name(name):
    import importlib

    assert getattr(packoracle, name) is importlib.import_module(f"packoracle.{name}")


def test_counterexample_says_after_how_many_cases_and_shrinks():
    with pytest.raises(packoracle.Counterexample) as info:
        packoracle.fuzz(as_packer(pack_row_shifted), "reference", cases=300)
    e = info.value
    assert isinstance(e.cases, int) and isinstance(e.shrinks, int)
    assert 1 <= e.cases <= 300, e.cases
    assert e.shrinks >= 1, e.shrinks  # the first failing case is never already the two-token minimum
    assert e.invariant == "targets" and e.request is not None and e.reproduce.startswith("v1:")
    again = packoracle.Counterexample("text", invariant=None, reproduce="v1:x", replay="r", request=None)
    assert (again.cases, again.shrinks) == (0, 0)  # built by hand: nothing counted


def test_conformance_is_a_console_script_of_its_own(monkeypatch, capsys):
    """`packoracle-conformance` (pyproject.toml [project.scripts]) is packoracle.conformance's command line, named
    so in its --help; installed, it is a script beside the interpreter, as `packoracle` is."""
    import importlib
    import re
    from pathlib import Path

    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    scripts = re.search(r"^\[project\.scripts\]\n((?:.*\n)*?)(?:\n|\Z)", pyproject, re.M)
    assert scripts, "pyproject.toml has no [project.scripts] table"
    entry = re.search(r'^packoracle-conformance = "([\w.]+):(\w+)"$', scripts.group(1), re.M)
    assert entry, scripts.group(1)
    main = getattr(importlib.import_module(entry.group(1)), entry.group(2))
    monkeypatch.setattr(sys, "argv", ["/venv/bin/packoracle-conformance", "--help"])
    with pytest.raises(SystemExit) as done:
        main()
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("usage: packoracle-conformance ")
    monkeypatch.setattr(sys, "argv", ["/src/packoracle/conformance/__main__.py", "--help"])  # python -m, the C++ door
    with pytest.raises(SystemExit):
        main()
    assert capsys.readouterr().out.startswith("usage: packoracle conformance ")

    import os
    script = os.path.join(os.path.dirname(sys.executable), "packoracle-conformance")
    if os.path.exists(script):  # the installed package (scripts/python_tests.sh), not a source checkout
        done = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("usage: packoracle-conformance ")
