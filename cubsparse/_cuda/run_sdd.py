"""Running sdd plans: ``alpha * (A @ B)`` sampled on W's blocks ``+ beta * out``, the
weight gradient; the general call, the eager path of a repeated one, and the dense path
(a cuBLAS product, then a gather of W's blocks).
"""

from __future__ import annotations

import dataclasses

from .. import _options
from . import blas, device, fastcall, outputs, run, sdd_rules, sdd_worklists, worklists
from .compile import get_kernel
from .launch import Launch
from .plans import plan_sdd
from .run import (
    _aligned_target,
    _Beside,
    _check_devices,
    _cupy,
    _held,
    _key,
    _map_rows,
    _runner,
    _SplitScratch,
    _stream,
    _stride_grid,
)
from .sdd_configs import sdd_tile_shape


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


def sdd_eager(a, b_mat, like, tf32: bool, out_data=None):
    """``a @ b_mat`` on ``like``'s blocks for the call an eager loop makes (``alpha`` 1,
    ``beta`` 0; types, dtypes and shapes checked by the caller), into ``out_data`` (the
    blocks of a matrix of ``like``'s layout) where given, through a runner already built,
    or None where :func:`sdd` must run (a first call, another device, an ``out_data`` the
    kernels cannot store into directly)."""
    dev = run._get_device()
    if a.data.device_id != dev or b_mat.data.device_id != dev or (
            like._data.data.device_id != dev):
        return None
    if out_data is not None and (out_data.data.device_id != dev or out_data.data.ptr % 16
                                 or not out_data.flags.c_contiguous):
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
    stream = run._current_stream().ptr
    data = r.outputs.take(stream) if out_data is None else out_data
    if ops is None:
        if r.direct is not None:
            r.direct(*lg, data.data.ptr, stream)
        else:
            r(a, b_mat, (*lg, True, False, a.shape[1], ()), data, 1.0, 0.0, stream)
        fastcall.arm_sdd(like, r, a, b_mat, dev)
        return data
    r(a, b_mat, ops, data, 1.0, 0.0, stream)
    return data


def _shared_outputs(like, dtype, dev: int):
    """The output cache of ``like``'s weight gradients on device ``dev`` in this thread:
    one for all of its runners, since the output has W's shape whatever the rows of X."""
    caches = like.__dict__.setdefault("_sdd_outputs", {})
    key = (dev, run._get_ident(), like._data.shape, dtype.str)
    o = caches.get(key)
    if o is None:
        o = caches[key] = fastcall.outputs(like._data.shape, dtype,
                                           outputs.SHARED_KEEP_BYTES)
    return o


def _resident_grid(p, dev: int, groups: int, rule=sdd_rules.short_grid_per_sm):
    """Plan ``p`` with its persistent grid cut, where ``rule`` says it pays, to the CTAs an
    SM holds at once (plans count them from shared memory alone; the driver's occupancy
    rule counts registers too)."""
    cfg = p.kernel
    resident = device.resident_ctas(get_kernel(cfg), cfg.threads, cfg.smem)
    sms = device.sm_count(dev)
    per_sm = rule(cfg.persistent, resident, groups, sms)
    if per_sm == cfg.persistent:
        return p
    return dataclasses.replace(p, kernel=dataclasses.replace(cfg, persistent=per_sm),
                               grid=min(p.grid, per_sm * sms))


class _SddRunner:
    def __init__(self, like, dev, inner, a_km, b_nk, tf32, sparse_only=False):
        s, b = like._structure, like.blocksize
        dtype = like._data.dtype
        self.plan = p = plan_sdd(s, dtype, b, inner, a_km, b_nk, tf32, device.arch(dev),
                                 device.sm_count(dev),
                                 None if sparse_only else _options.dense_bytes_limit())
        self.it = dtype.itemsize
        self.outputs = _shared_outputs(like, dtype, dev)
        self.direct = None  # the eager call's launch, where the kernel reads pointers
        self.rest = None  # the second launch of a weight gradient in two parts
        self.rest_scratch = None  # its split reduction's workspace and counters
        self.beside = None  # where it runs beside the panels: their streams and events
        self.tail_scratch = None  # the TMA kernel's last-round pieces' workspace, counters
        # the stream whose kept workspaces and counters (tail_scratch, rest_scratch) the
        # launches hold since the last call, else None: the compiled path's guard
        self._split_stream = None
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
            starts = sdd_worklists.sdd_stream_starts(s, dev, p.chunk)
            self.main = Launch(get_kernel(cfg), (p.chunks, p.grid), (cfg.threads,), cfg.smem,
                               "plpliiippiipff", [None, None, None, None, inner, nbr, nbc,
                                                  s.indices, starts, p.chunks, p.chunk, None,
                                                  None, None])
        elif p.tiled:
            tiles, bmap = sdd_worklists.sdd_tiles(s, dev, *sdd_tile_shape(p.dtype, b))
            nbr, nbc = s.block_shape
            self.main = Launch(get_kernel(cfg), (tiles.shape[0],), (cfg.threads,), cfg.smem,
                               "plpliiipppff", [None, None, None, None, inner, nbr, nbc, tiles,
                                                bmap, None, None, None])
        elif cfg.tma:  # persistent: p.grid CTAs, each a run of groups; maps set per call
            if p.rest is not None:  # the panels' tiles, then a launch over the other blocks
                groups, rest, order = sdd_worklists.sdd_hybrid(
                    s, dev, cfg.block_rows, cfg.group, p.rest.group,
                    sdd_rules.sdd_hybrid_fill(b))
                self.rest = self._rest_launch(p.rest, p.rest_splits, rest, order, s, inner, f)
                # the partials of a group's split reduction: each CTA's D (G b x b floats)
                self.rest_scratch = (None if p.rest_splits == 1 else _SplitScratch(
                    s, dev, (rest.shape[0] * p.rest_splits * p.rest.group * b * b,),
                    rest.shape[0]))
                self.beside = _Beside(dev) if p.rest_beside else None
            else:
                groups = sdd_worklists.sdd_work(s, dev, cfg.group, cfg.block_rows, cfg.panel)
            # the last round's groups reduced in pieces: each piece's D (M x N floats,
            # 128 x 256 on every TMA tile) and a counter per group (one piece a group is the
            # group whole, whatever tail_whole says)
            tail = groups.shape[0] - p.tail_whole if p.tail_splits > 1 else 0
            self.tail_scratch = (_SplitScratch(
                s, dev, (tail * p.tail_splits * cfg.block_rows * b * cfg.group * b,), tail)
                if tail > 0 else None)
            self.dcols = s.block_shape[1] * b
            self.xcols = s.block_shape[0] * b
            self.main = Launch(get_kernel(cfg), (p.grid,), (cfg.threads,), cfg.smem,
                               "ttiiipipiipppff",
                               [None, None, inner, self.xcols, self.dcols, groups,
                                groups.shape[0], s.indices, p.tail_whole, p.tail_splits,
                                0, 0, None, None, None])
            self._maps = (None, None)  # the (address, row stride) of X and dY last mapped
        else:
            groups = sdd_worklists.sdd_work(s, dev, cfg.group)
            if cfg.kernel == "sdd_wgmma":  # a grid of p.grid CTAs, each a run of groups
                if p.grid:
                    self.plan = p = _resident_grid(p, dev, groups.shape[0])
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

    @staticmethod
    def _rest_launch(cfg, splits: int, groups, order, s, inner: int, f: str) -> Launch:
        """The second part of the weight gradient in two parts (``sdd_wgmma_rest``): the
        blocks ``order`` lists, in ``groups`` (block row, first entry, count), each group's
        reduction shared by ``splits`` CTAs (the workspace and counters set per call)."""
        return Launch(get_kernel(cfg), (groups.shape[0] * splits,), (cfg.threads,), cfg.smem,
                      "plplipippipp" + "p" + f + f,
                      [None, None, None, None, inner, groups, groups.shape[0], order,
                       s.indices, splits, 0, 0, None, None, None])

    def fast_spec(self):
        """What a repeated layer gradient writes, for the compiled path (:mod:`.fastcall`):
        the operands and output of :meth:`_direct`, or the output of the TMA kernel (whose
        maps of X and dY the call checks are the runner's) and the operands and output of
        its second launch (on a side stream where the runner has one); None for the dense
        path."""
        m = "main"
        ops = [(m, 0, "a"), (m, 1, "lda"), (m, 2, "b"), (m, 3, "ldb")]
        out = [(m, -3, "y"), (m, -2, "one"), (m, -1, "zero")]
        if self.direct is not None:
            return (m,), ops + out, False, False, False, False
        if self.plan.path != "sparse" or not self.plan.kernel.tma:
            return None
        names, writes = (m,), out
        if self.rest is not None:
            names += ("rest",)
            writes += [("rest", i, src) for _, i, src in ops + out]
        split = self.tail_scratch is not None or self.rest_scratch is not None
        return names, writes, True, False, split, False

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
        if dense and run._current_stream().is_capturing():  # no cuBLAS in a capture
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
            self._split_stream = None  # until the launches hold this stream's workspaces
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
            maps, self._maps = self._maps, (None, None)  # (until both maps are set)
            if xkey != maps[0]:
                self.main.set_map(0, device.tensor_map(xptr, self.xcols, inner, xrow, 64, 64))
            if dkey != maps[1]:
                self.main.set_map(1, device.tensor_map(dptr, self.dcols, inner, drow, 64, 64))
            self._maps = (xkey, dkey)
            v[-3].value, v[-2].value, v[-1].value = target.data.ptr, alpha, beta
            if self.tail_scratch is not None:
                ws, counts = self.tail_scratch(stream)
                v[10].value, v[11].value = ws.data.ptr, counts.data.ptr
            if self.rest is not None:  # the blocks the panels leave, read by pointer
                rv = self.rest.v
                rv[0].value, rv[1].value, rv[2].value, rv[3].value = ops[:4]
                rv[-3].value, rv[-2].value, rv[-1].value = target.data.ptr, alpha, beta
                if self.rest_scratch is not None:
                    ws, counts = self.rest_scratch(stream)
                    rv[10].value, rv[11].value = ws.data.ptr, counts.data.ptr
        else:
            v[0].value, v[1].value, v[2].value, v[3].value = ops[:4]
            v[-3].value, v[-2].value, v[-1].value = target.data.ptr, alpha, beta
        if self.beside is not None:  # the panels, and the rest beside them
            self.beside(stream, self.main, self.rest)
        else:
            self.main(stream)
            if self.rest is not None:
                self.rest(stream)
        if not dense and self.plan.kernel.tma:
            self._split_stream = stream if all(
                sc is None or sc.kept(stream) for sc in (self.tail_scratch, self.rest_scratch)
            ) else None
        if target is not data:
            data[...] = target


__all__ = ["sdd", "sdd_eager", "sdd_operands", "sdd_plan"]
