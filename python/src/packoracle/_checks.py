"""check_batch, check_step, verify, draw: the audits of `packoracle verify` and `packoracle draw`, in-process.

check_batch and check_step build the records of a dump in memory (a header with the policy, the documents,
the micro-batches) and hand them to the same C++ code that reads a dump file: the verdicts, the report text
and the drawings are the command line's, with no JSON in between."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional, Union

from . import _args, _core
from ._args import INT64_MAX, MAX_ROW_LENGTH
from ._batch import Microbatches, SpanMatcher, _producer, canonical_microbatch, read_batch
from ._documents import CoreDocuments, DocumentsLike, core_documents
from ._policy import PolicyLike, resolve
from .report import Report, report_from_core

PathLike = Union[str, "os.PathLike[str]"]
# Readings besides the chosen one an audit of derived spans is held to (verify's kOtherReadings).
OTHER_READINGS = 3


class _Records:
    """One step's records in memory: what the report draws from."""

    def __init__(self, name: str, policy: dict, documents: CoreDocuments, microbatches: list, dp_world_size: int,
                 delimiters_included: bool, window: bool = False):
        self.name, self.policy, self.documents = name, policy, documents
        self.microbatches, self.dp_world_size = microbatches, dp_world_size
        self.delimiters_included = delimiters_included  # documents as placed (effective), or as given
        # a window of a run (the guard's batches): the documents' coverage over the run is not checked
        self.window = window

    def audit_deferred(self, row_length: Optional[int], decoder: bool) -> Optional[Report]:
        """The report; None where a batch read with defer_ids holds an id the policy does not allow."""
        audit = self.core_audit(row_length, decoder)
        return None if audit is None else report_from_core(audit, self.svg)

    def core_audit(self, row_length: Optional[int], decoder: bool) -> Any:
        return _core.audit_records(self.name, self.policy, self.documents, self.microbatches, self.dp_world_size,
                                   row_length or 0, decoder, self.delimiters_included, self.window)

    def audit_every_reading(self, others: list[list[dict]], row_length: Optional[int], decoder: bool) -> Report:
        """The report of micro-batches whose spans were derived, held to the `others` readings of the same
        rows (Microbatches.other_readings): an invariant the readings judge differently is not checked
        (jobs::ReconcileReadings: the report's `ambiguous` and a note), not decided by the reading chosen."""
        if not others:
            return self.audit(row_length, decoder)
        audits = [_Records(self.name, self.policy, self.documents, o, self.dp_world_size, self.delimiters_included,
                           self.window).core_audit(row_length, decoder) for o in others]
        chosen = self.core_audit(row_length, decoder)
        return report_from_core(_core.reconcile_readings(chosen, audits), self.svg)

    def audit(self, row_length: Optional[int], decoder: bool) -> Report:
        """The report of micro-batches whose ids were all scanned when read (no defer_ids)."""
        report = self.audit_deferred(row_length, decoder)
        if report is None:
            raise RuntimeError("packoracle: an audit of micro-batches read without defer_ids answered None")
        return report

    def svg(self, row: int, step: Optional[int]) -> str:
        return _core.draw_records(self.name, self.policy, self.documents, self.microbatches, self.dp_world_size,
                                  self.delimiters_included, row, step)


def check_batch(batch: Mapping[str, Any], documents: DocumentsLike, policy: PolicyLike, *, step: int = 0,
                micro_step: int = 0, rank: int = 0, producer: Optional[Mapping[str, Any]] = None,
                dp_world_size: int = 1, row_length: Optional[int] = None, decoder: bool = False,
                ignore: Sequence[str] = ()) -> Report:
    """Checks one micro-batch against the policy and returns the Report.

    ``batch``: a dict in the producer's own field names: ``input_ids`` (or Megatron's ``tokens``) and ``labels``
    (required), ``position_ids``, ``cu_seqlens`` (or ``cu_seq_lens_q``, as HF's DataCollatorWithFlattening writes it),
    ``seq_lens``, ``doc_ids`` (or ``seq_idx``), ``attention_mask`` (per token), ``loss_mask``, and optionally
    ``doc_spans`` (where each document piece sits; derived from the documents when absent). Values are numpy
    arrays, CPU torch tensors or lists, rows × slots or one flattened row; arrays of any integer or bool
    dtype are read straight from their buffers by the C++ core (a tensor is viewed, never converted in Python).

    ``documents``: what the packer was given, as {uid: tokens}, `Document` objects or dicts (the policy's
    delimiters are added as the packer adds them). ``producer``: the micro-batch's totals, if any: any
    non-empty subset of {"loss_sum", "denominator", "loss"}, with "denominator_scope" exactly when a
    denominator is given (a Trainer's ``{"denominator": num_items_in_batch, "denominator_scope": "global"}``
    is checked as the count; the report's notes say which checks the given fields did not allow).
    ``dp_world_size``: the ranks sharing the step
    (a global-scope denominator counts over all of them: with more than one, give the whole step to
    check_step). ``row_length``: L (default: the longest row). ``decoder``: also run packing_invariance.
    ``ignore``: fields of the batch that the kit should not read.

    The batch's arrays and the documents' int64 numpy arrays are read where they lie, not copied: the Report
    holds them, and draws them (``svg``, ``html``) as they are when it draws.

    Raises ValueError or TypeError naming the argument, or the field and index, for input that is not a batch."""
    at = "check_batch"
    step, micro_step, rank, dp_world_size = _args.batch_place(at, step, micro_step, rank, dp_world_size)
    if row_length is not None:
        row_length = _args.integer(row_length, at, "row_length", 1, MAX_ROW_LENGTH)
    if type(decoder) is not bool:  # a bool is flag()'s answer as it is
        decoder = _args.flag(decoder, at, "decoder")
    ignore = _args.names(ignore, at, "ignore")
    if producer is not None and type(producer) is not dict and not isinstance(producer, Mapping):
        raise TypeError(f"{at}: producer must be a dict of totals (loss_sum, denominator, denominator_scope, loss) "
                        f"or None, got {type(producer).__name__}")
    return checked_batch(batch, documents, resolve(policy), step=step, micro_step=micro_step, rank=rank,
                         producer=producer, dp_world_size=dp_world_size, row_length=row_length, decoder=decoder,
                         ignore=ignore)


def checked_batch(batch: Mapping[str, Any], documents: DocumentsLike, resolved: dict, *, step: int = 0,
                  micro_step: int = 0, rank: int = 0, producer: Optional[Mapping[str, Any]] = None,
                  dp_world_size: int = 1, row_length: Optional[int] = None, decoder: bool = False,
                  ignore: Sequence[str] = (), delimiters_included: bool = False, window: bool = False) -> Report:
    """check_batch once its arguments are known valid (check_batch's own checks passed, or the guard's fixed
    ones: its step, rank and flags are the defaults, its ignore a list of str): `resolved` a resolved policy
    dict. The batch and the documents are checked here, as check_batch checks them; the guard calls this on
    every batch rather than re-checking arguments it made itself. ``delimiters_included``: the documents
    already carry the policy's delimiters (as placed). ``window``: the batch is a window of a run (the guard's),
    so the documents' coverage over the run is not checked (the report's notes say so)."""
    # The common form (a dict of arrays, with doc_spans or without: derived in the same call; documents
    # {uid: tokens} or a _core.Documents) read and audited in one call to the core, as the steps below read and
    # audit it; where any part of it is not that form, they take it, and name what is wrong.
    if (type(batch) is dict and (type(documents) is dict or type(documents) is _core.Documents)
            and not delimiters_included and not window):
        try:
            given = _producer(producer, "batch")
        except TypeError:
            pass  # read below: canonical_microbatch raises it, after whatever else it finds first
        else:
            found = _core.check_plain_batch(batch, documents, resolved, _args.sorted_signed_ids(resolved),
                                            _args.sorted_signed_ids(resolved, labels=True), list(ignore), step,
                                            micro_step, rank, given, dp_world_size, row_length or 0, decoder)
            if found is not None:
                audit, read, view = found
                return report_from_core(audit, _Records("batch", resolved, read, [view], dp_world_size,
                                                        delimiters_included=False).svg)
    docs = core_documents(documents, resolved)
    spans_given = _has_spans(batch)

    def records(defer_ids: bool) -> tuple[_Records, Optional[SpanMatcher]]:
        # Spans are derived from the documents as placed (the core adds the policy's delimiters) when none are
        # given, by a SpanMatcher of the reading's own (it keeps the rows it matched).
        matcher = None if spans_given else SpanMatcher(docs, resolved)
        view = read_batch(batch, where="batch", spans=matcher, step=step, micro_step=micro_step, rank=rank,
                          producer=producer, ignore=ignore, policy=resolved, defer_ids=defer_ids)
        return _Records("batch", resolved, docs, [view], dp_world_size, delimiters_included, window), matcher

    # The ids are scanned by the audit, and only where it does not prove them; a batch holding one the policy
    # does not allow is read again as before (canonical_microbatch names it).
    held, matcher = records(True)
    report = held.audit_deferred(row_length, decoder)
    if report is None:
        held, matcher = records(False)
        report = held.audit(row_length, decoder)
    others = [] if matcher is None else matcher.other_readings(OTHER_READINGS)
    if not others:
        return report
    # The documents read into the rows otherwise too: the batch under each of those readings' spans.
    return held.audit_every_reading(
        [[canonical_microbatch(dict(batch, doc_spans=[[(s["doc_uid"], s["start"], s["length"], s["doc_offset"])
                                                       for s in row] for row in reading]),
                               where="batch", spans=None, step=step, micro_step=micro_step, rank=rank,
                               producer=producer, ignore=ignore, policy=resolved)] for reading in others],
        row_length, decoder)


def check_step(microbatches: Union[Sequence[Mapping[str, Any]], Mapping[str, Any]], documents: DocumentsLike,
               policy: PolicyLike, *,
               step: int = 0, dp_world_size: Optional[int] = None, row_length: Optional[int] = None,
               decoder: bool = False) -> Report:
    """Checks every micro-batch of one optimizer step (all ranks), so that the denominators and the loss are
    checked over the step: under ``global_targets`` every micro-batch must divide by the step's count.

    Each micro-batch is a batch as check_batch takes it, with ``micro_step``, ``rank`` and ``producer`` keys
    (defaults: its index, 0, none), or a ``microbatch`` record of DESIGN §5 (with ``rows``). One micro-batch
    (a dict) alone is a step of one micro-batch. ``dp_world_size`` defaults to the highest rank + 1.

    Raises ValueError or TypeError naming the argument, or the micro-batch, field and index."""
    at = "check_step"
    step = _args.integer(step, at, "step", 0, INT64_MAX)
    dp_world_size = _args.optional_integer(dp_world_size, at, "dp_world_size", 1, INT64_MAX)
    row_length = _args.optional_integer(row_length, at, "row_length", 1, MAX_ROW_LENGTH)
    decoder = _args.flag(decoder, at, "decoder")
    microbatches = _args.sequence_of_mappings(microbatches, at, "microbatches")
    resolved = resolve(policy)
    docs = core_documents(documents, resolved)
    reader = Microbatches(docs, resolved)
    mbs = reader.read(microbatches)
    for mb in mbs:
        mb["step"] = step
    if dp_world_size is None:
        for k, mb in enumerate(mbs):  # the world (highest rank + 1) must fit the core's 64-bit count
            _args.integer(mb["rank"], f"{at}: microbatches[{k}]", "field 'rank' (dp_world_size not given: it is the "
                          "highest rank + 1)", 0, INT64_MAX - 1)
    world = dp_world_size if dp_world_size is not None else max((mb["rank"] for mb in mbs), default=0) + 1
    for k, mb in enumerate(mbs):
        _args.rank_below(mb["rank"], world, f"{at}: microbatches[{k}]", "field 'rank'")
    return _Records("step", resolved, docs, mbs, world, delimiters_included=False).audit_every_reading(
        reader.other_readings(mbs, OTHER_READINGS), row_length, decoder)


def _has_spans(batch: Mapping[str, Any]) -> bool:
    return (type(batch) is dict or isinstance(batch, Mapping)) and batch.get("doc_spans") is not None


def verify(paths: Union[PathLike, Sequence[PathLike]], *, preset: Optional[str] = None,
           policy: Optional[PolicyLike] = None, row_length: Optional[int] = None, partial: bool = False,
           decoder: bool = False, oracle: bool = False, summary: Optional[PathLike] = None,
           max_violations: int = 20) -> Report:
    """`packoracle verify FILE...` as a function: audits packed-batch dumps (DESIGN §5) against the policy
    their header declares, or the one required here (``preset`` or ``policy``). The Report's text is the
    command's output. Raises ValueError for unusable input (the message names the file, line, record and
    field), as the command exits 2; TypeError or ValueError naming the argument for a bad argument."""
    at = "verify"
    files = _args.paths(paths, at, "paths")
    row_length = _args.optional_integer(row_length, at, "row_length", 1, MAX_ROW_LENGTH)
    partial, decoder, oracle = (_args.flag(v, at, n) for v, n in ((partial, "partial"), (decoder, "decoder"),
                                                                  (oracle, "oracle")))
    summary = _args.optional_path(summary, at, "summary")
    max_violations = _args.integer(max_violations, at, "max_violations", 0, _args.INT32_MAX)
    required = _required_policy(at, preset, policy)
    result = _core.verify_files(files, required, row_length or 0, partial, decoder, oracle, summary or "",
                                max_violations)

    def svg(row: int, step: Optional[int]) -> str:
        return draw(files[0], row=row, step=step, policy=required, write_svg=False).svg
    return report_from_core(result, svg)


@dataclass(frozen=True)
class Drawing:
    """What `packoracle draw` shows: the terminal text, the SVG, and where the SVG was written (if it was)."""

    text: str
    svg: str
    svg_path: Optional[str]

    def __str__(self) -> str:
        return self.text

    def _repr_svg_(self) -> str:  # Jupyter
        return self.svg


def draw(path: PathLike, *, row: int = 0, step: Optional[int] = None, svg: Optional[PathLike] = None,
         write_svg: bool = True, preset: Optional[str] = None, policy: Optional[PolicyLike] = None) -> Drawing:
    """`packoracle draw FILE --row R` as a function: one row of a dump, drawn. Writes the SVG next to the file
    (or to ``svg``) unless ``write_svg`` is False. Raises ValueError for unusable input, TypeError or
    ValueError naming the argument for a bad argument."""
    at = "draw"
    file = _args.path(path, at, "path")
    row = _args.integer(row, at, "row", 0, INT64_MAX)
    step = _args.optional_integer(step, at, "step", 0, INT64_MAX)
    svg = _args.optional_path(svg, at, "svg")
    write_svg = _args.flag(write_svg, at, "write_svg")
    required = _required_policy(at, preset, policy)
    text, picture, written = _core.draw_file(file, row, step, svg or "", write_svg, required)
    return Drawing(text, picture, written or None)


def _required_policy(where: str, preset: Any, policy: Any) -> Optional[dict]:
    """The policy verify or draw must hold the dump to: a preset name or a policy (not both), or None."""
    if preset is not None and policy is not None:
        raise ValueError(f"{where}: give preset or policy, not both")
    if preset is not None:
        return resolve(_args.text(preset, where, "preset"))
    return resolve(policy) if policy is not None else None
