"""Kernel instances: a tile of :mod:`.tiles` made into a C++ name expression and its
launch shape. The builders are pure and memoized; :func:`set_tiles` replaces table
entries (tuning, tests) and clears every cache that depends on them."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from .. import _dtypes
from .tiles import (
    DSD_GROUP,
    DSD_SIMT,
    DSD_SIMT_SMALL,
    DSD_STREAM,
    DSD_TC,
    DSD_TC_SMALL,
    SDD_SIMT,
    SDD_SIMT_F64,
    SDD_STREAM,
    SDD_STREAM_MAX_INNER,
    SDD_TC,
    SDD_TILE,
    SDD_TILE_SIMT,
    STREAM_MAX_ROWS,
    TABLES,
    WGMMA_DSD,
    WGMMA_DSD_CLUSTER,
    WGMMA_DSD_PAIR,
    WGMMA_DSD_PANEL,
    WGMMA_DSD_PANEL_TMA,
    WGMMA_DSD_TALL,
    WGMMA_DSD_UNION,
    WGMMA_DSD_WS,
    WGMMA_SDD,
    WGMMA_SDD_PAIR,
    WGMMA_SDD_PANEL,
    WGMMA_SDD_SHORT,
    WGMMA_SDD_TMA,
    WGMMA_SDD_WIDE,
)

TC_TAGS = {"float16": "F16", "bfloat16": "BF16"}
SIMT_TYPES = {"float32": "float", "float64": "double"}
#: The kernel sources, ``kernels/<family>.cu``: one kernel schedule per file, named after
#: its kernel (``dense.cu`` holds the dense path's scatter and gather).
FAMILIES = ("dsd_tc", "dsd_group_tc", "dsd_stream", "dsd_simt", "sdd_tc", "sdd_tile_tc",
            "sdd_stream", "sdd_simt", "sdd_tile_simt", "dsd_wgmma_single", "dsd_wgmma_ws",
            "dsd_wgmma_tma", "dsd_wgmma_union", "transpose_blocks", "sdd_wgmma",
            "sdd_wgmma_tma", "dense")
#: Groups of kernels for :func:`all_configs` (what ``warmup`` compiles per op).
GROUPS = ("dsd", "sdd", "dsd_sm90", "sdd_sm90", "dense")

#: Bumped by every :func:`set_tiles`; the plan caches key on it.
GENERATION = [0]


@dataclasses.dataclass(frozen=True)
class KernelConfig:
    """One kernel instantiation and how to launch it."""

    family: str  # the .cu file
    name: str  # the C++ name expression, e.g. "dsd_tc<F16,32,256,32,8,1,4,false>"
    threads: int
    smem: int  # dynamic shared memory, bytes
    rows_per_cta: int  # dsd: rows of X per CTA (or per tile of a persistent kernel)
    group: int  # output blocks per CTA (dsd) or blocks per CTA (sdd)
    arch: str | None = None  # a required target such as "sm_90a"; None: the device's own
    persistent: int = 0  # CTAs per SM of a persistent kernel (grid sized to the device)
    tma: bool = False  # takes its operands as TMA tensor maps (dsd_wgmma_tma, sdd_wgmma_tma)
    block_rows: int = 1  # sdd: block rows per group (2: the paired TMA tile; panels 128 / b)
    cluster: int = 1  # CTAs per thread-block cluster (the grid is a multiple)
    panel: bool = False  # dense panels of several blocks (absent ones multiplied as zeros)

    @property
    def kernel(self) -> str:
        """The template's name, e.g. ``dsd_wgmma_tma``."""
        return self.name.split("<", 1)[0]


def _instance(expr: str, *launch) -> KernelConfig:
    """The KernelConfig of ``expr``, compiled from the file named after its kernel."""
    return KernelConfig(expr.split("<", 1)[0], expr, *launch)


def dtype_name(dtype) -> str:
    """A dtype's name; a plain string passes through (bfloat16 without ml_dtypes)."""
    return dtype if isinstance(dtype, str) else np.dtype(dtype).name


def _b(flag: bool) -> str:
    return "true" if flag else "false"


def _tc_smem(bm, bn, bk, stages, a_km, b_nk, esize=2) -> int:
    pad = 16 // esize  # rows are padded by 16 bytes
    a = (bk * (bm + pad)) if a_km else (bm * (bk + pad))
    b = (bn * (bk + pad)) if b_nk else (bk * (bn + pad))
    return stages * (a + b) * esize


@functools.cache
def dsd_config(dtype, b: int, trans: bool, tf32: bool = False,
               small: bool = False) -> KernelConfig:
    """The mma.sync (float16, bfloat16, TF32) or CUDA-core dsd for ``X @ op(W)``.

    TF32 reads W's blocks as [n][k]: the transposed kernel serves both orientations (the
    caller transposes the blocks for X @ W). ``small``: the tiles for at most SMALL_ROWS
    rows of X."""
    name = dtype_name(dtype)
    if name in TC_TAGS or (tf32 and name == "float32"):
        tag, esize = (TC_TAGS[name], 2) if name in TC_TAGS else ("TF32", 4)
        trans = trans or tag == "TF32"
        t = (DSD_TC_SMALL if small else DSD_TC)[b]
        expr = f"dsd_tc<{tag},{b},{t.rows},{t.k},{t.warps_m},{t.warps_n},{t.stages},{_b(trans)}>"
        smem = _tc_smem(t.rows, b, t.k, t.stages, False, trans, esize)
        return _instance(expr, t.warps_m * t.warps_n * 32, smem, t.rows, 1)
    t = (DSD_SIMT_SMALL if small else DSD_SIMT)[b]
    esize = np.dtype(name).itemsize
    expr = (f"dsd_simt<{SIMT_TYPES[name]},{b},{t.rows},{t.rows_per_thread},"
            f"{t.cols_per_thread},{t.k},{t.stages},{_b(trans)}>")
    smem = _tc_smem(t.rows, b, t.k, t.stages, False, trans, esize)
    threads = (t.rows // t.rows_per_thread) * (b // t.cols_per_thread)
    return _instance(expr, threads, smem, t.rows, 1)


@functools.cache
def sdd_config(dtype, b: int, a_km: bool = True, b_nk: bool = False,
               tf32: bool = False) -> KernelConfig:
    """The grouped sdd; ``a_km``/``b_nk`` pick the operand layouts (TF32 always reads
    A[m][k] and B[n][k])."""
    name = dtype_name(dtype)
    if name in TC_TAGS or (tf32 and name == "float32"):
        tag, esize = (TC_TAGS[name], 2) if name in TC_TAGS else ("TF32", 4)
        if tag == "TF32":
            a_km, b_nk = False, True
        t = SDD_TC[b]
        expr = (f"sdd_tc<{tag},{b},{t.rows},{t.k},{t.warps_m},{t.warps_n},{t.stages},"
                f"{_b(a_km)},{_b(b_nk)}>")
        smem = _tc_smem(max(b, 16), t.rows * b, t.k, t.stages, a_km, b_nk, esize)
        return _instance(expr, t.warps_m * t.warps_n * 32, smem, 0, t.rows)
    t = (SDD_SIMT_F64 if name == "float64" else SDD_SIMT)[b]
    expr = (f"sdd_simt<{SIMT_TYPES[name]},{b},{t.rows},{t.rows_per_thread},"
            f"{t.cols_per_thread},{t.k},{t.stages},{_b(a_km)},{_b(b_nk)}>")
    smem = _tc_smem(b, t.rows * b, t.k, t.stages, a_km, b_nk, np.dtype(name).itemsize)
    threads = (b // t.rows_per_thread) * (t.rows * b // t.cols_per_thread)
    return _instance(expr, threads, smem, 0, t.rows)


@functools.cache
def sdd_tile_config(dtype, b: int) -> KernelConfig | None:
    """The tiled small-block sdd (x and dy read as rows), or None where unused; its group
    is the tile's block rows times block columns."""
    name = dtype_name(dtype)
    if name == "float32" and SDD_TILE_SIMT.get(b) is not None:
        t = SDD_TILE_SIMT[b]
        tr, ts = t.block_rows, t.block_cols
        lds = (tr * b + tr * b // 8) + (ts * b + ts * b // 8)  # 16 bytes pad per 128
        return _instance(f"sdd_tile_simt<{b},{tr},{ts},{t.k},{t.stages}>",
                         (tr * b // 8) * (ts * b // 8), t.stages * t.k * lds * 4, 0, tr * ts)
    t = SDD_TILE.get(b)
    if name not in TC_TAGS or t is None:
        return None
    tr, ts = t.block_rows, t.block_cols
    expr = (f"sdd_tile_tc<{TC_TAGS[name]},{b},{tr},{ts},{t.k},{t.warps_m},{t.warps_n},"
            f"{t.stages}>")
    smem = _tc_smem(tr * b, ts * b, t.k, t.stages, True, False)
    return _instance(expr, t.warps_m * t.warps_n * 32, smem, 0, tr * ts)


def sdd_stream_key(b: int, inner: int) -> tuple | None:
    """The key ``(b, rows)`` of the short-reduction sdd's tile (:data:`SDD_STREAM`) for a
    reduction of ``inner`` rows, or None where it has none."""
    return _rows_key(SDD_STREAM, SDD_STREAM_MAX_INNER, b, inner)


def sdd_stream_tile(b: int, inner: int):
    """The short-reduction sdd's tile for a reduction of ``inner`` rows, or None."""
    key = sdd_stream_key(b, inner)
    return None if key is None else SDD_STREAM[key]


@functools.cache
def sdd_stream_config(dtype, b: int, inner: int, arch: int = 90) -> KernelConfig | None:
    """The short-reduction sdd (x and dy read as rows) for ``inner`` rows, or None where
    unused; its group is the chunk's block columns: the tile's, halved where one CTA would
    need more shared memory than compute capability ``arch`` gives it (the b = 32 tiles
    past 16 rows take 145-194 KB, more than sm_80, 86 and 89 have)."""
    name = dtype_name(dtype)
    key = sdd_stream_key(b, inner)
    if name not in TC_TAGS or key is None or SDD_STREAM[key] is None:
        return None
    t = SDD_STREAM[key]
    kp, chunk, warps = key[1], t.chunk, t.warps

    def smem(c):  # dY's chunk, the warps' slices of X
        return kp * (c * b + 8) * 2 + warps * kp * b * 2

    most = SMEM_PER_BLOCK.get(arch, min(SMEM_PER_BLOCK.values())) - 512  # as smem_ctas
    while chunk > 1 and smem(chunk) > most:
        chunk //= 2
    return _instance(f"sdd_stream<{TC_TAGS[name]},{b},{kp},{chunk},{warps}>", warps * 32,
                     smem(chunk), 0, chunk)


def sdd_tile_shape(dtype, b: int) -> tuple[int, int]:
    """(block rows, block columns) of the tiled sdd kernel's tile for ``dtype``."""
    t = SDD_TILE_SIMT[b] if dtype_name(dtype) == "float32" else SDD_TILE[b]
    return t.block_rows, t.block_cols


@functools.cache
def group_config(dtype, b: int, trans: bool) -> KernelConfig | None:
    """The grouped small-block dsd (mma.sync), or None where unused."""
    name = dtype_name(dtype)
    t = DSD_GROUP.get(b)
    if name not in TC_TAGS or t is None:
        return None
    expr = (f"dsd_group_tc<{TC_TAGS[name]},{b},{t.group},{t.rows},{t.warps_m},{t.warps_n},"
            f"{t.entries},{t.stages},{_b(trans)}>")
    smem = t.stages * t.entries * (t.rows + t.group * b) * b * 2
    return _instance(expr, t.warps_m * t.warps_n * 32, smem, t.rows, t.group)


#: Shared memory one CTA may opt in to and one SM holds, by compute capability (bytes, the
#: CUDA C++ programming guide's technical specifications); other devices are taken to have
#: the least of these. Each resident CTA also takes 1 KiB of the SM's.
SMEM_PER_BLOCK = {80: 166912, 86: 101376, 87: 166912, 89: 101376, 90: 232448}
SMEM_PER_SM = {80: 167936, 86: 102400, 87: 167936, 89: 102400, 90: 233472}


def smem_ctas(cfg: KernelConfig, arch: int, static: int = 512) -> int:
    """How many CTAs of ``cfg`` (its dynamic shared memory plus ``static`` bytes) one SM of
    compute capability ``arch`` holds at once; 0 where one CTA asks for more than it may."""
    need = cfg.smem + static
    if need > SMEM_PER_BLOCK.get(arch, min(SMEM_PER_BLOCK.values())):
        return 0
    return SMEM_PER_SM.get(arch, min(SMEM_PER_SM.values())) // (need + 1024)


def _rows_key(table, most: int, b: int, n: int) -> tuple | None:
    """The key ``(b, rows)`` of ``table`` (keyed by block size and rows up to) for ``n`` rows
    (at most ``most``): the fewest rows that hold ``n``, or None where there is none."""
    if not 0 < n <= most:
        return None
    rows = min((r for bb, r in table if bb == b and r >= n), default=None)
    return None if rows is None else (b, rows)


def stream_key(b: int, n: int) -> tuple | None:
    """The key ``(b, rows)`` of the small-N dsd's tile (:data:`DSD_STREAM`) for ``n`` rows
    of X at block size ``b``, or None where it has none."""
    return _rows_key(DSD_STREAM, STREAM_MAX_ROWS, b, n)


def stream_tile(b: int, n: int):
    """The small-N dsd's tile for ``n`` rows of X at block size ``b``, or None."""
    key = stream_key(b, n)
    return None if key is None else DSD_STREAM[key]


def stream_ctas(b: int, n: int, arch: int) -> int:
    """CTAs of the small-N dsd's tile for ``n`` rows an SM of ``arch`` holds at once (0:
    none fits), counting its static shared memory too: the stages' records and the run's
    chunk bounds (``desc`` and ``bounds`` in dsd_stream.cu)."""
    t = stream_tile(b, n)
    cfg = stream_config("float16", b, False, n)  # the dtype and product leave it the same
    return smem_ctas(cfg, arch, t.stages * 16 + (t.max_run + 1) * 4) if t else 0


@functools.cache
def stream_config(dtype, b: int, trans: bool, n: int) -> KernelConfig | None:
    """The small-N dsd with X in shared memory for ``n`` rows of X, or None where unused."""
    name = dtype_name(dtype)
    t = stream_tile(b, n)
    if name not in TC_TAGS or t is None:
        return None
    mt = -(-n // 16)
    expr = (f"dsd_stream<{TC_TAGS[name]},{b},{mt},{t.chunk},{t.group},{t.entries},{t.stages},"
            f"{t.max_run},{_b(trans)}>")
    x_bytes = t.stages * mt * 16 * (t.chunk * b + 8) * 2  # X's rows padded by 16 bytes
    stage_bytes = t.entries * (b * b * 2 + 4) + (t.group + 1) * 4  # blocks, their indices
    return _instance(expr, 256, x_bytes + t.stages * stage_bytes, mt * 16, t.group)


@functools.cache
def stream_finish_config(dtype) -> KernelConfig:
    """Adds ``dsd_stream``'s partial products in order, with alpha and beta."""
    return KernelConfig("dsd_stream", f"stream_finish<{TC_TAGS[dtype_name(dtype)]}>", 256, 0,
                        0, 1)


def _union_instance(tag: str, b: int, u, kn: bool, panel: bool) -> KernelConfig:
    expr = (f"dsd_wgmma_union<{tag},{b},{u.group},{u.m_tiles},{u.consumer_wgs},"
            f"{u.stages},{_b(kn)},{u.ctas_per_sm}"
            + (f",true,{u.producers}>" if panel else ">"))
    smem = u.stages * (64 * u.m_tiles + u.group * b) * 128 + 1024
    return KernelConfig("dsd_wgmma_union", expr, (u.consumer_wgs + u.producers) * 128, smem,
                        64 * u.m_tiles, u.group, "sm_90a", u.ctas_per_sm, panel=panel)


@functools.cache
def wgmma_config(dtype, b: int, kn: bool = False, union: bool = True,
                 tall: bool = False, panel: bool = False, cluster: bool = False,
                 pair: bool = False) -> KernelConfig | None:
    """The Hopper wgmma dsd, or None where no wgmma kernel serves ``b``.

    ``kn``: X @ W with W's blocks read as stored ([k][n]). ``union=False``: the kernel
    used where the union kernel does not pay. ``tall``: the WGMMA_DSD_TALL tile, where
    one is set for ``b``. ``panel``: the kernel multiplying dense panels (W's blocks read
    transposed): the TMA kernel's (WGMMA_DSD_PANEL_TMA) where one is set for ``b``, else the
    union kernel's (WGMMA_DSD_PANEL), else None.
    ``cluster``: the WGMMA_DSD_CLUSTER tile (the kernel ``dsd_wgmma_tma_mc``), or None
    where none is set. ``pair``: the WGMMA_DSD_PAIR tile (two output blocks per tile), or
    None where none is set."""
    name = dtype_name(dtype)
    if name not in TC_TAGS:
        return None
    tag = TC_TAGS[name]
    if panel:
        p, u = WGMMA_DSD_PANEL_TMA.get(b), WGMMA_DSD_PANEL.get(b)
        if p is None:
            return None if u is None else _union_instance(tag, b, u, False, True)
        kn = False
    elif WGMMA_DSD.get(b) is None:
        return None
    elif union and WGMMA_DSD_UNION.get(b) is not None:
        return _union_instance(tag, b, WGMMA_DSD_UNION[b], kn, False)
    elif cluster or pair:
        p = (WGMMA_DSD_PAIR if pair else WGMMA_DSD_CLUSTER).get(b)
        if p is None:
            return None
    else:
        p = (tall and WGMMA_DSD_TALL.get(b)) or WGMMA_DSD_WS.get(b)
    if p is not None:
        if panel and not (p.tma and p.rows == 0 and p.cols > 1 and b <= 32 and p.m_tiles == 1):
            raise ValueError(f"the TMA kernel's panels take b <= 32, TMA copies, X's rows as M "
                             f"(rows = 0), cols > 1 and m_tiles = 1, got {p} at b = {b}")
        if not panel and (p.cluster > 1 or p.cols > 1) and not (p.tma and p.rows > 0):
            raise ValueError(f"clusters and tiles of several blocks need TMA copies and X's rows "
                             f"as N (tma=True, rows > 0), got {p}")
        rows = (p.tma and p.rows) or 64 * p.m_tiles * p.warpgroups
        expr = (f"{tag},{b},{p.m_tiles},{p.warpgroups},{p.stages},{_b(kn)},{p.ctas_per_sm},"
                f"{p.inflight}")
        mc = "_mc" if p.cluster > 1 else ""  # the clustered entry point of the same file
        cols = f",{p.cols}" if p.cols > 1 else ""
        expr = (f"dsd_wgmma_tma{mc}<{expr},{p.rows if p.tma else 0}{cols}>" if p.tma
                else f"dsd_wgmma_ws<{expr}>")
        smem = p.stages * (rows + b * p.cols) * 128 + 1024  # + slack: tiles on 1 KiB
        threads = p.warpgroups * 128 + (32 if p.tma else 128)  # a producer warp or warpgroup
        family = "dsd_wgmma_tma" if p.tma else "dsd_wgmma_ws"
        return KernelConfig(family, expr, threads, smem, rows, p.cols, "sm_90a",
                            p.ctas_per_sm, p.tma, 1, p.cluster, panel)
    t = WGMMA_DSD[b]
    rows = 64 * t.m_tiles * t.warpgroups
    expr = f"dsd_wgmma_single<{tag},{b},{t.m_tiles},{t.warpgroups},{t.stages},{_b(kn)}>"
    smem = t.stages * (rows + b) * 128 + 1024
    return _instance(expr, t.warpgroups * 128, smem, rows, 1, "sm_90a")


@functools.cache
def sdd_wgmma_config(dtype, b: int, short: bool = False, k: int | None = None,
                     wide: bool = False, tma: bool = False,
                     pair: bool = False, panel: bool = False) -> KernelConfig | None:
    """The Hopper wgmma sdd (X.T @ dY with both read as rows), or None where unused;
    ``short``: the tile for short reductions, with the CTAs per SM of a persistent grid;
    ``k``: slices of that depth instead of the tile's; ``wide``: the tile for a wide W;
    ``tma``: the persistent kernel with TMA copies (as many CTAs per SM as shared memory
    holds; its tiles are unflipped, 64 deep); ``pair``: that kernel's paired tile, two
    block rows per group; ``panel``: that kernel's dense panels for small blocks (128 / b
    block rows by ``group`` block columns per tile)."""
    name = dtype_name(dtype)
    if tma or pair or panel:
        t = (WGMMA_SDD_PANEL if panel else WGMMA_SDD_PAIR if pair else WGMMA_SDD_TMA).get(b)
        if name not in TC_TAGS or t is None:
            return None
        if t.flip or t.k != 64:
            raise ValueError(f"the TMA sdd runs unflipped tiles 64 deep, got {t}")
        rows = 128 // b if panel else 2 if pair else 1
        expr = (f"sdd_wgmma_tma<{TC_TAGS[name]},{b},{t.group},{t.wg_m},{t.wg_n},"
                f"{t.stages},{rows}" + (",true>" if panel else ">"))
        smem = t.stages * (rows * b + t.group * b) * 64 * 2 + 1024
        return _instance(expr, t.wg_m * t.wg_n * 128 + 32, smem, 0, t.group, "sm_90a",
                         ctas_per_sm(smem), True, rows, 1, panel)
    t = (WGMMA_SDD_SHORT if short else WGMMA_SDD_WIDE if wide else WGMMA_SDD).get(b)
    if name not in TC_TAGS or t is None:
        return None
    k = k or t.k
    expr = (f"sdd_wgmma<{TC_TAGS[name]},{b},{t.group},{t.wg_m},{t.wg_n},{t.stages},"
            f"{_b(t.flip)},{k}>")
    smem = t.stages * (b + t.group * b) * k * 2 + 1024
    return _instance(expr, t.wg_m * t.wg_n * 128, smem, 0, t.group, "sm_90a",
                     ctas_per_sm(smem) if short else 0)


def ctas_per_sm(smem: int) -> int:
    """CTAs of a persistent kernel per SM: as many as fit an SM's 228 KiB of shared memory
    (1 KiB of it reserved per CTA). Where registers allow fewer at once, the grid runs in
    more than one wave (the measured tiles were chosen with it so)."""
    return max(1, (228 << 10) // (smem + 1024))


@functools.cache
def transpose_config(b: int) -> KernelConfig:
    """Transposes every block of a 16-bit W (X @ W on a wgmma kernel reading [n][k])."""
    return _instance(f"transpose_blocks<{b}>", 256, 0, 0, 1, "sm_90a")


@functools.cache
def panel_copy_config(b: int, transpose: bool) -> KernelConfig:
    """Gathers W's blocks into the TMA panel kernel's dense panels, [n][k], zeros for absent
    members (transposed for X @ W)."""
    return KernelConfig("transpose_blocks", f"panel_blocks<{b},{_b(transpose)}>", 256, 0, 0, 1,
                        "sm_90a")


_STORAGE = {"float16": "u16", "bfloat16": "u16", "float32": "float", "float64": "double"}
_VALUE_TAGS = {**TC_TAGS, "float32": "F32", "float64": "F64"}


@functools.cache
def scatter_config(dtype, b: int) -> KernelConfig:
    """Writes W's blocks into a dense matrix (the dense path)."""
    return KernelConfig("dense", f"scatter_blocks<{_STORAGE[dtype_name(dtype)]},{b}>",
                        256, 0, 0, 1)


@functools.cache
def fill_config(dtype, b: int) -> KernelConfig:
    """Writes the whole dense matrix of W, zeros where it has no block (the dense path)."""
    return KernelConfig("dense", f"fill_dense<{_STORAGE[dtype_name(dtype)]},{b}>",
                        256, 0, 0, 1)


@functools.cache
def gather_config(dtype, b: int) -> KernelConfig:
    """Reads W's blocks out of a dense product, with alpha and beta (the dense path)."""
    return KernelConfig("dense", f"gather_blocks<{_VALUE_TAGS[dtype_name(dtype)]},{b}>",
                        256, 0, 0, 1)


def set_tiles(**tables) -> None:
    """Replace tile-table entries, ``set_tiles(wgmma_ws={64: PersistentTile(...)})``, for
    tuning experiments and tests (plain tuples are converted to the table's record; None
    turns a family off for that block size), and clear every cache that depends on them.
    Without arguments it only clears the caches."""
    for key, entries in tables.items():
        table, record = TABLES[key]
        for b, tile in (entries or {}).items():
            table[b] = None if tile is None else record(*tile)
    for f in (dsd_config, sdd_config, group_config, stream_config, wgmma_config,
              sdd_wgmma_config, sdd_tile_config, sdd_stream_config):
        f.cache_clear()
    GENERATION[0] += 1


def all_configs(dtypes=None, blocksizes=None, groups=None) -> list[KernelConfig]:
    """Every instantiation the backend can launch (what ``warmup`` and CI compile), of the
    ``groups`` (default :data:`GROUPS`)."""
    names = [d if d == "bfloat16" else _dtypes.as_dtype(d).name
             for d in (dtypes or _dtypes.SUPPORTED_DTYPES)]
    if "bfloat16" not in names and dtypes is None:
        names.append("bfloat16")  # compiled even where ml_dtypes is missing
    out = []
    for group in groups or GROUPS:
        for dt in names:
            for b in blocksizes or _dtypes.BLOCK_SIZES:
                out += _family_configs(group, dt, b)
    return list(dict.fromkeys(out))


def _family_configs(fam: str, dt: str, b: int) -> list[KernelConfig]:
    tf32 = dt == "float32"  # float32 also has the opt-in TF32 kernels
    out = []
    if fam == "dsd":
        for n in (16, 32, 48, 64):
            if stream_config(dt, b, False, n) is not None:
                out += [stream_config(dt, b, t, n) for t in (False, True)]
                out += [stream_finish_config(dt)]
        if group_config(dt, b, False) is not None:
            out += [group_config(dt, b, t) for t in (False, True)]
        for small in (False, True):
            out += [dsd_config(dt, b, t, False, small) for t in (False, True)]
            out += [dsd_config(dt, b, True, True, small)] if tf32 else []
    elif fam == "dsd_sm90":
        pcfg = wgmma_config(dt, b, panel=True)
        if pcfg is not None:
            out += [pcfg, transpose_config(b)]
            if pcfg.tma:
                out += [panel_copy_config(b, t) for t in (False, True)]
        if wgmma_config(dt, b) is not None:
            for union in (True, False):  # the union kernel and its fallback
                wcfg = wgmma_config(dt, b, union=union)
                out += [wcfg, transpose_config(b), wgmma_config(dt, b, True, union)]
                if not union and WGMMA_DSD_TALL.get(b) is not None:
                    out += [wgmma_config(dt, b, kn, False, True) for kn in (False, True)]
                for kw in ({"cluster": True}, {"pair": True}):
                    if not union and wgmma_config(dt, b, False, False, **kw) is not None:
                        out += [wgmma_config(dt, b, kn, False, **kw) for kn in (False, True)]
    elif fam == "sdd_sm90":
        if sdd_wgmma_config(dt, b, panel=True) is not None:
            out.append(sdd_wgmma_config(dt, b, panel=True))
        if sdd_wgmma_config(dt, b) is not None:
            out.append(sdd_wgmma_config(dt, b))
            for kw in ({"wide": True}, {"tma": True}, {"pair": True}):
                if sdd_wgmma_config(dt, b, **kw) is not None:
                    out.append(sdd_wgmma_config(dt, b, **kw))
            if sdd_wgmma_config(dt, b, True) is not None:
                out += [sdd_wgmma_config(dt, b, True), sdd_wgmma_config(dt, b, True, 32)]
    elif fam == "sdd":
        out += [sdd_config(dt, b, a, bn) for a in (True, False) for bn in (False, True)]
        out += [sdd_tile_config(dt, b)] if sdd_tile_config(dt, b) is not None else []
        stream = (sdd_stream_config(dt, b, rows) for bb, rows in SDD_STREAM if bb == b)
        out += [cfg for cfg in stream if cfg is not None]
        out += [sdd_config(dt, b, tf32=True)] if tf32 else []
    elif fam == "dense":
        out += [scatter_config(dt, b), fill_config(dt, b), gather_config(dt, b)]
    return out
