"""Array-module helpers shared by the matrix type and the ops: which backend an array
belongs to, its module, whether two arrays may overlap, a host copy."""

from __future__ import annotations

import sys

import numpy as np


def backend_of(array) -> str | None:
    """``"cpu"`` for a NumPy array, ``"cuda"`` for a CuPy array, ``None`` otherwise."""
    t = type(array)
    if t is np.ndarray:  # exact types first: this runs several times in every op
        return "cpu"
    cupy = sys.modules.get("cupy")
    if cupy is not None and t is cupy.ndarray:
        return "cuda"
    if isinstance(array, np.ndarray):
        return "cpu"
    if t.__module__.startswith("cupy") and hasattr(array, "device"):
        return "cuda"
    return None


def array_module(backend: str):
    if backend == "cpu":
        return np
    import cupy

    return cupy


def may_share_memory(a, b) -> bool:
    """Whether two arrays of one backend may overlap in memory (a cheap bounds test)."""
    if isinstance(a, np.ndarray):
        return bool(np.may_share_memory(a, b))
    import cupy

    return bool(cupy.may_share_memory(a, b))


def to_host(array) -> np.ndarray:
    return array if isinstance(array, np.ndarray) else array.get()


class DeviceMismatchError(ValueError):
    """An operand lives on another CUDA device than the current one (CuPy's rule: a call
    runs on the current device, with operands there)."""


class SparseOperand:
    """Base of :class:`~cubsparse.BlockSparseMatrix`: lets the ops module recognise a
    matrix without importing the type (which imports the ops for its operators)."""

    __slots__ = ()
