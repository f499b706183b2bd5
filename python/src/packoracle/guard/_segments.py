"""Documents when nobody says what they are: a batch's own segments, read from the encoding its policy
declares, taken as pieces of its documents. Checked that way, a batch can still be wrong in everything that
needs no documents (its other encodings against this one, positions against segments, targets against the
shift inside a segment and across a row's end, the counts); what it cannot show is a segment that is not a
document (two documents under one segment), nor a document's life beyond the rows (its tokens in no row, a
refusal its length demands): the audit, of a window of the run, says "coverage over the run not checked", never a
violation.

The reading, row by row (`documents_from_segments`, the core's: jobs/row_documents.h states each rule):

- segments where the core reads them (`_core.segments_as_fed`: the declared encoding, as a backend fed it reads
  it; where the row lacks it, or the policy declares none, the first it carries of cu_seqlens, seq_lens, doc ids
  and position resets: `boundary_starts`); a malformed encoding leaves the row one segment, and the audit
  reports the encoding itself;
- padding by the policy's side: the trailing slots an encoding marks as padding (a negative doc id, a 0 in a
  per-token attention_mask), as marked; else a trailing run of the pad id with ignored labels, whole segments
  of them where the encoding was read. Where the rows cannot tell padding from documents made of the pad id,
  `READINGS` are the readings tried: also the pad id labelled with itself and no target (Megatron pads with
  its EOD id 0, each pad a segment of its own), or only the last pad-only segment, or none, as padding;
- the documents are taken as placed, with the row's own delimiters (the audit adds none:
  ``delimiters_included``);
- where the policy lets a document cross rows (`overflow: split`, stream windows), a row's first piece may
  continue a document of an earlier row (``doc_offset`` > 0: what its positions say, else 1) unless the row
  says it starts there (a BOS under `bos_opens`, the position base under reset positions), and its last piece
  goes on when the row's last slot targets a token the piece does not close on (pre-shifted labels: the
  stream's next token is that label). The tokens the rows do not show (before a continuing piece, after one
  that goes on) are stand-ins; only the next token after a row, known from its label, is real. A row's last
  target that opens the next document (a BOS, or after a closing EOD) is that document's first token: a
  one-token document in no row, so that the target across the row's end is read against it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, Optional

import numpy as np

from .. import _core
from .._arrays import as_array, rows_of
from .._batch import canonical_microbatch

CHECKED_WITHOUT_DOCUMENTS = ("segments against each other", "positions against segments",
                             "targets against the shift inside each segment and across row ends",
                             "counts and denominators")
NOT_CHECKED_WITHOUT_DOCUMENTS = ("coverage (a document's tokens in no row, its pieces across rows, a refusal its "
                                 "length demands: only the documents tell)",
                                 "a segment that holds two documents (the segments are the documents)")
CHECKED_WITH_DOCUMENTS = ("documents against segments (attention)", "positions", "targets", "counts and denominators",
                          "coverage")


def segment_starts(batch: Mapping[str, Any], policy: Mapping[str, Any], *,
                   strict: bool = True) -> list[tuple[list[int], bool]]:
    """Per row, (starts, read): the slots where a segment starts, read from the encoding the policy declares by
    the core's own reading (``_core.segments``: the one a backend reading that encoding uses), and whether an
    encoding was read at all. A row without one (boundary_source spans or none, or the declared field missing)
    is one segment, as a backend fed it reads it, except where a 2-D attention_mask marks padding. `batch` is
    in canonical field names. A malformed encoding is a ValueError naming it (``strict``), or leaves every row one
    segment, unread, for the audit to report the encoding itself."""
    fields = {name: value for name, value in batch.items() if name != "doc_spans"}
    rows = rows_of(as_array(fields["input_ids"], "batch", "input_ids"), "batch", "input_ids").shape[0]
    canonical = canonical_microbatch(dict(fields, doc_spans=[[] for _ in range(rows)]), where="batch")
    try:
        return [_row_starts(row, policy) for row in canonical["rows"]]
    except ValueError:
        if strict:
            raise
        return [([0], False)] * rows


def _row_starts(row: Mapping[str, Any], policy: Mapping[str, Any]) -> tuple[list[int], bool]:
    """One canonical row's (starts, read), as `segment_starts` gives them."""
    starts, read = _core.segments_as_fed(row, policy)
    if not read:  # the declared encoding is missing (or none is declared): what the row does carry
        found = boundary_starts(row, policy)
        if found is not None:
            starts, read = found[0], True
    return [int(x) for x in starts], bool(read)


def boundary_starts(row: Mapping[str, Any], policy: Mapping[str, Any]) -> Optional[tuple[list[int], str]]:
    """(segment starts, the source read) of one canonical row, by the core's reading of the first boundary
    encoding the row carries: its policy's declared boundary_source, else cu_seqlens, seq_lens, doc_ids,
    position resets (positions at the policy's position_base). None when the row carries none of them
    (``_core.encoded_segments``: the reading the spans derived for rows without doc_spans use too)."""
    found = _core.encoded_segments(row, policy)
    if found is None:
        return None
    starts, source = found
    return [int(s) for s in starts], str(source)


class Reading(NamedTuple):
    """Where a row's trailing pad ids are padding, and where documents made of the pad id (the rows alone cannot
    always tell): ``pad_labelled_pad``, a pad slot may also be labelled with the pad id and carry no target, as
    Megatron labels its pads; ``pad_segments``, how many of the trailing segments made only of pad slots are
    padding (None: all; torchtune's seq_lens give the padding one length of its own, and the segments before
    it, or all of them, may be documents of the pad id)."""

    pad_labelled_pad: bool = False
    pad_segments: Optional[int] = None


# The readings the guard tries, the first the common one (check_from_rows: a batch holds if one of them holds).
READINGS = (Reading(), Reading(pad_labelled_pad=True), Reading(pad_segments=1), Reading(pad_segments=0))


def documents_from_segments(batch: Mapping[str, Any], policy: Mapping[str, Any], *, strict: bool = True,
                            reading: Reading = READINGS[0],
                            row_starts: Optional[list[tuple[list[int], bool]]] = None
                            ) -> tuple[list[dict], list[list[dict]]]:
    """([{"doc_uid", "tokens", "supervised"}], doc_spans per row): one document piece per segment of each row,
    the documents as placed (check them with ``delimiters_included``): the core's reading
    (``_core.documents_from_segments``, jobs/row_documents.h, which the module docstring summarises). A token is
    supervised where the slot that targets it carries a target (its own slot under aligned labels, the previous
    one when pre-shifted; a label not ignored and a loss_mask not 0): the guard cannot tell a prompt mask from a
    wrong one without the documents. A malformed encoding is a ValueError naming it (``strict``), or leaves its
    rows one segment each for the audit to report. ``reading``: where trailing pad ids are padding (`Reading`).
    ``row_starts``: `segment_starts` of the batch, where the caller read them already (each reading of one batch
    reads the same segments)."""
    ids = _int_rows(batch["input_ids"], "input_ids")
    labels = _int_rows(batch["labels"], "labels")
    shape = ids.shape
    loss_mask = None
    if batch.get("loss_mask") is not None:
        loss_mask = rows_of(as_array(batch["loss_mask"], "batch", "loss_mask", floats=True), "batch", "loss_mask")
        loss_mask = np.ascontiguousarray(loss_mask, dtype=np.float64) if loss_mask.shape == shape else None
    # a field of another shape: the audit names it; the reading goes without it
    positions = (_int_rows_shaped(batch["position_ids"], "position_ids", shape)
                 if batch.get("position_ids") is not None else None)
    marks = {name: _int_rows_shaped(batch[name], name, shape, reshape=True) if batch.get(name) is not None else None
             for name in ("doc_ids", "attention_mask")}
    if row_starts is None:
        row_starts = segment_starts(batch, policy, strict=strict)
    return _core.documents_from_segments(ids, labels, loss_mask, positions, marks["doc_ids"], marks["attention_mask"],
                                         policy, reading.pad_labelled_pad, reading.pad_segments,
                                         [(list(starts), bool(read)) for starts, read in row_starts])


def _int_rows(value: Any, name: str) -> np.ndarray:
    """A field as the core reads it: rows x slots of int64, C-contiguous."""
    return np.ascontiguousarray(rows_of(as_array(value, "batch", name), "batch", name), dtype=np.int64)


def _int_rows_shaped(value: Any, name: str, shape: tuple, reshape: bool = False) -> Optional[np.ndarray]:
    """The same where the field has `shape` (``reshape``: or that many values, given flat), else None."""
    array = as_array(value, "batch", name)
    if reshape and array.ndim in (1, 2) and array.size == int(np.prod(shape)):
        array = array.reshape(shape)
    if array.ndim in (1, 2):
        array = rows_of(array, "batch", name)
    return np.ascontiguousarray(array, dtype=np.int64) if array.shape == shape else None
