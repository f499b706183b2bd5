"""`import packoracle` loads the C++ extension packoracle._core only when the kit is used (issue 44 item 3): the
pytest plugin, loaded in every pytest session where the package is installed, imports nothing heavy until a test
uses the kit; a machine without the extension imports the package and writes dumps with packoracle.dump, and a
core-backed name there raises an ImportError that says what is missing and how to get it. Each check runs in a
fresh interpreter: this session has long since loaded everything."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import packoracle
from packoracle import _core

PACKAGE = Path(packoracle.__file__).resolve().parent
HEAVY = ("packoracle._core", "numpy", "torch", "hypothesis")


def _python(code: str, env: dict | None = None, cwd: Path | None = None) -> str:
    """Runs `code` in a fresh interpreter that imports the package from where this session does."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=300, env=env or _env_with(PACKAGE.parent), cwd=cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _env_with(*paths: Path) -> dict:
    """This environment with `paths` first on PYTHONPATH."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [*map(str, paths), env.get("PYTHONPATH")]))
    return env


def test_import_packoracle_loads_no_extension_and_no_numpy():
    out = _python(f"""
        import sys
        import packoracle
        print(sorted(m for m in {HEAVY!r} if m in sys.modules))
    """)
    assert out.strip() == "[]"


def test_every_public_name_resolves_and_loads_the_extension_only_then():
    out = _python("""
        import sys
        import packoracle
        assert set(packoracle.__all__) <= set(dir(packoracle)), set(packoracle.__all__) - set(dir(packoracle))
        assert "packoracle._core" not in sys.modules
        assert packoracle.Document.__module__ == "packoracle"       # dump/spans.py: no extension needed
        assert "packoracle._core" not in sys.modules
        from packoracle import check_batch                         # `from packoracle import X` resolves too
        assert "packoracle._core" in sys.modules
        assert check_batch is packoracle.check_batch
        for name in packoracle.__all__:
            assert getattr(packoracle, name) is not None, name
        classes = ("Counterexample", "Document", "FuzzResult", "Policy", "PolicyFit", "Refuse", "Report", "Violation")
        print(sorted({getattr(packoracle, name).__module__ for name in classes}))
        print(packoracle.__version__)
    """)
    modules, version = out.splitlines()
    assert modules == "['packoracle']"
    assert version == _core.__version__


def test_a_counterexample_reads_packoracle_counterexample_where_the_class_was_never_named():
    """The renaming to packoracle.X happens when the class's module is first loaded through the package, not
    only when the class itself is asked for: packoracle.fuzz raises one that reads so in a traceback."""
    out = _python("""
        import packoracle
        from tests.packers import as_packer, pack_row_shifted
        try:
            packoracle.fuzz(as_packer(pack_row_shifted), "reference", cases=50, max_row_length=16, max_documents=8)
        except AssertionError as e:
            print(f"{type(e).__module__}.{type(e).__qualname__}")
    """, env=_env_with(PACKAGE.parent, Path(__file__).resolve().parents[1]))  # and python/, for tests.packers
    assert out.strip() == "packoracle.Counterexample"


def test_version_is_the_extensions_and_the_installed_distributions():
    assert packoracle.__version__ == _core.__version__  # type: ignore[attr-defined]
    try:
        installed = importlib.metadata.version("packoracle")
    except importlib.metadata.PackageNotFoundError:
        return  # a source checkout: no distribution to compare with
    assert installed == _core.__version__  # type: ignore[attr-defined]


# ---- the pytest plugin --------------------------------------------------------------------------------------

PROBE = textwrap.dedent('''
    import json
    import sys


    def pytest_unconfigure(config):
        """After every hook of the session (reports, the terminal summary): what was loaded."""
        with open("loaded.json", "w") as f:
            json.dump({"plugin": "packoracle.pytest_plugin" in sys.modules,
                       "heavy": sorted(m for m in %r if m in sys.modules)}, f)
''' % (HEAVY,))

NO_KIT = textwrap.dedent('''
    import sys


    def test_passes_without_the_kit():
        assert "packoracle._core" not in sys.modules


    def test_fails_without_the_kit():  # the plugin's report hook sees a failure that is not a Counterexample
        assert 1 + 1 == 3
''')

WITH_KIT = textwrap.dedent('''
    from packers import as_packer, pack_reference


    def test_uses_the_fixture(packoracle_fuzz):
        result = packoracle_fuzz(as_packer(pack_reference), "reference", cases=20, max_row_length=16,
                                 max_documents=8)
        assert result.cases == 20
''')


def _run_pytest(directory: Path) -> tuple[subprocess.CompletedProcess, dict]:
    """pytest in a fresh interpreter with the plugin loaded as a user loads it (the entry point where the
    package is installed, else -p), and no other plugin that would import Hypothesis or numpy itself."""
    installed = any(ep.name == "packoracle" for ep in importlib.metadata.entry_points(group="pytest11"))
    plugin = [] if installed else ["-p", "packoracle.pytest_plugin"]
    command = [sys.executable, "-m", "pytest", *plugin, "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
               "-p", "no:benchmark", "-q", "-rA", "--rootdir", str(directory), str(directory)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=directory,
                          env=_env_with(PACKAGE.parent))
    return done, json.loads((directory / "loaded.json").read_text())


def test_a_pytest_session_that_never_uses_the_kit_loads_nothing_heavy(tmp_path):
    (tmp_path / "conftest.py").write_text(PROBE)
    (tmp_path / "test_no_kit.py").write_text(NO_KIT)
    done, loaded = _run_pytest(tmp_path)
    assert "1 failed, 1 passed" in done.stdout, done.stdout + done.stderr
    assert "assert (1 + 1) == 3" in done.stdout  # pytest's own report of a plain failure, untouched
    assert loaded == {"plugin": True, "heavy": []}, loaded


def test_a_test_using_the_fixture_loads_the_kit_and_passes(tmp_path):
    """The same probe sees the extension once a test uses the kit: the check above is not vacuous."""
    (tmp_path / "conftest.py").write_text(PROBE)
    (tmp_path / "packers.py").write_text((Path(__file__).parent / "packers.py").read_text())
    (tmp_path / "test_with_kit.py").write_text(WITH_KIT)
    done, loaded = _run_pytest(tmp_path)
    assert "1 passed" in done.stdout, done.stdout + done.stderr
    assert loaded["plugin"] and "packoracle._core" in loaded["heavy"], loaded


# ---- without the extension ----------------------------------------------------------------------------------

WITHOUT_CORE = '''
    import json
    import sys

    try:
        import packoracle._core
    except ImportError as e:
        print("no extension:", e, file=sys.stderr)
    else:
        raise AssertionError(f"the extension is importable here: {packoracle._core.__file__}")

    import packoracle
    import packoracle.dump
    from packoracle.dump import DocumentSequence, DumpWriter, from_hf_flatten, make_policy, validate_lines

    documents = DocumentSequence([{"doc_uid": "a", "tokens": [11, 12, 13]}, {"doc_uid": "b", "tokens": [21, 22]}])
    batch = {"input_ids": [[11, 12, 13, 21, 22]], "labels": [[-100, 12, 13, -100, 22]],
             "position_ids": [[0, 1, 2, 0, 1]]}
    with DumpWriter("dump.jsonl") as w:
        w.header(system="huggingface/transformers", component="DataCollatorWithFlattening", version="5.24.0",
                 policy=make_policy("hf-flatten"), special_ids={"pad": 0})
        w.documents(documents.documents)
        w.write(from_hf_flatten(batch, documents))
    with open("dump.jsonl") as f:
        records = validate_lines(f)
    spans = [(s["doc_uid"], s["start"], s["length"]) for s in records[-1]["rows"][0]["doc_spans"]]
    assert [r["record"] for r in records] == ["header", "document", "document", "microbatch"], records
    assert spans == [("a", 0, 3), ("b", 3, 2)], spans
    assert packoracle.Document("c", [1, 2]).tokens == [1, 2]

    out = {}
    for name in ("check_batch", "fuzz", "Counterexample", "__version__"):
        try:
            getattr(packoracle, name)
        except ImportError as e:
            out[name] = str(e)
        else:
            out[name] = None
    try:
        from packoracle import verify
    except ImportError as e:
        out["from packoracle import verify"] = str(e)
    print(json.dumps({"messages": out, "loaded": sorted(m for m in ("packoracle._core", "numpy")
                                                                  if sys.modules.get(m) is not None)}))
'''


def _without_core_by_absence(tmp_path: Path) -> tuple[str, dict]:
    """A copy of the package without the extension's files, first on the path: as a wheel without _core."""
    shutil.copytree(PACKAGE, tmp_path / "site" / "packoracle",
                    ignore=shutil.ignore_patterns("_core*", "__pycache__", ".mypy_cache"))
    return WITHOUT_CORE, _env_with(tmp_path / "site")


def _without_core_by_blocking(tmp_path: Path) -> tuple[str, dict]:
    """The package where it is, its extension made unimportable (None in sys.modules: ImportError)."""
    return "import sys\nsys.modules['packoracle._core'] = None\n" + textwrap.dedent(WITHOUT_CORE), \
        _env_with(PACKAGE.parent)


@pytest.mark.parametrize("setup", [_without_core_by_absence, _without_core_by_blocking], ids=["absent", "blocked"])
def test_the_package_and_the_dump_writer_work_without_the_extension(tmp_path, setup):
    code, env = setup(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    answer = json.loads(_python(code, env=env, cwd=work).splitlines()[-1])
    assert answer["loaded"] == [], answer  # the dump writer needs neither the extension nor numpy
    messages = answer["messages"]
    for name in ("check_batch", "fuzz", "Counterexample", "from packoracle import verify"):
        message = messages[name]
        assert message is not None, f"{name} resolved without the extension"
        assert "needs packoracle's C++ extension packoracle._core, which is not built or not installed here" \
            in message, message
        assert "`pip install .` in a packoracle checkout builds and installs it" in message, message
        assert "packoracle.dump and packoracle.Document work without it" in message, message
    assert messages["check_batch"].startswith("packoracle.check_batch needs "), messages["check_batch"]
    assert messages["from packoracle import verify"].startswith("packoracle.verify needs ")
    try:  # without the extension the version is the installed distribution's, where there is one
        installed = importlib.metadata.version("packoracle")
    except importlib.metadata.PackageNotFoundError:
        assert messages["__version__"].startswith("packoracle.__version__ needs "), messages["__version__"]
    else:
        assert messages["__version__"] is None and installed == _core.__version__  # type: ignore[attr-defined]
