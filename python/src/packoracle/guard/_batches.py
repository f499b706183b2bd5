"""The batch side of the guard: a collator or a DataLoader wrapped so that each batch (or one in `every`)
is checked in-process against the declared policy, with the documents its features say it holds."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence, Sized
from dataclasses import dataclass
from typing import Any, Callable, Literal, Optional, Union, cast

import numpy as np

from .. import _args, _core
from .._arrays import as_array
from .._batch import KNOWN, Microbatches, canonical_fields
from .._checks import checked_batch
from .._policy import PolicyLike, resolve
from ..report import Report
from ._rows import check_from_rows
from ._segments import CHECKED_WITH_DOCUMENTS, CHECKED_WITHOUT_DOCUMENTS

log = logging.getLogger("packoracle.guard")
OnViolation = Union[Literal["raise", "log"], Callable[["GuardViolation"], Any]]


class GuardViolation(AssertionError):
    """A batch or a step of the training run breaks the declared policy. ``str()`` is the kit's report;
    ``report`` the Report (or the step's cross-rank verdict), ``dump`` the file `packoracle verify` replays
    (None when the guard saves none), ``checks`` what the guard could check."""

    def __init__(self, text: str, *, report: Any, dump: Optional[str], checks: Sequence[str], where: str):
        super().__init__(text)
        self.report, self.dump, self.checks, self.where = report, dump, tuple(checks), where


@dataclass
class GuardState:
    """What the guard has done so far (for logs and tests)."""

    seen: int = 0
    checked: int = 0
    violations: int = 0
    last_dump: Optional[str] = None


def documents_from_features(features: Sequence[Mapping[str, Any]], ignore_index: int = -100) -> list[dict]:
    """The documents a collator was handed: one per feature (its input_ids; its labels say which tokens are
    supervised), or, for a feature that is already a packed row with `seq_lengths` (TRL's pack_dataset), one
    per length. Each is {"doc_uid", "tokens", "supervised"} with numpy arrays (tokens a view of the feature's
    input_ids where it is an array), as check_batch reads them."""
    docs = []
    for k, f in enumerate(features):
        if not isinstance(f, Mapping) or "input_ids" not in f:
            raise TypeError(f"guard: feature {k} has no 'input_ids': the guard reads the documents from the features")
        ids = as_array(f["input_ids"], f"features[{k}]", "input_ids").reshape(-1)
        labels = f.get("labels")
        sup = np.ones(len(ids), dtype=np.int8) if labels is None else \
            (as_array(labels, f"features[{k}]", "labels").reshape(-1) != ignore_index).astype(np.int8)
        lengths = f.get("seq_lengths")
        lengths = [len(ids)] if lengths is None else \
            [int(n) for n in as_array(lengths, f"features[{k}]", "seq_lengths").reshape(-1)]
        if sum(lengths) != len(ids):
            raise ValueError(f"guard: features[{k}]: field 'seq_lengths' sums to {sum(lengths)}, but its input_ids "
                             f"has {len(ids)} tokens")
        start = 0
        for j, n in enumerate(int(x) for x in lengths):
            supervised = sup[start:start + n].copy()
            supervised[:1] = 1  # a document's first token is never a target: its label says nothing
            docs.append({"doc_uid": f"f{k}" if len(lengths) == 1 else f"f{k}.{j}",
                         "tokens": ids[start:start + n], "supervised": supervised})
            start += n
    return docs


class BatchGuard:
    """Checks batches against a policy; what wrap_collator and wrap_dataloader share."""

    def __init__(self, policy: PolicyLike, *, every: int = 1, on_violation: OnViolation = "raise",
                 dump_dir: Optional[str] = None, ignore: Sequence[str] = ()):
        every = _args.integer(every, "guard", "every", 1, _args.INT64_MAX)
        if not (callable(on_violation) or on_violation in ("raise", "log")):
            raise ValueError(f"guard: on_violation is 'raise', 'log' or a callable, got {on_violation!r}")
        self.policy = resolve(policy)
        self.every, self.on_violation, self.ignore = every, on_violation, tuple(ignore)
        self.dump_dir = dump_dir if dump_dir is not None else os.environ.get("PACKORACLE_GUARD_DIR", "packoracle-guard")
        self.state = GuardState()

    def check(self, batch: Mapping[str, Any],
              documents: Optional[Callable[[], list[dict]]] = None) -> Optional[Report]:
        """Checks one batch (if it is its turn); returns its Report, or None when skipped. `documents` gives
        the batch's documents, called only when the batch is checked (None: its own segments stand for them)."""
        self.state.seen += 1
        if (self.state.seen - 1) % self.every:
            return None
        self.state.checked += 1
        docs = documents() if documents is not None else None
        # the batch itself where nothing is left out (read, never changed); a dict, which the core reads in one call
        fields = batch if not self.ignore and type(batch) is dict else \
            {k: v for k, v in batch.items() if k not in self.ignore}
        # check_batch without its argument checks: the guard's arguments are its defaults, its policy resolved once
        not_read = _not_read(fields)  # checked as check_batch checks its ignore (none: nothing to check)
        ignore = _args.names(not_read, "check_batch", "ignore") if not_read else ()
        checks: tuple[str, ...]
        if docs is None or not docs:
            read = check_from_rows(fields, canonical_fields(fields, "batch", not_read), self.policy, ignore)
            report, docs = read.report, read.documents
            fields = dict(fields, doc_spans=read.spans)  # what a saved dump holds
            checks = CHECKED_WITHOUT_DOCUMENTS
        else:
            report = checked_batch(fields, docs, self.policy, ignore=ignore)
            checks = CHECKED_WITH_DOCUMENTS
        if not report.ok:
            self.violation(report, fields, docs, checks, f"batch {self.state.seen - 1}", self.state.seen - 1)
        return report

    def violation(self, report: Report, batch: Mapping[str, Any], documents: list[dict], checks: Sequence[str],
                  where: str, step: int = 0) -> None:
        self.state.violations += 1
        dump = self.save(batch, documents, where, step)
        text = (f"packoracle guard: {where} breaks the declared policy (checked: {', '.join(checks)})\n"
                f"{report.text}" + (f"replay: packoracle verify {dump}\n" if dump else ""))
        self.notify(GuardViolation(text, report=report, dump=dump, checks=checks, where=where))

    def notify(self, error: GuardViolation) -> None:
        """Raise, log or hand over, as on_violation says."""
        if self.on_violation == "raise":
            raise error
        if self.on_violation == "log":
            log.error("%s", error)
        else:
            self.on_violation(error)

    def save(self, batch: Mapping[str, Any], documents: list[dict], where: str, step: int = 0) -> Optional[str]:
        """The batch as a dump (DESIGN §5) that `packoracle verify` replays; None if it cannot be written.

        Dumps of several batches and ranks verify together as they do alone (`packoracle verify dir/*.jsonl`
        reads its files as the ranks of one run): each batch is its own step (its number among the batches
        seen), on its own rank, and its documents' uids carry both, since a uid names one document in a
        whole run (the segments of two batches are both `row0.seg0` before)."""
        from ..dump import DumpWriter

        if isinstance(documents, _core.Documents):
            documents = documents.to_list()
        try:
            os.makedirs(self.dump_dir, exist_ok=True)
            rank, world = _rank_and_world()
            path = os.path.join(self.dump_dir, f"{where.replace(' ', '-')}.rank{rank}.jsonl")
            reader = Microbatches(documents, self.policy)
            mb = reader.read([dict(batch)])[0]
            uid = f"step{step}.rank{rank}.{{}}".format
            with DumpWriter(path) as w:
                w.header(system="packoracle.guard", component="a batch of the training run", policy=self.policy,
                         dp_world_size=world)
                for d in documents:
                    w.document(uid(d["doc_uid"]), d["tokens"], d.get("supervised"))
                rows = [{k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in row.items()} for row in mb["rows"]]
                for row in rows:
                    row["doc_spans"] = [dict(s, doc_uid=uid(s["doc_uid"])) for s in row.get("doc_spans") or []]
                w.write({"record": "microbatch", "step": step, "micro_step": 0, "rank": rank, "rows": rows})
        except (OSError, TypeError, ValueError) as e:
            log.warning("packoracle guard: could not save the batch as a dump: %s", e)
            return None
        self.state.last_dump = path
        return path


def _not_read(batch: Mapping[str, Any]) -> list[str]:
    """Fields of a training batch that are not packing encodings (the guard leaves them alone)."""
    return [k for k in batch if k not in KNOWN]


class GuardedCollator:
    """A collator whose every batch (or one in `every`) is checked; the documents are the features it is
    handed. Call it as the collator it wraps."""

    def __init__(self, collator: Callable[..., Any], guard: BatchGuard):
        self.collator, self.guard = collator, guard
        # what the core's reader needs of the policy, read once rather than on every batch
        self._ignore_index = guard.policy["ignore_index"]
        self._signed_ids = _args.sorted_signed_ids(guard.policy)

    def __call__(self, features: Any, *args: Any, **kwargs: Any) -> Any:
        batch = self.collator(features, *args, **kwargs)
        self.guard.check(batch, lambda: self._documents(features))
        return batch

    def _documents(self, features: Any) -> Any:
        """documents_from_features read in the core in one call (a _core.Documents, which check_batch takes as
        it is): a dict and an array per feature in Python cost more than the collator (bench/README.md)."""
        return _core.documents_from_features(features, self._ignore_index, self._signed_ids)

    def __getattr__(self, name: str) -> Any:  # the wrapped collator's attributes (tokenizer, flags, ...)
        return getattr(self.collator, name)


def wrap_collator(collator: Callable[..., Any], policy: PolicyLike, *, every: int = 1,
                  on_violation: OnViolation = "raise", dump_dir: Optional[str] = None) -> GuardedCollator:
    """`collator` with a check of its batches against `policy` (a preset name, a dict or a Policy).

    The documents of a batch are the features the collator is handed (their input_ids; their labels say
    which tokens are supervised; a packed feature with `seq_lengths` holds one document per length). A
    violation raises GuardViolation (``on_violation="raise"``), logs it (``"log"``) or calls yours; the batch
    is saved in ``dump_dir`` (default ``$PACKORACLE_GUARD_DIR`` or ./packoracle-guard) for `packoracle verify`."""
    return GuardedCollator(collator, BatchGuard(policy, every=every, on_violation=on_violation, dump_dir=dump_dir))


class GuardedLoader:
    """A DataLoader (any iterable of batches) whose batches are checked; without the features, the documents
    are the batches' own segments (see `documents_from_segments`), unless a batch carries doc_spans."""

    def __init__(self, loader: Iterable, guard: BatchGuard):
        self.loader, self.guard = loader, guard

    def __iter__(self) -> Iterator[Any]:
        for batch in self.loader:
            self.guard.check(batch)
            yield batch

    def __len__(self) -> int:
        # a loader without len() raises TypeError here, as it does unwrapped
        return len(cast(Sized, self.loader))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)


def wrap_dataloader(loader: Iterable, policy: PolicyLike, *, every: int = 1, on_violation: OnViolation = "raise",
                    dump_dir: Optional[str] = None) -> GuardedLoader:
    """`loader` with a check of every batch (or one in `every`). It sees batches, not documents: what it
    checks is what needs none (segments against each other, positions, targets against the shift, counts);
    wrap the collator instead to check the batches against their documents."""
    return GuardedLoader(loader, BatchGuard(policy, every=every, on_violation=on_violation, dump_dir=dump_dir))


def _rank_and_world() -> tuple[int, int]:
    """This process's rank and the world size as torchrun sets them (RANK, WORLD_SIZE); 0 and 1 alone."""
    try:
        rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return 0, 1
    return (rank, world) if 0 <= rank < world else (0, 1)
