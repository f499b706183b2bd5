#!/usr/bin/env python3
"""Every entry point that reads a user's batch, against `packoracle verify`, on real dumps (issue 42).

    python3 python/tools/one_verdict.py [DUMP_DIR] [--only SUBSTRING] [--table] [--entry NAME ...]

Without DUMP_DIR the dumps are made afresh (python/tools/realpack_to_jsonl.py into a temporary folder). Each
dump's micro-batches are handed to each entry point as a training loop holds them (arrays or tensors in the
dump's field names, no doc_spans), with the dump's own header policy; the violations each reports are
compared, row by row, with those `verify` reports on the whole dump:

- ``agrees``: the same invariants on the same rows (verify names a row's first finding, and stops a step at a
  row's shape or coverage: the same row flagged under another invariant agrees on the row);
- ``not checked``: a finding of verify the entry point cannot make, with the reason: without documents, a row
  whose documents no encoding shows (`ROWS_ALLOW`), supervision only the documents hold, coverage and refusal,
  an ambiguous reading of pad ids; for the guard's step with its documents, coverage over the run; for the
  guard, the loss values and a denominator off by one factor for all (its rule is the weighting); for a loader,
  the step's row length;
- ``differs``: anything else: a false positive, a visible miss, or an exception. A test failure.

Prints a line per dump and entry point that differs, then the counts; ``--table`` prints the markdown table of
docs/guard.md (system x entry point).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import packoracle  # noqa: E402
from packoracle import guard  # noqa: E402
from packoracle._batch import canonical_fields  # noqa: E402
from packoracle.guard._rows import check_from_rows  # noqa: E402
from packoracle.guard._segments import Reading, documents_from_segments  # noqa: E402
from packoracle.guard._step import without_delimiters  # noqa: E402

# A finding: (invariant, micro-batch index in the step, row in it; -1 for a whole step or micro-batch).
Finding = tuple[str, int, int]
# What only the documents show: not a finding an entry point without them can make.
DOCUMENTS_ONLY = ("coverage", "refusal")
# Judged across ranks by the guard's step verdict, per micro-batch by verify: compared at the step.
STEP_LEVEL = ("denominator", "loss")


@dataclass
class Dump:
    name: str
    path: str
    policy: dict
    documents: list[dict]                      # as dumped: the documents as placed, delimiters included
    microbatches: list[dict]                   # the micro-batch records of the dump's single step and rank
    # (micro-batch, row) of the dump -> (micro-batch, row) as handed to the entry points (the same, but for rows
    # of different lengths, handed one a batch)
    unit_of: dict = field(default_factory=dict)
    ragged: bool = False

    @property
    def system(self) -> str:
        return self.name.split(".")[0]


def load(path: str) -> Dump:
    with open(path) as f:
        records = [json.loads(line) for line in f if line.strip()]
    mbs = [r for r in records if r.get("record") == "microbatch"]
    if len({(m.get("step", 0), m.get("rank", 0)) for m in mbs}) != 1:
        raise ValueError(f"{path}: one step of one rank expected (the realpack dumps are)")
    docs = [{"doc_uid": r["doc_uid"], "tokens": r["tokens"], **({"supervised": r["supervised"]}
                                                                 if r.get("supervised") is not None else {})}
            for r in records if r.get("record") == "document"]
    mbs.sort(key=lambda m: m.get("micro_step", 0))
    dump = Dump(os.path.basename(path), path, records[0]["policy"], docs, [])
    for k, mb in enumerate(mbs):
        if len({len(row["input_ids"]) for row in mb["rows"]}) <= 1:
            dump.unit_of.update({(k, r): (len(dump.microbatches), r) for r in range(len(mb["rows"]))})
            dump.microbatches.append(mb)
            continue
        # rows of different lengths (no padding): no tensor holds them together, so a loop hands them one a
        # batch; their micro-batch's totals then belong to no one batch and are left out
        for r, row in enumerate(mb["rows"]):
            dump.unit_of[(k, r)] = (len(dump.microbatches), 0)
            dump.microbatches.append({k: v for k, v in mb.items() if k not in ("rows", "producer")} | {"rows": [row]})
            dump.ragged = True
    return dump


def training_batch(mb: dict, tensors: bool = False) -> dict[str, Any]:
    """A dump's micro-batch as a loop holds it: per-token fields rows x slots, boundary lists per row, no
    doc_spans; the producer's totals kept (the guard reads its denominator)."""
    rows = mb["rows"]
    batch: dict[str, Any] = {}
    for name in rows[0]:
        if name == "doc_spans":
            continue
        values = [row[name] for row in rows]
        if name in ("cu_seqlens", "seq_lens"):
            batch[name] = [np.asarray(v, dtype=np.int64) for v in values] if len(values) > 1 else \
                np.asarray(values[0], dtype=np.int64)
        else:
            batch[name] = np.asarray(values, dtype=np.float32 if name == "loss_mask" else np.int64)
    if tensors:
        import torch

        batch = {k: (torch.from_numpy(v) if isinstance(v, np.ndarray) else [torch.from_numpy(x) for x in v])
                 for k, v in batch.items()}
    if mb.get("producer"):
        batch["producer"] = mb["producer"]
    return batch


def verify_findings(path: str, dump: Optional[Dump] = None) -> set[Finding]:
    """verify's findings, located as `dump` hands its rows to the entry points."""
    report = packoracle.verify(path, max_violations=10_000)
    out = ambiguous_findings(report)
    for v in report.violations:
        if v.invariant in STEP_LEVEL or v.row < 0 or _whole(v):
            out.add(finding(v, v.micro_step))
            continue
        k, r = (v.micro_step, v.row) if dump is None else dump.unit_of[(v.micro_step, v.row)]
        out.add(finding(v, k, r))
    return out


def ambiguous_findings(report: Any) -> set[Finding]:
    """An entry point's invariants not checked as ambiguous (rows read from the documents in ways whose verdicts
    differ on them), as findings ("ambiguous:<invariant>", -1, -1) that `judge` takes out."""
    return {(f"ambiguous:{i}", -1, -1) for i in report.ambiguous}


def _whole(v: Any) -> bool:
    """A finding of the step or the run, wherever it is located: a refusal the policy demands, a document's
    tokens in no row."""
    return v.invariant == "coverage" and ("demands a refusal" in v.message or "in no row" in v.message)


def finding(v: Any, k: int, r: Optional[int] = None) -> Finding:
    """A violation as compared: step-level invariants and whole-run coverage at (-1, -1); a refusal the policy
    demands as its own name (verify checks that step no further)."""
    if v.invariant == "coverage" and "demands a refusal" in v.message:
        return ("refusal", -1, -1)
    if v.invariant in STEP_LEVEL or _whole(v):
        return (v.invariant, -1, -1)
    return (v.invariant, k, v.row if r is None else r)


def report_findings(reports: list, step_problems: bool) -> set[Finding]:
    out: set[Finding] = set()
    for k, report in enumerate(reports):
        for v in report.violations:
            if v.invariant in STEP_LEVEL:
                continue  # the guard judges denominators across the step (step_problems)
            out.add(finding(v, k))
    if step_problems:
        out.add(("denominator", -1, -1))
    return out


def rows_show_truth(dump: Dump) -> dict[tuple[int, int], set[str]]:
    """(micro-batch, row) -> the invariants whose finding on that row the rows alone cannot show: all of them
    where no reading of the row finds the documents' pieces and padding as the dump's doc_spans have them;
    `targets` where one does, but the documents' supervision (a prompt mask, a supervised first token) differs
    from what the row's own targets say (the only supervision a reading without documents has)."""
    policy = packoracle.Policy(dump.policy).to_dict()
    tokens = {d["doc_uid"]: d for d in dump.documents}
    out: dict[tuple[int, int], set[str]] = {}
    for k, mb in enumerate(dump.microbatches):
        batch = training_batch(mb)
        batch.pop("producer", None)
        fields = canonical_fields(batch, "batch")
        readings = [documents_from_segments(fields, policy, strict=False, reading=x) for x in ROWS_ALLOW]
        for r, row in enumerate(mb["rows"]):
            truth = [(s["start"], s["length"]) for s in row["doc_spans"]]
            hidden = {"attention", "segments", "positions", "targets", "shape"}
            for docs, spans in readings:
                if [(s["start"], s["length"]) for s in spans[r]] != truth:
                    continue
                derived = {d["doc_uid"]: d for d in docs}
                same = all(_flags(tokens[t["doc_uid"]], t) == _flags(derived[g["doc_uid"]], g)
                           for t, g in zip(row["doc_spans"], spans[r]))
                if same and row["doc_spans"] and spans[r]:  # the token after the row: targeted from its last slot
                    order = [d["doc_uid"] for d in dump.documents]
                    same = _next_flag(tokens, order, row["doc_spans"][-1]) == \
                        _next_flag(derived, [d["doc_uid"] for d in docs], spans[r][-1])
                hidden = set() if same else {"targets"}
                break
            out[(k, r)] = hidden
    return out


def _next_flag(docs: dict, order: list[str], span: dict) -> Optional[int]:
    """The supervision of the token after a piece: its document's next, else the next document's first (the
    stream's next token), None where there is none."""
    doc = docs[span["doc_uid"]]
    sup = doc.get("supervised") or [1] * len(doc["tokens"])
    end = span["doc_offset"] + span["length"]
    if end < len(sup):
        return int(sup[end])
    k = order.index(span["doc_uid"]) + 1
    while k < len(order) and not docs[order[k]]["tokens"]:
        k += 1
    if k == len(order):
        return None
    nxt = docs[order[k]]
    return int((nxt.get("supervised") or [1])[0])


def _flags(doc: dict, span: dict) -> list[int]:
    """A piece's supervision flags, but for a row's first token (no slot of the row targets it)."""
    sup = doc.get("supervised") or [1] * len(doc["tokens"])
    first = span["doc_offset"] + (span["start"] == 0)
    return [int(x) for x in sup[first:span["doc_offset"] + span["length"]]]


# The entry points: each takes a Dump and answers its findings. `with_documents`: it is handed the documents.
def guard_step(dump: Dump, tensors: bool = False, documents: Optional[list] = None) -> set[Finding]:
    batches = [dict(training_batch(m, tensors), micro_step=m.get("micro_step", 0)) for m in dump.microbatches]
    seen: list = []
    v = guard.check_step(batches, policy=dump.policy, documents=documents, on_violation=seen.append)
    if not v.ok and not seen:
        raise AssertionError("guard.check_step: a violation that on_violation was not handed")
    if not v.text:
        raise AssertionError("guard.check_step: no text")
    step_problems = any(not p.startswith("rank(s)") for p in v.problems)
    if documents is not None:  # one report of the whole step, its violations placed by their micro_step
        found = {finding(x, x.micro_step) for x in v.local[0].violations if x.invariant not in STEP_LEVEL}
        found |= ambiguous_findings(v.local[0])
        return found | ({("denominator", -1, -1)} if step_problems else set())
    found = report_findings(v.local, step_problems)
    # a micro-batch whose readings differ in their verdict (ambiguous): what verify finds there is not checked
    return found | {("ambiguous", k, -1) for k, m in enumerate(dump.microbatches) if ambiguous(dump, m)}


def ambiguous(dump: Dump, mb: dict) -> bool:
    """Whether the readings of a micro-batch's rows without documents differ in their verdict (every reading
    audited, where the guard stops at the first that holds)."""
    batch = training_batch(mb)
    batch.pop("producer", None)
    policy = packoracle.Policy(dump.policy).to_dict()
    longest = max(len(row["input_ids"]) for m in dump.microbatches for row in m["rows"])
    return check_from_rows(batch, canonical_fields(batch, "batch"), policy, (), longest, every_reading=True).ambiguous


def guard_loader(dump: Dump) -> set[Finding]:
    batches = []
    for m in dump.microbatches:
        batch = training_batch(m)
        batch.pop("producer", None)  # a loader's batches carry no totals
        batches.append(batch)
    seen: list = []
    with tempfile.TemporaryDirectory() as dumps:
        loader = guard.wrap_dataloader(batches, dump.policy, on_violation=seen.append, dump_dir=dumps)
        for b, a in zip(loader, batches):
            if b is not a:
                raise AssertionError("guard.wrap_dataloader: the batches came out changed")
        for error in seen:  # each violation's dump replays
            if error.dump is None:
                raise AssertionError(f"guard.wrap_dataloader: {error.where}: no dump saved")
    out: set[Finding] = {("ambiguous", k, -1) for k, m in enumerate(dump.microbatches) if ambiguous(dump, m)}
    for error in seen:
        k = int(error.where.split()[-1])  # "batch N"
        out |= {(f, k, r) for f, _, r in report_findings([error.report], False)}
    return out


def check_step_documents(dump: Dump) -> set[Finding]:
    """packoracle.check_step with the documents as the packer was given them, no doc_spans (derived)."""
    mbs = [dict(training_batch(m), micro_step=m.get("micro_step", 0)) for m in dump.microbatches]
    docs = without_delimiters(dump.documents, packoracle.Policy(dump.policy).to_dict())
    report = packoracle.check_step(mbs, docs, dump.policy)
    return {finding(v, v.micro_step) for v in report.violations} | ambiguous_findings(report)


def verify_without_spans(dump: Dump) -> set[Finding]:
    """`packoracle verify` on the dump with every row's doc_spans taken out (a dump written straight from a
    collator's output): the spans derived from the dump's documents (jobs/verify_derive.h)."""
    with tempfile.TemporaryDirectory() as tmp:
        stripped = os.path.join(tmp, dump.name)
        with open(dump.path) as f, open(stripped, "w") as out:
            for line in f:
                record = json.loads(line)
                if record.get("record") == "microbatch":
                    for row in record["rows"]:
                        row.pop("doc_spans", None)
                out.write(json.dumps(record) + "\n")
        return verify_findings(stripped, dump)


def which_policy(dump: Dump) -> set[Finding]:
    """packoracle.which_policy_of_batch on each micro-batch (documents as given, no spans): a violation where the
    dump's preset is not among those that hold. Only for a dump that declares a preset as it is."""
    preset = dump.policy.get("preset")
    docs = without_delimiters(dump.documents, packoracle.Policy(dump.policy).to_dict())
    out: set[Finding] = set()
    for k, mb in enumerate(dump.microbatches):
        batch = training_batch(mb)
        producer = batch.pop("producer", None)
        fit = packoracle.which_policy_of_batch(batch, docs, row_length=_step_row_length(dump), producer=producer)
        if preset not in fit.holds:
            out.add(("violation", k, -1))
    return out


def _step_row_length(dump: Dump) -> int:
    return max(len(row["input_ids"]) for m in dump.microbatches for row in m["rows"])


# name -> (run, documents): "" none (the rows alone), "window" one step's (the guard's), "run" the whole run's,
# "same" the whole run's, read by verify itself (every finding where verify places it).
ENTRY_POINTS: dict[str, tuple[Callable[[Dump], set[Finding]], str]] = {
    "guard.check_step": (lambda d: guard_step(d), ""),
    "guard.check_step (tensors)": (lambda d: guard_step(d, tensors=True), ""),
    "guard.wrap_dataloader": (guard_loader, "batch"),
    "guard.check_step (documents as dumped)": (lambda d: guard_step(d, documents=d.documents), "window"),
    "guard.check_step (documents as given)":
        (lambda d: guard_step(d, documents=without_delimiters(d.documents, packoracle.Policy(d.policy).to_dict())),
         "window"),
    "check_step (documents, no spans)": (check_step_documents, "run"),
    "verify (no spans)": (verify_without_spans, "same"),
    "which_policy_of_batch": (which_policy, "verdict"),
}


def once_a_step(findings: set[Finding]) -> set[Finding]:
    """`targets` as verify reports it: its first finding of a step only (the fast verifier stops there), so
    an entry point that checks micro-batch by micro-batch may find more; compared as present or not."""
    return {(i, k, r) for i, k, r in findings if i != "targets"} | \
        ({("targets", -1, -1)} if any(i == "targets" for i, _, _ in findings) else set())


# The readings of a row's trailing pad ids the rows allow, stated here apart from the guard's READINGS: a finding
# on a row that one of them reads as the documents do is visible, and a reading the guard drops is a difference.
ROWS_ALLOW = (Reading(), Reading(pad_labelled_pad=True), Reading(pad_segments=1), Reading(pad_segments=0))


# Where verify stops: a step with a finding of these on a row is checked no further (CheckCase's order).
STOPS = ("shape", "coverage")


def judge(expected: set[Finding], got: set[Finding], hidden: dict[tuple[int, int], set[str]],
          with_documents: str, ragged: bool = False) -> tuple[str, str]:
    """('agrees' | 'not checked' | 'differs', why) for one dump and entry point."""
    unseen = []
    # invariants the entry point says are ambiguous (readings of the rows that differ on them): not checked
    undecided = {i.split(":", 1)[1] for i, _, _ in got if i.startswith("ambiguous:")}
    got = {f for f in got if not f[0].startswith("ambiguous:")}
    for inv in sorted(undecided & {i for i, _, _ in expected}):
        unseen.append(f"{inv}: ambiguous (the documents read into the rows in ways whose verdicts differ on it)")
    expected = {f for f in expected if f[0] not in undecided}
    got = {f for f in got if f[0] not in undecided}
    stopped = any((i in STOPS and k >= 0) or i == "refusal" for i, k, _ in expected)
    if ragged:  # a loop could not collate the rows: their shape is not what it is handed, nor compared
        if any(i == "shape" for i, _, _ in expected):
            unseen.append("shape: rows of different lengths, which a loop hands one a batch")
        expected, got = ({f for f in x if f[0] != "shape"} for x in (expected, got))
    # a coverage finding of no one row is the step's or the run's, wherever an entry point locates it
    expected, got = ({("coverage", -1, -1) if i == "coverage" and r < 0 else (i, k, r) for i, k, r in x}
                     for x in (expected, got))
    targets_at = [(k, r) for i, k, r in expected if i == "targets"]
    expected, got = once_a_step(expected), once_a_step(got)
    if targets_at and ("targets", -1, -1) not in got:  # missed: hidden where verify's finding is
        k, r = targets_at[0]
        expected = (expected - {("targets", -1, -1)}) | {("targets", k, r)}
    if with_documents == "same":  # verify's own reading, spans derived: every finding where verify has it
        if got != expected:
            return "differs", f"verify {sorted(expected)}, got {sorted(got)}"
        return ("not checked", "; ".join(unseen)) if unseen else ("agrees", "")
    if with_documents == "verdict":  # holds or not, batch by batch
        return ("agrees", "") if bool(got) == bool(expected) else ("differs", f"verify {sorted(expected)}, got "
                                                                               f"{sorted(got)}")
    if with_documents == "run":  # the documents of the whole run: one verdict, coverage included
        # the same invariants (where documents collide, the spans derived may place a finding on another row)
        names = ({i for i, _, _ in expected}, {i for i, _, _ in got})
        if names[0] == names[1] or (stopped and names[0] <= names[1]):
            return ("not checked", "; ".join(unseen)) if unseen else ("agrees", "")
        return "differs", f"verify {sorted(expected)}, got {sorted(got)}"
    if with_documents == "window":  # a step of a run with its documents: all but coverage over the run
        hidden = {}
    if with_documents == "batch" and any(i == "shape" for i, _, _ in expected - got):
        # a loader sees one batch: the step's row length (its longest row, over all its micro-batches) is unknown
        expected = {f for f in expected if f[0] != "shape"}
        unseen.append("shape: a loader sees one batch, not the step's longest row")
    ambiguous = {k for i, k, _ in got if i == "ambiguous"}
    got = {f for f in got if f[0] != "ambiguous"}
    flagged = {(k, r) for _, k, r in expected if r >= 0}
    # verify names a row's first finding: the same row flagged under another invariant agrees on the row
    false = {(i, k, r) for i, k, r in got - expected if (k, r) not in flagged}
    if false and not stopped:
        return "differs", f"false positive {sorted(false)} (verify {sorted(expected)})"
    if false:
        unseen.append(f"{sorted(false)}: verify stops at a row's shape or coverage and checks that step no further")
    for inv, k, r in sorted(expected - got):
        if (k, r) in {(k2, r2) for i2, k2, r2 in got if r2 >= 0} and r >= 0:
            continue  # the row flagged, under another invariant
        if inv == "loss":
            unseen.append("loss: the guard checks the denominators a step divides by, not its loss values")
        elif inv == "denominator":
            unseen.append("denominator: the guard judges how a step weighs its micro-batches; one factor off "
                          "for all only scales the objective (a note)")
        elif inv in DOCUMENTS_ONLY and with_documents == "window":
            unseen.append(f"{inv}: over the run, and the guard sees one step of it")
        elif inv in DOCUMENTS_ONLY:
            unseen.append(f"{inv}: only the documents show it")
        elif k in ambiguous:
            unseen.append(f"{inv} on micro-batch {k}: ambiguous (its pad ids read as padding or as a document)")
        elif inv in STEP_LEVEL or r < 0 or inv not in hidden.get((k, r), set()):
            return "differs", f"missed {inv} on micro-batch {k} row {r}, which the rows show (verify " \
                              f"{sorted(expected)})"
        elif inv == "targets" and len(hidden[(k, r)]) == 1:
            unseen.append(f"{inv} on micro-batch {k} row {r}: only the documents say which tokens are supervised")
        else:
            unseen.append(f"{inv} on micro-batch {k} row {r}: the rows' encodings do not show its documents")
    return ("not checked", "; ".join(unseen)) if unseen else ("agrees", "")


def compare(path: str, entries: list[str]) -> dict[str, tuple[str, str]]:
    dump = load(path)
    try:
        expected = verify_findings(path, dump)
    except ValueError as e:  # documents the policy cannot encode (an EOD inside one): verify refuses the dump
        return refused(dump, entries, str(e))
    hidden = rows_show_truth(dump)
    out = {}
    for name in entries:
        run, with_documents = ENTRY_POINTS[name]
        if with_documents == "verdict" and (set(dump.policy) != {"preset"} or len(dump.microbatches) > 1 or
                                            any(f[0] in STEP_LEVEL + DOCUMENTS_ONLY for f in expected)):
            out[name] = ("not checked", "which_policy_of_batch: one micro-batch under a preset as it is, whose "
                                        "verdict is the batch's own")
            continue
        try:
            got = run(dump)
        except Exception as e:  # noqa: BLE001 - an exception is what this measures
            out[name] = ("differs", f"raised {type(e).__name__}: {e}")
            continue
        if dump.ragged:  # the totals were left out: the step's denominators and loss are not compared
            expected, got = ({f for f in x if f[0] not in STEP_LEVEL} for x in (expected, got))
        out[name] = judge(expected, got, hidden, with_documents, dump.ragged)
    return out


def refused(dump: Dump, entries: list[str], why: str) -> dict[str, tuple[str, str]]:
    """A dump verify refuses (its documents are not the policy's): the entry points handed no documents must
    still answer (nothing to compare them with); those handed the documents may refuse them as verify does."""
    out = {}
    for name in entries:
        run, documents = ENTRY_POINTS[name]
        try:
            run(dump)
        except ValueError as e:
            if documents in ("", "batch"):
                out[name] = ("differs", f"raised ValueError on rows alone: {e}")
            else:
                out[name] = ("not checked", f"refused as verify refuses: {e}")
            continue
        out[name] = ("not checked", f"verify refuses the dump: {why}")
    return out


def make_dumps(out: str) -> None:
    import realpack_to_jsonl

    with contextlib.redirect_stdout(io.StringIO()):
        code = realpack_to_jsonl.main([out])
    if code:
        raise SystemExit(f"realpack_to_jsonl.py exited {code}")


def table(results: dict[str, dict[str, tuple[str, str]]], entries: list[str]) -> str:
    """System x entry point: how many dumps agree, are not checked (why, the first reason), differ."""
    cells: dict[tuple[str, str], Counter] = defaultdict(Counter)
    reasons: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for name, by_entry in results.items():
        system = name.split(".")[0]
        for entry, (verdict, why) in by_entry.items():
            cells[(system, entry)][verdict] += 1
            if verdict == "not checked":
                for part in why.split("; "):
                    reasons[(system, entry)][part.split(": ", 1)[-1].strip()] += 1
    systems = sorted({name.split(".")[0] for name in results})
    lines = ["| system | " + " | ".join(f"`{e}`" for e in entries) + " |", "|---" * (len(entries) + 1) + "|"]
    for system in systems:
        row = []
        for entry in entries:
            c = cells[(system, entry)]
            text = f"{c['agrees']} agree"
            if c["not checked"]:
                text += f", {c['not checked']} not checked"
            if c["differs"]:
                text += f", **{c['differs']} differ**"
            row.append(text)
        lines.append(f"| {system} | " + " | ".join(row) + " |")
    lines += ["", "Why not checked: the findings of verify the entry point could not make, counted over the dumps (the "
              "other columns without documents as `guard.check_step`, with them as `documents as given`):", ""]
    for system in systems:
        for entry in [e for e in ("guard.check_step", "guard.check_step (documents as given)") if e in entries]:
            for why, n in reasons[(system, entry)].most_common():
                lines.append(f"- {system}, `{entry}`: {why} ({n})")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("dumps", nargs="?", help="a folder of dumps (default: made afresh from fixtures/realpack)")
    ap.add_argument("--only", default="", help="only dumps whose file name contains this")
    ap.add_argument("--entry", action="append", choices=sorted(ENTRY_POINTS), help="only this entry point")
    ap.add_argument("--table", action="store_true", help="print docs/guard.md's table")
    args = ap.parse_args(argv)
    entries = args.entry or list(ENTRY_POINTS)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.dumps
        if folder is None:
            folder = tmp
            make_dumps(folder)
        results = {}
        for name in sorted(os.listdir(folder)):
            if name.endswith(".jsonl") and args.only in name:
                results[name] = compare(os.path.join(folder, name), entries)
    counts: Counter = Counter()
    for name, by_entry in results.items():
        for entry, (verdict, why) in by_entry.items():
            counts[verdict] += 1
            if verdict == "differs":
                print(f"{name}: {entry}: {why}")
    print(f"{len(results)} dumps x {len(entries)} entry points: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    if args.table:
        print(table(results, entries))
    return 1 if counts["differs"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
