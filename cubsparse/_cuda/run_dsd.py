"""Running dsd plans: ``Y = alpha * X @ op(W) + beta * Y``, the general call and the eager
path of a repeated one (:mod:`.run` says what a runner holds).

:class:`_DsdRunner` launches the block-list kernels itself; the small-N stream kernel's
launches are in :mod:`.run_dsd_stream` and the dense path in :mod:`.run_dsd_dense`.
"""

from __future__ import annotations

from .. import _options
from .._arrays import may_share_memory as _overlap
from .._arrays import overlaps_itself
from . import device, dsd_rules, fastcall, run, worklists
from .compile import get_kernel
from .configs import panel_copy_config, transpose_config
from .dsd_rules import MAX_GRID_Y
from .launch import Launch
from .plans import plan_dsd
from .run import (
    _aligned,
    _check_devices,
    _cupy,
    _current_stream,
    _held,
    _key,
    _map_rows,
    _output_writes,
    _runner,
    _set_output,
    _SplitScratch,
    _stream,
    _stream_buffer,
    _stride_grid,
)
from .run_dsd_dense import DensePath
from .run_dsd_stream import StreamLaunches


def dsd_plan(x_rows: int, w, trans: bool, tf32: bool):
    """The plan :func:`dsd` runs for ``x_rows`` rows of X (built on first use)."""
    return _dsd_runner(x_rows, w, trans, tf32).plan


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
    return r.run_sparse(x, w._data, out, alpha, beta)


def dsd_eager(x, w, trans: bool, tf32: bool, out=None):
    """``x @ op(w)`` for the calls an eager loop makes most (``alpha`` 1, ``beta`` 0, and
    ``out`` None or a CuPy array; the caller has checked the types, dtypes and shapes of
    ``x`` and ``w``): the product of a runner already built, or None where :func:`dsd`
    must run (a first call, another device, the dense path, an unaligned ``x`` or
    ``out``, an ``out`` of another shape or dtype)."""
    dev = run._get_device()
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
                            or out.shape[1] != r.width or overlaps_itself(out)):
        return None
    if not r.eager:
        if r.plan.path != "dense" or (out is not None and _overlap(out, x)):
            return None
        return r.dense(x, w._data, out, 1.0, 0.0)
    it = r.it
    st = x.strides
    if xd.ptr & 15 or st[0] & 15 or (st[1] != it and x.shape[1] > 1):
        return None
    stream = run._current_stream().ptr
    if out is None:
        y = r.outputs.take(stream)
    else:
        st, a = out.strides, r.out_align
        if out.data.ptr % a or st[0] % a or (st[1] != it and r.width > 1) or _overlap(
                out, x) or _overlap(out, w._data):
            return None
        y = out
    r(x, w._data, y, 1.0, 0.0, stream)
    fastcall.arm_dsd(w, r, x.shape[0], trans, tf32, dev)
    return y


class _DsdRunner(StreamLaunches, DensePath):
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
        self.outputs = fastcall.outputs((n, self.width), dtype)
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
        ranges = None  # the stream-K runs' first work items (plan.runs)
        if p.runs:  # (a run's items are tiles: one row tile, one CTA a cluster, no bands)
            if n > cfg.rows_per_cta or cfg.cluster != 1 or p.band != 1:
                raise ValueError(f"stream-K runs take one row tile of X on CTAs of their own, "
                                 f"got {n} rows for tiles of {cfg.rows_per_cta}, clusters of "
                                 f"{cfg.cluster}, bands of {p.band}")
            work, blk, gidx, segs, ranges = worklists.streamk_tables(s, dev, trans, p.grid[0])
        else:
            work, blk, gidx, segs = worklists.dsd_tables(s, dev, trans, p.split, cfg.group,
                                                         p.pad, cfg.whole)
        panel_tma = p.panel and cfg.tma
        width = cfg.group * b
        # split lists: a counter per (list, row tile), indexed by the list's first slot
        self.split = (_SplitScratch(s, dev, (p.slots, n, width),
                                    p.slots * -(-n // cfg.rows_per_cta)) if p.slots else None)
        f = "d" if p.dtype == "float64" else "f"  # alpha, beta: float32 but for float64
        if cfg.tma:
            #   xmap wmap rows xcols wrows work nwork blk gidx y ldy alpha beta
            #   ws ws_ld segs counts nout ctr band ymap ytma order ranges
            sig = "ttiiipipppl" + f + f + "plppipitipp"
            order = (worklists.tile_order_table(
                s, dev, trans, p.split, cfg.group, *dsd_rules.tile_queue(cfg, n, p.grid),
                dsd_rules.ORDER_SLACK, dsd_rules.ORDER_TILE_COST) if p.order else None)
            vals = [None, None, n, w.shape[1] if trans else w.shape[0], None, work,
                    work.shape[0], blk, gidx, None, None, None, None, 0, n * width, segs, 0,
                    n_out, None, p.band, device.BLANK_MAP, 0, order, ranges]
            # (whole slices of X: one box of 64 columns per slice, 128-byte rows)
            self.x_box = (64 if cfg.whole else min(b, 64), min(cfg.rows_per_cta, 256))
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
        # then band, ymap, ytma, order, ranges
        self.i_ctr = len(sig) - 6 if cfg.tma else None
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
        self.epilogue = cfg.epilogue  # rows per round of the TMA store of Y (0: none)
        self._xkey, self._wptr, self._ctr_stream = None, None, None  # set by the first call
        self._ykey = None
        self._split_stream = None  # the stream whose workspace the parameters hold, if kept
        # W's copy goes to the layout's buffer for the call's stream (_stream_buffer); the
        # stream whose buffer the launches point at once a call has set them (the compiled
        # path's guard), else None
        self._wt_stream = None
        self._structure = s

    def _copy_w(self, wdata, stream):
        """W's blocks transposed, or gathered into panels, where the kernel reads them so:
        the copy, and whether it went to the buffer kept for ``stream``."""
        cupy = _cupy()
        if self.copy is not None:
            shape = (self.copy_blocks, self.b, self.b)
            kept = not _current_stream().is_capturing()
            t = (_stream_buffer(self._structure, self.dev, stream, shape, wdata.dtype) if kept
                 else _held(cupy.ndarray(shape, wdata.dtype)))  # the graph's own
            self.copy.v[0].value, self.copy.v[1].value = wdata.data.ptr, t.data.ptr
            self.copy(stream)
            return t, kept
        # TF32 reads [n][k] blocks too
        return _held(cupy.ascontiguousarray(wdata.transpose(0, 2, 1))), False

    def __call__(self, x, wdata, y, alpha, beta, stream):
        if self.streamed:
            return self._call_stream(x, wdata, y, alpha, beta, stream)
        it = self.it
        copied = None
        if self.w_copy:
            self._wt_stream = None  # until the launches point at the kept buffer
            wdata, kept = self._copy_w(wdata, stream)
            copied = stream if kept else None
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
                v[self.i_ctr].value = device.tile_counter(self.dev, stream).data.ptr
                # one made inside a capture belongs to that graph
                self._ctr_stream = stream if device.counter_kept(self.dev, stream) else None
        else:
            v[0].value = x.data.ptr
            v[1].value = x.strides[0] // it
            v[self.i_w].value = wdata.data.ptr
        _set_output(v, self.i_y, y, it, alpha, beta)
        if self.epilogue:
            self._map_y(y, beta)
        if self.split is not None:
            ws, counts = self.split(stream)
            v[self.i_ws].value = ws.data.ptr
            v[self.i_counts].value = counts.data.ptr
            self._split_stream = stream if self.split.kept(stream) else None
        L(stream)
        if self.w_copy:  # every launch now points at the buffer kept for this stream
            self._wt_stream = copied

    def fast_spec(self):
        """What a repeated eager call writes, for the compiled path (:mod:`.fastcall`):
        ``(launches, writes, tma, ymap, split, wcopy)``, or None where a call does more
        (copies W's blocks by CuPy, maps a stand-in, or runs the dense path)."""
        if not self.eager:
            return None
        if self.streamed:
            return self._stream_spec()
        if (self.w_copy and self.copy is None) or self.stand_in is not None:
            return None
        # under TMA the maps of X and W are the runner's, checked by the call; W's copy
        # reads W and writes the buffer kept for the call's stream
        names, writes = ("main",), []
        if self.copy is not None:
            names, writes = ("copy", "main"), [("copy", 0, "w")]
        if not self.tma:
            writes += [("main", 0, "a"), ("main", 1, "lda")]
            if self.copy is None:
                writes.append(("main", self.i_w, "w"))
        writes += _output_writes("main", self.i_y)
        if self.epilogue:  # the TMA store on: a call checks that the runner's Y map is its Y's
            writes.append(("main", self.i_ctr + 3, "one"))
        return (names, writes, self.tma, bool(self.epilogue), self.split is not None,
                self.copy is not None)

    def _map_y(self, y, beta):
        """Points the epilogue's TMA store at ``y`` where it can take it (beta 0, rows
        16-byte aligned and ascending, columns contiguous), else turns it off for the call."""
        ok = beta == 0 and y.strides[0] > 0 and _aligned(y, 16)
        if ok:
            ykey = (y.data.ptr, y.strides[0])
            if ykey != self._ykey:
                self.main.set_map(self.i_ctr + 2, device.tensor_map(
                    ykey[0], self.width, y.shape[0], ykey[1], 64, self.epilogue))
                self._ykey = ykey
        self.main.v[self.i_ctr + 3].value = int(ok)

    def run_sparse(self, x, wdata, out, alpha, beta):
        """The sparse kernel's product into ``out`` (or a fresh result), through an aligned
        temporary where ``out`` is misaligned or overlaps ``x`` or W's blocks, and from an
        aligned copy of a misaligned ``x``."""
        n = x.shape[0]
        stream = _stream()
        y = out if (out is not None and _aligned(out, self.out_align)
                    and not _overlap(out, x) and not _overlap(out, wdata)) else None
        if y is None:  # a fresh array: `out` may be misaligned, or overlap `x` or W
            if out is None:
                y = self.outputs.take(stream)
            else:  # a temporary, copied into `out` below
                y = _held(_cupy().ndarray((n, self.width), wdata.dtype) if beta == 0
                          else out.copy(order="C"))
        if n and self.width:
            if not _aligned(x, 16):  # every kernel copies X in 16-byte segments
                x = _held(x.copy(order="C"))  # a new, aligned buffer
            self(x, wdata, y, alpha, beta, stream)
        if out is not None and y is not out:
            out[...] = y
            return out
        return y


__all__ = ["dsd", "dsd_eager", "dsd_plan"]
