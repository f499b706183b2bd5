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


def as_array(value: Any, where: str, field: str, *, floats: bool = False) -> np.ndarray:
    """`value` as a numpy array the C++ core reads: a view of a CPU tensor or an array, a new array for a
    (nested) list. Valid but unusual forms are read as their plain equivalents: an ``np.matrix`` (or any
    ndarray subclass) as a plain array, a big-endian array as a native copy; with ``floats`` (loss_mask) a
    float16 or bfloat16 array as float32.

    Raises ValueError or TypeError naming `where` and the field for a tensor on another device, a sparse or
    nested tensor, a dtype numpy has not, ragged lists or values that are not numbers."""
    if type(value) is np.ndarray:
        array = value
    elif is_tensor(value):
        array = _tensor_array(value, where, field, floats)
    elif isinstance(value, np.ndarray):
        array = np.asarray(value)  # np.matrix and other subclasses: the plain array (rows of a matrix are 2-D)
    else:
        try:
            array = np.asarray(value)
        except Exception as e:  # noqa: BLE001 - whatever a user's __array__ or __len__ raises names the field
            raise ValueError(f"{where}: field '{field}' is not a rectangular array of numbers "
                             f"({type(e).__name__}: {e})") from None
        if array.dtype == object:
            raise ValueError(f"{where}: field '{field}' is ragged or holds values that are not numbers")
        if array.size == 0 and array.dtype.kind == "f":  # np.asarray([]) is float64; an empty list has no dtype
            return array.astype(np.int64)
    return _native(array, floats)


def _tensor_array(value: Any, where: str, field: str, floats: bool) -> np.ndarray:
    if value.device.type != "cpu":
        raise ValueError(f"{where}: field '{field}' is on {value.device}: move it to the CPU first (.cpu())")
    if getattr(value, "is_nested", False):
        raise ValueError(f"{where}: field '{field}' is a nested tensor: give a dense one (rows × slots, or one row)")
    if str(value.layout) != "torch.strided":
        raise ValueError(f"{where}: field '{field}' is a {value.layout} tensor: give a dense one (.to_dense())")
    tensor = value.detach()
    if str(tensor.dtype) == "torch.bfloat16":  # numpy has no bfloat16
        if not floats:
            raise TypeError(f"{where}: field '{field}' has dtype torch.bfloat16: integers are expected")
        tensor = tensor.float()
    try:
        return tensor.numpy()
    except (TypeError, RuntimeError) as e:
        raise TypeError(f"{where}: field '{field}' cannot be read as an array ({e})") from None


def _native(array: np.ndarray, floats: bool) -> np.ndarray:
    """The array as the core reads it: native byte order, strides in whole items; a copy only where needed."""
    if floats and array.dtype.kind == "f" and array.dtype.itemsize < 4:
        return array.astype(np.float32)
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    elif array.flags.c_contiguous:
        return array  # the common case
    if array.itemsize and any(s % array.itemsize for s in array.strides):
        array = np.ascontiguousarray(array)
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


def scalar(value: Any) -> Any:
    """A numpy scalar or a one-element tensor as the Python number it holds; anything else as it is."""
    return value.item() if hasattr(value, "item") and not isinstance(value, (int, float)) else value
