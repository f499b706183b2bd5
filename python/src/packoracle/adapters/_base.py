"""What every adapter shares: the Adapter record (system, version, configuration, declared policy), the kit's
request as the documents a library is fed, and the kit's side of a step (rows into micro-batches and ranks).

An adapter turns the kit's request (DESIGN §6) into a call of the real library and hands back what the library
returned, unchanged, in the library's own field names. What the adapter itself decides (which documents go to
which collator call, which micro-batch goes to which rank) is the part a trainer's data loader does, and is
done here the same way for every library: rows in order, micro-batch m = rows [m·B, (m+1)·B), rank m mod dp.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from .. import _core
from .._fuzz import Refuse
from .._policy import Policy

Packer = Callable[[dict], Any]
Reducer = Callable[[dict], Any]


@dataclass(frozen=True)
class Finding:
    """A failure of a configuration, examined until explained. ``kind`` is "bug" (the library does what no
    policy of its own intent allows: ``upstream`` is the issue/PR, or "not reported") or "allowed" (a behaviour
    of the library that its documentation states, which the declared policy cannot express). ``report`` is a
    bug's upstream-ready report, ``docs/upstream/<library>-<finding>.md`` (from the repository root), beside its
    standalone script ``<same name>.py``: the library alone, exit 1 on the pinned release, 0 with ``--with-fix``
    (docs/upstream/README.md; python/tests/test_upstream_reports.py checks every bug has one)."""

    invariant: str
    kind: str
    explanation: str
    upstream: str = "not reported"
    report: str = ""

    def __post_init__(self) -> None:
        if self.kind not in ("bug", "allowed"):
            raise ValueError(f"Finding.kind: 'bug' or 'allowed', got {self.kind!r}")


@dataclass(frozen=True)
class Adapter:
    """One library in one configuration, driven as a candidate of the kit.

    ``policy`` is what the library really implements in that configuration (a preset with overrides), not
    what it is meant to: a behaviour the policy declares is checked as allowed, anything else is a finding.
    ``packer()`` / ``reducer()`` import the library and return the callables ``packoracle.fuzz`` drives."""

    name: str                       # unique: "<system>/<configuration id>"
    system: str                     # the library as users name it
    distribution: str               # its PyPI distribution (the version is read from it)
    written_for: str                # the version this adapter was written and checked against
    configuration: str              # the call, as a user writes it
    policy: Mapping[str, Any]
    imports: tuple[str, ...]        # modules the adapter needs (their import failing makes the row "cannot run")
    make_packer: Optional[Callable[[], Packer]] = None
    make_reducer: Optional[Callable[[], Reducer]] = None
    # The packoracle.dump converter of this system: (request, the packer's answer) → microbatch records, as a
    # user dumping the library's real output writes them (checked by verify against the in-process verdict).
    dump: Optional[Callable[[dict, Any], list]] = None
    max_row_length: int = 16
    max_documents: int = 8  # the conformance matrix's bounds (its verdicts and time), not fuzz's defaults
    # False for a library that takes no per-token supervision (a pretraining dataset): the kit then generates
    # documents whose every token is supervised, instead of failing on that at every case.
    sft_masks: bool = True
    notes: str = ""
    env: Mapping[str, str] = field(default_factory=dict)  # documented environment a CPU user sets
    # What the kit finds, examined: role ("pack": the packer alone; "loss": packer + loss reducer) → Finding.
    findings: Mapping[str, "Finding"] = field(default_factory=dict)
    # The family environment the library runs in (packoracle.conformance._envs.FAMILIES: its venv is built from
    # requirements/<family>.lock), "" for the main one. The conformance runner drives a family's packer in that
    # venv through the exec protocol's framing; in-process (adapters.get(...).packer()) it needs that venv too.
    family: str = ""

    def installed_version(self) -> Optional[str]:
        try:
            return importlib.metadata.version(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            return None

    def unavailable(self) -> Optional[str]:
        """Why the library cannot run here (not installed, an import that fails on CPU), or None."""
        if self.installed_version() is None:
            return f"{self.distribution} is not installed (pip install {self.distribution}=={self.written_for})"
        for module in self.imports:
            try:
                importlib.import_module(module)
            except Exception as e:  # an ImportError, or whatever a GPU-only import raises on CPU
                return f"import {module} fails on this machine: {type(e).__name__}: {str(e).splitlines()[0]}"
        return None

    def resolved_policy(self) -> Policy:
        return Policy(dict(self.policy))

    def packer(self) -> Optional[Packer]:
        return self.make_packer() if self.make_packer is not None else None

    def reducer(self) -> Optional[Reducer]:
        return self.make_reducer() if self.make_reducer is not None else None


def documents_of(request: dict) -> list[dict]:
    """The request's documents as the library is fed them: the policy's delimiters (bos/eos) added, as the
    dataset preparation of the system adds them. [{"doc_uid", "tokens", "supervised"}], tokens as lists."""
    return [{"doc_uid": d["doc_uid"], "tokens": [int(t) for t in d["tokens"]],
             "supervised": [int(s) for s in d["supervised"]]}
            for d in _core.effective_documents(request["documents"], request["policy"])]


def refuse_too_long(docs: list[dict], row_length: int, what: str) -> None:
    """The refusal a library makes for a document longer than its row (the kit's overflow: error)."""
    for d in docs:
        if len(d["tokens"]) > row_length:
            raise Refuse(f"{what}: document '{d['doc_uid']}' has {len(d['tokens'])} tokens, more than "
                         f"{row_length}")


def greedy_groups(docs: list[dict], budget: int) -> list[list[dict]]:
    """Documents in order into groups of at most `budget` tokens (the token budget of a collator call, for
    collators that have no row length); empty documents are left out, as a dataset filter drops them."""
    groups: list[list[dict]] = []
    used = budget + 1
    for d in docs:
        n = len(d["tokens"])
        if n == 0:
            continue
        if used + n > budget:
            groups.append([])
            used = 0
        groups[-1].append(d)
        used += n
    return groups


def assign(batches: list[Any], request: dict) -> list[dict]:
    """The data loader's part: rows (each a batch dict of one row) into micro-batches of micro_batch_rows rows,
    micro-batch m to rank m mod dp_world_size at micro_step m div dp_world_size. A micro-batch is a list of its
    rows' batches under "rows" (rows of a flattening collator differ in length)."""
    per, dp = request["micro_batch_rows"], request["dp_world_size"]
    out: list[dict] = []
    for k, batch in enumerate(batches):
        m = k // per
        if m == len(out):
            out.append({"record": "microbatch", "step": 0, "micro_step": m // dp, "rank": m % dp, "rows": []})
        out[m]["rows"].append(batch)
    return out
