"""What the ops need to know about the current device and stream, cached per device:
its SM count and architecture, TMA tensor maps, and the tile counters of the persistent
kernels."""

from __future__ import annotations

import ctypes
import functools
import threading


def current() -> int:
    """The current CUDA device's ordinal."""
    return _runtime().getDevice()


@functools.cache
def _runtime():
    import cupy

    return cupy.cuda.runtime


@functools.cache
def sm_count(device: int) -> int:
    import cupy

    return cupy.cuda.Device(device).attributes["MultiProcessorCount"]


@functools.cache
def arch(device: int) -> int:
    """Compute capability as an int, e.g. 90 for Hopper."""
    import cupy

    return int(cupy.cuda.Device(device).compute_capability)


@functools.cache
def libcuda():
    """The CUDA driver library, with the prototypes this package calls."""
    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuTensorMapEncodeTiled.restype = ctypes.c_int
    u32, vp = ctypes.c_uint, ctypes.c_void_p
    lib.cuLaunchKernel.restype = ctypes.c_int
    lib.cuLaunchKernel.argtypes = [vp, u32, u32, u32, u32, u32, u32, u32, vp, vp, vp]
    lib.cuLaunchCooperativeKernel.restype = ctypes.c_int
    lib.cuLaunchCooperativeKernel.argtypes = [vp, u32, u32, u32, u32, u32, u32, u32, vp, vp]
    lib.cuOccupancyMaxActiveBlocksPerMultiprocessor.restype = ctypes.c_int
    lib.cuOccupancyMaxActiveBlocksPerMultiprocessor.argtypes = [
        ctypes.POINTER(ctypes.c_int), vp, ctypes.c_int, ctypes.c_size_t]
    return lib


def resident_ctas(function, threads: int, smem: int) -> int:
    """CTAs of ``function`` (a ``cupy.cuda.Function``) of ``threads`` threads and ``smem``
    bytes of dynamic shared memory one SM holds at once, by the driver's occupancy rule
    (registers, shared memory, threads); 0 where the query fails."""
    n = ctypes.c_int(0)
    res = libcuda().cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(n), function.ptr,
                                                               threads, smem)
    return n.value if res == 0 else 0


class MapSlot:
    """128 bytes of host memory, 64-byte aligned as the driver wants a ``CUtensorMap``;
    ``address`` is what a kernel-parameter slot points at. Zeros, it stands in for the map
    of a kernel instance that reads none there."""

    __slots__ = ("_buf", "address")

    def __init__(self):
        self._buf = ctypes.create_string_buffer(128 + 64)
        self.address = (ctypes.addressof(self._buf) + 63) & ~63


class TensorMap(MapSlot):
    """A 2-D TMA tensor map (``CUtensorMap``, 128 opaque bytes) held in host memory."""

    __slots__ = ()

    def __init__(self, ptr: int, inner: int, outer: int, row_bytes: int, box_inner: int,
                 box_outer: int):
        super().__init__()
        # CU_TENSOR_MAP_SWIZZLE_NONE (16-byte rows) / 32B / 64B / 128B
        swizzle = {16: 0, 32: 1, 64: 2, 128: 3}[2 * box_inner]
        u64, u32 = ctypes.c_uint64, ctypes.c_uint32
        res = libcuda().cuTensorMapEncodeTiled(
            ctypes.c_void_p(self.address), 1, 2, ctypes.c_void_p(ptr),  # UINT16, rank 2
            (u64 * 2)(inner, outer), (u64 * 1)(row_bytes), (u32 * 2)(box_inner, box_outer),
            (u32 * 2)(1, 1), 0, swizzle, 2, 0)  # no interleave, L2 promotion 128 B, zero fill
        if res != 0:
            raise RuntimeError(
                f"cuTensorMapEncodeTiled failed (CUresult {res}) for {outer} x {inner} "
                f"elements at {ptr:#x}, rows {row_bytes} bytes apart, boxes "
                f"{box_outer} x {box_inner}")

    def scalar(self):
        """The map as a NumPy structured scalar, for a launch through CuPy."""
        import numpy as np

        words = np.dtype([("v", np.uint64, (16,))])
        return np.frombuffer(ctypes.string_at(self.address, 128), dtype=words)[0]


BLANK_MAP = MapSlot()


@functools.lru_cache(maxsize=512)
def tensor_map(ptr: int, inner: int, outer: int, row_bytes: int, box_inner: int,
               box_outer: int) -> TensorMap:
    """A TMA map over ``outer`` rows of ``inner`` 16-bit elements at device address ``ptr``,
    rows ``row_bytes`` apart, copied in boxes of ``box_outer`` rows of ``box_inner``
    elements into shared memory in the swizzle that spans one box row (none for 16-byte
    rows; out-of-bounds elements land as zeros). A map holds only an address and a shape,
    so it is cached by them: a new array at a reused address (the memory pool's common
    case) gets the same map without a driver call."""
    return TensorMap(ptr, inner, outer, row_bytes, box_inner, box_outer)


_counters: dict = {}
_captured_counters: list = []  # made inside a capture: their graphs replay their addresses


def _counter_key(device: int, stream: int) -> tuple:
    # the per-thread default stream's handle is every thread's: one counter per thread
    return device, stream, threading.get_ident() if stream in (1, 2) else 0


def tile_counter(device: int, stream: int):
    """A zeroed int32 the persistent TMA kernel takes its tiles from, one per (device,
    stream) and, for the per-thread default stream (whose handle every thread shares),
    per thread. The kernel's last tile request sets it back to zero, so the next launch on
    the stream finds it zeroed without a memset; launches on one stream never overlap,
    so they can share it.

    Asked for inside a CUDA-graph capture on a stream that has none yet (a plan whose
    eager calls take the dense path, which needs none, captures its sparse kernel), it is
    made inside the capture: its zeroing is then only recorded into the graph, which zeroes
    it before each replay. Such a counter is kept alive for the graph and never handed to
    an eager call; callers must not remember it either (:func:`counter_kept`)."""
    key = _counter_key(device, stream)
    ctr = _counters.get(key)
    if ctr is None:
        import cupy

        ctr = cupy.zeros(1, dtype=cupy.int32)
        if cupy.cuda.get_current_stream().is_capturing():
            _captured_counters.append(ctr)
        else:
            _counters[key] = ctr
    return ctr


def counter_kept(device: int, stream: int) -> bool:
    """Whether ``stream`` has a tile counter that eager calls may reuse (one made inside a
    capture is not)."""
    return _counter_key(device, stream) in _counters
