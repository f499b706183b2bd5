"""A batch checked without its documents: read as pieces of documents (`_segments.documents_from_segments`),
under each reading its rows allow, and audited by the core as a window of the run (coverage over the run not
checked). Where the rows allow two readings (a trailing run of pad ids labelled with the pad id and carrying
no target: Megatron's padding, or documents made of the pad id) and one of them holds, the batch holds: the
rows cannot tell that it does not, and the guard says "ambiguous", never a violation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from .._checks import checked_batch
from ..report import Report
from ._segments import documents_from_segments

AMBIGUOUS = ("ambiguous: the rows read as padding hold, read as documents of the pad id they do not (or the other "
             "way round); give the documents to tell")


@dataclass
class RowsChecked:
    """What check_from_rows found: the ``report`` of the reading it took, that reading's ``documents`` and
    ``spans`` (what a saved dump holds), and whether another reading found violations where it holds."""

    report: Report
    documents: list[dict]
    spans: list[list[dict]]
    ambiguous: bool = False


def check_from_rows(batch: Mapping[str, Any], fields: Mapping[str, Any], policy: dict,
                    ignore: Sequence[str]) -> RowsChecked:
    """`batch` (the producer's fields, checked) audited against the documents read from `fields` (the same
    batch in canonical names), under the first reading that holds, else the last (pad ids labelled with the
    pad id and no target read as padding: where both readings break, the more plausible one)."""
    held: Optional[RowsChecked] = None
    broken: Optional[RowsChecked] = None
    tried: list[list] = []
    for pad_labelled_pad in (False, True):
        docs, spans = documents_from_segments(fields, policy, strict=False, pad_labelled_pad=pad_labelled_pad)
        if spans in tried:
            continue  # the rows read the same either way (no pad id labelled with itself: the common case)
        tried.append(spans)
        report = checked_batch(dict(batch, doc_spans=spans), docs, policy, ignore=ignore, delimiters_included=True,
                               window=True)
        if report.ok:
            held = held or RowsChecked(report, docs, spans)
        else:
            broken = RowsChecked(report, docs, spans)  # the later reading, pads as padding, where both break
    if held is not None:
        held.ambiguous = broken is not None
        return held
    assert broken is not None
    return broken
