#!/usr/bin/env python3
"""Checks that a block a command generates into a Markdown file is up to date: the text between
<!-- NAME:begin ... --> and <!-- NAME:end --> must equal the command's output (with --write, it is replaced).
NAME `-` is the whole file (a generated file committed, as python/src/packoracle/dump/schema.json).

Usage: generated_block.py FILE NAME [--write] -- COMMAND ARGS...   (exit 0 up to date, 1 differs, 2 bad use)
"""

from __future__ import annotations

import difflib
import re
import subprocess
import sys


def main(argv: list[str]) -> int:
    if "--" not in argv or argv.index("--") < 3:
        print(__doc__, file=sys.stderr)
        return 2
    split = argv.index("--")
    path, name, write = argv[1], argv[2], "--write" in argv[3:split]
    generated = subprocess.run(argv[split + 1:], capture_output=True, text=True, check=True).stdout
    text = open(path).read()
    if name == "-":
        block = re.match(r"()(.*)()", text, re.S)
        name = "whole-file"
    else:
        block = re.search(rf"(<!-- {re.escape(name)}:begin[^\n]*-->\n)(.*?)(<!-- {re.escape(name)}:end -->)", text,
                          re.S)
    if not block:
        print(f"{path}: no <!-- {name}:begin --> ... <!-- {name}:end --> block", file=sys.stderr)
        return 2
    if block.group(2) == generated:
        print(f"{path}: the {name} block is up to date")
        return 0
    if write:
        open(path, "w").write(text[:block.start(2)] + generated + text[block.end(2):])
        print(f"{path}: the {name} block rewritten")
        return 0
    sys.stdout.writelines(difflib.unified_diff(block.group(2).splitlines(True), generated.splitlines(True),
                                               f"{path} ({name} block)", " ".join(argv[split + 1:])))
    print(f"{path}: the {name} block differs from what the command prints; rerun with --write", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
