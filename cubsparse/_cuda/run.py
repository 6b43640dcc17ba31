"""Running plans: what the runners of both primitives share.

A call finds its runner in a small dict on the matrix, keyed by (device, rows, transposed,
TF32, tuning generation, the dense path's memory limit, thread). A runner is built once:
the plan (:mod:`.plans`), its device tables, and :class:`~.launch.Launch` objects whose
constant parameters are packed. A call then checks its operands' alignment, takes an
output (:mod:`.outputs`), writes the few parameters that change and launches: no host
synchronization and no per-call Python work that grows with the layout. An ``out`` that
may overlap the dense operand is written through a temporary.

The runners are in :mod:`.run_dsd` (with its small-N stream launches in
:mod:`.run_dsd_stream` and its dense path in :mod:`.run_dsd_dense`) and :mod:`.run_sdd`;
this module holds their helpers: alignment tests, the current stream and device, the
split products' scratch, and the runner cache.
"""

from __future__ import annotations

import functools
from threading import get_ident as _get_ident

import numpy as np

from .. import _options
from .._arrays import DeviceMismatchError
from .configs import GENERATION


def _aligned(arr, align: int) -> bool:
    """Rows contiguous, row stride and base aligned to ``align`` bytes."""
    it = arr.dtype.itemsize
    st = arr.strides
    return (arr.ndim == 2 and (st[1] == it or arr.shape[1] <= 1)
            and st[0] % align == 0 and arr.data.ptr % align == 0)


_GRAPH_HELD: list = []  # per-call temporaries that captured CUDA graphs read


def _held(arr):
    """``arr``, a per-call temporary, kept alive for good where the current stream is being
    captured: the graph replays read its address long after the call has returned."""
    if _cupy().cuda.get_current_stream().is_capturing():
        _GRAPH_HELD.append(arr)
    return arr


def _map_rows(rows: int, cols: int, row_bytes: int, it: int) -> int | None:
    """The row stride a TMA map over ``rows`` rows of ``cols`` elements takes: the array's
    own where its rows ascend without overlapping, any whole number of 16-byte units for a
    single row, None where the rows are reversed or overlap (the caller copies them)."""
    if rows <= 1:
        return max(16, -(-cols * it // 16) * 16)
    return row_bytes if row_bytes >= cols * it else None


def _aligned_target(data, beta: float):
    """``data``, or where its address is not 16-byte aligned (a view into a larger buffer)
    a stand-in that is, for kernels that store 16-byte vectors; it holds ``data``'s values
    where ``beta`` reads them, and the caller copies it back."""
    if data.data.ptr % 16 == 0:
        return data
    target = _held(_cupy().ndarray(data.shape, data.dtype))
    if beta != 0:
        target[...] = data
    return target


def _stream() -> int:
    return _current_stream().ptr


@functools.cache
def _cupy():
    import cupy

    return cupy


# The eager path's two queries: each name is rebound to CuPy's own function on first use,
# which saves a Python call in every op.
def _current_stream():
    global _current_stream
    _current_stream = _cupy().cuda.get_current_stream
    return _current_stream()


def _get_device() -> int:
    global _get_device
    _get_device = _cupy().cuda.runtime.getDevice
    return _get_device()


def _stride_grid(items: int) -> int:
    """CTAs of 256 threads for a grid-stride loop over ``items``."""
    return max(1, min(-(-items // 256), 16384))


_KEEP_WORKSPACE = 32 << 20  # bytes of a split product's workspace kept per stream
_MAX_RUNNERS = 64  # per matrix; a script that varies its batch size cycles through them


def _check_devices(dev: int, what: str, **arrays) -> None:
    """Every array on the current device ``dev``, as CuPy requires of its own kernels: the
    plans, tables and launches of a call are the current device's."""
    for name, arr in arrays.items():
        if arr is not None and arr.data.device_id != dev:
            raise DeviceMismatchError(
                f"{what}: {name} is on CUDA device {arr.data.device_id} but the current "
                f"device is {dev}; run the call under `with cupy.cuda.Device("
                f"{arr.data.device_id}):` or move the operands to one device")


def _output_writes(name: str, i: int) -> list:
    """The compiled path's writes (:mod:`.fastcall`) of what :func:`_set_output` sets."""
    return [(name, i, "y"), (name, i + 1, "ldy"), (name, i + 2, "one"), (name, i + 3, "zero")]


def _set_output(v, i: int, y, it: int, alpha: float, beta: float) -> None:
    """Set a launch's output parameters, ``y ldy alpha beta`` from its parameter ``i`` on."""
    v[i].value = y.data.ptr
    v[i + 1].value = y.strides[0] // it
    v[i + 2].value = alpha
    v[i + 3].value = beta


class _SplitScratch:
    """A kernel's float32 workspace and int32 counters for work summed in pieces inside one
    launch (split lists), per stream. Launches on one stream run in order,
    so a stream's calls share one workspace (kept where small, else allocated per call)
    and one set of counters, which each launch leaves at zero.

    The kept ones live in the layout's cache (per device, thread and shape), beside the
    work lists the kernel reads: a CUDA graph that captured a launch needs both for as long
    as it replays, and the layout outlives any runner, so a repeated call returns them
    without the capture check that per-call arrays need."""

    def __init__(self, structure, dev: int, ws_shape: tuple, n_counts: int):
        self.ws_shape, self.n_counts = ws_shape, n_counts
        self._ws, self._counts = structure.cached(
            ("split_scratch", dev, _get_ident(), ws_shape, n_counts), lambda: ({}, {}))

    def kept(self, stream) -> bool:
        """Whether ``stream``'s workspace and counters are kept (the same every call)."""
        return stream in self._ws and stream in self._counts

    def __call__(self, stream):
        """(workspace, counters) for a launch on ``stream``."""
        ws = self._ws.get(stream)
        counts = self._counts.get(stream)
        if ws is not None and counts is not None:
            return ws, counts
        cupy = _cupy()
        if ws is None:
            ws = cupy.ndarray(self.ws_shape, np.float32)
            if ws.nbytes <= _KEEP_WORKSPACE:
                self._ws[stream] = ws
            else:
                _held(ws)  # per call: a graph replaying it keeps it
        if counts is None:
            counts = cupy.zeros(self.n_counts, np.int32)
            # Made inside a capture, its zeroing is only recorded into the graph (each
            # replay zeroes it): the graph keeps it, and a later call makes its own.
            if _current_stream().is_capturing():
                _held(counts)
            else:
                self._counts[stream] = counts
        return ws, counts


def _stream_buffer(structure, dev: int, stream: int, shape: tuple, dtype):
    """An array of ``shape`` and ``dtype`` for the work of ``stream`` on device ``dev`` in
    this thread, kept in the layout's cache for every runner of the layout (W's blocks
    copied before a product): a stream's launches run in order, so each call that fills it
    follows the kernels that read it before. Never replaced, so a launch that points at it
    never reads memory handed back; a call being captured takes a buffer of its own
    (:func:`_held`), which its graph keeps."""
    return structure.cached(("stream_buffer", dev, _get_ident(), stream, shape, dtype.str),
                            lambda: _cupy().ndarray(shape, dtype))


def _runner(w, key, build):
    runners = w.__dict__.setdefault("_runners", {})
    r = runners.get(key)
    if r is None:
        if len(runners) >= _MAX_RUNNERS:
            runners.clear()
            w.__dict__.pop("_sdd_outputs", None)  # the weight gradients' shared outputs
            fast = w.__dict__.get("_fast")  # the compiled path's entries hold runners too
            if fast is not None:
                fast.clear()
        r = runners[key] = build()
    return r


def _key(op: str, dev: int, *call) -> tuple:
    """A runner's key: the op, the device, what of the call shapes the plan, and the
    tuning generation, the options a plan reads and the thread."""
    return (op, dev, *call, GENERATION[0], _options.KEY, _get_ident())


#: (device, thread, caller stream) -> the non-blocking side stream :class:`_Beside` pairs
#: with that caller stream; at most _MAX_SIDE_STREAMS, the oldest destroyed first (the
#: driver releases a destroyed stream once its queued work is done).
_SIDE_STREAMS: dict = {}
_MAX_SIDE_STREAMS = 64


def _side_stream(dev: int, stream: int) -> int:
    """The side stream of caller stream ``stream`` on device ``dev`` in this thread. One per
    caller stream: a side stream shared by two would tie their work together, and while
    one of them is being captured into a CUDA graph the other could not use it at all."""
    key = (dev, _get_ident(), stream)
    side = _SIDE_STREAMS.get(key)
    if side is None:
        rt = _cupy().cuda.runtime
        if len(_SIDE_STREAMS) >= _MAX_SIDE_STREAMS:
            rt.streamDestroy(_SIDE_STREAMS.pop(next(iter(_SIDE_STREAMS))))
        side = _SIDE_STREAMS[key] = rt.streamCreateWithFlags(1)  # cudaStreamNonBlocking
    return side


class _Beside:
    """Runs one launch on a side stream beside the launch that precedes it on the caller's
    stream, so the two can share the device's SMs; the caller's stream then waits for both.
    A fork event orders the side launch after the caller's earlier work and a join event
    orders the caller's later work after it, so the pair behaves as two launches in one
    stream (a CUDA graph captured from the caller's stream records both branches). Each
    caller stream has its own side stream (:func:`_side_stream`); the events are this
    object's (a wait takes an event's latest record, so calls on several streams can share
    them)."""

    def __init__(self, dev: int):
        rt = _cupy().cuda.runtime
        self.dev = dev
        self._rt = rt
        self.fork = rt.eventCreateWithFlags(2)  # cudaEventDisableTiming
        self.join = rt.eventCreateWithFlags(2)

    def __call__(self, stream: int, first, beside) -> None:
        """``first(stream)`` on the caller's stream and ``beside(side)`` beside it."""
        rt = self._rt
        side = _side_stream(self.dev, stream)
        rt.eventRecord(self.fork, stream)
        first(stream)
        rt.streamWaitEvent(side, self.fork, 0)
        beside(side)
        rt.eventRecord(self.join, side)
        rt.streamWaitEvent(stream, self.join, 0)

    def __del__(self):
        try:
            self._rt.eventDestroy(self.fork)
            self._rt.eventDestroy(self.join)
        except Exception:  # at interpreter exit the runtime may be gone
            pass
