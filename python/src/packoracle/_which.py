"""packoracle.which_policy: which presets a packer keeps, found by fuzzing it under each; which_policy_of_batch:
which presets a batch you already hold keeps, found by checking it under each.

A packer written without a declared policy still follows one. Run a few hundred generated cases under every
preset of the core (oracle/src/presets.cc): the presets it holds under are its candidates; for the nearest
preset it breaks, the policy keys in which that preset differs from one it holds under, and the minimal case
that breaks it, say what the packer does differently. When no preset holds, the search of _policy_search.py
finds the policy the packer does keep, as few keys from a preset as it can. Every verdict is packoracle.fuzz's
(the core's checks); this module only runs them and compares the presets' resolved keys.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Optional

from . import _args, _core
from ._checks import check_batch
from ._documents import canonical_documents
from ._fuzz import Counterexample, fuzz
from ._policy import as_written
from ._policy_search import Probe, Search, recording
from .report import Report

DEFAULT_CASES = 300


@dataclass(frozen=True)
class PolicyFit:
    """What which_policy found. ``holds``: the presets every case passed under, in the core's order;
    ``nearest``: the preset broken that is nearest to one of them (fewest differing keys; without any that
    holds, the one broken last), or None when every preset holds; ``compared_with``: the preset held whose keys
    ``differing`` compares it with, as (key, nearest's value, compared_with's value); ``counterexample``: the
    nearest's minimal case (a packoracle.Counterexample: its report, ``invariant`` and ``replay``);
    ``cases``: per preset (1 for a batch); ``report``: for which_policy_of_batch, the nearest's Report (or
    ``refusal``: the check's error under it, for a batch that preset cannot even read); ``of_batch``: found
    from one batch.

    ``policy``: a policy under which the packer holds, as you paste it (``{"preset": "hf-flatten", "padding":
    "right"}``): the first preset that holds, else the one the search found from the nearest preset; None when
    nothing holds. ``changed``: the keys it changes from its preset, as (key, the preset's value, its value).
    ``closest``: when nothing holds, the nearest policy the search reached (``changed`` its keys,
    ``counterexample`` or ``report`` what it still breaks). ``str()`` says all of it."""

    holds: tuple[str, ...]
    broken: tuple[str, ...]
    nearest: Optional[str]
    compared_with: Optional[str]
    differing: tuple[tuple[str, Any, Any], ...]
    counterexample: Optional[Counterexample]
    cases: int
    report: Optional[Report] = None
    refusal: Optional[str] = None
    of_batch: bool = False
    policy: Optional[dict] = None
    changed: tuple[tuple[str, Any, Any], ...] = ()
    closest: Optional[dict] = None

    @property
    def found(self) -> bool:
        """Whether a policy holds: a preset, or one the search found (``policy``)."""
        return self.policy is not None

    def __str__(self) -> str:
        what = "one batch" if self.of_batch else f"{self.cases} cases"
        lines = [f"packoracle.which_policy: {what} under each of {len(self.holds) + len(self.broken)} presets"]
        lines.append(f"  holds under: {', '.join(self.holds) or 'none'}")
        lines.append(f"  broken under: {', '.join(self.broken) or 'none'}")
        lines += self._search_lines()
        if self.nearest is not None and self.counterexample is not None:
            against = f" (against {self.compared_with})" if self.compared_with else ""
            lines.append(f"  nearest broken: {self.nearest}{against}, caught under "
                         f"`{self.counterexample.invariant}`")
            for key, theirs, held in self.differing:
                lines.append(f"    {key}: {self.nearest} says {theirs!r}, {self.compared_with} says {held!r}")
            lines.append("  its minimal case:")
            lines += ["    " + line for line in str(self.counterexample).rstrip("\n").splitlines()]
        elif self.nearest is not None and (self.report is not None or self.refusal is not None):
            against = f" (against {self.compared_with})" if self.compared_with else ""
            lines.append(f"  nearest broken: {self.nearest}{against}")
            for key, theirs, held in self.differing:
                lines.append(f"    {key}: {self.nearest} says {theirs!r}, {self.compared_with} says {held!r}")
            evidence = str(self.report) if self.report is not None else f"refused: {self.refusal}\n"
            lines.append("  what it finds:")
            lines += ["    " + line for line in evidence.rstrip("\n").splitlines()]
        return "\n".join(lines) + "\n"


    def _search_lines(self) -> list[str]:
        """The policy found (or the closest reached) and its keys changed from the preset."""
        if self.policy is None and self.closest is None:
            return ["  no policy found within the search's reach (see the nearest preset below)"]
        if self.policy is not None and not self.changed:
            return [f"  policy: {self.policy!r}"]
        shown = self.policy if self.policy is not None else self.closest
        assert shown is not None
        preset = shown["preset"]
        what = "found by search, holds" if self.policy is not None else "closest found, still broken"
        cases = "on the batch" if self.of_batch else f"{self.cases} cases"
        lines = [f"  policy ({what}, {cases}): {shown!r}"]
        lines += [f"    {key}: {preset} says {theirs!r}, the packer does {ours!r}" for key, theirs, ours in self.changed]
        return lines


def _differing(a: dict, b: dict) -> tuple[tuple[str, Any, Any], ...]:
    """The keys whose values differ between two resolved policies (the preset's own name aside)."""
    keys = [k for k in a if k != "preset"] + [k for k in b if k not in a and k != "preset"]
    return tuple((k, a.get(k), b.get(k)) for k in keys if a.get(k) != b.get(k))


def which_policy(packer: Callable[[dict], Any], *, cases: Optional[int] = None, seed: Optional[int] = None,
                 search: bool = True, **fuzz_options: Any) -> PolicyFit:
    """Fuzzes ``packer`` (as packoracle.fuzz takes it) under every preset, ``cases`` each (default 300), and
    says under which it holds and, for the nearest one it breaks, the keys that differ and the minimal case.

    When no preset holds (and ``search``), it searches for the policy the packer keeps: from the presets
    nearest to what the packer did, one key at a time, each policy reached confirmed by ``cases`` fuzzed cases
    (packoracle/_policy_search.py). ``fit.policy`` is then that policy as you paste it, ``fit.changed`` its keys
    changed from the preset; when nothing holds, ``fit.closest`` is the nearest policy reached and
    ``fit.counterexample`` the minimal case it still fails. Other keyword arguments (``reducer``,
    ``consumer``, ``max_row_length``, ...) go to every fuzz call."""
    at = "which_policy"
    if not callable(packer):
        raise TypeError(f"{at}: packer must be callable, got {type(packer).__name__}")
    cases = DEFAULT_CASES if cases is None else _args.integer(cases, at, "cases", 1, 1_000_000)
    for forbidden in ("reproduce", "save_regressions", "time"):
        if forbidden in fuzz_options:
            raise TypeError(f"{at}: {forbidden}= does not apply (every preset runs its own {cases} cases)")
    presets = {p["name"]: p["policy"] for p in _core.presets()}
    probes: list = []
    holds, failures = [], {}
    for name in presets:
        try:
            fuzz(recording(packer, probes), name, cases=cases, seed=seed, **fuzz_options)
            holds.append(name)
        except Counterexample as e:
            failures[name] = e
    nearest, compared_with, differing = _nearest(presets, holds, failures,
                                                 resisted=lambda f: failures[f].cases or 0)
    fit = PolicyFit(holds=tuple(holds), broken=tuple(failures), nearest=nearest, compared_with=compared_with,
                    differing=differing, counterexample=failures.get(nearest) if nearest else None, cases=cases,
                    policy={"preset": holds[0]} if holds else None)
    if holds or not search:
        return fit

    def confirm(policy: dict) -> Optional[Exception]:
        try:
            fuzz(recording(packer, probes), as_written(policy), cases=cases, seed=seed, **fuzz_options)
            return None
        except Counterexample as e:
            return e

    found = Search(presets, probes, confirm).run(list(presets))
    changed = found.changed(presets)
    preset = found.policy["preset"]
    failure = found.failure if isinstance(found.failure, Counterexample) else failures.get(preset)
    return replace(fit, nearest=preset, compared_with=None, differing=(), changed=changed,
                   counterexample=failures.get(preset) if found.holds else failure,
                   policy=as_written(found.policy) if found.holds else None,
                   closest=None if found.holds else as_written(found.policy))


def _nearest(presets: dict, holds: list, failures: dict, resisted: Callable[[str], int]
             ) -> tuple[Optional[str], Optional[str], tuple[tuple[str, Any, Any], ...]]:
    """(nearest broken preset, the held one it is compared with, their differing keys): the pair of a broken and
    a held preset with the fewest differing keys; without any held, the broken one that resisted most."""
    if failures and holds:
        distance = {(f, h): _differing(presets[f], presets[h]) for f in failures for h in holds}
        nearest, compared_with = min(distance, key=lambda fh: len(distance[fh]))
        return nearest, compared_with, distance[(nearest, compared_with)]
    if failures:
        return max(failures, key=resisted), None, ()
    return None, None, ()


def which_policy_of_batch(batch: Mapping[str, Any], documents: Any, *, search: bool = True,
                          **check_options: Any) -> PolicyFit:
    """Checks one micro-batch you already hold (as packoracle.check_batch takes it) under every preset and says
    under which it holds and, for the nearest one it breaks, the keys that differ and that preset's Report.
    A preset under which the batch cannot be read at all (a negative id it does not declare, say) is broken,
    with the error as its ``refusal``. Other keyword arguments (``row_length``, ``producer``, ``ignore``, ...)
    go to every check_batch call; one batch is a single case, so a preset that holds here may still break on
    others (which_policy fuzzes a packer). When no preset holds (and ``search``), the policy nearest a preset
    under which the batch holds is searched for as which_policy does (``fit.policy``, ``fit.changed``;
    ``fit.closest`` and ``fit.report`` when none is found)."""
    at = "which_policy_of_batch"
    if not isinstance(batch, Mapping):
        raise TypeError(f"{at}: batch must be a dict of arrays (input_ids, labels, ...), got {type(batch).__name__}")
    if "policy" in check_options:
        raise TypeError(f"{at}: policy= does not apply (the batch is checked under every preset)")
    presets = {p["name"]: p["policy"] for p in _core.presets()}
    holds: list[str] = []
    failures: dict[str, Any] = {}  # preset -> its Report, or the error text under it
    for name in presets:
        try:
            report = check_batch(batch, documents, name, **check_options)
        except ValueError as e:
            failures[name] = str(e)
            continue
        if report.ok:
            holds.append(name)
        else:
            failures[name] = report
    nearest, compared_with, differing = _nearest(
        presets, holds, failures,
        resisted=lambda f: -len(failures[f].violations) if isinstance(failures[f], Report) else -1_000_000_000)
    evidence = failures.get(nearest) if nearest else None
    fit = PolicyFit(holds=tuple(holds), broken=tuple(failures), nearest=nearest, compared_with=compared_with,
                    differing=differing, counterexample=None, cases=1,
                    report=evidence if isinstance(evidence, Report) else None,
                    refusal=evidence if isinstance(evidence, str) else None, of_batch=True,
                    policy={"preset": holds[0]} if holds else None)
    if holds or not search:
        return fit
    return _searched_batch(fit, presets, failures, batch, documents, check_options)


def _searched_batch(fit: PolicyFit, presets: dict, failures: dict, batch: Mapping[str, Any], documents: Any,
                    check_options: dict) -> PolicyFit:
    """which_policy_of_batch's search where no preset holds: the same descent as which_policy's, on the one
    batch, where check_batch finding nothing is the verdict (a single case: see which_policy_of_batch)."""
    def check(policy: dict) -> tuple[int, int]:
        try:
            return 0, len(check_batch(batch, documents, policy, **check_options).violations)
        except ValueError:
            return 1, 0

    try:
        docs = documents.to_list() if isinstance(documents, _core.Documents) else canonical_documents(documents)
    except (TypeError, ValueError):
        docs = []  # check_batch said why under every preset; the search then observes the rows alone
    probe = Probe(docs, int(check_options.get("row_length") or 0), 1, [batch])
    found = Search(presets, [probe], None, check).run(list(presets))
    changed = found.changed(presets)
    preset = found.policy["preset"]
    if found.holds:  # the evidence shown is then what its preset finds
        evidence = failures.get(preset)
        return replace(fit, nearest=preset, compared_with=None, differing=(), changed=changed,
                       policy=as_written(found.policy),
                       report=evidence if isinstance(evidence, Report) else None,
                       refusal=evidence if isinstance(evidence, str) else None)
    report = check_batch(batch, documents, found.policy, **check_options) if found.distance[0] == 0 else None
    return replace(fit, nearest=preset, compared_with=None, differing=(), changed=changed,
                   closest=as_written(found.policy), report=report or fit.report,
                   refusal=None if report else fit.refusal)
