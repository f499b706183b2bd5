"""Documents when nobody says what they are: a batch's own segments, read from the encoding its policy
declares, taken as pieces of its documents. Checked that way, a batch can still be wrong in everything that
needs no documents (its other encodings against this one, positions against segments, targets against the
shift inside a segment and across a row's end, the counts); what it cannot show is a segment that is not a
document (two documents under one segment), nor a document's life beyond the rows (its tokens in no row, a
refusal its length demands): the audit, of a window of the run, says "coverage over the run not checked", never a
violation.

The reading, row by row (`documents_from_segments`):

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
    """([{"doc_uid", "tokens", "supervised"}], doc_spans per row): one document piece per segment of each row
    (see the module docstring for the reading), the documents as placed (check them with
    ``delimiters_included``). A token is supervised where the slot that targets it carries a target (its own
    slot under aligned labels, the previous one when pre-shifted; a label not ignored and a loss_mask not 0):
    the guard cannot tell a prompt mask from a wrong one without the documents. A malformed encoding is a
    ValueError naming it (``strict``), or leaves its rows one segment each for the audit to report.
    ``reading``: where trailing pad ids are padding (`Reading`). ``row_starts``: `segment_starts` of the batch,
    where the caller read them already (each reading of one batch reads the same segments)."""
    ids = rows_of(as_array(batch["input_ids"], "batch", "input_ids"), "batch", "input_ids")
    labels = rows_of(as_array(batch["labels"], "batch", "labels"), "batch", "labels")
    weights = labels != policy["ignore_index"]
    if batch.get("loss_mask") is not None:
        loss_mask = rows_of(as_array(batch["loss_mask"], "batch", "loss_mask", floats=True), "batch", "loss_mask")
        if loss_mask.shape == weights.shape:
            weights = weights & (loss_mask != 0)
    positions = None
    if batch.get("position_ids") is not None:
        positions = rows_of(as_array(batch["position_ids"], "batch", "position_ids"), "batch", "position_ids")
        if positions.shape != ids.shape:
            positions = None  # the audit names the shape; the reading goes without them
    marked = _marked_padding(batch, ids.shape)
    if row_starts is None:
        row_starts = segment_starts(batch, policy, strict=strict)
    reader = _RowReader(policy, _stand_in(policy), reading)
    docs: list[dict] = []
    spans: list[list[dict]] = []
    for r in range(ids.shape[0]):
        starts, read = row_starts[r]
        row_docs, row_spans = reader.row(r, ids[r], labels[r], weights[r],
                                         None if positions is None else positions[r], starts, read,
                                         None if marked is None else marked[r])
        docs += row_docs
        spans.append(row_spans)
    return docs, spans


class _RowReader:
    """One row's pieces under one policy (documents_from_segments)."""

    def __init__(self, policy: Mapping[str, Any], stand_in: int, reading: Reading):
        self.policy, self.stand_in, self.reading = policy, stand_in, reading
        self.crosses = policy["overflow"] == "split" or policy.get("stream_stride") is not None
        self.pre_shifted = policy["label_alignment"] == "pre_shifted"
        source = policy["boundary_source"]
        self.eod = policy.get("eos_id") if source == "eod_closes" else None
        self.bos = policy.get("bos_id") if source == "bos_opens" else None

    def row(self, r: int, ids: np.ndarray, labels: np.ndarray, weights: np.ndarray, positions: Optional[np.ndarray],
            starts: list[int], read: bool, marked: Optional[np.ndarray]) -> tuple[list[dict], list[dict]]:
        n = _unpadded_length(ids, labels == self.policy["ignore_index"],
                             labels if self.reading.pad_labelled_pad else None, weights, starts, read, self.policy,
                             self.reading.pad_segments)
        if marked is not None and self.policy["padding"] != "none":
            n = len(marked)
            while n > 0 and marked[n - 1]:
                n -= 1  # the encoding itself says where padding starts: no reading of the pad ids is needed
        starts = [s for s in starts if s < n] or ([0] if n else [])
        docs, spans = [], []
        for k, s in enumerate(starts):
            e = starts[k + 1] if k + 1 < len(starts) else n
            uid = f"row{r}.seg{k}"
            offset = self._continued_offset(ids, positions) if k == 0 else 0
            tokens = [self.stand_in] * offset + [int(t) for t in ids[s:e]]
            supervised = [1] * offset + _supervised(weights, s, e, self.pre_shifted)
            after = self._next_token(ids, labels, weights, e) if k + 1 == len(starts) and e == len(ids) else None
            opens_next = after is not None and self._opens_document(tokens, after)
            if after is not None and not opens_next:
                tokens.append(after)
                # a target the row shows (its last label) is supervised; a stand-in is no target of the row
                supervised.append(int(after != self.stand_in or bool(weights[e - 1])))
            docs.append({"doc_uid": uid, "tokens": tokens, "supervised": supervised})
            spans.append({"doc_uid": uid, "start": s, "length": e - s, "doc_offset": offset})
            if opens_next:  # the next document's first token, a target across the row's end
                docs.append({"doc_uid": f"row{r}.next", "tokens": [after], "supervised": [1]})
        return docs, spans

    def _continued_offset(self, ids: np.ndarray, positions: Optional[np.ndarray]) -> int:
        """0 where the row's first piece starts its document; else the tokens of it before the row (what its
        positions say where they count on from the document's start, else 1)."""
        if not self.crosses or not len(ids):
            return 0
        if self.bos is not None:
            return 0 if int(ids[0]) == self.bos else 1
        counted = self.policy["positions"] == "doc_reset" and positions is not None
        if counted and positions is not None:
            first = int(positions[0]) - int(self.policy["position_base"])
            if first == 0 or (first < 0 and self.policy["split_positions"] != "restart"):
                return 0
            if self.policy["split_positions"] != "restart":
                return first
        return 0 if self.eod is not None and not counted else 1

    def _next_token(self, ids: np.ndarray, labels: np.ndarray, weights: np.ndarray, e: int) -> Optional[int]:
        """The token after a row that ends inside a document, when the row shows it: its last slot's label under
        pre-shifted labels where that slot carries a target; a stand-in where the policy lets documents cross
        rows and nothing closes the piece (the next row's first token is not in this row)."""
        if e == 0:
            return None
        last = int(ids[e - 1])
        closed = self.eod is not None and last == self.eod
        if self.pre_shifted and bool(weights[e - 1]):
            return int(labels[e - 1])
        if self.crosses and not closed:
            return self.stand_in
        return None

    def _opens_document(self, tokens: list[int], after: int) -> bool:
        """Whether the token after the row starts the next document rather than going on with this one."""
        if self.bos is not None and after == self.bos:
            return True
        if self.eod is not None and tokens and tokens[-1] == self.eod:
            return True
        return not self.crosses


def _marked_padding(batch: Mapping[str, Any], shape: tuple) -> Optional[np.ndarray]:
    """Slots an encoding marks as padding: a negative doc id, a 0 in a per-token attention_mask (rows x slots);
    None where the batch has neither."""
    marked = None
    for name, is_pad in (("doc_ids", lambda a: a < 0), ("attention_mask", lambda a: a == 0)):
        if batch.get(name) is None:
            continue
        array = as_array(batch[name], "batch", name)
        if array.ndim in (1, 2) and array.size == int(np.prod(shape)):
            mark = is_pad(array.reshape(shape))
            marked = mark if marked is None else marked | mark
    return marked


def _stand_in(policy: Mapping[str, Any]) -> int:
    """A token id for the tokens the rows do not show: none of the ids the policy gives a meaning to."""
    special = {policy.get("eos_id"), policy.get("bos_id"), policy.get("pad_id"), policy.get("ignore_index")}
    return next(t for t in range(1, 8) if t not in special)


def _unpadded_length(ids: np.ndarray, ignored: np.ndarray, labels: Optional[np.ndarray], weights: np.ndarray,
                     starts: list[int], read: bool, policy: Mapping[str, Any],
                     pad_segments: Optional[int] = None) -> int:
    """Where a row's trailing padding starts, when the policy pads: padding slots hold pad_id and an ignored label
    (`ignored`); with `labels`, also those labelled with the pad id itself that carry no target (loss_mask 0), as
    Megatron labels its pads (a slot labelled with another token predicts it: a document's, such as an EOD that
    is also the pad id).
    Trailing segments made only of such slots are padding (the encoding gave padding segments of its own), and
    the segment before them ends where they start, even if its last tokens look like padding (a document may
    end with the pad id). Where the encoding was read, that is all (padding folded into the last segment stays
    in it, as its backend reads it). Under `eod_closes` with the pad id as the EOD id (Megatron) every pad is a
    segment of its own, and the document's closing EOD stays in its segment. Where no encoding was read (`read` False: the row is one segment), padding is the tail of such slots; a document's own trailing
    pad ids cannot be told from padding there."""
    n = len(ids)
    if policy["padding"] == "none":
        return n
    pad = ids == policy["pad_id"]
    if labels is None:
        pad &= ignored
    else:
        pad &= ~np.asarray(weights, dtype=bool) & (ignored | (labels == policy["pad_id"]))
    cut = n
    for k, s in enumerate(reversed(starts)):
        if not pad[s:cut].all() or (pad_segments is not None and k >= pad_segments):
            break
        cut = s
    if cut == n and not read:
        while cut > 0 and pad[cut - 1]:
            cut -= 1
    elif cut == n and labels is not None:
        # Megatron's padding (the pad id labelled with itself, no target), which its cu_seqlens fold into the
        # last segment
        while cut > 0 and pad[cut - 1] and labels[cut - 1] == policy["pad_id"]:
            cut -= 1
        eos = policy.get("eos_id")
        if labels is not None and cut < n and cut > 0 and eos == policy["pad_id"] and int(ids[cut - 1]) != eos:
            cut += 1  # the pad id is the EOD id: the run's first slot is the closing EOD of the document before it
    return cut


def _supervised(weights: np.ndarray, s: int, e: int, pre_shifted: bool) -> list[int]:
    """Each token's flag: whether the slot that targets it carries a target (its own slot under aligned labels,
    the one before it when pre-shifted). A row's first token has no such slot in the row: supervised."""
    if not pre_shifted:
        return [int(weights[i]) for i in range(s, e)]
    return [1 if i == 0 else int(weights[i - 1]) for i in range(s, e)]
