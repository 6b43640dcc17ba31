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


def _bounds(a):
    """The first byte and one past the last byte ``a`` spans, None for an empty array."""
    lo = hi = a.data.ptr
    for n, s in zip(a.shape, a.strides, strict=True):
        if n == 0:
            return None
        if s < 0:
            lo += (n - 1) * s
        else:
            hi += (n - 1) * s
    return lo, hi + a.itemsize


def may_share_memory(a, b) -> bool:
    """Whether two arrays of one backend may overlap in memory (a cheap bounds test).

    For CuPy arrays the test is by addresses alone: ``cupy.may_share_memory`` takes arrays
    of two allocations to be apart, but two arrays made from one buffer by DLPack (a torch
    tensor seen twice, say) are two allocations of the same memory."""
    if isinstance(a, np.ndarray):
        return bool(np.may_share_memory(a, b))
    ba, bb = _bounds(a), _bounds(b)
    return ba is not None and bb is not None and ba[0] < bb[1] and bb[0] < ba[1]


def overlaps_itself(a) -> bool:
    """Whether two elements of ``a`` may share memory (a zero stride, say, or rows closer
    than their length): its dimensions sorted by stride, each must step past the extent of
    those inside it. Exact for the layouts slicing and transposing make."""
    if 0 in a.shape:
        return False
    extent = a.itemsize
    for s, n in sorted((abs(s), n) for n, s in zip(a.shape, a.strides, strict=True) if n > 1):
        if s < extent:
            return True
        extent += s * (n - 1)
    return False


def to_host(array) -> np.ndarray:
    return array if isinstance(array, np.ndarray) else array.get()


class DeviceMismatchError(ValueError):
    """An operand lives on another CUDA device than the current one (CuPy's rule: a call
    runs on the current device, with operands there)."""


class SparseOperand:
    """Base of :class:`~cubsparse.BlockSparseMatrix`: lets the ops module recognise a
    matrix without importing the type (which imports the ops for its operators)."""

    __slots__ = ()
