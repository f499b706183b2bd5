"""The repository's documentation resolves: every relative link of the README and docs/ names a file that
exists, every "DESIGN §N" and "conventions §N.M" cited in the code or the docs names a section of the copies in
docs/, and the README stays a guide (under 300 lines, a working check in its first 60)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "bench" / "README.md", ROOT / "python" / "README.md",
         *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs" / "upstream").glob("*.md"))]
LINK = re.compile(r"\]\((?!https?://|mailto:|#)([^)\s#]+)(?:#[^)]*)?\)")
CITATION = re.compile(r"\b(DESIGN|conventions) §(\d+(?:\.\d+)*)")
SOURCES = ("*.md", "*.cc", "*.h", "*.py", "*.sh", "*.txt", "*.cmake")


def _sources():
    for pattern in SOURCES:
        for path in ROOT.rglob(pattern):
            parts = path.relative_to(ROOT).parts
            if parts[0].startswith(("build", ".")) or "node_modules" in parts:
                continue
            yield path


def _sections(page: Path) -> set[str]:
    """The numbers of a page's headings: "## 4. Invariants" gives "4", "### 2.1 transformers" gives "2.1"."""
    return {m.group(1) for m in re.finditer(r"^#+\s+(\d+(?:\.\d+)*)\.?\s", page.read_text(), re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_names_a_file(page):
    missing = [target for target in LINK.findall(page.read_text())
               if not (page.parent / target).exists()]
    assert not missing, f"{page.relative_to(ROOT)} links to files that do not exist: {missing}"


def test_every_section_citation_resolves():
    sections = {"DESIGN": _sections(ROOT / "docs" / "design.md"),
                "conventions": _sections(ROOT / "docs" / "conventions.md")}
    assert "4" in sections["DESIGN"] and "2.1" in sections["conventions"]  # the heading pattern reads both files
    unresolved = []
    for path in _sources():
        for match in CITATION.finditer(path.read_text(errors="replace")):
            document, number = match.groups()
            if number not in sections[document] and number.split(".")[0] not in sections[document]:
                unresolved.append(f"{path.relative_to(ROOT)}: {match.group(0)}")
    assert not unresolved, "citations of sections that do not exist:\n" + "\n".join(unresolved)


def test_the_readme_is_a_guide():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) < 300, f"README.md has {len(lines)} lines: reference belongs in docs/, figures in bench/"
    first_check = next(i for i, line in enumerate(lines) if "packoracle.fuzz(" in line)
    assert first_check < 60, f"the first working check starts at line {first_check + 1}"
