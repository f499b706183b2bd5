"""The step side of the guard: each rank's valid-target count and the denominators it used, exchanged
through the run's own torch.distributed process group, checked once per optimizer step. Every rank computes
the same verdict from the same gathered numbers, so every rank raises together (no rank is left waiting in
the next collective).

The rule (DESIGN §11) is the core's, the one check_step and `packoracle verify` apply (DenominatorWeighting in
properties/producer_totals.h): the objective a step optimizes is Σ_m sum_m / d_m over its micro-batches m, and
it is the declared one exactly when d_m / e_m is the same for every m, e_m being the count the policy's
denominator divides by (N, the step's valid targets over all ranks, under `global_targets`; the rank's count
under `rank_mean`; the micro-batch's own under `microbatch_mean`). A ratio that differs between micro-batches
changes the objective: a violation, naming the ranks. One ratio for all, other than 1 (every rank divided by
its own count, and the counts happened to be equal), changes only the scale: a note.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from .. import _args, _core
from .._batch import Microbatches, canonical_fields
from .._checks import OTHER_READINGS, _Records, checked_batch
from .._documents import canonical_documents, core_documents
from .._policy import PolicyLike, resolve
from ..report import Report
from ._batches import BatchGuard, GuardViolation, OnViolation, _not_read
from ._rows import AMBIGUOUS, check_from_rows
from ._segments import CHECKED_WITHOUT_DOCUMENTS

@dataclass
class StepVerdict:
    """One optimizer step across ranks: ``ok``; ``problems`` (sentences, each naming step and ranks);
    ``notes``; ``valid_targets`` (over every rank); ``ranks`` (what each rank reported); ``local`` (this
    rank's batch Reports); ``bytes_exchanged`` (the pickled summaries of every rank, which this rank receives)
    and ``seconds_exchanging`` in the collective."""

    step: int
    ok: bool
    valid_targets: float
    problems: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    ranks: list = field(default_factory=list)
    local: list = field(default_factory=list)
    bytes_exchanged: int = 0
    seconds_exchanging: float = 0.0

    @property
    def text(self) -> str:
        lines = [f"packoracle guard: step {self.step}: {'consistent' if self.ok else 'VIOLATION'} "
                 f"({self.valid_targets:g} valid targets over {len(self.ranks)} rank(s))"]
        lines += [f"  denominator: {p}" for p in self.problems] + [f"  note: {n}" for n in self.notes]
        for r in self.ranks:
            lines.append(f"  rank {r['rank']}: {r['valid']:g} valid targets in {len(r['denominators'])} micro-batch(es), "
                         f"divided by {', '.join(_denominator_text(d) for d in r['denominators']) or '-'}")
        for report in self.local:
            if not report.ok:
                lines.append(report.text)
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return self.text


def _denominator_text(d: Optional[float]) -> str:
    """A micro-batch's denominator as the step's text shows it: none reported (no producer totals, no
    num_items_in_batch) is said so, never formatted as a number."""
    return "(none reported)" if d is None else f"{d:g}"


def _gather(local: dict, group: Any) -> tuple[list[dict], int]:
    """Every rank's summary, through the run's process group (one all_gather_object); alone without one."""
    try:
        import torch.distributed as dist
    except ImportError:
        return [local], 0
    if not (dist.is_available() and dist.is_initialized()):
        return [local], 0
    world = dist.get_world_size(group)
    out: list = [None] * world
    dist.all_gather_object(out, local, group=group)
    import pickle

    return out, len(pickle.dumps(local)) * world


def verdict(step: int, policy: Mapping[str, Any], gathered: Sequence[dict], local: list, exchanged: int) -> StepVerdict:
    """The step's verdict from every rank's summary: the denominators by the core's weighting rule (the one
    check_step and `packoracle verify` apply: producer_totals.h DenominatorWeighting), then the ranks whose
    own batches broke the policy."""
    total = sum(r["valid"] for r in gathered)
    v = StepVerdict(step=step, ok=True, valid_targets=total, ranks=list(gathered), local=local, bytes_exchanged=exchanged)
    # a rank whose counts the readings of its rows disagree on (ambiguous) has its divisions not checked
    divisions = [(r["rank"], m, counted, d)
                 for r in gathered if not r.get("counts_ambiguous")
                 for m, (d, counted) in enumerate(zip(r["denominators"], r["per_microbatch_counted"]))
                 if d is not None]
    weighting = _core.denominator_weighting(dict(policy), divisions, f"step {step}")
    v.problems += weighting["problems"]
    v.notes += weighting["notes"]
    v.notes += [f"rank {r['rank']}: {note}" for r in gathered for note in r.get("notes", ())]
    v.ok = not v.problems
    bad = [r["rank"] for r in gathered if r["violations"]]
    if bad:
        v.ok = False
        v.problems.append(f"rank(s) {', '.join(map(str, bad))}: batches that break the policy (their reports below, "
                          f"on those ranks)")
    return v


def _denominators(microbatches: Sequence[Mapping], num_items_in_batch: Any) -> list:
    n = len(microbatches)
    if num_items_in_batch is None:
        return [(mb.get("producer") or {}).get("denominator") for mb in microbatches]
    if isinstance(num_items_in_batch, Sequence):
        if len(num_items_in_batch) != n:
            raise ValueError(f"guard.check_step: num_items_in_batch has {len(num_items_in_batch)} entries for {n} "
                             f"micro-batches: give one per micro-batch, or one for all")
        return [None if x is None else float(x) for x in num_items_in_batch]
    value = float(num_items_in_batch.item() if hasattr(num_items_in_batch, "item") else num_items_in_batch)
    return [value] * n


def _read_with_documents(microbatches: Sequence[Mapping], documents: Any, policy: dict,
                         notes: list[str]) -> tuple[Any, list[dict], list[list[dict]]]:
    """The step's documents (as the core holds them) and its micro-batch records, spans read across the step in
    order, as check_step reads them, and the step's records under each other reading of their spans. How the
    documents were read is said in `notes`."""
    held = canonical_documents(documents, policy=policy)
    docs = without_delimiters(held, policy)
    if docs is not held:
        notes.append("documents: given with the policy's delimiters, read as placed (the delimiters taken off "
                     "once, for the core to add as the packer does)")
    batches = [{n: x for n, x in mb.items() if n not in _not_read(mb)} for mb in microbatches]
    core_docs = core_documents(docs, policy)
    reader = Microbatches(core_docs, policy)
    records = reader.read(batches)
    return core_docs, records, reader.other_readings(records, OTHER_READINGS)


def without_delimiters(docs: list[dict], policy: Mapping[str, Any]) -> list[dict]:
    """The documents as the packer was given them: where every one carries the delimiters the policy adds (a
    closing EOD, an opening BOS: documents as a dump or a tokenizer with them holds them), those are taken off,
    once each, for the core to add as the packer does. Documents without them are returned as they are."""
    eos, bos = policy.get("eos_id"), policy.get("bos_id")
    if (eos is None and bos is None) or not docs:
        return docs

    def carries(tokens: Any) -> bool:
        return len(tokens) >= (eos is not None) + (bos is not None) and \
            (eos is None or int(tokens[-1]) == eos) and (bos is None or int(tokens[0]) == bos)
    if not all(carries(d["tokens"]) for d in docs):
        return docs
    head, tail = int(bos is not None), int(eos is not None)
    out = []
    for d in docs:
        cut = dict(d, tokens=d["tokens"][head:len(d["tokens"]) - tail])
        if d.get("supervised") is not None:
            cut["supervised"] = d["supervised"][head:len(d["supervised"]) - tail]
        out.append(cut)
    return out


def local_summary(microbatches: Sequence[Mapping], policy: dict, documents: Optional[Any],
                  num_items_in_batch: Any, rank: int) -> tuple[dict, list[Report]]:
    """This rank's counts (by the kit) and denominators for the step, and the Reports of its micro-batches; with
    documents, one Report of the whole step (as check_step and `packoracle verify` check a step: a row's end
    whose target is the next document of the stream, in the next micro-batch, is checked too)."""
    notes: list[str] = []  # how the documents were read, and the micro-batches read ambiguously
    row_length = _longest_row(microbatches)  # the step's L, as verify takes it: every micro-batch checked with it
    if documents is None:
        reports = [_rows_report(mb, k, policy, row_length, notes) for k, mb in enumerate(microbatches)]
        checked = reports
    else:
        docs, records, others = _read_with_documents(microbatches, documents, policy, notes)
        # a micro-batch's counts from its own audit, as a window of the run (its documents may have pieces in
        # the steps before and after it); the step's violations from one audit of all of them
        reports = [_counts_report(_plain(mb), record, docs, policy, row_length)
                   for mb, record in zip(microbatches, records)]
        for record in records + [r for other in others for r in other]:
            record["step"] = 0
        checked = [_Records("step", policy, docs, records, 1, delimiters_included=False, window=True)
                   .audit_every_reading(others, row_length, False)]
    per_mb = [float(r.to_json()["steps"][0]["valid_targets"]) for r in reports]
    # what the denominator is compared with, by the core's rule
    counted = [float(r.to_json()["steps"][0]["counted"]) for r in reports]
    # with documents, the step's own count (a row end whose target is in the next micro-batch counts there)
    valid = sum(per_mb) if documents is None else float(checked[0].to_json()["steps"][0]["valid_targets"])
    summary = {"rank": rank, "valid": valid, "per_microbatch": per_mb, "per_microbatch_counted": counted,
               "denominators": _denominators(microbatches, num_items_in_batch),
               "violations": sum(len(r.violations) for r in checked if _counts_violation(r)), "notes": notes}
    if any(i in ("targets", "denominator") for r in checked for i in r.ambiguous):
        # the readings of the rows count the targets differently: which count the denominators owe is unknown
        summary["counts_ambiguous"] = True
        notes.append("denominators not checked: the documents read into the rows in ways whose target counts "
                     "differ (the rows carry no doc_spans)")
    return summary, checked


def _plain(mb: Mapping) -> dict:
    """A micro-batch's batch fields, without the keys that say where it sits in the step."""
    return {n: x for n, x in mb.items() if n not in ("producer", "micro_step", "rank", "step", "record")}


def _counts_report(batch: dict, record: dict, docs: Any, policy: dict, row_length: Optional[int]) -> Report:
    """A micro-batch audited alone with its spans, as a window of the run: what its own counts are read from."""
    spans = [row["doc_spans"] for row in record["rows"]]
    ignore = _args.names(_not_read(batch), "guard.check_step", "ignore")
    return checked_batch(dict(batch, doc_spans=spans), docs, policy, ignore=ignore, window=True, row_length=row_length)


def _rows_report(mb: Mapping, k: int, policy: dict, row_length: Optional[int], notes: list[str]) -> Report:
    """A micro-batch checked from its rows alone (no documents): its own segments stand for them."""
    batch = _plain(mb)
    fields = canonical_fields(batch, f"microbatches[{k}]", _not_read(batch))
    ignore = _args.names(_not_read(batch), "guard.check_step", "ignore")
    read = check_from_rows(batch, fields, policy, ignore, row_length)
    if read.ambiguous:
        notes.append(f"micro-batch {k}: {AMBIGUOUS}")
    return read.report


def _longest_row(microbatches: Sequence[Mapping]) -> Optional[int]:
    """The longest row of the step (a batch's input_ids: rows x slots, or one flattened row); None where none
    can be read (check_batch then names what is wrong)."""
    longest = 0
    for mb in microbatches:
        ids = mb.get("input_ids") if isinstance(mb, Mapping) else None
        shape = getattr(ids, "shape", None)
        if shape is None and isinstance(ids, Sequence):
            shape = (len(ids[0]),) if ids and isinstance(ids[0], Sequence) else (len(ids),)
        if shape:
            longest = max(longest, int(shape[-1]))
    return longest or None


def _counts_violation(report: Report) -> bool:
    # The denominator is judged across ranks here; a batch's own denominator findings (it sees one rank) are not.
    return any(v.invariant not in ("denominator", "loss") for v in report.violations)


def check_step(microbatches: Sequence[Mapping[str, Any]], *, policy: PolicyLike, documents: Optional[Any] = None,
               num_items_in_batch: Any = None, group: Any = None, step: int = 0,
               on_violation: OnViolation = "raise") -> StepVerdict:
    """Checks one optimizer step of a custom training loop, on every rank with that rank's micro-batches.

    Each micro-batch is a batch dict as check_batch takes it (input_ids, labels, position_ids, ...; tensors
    are fine) with, unless ``num_items_in_batch`` is given (one number for all, or one per micro-batch),
    ``producer={"denominator": d}``: what its summed loss was divided by. The kit counts the valid targets;
    the counts and denominators of every rank are exchanged through ``group`` (default: the world of the
    initialised torch.distributed process group; none: this process alone) and every rank gets the same
    verdict. ``documents``: the documents of this rank's step (the step is checked as one window of the run,
    as check_step checks it, its spans read across the step in order; ``local`` is then that one Report);
    without them the batches' own segments stand for them (``local``: a Report per micro-batch). A violation raises GuardViolation
    on every rank (``on_violation="raise"``), is logged ("log"), or is passed to your callable."""
    step = _args.integer(step, "guard.check_step", "step", 0, _args.INT64_MAX)
    resolved = resolve(policy)
    rank = _rank(group)
    summary, reports = local_summary(microbatches, resolved, documents, num_items_in_batch, rank)
    started = time.perf_counter()
    gathered, exchanged = _gather(summary, group)
    v = verdict(step, resolved, gathered, reports, exchanged)
    v.seconds_exchanging = time.perf_counter() - started
    if not v.ok:
        checks = CHECKED_WITHOUT_DOCUMENTS if documents is None else ("documents", "counts and denominators")
        error = GuardViolation(v.text, report=v, dump=None, checks=checks, where=f"step {step}")
        BatchGuard(resolved, on_violation=on_violation).notify(error)
    return v


def _rank(group: Any) -> int:
    try:
        import torch.distributed as dist
    except ImportError:
        return 0
    return dist.get_rank(group) if dist.is_available() and dist.is_initialized() else 0
