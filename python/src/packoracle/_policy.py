"""Policies (DESIGN §3): a preset name, a dict of keys, or a `Policy`; resolved and validated by the C++ core."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any, Union

from . import _args, _core


class Policy(Mapping):
    """A fully resolved packing policy: every key of DESIGN §3, read-only.

        Policy("hf-flatten")                         # a preset
        Policy("torchtune-packed", pad_id=99)        # a preset with keys over it
        Policy({"preset": "reference", "eos_id": 2}) # the JSON form

    Raises ValueError for an unknown preset or key, a value the key does not take, or keys that contradict
    each other (the message names the key and what is allowed). A numpy scalar is accepted wherever the
    Python value it holds is."""

    __slots__ = ("_keys",)
    _keys: dict[str, Any]

    def __init__(self, policy: Union[str, Mapping[str, Any], "Policy"] = "reference", **overrides: Any):
        if isinstance(policy, Policy) and not overrides:
            self._keys = dict(policy._keys)
            return
        if isinstance(policy, str):
            spec: dict[str, Any] = {"preset": policy}
        elif isinstance(policy, Mapping):
            spec = dict(policy)
        else:
            raise TypeError(f"policy: expected a preset name, a dict of policy keys or a Policy, got {type(policy).__name__}")
        spec.update(overrides)
        for key, value in spec.items():
            if isinstance(value, str):
                _args.utf8(value, "policy", f"key {key!r}")
        # numpy scalars (np.int64(3), np.bool_(True)) are the Python values they hold; the core checks the rest
        self._keys = _core.resolve_policy({key: _args.plain(value) for key, value in spec.items()})

    @property
    def preset(self) -> str:
        """The preset the policy starts from ("" for a policy written from scratch)."""
        return self._keys.get("preset") or ""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form handed to other tools: every key, canonical order."""
        return dict(self._keys)

    def __getitem__(self, key: str) -> Any:
        return self._keys[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __repr__(self) -> str:
        return f"Policy({self._keys!r})"


PolicyLike = Union[str, Mapping[str, Any], Policy]


# A preset name's resolved keys, read from the core once: a preset never changes within a process, and
# check_batch resolves its policy on every call (7 us through the core, bench/README.md "A ninth pair").
_RESOLVED_PRESETS: dict[str, dict[str, Any]] = {}


def resolve(policy: PolicyLike) -> dict[str, Any]:
    """Any accepted form of a policy as its resolved dict (a new dict on every call: the caller may change it)."""
    if isinstance(policy, Policy):
        return policy.to_dict()
    if type(policy) is str:
        held = _RESOLVED_PRESETS.get(policy)
        if held is None:  # an unknown name raises here, and is not held
            held = _RESOLVED_PRESETS[policy] = Policy(policy).to_dict()
        return dict(held)
    return Policy(policy).to_dict()


def presets() -> dict[str, dict[str, Any]]:
    """Every preset by name: {"system", "summary", "notes", "policy"} (the policy fully resolved)."""
    return {p["name"]: {k: v for k, v in p.items() if k != "name"} for p in _core.presets()}


@functools.lru_cache(maxsize=1)
def _later_defaults() -> dict[str, Any]:
    """The keys added after version 1 with their defaults (the core's key table: it never changes in a process)."""
    return {d["key"]: d["default"] for d in _core.policy_key_domains() if d["after_version_one"]}


def changed_keys(policy: Mapping[str, Any], base: Mapping[str, Any]) -> tuple[tuple[str, Any, Any], ...]:
    """(key, the base's value, the policy's value) for every key in which two resolved policies differ (a key
    added after version 1, which resolved policies leave out at its default, compared as that default; the
    preset's own name aside)."""
    defaults = _later_defaults()
    keys = [k for k in policy if k != "preset"] + [k for k in base if k not in policy and k != "preset"]
    return tuple((k, base.get(k, defaults.get(k)), policy.get(k, defaults.get(k))) for k in keys
                 if base.get(k, defaults.get(k)) != policy.get(k, defaults.get(k)))


def as_written(policy: Mapping[str, Any]) -> dict[str, Any]:
    """A policy dict with a preset as a person writes it: the preset and the keys that change it (the same
    policy once resolved). A dict without a known preset is returned as it is."""
    base = policy.get("preset")
    if not isinstance(base, str):
        return dict(policy)
    try:
        preset = resolve(base)  # held once per name
    except ValueError:  # not a preset: the fuzz call itself says so
        return dict(policy)
    return {"preset": base, **{key: value for key, _, value in changed_keys(resolve(policy), preset)}}
