"""CUDA backend: CuPy ``RawModule`` kernels from ``cubsparse/kernels/*.cu``.

Kernels are compiled lazily, one template instantiation per (family, dtype, block size,
variant), memoized per device; CuPy keeps the binaries in its on-disk cache. Index tables
come from the layout's :class:`~cubsparse._index.Structure` and are uploaded once per
layout. No op synchronises with the host; all launches go to CuPy's current stream.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.resources
import os
import re

import numpy as np

from . import _dtypes

_TC_TAGS = {"float16": "F16", "bfloat16": "BF16"}
_SIMT_TYPES = {"float32": "float", "float64": "double"}
FAMILIES = ("dsd", "sdd", "dsd_sm90", "sdd_sm90")


@dataclasses.dataclass(frozen=True)
class KernelConfig:
    """One kernel instantiation and how to launch it."""

    family: str
    name: str  # the C++ name expression, e.g. "dsd_tc<F16,32,256,32,8,1,4,false>"
    threads: int
    smem: int  # dynamic shared memory, bytes
    rows_per_cta: int  # dsd: rows of X per CTA
    group: int  # blocks per CTA (sdd: of one block row; wgmma dsd: adjacent output blocks)
    arch: str | None = None  # a required target such as "sm_90a"; None: the device's own
    persistent: int = 0  # CTAs per SM of a persistent kernel (grid sized to the device); 0: none
    tma: bool = False  # takes X and W as TMA tensor maps (dsd_wgmma_tma)


def _dtype_name(dtype) -> str:
    """A dtype's name; a plain string passes through (bfloat16 without ml_dtypes)."""
    return dtype if isinstance(dtype, str) else np.dtype(dtype).name


def _b(flag: bool) -> str:
    return "true" if flag else "false"


def _tc_smem(bm, bn, bk, stages, a_km, b_nk, esize=2) -> int:
    pad = 16 // esize  # rows are padded by 16 bytes
    a = (bk * (bm + pad)) if a_km else (bm * (bk + pad))
    b = (bn * (bk + pad)) if b_nk else (bk * (bn + pad))
    return stages * (a + b) * esize


# Tile choices per block size: the fastest of the variants timed on an H200 (bench/NOTES.md
# lists them); the warp tile (rows / warps along m) x (cols / warps along n) is a multiple
# of 16 x 8, the mma shape.
#   dsd: (rows of X per CTA, warps along m, warps along n, k depth per stage, stages)
#   sdd: (blocks per CTA, warps along m, warps along n, k depth per stage, stages)
DSD_TC = {
    8: (256, 8, 1, 32, 4), 16: (256, 8, 1, 32, 4), 32: (256, 4, 1, 32, 4),
    64: (128, 4, 2, 64, 3), 128: (128, 2, 2, 64, 3),
}
#   dsd with few rows of X (n <= SMALL_ROWS): the product is memory-bound, so short tiles
#   (no MMA wasted on absent rows) and deep pipelines that keep many bytes of W in flight.
SMALL_ROWS = 64
DSD_TC_SMALL = {
    8: (64, 4, 1, 64, 6), 16: (64, 4, 1, 64, 6), 32: (64, 4, 1, 64, 6),
    64: (64, 2, 2, 64, 6), 128: (64, 1, 4, 64, 4),
}
SDD_TC = {
    8: (16, 1, 4, 32, 4), 16: (16, 1, 4, 32, 4), 32: (8, 1, 4, 32, 4),
    64: (2, 1, 2, 32, 4), 128: (1, 2, 2, 32, 4),
}
#   dsd for small blocks (float16/bfloat16, more than SMALL_ROWS rows): a group of adjacent
#   output blocks per CTA shares every X slice it loads (dsd_group_tc). (blocks per CTA,
#   rows of X per CTA, warps along m, warps along n, list entries per stage, stages).
#   Hopper takes the wgmma kernel below where one is configured for the block size. Taken
#   where a list entry feeds enough members on average (_group_pays).
DSD_GROUP = {8: (16, 128, 4, 2, 4, 4)}
#   Hopper wgmma dsd (float16/bfloat16, more than SMALL_ROWS rows): (output blocks per
#   CTA, 64-row tiles, warpgroups, stages[, swap]); None: the mma.sync kernel above. One
#   block per CTA runs dsd_wgmma_single; a group of them dsd_wgmma, which with swap=True
#   computes the transposed product (W's blocks as the m64 operand, G = warpgroups * 64 / b;
#   opt-in: absent blocks are multiplied as zeros).
#   b = 16: one block per CTA (where the union kernel does not pay) beat a group of four
#   (H200, fp16, C = K = 4096, X @ W / dY @ W.T ms single / group: N = 128, d = 0.02
#   0.0086 / 0.0086 vs 0.0133 / 0.0106; N = 4096, d = 0.05 0.135 / 0.142 vs 0.155 / 0.148).
WGMMA_DSD = {8: None, 16: (1, 1, 2, 4), 32: (1, 1, 2, 5), 64: (1, 1, 2, 4), 128: (1, 1, 2, 4)}
#   Block sizes whose X @ W on the single-block wgmma kernel reads W's blocks as stored
#   (an N-major B tile) rather than a block-transposed copy made per call.
WGMMA_DSD_KN = {16, 32}
#   ... and, per block size, for at most this many rows of X: the block-transpose pass
#   reads and writes all of W, which at small N costs more than reading W as stored loses
#   (H200, fp16, C = K = 12288, d = 0.5, X @ W ms as stored / transposed: b = 64, N = 128
#   0.095 / 0.203, N = 1024 0.534 / 0.568, N = 2048 1.08 / 1.01; b = 128, N = 128
#   0.110 / 0.218, N = 1024 0.583 / 0.503).
WGMMA_DSD_KN_ROWS = {64: 1024, 128: 128}
#   Hopper persistent, warp-specialized single-block dsd (a producer warpgroup feeding WG
#   consumer warpgroups through mbarriers; tiles walked by a grid sized to the device):
#   (64-row tiles per warpgroup, consumer warpgroups, stages, CTAs per SM[, slices of wgmmas
#   a consumer keeps running, 1 by default[, tma[, rows]]]); tma: the copies by the TMA
#   engine, issued by one thread (dsd_wgmma_tma), else by a cp.async producer warpgroup;
#   rows (b = 64, 128; 64-row tiles 1, warpgroups b / 64): the transposed product, tiles of
#   that many rows of X as wgmma's N. Where set for a block size it replaces the
#   single-block kernel above; None: that kernel.
WGMMA_DSD_WS = {32: (2, 1, 3, 3, 0), 64: (2, 1, 4, 2, 0, True), 128: (2, 1, 3, 2, 0, True)}
#   ... and where every CTA gets enough of them (_tall_pays), tiles of more rows of X, in
#   the same format. The L2 -> SM stream bounds these kernels (NOTES 55): a tile re-reads
#   its block column's W blocks, so taller tiles read W fewer times. b = 64, 128: the
#   transposed product on 256-row tiles (H200, fp16, d = 0.25, X @ W / dY @ W.T ms against
#   the tiles above: b = 128, N = C = K = 4096 0.081 / 0.073 vs 0.088 / 0.077, N = 16384
#   0.254 / 0.246 vs 0.272 / 0.264; b = 64, N = 16384 0.314 / 0.303 vs 0.350 / 0.339);
#   b = 32: 512-row tiles by TMA, two consumer warpgroups of four m64 tiles (4096^3
#   0.155 / 0.154 vs 0.174 / 0.165; 256-row tiles 0.161 / 0.161; N = 4096, C = K = 12288,
#   d = 0.1: 0.516 / 0.516 vs 0.646 / 0.702). At N = 512 fewer tiles than CTAs made the
#   tall tiles slower.
WGMMA_DSD_TALL = {32: (4, 2, 3, 1, 0, True), 64: (1, 1, 2, 2, 0, True, 256),
                  128: (1, 2, 4, 1, 1, True, 256)}
#   Row tiles x output blocks per persistent CTA below which those tiles are not used.
TALL_MIN_WAVES = 2
#   Hopper persistent, warp-specialized grouped dsd (dsd_wgmma_union): a tile is 64 * MW
#   rows of X by G adjacent output blocks and walks the union of their lists, one consumer
#   warpgroup per G / CW members: (G, MW, CW, stages, CTAs per SM). Where set (with a
#   WGMMA_DSD entry for b) it replaces the kernels above when the union lists share their
#   entries enough (_union_pays).
WGMMA_DSD_UNION = {16: (16, 2, 2, 4, 1)}
#   Hopper wgmma sdd (float16/bfloat16, operands read in place as rows of the batch):
#   (blocks per CTA, warpgroups along M, along N, stages, flip); flip stacks the group's
#   dY blocks as wgmma's M (b <= 32), else the group spans N. None: sdd_tc above.
WGMMA_SDD = {8: None, 16: (16, 2, 1, 4, True), 32: (4, 2, 1, 5, True),
             64: (2, 1, 1, 4, False), 128: (1, 2, 1, 5, False)}
#   sdd for small blocks (float16/bfloat16, x and dy read as rows): a CTA per tile of the
#   block grid, (block rows, block columns, k depth, warps m, warps n, stages) per tile.
#   Taken where its operand loads are fewer than sdd's groups' (_sdd_tiled_pays).
SDD_TILE = {8: (16, 16, 64, 2, 4, 3)}
#   The same on CUDA cores (float32 IEEE): (block rows, block columns, k depth, stages); one
#   thread per 8 x 8 unit of the tile's stored blocks. Taken where the tiles are full
#   enough (SDD_TILE_SIMT_FILL, _sdd_tiled_pays).
SDD_TILE_SIMT = {8: (16, 16, 32, 2), 16: (8, 8, 32, 2)}
#   dsd on CUDA cores (float32 in IEEE arithmetic, float64): (rows of X per CTA, rows per
#   thread, columns per thread, k depth per stage, stages); threads = rows / rows per
#   thread * b / columns per thread. DSD_SIMT_SMALL for n <= SMALL_ROWS: short tiles, and
#   small CTAs that split long lists over more of them (_split_length's slots).
DSD_SIMT = {8: (128, 4, 4, 32, 3), 16: (128, 8, 4, 16, 3), 32: (128, 8, 4, 32, 3),
            64: (128, 8, 8, 16, 3), 128: (64, 8, 8, 16, 3)}
DSD_SIMT_SMALL = {8: (32, 2, 4, 16, 3), 16: (32, 4, 4, 16, 3), 32: (32, 4, 4, 32, 4),
                  64: (32, 4, 4, 32, 4), 128: (32, 4, 8, 32, 4)}
#   sdd on CUDA cores: (blocks per CTA, rows per thread, columns per thread, k depth,
#   stages); threads = b / rows per thread * blocks * b / columns per thread. float64
#   takes half-size thread tiles (SDD_SIMT_F64), which fit its registers.
SDD_SIMT = {8: (16, 8, 4, 16, 3), 16: (8, 4, 8, 16, 3), 32: (4, 8, 4, 16, 3),
            64: (1, 8, 8, 16, 3), 128: (1, 8, 8, 16, 3)}
SDD_SIMT_F64 = {8: (16, 4, 4, 16, 3), 16: (8, 4, 4, 16, 3), 32: (2, 4, 4, 16, 3),
                64: (1, 4, 4, 16, 3), 128: (1, 8, 8, 16, 3)}


@functools.lru_cache(maxsize=None)
def dsd_config(dtype: np.dtype, b: int, trans: bool, tf32: bool = False,
               small: bool = False) -> KernelConfig:
    """The dense x sparse kernel for ``Y = X @ op(W)``.

    With ``tf32`` (float32 only) the tensor-core kernel reads W's blocks as [n][k]: the
    transposed kernel is used for both orientations (the caller transposes the blocks
    for X @ W). ``small`` picks the tiles for at most SMALL_ROWS rows of X (every dtype).
    """
    name = _dtype_name(dtype)
    if name in _TC_TAGS or (tf32 and name == "float32"):
        tag, esize = (_TC_TAGS[name], 2) if name in _TC_TAGS else ("TF32", 4)
        trans = trans or tag == "TF32"
        bm, wm, wn, bk, st = (DSD_TC_SMALL if small else DSD_TC)[b]
        expr = f"dsd_tc<{tag},{b},{bm},{bk},{wm},{wn},{st},{_b(trans)}>"
        smem = _tc_smem(bm, b, bk, st, False, trans, esize)
        return KernelConfig("dsd", expr, wm * wn * 32, smem, bm, 1)
    bm, tm, tn, bk, st = (DSD_SIMT_SMALL if small else DSD_SIMT)[b]
    esize = np.dtype(name).itemsize
    expr = f"dsd_simt<{_SIMT_TYPES[name]},{b},{bm},{tm},{tn},{bk},{st},{_b(trans)}>"
    smem = _tc_smem(bm, b, bk, st, False, trans, esize)
    return KernelConfig("dsd", expr, (bm // tm) * (b // tn), smem, bm, 1)


@functools.lru_cache(maxsize=None)
def sdd_config(dtype: np.dtype, b: int, a_km: bool = True, b_nk: bool = False,
               tf32: bool = False) -> KernelConfig:
    """The sampled dense x dense kernel; ``a_km``/``b_nk`` pick the operand layouts
    (TF32 always reads A[m][k] and B[n][k])."""
    name = _dtype_name(dtype)
    if name in _TC_TAGS or (tf32 and name == "float32"):
        tag, esize = (_TC_TAGS[name], 2) if name in _TC_TAGS else ("TF32", 4)
        if tag == "TF32":
            a_km, b_nk = False, True
        group, wm, wn, bk, st = SDD_TC[b]
        expr = (f"sdd_tc<{tag},{b},{group},{bk},{wm},{wn},{st},"
                f"{_b(a_km)},{_b(b_nk)}>")
        smem = _tc_smem(max(b, 16), group * b, bk, st, a_km, b_nk, esize)
        return KernelConfig("sdd", expr, wm * wn * 32, smem, 0, group)
    group, tm, tn, bk, st = (SDD_SIMT_F64 if name == "float64" else SDD_SIMT)[b]
    expr = (f"sdd_simt<{_SIMT_TYPES[name]},{b},{group},{tm},{tn},{bk},{st},"
            f"{_b(a_km)},{_b(b_nk)}>")
    smem = _tc_smem(b, group * b, bk, st, a_km, b_nk, np.dtype(name).itemsize)
    return KernelConfig("sdd", expr, (b // tm) * (group * b // tn), smem, 0, group)


@functools.lru_cache(maxsize=None)
def sdd_tile_config(dtype: np.dtype, b: int) -> KernelConfig | None:
    """The tiled small-block sdd kernel (x and dy read as rows), or None where unused; its
    group is the tile's block rows times block columns (see :func:`sdd_tile_shape`)."""
    name = _dtype_name(dtype)
    if name == "float32" and SDD_TILE_SIMT.get(b) is not None:
        tr, ts, bk, st = SDD_TILE_SIMT[b]
        # rows padded by 16 bytes per 128 (the kernel's bank spread)
        lds = (tr * b + tr * b // 8) + (ts * b + ts * b // 8)
        return KernelConfig("sdd", f"sdd_tile_simt<{b},{tr},{ts},{bk},{st}>",
                            (tr * b // 8) * (ts * b // 8), st * bk * lds * 4, 0, tr * ts)
    cfg = SDD_TILE.get(b)
    if name not in _TC_TAGS or cfg is None:
        return None
    tr, ts, bk, wm, wn, st = cfg
    expr = f"sdd_tile_tc<{_TC_TAGS[name]},{b},{tr},{ts},{bk},{wm},{wn},{st}>"
    smem = _tc_smem(tr * b, ts * b, bk, st, True, False)
    return KernelConfig("sdd", expr, wm * wn * 32, smem, 0, tr * ts)


def sdd_tile_shape(dtype: np.dtype, b: int) -> tuple[int, int]:
    """(block rows, block columns) of the tiled sdd kernel's tile for ``dtype``."""
    if _dtype_name(dtype) == "float32":
        return SDD_TILE_SIMT[b][:2]
    return SDD_TILE[b][:2]


@functools.lru_cache(maxsize=None)
def reduce_config(dtype: np.dtype, b: int, tf32: bool = False, group: int = 1) -> KernelConfig:
    """Adds the segments of split lists (tensor-core dsd only), tiles of ``group`` blocks."""
    tag = _TC_TAGS.get(_dtype_name(dtype), "TF32" if tf32 else None)
    return KernelConfig("dsd", f"dsd_reduce<{tag},{group * b}>", 256, 0, 0, group)


@functools.lru_cache(maxsize=None)
def group_config(dtype: np.dtype, b: int, trans: bool) -> KernelConfig | None:
    """The grouped small-block dsd kernel (mma.sync), or None where unused."""
    name = _dtype_name(dtype)
    cfg = DSD_GROUP.get(b)
    if name not in _TC_TAGS or cfg is None:
        return None
    group, bm, wm, wn, entries, st = cfg
    expr = f"dsd_group_tc<{_TC_TAGS[name]},{b},{group},{bm},{wm},{wn},{entries},{st},{_b(trans)}>"
    smem = st * entries * (bm + group * b) * b * 2
    return KernelConfig("dsd", expr, wm * wn * 32, smem, bm, group)


@functools.lru_cache(maxsize=None)
def wgmma_config(dtype: np.dtype, b: int, kn: bool = False,
                 union: bool = True, tall: bool = False) -> KernelConfig | None:
    """The Hopper wgmma dsd kernel, or None where unused. ``kn``: X @ W, W's blocks read
    as stored ([k][n]), which every kernel but the non-persistent grouped one can do (it
    reads a block-transposed copy). ``union=False``: the kernel used where the union
    kernel does not pay (:func:`_union_pays`). ``tall``: the WGMMA_DSD_TALL tile, where
    one is set for b."""
    name = _dtype_name(dtype)
    cfg = WGMMA_DSD.get(b)
    if name not in _TC_TAGS or cfg is None:  # None: no wgmma kernel for b, union included
        return None
    ucfg = WGMMA_DSD_UNION.get(b) if union else None
    if ucfg is not None:
        group, mw, cw, st, per_sm = ucfg
        expr = (f"dsd_wgmma_union<{_TC_TAGS[name]},{b},{group},{mw},{cw},{st},{_b(kn)},"
                f"{per_sm}>")
        smem = st * (64 * mw + group * b) * 128 + 1024
        return KernelConfig("dsd_sm90", expr, (cw + 1) * 128, smem, 64 * mw, group,
                            "sm_90a", per_sm)
    ws = (tall and WGMMA_DSD_TALL.get(b)) or WGMMA_DSD_WS.get(b)
    if cfg[0] == 1 and ws is not None:  # the persistent form of the single-block kernel
        mw, wg, st, per_sm = ws[:4]
        inflight = ws[4] if len(ws) > 4 else 1
        tma = len(ws) > 5 and bool(ws[5])
        xn = ws[6] if tma and len(ws) > 6 else 0
        rows = xn or 64 * mw * wg  # rows of X per tile
        expr = f"{_TC_TAGS[name]},{b},{mw},{wg},{st},{_b(kn)},{per_sm},{inflight}"
        expr = f"dsd_wgmma_tma<{expr},{xn}>" if tma else f"dsd_wgmma_ws<{expr}>"
        smem = st * (rows + b) * 128 + 1024
        threads = wg * 128 + (32 if tma else 128)  # a producer warp, or warpgroup
        return KernelConfig("dsd_sm90", expr, threads, smem, rows, 1, "sm_90a", per_sm, tma)
    group, mw, wg, st = cfg[:4]
    swap = len(cfg) > 4 and bool(cfg[4])
    rows = 64 * mw if swap else 64 * mw * wg  # rows of X per CTA
    if group == 1:  # the single-block kernel (no group arguments)
        expr = f"dsd_wgmma_single<{_TC_TAGS[name]},{b},{mw},{wg},{st},{_b(kn)}>"
    else:
        expr = f"dsd_wgmma<{_TC_TAGS[name]},{b},{group},{mw},{wg},{st},{_b(swap)}>"
    smem = st * (rows + group * b) * 128 + 1024  # + slack to align tiles to 1 KiB
    return KernelConfig("dsd_sm90", expr, wg * 128, smem, rows, group, "sm_90a")


def _reads_kn(cfg: KernelConfig) -> bool:
    """Whether a wgmma dsd kernel can read W's blocks as stored (all but dsd_wgmma)."""
    return cfg.group == 1 or cfg.persistent > 0


@functools.lru_cache(maxsize=None)
def sdd_wgmma_config(dtype: np.dtype, b: int) -> KernelConfig | None:
    """The Hopper wgmma sdd kernel (X.T @ dY with both read as rows), or None where unused."""
    name = _dtype_name(dtype)
    cfg = WGMMA_SDD.get(b)
    if name not in _TC_TAGS or cfg is None:
        return None
    group, wm, wn, st, flip = cfg
    expr = f"sdd_wgmma<{_TC_TAGS[name]},{b},{group},{wm},{wn},{st},{_b(flip)}>"
    smem = st * (b + group * b) * 64 * 2 + 1024  # + slack to align tiles to 1 KiB
    return KernelConfig("sdd_sm90", expr, wm * wn * 128, smem, 0, group, "sm_90a")


@functools.lru_cache(maxsize=None)
def transpose_config(b: int) -> KernelConfig:
    """Transposes every block of a 16-bit W (X @ W on the wgmma kernel)."""
    return KernelConfig("dsd_sm90", f"transpose_blocks<{b}>", 256, 0, 0, 1, "sm_90a")


def set_tiles(dsd=None, sdd=None, dsd_small=None, wgmma=None, wgmma_sdd=None,
              group=None, sdd_tile=None, wgmma_ws=None, wgmma_union=None, simt=None,
              simt_small=None, sdd_simt=None, sdd_tile_simt=None, wgmma_tall=None) -> None:
    """Replace tile choices (for tuning experiments); clears the config caches."""
    DSD_TC.update(dsd or {})
    SDD_SIMT.update(sdd_simt or {})
    DSD_SIMT.update(simt or {})
    DSD_SIMT_SMALL.update(simt_small or {})
    SDD_TILE.update(sdd_tile or {})
    SDD_TILE_SIMT.update(sdd_tile_simt or {})
    DSD_GROUP.update(group or {})
    SDD_TC.update(sdd or {})
    DSD_TC_SMALL.update(dsd_small or {})
    WGMMA_DSD.update(wgmma or {})
    WGMMA_DSD_WS.update(wgmma_ws or {})
    WGMMA_DSD_TALL.update(wgmma_tall or {})
    WGMMA_DSD_UNION.update(wgmma_union or {})
    WGMMA_SDD.update(wgmma_sdd or {})
    for f in (dsd_config, sdd_config, group_config, wgmma_config, sdd_wgmma_config,
              sdd_tile_config):
        f.cache_clear()


def all_configs(dtypes=None, blocksizes=None, families=None) -> list[KernelConfig]:
    """Every instantiation the backend can launch (what ``warmup`` and CI compile)."""
    names = [d if d == "bfloat16" else _dtypes.as_dtype(d).name
             for d in (dtypes or _dtypes.SUPPORTED_DTYPES)]
    if "bfloat16" not in names and dtypes is None:
        names.append("bfloat16")  # compiled even where ml_dtypes is missing
    out = []
    for fam in families or FAMILIES:
        for dt in names:
            for b in blocksizes or _dtypes.BLOCK_SIZES:
                tf32 = dt == "float32"  # float32 also has the opt-in TF32 kernels
                if fam == "dsd":
                    if dt in _TC_TAGS or tf32:
                        out.append(reduce_config(dt, b, dt not in _TC_TAGS))
                    if group_config(dt, b, False) is not None:
                        out += [group_config(dt, b, t) for t in (False, True)]
                        out.append(reduce_config(dt, b, False, group_config(dt, b, False).group))
                    for small in (False, True):
                        out += [dsd_config(dt, b, t, False, small) for t in (False, True)]
                        out += [dsd_config(dt, b, True, True, small)] if tf32 else []
                elif fam == "dsd_sm90" and wgmma_config(dt, b) is not None:
                    for union in (True, False):  # the union kernel and its fallback
                        wcfg = wgmma_config(dt, b, union=union)
                        if wcfg is None:
                            continue
                        out += [wcfg, transpose_config(b)]
                        out += [wgmma_config(dt, b, True, union)] if _reads_kn(wcfg) else []
                        if not union and WGMMA_DSD_TALL.get(b) is not None:
                            out += [wgmma_config(dt, b, kn, False, True) for kn in (False, True)]
                        if wcfg.group > 1:  # its split lists add up G-block-wide tiles
                            out.append(reduce_config(dt, b, False, wcfg.group))
                elif fam == "sdd_sm90":
                    if sdd_wgmma_config(dt, b) is not None:
                        out.append(sdd_wgmma_config(dt, b))
                elif fam == "dsd_sm90":
                    continue
                else:
                    out += [sdd_config(dt, b, a, bn) for a in (True, False) for bn in (False, True)]
                    out += [sdd_tile_config(dt, b)] if sdd_tile_config(dt, b) is not None else []
                    out += [sdd_config(dt, b, tf32=True)] if tf32 else []
    return list(dict.fromkeys(out))


# -- sources and compilation -------------------------------------------------------------
@functools.cache
def source(family: str) -> str:
    """The family's CUDA source with its ``.cuh`` headers inlined (NVRTC needs no -I)."""
    kdir = importlib.resources.files("cubsparse") / "kernels"
    text = (kdir / f"{family}.cu").read_text()
    def header(m):
        return (kdir / m.group(1)).read_text().replace("#pragma once\n", "")

    return re.sub(r'#include "(\w+\.cuh)"', header, text)


COMPILE_OPTIONS = ("--std=c++17",)


class KernelCompileError(RuntimeError):
    """NVRTC rejected a kernel; the message carries the compiler log."""


_modules: dict = {}


def get_kernel(cfg: KernelConfig):
    """The compiled ``cupy.RawKernel``-like function for ``cfg`` on the current device."""
    import cupy

    key = (cupy.cuda.runtime.getDevice(), cfg.name)
    fn = _modules.get(key)
    if fn is None:
        if cfg.arch is None:
            try:
                mod = cupy.RawModule(
                    code=source(cfg.family), options=COMPILE_OPTIONS,
                    name_expressions=[cfg.name],
                )
                fn = mod.get_function(cfg.name)
            except cupy.cuda.compiler.CompileException as exc:
                raise KernelCompileError(f"NVRTC failed to compile {cfg.name}:\n{exc}") from exc
        else:
            fn = _compile_for_arch(cfg)
        if cfg.smem > 16 * 1024:  # static arrays count too: opt in above 48 KiB in all
            if hasattr(fn, "max_dynamic_shared_size_bytes"):  # a RawModule's kernel
                fn.max_dynamic_shared_size_bytes = cfg.smem
            else:  # a function of a module loaded from a cubin
                attr = getattr(cupy.cuda.driver, "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", 8)
                cupy.cuda.driver.funcSetAttribute(fn.ptr, attr, cfg.smem)
        _modules[key] = fn
    return fn


def _compile_for_arch(cfg: KernelConfig):
    """Compile ``cfg`` for its own target (sm_90a, which CuPy does not pick by itself) with
    NVRTC through CuPy's bindings and load the cubin. Memoized by ``get_kernel``."""
    import cupy
    from cupy_backends.cuda.libs import nvrtc

    options = [*COMPILE_OPTIONS, f"--gpu-architecture={cfg.arch}"]
    prog = nvrtc.createProgram(source(cfg.family), f"{cfg.family}.cu", [], [])
    try:
        nvrtc.addNameExpression(prog, cfg.name)
        try:
            nvrtc.compileProgram(prog, options)
        except nvrtc.NVRTCError as exc:
            raise KernelCompileError(
                f"NVRTC failed to compile {cfg.name} for {cfg.arch}:\n"
                f"{nvrtc.getProgramLog(prog)}"
            ) from exc
        lowered = nvrtc.getLoweredName(prog, cfg.name)
        cubin = nvrtc.getCUBIN(prog)
    finally:
        nvrtc.destroyProgram(prog)
    module = cupy.cuda.function.Module()
    module.load(cubin)
    _loaded_modules.append(module)  # a module must outlive the functions taken from it
    return module.get_function(lowered)


_loaded_modules: list = []
_hopper: dict = {}


def _is_hopper() -> bool:
    """True on a compute-capability 9.0 device (wgmma available), cached per device."""
    import cupy

    dev = cupy.cuda.runtime.getDevice()
    if dev not in _hopper:
        _hopper[dev] = cupy.cuda.Device(dev).compute_capability == "90"
    return _hopper[dev]


def warmup(dtypes=None, blocksizes=None, ops=None, verbose: bool = False) -> list[str]:
    aliases = {"matmul": ("dsd", "dsd_sm90"), "sampled_matmul": ("sdd", "sdd_sm90")}
    families = [f for o in (ops or FAMILIES) for f in aliases.get(o, (o,))]
    names = []
    for cfg in all_configs(dtypes, blocksizes, families):
        if cfg.arch == "sm_90a" and not _is_hopper():
            continue
        if verbose:
            print(f"compiling {cfg.name}", flush=True)
        get_kernel(cfg)
        names.append(cfg.name)
    return names


# -- index tables (once per layout, on the device) ---------------------------------------
def _device_tables(structure, key, build):
    import cupy

    return structure.cached(("cuda", cupy.cuda.runtime.getDevice()) + key,
                            lambda: tuple(cupy.asarray(t) for t in build()))


def _lists(structure, trans: bool, group: int):
    """(ptr, blk, gidx): per output block (group == 1) or per group of output blocks."""
    if group == 1:
        return structure.work_lists(trans)
    return structure.grouped_lists(trans, group)


def _dsd_tables(structure, trans: bool, split: int = 0, group: int = 1):
    """(work, blk, gidx, red, n_slots) on the device, built once per layout, split, group.

    ``work`` rows are (output tile, first list entry, list length, slot), longest first;
    an output tile is one block, or ``group`` adjacent ones (:meth:`grouped_lists`).
    With ``split`` > 0, lists longer than ``split`` are cut into near-equal segments whose
    partial sums go to workspace slots; ``red`` rows (output tile, first slot, segment
    count) tell dsd_reduce how to add them up.
    """
    import cupy

    key = ("cuda", cupy.cuda.runtime.getDevice(), "dsd", trans, split, group)

    def build():
        ptr, blk, gidx = _lists(structure, trans, group)
        lens = np.diff(ptr).astype(np.int64)
        nseg = np.ones_like(lens) if split <= 0 else np.maximum(1, -(-lens // split))
        out = np.repeat(np.arange(lens.shape[0]), nseg)
        k = np.arange(out.shape[0]) - np.repeat(np.cumsum(nseg) - nseg, nseg)  # segment no.
        first = ptr[out] + (lens[out] * k) // nseg[out]
        length = ptr[out] + (lens[out] * (k + 1)) // nseg[out] - first
        split_blocks = np.flatnonzero(nseg > 1)
        slot0 = np.full(lens.shape[0], -1, dtype=np.int64)
        slot0[split_blocks] = np.cumsum(nseg[split_blocks]) - nseg[split_blocks]
        slot = np.where(nseg[out] > 1, slot0[out] + k, -1)
        order = np.argsort(-length, kind="stable")
        work = np.stack([out, first, length, slot], axis=1)[order].astype(np.int32)
        red = np.stack([split_blocks, slot0[split_blocks], nseg[split_blocks]], axis=1)
        tables = (cupy.asarray(work), cupy.asarray(blk), cupy.asarray(gidx),
                  cupy.asarray(red.astype(np.int32)), int(nseg[split_blocks].sum()))
        return tables

    return structure.cached(key, build)


def _split_length(structure, trans: bool, row_tiles: int, group: int = 1,
                  shortest: int = 4, slots_per_sm: int = 2) -> int:
    """Longest list a CTA should take, 0 for no split. Splitting pays only when there are
    few CTAs (small N): cut lists longer than the average work of one CTA slot
    (``slots_per_sm`` per SM: more for small CTAs, so that an SM gets enough warps), into
    segments of at least ``shortest`` entries."""
    lens = structure.cached(("dsd_lens", trans, group),
                            lambda: np.diff(_lists(structure, trans, group)[0]))
    if lens.size == 0:
        return 0
    slots = slots_per_sm * _sm_count()
    avg = int(lens.sum()) * row_tiles / slots
    if lens.max() <= 2 * max(avg, shortest):
        return 0
    return 1 << int(np.ceil(np.log2(max(avg, shortest))))  # a power of two: few cached tables


_sms: dict = {}


def _sm_count() -> int:
    import cupy

    dev = cupy.cuda.runtime.getDevice()
    if dev not in _sms:
        _sms[dev] = cupy.cuda.Device(dev).attributes["MultiProcessorCount"]
    return _sms[dev]


def _sdd_groups(structure, group: int):
    """(ngroups, 3) int32 rows (block row, first block, count): runs of <= group blocks."""

    def build():
        indptr = structure.host_indptr.astype(np.int64)
        counts = np.diff(indptr)
        per_row = (counts + group - 1) // group
        row = np.repeat(np.arange(counts.shape[0]), per_row)
        first_group = np.repeat(np.cumsum(per_row) - per_row, per_row)
        k = np.arange(row.shape[0]) - first_group  # group number within its row
        start = indptr[row] + k * group
        cnt = np.minimum(group, indptr[row + 1] - start)
        return (np.stack([row, start, cnt], axis=1).astype(np.int32),)

    return _device_tables(structure, ("sdd", group), build)[0]


def _block_tiles(structure, tr: int, ts: int):
    """(tile_ids, inv, ntc) on the host: the ids (tile row * ntc + tile column) of the tiles
    of tr x ts blocks that hold a stored block, sorted, and each block's index into them."""

    def build():
        ntc = -(-structure.block_shape[1] // ts)
        rows = structure.rows.astype(np.int64)
        cols = structure.host_indices.astype(np.int64)
        tile_ids, inv = np.unique((rows // tr) * ntc + cols // ts, return_inverse=True)
        return tile_ids, inv, ntc

    return structure.cached(("block_tiles", tr, ts), build)


def _sdd_tiles(structure, tr: int, ts: int):
    """(tiles, map) on the device for the tiled sdd: one (tile row, tile column, offset into
    map) row per tile of tr x ts blocks that holds a stored block; map gives each tile's
    blocks in row-major order, -1 where none is stored."""

    def build():
        tile_ids, inv, ntc = _block_tiles(structure, tr, ts)
        rows, cols = structure.rows, structure.host_indices
        bmap = np.full((tile_ids.shape[0], tr * ts), -1, dtype=np.int32)
        bmap[inv, (rows % tr) * ts + cols % ts] = np.arange(rows.shape[0])
        tiles = np.zeros((tile_ids.shape[0], 4), dtype=np.int32)
        tiles[:, 0], tiles[:, 1] = tile_ids // ntc, tile_ids % ntc
        tiles[:, 2] = np.arange(tile_ids.shape[0]) * tr * ts
        return tiles, bmap.ravel()

    return _device_tables(structure, ("sdd_tile", tr, ts), build)


def _sharing(structure, trans: bool, group: int) -> float:
    """Stored blocks per entry of the union lists of ``group`` adjacent output blocks: how
    many members an X slice of a grouped kernel feeds on average (inf for an empty layout,
    where any kernel will do)."""

    def sharing():
        entries = int(_lists(structure, trans, group)[0][-1])
        return structure.nnzb / entries if entries else float("inf")

    return structure.cached(("sharing", trans, group), sharing)


#: Blocks per union entry from which the grouped small-block dsd beats one block per CTA
#: (H200, b = 8, G = 16: 1.4 at d = 0.05 lost, 4 at d = 0.25 won by 1.5x).
GROUP_MIN_SHARING = 2.0
#: The same for the union wgmma dsd against its fallback (H200, b = 16, G = 16 against
#: the grouped wgmma kernel: about 2 at d = 0.1 lost, 4 at d = 0.25 won) ...
UNION_MIN_SHARING = 3.0
#: ... and below this many rows of X, where its few tiles (one per G output blocks and
#: 128 rows) leave SMs idle, twice that (H200, fp16, b = 16, C = K = 4096, d = 0.25,
#: X @ W ms union / single-block wgmma: N = 128 0.037 / 0.020, 512 0.071 / 0.064, 1024
#: 0.117 / 0.122, 2048 0.188 / 0.238; N = 128, C = K = 8192, d = 0.5: 0.089 / 0.122).
UNION_MIN_ROWS = 2048


def _group_pays(structure, trans: bool, group: int) -> bool:
    """Whether the grouped mma.sync dsd's X slices feed enough members (_sharing)."""
    return _sharing(structure, trans, group) >= GROUP_MIN_SHARING


def _union_pays(structure, trans: bool, group: int, n: int) -> bool:
    """Whether the union wgmma dsd's X slices feed enough members (_sharing) for ``n``
    rows of X."""
    need = UNION_MIN_SHARING * (1 if n >= UNION_MIN_ROWS else 2)
    return _sharing(structure, trans, group) >= need


#: The float32 tiled sdd's break-even fill (stored blocks per block of its non-empty
#: tiles) against the group kernel (H200, N = C = K = 4096, random layout; b = 8: tiled
#: 1.71 / 2.91 / 3.52 ms at d = 0.1 / 0.5 / 1, groups 1.01 / 4.03 / 6.19; b = 16: tiled
#: 1.79 / 2.84 / 3.52, groups 0.54 / 2.14 / 4.06).
SDD_TILE_SIMT_FILL = {8: 0.25, 16: 0.75}


def _sdd_tiled_pays(structure, dtype, b: int, group: int) -> bool:
    """Whether the tiled sdd beats groups of ``group`` blocks of one block row. Tensor
    cores: when it loads fewer operand columns, (tr + ts) per non-empty tile against
    1 + count per group. CUDA cores (float32), bound by FMAs rather than loads: when its
    tiles are full enough (SDD_TILE_SIMT_FILL), since a tile's threads of absent units
    idle."""
    tr, ts = sdd_tile_shape(dtype, b)
    simt = _dtype_name(dtype) == "float32"

    def count():
        ntiles = _block_tiles(structure, tr, ts)[0].shape[0]
        if simt:
            return structure.nnzb >= SDD_TILE_SIMT_FILL[b] * ntiles * tr * ts
        counts = np.diff(structure.host_indptr.astype(np.int64))
        grouped = int(((counts + group - 1) // group).sum() + counts.sum())
        return ntiles * (tr + ts) < grouped

    return structure.cached(("sdd_tiled_pays", simt, tr, ts, group, SDD_TILE_SIMT_FILL.get(b)),
                            count)


# -- launches ----------------------------------------------------------------------------
def _is_half(dtype) -> bool:
    return _dtype_name(dtype) in _TC_TAGS


def _scalar(dtype, v):
    return np.float64(v) if np.dtype(dtype) == np.float64 else np.float32(v)


def _rows_ok(arr, align: int) -> bool:
    """Rows contiguous, row stride and base aligned to ``align`` bytes."""
    it = arr.dtype.itemsize
    return (arr.ndim == 2 and (arr.strides[1] == it or arr.shape[1] <= 1)
            and arr.strides[0] % align == 0 and arr.data.ptr % align == 0)


_MAX_GRID_Y = 65535
_MAX_WORKSPACE = 256 << 20  # bytes of float32 partial sums a split product may use


def dsd(x, w, transpose_w: bool, out, alpha: float, beta: float, tf32: bool = False):
    import cupy

    s, b, dtype = w._structure, w.blocksize, w.dtype
    n = x.shape[0]
    n_out = s.block_shape[0] if transpose_w else s.block_shape[1]
    tf32 = tf32 and dtype == np.float32
    tc = _is_half(dtype) or tf32  # a tensor-core kernel (else the CUDA-core one)
    # Lists may be split (float32 partials) for every dtype but float64.
    splittable = dtype != np.float64
    # The tensor-core epilogue and dsd_reduce store pairs of outputs.
    pair = 2 * dtype.itemsize if splittable else dtype.itemsize
    y = out if (out is not None and _rows_ok(out, pair)) else None
    if y is None:
        # A fresh array: `out` itself may be contiguous yet misaligned for the kernel.
        y = cupy.empty((n, n_out * b), dtype) if beta == 0 else out.copy(order="C")
    if n and n_out:
        small = n <= SMALL_ROWS
        wcfg = wgmma_config(dtype, b) if _is_half(dtype) and not small and _is_hopper() else None
        union = wcfg is not None and WGMMA_DSD_UNION.get(b) is not None
        if union and not _union_pays(s, transpose_w, wcfg.group, n):
            union, wcfg = False, wgmma_config(dtype, b, union=False)
        kn = (wcfg is not None and _reads_kn(wcfg)
              and (b in WGMMA_DSD_KN or n <= WGMMA_DSD_KN_ROWS.get(b, 0)))
        if kn and not transpose_w:
            wcfg = wgmma_config(dtype, b, True, union)  # reads W's blocks as stored
        if wcfg is not None and wcfg.persistent and WGMMA_DSD_TALL.get(b) is not None:
            # Tall tiles read W as stored: at b = 64, 128 (X's rows as wgmma's N) the block is
            # the M-major A operand of X @ W, 64 columns (one swizzle atom) per warpgroup;
            # b = 32 reads it as stored anyway (WGMMA_DSD_KN)
            xcfg = wgmma_config(dtype, b, not transpose_w, union, True)
            if _tall_pays(xcfg, n, n_out):
                wcfg, kn = xcfg, True
        gcfg = group_config(dtype, b, transpose_w) if wcfg is None and not small else None
        if gcfg is not None and not _group_pays(s, transpose_w, gcfg.group):
            gcfg = None
        cfg = wcfg or gcfg or dsd_config(dtype, b, transpose_w, tf32, small)
        fn = get_kernel(cfg)
        if not _rows_ok(x, 16):  # every kernel copies X in 16-byte segments
            x = x.copy(order="C")  # a new, aligned buffer (ascontiguousarray may return x)
        wdata = w._data
        if (tf32 or (wcfg is not None and not kn)) and not transpose_w:
            # These kernels read W's blocks with k contiguous ([n][k]): TF32 because ldmatrix
            # moves 16-bit elements, the other wgmma kernels for their K-major descriptors.
            # For X @ W give them each block transposed (one pass over the non-zeros).
            wdata = _transposed_blocks(wdata) if wcfg is not None else \
                cupy.ascontiguousarray(wdata.transpose(0, 2, 1))
        if cfg.tma:  # contiguous blocks; a layout without any maps a stand-in block
            wdata = (cupy.ascontiguousarray(wdata) if wdata.shape[0]
                     else cupy.zeros((1, b, b), wdata.dtype))  # its empty lists read none
        step = _MAX_GRID_Y * cfg.rows_per_cta
        row_tiles = -(-n // cfg.rows_per_cta)
        group = cfg.group  # output blocks per CTA
        # Small CTAs (the CUDA-core kernel's) take more slots per SM, up to 16 warps, and
        # segments down to one block where a block is enough work (b >= 64: a 32-row
        # tile of b = 128 spent 0.042 ms on 32 whole lists, 0.012 on one-block segments).
        split = (_split_length(s, transpose_w, row_tiles, group,
                               4 if tc else max(1, 4096 // (b * b)),
                               max(2, 512 // cfg.threads))
                 if splittable and n <= step else 0)
        work, blk, gidx, red, n_slots = _dsd_tables(s, transpose_w, split, group)
        width = group * b  # columns of an output tile
        if n_slots * n * width * 4 > _MAX_WORKSPACE or red.shape[0] > _MAX_GRID_Y:  # unsplit
            work, blk, gidx, red, n_slots = _dsd_tables(s, transpose_w, 0, group)
        ws = cupy.empty((n_slots, n, width), np.float32) if n_slots else None
        it = dtype.itemsize
        for r0 in range(0, n, step):  # a launch covers at most 65535 row tiles
            xs, ys = (x, y) if n <= step else (x[r0:r0 + step], y[r0:r0 + step])
            rows = xs.shape[0]
            grid = (work.shape[0], -(-rows // cfg.rows_per_cta))
            if cfg.persistent:  # one 1-D grid walks every (work item, row tile)
                grid = (min(grid[0] * grid[1], _persistent_ctas(cfg)),)
            if cfg.tma:  # X and W as tensor maps (dsd_wgmma_tma)
                head = _tma_args(xs, wdata, b, cfg.rows_per_cta, kn and not transpose_w)
            else:
                head = (xs, np.int64(xs.strides[0] // it), np.int32(rows))
                head += (np.int32(n_out),) if group > 1 else ()  # grouped kernels
                head += (wdata,)
            tables = (work, np.int32(work.shape[0])) if cfg.persistent else (work,)
            # alpha, beta: float32 but for the float64 kernel
            args = head + (*tables, blk, gidx, ys, np.int64(ys.strides[0] // it),
                           _scalar(dtype, alpha), _scalar(dtype, beta),
                           ws if ws is not None else np.uint64(0), np.int64(n * width))
            if cfg.tma:  # the counter its CTAs take tiles from
                args += (cupy.zeros(1, np.int32),)
            fn(grid, (cfg.threads,), args, shared_mem=cfg.smem)
        if n_slots:
            # float32 partials of IEEE float32 lists add up in the float32-storage (TF32
            # tag) instance: the reduction itself is plain float32 arithmetic.
            rcfg = reduce_config(dtype, b, tf32 or dtype == np.float32, group)
            grid = (-(-(n * width // 2) // rcfg.threads), red.shape[0])
            get_kernel(rcfg)(grid, (rcfg.threads,), (ws, np.int64(n * width), red, np.int32(n),
                             y, np.int64(y.strides[0] // it), np.float32(alpha),
                             np.float32(beta), np.int64(n_out * b)))
    if out is not None and y is not out:
        out[...] = y
        return out
    return y


PERSISTENT_GRID_LIMIT = None  # tests: cap a persistent kernel's grid (CTAs walk more tiles)


def _tall_pays(cfg: KernelConfig, n: int, n_out: int) -> bool:
    """Whether the persistent tile ``cfg`` has at least TALL_MIN_WAVES tiles per CTA for ``n``
    rows of X and ``n_out`` output blocks (before any list is split): with fewer, the
    taller tiles leave CTAs idle."""
    return -(-n // cfg.rows_per_cta) * n_out >= TALL_MIN_WAVES * _persistent_ctas(cfg)


def _persistent_ctas(cfg: KernelConfig) -> int:
    """Grid of a persistent kernel: cfg.persistent CTAs per SM of the current device."""
    ctas = _sm_count() * cfg.persistent
    return min(ctas, PERSISTENT_GRID_LIMIT) if PERSISTENT_GRID_LIMIT else ctas


def _tma_args(x, wdata, b: int, rows_per_cta: int, kn: bool) -> tuple:
    """The leading arguments of dsd_wgmma_tma: the tensor maps and the bounds they cover.
    X in boxes of a tile's rows by min(b, 64) columns; the blocks (``wdata``, contiguous)
    as rows of b elements, in boxes of b rows of n by the slice's k ([n][k] blocks) or,
    with ``kn`` (blocks as W stores them, [k][n]), the slice's rows of k by 64-column
    panels of n."""
    ek = min(b, 64)
    # boxes of at most 256 rows (the TMA limit): a taller tile takes several
    xmap = _tma_map(x.data.ptr, x.shape[1], x.shape[0], x.strides[0], ek, min(rows_per_cta, 256))
    wrows = wdata.shape[0] * b
    box = (min(b, 64), ek) if kn else (ek, b)
    wmap = _tma_map(wdata.data.ptr, b, wrows, 2 * b, *box)
    return xmap, wmap, np.int32(x.shape[0]), np.int32(x.shape[1]), np.int32(wrows)


_TMA_WORDS = np.dtype([("v", np.uint64, (16,))])  # a CUtensorMap: 128 opaque bytes


@functools.lru_cache(maxsize=256)
def _tma_map(ptr: int, inner: int, outer: int, row_bytes: int, box_inner: int,
             box_outer: int):
    """A 2-D TMA tensor map over 16-bit elements (``outer`` rows of ``inner``, rows
    ``row_bytes`` apart, at device address ``ptr``), copied in boxes of ``box_outer`` rows
    of ``box_inner`` elements into shared memory in the swizzle that spans one box row
    (32, 64 or 128 bytes); elements out of bounds land as zeros. Returned as the NumPy
    structured scalar passed by value to the kernel. A map holds only an address and a
    shape, so it is cached by them (a new array at a reused address gets the same map)."""
    import ctypes

    import cupy

    swizzle = {32: 1, 64: 2, 128: 3}[2 * box_inner]  # CU_TENSOR_MAP_SWIZZLE_32B/64B/128B
    buf = ctypes.create_string_buffer(128 + 64)
    addr = (ctypes.addressof(buf) + 63) & ~63  # the driver wants 64-byte alignment
    u64, u32 = ctypes.c_uint64, ctypes.c_uint32
    res = _libcuda().cuTensorMapEncodeTiled(
        ctypes.c_void_p(addr), 1, 2, ctypes.c_void_p(ptr),  # UINT16, rank 2
        (u64 * 2)(inner, outer), (u64 * 1)(row_bytes), (u32 * 2)(box_inner, box_outer),
        (u32 * 2)(1, 1), 0, swizzle, 2, 0)  # no interleave, L2 promotion 128 B, zero fill
    if res != 0:
        raise RuntimeError(
            f"cuTensorMapEncodeTiled failed (CUresult {res}) for {outer} x {inner} elements "
            f"at {ptr:#x}, rows {row_bytes} bytes apart, boxes {box_outer} x {box_inner}")
    dtype = (cupy.make_aligned_dtype(_TMA_WORDS, alignment=64)
             if hasattr(cupy, "make_aligned_dtype") else _TMA_WORDS)
    return np.frombuffer(ctypes.string_at(addr, 128), dtype=dtype)[0]


@functools.cache
def _libcuda():
    import ctypes

    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuTensorMapEncodeTiled.restype = ctypes.c_int
    return lib


def _transposed_blocks(data):
    """(nnzb, b, b) 16-bit blocks, each transposed, in a new array (one kernel launch)."""
    import cupy

    nnzb, b = data.shape[0], data.shape[1]
    out = cupy.empty_like(data)
    if nnzb:
        data = cupy.ascontiguousarray(data)
        tiles = (b // min(b, 32)) ** 2
        get_kernel(transpose_config(b))((nnzb, tiles), (256,), (data, out))
    return out


def _padded_rows(a, inner_pad: int):
    """``a`` (rows, inner) as a row-major copy with zero columns up to ``inner_pad``."""
    import cupy

    buf = cupy.zeros((a.shape[0], inner_pad), a.dtype)
    buf[:, :a.shape[1]] = a
    return buf


def sdd(a, b_mat, like, out_data, alpha: float, beta: float, tf32: bool = False):
    import cupy

    s, bs, dtype = like._structure, like.blocksize, a.dtype
    inner = a.shape[1]
    data = out_data if out_data is not None else cupy.empty((s.nnzb, bs, bs), dtype)
    if s.nnzb == 0:
        return data
    if inner == 0:  # an empty sum: the product is exactly zero
        if beta == 0:
            data.fill(0)
        else:
            data *= dtype.type(beta)
        return data
    if tf32 and dtype == np.float32:
        # TF32 reads A[m][k] and B[n][k] (k contiguous, for ldmatrix): a as it is when its
        # rows are contiguous, else a copy; b transposed. The inner dimension is padded
        # with zeros to whole 16-byte copies where needed.
        inner_pad = -(-inner // 4) * 4
        a_src = a if (_rows_ok(a, 16) and inner_pad == inner) else _padded_rows(a, inner_pad)
        b_t = b_mat.T
        b_src = b_t if (_rows_ok(b_t, 16) and inner_pad == inner) else _padded_rows(b_t, inner_pad)
        cfg = sdd_config(dtype, bs, tf32=True)
        groups = _sdd_groups(s, cfg.group)
        args = (a_src, np.int64(a_src.strides[0] // 4), b_src, np.int64(b_src.strides[0] // 4),
                np.int32(inner_pad), groups, s.indices, data, np.float32(alpha),
                np.float32(beta))
    else:
        # Prefer reading a and b in place: a = x.T (rows of x contiguous) and b = dy are
        # the layer-gradient case; other layouts are taken when their rows can be
        # streamed with 16-byte copies (a whole number of them along the inner
        # dimension), else copied once.
        it = dtype.itemsize
        whole = inner % (16 // it) == 0
        if _rows_ok(a.T, 16):
            a_km, a_src = True, a.T
        elif _rows_ok(a, 16) and whole:
            a_km, a_src = False, a
        else:
            a_km, a_src = True, a.T.copy(order="C")
        if _rows_ok(b_mat, 16):
            b_nk, b_src = False, b_mat
        elif _rows_ok(b_mat.T, 16) and whole:
            b_nk, b_src = True, b_mat.T
        else:
            b_nk, b_src = False, b_mat.copy(order="C")
        half = _is_half(dtype)
        wcfg = (sdd_wgmma_config(dtype, bs) if half and a_km and not b_nk and _is_hopper()
                else None)
        tcfg = sdd_tile_config(dtype, bs) if a_km and not b_nk and wcfg is None else None
        if tcfg is not None and _sdd_tiled_pays(s, dtype, bs,
                                                 sdd_config(dtype, bs, a_km, b_nk).group):
            tiles, bmap = _sdd_tiles(s, *sdd_tile_shape(dtype, bs))
            nbr, nbc = s.block_shape
            get_kernel(tcfg)((tiles.shape[0],), (tcfg.threads,),
                             (a_src, np.int64(a_src.strides[0] // it), b_src,
                              np.int64(b_src.strides[0] // it), np.int32(inner), np.int32(nbr),
                              np.int32(nbc), tiles, bmap, data, np.float32(alpha),
                              np.float32(beta)), shared_mem=tcfg.smem)
            return data
        cfg = wcfg or sdd_config(dtype, bs, a_km, b_nk)
        groups = _sdd_groups(s, cfg.group)
        args = (a_src, np.int64(a_src.strides[0] // it), b_src,
                np.int64(b_src.strides[0] // it), np.int32(inner), groups, s.indices, data,
                _scalar(dtype, alpha), _scalar(dtype, beta))
    get_kernel(cfg)((groups.shape[0],), (cfg.threads,), args, shared_mem=cfg.smem)
    return data


def compile_options_for_nvcc() -> list[str]:
    """Flags the CI compile check passes to nvcc besides the target."""
    return ["-std=c++17", "-Xptxas", "-v", *os.environ.get("CUBSPARSE_NVCC_FLAGS", "").split()]
