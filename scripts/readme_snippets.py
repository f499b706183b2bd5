#!/usr/bin/env python3
"""Runs every Python snippet of a Markdown file (```python blocks) against the installed packoracle, each in a
fresh temporary folder, so that the README's examples are checked as a user would run them.

A block that defines a `test_` function is a pytest file: it is run with pytest. Any other block is a script,
run with the interpreter. An HTML comment on the line before a block states what must happen instead of a
pass:  <!-- snippet: fails "text" -->  (the run must fail, and its output must contain the text). A block
after <!-- snippet: skip --> is not run (for fragments that need the user's own code); the count of skipped
blocks is printed, and a block is never skipped silently.

An output block (a plain ``` block) after
  <!-- output: the python snippet above with "OLD" replaced by "NEW" -->
is what the previous Python block prints once OLD is replaced by NEW in it: that run must fail (the README shows
a failure), and every line of the block must match a line of its output, in order (an excerpt may skip lines;
"..." in a line matches any text; a line matches where the output holds it). So a README's shown output is the output of a real run, checked by CI.

Usage: readme_snippets.py README.md [docs/python.md ...]   (exit 0 when every block of every file behaves as
stated; a file without any Python block, named here, fails: it was named to be checked)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile

OUTPUT = re.compile(r'<!--\s*output: the python snippet above with "(?P<old>[^"]*)" replaced by "(?P<new>[^"]*)"\s*-->'
                    r'\s*\n```\n(?P<shown>.*?)```', re.S)
BLOCK = re.compile(r"(?:<!--\s*snippet:\s*(?P<directive>[^>]*?)\s*-->\s*\n)?```python\n(?P<code>.*?)```", re.S)


def snippets(markdown: str):
    for match in BLOCK.finditer(markdown):
        line = markdown.count("\n", 0, match.start("code"))
        yield line, (match.group("directive") or "").strip(), match.group("code")


def run(code: str, directory: str) -> subprocess.CompletedProcess:
    if re.search(r"^def test_", code, re.M):
        path = os.path.join(directory, "test_snippet.py")
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", path]
    else:
        path = os.path.join(directory, "snippet.py")
        command = [sys.executable, path]
    with open(path, "w") as f:
        f.write(code)
    return subprocess.run(command, cwd=directory, capture_output=True, text=True, timeout=600)


def shown_lines_match(shown: str, output: str) -> list[str]:
    """The lines of `shown` that do not match the output's lines in order ("..." matches any text); [] when all
    do."""
    lines, at = output.splitlines(), 0
    for k, want in enumerate(shown.splitlines()):
        pattern = re.compile(".*?".join(re.escape(part) for part in want.strip().split("...")))
        while at < len(lines) and not pattern.search(lines[at]):
            at += 1
        if at == len(lines):
            return shown.splitlines()[k:]
        at += 1
    return []


def check_outputs(markdown_path: str, markdown: str) -> tuple[int, int]:
    """Runs each output block's snippet; returns (ran, failed)."""
    ran = failures = 0
    for match in OUTPUT.finditer(markdown):
        where = f"{markdown_path}:{markdown.count(chr(10), 0, match.start('shown'))}"
        before = [code for line, _, code in snippets(markdown[:match.start()])]
        ran += 1
        if not before or match.group("old") not in before[-1]:
            print(f"{where}: FAILED (the snippet above has no {match.group('old')!r} to replace)", file=sys.stderr)
            failures += 1
            continue
        with tempfile.TemporaryDirectory() as directory:
            result = run(before[-1].replace(match.group("old"), match.group("new")), directory)
        output = result.stdout + result.stderr
        unmatched = shown_lines_match(match.group("shown"), output)
        ok = result.returncode != 0 and not unmatched
        print(f"{where}: {'ok' if ok else 'FAILED'} (the output shown is what the changed snippet prints)")
        if not ok:
            failures += 1
            print(f"first line shown that the run does not print: {unmatched[:1]}\n{output[-4000:]}", file=sys.stderr)
    return ran, failures


def check_file(markdown_path: str) -> tuple[int, int, int]:
    """Runs the blocks of one file; returns (ran, skipped, failed)."""
    with open(markdown_path) as f:
        markdown = f.read()
    failures = ran = skipped = 0
    for line, directive, code in snippets(markdown):
        where = f"{markdown_path}:{line}"
        if directive == "skip":
            skipped += 1
            print(f"{where}: skipped (<!-- snippet: skip -->)")
            continue
        expect = re.fullmatch(r'fails\s+"(?P<text>[^"]*)"', directive) if directive else None
        if directive and not expect:
            print(f"{where}: unknown snippet directive {directive!r}", file=sys.stderr)
            failures += 1
            continue
        ran += 1
        with tempfile.TemporaryDirectory() as directory:
            result = run(code, directory)
        output = result.stdout + result.stderr
        if expect:
            ok = result.returncode != 0 and expect.group("text") in output
            what = f"fails with {expect.group('text')!r}"
        else:
            ok = result.returncode == 0
            what = "passes"
        print(f"{where}: {'ok' if ok else 'FAILED'} ({what})")
        if not ok:
            failures += 1
            print(output[-4000:], file=sys.stderr)
    if ran + skipped == 0:
        print(f"{markdown_path}: no Python snippet found", file=sys.stderr)
        failures += 1
    outputs_ran, outputs_failed = check_outputs(markdown_path, markdown)
    return ran + outputs_ran, skipped, failures + outputs_failed


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    totals = [0, 0, 0]
    for path in argv[1:]:
        totals = [a + b for a, b in zip(totals, check_file(path))]
    ran, skipped, failures = totals
    print(f"{ran} snippet(s) run, {skipped} skipped, {failures} failed")
    return 1 if failures or ran == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
