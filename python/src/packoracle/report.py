"""The result of a check: what `packoracle verify` prints, as an object."""

from __future__ import annotations

import html as _html
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from . import _args


@dataclass(frozen=True)
class Violation:
    """One violation: the invariant, where (step, micro_step, rank, row within its micro-batch, slot; -1 where
    it concerns the whole row or step), what was expected and found, and the sentence that explains it."""

    invariant: str
    step: int
    micro_step: int
    rank: int
    row: int
    slot: int
    expected: str
    actual: str
    message: str
    file: str = ""
    line: int = 0

    def __str__(self) -> str:
        where = f"step {self.step}"
        if self.micro_step >= 0:
            where += f", micro_step {self.micro_step}, rank {self.rank}"
        if self.row >= 0:
            where += f", row {self.row}"
        if self.slot >= 0:
            where += f", slot {self.slot}"
        return f"{self.invariant} ({where}): {self.message}"


@dataclass(frozen=True)
class Report:
    """What the kit found in a batch, a step or a dump.

    - ``ok``: no violation; ``violations``: each with its invariant and place;
    - ``str(report)``: exactly the text `packoracle verify` prints for the same records;
    - ``to_json()``: the same facts as `packoracle verify --format json`;
    - ``notes``: the checks the producer's totals did not allow (a denominator alone is checked as a count,
      the loss is not), one sentence each;
    - ``ambiguous``: invariants not checked because rows without doc_spans can be read from the documents in
      ways whose verdicts differ on them;
    - ``svg(row)``: the row drawn as `packoracle draw` draws it; ``html()``: the text and the drawings of the
      rows with violations, for a notebook or a browser.
    """

    ok: bool
    violations: tuple[Violation, ...]
    # (step, row counted over the step's micro-batches in order) of each row with a violation, once each.
    violation_rows: tuple[tuple[int, int], ...] = ()
    _audit: Any = field(default=None, repr=False, compare=False)  # packoracle._core.Audit: renders on demand
    _draw: Optional[Callable[[int, Optional[int]], str]] = field(default=None, repr=False, compare=False)

    @property
    def text(self) -> str:
        """What `packoracle verify` prints for the same records."""
        return self._audit.text()

    def __str__(self) -> str:
        return self.text

    @property
    def notes(self) -> tuple[str, ...]:
        """What the given producer totals did not allow the kit to check, each sentence once."""
        if self._audit is None:
            return ()
        return tuple(n["note"] for n in self.to_json()["notes"])

    @property
    def ambiguous(self) -> tuple[str, ...]:
        """Invariants not checked: the rows carry no doc_spans, the documents can be read into them in more than
        one way, and the readings' verdicts differ on these (give doc_spans to check them). Usually empty."""
        if self._audit is None:
            return ()
        return tuple(self.to_json()["ambiguous"])

    def __bool__(self) -> bool:
        return self.ok

    def to_json(self) -> dict[str, Any]:
        """The report as `packoracle verify --format json` gives it (a dict)."""
        return json.loads(self._audit.json())

    def svg(self, row: int = 0, *, step: Optional[int] = None) -> str:
        """Row `row` (counting the rows in order, micro-batches flattened; of step `step` only, if given) as the
        SVG `packoracle draw` writes: the attention grid, the target marks, the cells that disagree."""
        row = _args.integer(row, "Report.svg", "row", 0, _args.INT64_MAX)
        step = _args.optional_integer(step, "Report.svg", "step", 0, _args.INT64_MAX)
        if self._draw is None:
            raise ValueError("this report holds no records to draw")
        return self._draw(row, step)

    def html(self) -> str:
        """The text report and, for each row with a violation, its drawing: one self-contained HTML page."""
        parts = [f"<pre>{_html.escape(self.text)}</pre>"]
        if self._draw is not None:
            for step, row in self.violation_rows[:8]:
                parts.append(f"<h3>step {step}, row {row}</h3>\n{self._draw(row, step)}")
        return "<!doctype html><meta charset='utf-8'><title>packoracle report</title>\n" + "\n".join(parts)

    def _repr_html_(self) -> str:  # Jupyter
        return self.html()


def report_from_core(audit: Any, draw: Optional[Callable[[int, Optional[int]], str]] = None) -> Report:
    found = audit.violations
    if not found:  # the common answer (check_batch on every training batch): no tuples to build
        return Report(True, (), (), audit, draw)
    violations = tuple(Violation(**v) for v in found)
    return Report(ok=False, violations=violations,
                  violation_rows=tuple(tuple(r) for r in audit.violation_rows), _audit=audit, _draw=draw)
