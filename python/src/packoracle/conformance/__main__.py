"""`packoracle-conformance` (the console script), `python -m packoracle.conformance` and `packoracle conformance`
(the C++ command line, which runs this module): see --help."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Optional

from .. import adapters as _adapters
from . import DEFAULT_CASES, DEFAULT_SEED, run
from ._consumers import DEFAULT_CONSUMER_CASES, README_BEGIN, README_END, consumer_table, consumers_section, \
    builders_table, family_builders, run_builders, run_consumers, unexplained_cells
from ._render import PAGE, README_BEGIN as MATRIX_BEGIN, counterexamples_page, matrix_table, splice_readme, to_json, \
    unexplained

if TYPE_CHECKING:
    from . import Row
    from ._consumers import Cell


_PROG = "packoracle-conformance"  # the console script's name (pyproject.toml [project.scripts])


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog=_PROG if os.path.basename(sys.argv[0]) == _PROG else "packoracle conformance",
        description="Run the kit against every real library adapter (packoracle.adapters) and write the matrix.",
        epilog="Exit codes: 0 every verdict is explained (and, with --check, the files are up to date); 1 a "
               "failure nobody explained, a finding no longer seen, or a file that differs; 2 bad arguments.")
    parser.add_argument("--cases", type=int, default=DEFAULT_CASES, help=f"generated cases per role (default {DEFAULT_CASES})")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"the fuzz seed (default {DEFAULT_SEED})")
    parser.add_argument("--consumer-cases", type=int, default=DEFAULT_CONSUMER_CASES,
                        help=f"generated cases per cell of the consumer column (default {DEFAULT_CONSUMER_CASES})")
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        help="an adapter (transformers/flatten), a system (trl), 'consumers' (the whole consumer "
                             "column) or a prefix of consumer cells (transformers/llama/sdpa); repeatable")
    parser.add_argument("--markdown", metavar="FILE", help="write the page with every counterexample here")
    parser.add_argument("--readme", metavar="FILE", action="append", default=[],
                        help="replace the tables between the conformance and consumers markers of this file (each "
                             "file holds either or both; links are made relative to it); repeatable")
    parser.add_argument("--json", metavar="FILE", help="write the matrix as JSON here ('-': standard output)")
    parser.add_argument("--check", metavar="FILE", help="compare with this committed page (and --readme) instead of writing")
    parser.add_argument("--list", action="store_true", help="list the adapters and whether each can run here, then exit")
    parser.add_argument("--envs", action="store_true",
                        help="build (or find in the cache) every family environment, print where and how long "
                             "each took, then exit (scripts/python_tests.sh --full runs this as its own stage)")
    args = parser.parse_args(argv)
    if args.cases < 1:
        parser.error(f"--cases must be a positive integer, got {args.cases}")
    if args.consumer_cases < 1:
        parser.error(f"--consumer-cases must be a positive integer, got {args.consumer_cases}")
    for path in args.readme:
        try:
            text = open(path).read()
        except OSError as e:
            parser.error(f"--readme {path}: {e.strerror}")
        if MATRIX_BEGIN not in text and README_BEGIN not in text:
            parser.error(f"--readme {path}: it holds neither the conformance nor the consumers markers")
    if args.envs:
        return _build_envs()
    if args.list:
        for a in _adapters.all_adapters():
            if a.family:  # its library is in a venv of its own: not imported here
                print(f"{a.name:40s} {a.written_for:10s} runs in the {a.family} environment (--envs builds it)")
                continue
            why = a.unavailable()
            print(f"{a.name:40s} {a.installed_version() or '-':10s} {'can run' if why is None else 'cannot run: ' + why}")
        from ..adapters.mask_builders import BUILDERS
        from ..adapters.transformers_models import ATTENTION, CACHE, FAMILIES, FEEDS

        for b in BUILDERS:
            print(f"{b.name:40s} {b.written_for:10s} mask builder under {b.policy}")
        for c in family_builders():
            print(f"{c.name:40s} {c.written_for:10s} consumer under {c.policy}, runs in the {c.family} environment")
        print(f"consumers: transformers/FAMILY/ATTENTION/FEED/... cells, {len(FAMILIES)} families "
              f"({', '.join(FAMILIES)}) × {len(ATTENTION)} ({', '.join(ATTENTION)}) × {len(FEEDS)} feeds × "
              f"{len(CACHE)} use_cache settings (--only consumers, or a prefix such as transformers/llama/sdpa)")
        return 0
    started = time.perf_counter()
    progress = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    consumer_names = [n for n in args.only if n == "consumers" or n.count("/") >= 2 or n in _builders() or
                      (n.startswith("transformers/") and n.split("/")[1] in _families())]
    adapter_names = [n for n in args.only if n not in consumer_names]
    try:
        rows = run(args.cases, args.seed, adapter_names, progress=progress) if adapter_names or not args.only else []
    except KeyError as e:
        parser.error(str(e.args[0]))
    cells, builders = [], []
    if consumer_names or not args.only:
        chosen = lambda name: not consumer_names or "consumers" in consumer_names or any(  # noqa: E731
            name.startswith(n.rstrip("/") + "/") or name == n for n in consumer_names)
        cells = run_consumers(args.consumer_cases, args.seed, chosen, progress=progress)
        builders = run_builders(args.consumer_cases, args.seed, chosen, progress=progress)
    tables = _Tables(rows, cells, builders, args.check or args.markdown or PAGE)
    page = counterexamples_page(rows, args.cases, args.seed) + "\n" + consumers_section(
        cells, args.consumer_cases, args.seed, builders)
    status = 0
    if args.json:
        text = json.dumps(to_json(rows), indent=1) + "\n"
        sys.stdout.write(text) if args.json == "-" else open(args.json, "w").write(text)
    if args.check:
        status |= _compare(args.check, page)
        for path in args.readme:
            status |= _compare(path, tables.spliced(path))
    else:
        if args.markdown:
            open(args.markdown, "w").write(page)
        for path in args.readme:
            text = tables.spliced(path)
            open(path, "w").write(text)
        if not args.markdown and not args.readme and not args.json:
            sys.stdout.write(tables.matrix(PAGE) + "\n" + tables.consumers(PAGE))
    for line in unexplained(rows) + unexplained_cells(cells + builders):
        print(f"conformance: {line}", file=sys.stderr)
        status = 1
    print(f"conformance: {len(rows)} adapters, {len(cells)} consumer cells and {len(builders)} mask builders in "
          f"{time.perf_counter() - started:.0f} s", file=sys.stderr)
    return status


def _build_envs() -> int:
    """Every family environment built or found; 1 when one cannot be had (its rows would say cannot run)."""
    from ._envs import FAMILIES, EnvironmentUnavailable, ensure

    status = 0
    for name in FAMILIES:
        started = time.perf_counter()
        try:
            venv = ensure(name, log=lambda s: print(s, file=sys.stderr, flush=True))
        except EnvironmentUnavailable as e:
            print(f"conformance: the {name} environment: {e}", file=sys.stderr)
            status = 1
            continue
        print(f"conformance: the {name} environment: {venv} ({time.perf_counter() - started:.0f} s)", flush=True)
    return status


def _families() -> tuple:
    from ..adapters.transformers_models import FAMILIES

    return FAMILIES


def _builders() -> tuple:
    from ..adapters.mask_builders import BUILDERS
    from ._consumers import family_builders

    return tuple(b.name for b in BUILDERS + family_builders())


class _Tables:
    """The generated tables, with links to the page written relative to the file they are spliced into."""

    def __init__(self, rows: list[Row], cells: list[Cell], builders: list[Cell], page: str) -> None:
        self.rows, self.cells, self.builders, self.page = rows, cells, builders, page

    def matrix(self, page: str) -> str:
        return matrix_table(self.rows, page)

    def consumers(self, page: str) -> str:
        table = consumer_table(self.cells, page)
        return table + ("\n" + builders_table(self.builders, page) if self.builders else "")

    def spliced(self, path: str) -> str:
        """The file at `path` with each table whose markers it holds regenerated (main checked it holds one)."""
        text = open(path).read()
        page = os.path.relpath(os.path.abspath(self.page), os.path.dirname(os.path.abspath(path)))
        if MATRIX_BEGIN in text:
            text = splice_readme(text, self.matrix(page))
        if README_BEGIN in text:
            text = splice_readme(text, self.consumers(page), (README_BEGIN, README_END))
        return text


def _compare(path: str, expected: str) -> int:
    import difflib

    try:
        current = open(path).read()
    except OSError as e:
        print(f"conformance: cannot read {path}: {e.strerror}", file=sys.stderr)
        return 1
    if current == expected:
        return 0
    diff = difflib.unified_diff(current.splitlines(True), expected.splitlines(True), path, path + " (now)")
    sys.stderr.write(f"conformance: {path} differs from what the installed libraries give now:\n")
    sys.stderr.writelines(list(diff)[:200])
    return 1


if __name__ == "__main__":
    sys.exit(main())
