"""which_policy's search: from the nearest preset, the fewest policy keys changed under which a packer holds.

When no preset holds, the answer is still a policy: the packer does something coherent, and the keys it does
differently are what a newcomer needs. The search is counterexample-guided:

- **Probes.** The packer's answers to the requests the kit generated for it (every case and shrink step of the
  preset runs, and of each confirming run) are kept with their documents.
- **Observation.** The values an open key could take are read off the probes, never guessed: the negative
  labels (``ignore_index``), the ids in the rows (inputs or labels) that are no token of any document
  (``pad_id``, ``eos_id``, ``bos_id``), the row widths (``pad_to``). The closed keys take the values of the core's key table
  (``_core.policy_key_domains``, oracle/src/policy.cc).
- **Descent.** A policy's distance is what ``check_step`` (the core's checks) finds on the probes under it: how
  many probes it cannot read, then how many violations. From the presets nearest by that distance, one key
  at a time changes to the value that lowers it most, while one does.
- **Confirmation.** A policy at distance 0 is fuzzed (``cases`` cases, the user's options): it holds, or its
  run's requests join the probes and the descent goes on. What the probes cannot show (a refusal the policy
  demands, a reducer's denominator) is settled by fuzzing each one-key neighbour instead.

Every verdict is the core's; this module only chooses which policies to ask about.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from . import _core
from ._arrays import as_array
from ._checks import check_step
from ._policy import changed_keys

Policy = dict  # a resolved policy: every key, as _core.resolve_policy returns it
Distance = tuple[int, int]  # (probes it cannot read, violations found): lower is nearer
NOWHERE: Distance = (1 << 30, 0)

MAX_CHANGED_KEYS = 6   # a policy farther than this from every preset is not the packer's, it is a new system
MAX_PROBES = 64        # probes kept (the first ones: the generator's smallest cases come first)
DESCENTS_AFTER_HOLDING = 2  # once a policy holds, this many more descents look for one with fewer keys changed
NEIGHBOURS_FUZZED = 16      # one-key neighbours fuzzed where the probes show nothing wrong (nearest first)
PAIRED_KEYS = ("eos_id", "bos_id", "pad_id", "ignore_index")  # the open keys a pair step starts from
EXTRA_TOKENS = 3       # the most frequent tokens of no document tried as pad, EOS and BOS ids


@dataclass
class Probe:
    """One request the packer answered: its documents, row length, world size and the micro-batches."""

    documents: list
    row_length: int
    dp_world_size: int
    microbatches: list


PROBES_PER_RUN = 6     # from each fuzz run: its first answers (its smallest cases, then its shrink steps)


def recording(packer: Callable[[dict], Any], probes: list) -> Callable[[dict], Any]:
    """``packer`` as a fuzz run calls it, keeping its first PROBES_PER_RUN answers in ``probes`` (up to
    MAX_PROBES in all). It keeps the packer's names, which the run's report shows."""
    kept = 0

    def packer_recorded(request: dict) -> Any:
        nonlocal kept
        answer = packer(request)
        batches = [answer] if isinstance(answer, Mapping) else list(answer) if isinstance(answer, Sequence) else []
        if kept < PROBES_PER_RUN and len(probes) < MAX_PROBES and batches and all(
                isinstance(b, Mapping) for b in batches):
            kept += 1
            probes.append(Probe(list(request["documents"]), int(request["row_length"]),
                                int(request.get("dp_world_size", 1)), batches))
        return answer

    for name in ("__name__", "__qualname__", "__module__"):
        if hasattr(packer, name):
            setattr(packer_recorded, name, getattr(packer, name))
    return packer_recorded


def distance(policy: Policy, probes: Sequence[Probe], bound: Optional[Distance] = None) -> Distance:
    """How far ``policy`` is from what the packer does on the probes: the probes check_step cannot read under
    it, then the violations it finds on the rest. With ``bound``, it stops once the distance cannot come under
    it (the search only asks whether a neighbour beats the best so far) and returns what it had."""
    unreadable = violations = 0
    for probe in probes:
        if bound is not None and (unreadable, violations) >= bound:
            break
        try:
            report = check_step(probe.microbatches, probe.documents, policy, row_length=probe.row_length,
                                dp_world_size=probe.dp_world_size)
        except (ValueError, TypeError):
            unreadable += 1
            continue
        violations += len(report.violations)
    return unreadable, violations


# ---- the values each key may take ---------------------------------------------------------------------------

def _arrays(probes: Sequence[Probe], name: str) -> list[np.ndarray]:
    out = []
    for probe in probes:
        for batch in probe.microbatches:
            value = batch.get(name)
            if value is None:
                continue
            try:  # the kit's own reading of a field (tensor views, lists); what it cannot read shows nothing
                out.append(as_array(value, "which_policy", name).astype(np.int64, copy=False))
            except (TypeError, ValueError):
                continue
    return out


def _observed(probes: Sequence[Probe]) -> dict[str, list]:
    """The values of the open keys the probes show (see the module's docstring)."""
    labels = _arrays(probes, "labels")
    negative = sorted({int(v) for a in labels for v in np.unique(a[a < 0])})
    extra: Counter = Counter()
    for probe in probes:
        known = {int(t) for d in probe.documents for t in d.get("tokens", ())}
        # labels too: under shift: document a document's closing EOS is a label only, never an input
        for a in _arrays([probe], "input_ids") + _arrays([probe], "labels"):
            values, counts = np.unique(a[a >= 0], return_counts=True)
            extra.update({int(v): int(c) for v, c in zip(values, counts) if int(v) not in known})
    tokens = [t for t, _ in extra.most_common(EXTRA_TOKENS)]
    widths = {int(a.shape[-1]) for a in _arrays(probes, "input_ids") if a.ndim == 2 and a.shape[-1] > 0}
    multiple = math.gcd(*widths) if widths else 0
    lengths = {p.row_length for p in probes}
    pad_to = ["row_len"] + ([f"multiple_of:{multiple}"] if multiple > 1 and widths - lengths else [])
    return {"ignore_index": negative or [-100], "pad_id": tokens + [0], "eos_id": [None] + tokens,
            "bos_id": [None] + tokens, "position_base": [0, 1], "pad_to": pad_to}


def key_values(probes: Sequence[Probe]) -> dict[str, list]:
    """Every key but ``preset`` with the values the search tries: the core's closed sets, the observed ones."""
    observed = _observed(probes)
    out = {}
    for domain in _core.policy_key_domains():
        key = domain["key"]
        if key == "preset":
            continue
        values = list(domain["values"]) + [v for v in observed.get(key, []) if v not in domain["values"]]
        out[key] = values
    return out


def resolved(policy: Mapping[str, Any]) -> Optional[Policy]:
    """The core's resolution of ``policy``, or None where its keys contradict each other."""
    try:
        return _core.resolve_policy(dict(policy))
    except ValueError:
        return None


def neighbours(policy: Policy, values: Mapping[str, list]) -> list[tuple[str, Policy]]:
    """Every coherent policy one key away from ``policy`` (its preset name kept)."""
    out = []
    for key, options in values.items():
        for value in options:
            if value == policy.get(key):
                continue
            moved = resolved({**policy, key: value})
            if moved is not None:
                out.append((key, moved))
    return out


# ---- the descent --------------------------------------------------------------------------------------------

Confirm = Callable[[Policy], Optional[Exception]]  # fuzzes a policy: None when it holds, else its Counterexample


@dataclass
class Found:
    """Where a descent ended: ``policy`` (resolved, its ``preset`` the preset it started from), whether it
    ``holds`` (confirmed by fuzzing, or on the one batch), its ``failure`` when it does not, and its
    ``distance`` on the probes."""

    policy: Policy
    holds: bool
    failure: Optional[Exception]
    distance: Distance

    def changed(self, presets: Mapping[str, Policy]) -> tuple[tuple[str, Any, Any], ...]:
        return changed_keys(self.policy, presets[self.policy["preset"]])


@dataclass
class Search:
    """One search: the presets' resolved policies, the probes (grown by each confirming run), ``confirm``
    (None for a single batch, where distance 0 on the batch is the verdict) and ``check`` (a policy's distance
    on the probes; by default check_step's on each, see ``distance``)."""

    presets: Mapping[str, Policy]
    probes: list
    confirm: Optional[Confirm]
    check: Optional[Callable[[Policy], Distance]] = None
    steps: int = 0   # policies whose distance was measured, for the answer's account of the work

    def measure(self, policy: Policy, bound: Optional[Distance] = None) -> Distance:
        self.steps += 1
        return self.check(policy) if self.check is not None else distance(policy, self.probes, bound)

    def nearest_step(self, policy: Policy, values: Mapping[str, list]) -> Optional[tuple[Distance, Policy]]:
        """The one-key change that lowers the distance most (the first such in key order), within
        MAX_CHANGED_KEYS of the preset."""
        base = self.presets[policy["preset"]]
        best: Optional[tuple[Distance, Policy]] = None
        for _, moved in neighbours(policy, values):
            if len(changed_keys(moved, base)) > MAX_CHANGED_KEYS:
                continue
            d = self.measure(moved, best[0] if best is not None else None)
            if best is None or d < best[0]:
                best = (d, moved)
        return best

    def nearest_pair_step(self, policy: Policy, values: Mapping[str, list]) -> Optional[tuple[Distance, Policy]]:
        """Where no one key helps: a delimiter or pad id (PAIRED_KEYS) together with one other key, as a packer
        that appends an EOS and shifts inside documents needs both said at once."""
        best: Optional[tuple[Distance, Policy]] = None
        for key in PAIRED_KEYS:
            for value in values.get(key, []):
                first = resolved({**policy, key: value}) if value != policy.get(key) else None
                if first is None:
                    continue
                step = self.nearest_step(first, values)
                if step is not None and (best is None or step[0] < best[0]):
                    best = step
        return best

    def descend(self, preset: str) -> Found:
        """From ``preset``, one key at a time while the distance falls; each policy reaching distance 0 is
        confirmed (see the module's docstring)."""
        policy = self.presets[preset]
        here = self.measure(policy)
        failure: Optional[Exception] = None
        for _ in range(2 * MAX_CHANGED_KEYS):
            if here == (0, 0):
                if self.confirm is None:
                    return Found(policy, True, None, here)
                failure = self.confirm(policy)
                if failure is None:
                    return Found(policy, True, None, here)
                here = self.measure(policy)  # the confirming run's answers are probes now
                if here == (0, 0):
                    return self.fuzz_neighbours(policy, failure)
            values = key_values(self.probes)
            step = self.nearest_step(policy, values)
            if step is None or step[0] >= here:
                step = self.nearest_pair_step(policy, values)
            if step is None or step[0] >= here:
                break
            here, policy = step
        # Stuck above 0: the probes come from every preset's generator, and a packer may break a policy on a
        # case that policy's own generator never makes. Fuzzing is the verdict, so the policy reached is asked.
        if self.confirm is not None and here != (0, 0):
            failure = self.confirm(policy)
            if failure is None:
                return Found(policy, True, None, here)
        return Found(policy, False, failure, here)

    def fuzz_neighbours(self, policy: Policy, failure: Exception) -> Found:
        """The probes show nothing wrong, yet fuzzing fails (a refusal the policy demands, a reducer's
        denominator): each one-key neighbour is fuzzed instead, nearest on the probes first."""
        assert self.confirm is not None
        base = self.presets[policy["preset"]]
        ranked = sorted(((self.measure(moved), k, moved) for k, moved in
                         neighbours(policy, key_values(self.probes))
                         if len(changed_keys(moved, base)) <= MAX_CHANGED_KEYS), key=lambda t: t[0])
        for d, _, moved in ranked[:NEIGHBOURS_FUZZED]:
            if d != (0, 0):
                break
            if self.confirm(moved) is None:
                return Found(moved, True, None, d)
        return Found(policy, False, failure, (0, 0))

    def run(self, order: Sequence[str]) -> Found:
        """Descends from every preset, nearest on the probes first; the holding policy with the fewest changed
        keys (one changed key ends the search: no preset holds, so none is nearer), else the nearest reached."""
        found: list[Found] = []
        after_holding = 0  # descents since the first holding policy: a few more, for one with fewer keys
        for name in sorted(order, key=lambda name: self.measure(self.presets[name])):
            found.append(self.descend(name))
            changed = [len(f.changed(self.presets)) for f in found if f.holds]
            after_holding += bool(changed)
            if changed and (min(changed) <= 1 or after_holding > DESCENTS_AFTER_HOLDING):
                break
        holding = [f for f in found if f.holds]
        if holding:
            return min(holding, key=lambda f: len(f.changed(self.presets)))
        return min(found, key=lambda f: (f.distance, len(f.changed(self.presets))))
