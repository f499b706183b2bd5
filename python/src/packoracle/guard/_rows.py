"""A batch checked without its documents: read as pieces of documents (`_segments.documents_from_segments`),
under each reading its rows allow, and audited by the core as a window of the run (coverage over the run not
checked). Where the rows allow several readings (`_segments.READINGS`: a trailing run of pad ids labelled
with the pad id and no target, Megatron's padding, or documents made of the pad id; pad-only segments before
the last) and one of them holds, the batch holds: the rows cannot tell that it does not, and the guard says
"ambiguous", never a violation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from .._checks import checked_batch
from ..report import Report
from ._segments import READINGS, documents_from_segments, segment_starts

AMBIGUOUS = ("ambiguous: its trailing pad ids read as padding and as documents of the pad id give other verdicts "
             "(the one reported: the first that holds, else Megatron's padding); give the documents to tell")


@dataclass
class RowsChecked:
    """What check_from_rows found: the ``report`` of the reading it took, that reading's ``documents`` and
    ``spans`` (what a saved dump holds), and whether the readings' verdicts differ (``ambiguous``: another
    found violations where this one holds, or other ones)."""

    report: Report
    documents: list[dict]
    spans: list[list[dict]]
    ambiguous: bool = False


def check_from_rows(batch: Mapping[str, Any], fields: Mapping[str, Any], policy: dict, ignore: Sequence[str],
                    row_length: Optional[int] = None, every_reading: bool = False) -> RowsChecked:
    """`batch` (the producer's fields, checked) audited against the documents read from `fields` (the same
    batch in canonical names) under the first reading that holds (`READINGS`), else the one that reads
    Megatron's pad-labelled pads as padding (where every reading breaks, the more plausible one).
    ``row_length``: the step's L (default: the batch's longest row). ``every_reading``: every reading audited,
    so that ``ambiguous`` says whether any differs in its verdict (else the first that holds ends it)."""
    held: Optional[RowsChecked] = None
    broken: Optional[RowsChecked] = None
    tried: list[list] = []
    verdicts: set[frozenset] = set()  # each reading's invariants found
    starts = segment_starts(fields, policy, strict=False)  # the same segments under every reading
    for reading in READINGS:
        docs, spans = documents_from_segments(fields, policy, reading=reading, row_starts=starts)
        if spans in tried:
            continue  # the rows read the same either way (no pad ids at a row's end: the common case)
        tried.append(spans)
        report = checked_batch(dict(batch, doc_spans=spans), docs, policy, ignore=ignore, delimiters_included=True,
                               window=True, row_length=row_length)
        verdicts.add(frozenset(v.invariant for v in report.violations))
        if report.ok:
            held = held or RowsChecked(report, docs, spans)
            if not every_reading:
                break  # the batch holds: the readings after this one cost audits and change nothing
        elif broken is None or reading.pad_labelled_pad:
            broken = RowsChecked(report, docs, spans)  # pads as padding (Megatron's) where every reading breaks
    chosen = held or broken
    assert chosen is not None
    chosen.ambiguous = len(verdicts) > 1
    return chosen
