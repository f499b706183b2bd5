"""Every bug the conformance matrix states (packoracle.conformance.findings()) has an upstream-ready report:
docs/upstream/<library>-<finding>.md beside a standalone script of the same name, .py, that imports the
library and torch/numpy only (never packoracle: a maintainer upstream runs it as is), listed in
docs/upstream/README.md and linked from the committed matrix (docs/conformance.md). Whether each script fails
on the pinned release and passes with --with-fix is scripts/upstream_checks.sh's (the adapter venv, CI)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from packoracle import adapters, conformance

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = ROOT / "docs" / "upstream"
BUGS = [(where, f) for where, f in conformance.findings() if f.kind == "bug"]
REPORTS = sorted(p for p in UPSTREAM.glob("*.md") if p.name != "README.md")


def test_the_findings_table_has_bugs():
    assert len(BUGS) >= 10, BUGS


@pytest.mark.parametrize("where,finding", BUGS, ids=[w for w, _ in BUGS])
def test_every_bug_has_a_report_and_a_script(where, finding):
    assert finding.report, f"{where}: a bug without a report (Finding.report = 'docs/upstream/<library>-<finding>.md')"
    report = ROOT / finding.report
    assert report.parent == UPSTREAM and report.suffix == ".md", f"{where}: {finding.report} is not docs/upstream/*.md"
    assert report.is_file(), f"{where}: {finding.report} does not exist"
    assert report.with_suffix(".py").is_file(), f"{where}: {finding.report} has no script beside it"


def _linked_from_the_package() -> str:
    """Every place the package states a report: the findings' report fields and the adapters' notes."""
    return " ".join([f.report for _, f in conformance.findings()] + [a.notes for a in adapters.all_adapters()])


@pytest.mark.parametrize("report", REPORTS, ids=[p.name for p in REPORTS])
def test_every_report_is_stated_by_the_matrix_and_listed(report):
    name = f"docs/upstream/{report.name}"
    assert name in _linked_from_the_package(), f"{name}: no finding (nor an adapter's notes) links it"
    linked = f"(upstream/{report.name})" in (ROOT / "docs" / "conformance.md").read_text()
    assert linked, f"{name}: the committed docs/conformance.md does not link it (regenerate the matrix)"
    listed = f"]({report.name})" in (UPSTREAM / "README.md").read_text()
    assert listed, f"{name}: not in docs/upstream/README.md"
    assert report.with_suffix(".py").is_file(), f"{name}: no script beside it"


def _imports(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                "import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
            names.add(str(node.args[0].value))
    return names


SCRIPTS = sorted(UPSTREAM.glob("*.py"))


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_scripts_import_nothing_of_packoracle(script):
    imports = _imports(ast.parse(script.read_text(), filename=str(script)))
    kit = sorted(n for n in imports if n.split(".")[0] == "packoracle" or n.startswith("."))
    assert not kit, f"{script.name} imports {kit}: a report's script must run with the library alone"
    assert "packoracle" not in script.read_text(), f"{script.name} names packoracle"
    assert script.with_suffix(".md").is_file(), f"{script.name} has no report beside it"


def test_the_import_check_sees_packoracle():
    """The check above is not vacuous: it sees every way a script could import the kit."""
    for source in ("import packoracle", "from packoracle.adapters import get", "from . import x",
                   "import importlib; importlib.import_module('packoracle._core')"):
        assert any(n.split(".")[0] == "packoracle" or n.startswith(".") for n in _imports(ast.parse(source))), source
