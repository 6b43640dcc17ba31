"""Output arrays of eager calls, handed out again once nothing outside holds them.

A fresh CuPy array costs about 4 µs of host time (the memory pool's allocation, the
``ndarray`` object, and its release when the caller drops it; measured on an H100 host),
as much as the rest of a small call's Python. A script that calls an op in a loop drops
each result before the next call, so a runner keeps its last few outputs and reuses one
whose only holder is this cache: no view of it, no other array or memory pointer over
its memory, no DLPack or ``__cuda_array_interface__`` consumer (each keeps a reference).
That is the condition under which CuPy's pool would hand the same memory to the next
allocation on the stream; reusing the array object too saves the rest. Every call still
gets an array that no one else holds, so a result is never overwritten behind its owner's
back.

A runner keeps ``KEEP`` outputs of up to ``KEEP_BYTES``: for larger ones the kernel
outlasts the allocation, and arrays held idle by every runner a script builds (one per
batch size) would add up. The weight gradient's output has W's shape whatever the rows
of X, so the runners of one matrix share one cache for it (per device and thread), which
keeps outputs of up to ``SHARED_KEEP_BYTES``: at most ``KEEP`` such arrays a matrix. A
kept array is memory that CuPy's pool cannot hand to another allocation, and
``free_all_blocks()`` does not release it; it lives as long as its matrix.
A weak reference to a result does not hold it: after its owner drops the result, a weak
reference may see a later call's values.
"""

from __future__ import annotations

import functools
import math
import sys

KEEP = 2  #: arrays kept per runner
KEEP_BYTES = 16 << 20  #: largest output a runner keeps
SHARED_KEEP_BYTES = 64 << 20  #: largest weight-gradient output a matrix keeps

_refs = sys.getrefcount


@functools.cache
def _ndarray():
    import cupy

    return cupy.ndarray


def _counts(arrays: list, i: int) -> tuple[int, int, int]:
    """References to array ``i``, to its memory pointer and to its memory."""
    return _refs(arrays[i]), _refs(arrays[i].data), _refs(arrays[i].data.mem)


class Outputs:
    """Arrays of one shape and dtype, each tagged with the stream it was last used on."""

    __slots__ = ("_arrays", "_dtype", "_free", "_next", "_shape", "_streams", "keep")

    def __init__(self, shape: tuple, dtype, keep_bytes: int = KEEP_BYTES) -> None:
        self._shape, self._dtype = shape, dtype
        self.keep = 0 < math.prod(shape) * dtype.itemsize <= keep_bytes
        self._arrays: list = []
        self._streams: list = []
        self._free: list = []  # each array's reference counts while only this cache holds it
        self._next = 0

    def take(self, stream: int):
        """An array that no one else holds, allocated or reused; reused only on the stream
        it was last handed out on (stream order makes the last user's work finish first)."""
        arrays = self._arrays
        for i in range(len(arrays)):
            if self._streams[i] == stream and _counts(arrays, i) == self._free[i]:
                if arrays[i].shape != self._shape:
                    # its owner reshaped it in place (``y.shape = ...``) before dropping it
                    self._fresh(i, stream)
                return arrays[i]
        if not self.keep:
            return _ndarray()(self._shape, self._dtype)
        if len(arrays) < KEEP:
            i = len(arrays)
            arrays.append(None)
            self._streams.append(None)
            self._free.append(None)
        else:  # every kept array is in use: replace one, round robin
            i = self._next
            self._next = (i + 1) % KEEP
        self._fresh(i, stream)
        return arrays[i]

    def _fresh(self, i: int, stream: int) -> None:
        """A new array in slot ``i``, with its reference counts while only this cache
        holds it."""
        self._arrays[i] = _ndarray()(self._shape, self._dtype)
        self._streams[i] = stream
        self._free[i] = _counts(self._arrays, i)
