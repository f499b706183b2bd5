"""packoracle.which_policy: which presets a packer keeps, found by fuzzing it under each.

A packer written without a declared policy still follows one. Run a few hundred generated cases under every
preset of the core (oracle/src/presets.cc): the presets it holds under are its candidates; for the nearest
preset it breaks, the policy keys in which that preset differs from one it holds under, and the minimal case
that breaks it, say what the packer does differently. Every verdict is packoracle.fuzz's (the core's checks);
this module only runs them and compares the presets' resolved keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from . import _args, _core
from ._fuzz import Counterexample, fuzz

DEFAULT_CASES = 300


@dataclass(frozen=True)
class PolicyFit:
    """What which_policy found. ``holds``: the presets every case passed under, in the core's order;
    ``nearest``: the preset broken that is nearest to one of them (fewest differing keys; without any that
    holds, the one broken last), or None when every preset holds; ``compared_with``: the preset held whose keys
    ``differing`` compares it with, as (key, nearest's value, compared_with's value); ``counterexample``: the
    nearest's minimal case (a packoracle.Counterexample: its report, ``invariant`` and ``replay``);
    ``cases``: per preset. ``str()`` says all of it."""

    holds: tuple[str, ...]
    broken: tuple[str, ...]
    nearest: Optional[str]
    compared_with: Optional[str]
    differing: tuple[tuple[str, Any, Any], ...]
    counterexample: Optional[Counterexample]
    cases: int

    def __str__(self) -> str:
        lines = [f"packoracle.which_policy: {self.cases} cases under each of "
                 f"{len(self.holds) + len(self.broken)} presets"]
        lines.append(f"  holds under: {', '.join(self.holds) or 'none'}")
        lines.append(f"  broken under: {', '.join(self.broken) or 'none'}")
        if self.nearest is not None and self.counterexample is not None:
            against = f" (against {self.compared_with})" if self.compared_with else ""
            lines.append(f"  nearest broken: {self.nearest}{against}, caught under "
                         f"`{self.counterexample.invariant}`")
            for key, theirs, held in self.differing:
                lines.append(f"    {key}: {self.nearest} says {theirs!r}, {self.compared_with} says {held!r}")
            lines.append("  its minimal case:")
            lines += ["    " + line for line in str(self.counterexample).rstrip("\n").splitlines()]
        return "\n".join(lines) + "\n"


def _differing(a: dict, b: dict) -> tuple[tuple[str, Any, Any], ...]:
    """The keys whose values differ between two resolved policies (the preset's own name aside)."""
    keys = [k for k in a if k != "preset"] + [k for k in b if k not in a and k != "preset"]
    return tuple((k, a.get(k), b.get(k)) for k in keys if a.get(k) != b.get(k))


def which_policy(packer: Callable[[dict], Any], *, cases: Optional[int] = None, seed: Optional[int] = None,
                 **fuzz_options: Any) -> PolicyFit:
    """Fuzzes ``packer`` (as packoracle.fuzz takes it) under every preset, ``cases`` each (default 300), and
    says under which it holds and, for the nearest one it breaks, the keys that differ and the minimal case.
    Other keyword arguments (``reducer``, ``consumer``, ``max_row_length``, ...) go to every fuzz call."""
    at = "which_policy"
    if not callable(packer):
        raise TypeError(f"{at}: packer must be callable, got {type(packer).__name__}")
    cases = DEFAULT_CASES if cases is None else _args.integer(cases, at, "cases", 1, 1_000_000)
    for forbidden in ("reproduce", "save_regressions", "time"):
        if forbidden in fuzz_options:
            raise TypeError(f"{at}: {forbidden}= does not apply (every preset runs its own {cases} cases)")
    presets = {p["name"]: p["policy"] for p in _core.presets()}
    holds, failures = [], {}
    for name in presets:
        try:
            fuzz(packer, name, cases=cases, seed=seed, **fuzz_options)
            holds.append(name)
        except Counterexample as e:
            failures[name] = e
    nearest, compared_with, differing = None, None, ()
    if failures and holds:
        distance = {(f, h): _differing(presets[f], presets[h]) for f in failures for h in holds}
        nearest, compared_with = min(distance, key=lambda fh: len(distance[fh]))
        differing = distance[(nearest, compared_with)]
    elif failures:  # none holds: the one that resisted longest
        nearest = max(failures, key=lambda f: failures[f].cases or 0)
    return PolicyFit(holds=tuple(holds), broken=tuple(failures), nearest=nearest, compared_with=compared_with,
                     differing=differing, counterexample=failures.get(nearest) if nearest else None, cases=cases)
