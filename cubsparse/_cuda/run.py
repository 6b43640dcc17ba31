"""Running plans: the two backend primitives of the CUDA backend.

A call finds its runner in a small dict on the matrix, keyed by (device, rows, transposed,
TF32, tuning generation, the dense path's memory limit, thread). A runner is built once:
the plan (:mod:`.plans`), its device tables, and :class:`~.launch.Launch` objects whose
constant parameters are packed. A call then checks its operands' alignment, takes an
output (:mod:`.outputs`), writes the few parameters that change and launches: no host
synchronization and no per-call Python work that grows with the layout. An ``out`` that
may overlap the dense operand is written through a temporary.
"""

from __future__ import annotations

import dataclasses
import functools
from threading import get_ident as _get_ident

import numpy as np

from .. import _options
from .._arrays import DeviceMismatchError
from .._arrays import may_share_memory as _overlap
from . import blas, device, worklists
from .compile import get_kernel
from .configs import (
    GENERATION,
    panel_copy_config,
    sdd_tile_shape,
    stream_finish_config,
    stream_tile,
    transpose_config,
)
from .launch import Launch, LaunchError
from .outputs import Outputs
from .plans import MAX_GRID_Y, plan_dsd, plan_sdd


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


def _runner(w, key, build):
    runners = w.__dict__.setdefault("_runners", {})
    r = runners.get(key)
    if r is None:
        if len(runners) >= _MAX_RUNNERS:
            runners.clear()
        r = runners[key] = build()
    return r


# -- dsd -----------------------------------------------------------------------------------
def dsd_plan(x_rows: int, w, trans: bool, tf32: bool):
    """The plan :func:`dsd` runs for ``x_rows`` rows of X (built on first use)."""
    return _dsd_runner(x_rows, w, trans, tf32).plan


def _key(op: str, dev: int, *call) -> tuple:
    """A runner's key: the op, the device, what of the call shapes the plan, and the
    tuning generation, the options a plan reads and the thread."""
    return (op, dev, *call, GENERATION[0], _options.KEY, _get_ident())


def _dsd_runner(n, w, trans, tf32, dev=None):
    dev = device.current() if dev is None else dev
    return _runner(w, _key("dsd", dev, n, trans, tf32),
                   lambda: _DsdRunner(w, dev, n, trans, tf32))


def dsd(x, w, trans: bool, out, alpha: float, beta: float, tf32: bool = False):
    """``alpha * (x @ op(w)) + beta * out`` with op the transpose when ``trans``."""
    n = x.shape[0]
    dev = device.current()
    if x.data.device_id != dev or w._data.data.device_id != dev or (
            out is not None and out.data.device_id != dev):
        _check_devices(dev, "matmul", **{"the dense operand": x, "W": w._data,
                                         "out": out})
    r = _dsd_runner(n, w, trans, tf32, dev)
    if r.plan.path == "dense" and n and r.width:
        return r.dense(x, w._data, out, alpha, beta)
    step = MAX_GRID_Y * r.plan.kernel.rows_per_cta
    if not r.plan.kernel.persistent and n > step:  # a launch covers 65535 row tiles at most
        y = out if out is not None else _cupy().ndarray((n, r.width), w._data.dtype)
        for r0 in range(0, n, step):
            dsd(x[r0:r0 + step], w, trans, y[r0:r0 + step], alpha, beta, tf32)
        return y
    return _dsd_sparse(r, x, w._data, out, alpha, beta)


def dsd_eager(x, w, trans: bool, tf32: bool, out=None):
    """``x @ op(w)`` for the calls an eager loop makes most (``alpha`` 1, ``beta`` 0, and
    ``out`` None or a CuPy array; the caller has checked the types, dtypes and shapes of
    ``x`` and ``w``): the product of a runner already built, or None where :func:`dsd`
    must run (a first call, another device, the dense path, an unaligned ``x`` or
    ``out``, an ``out`` of another shape or dtype)."""
    dev = _get_device()
    xd = x.data
    if xd.device_id != dev or w._data.data.device_id != dev:
        return None
    runners = w.__dict__.get("_runners")
    if runners is None:
        return None
    r = runners.get(_key("dsd", dev, x.shape[0], trans, tf32))
    if r is None or not r.width or not x.shape[0]:
        return None
    if out is not None and (out.data.device_id != dev or out.dtype != w._data.dtype
                            or out.ndim != 2 or out.shape[0] != x.shape[0]
                            or out.shape[1] != r.width):
        return None
    if not r.eager:
        if r.plan.path != "dense" or (out is not None and _overlap(out, x)):
            return None
        return r.dense(x, w._data, out, 1.0, 0.0)
    it = r.it
    st = x.strides
    if xd.ptr & 15 or st[0] & 15 or (st[1] != it and x.shape[1] > 1):
        return None
    stream = _current_stream().ptr
    if out is None:
        y = r.outputs.take(stream)
    else:
        st, a = out.strides, r.out_align
        if out.data.ptr % a or st[0] % a or (st[1] != it and r.width > 1) or _overlap(out, x):
            return None
        y = out
    r(x, w._data, y, 1.0, 0.0, stream)
    return y


def _dsd_sparse(r, x, wdata, out, alpha, beta):
    n = x.shape[0]
    stream = _stream()
    y = out if (out is not None and _aligned(out, r.out_align)
                and not _overlap(out, x)) else None
    if y is None:  # a fresh array: `out` may be misaligned, or overlap `x`
        if out is None:
            y = r.outputs.take(stream)
        else:  # a temporary, copied into `out` below
            y = _held(_cupy().ndarray((n, r.width), wdata.dtype) if beta == 0
                      else out.copy(order="C"))
    if n and r.width:
        if not _aligned(x, 16):  # every kernel copies X in 16-byte segments
            x = _held(x.copy(order="C"))  # a new, aligned buffer
        r(x, wdata, y, alpha, beta, stream)
    if out is not None and y is not out:
        out[...] = y
        return out
    return y


class _DsdRunner:
    """Everything a call of one dsd plan needs, made once."""

    def __init__(self, w, dev, n, trans, tf32, sparse_only=False):
        self.dev = dev
        s, b = w._structure, w.blocksize
        dtype = w._data.dtype
        self.plan = p = plan_dsd(s, dtype, b, n, trans, tf32, device.arch(dev),
                                 device.sm_count(dev),
                                 None if sparse_only else _options.dense_bytes_limit(),
                                 _options.dense_panels())
        n_out = s.block_shape[0] if trans else s.block_shape[1]
        self.width = n_out * b
        self.outputs = Outputs((n, self.width), dtype)
        # dsd_eager runs this runner: a sparse plan in one launch grid, with rows and columns
        self.eager = bool(p.path == "sparse" and n and self.width and (
            p.kernel.persistent or n <= MAX_GRID_Y * p.kernel.rows_per_cta))
        it = dtype.itemsize
        # The tensor-core epilogues store pairs of outputs.
        self.out_align = it if p.dtype == "float64" else 2 * it
        self.b, self.it = b, it
        if p.path == "dense":
            self._init_dense(w, dev)
            # What a CUDA-graph capture runs (CuPy refuses cuBLAS there); made now, since
            # its table uploads would fail inside a capture.
            self.sparse = _DsdRunner(w, dev, n, trans, tf32, sparse_only=True)
            return
        cfg = p.kernel
        self.streamed = False  # the small-N stream kernel (_init_stream)
        if cfg.family == "dsd_stream":
            self._init_stream(s, dev, n, trans, dtype)
            return
        work, blk, gidx, segs = worklists.dsd_tables(s, dev, trans, p.split, cfg.group, p.pad)
        panel_tma = p.panel and cfg.tma
        width = cfg.group * b
        # split lists: a counter per (list, row tile), indexed by the list's first slot
        self.split = (_SplitScratch(s, dev, (p.slots, n, width),
                                    p.slots * -(-n // cfg.rows_per_cta)) if p.slots else None)
        f = "d" if p.dtype == "float64" else "f"  # alpha, beta: float32 but for float64
        if cfg.tma:
            #   xmap wmap rows xcols wrows work nwork blk gidx y ldy alpha beta
            #   ws ws_ld segs counts nout ctr band
            sig = "ttiiipipppl" + f + f + "plppipi"
            vals = [None, None, n, w.shape[1] if trans else w.shape[0], None, work,
                    work.shape[0], blk, gidx, None, None, None, None, 0, n * width, segs, 0,
                    n_out, None, p.band]
            self.x_box = (min(b, 64), min(cfg.rows_per_cta, 256))
        else:
            #   x ldx rows [nout] w work [nwork] blk gidx y ldy alpha beta ws ws_ld segs
            #   counts
            sig = "pli" + ("i" if cfg.group > 1 else "") + "pp" + ("i" if cfg.persistent else "")
            sig += "ppplffplpp".replace("f", f)
            vals = [None, None, n] + ([n_out] if cfg.group > 1 else []) + [None, work]
            vals += [work.shape[0]] if cfg.persistent else []
            vals += [blk, gidx, None, None, None, None, 0, n * width, segs, 0]
        self.main = Launch(get_kernel(cfg), p.grid, (cfg.threads,), cfg.smem, sig, vals)
        # parameter slots written per call: W's blocks (unless by tensor map), Y, workspace
        self.i_w = 3 + (cfg.group > 1)
        self.i_y = sig.index("pl" + f + f)
        self.i_ws = self.i_y + 4  # then ws_ld, segs, counts
        self.i_counts = self.i_ws + 3
        self.tma = cfg.tma
        if cfg.tma:
            # W's map: rows of w_inner elements in boxes of w_box, each CTA of a cluster
            # copying 1 / cluster of a block's (or a slice of panels') rows
            c, ek = cfg.cluster, min(b, 64)
            if panel_tma:  # slices of panels: rows of 64 k, group * b of them per slice
                self.w_inner, self.w_box = 64, (64, cfg.group * b // c)
            elif p.reads_w_as_stored and not trans:  # W as stored ([k][n]) in X @ W
                self.w_inner, self.w_box = b, (ek, ek // c)
            else:
                self.w_inner, self.w_box = b, (ek, b // c)
        # W's blocks rearranged per call (`copy_blocks` of them out): transposed for the
        # wgmma kernels reading [n][k] blocks, or gathered into the TMA kernel's panels,
        # entry q's blocks (or zeros) at q * group..
        self.copy, self.copy_blocks = None, 0
        if p.w_copy == "transpose_blocks" and s.nnzb:
            self.copy = Launch(get_kernel(transpose_config(b)),
                               (s.nnzb, (b // min(b, 32)) ** 2), (256,), 0, "pp", [None, None])
            self.copy_blocks = s.nnzb
        elif p.w_copy == "panel_blocks" and s.nnzb and blk.size:
            nvec = blk.size * b * b // 8  # 16-byte vectors of the panels
            self.copy = Launch(get_kernel(panel_copy_config(b, not trans)),
                               (_stride_grid(nvec),), (256,), 0, "pppil",
                               [None, None, blk, cfg.group, nvec])
            self.copy_blocks = blk.size
        self.w_copy = self.copy is not None or p.w_copy == "transpose"
        # (a box of panels spans a slice of the group's blocks: the stand-in holds one)
        self.stand_in = (_cupy().zeros((cfg.group * 64 // b if panel_tma else 1, b, b), dtype)
                         if cfg.tma and s.nnzb == 0 else None)
        if cfg.tma:  # made now, not inside a stream capture
            device.tile_counter(dev, _stream())
        self._xkey, self._wptr, self._ctr_stream = None, None, None  # set by the first call

    def _copy_w(self, wdata, stream):
        """W's blocks transposed, or gathered into panels, where the kernel reads them so."""
        cupy = _cupy()
        if self.copy is not None:
            t = _held(cupy.ndarray((self.copy_blocks, self.b, self.b), wdata.dtype))
            self.copy.v[0].value, self.copy.v[1].value = wdata.data.ptr, t.data.ptr
            self.copy(stream)
            return t
        # TF32 reads [n][k] blocks too
        return _held(cupy.ascontiguousarray(wdata.transpose(0, 2, 1)))

    def _init_stream(self, s, dev, n, trans, dtype, shared=None):
        """The small-N dsd with X in shared memory. A grid of one CTA per group of output
        blocks writes Y itself; otherwise each run of chunks writes its float32 partial
        product to the workspace (kept per stream in the layout's cache, as a split
        product's is), and they are added in order into Y: by the group's own CTAs in the
        same launch (``plan.shared_sum``: a cooperative launch, since those CTAs wait for
        each other), else by stream_finish in a second launch."""
        p, b = self.plan, self.b
        cfg, (groups, runs) = p.kernel, p.grid
        t = stream_tile(b, n)
        blk, kcol, starts = worklists.stream_tables(s, dev, trans, t.chunk, t.group)
        nk = s.block_shape[1] if trans else s.block_shape[0]
        nchunks = worklists.stream_chunks(s, trans, t.chunk)
        kernel = get_kernel(cfg)
        if shared is None:
            # The driver's occupancy must agree with the plan's count of resident CTAs,
            # else the cooperative launch would be refused: then the second launch adds the
            # partials, and the plan says so.
            shared = p.shared_sum and groups * runs <= device.sm_count(
                dev) * device.resident_ctas(kernel, cfg.threads, cfg.smem)
        if p.shared_sum and not shared:
            self.plan = p = dataclasses.replace(p, shared_sum=False)
        self._stream_args = (s, dev, n, trans, dtype)
        #   x ldx nrows kcols w blk kcol starts nout nchunks run ws counts y ldy alpha beta
        self.main = Launch(kernel, p.grid, (cfg.threads,), cfg.smem, "pliippppiiippplff",
                           [None, None, n, nk * b, None, blk, kcol, starts, self.width // b,
                            nchunks, p.split, None, 0, None, None, None, None],
                           cooperative=shared)
        self.i_w, self.streamed = 4, True
        self.finish = self.split = None
        if runs > 1:
            rows = cfg.rows_per_cta
            # the shared sum's two counters per group (in, out), which each launch leaves
            # at zero
            self.split = _SplitScratch(s, dev, (runs, rows, self.width),
                                       2 * groups if shared else 0)
            if not shared:
                pairs = n * self.width // 2
                #   ws nruns rows nrows width y ldy alpha beta
                self.finish = Launch(get_kernel(stream_finish_config(dtype)),
                                     (_stride_grid(pairs),), (256,), 0, "piiiiplff",
                                     [None, runs, rows, n, self.width, None, None, None,
                                      None])

    def _call_stream(self, x, wdata, y, alpha, beta, stream):
        v, it = self.main.v, self.it
        v[0].value = x.data.ptr
        v[1].value = x.strides[0] // it
        v[4].value = wdata.data.ptr
        _set_output(v, 13, y, it, alpha, beta)
        if self.split is None:  # the CTAs write Y
            self.main(stream)
            return
        ws, counts = self.split(stream)
        v[11].value = ws.data.ptr
        if self.finish is None:  # the group's CTAs add the partials
            v[12].value = counts.data.ptr
            try:
                self.main(stream)
            except LaunchError:
                # The driver refused the cooperative launch (fewer SMs to be had than the
                # device has, as under MPS): from now on a second launch adds them.
                self._init_stream(*self._stream_args, shared=False)
                self._call_stream(x, wdata, y, alpha, beta, stream)
            return
        self.finish.v[0].value = ws.data.ptr
        _set_output(self.finish.v, 5, y, it, alpha, beta)
        self.main(stream)
        self.finish(stream)

    def _init_dense(self, w, dev):
        s, b = w._structure, w.blocksize
        self.trans = self.plan.product == "X @ W.T"
        dtype = w._data.dtype
        self.structure, self.dense_shape, self.dense_dtype = s, (
            s.block_shape[0] * b, s.block_shape[1] * b), dtype
        ld = self.dense_shape[1]
        kernel = get_kernel(self.plan.kernel)
        # both take W's blocks as parameter 0 and the dense buffer as parameter 3
        if self.plan.kernel.kernel == "fill_dense":  # every element, zeros too
            nvec = self.dense_shape[0] * ld * dtype.itemsize // 16
            sig, args = "ppipll", [worklists.block_map(s, dev), s.block_shape[1]]
        else:  # W's blocks only, into a buffer that keeps its zeros
            nvec = s.nnzb * b * b * dtype.itemsize // 16
            sig, args = "ppppll", list(worklists.block_coordinates(s, dev))
        self.scatter = Launch(kernel, (_stride_grid(nvec),), (256,), 0, sig,
                              [None, *args, None, ld, nvec])

    def _dense_buffer(self, stream):
        """The dense W of this layout, dtype, device and stream: zero but for W's blocks,
        which every call writes again (values may change between calls). One per stream,
        so that calls on two streams (or of two matrices of one layout) never overwrite a
        buffer another stream's product is still reading."""
        return self.structure.cached(
            ("dense_w", self.dev, self.dense_dtype.str, stream),
            lambda: _cupy().zeros(self.dense_shape, self.dense_dtype))

    def __call__(self, x, wdata, y, alpha, beta, stream):
        if self.streamed:
            return self._call_stream(x, wdata, y, alpha, beta, stream)
        it = self.it
        if self.w_copy:
            wdata = self._copy_w(wdata, stream)
        L = self.main
        v = L.v
        if self.tma:
            if self.stand_in is not None:  # a layout without blocks maps a stand-in
                wdata = self.stand_in
            # The maps of the last call are kept: a loop over the same arrays (or arrays
            # the memory pool puts at the same addresses) sets no new map.
            xrow = _map_rows(x.shape[0], x.shape[1], x.strides[0], it)
            if xrow is None:  # reversed or overlapping rows: a map needs them apart
                x = _held(x.copy(order="C"))
                xrow = x.strides[0]
            xkey = (x.data.ptr, xrow)
            if xkey != self._xkey:
                L.set_map(0, device.tensor_map(xkey[0], x.shape[1], x.shape[0], xkey[1],
                                               *self.x_box))
                self._xkey = xkey
            wptr = wdata.data.ptr
            if wptr != self._wptr:
                rows = wdata.size // self.w_inner
                L.set_map(1, device.tensor_map(wptr, self.w_inner, rows, 2 * self.w_inner,
                                               *self.w_box))
                v[4].value = rows
                self._wptr = wptr
            if stream != self._ctr_stream:
                v[-2].value = device.tile_counter(self.dev, stream).data.ptr
                # one made inside a capture belongs to that graph
                self._ctr_stream = stream if device.counter_kept(self.dev, stream) else None
        else:
            v[0].value = x.data.ptr
            v[1].value = x.strides[0] // it
            v[self.i_w].value = wdata.data.ptr
        _set_output(v, self.i_y, y, it, alpha, beta)
        if self.split is not None:
            ws, counts = self.split(stream)
            v[self.i_ws].value = ws.data.ptr
            v[self.i_counts].value = counts.data.ptr
        L(stream)

    def dense(self, x, wdata, out, alpha, beta):
        """The dense path: W's blocks into the dense buffer (its other elements stay
        zero), then one cuBLAS product."""
        cupy = _cupy()
        st = _current_stream()
        if st.is_capturing():
            return _dsd_sparse(self.sparse, x, wdata, out, alpha, beta)
        stream = st.ptr
        dense_w = self._dense_buffer(stream)
        sv = self.scatter.v
        sv[0].value, sv[3].value = wdata.data.ptr, dense_w.data.ptr
        self.scatter(stream)
        plain = alpha == 1 and beta == 0
        y = None
        if plain and out is not None and not _overlap(out, x):
            o = blas.operand(out)
            y = out if o is not None and not o[2] else None
        if y is None:
            y = self.outputs.take(stream) if plain else cupy.ndarray(
                (x.shape[0], self.width), wdata.dtype)
        x, x_ptr, ldx, x_t = blas.operand_or_copy(x)
        k, m = dense_w.shape
        # X @ W reads the buffer as [k][n]; X @ W.T as [n][k], its transpose
        gemm = blas.Gemm.of(self.plan.dtype, x.shape[0], k if self.trans else m,
                            x.shape[1], x_t, self.trans)
        gemm(x_ptr, ldx, dense_w.data.ptr, m, y.data.ptr, y.strides[0] // self.it, stream)
        if plain:
            if out is not None and y is not out:
                out[...] = y
                return out
            return y
        # In float32 (float64 for float64 data); cuBLAS has already rounded the product to
        # the storage dtype, so half types are rounded twice here, unlike the sparse
        # kernels, which apply alpha and beta to the float32 sums.
        acc = np.float64 if y.dtype == np.float64 else np.float32
        prod = alpha * y.astype(acc)
        if beta != 0:
            prod += beta * out.astype(acc)
        prod = prod.astype(wdata.dtype)
        if out is None:
            return prod
        out[...] = prod
        return out


# -- sdd -----------------------------------------------------------------------------------
def _rows(arr, it) -> bool:
    """``arr`` (2-D) has contiguous, 16-byte aligned rows (without making a view)."""
    st = arr.strides
    return ((st[1] == it or arr.shape[1] <= 1) and st[0] % 16 == 0
            and arr.data.ptr % 16 == 0)


def _cols(arr, it) -> bool:
    """``arr.T`` has contiguous, 16-byte aligned rows."""
    st = arr.strides
    return ((st[0] == it or arr.shape[0] <= 1) and st[1] % 16 == 0
            and arr.data.ptr % 16 == 0)


def _padded_rows(a, inner_pad: int):
    """``a`` (rows, inner) as a row-major copy with zero columns up to ``inner_pad``."""
    buf = _held(_cupy().zeros((a.shape[0], inner_pad), a.dtype))
    buf[:, :a.shape[1]] = a
    return buf


def _layer_gradient(a, b_mat, it: int):
    """``(a_ptr, a_ld, b_ptr, b_ld)`` where ``a = x.T`` (rows of x contiguous) and ``b_mat =
    dy`` are the layer-gradient case, both read in place (a as [k][m] rows, x's rows; b as
    [k][n] rows) with 16-byte aligned rows; else None. A few comparisons: every eager weight
    gradient of a layer comes here."""
    sa, sb = a.strides, b_mat.strides
    ap, bp = a.data.ptr, b_mat.data.ptr
    if sa[0] == it and sb[1] == it and not (sa[1] | sb[0] | ap | bp) & 15:
        return ap, sa[1] // it, bp, sb[0] // it
    return None


def sdd_operands(a, b_mat, tf32: bool):
    """``(a_ptr, a_ld, b_ptr, b_ld, a_km, b_nk, inner, copies)``: where the kernels read
    the operands (addresses, row strides in elements), and in which order. In place where
    their rows can be streamed with 16-byte copies, else from ``copies``, which the caller
    keeps until the launch (and which are held for a graph being captured)."""
    inner = a.shape[1]
    it = a.dtype.itemsize
    if tf32:  # A[m][k] and B[n][k], k contiguous and padded to whole 16-byte copies
        inner_pad = -(-inner // 4) * 4
        a_src = a if (_rows(a, it) and inner_pad == inner) else _padded_rows(a, inner_pad)
        b_t = b_mat.T
        b_src = b_t if (_rows(b_t, it) and inner_pad == inner) else _padded_rows(b_t, inner_pad)
        return (a_src.data.ptr, a_src.strides[0] // it, b_src.data.ptr, b_src.strides[0] // it,
                False, True, inner_pad, (a_src, b_src))
    lg = _layer_gradient(a, b_mat, it)
    if lg is not None:
        return (*lg, True, False, inner, ())
    whole = inner % (16 // it) == 0
    copies = ()
    if _cols(a, it):
        a_km, a_ptr, a_ld = True, a.data.ptr, a.strides[1] // it
    elif _rows(a, it) and whole:
        a_km, a_ptr, a_ld = False, a.data.ptr, a.strides[0] // it
    else:
        a_c = _held(a.T.copy(order="C"))
        a_km, a_ptr, a_ld, copies = True, a_c.data.ptr, a_c.strides[0] // it, (a_c,)
    if _rows(b_mat, it):
        b_nk, b_ptr, b_ld = False, b_mat.data.ptr, b_mat.strides[0] // it
    elif _cols(b_mat, it) and whole:
        b_nk, b_ptr, b_ld = True, b_mat.data.ptr, b_mat.strides[1] // it
    else:
        b_c = _held(b_mat.copy(order="C"))
        b_nk, b_ptr, b_ld, copies = False, b_c.data.ptr, b_c.strides[0] // it, (*copies, b_c)
    return a_ptr, a_ld, b_ptr, b_ld, a_km, b_nk, inner, copies


def sdd_plan(a, b_mat, like, tf32: bool):
    ops = sdd_operands(a, b_mat, tf32)
    return _sdd_runner(like, ops[6], ops[4], ops[5], tf32).plan


def _sdd_runner(like, inner, a_km, b_nk, tf32, dev=None):
    dev = device.current() if dev is None else dev
    return _runner(like, _key("sdd", dev, inner, a_km, b_nk, tf32),
                   lambda: _SddRunner(like, dev, inner, a_km, b_nk, tf32))


def sdd(a, b_mat, like, out_data, alpha: float, beta: float, tf32: bool = False):
    """``alpha * (a @ b_mat)`` on ``like``'s blocks ``+ beta * out_data``."""
    cupy = _cupy()
    dev = device.current()
    if a.data.device_id != dev or b_mat.data.device_id != dev or (
            like._data.data.device_id != dev) or (
            out_data is not None and out_data.data.device_id != dev):
        _check_devices(dev, "sampled_matmul", a=a, b=b_mat, out=out_data,
                       like=like._data)
    s, dtype = like._structure, like._data.dtype
    if s.nnzb == 0 or a.shape[1] == 0:
        data = out_data if out_data is not None else cupy.ndarray(like._data.shape, dtype)
        if s.nnzb and beta == 0:  # an empty sum: the product is exactly zero
            data.fill(0)
        elif s.nnzb:
            data *= dtype.type(beta)
        return data
    ops = sdd_operands(a, b_mat, tf32)
    r = _sdd_runner(like, ops[6], ops[4], ops[5], tf32, dev)
    stream = _stream()
    data = out_data if out_data is not None else r.outputs.take(stream)
    r(a, b_mat, ops, data, alpha, beta, stream)
    return data


def sdd_eager(a, b_mat, like, tf32: bool):
    """``a @ b_mat`` on ``like``'s blocks for the call an eager loop makes (no ``out``,
    ``alpha`` 1, ``beta`` 0; types, dtypes and shapes checked by the caller), through a
    runner already built, or None where :func:`sdd` must run."""
    dev = _get_device()
    if a.data.device_id != dev or b_mat.data.device_id != dev or (
            like._data.data.device_id != dev):
        return None
    runners = like.__dict__.get("_runners")
    if runners is None or a.shape[1] == 0 or like._structure.nnzb == 0:
        return None
    # sdd_operands' first case, the layer gradient, tested without building its tuple
    lg = None if tf32 else _layer_gradient(a, b_mat, a.itemsize)
    ops = None if lg is not None else sdd_operands(a, b_mat, tf32)
    r = runners.get(_key("sdd", dev, a.shape[1], True, False, False) if ops is None
                    else _key("sdd", dev, ops[6], ops[4], ops[5], tf32))
    if r is None:
        return None
    stream = _current_stream().ptr
    data = r.outputs.take(stream)
    if ops is None:
        if r.direct is not None:
            r.direct(*lg, data.data.ptr, stream)
            return data
        ops = (*lg, True, False, a.shape[1], ())
    r(a, b_mat, ops, data, 1.0, 0.0, stream)
    return data


class _SddRunner:
    def __init__(self, like, dev, inner, a_km, b_nk, tf32, sparse_only=False):
        s, b = like._structure, like.blocksize
        dtype = like._data.dtype
        self.plan = p = plan_sdd(s, dtype, b, inner, a_km, b_nk, tf32, device.arch(dev),
                                 device.sm_count(dev),
                                 None if sparse_only else _options.dense_bytes_limit())
        self.it = dtype.itemsize
        self.outputs = Outputs(like._data.shape, dtype)
        self.direct = None  # the eager call's launch, where the kernel reads pointers
        cfg = p.kernel
        # Every sdd kernel stores at least pairs of outputs (the wgmma kernels and the dense
        # path's gather 16-byte vectors): a result whose values are a view one element into a
        # buffer is written through an aligned stand-in (_aligned_target).
        f = "d" if p.dtype == "float64" else "f"
        if p.path == "dense":
            # what a capture runs (see _DsdRunner)
            self.sparse = _SddRunner(like, dev, inner, a_km, b_nk, tf32, sparse_only=True)
            rows, cols = worklists.block_coordinates(s, dev)
            nvec = s.nnzb * b * b * self.it // 16
            self.main = Launch(get_kernel(cfg), (_stride_grid(nvec),), (256,), 0, "plpppddl",
                               [None, s.block_shape[1] * b, rows, cols, None, None, None,
                                nvec])
        elif cfg.kernel == "sdd_stream":  # p.chunks x p.grid CTAs
            nbr, nbc = s.block_shape
            starts = worklists.sdd_stream_starts(s, dev, p.chunk)
            self.main = Launch(get_kernel(cfg), (p.chunks, p.grid), (cfg.threads,), cfg.smem,
                               "plpliiippiipff", [None, None, None, None, inner, nbr, nbc,
                                                  s.indices, starts, p.chunks, p.chunk, None,
                                                  None, None])
        elif p.tiled:
            tiles, bmap = worklists.sdd_tiles(s, dev, *sdd_tile_shape(p.dtype, b))
            nbr, nbc = s.block_shape
            self.main = Launch(get_kernel(cfg), (tiles.shape[0],), (cfg.threads,), cfg.smem,
                               "plpliiipppff", [None, None, None, None, inner, nbr, nbc, tiles,
                                                bmap, None, None, None])
        elif cfg.tma:  # persistent: p.grid CTAs, each a run of groups; maps set per call
            groups = worklists.sdd_work(s, dev, cfg.group, cfg.block_rows, cfg.panel)
            self.dcols = s.block_shape[1] * b
            self.xcols = s.block_shape[0] * b
            self.main = Launch(get_kernel(cfg), (p.grid,), (cfg.threads,), cfg.smem,
                               "ttiiipippff", [None, None, inner, self.xcols, self.dcols,
                                               groups, groups.shape[0], s.indices, None, None,
                                               None])
            self._maps = (None, None)  # the (address, row stride) of X and dY last mapped
        else:
            groups = worklists.sdd_work(s, dev, cfg.group)
            if cfg.kernel == "sdd_wgmma":  # a grid of p.grid CTAs, each a run of groups
                self.main = Launch(get_kernel(cfg), (p.grid or groups.shape[0],),
                                   (cfg.threads,), cfg.smem, "plplipipp" + f + f,
                                   [None, None, None, None, inner, groups, groups.shape[0],
                                    s.indices, None, None, None])
            else:
                self.main = Launch(get_kernel(cfg), (groups.shape[0],), (cfg.threads,),
                                   cfg.smem, "plplippp" + f + f,
                                   [None, None, None, None, inner, groups, s.indices, None,
                                    None, None])
        if p.path == "sparse" and not cfg.tma:
            self.direct = self._direct

    def _direct(self, a_ptr, a_ld, b_ptr, b_ld, out_ptr, stream):
        """The eager call of a kernel that reads its operands by pointer: ``a`` and ``b``
        where :func:`sdd_operands` puts them, the product into ``out_ptr`` (16-byte
        aligned, as every kept output is), alpha 1 and beta 0."""
        v = self.main.v
        v[0].value, v[1].value, v[2].value, v[3].value = a_ptr, a_ld, b_ptr, b_ld
        v[-3].value, v[-2].value, v[-1].value = out_ptr, 1.0, 0.0
        self.main(stream)

    def __call__(self, a, b_mat, ops, data, alpha, beta, stream):
        """``ops``: :func:`sdd_operands` of ``a`` and ``b_mat``."""
        dense = self.plan.path == "dense"
        if dense and _current_stream().is_capturing():  # no cuBLAS in a capture
            return self.sparse(a, b_mat, ops, data, alpha, beta, stream)
        target = _aligned_target(data, beta)
        v = self.main.v
        if dense:  # the product by cuBLAS, then the gather of W's blocks from it
            a, a_ptr, lda, a_t = blas.operand_or_copy(a)
            b_mat, b_ptr, ldb, b_t = blas.operand_or_copy(b_mat)
            m, n = a.shape[0], b_mat.shape[1]
            prod = _cupy().ndarray((m, n), data.dtype)
            blas.Gemm.of(self.plan.dtype, m, n, a.shape[1], a_t, b_t)(
                a_ptr, lda, b_ptr, ldb, prod.data.ptr, n, stream)
            v[0].value, v[4].value = prod.data.ptr, target.data.ptr
            v[5].value, v[6].value = alpha, beta
        elif self.plan.kernel.tma:
            # X and dY as maps of their rows (ops: addresses and row strides, 16-byte aligned
            # as every wgmma sdd reads them); kept while a loop passes the same arrays.
            # Reversed or overlapping rows (a negative or zero stride) are copied first.
            inner, it = ops[6], self.it
            xrow = _map_rows(inner, self.xcols, ops[1] * it, it)
            xptr = ops[0]
            if xrow is None:  # a is x.T: x's rows, copied
                xc = _held(_cupy().ascontiguousarray(a.T))
                xptr, xrow = xc.data.ptr, xc.strides[0]
            drow = _map_rows(inner, self.dcols, ops[3] * it, it)
            dptr = ops[2]
            if drow is None:
                dc = _held(_cupy().ascontiguousarray(b_mat))
                dptr, drow = dc.data.ptr, dc.strides[0]
            xkey, dkey = (xptr, xrow, inner), (dptr, drow, inner)
            if xkey != self._maps[0]:
                self.main.set_map(0, device.tensor_map(xptr, self.xcols, inner, xrow, 64, 64))
            if dkey != self._maps[1]:
                self.main.set_map(1, device.tensor_map(dptr, self.dcols, inner, drow, 64, 64))
            self._maps = (xkey, dkey)
            v[-3].value, v[-2].value, v[-1].value = target.data.ptr, alpha, beta
        else:
            v[0].value, v[1].value, v[2].value, v[3].value = ops[:4]
            v[-3].value, v[-2].value, v[-1].value = target.data.ptr, alpha, beta
        self.main(stream)
        if target is not data:
            data[...] = target


__all__ = ["dsd", "dsd_plan", "sdd", "sdd_plan"]
