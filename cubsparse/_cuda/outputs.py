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

Outputs up to ``KEEP_BYTES`` are kept, ``KEEP`` per runner. A dropped output would stay in
CuPy's pool anyway (the pool returns memory to the device only on ``free_all_blocks()``),
so keeping it costs no more memory in a loop of one shape, and it saves the 3-6 µs of
host time that allocating and releasing a 30 MB array took on an H200 host. Past 64 MiB
the kernel that writes the output takes 15 µs or more at an H200's copy rate, well past
the allocation. The kept arrays live as long as their runner, that is as long as the matrix
(a script that cycles through many batch sizes keeps at most ``KEEP`` per size, up to the
runner limit of ``run._MAX_RUNNERS``), and ``free_all_blocks()`` does not release them.
A weak reference to a result does not hold it: after its owner drops the result, a weak
reference may see a later call's values.
"""

from __future__ import annotations

import functools
import math
import sys

KEEP = 2  #: arrays kept per runner
KEEP_BYTES = 64 << 20  #: largest output kept

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

    def __init__(self, shape: tuple, dtype) -> None:
        self._shape, self._dtype = shape, dtype
        self.keep = 0 < math.prod(shape) * dtype.itemsize <= KEEP_BYTES
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
