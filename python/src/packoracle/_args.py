"""The arguments of the public functions, checked at the door.

Every public function (fuzz, check_batch, check_step, verify, draw, Policy, Report.svg) passes its plain
arguments through these helpers before anything reaches the C++ core, so that a bad argument is a ValueError
or TypeError that names the function, the argument and the value:

    fuzz: max_row_length must be an integer in 1..1048576, got '16'

and never the binding's own signature dump. Numpy scalars count as the Python numbers they hold; a bool is
not an integer. The ranges that the core defines (the longest row, the largest fuzz row) come from the core.
"""

from __future__ import annotations

import functools
import math
import numbers
import operator
import os
from collections import abc
from typing import Any, Iterable, Optional, Sequence, Union

import numpy as np

from . import _core

INT64_MAX = 2**63 - 1
UINT64_MAX = 2**64 - 1
INT32_MAX = 2**31 - 1
MAX_ROW_LENGTH: int = _core.MAX_ROW_LENGTH            # the longest row any check reads (the oracle's bound)
MAX_FUZZ_ROW_LENGTH: int = _core.MAX_FUZZ_ROW_LENGTH  # the largest L `fuzz` generates (as --max-row-length)
MAX_FUZZ_DOCUMENTS: int = _core.MAX_FUZZ_DOCUMENTS    # the most documents `fuzz` puts in a case (--max-documents)
MAX_SECONDS = 10**6  # a time budget beyond 11 days is a mistake, not a plan

PathLike = Union[str, "os.PathLike[str]"]


def _bounds(lo: Optional[int], hi: Optional[int]) -> str:
    if lo is not None and hi is not None:
        return f"an integer in {lo}..{hi}"
    if lo is not None:
        return f"an integer >= {lo}"
    if hi is not None:
        return f"an integer <= {hi}"
    return "an integer"


def integer(value: Any, where: str, name: str, lo: Optional[int] = None, hi: Optional[int] = None) -> int:
    """`value` as a Python int in lo..hi: an int or a numpy integer (anything with __index__), never a bool,
    a float or a string. TypeError for the wrong type, ValueError for a value out of range."""
    if type(value) is int and (lo is None or value >= lo) and (hi is None or value <= hi):
        return value  # the common answer, without the checks below (a bool's type is not int)
    if isinstance(value, (bool, np.bool_)) or not _is_index(value):
        raise TypeError(f"{where}: {name} must be {_bounds(lo, hi)}, got {value!r}")
    out = operator.index(value)
    if (lo is not None and out < lo) or (hi is not None and out > hi):
        raise ValueError(f"{where}: {name} must be {_bounds(lo, hi)}, got {out!r}")
    return out


def optional_integer(value: Any, where: str, name: str, lo: Optional[int] = None,
                     hi: Optional[int] = None) -> Optional[int]:
    """None, or `value` as integer() reads it."""
    return None if value is None else integer(value, where, name, lo, hi)


def _is_index(value: Any) -> bool:
    if isinstance(value, (float, complex, str, bytes, np.floating, np.complexfloating)):
        return False
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def flag(value: Any, where: str, name: str) -> bool:
    """A bool (or a numpy bool): not 'yes', not 1."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{where}: {name} must be True or False, got {value!r}")
    return bool(value)


def seconds(value: Any, where: str, name: str, hi: float = MAX_SECONDS) -> float:
    """A finite number of seconds, > 0 and at most `hi` (int, float or a numpy number; not a bool)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{where}: {name} must be a number of seconds, got {value!r}")
    out = float(value)
    if not (math.isfinite(out) and 0 < out <= hi):
        raise ValueError(f"{where}: {name} must be a finite number of seconds in (0, {hi:g}], got {value!r}")
    return out


def fraction(value: Any, where: str, name: str) -> float:
    """A number in (0, 1] (int, float or a numpy number; not a bool), as a float."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{where}: {name} must be a number in (0, 1], got {value!r}")
    out = float(value)
    if not 0 < out <= 1:
        raise ValueError(f"{where}: {name} must be a number in (0, 1], got {value!r}")
    return out


def text(value: Any, where: str, name: str, *, empty: bool = False) -> str:
    """A str the core can read: UTF-8 encodable (no lone surrogate), non-empty unless `empty`."""
    if not isinstance(value, str):
        raise TypeError(f"{where}: {name} must be a string, got {value!r}")
    utf8(value, where, name)
    if not empty and not value:
        raise ValueError(f"{where}: {name} must be a non-empty string, got ''")
    return value


def optional_text(value: Any, where: str, name: str, *, empty: bool = False) -> Optional[str]:
    return None if value is None else text(value, where, name, empty=empty)


def utf8(value: str, where: str, name: str) -> None:
    """ValueError when `value` cannot be written as UTF-8 (a lone surrogate such as '\\ud800')."""
    if value.isascii():
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"{where}: {name} is not valid text ({e.reason} at index {e.start}): {value!r}") from None


def path(value: Any, where: str, name: str) -> str:
    """A file path (str or os.PathLike), as a non-empty str."""
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{where}: {name} must be a path (str or os.PathLike), got {value!r}")
    out = os.fspath(value)
    if not isinstance(out, str):
        raise TypeError(f"{where}: {name} must be a text path, got {value!r}")
    if "\0" in out:  # no file system takes one (the C++ core would read the path cut there)
        raise ValueError(f"{where}: {name} holds a NUL character, which no path may hold: {out!r}")
    return text(out, where, name)


def optional_path(value: Any, where: str, name: str) -> Optional[str]:
    return None if value is None else path(value, where, name)


def paths(value: Any, where: str, name: str) -> list[str]:
    """One path or a non-empty sequence of them."""
    if isinstance(value, (str, os.PathLike)):
        return [path(value, where, name)]
    if not isinstance(value, Iterable) or isinstance(value, (bytes, dict)):
        raise TypeError(f"{where}: {name} must be a path or a list of paths, got {value!r}")
    out = [path(p, where, f"{name}[{k}]") for k, p in enumerate(value)]
    if not out:
        raise ValueError(f"{where}: {name} is empty: give at least one file")
    return out


def names(value: Any, where: str, name: str) -> tuple[str, ...]:
    """Field names: one str, or a sequence of str."""
    if type(value) is tuple and not value:
        return value  # no names (check_batch's default)
    if isinstance(value, str):
        return (text(value, where, name),)
    # collections.abc's Iterable, which typing's stands for: isinstance against typing's cost 5 us a call
    if not isinstance(value, abc.Iterable) or isinstance(value, (bytes, dict)):
        raise TypeError(f"{where}: {name} must be a list of field names, got {value!r}")
    return tuple(text(v, where, f"{name}[{k}]") for k, v in enumerate(value))


def plain(value: Any) -> Any:
    """A numpy scalar as the Python value it holds (np.int64(3) → 3, np.bool_(True) → True); anything else as
    it is. For values handed to the core, which reads Python ints, floats, bools and strings."""
    if isinstance(value, np.generic):
        return value.item()
    return value


def signed_ids(policy: dict, *, labels: bool = False) -> frozenset[int]:
    """The negative values a token field may hold under `policy`: the ids the policy itself declares (pad_id,
    eos_id, bos_id) when negative, and for labels also its ignore_index. Any other negative value is not a
    token id."""
    return frozenset(sorted_signed_ids(policy, labels=labels))


def sorted_signed_ids(policy: dict, *, labels: bool = False) -> tuple[int, ...]:
    """signed_ids in increasing order, as the core's readers take them (held per distinct set of ids: check_batch
    asks three times a call)."""
    # the core's default ignore_index, for a policy given in part
    values = (policy.get("pad_id"), policy.get("eos_id"), policy.get("bos_id"),
              policy.get("ignore_index", -100) if labels else None)
    try:
        return _held_negative_ids(*values)
    except TypeError:  # a value that cannot be hashed (a policy not resolved yet) is no id; the rest still are
        return _negative_ids(values)


def _negative_ids(values: Iterable[Any]) -> tuple[int, ...]:
    return tuple(sorted({v for v in values if isinstance(v, int) and v < 0}))


# typed: -1 and -1.0 are different policies (-1.0 is no id). The cache keeps the values it was asked about (a
# policy's scalars) alive, 256 sets at most.
@functools.lru_cache(maxsize=256, typed=True)
def _held_negative_ids(*values: Any) -> tuple[int, ...]:
    return _negative_ids(values)


def non_negative_ids(array: np.ndarray, allowed: frozenset[int], where: str, field: str) -> None:
    """ValueError naming the field and the first place where `array` (integers, any shape) holds a negative
    value that is not in `allowed` (see signed_ids). One pass (min) when every value is >= 0."""
    if array.size == 0 or array.dtype.kind != "i" or array.min() >= 0:
        return
    bad = array < 0
    for v in allowed:
        bad &= array != v
    if not bad.any():
        return
    at = tuple(int(i) for i in np.argwhere(bad)[0])
    index = ", ".join(map(str, at))
    allows = (f"the only negative values this policy allows here are {', '.join(map(str, sorted(allowed)))}"
              if allowed else "this policy declares no negative id")
    raise ValueError(f"{where}: field '{field}[{index}]' is {int(array[at])}: a token id is >= 0 ({allows})")


def rank_below(rank: int, dp_world_size: int, where: str, name: str = "rank") -> None:
    """A rank counts from 0 below the world size."""
    if rank >= dp_world_size:
        raise ValueError(f"{where}: {name} must be below dp_world_size ({dp_world_size}), got {rank}")


def batch_place(where: str, step: Any, micro_step: Any, rank: Any, dp_world_size: Any) -> tuple[int, int, int, int]:
    """check_batch's step, micro_step and rank (each an integer() >= 0) and dp_world_size (>= 1), the rank
    below the world size (rank_below), checked in that order: one call for the four, as check_batch runs on
    every training batch."""
    if (type(step) is int and type(micro_step) is int and type(rank) is int and type(dp_world_size) is int
            and 0 <= step <= INT64_MAX and 0 <= micro_step <= INT64_MAX and 0 <= rank < dp_world_size <= INT64_MAX):
        return step, micro_step, rank, dp_world_size  # the common answer: integer()'s and rank_below's, in one test
    step = integer(step, where, "step", 0, INT64_MAX)
    micro_step = integer(micro_step, where, "micro_step", 0, INT64_MAX)
    dp_world_size = integer(dp_world_size, where, "dp_world_size", 1, INT64_MAX)
    rank = integer(rank, where, "rank", 0, INT64_MAX)
    rank_below(rank, dp_world_size, where)
    return step, micro_step, rank, dp_world_size


def sequence_of_mappings(value: Any, where: str, name: str) -> Sequence[Any]:
    """A list of micro-batches: one Mapping alone counts as a list of one."""
    from collections.abc import Mapping
    if isinstance(value, Mapping):
        return [value]
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError(f"{where}: {name} must be a list of micro-batches (dicts) or one micro-batch, got "
                        f"{type(value).__name__}")
    return list(value)


def optional_tolerance(value: Any, where: str, name: str) -> Optional[tuple[float, float]]:
    """None, or (absolute, relative): two finite numbers ≥ 0 (a comparison of values, ValueTolerance)."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, abc.Sequence) or len(value) != 2 or not all(
            isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_)) and math.isfinite(float(v))
            and float(v) >= 0 for v in value):
        raise TypeError(f"{where}: {name} must be (absolute, relative), two finite numbers ≥ 0, got {value!r}")
    return float(value[0]), float(value[1])
