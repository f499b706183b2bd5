"""Arrays as the kit reads them: numpy arrays, CPU torch tensors (without a copy) or lists.

Nothing here copies data that is already an array: a torch tensor becomes a numpy view of its storage, a row
of a 2-D array a view of that row. The C++ core then reads each row once, whatever its integer or bool dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def is_tensor(value: Any) -> bool:
    """A torch tensor, recognised without importing torch."""
    return type(value).__module__.startswith("torch") and hasattr(value, "detach")


def as_array(value: Any, where: str, field: str) -> np.ndarray:
    """`value` as a numpy array: a view of a CPU tensor or an array, a new array for a (nested) list.

    Raises ValueError naming `where` and the field for a tensor on another device, ragged lists or values
    that are not numbers."""
    if isinstance(value, np.ndarray):
        return value
    if is_tensor(value):
        if value.device.type != "cpu":
            raise ValueError(f"{where}: field '{field}' is on {value.device}: move it to the CPU first (.cpu())")
        return value.detach().numpy()
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{where}: field '{field}' is not a rectangular array of numbers ({e})") from None
    if array.dtype == object:
        raise ValueError(f"{where}: field '{field}' is ragged or holds values that are not numbers")
    if array.size == 0 and array.dtype.kind == "f":  # np.asarray([]) is float64; an empty list has no dtype
        return array.astype(np.int64)
    return array


def check_integral(array: np.ndarray, where: str, field: str) -> None:
    """Token ids, positions, lengths and ids are integers (or bools): a float array is a TypeError."""
    if array.dtype.kind not in "iub":
        raise TypeError(f"{where}: field '{field}' has dtype {array.dtype}: integers are expected")


def rows_of(array: np.ndarray, where: str, field: str) -> np.ndarray:
    """A per-token field as rows × slots: one flattened row (1-D) becomes a single row."""
    if array.ndim == 1:
        return array.reshape(1, -1)
    if array.ndim == 2:
        return array
    raise ValueError(f"{where}: field '{field}' has {array.ndim} dimensions, shape {tuple(array.shape)}: expected "
                     f"rows × slots or one flattened row")
