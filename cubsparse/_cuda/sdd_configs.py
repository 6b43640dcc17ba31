"""The sdd kernels' instances (``(A @ B)`` sampled on W's blocks): mma.sync, CUDA-core,
tiled, the short-reduction stream kernel, and Hopper's wgmma kernels, each from its tile
table in :mod:`.tiles`."""

from __future__ import annotations

import numpy as np

from .configs import (
    SIMT_TYPES,
    SMEM_PER_BLOCK,
    TC_TAGS,
    KernelConfig,
    _b,
    _instance,
    _rows_key,
    _tc_smem,
    ctas_per_sm,
    dtype_name,
    memoized,
)
from .tiles import (
    SDD_SIMT,
    SDD_SIMT_F64,
    SDD_STREAM,
    SDD_STREAM_LEAST_PRE_SM90,
    SDD_TC,
    SDD_TILE,
    SDD_TILE_SIMT,
    WGMMA_SDD,
    WGMMA_SDD_PAIR,
    WGMMA_SDD_PANEL,
    WGMMA_SDD_REST,
    WGMMA_SDD_SHORT,
    WGMMA_SDD_TMA,
    WGMMA_SDD_WIDE,
)


@memoized
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


@memoized
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
    return _rows_key(SDD_STREAM, b, inner)


def sdd_stream_tile(b: int, inner: int, arch: int = 90):
    """The short-reduction sdd's tile for a reduction of ``inner`` rows, or None; below
    sm_90 with the least density it had before Hopper's short tile sped up
    (:data:`SDD_STREAM_LEAST_PRE_SM90`)."""
    key = sdd_stream_key(b, inner)
    if key is None:
        return None
    tile = SDD_STREAM[key]
    if arch < 90 and key in SDD_STREAM_LEAST_PRE_SM90:
        tile = tile._replace(least_density=SDD_STREAM_LEAST_PRE_SM90[key], least_blocks=0)
    return tile


@memoized
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


@memoized
def sdd_wgmma_config(dtype, b: int, short: bool = False, k: int | None = None,
                     wide: bool = False, tma: bool = False,
                     pair: bool = False, panel: bool = False,
                     rest: bool = False) -> KernelConfig | None:
    """The Hopper wgmma sdd (X.T @ dY with both read as rows), or None where unused;
    ``short``: the tile for short reductions, with the CTAs per SM of a persistent grid;
    ``k``: slices of that depth instead of the tile's; ``wide``: the tile for a wide W;
    ``tma``: the persistent kernel with TMA copies (as many CTAs per SM as shared memory
    holds; its tiles are unflipped, 64 deep); ``pair``: that kernel's paired tile, two
    block rows per group; ``panel``: that kernel's dense panels for small blocks (128 / b
    block rows by ``group`` block columns per tile); ``rest``: the tile of the
    second part of the weight gradient in two parts (``sdd_wgmma_rest``, its own tile:
    groups listed, the reduction split)."""
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
    t = (WGMMA_SDD_REST if rest else WGMMA_SDD_SHORT if short else WGMMA_SDD_WIDE if wide
         else WGMMA_SDD).get(b)
    if name not in TC_TAGS or t is None:
        return None
    k = k or t.k
    kernel = "sdd_wgmma_rest" if rest else "sdd_wgmma"
    expr = (f"{kernel}<{TC_TAGS[name]},{b},{t.group},{t.wg_m},{t.wg_n},{t.stages},"
            f"{_b(t.flip)},{k}>")
    smem = t.stages * (b + t.group * b) * k * 2 + 1024
    return _instance(expr, t.wg_m * t.wg_n * 128, smem, 0, t.group, "sm_90a",
                     ctas_per_sm(smem) if short else 0)
