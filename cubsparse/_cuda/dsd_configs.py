"""The dsd kernels' instances (``Y = X @ op(W)``): mma.sync, CUDA-core, the small-N stream
kernel, and Hopper's wgmma kernels, each from its tile table in :mod:`.tiles`."""

from __future__ import annotations

import numpy as np

from .configs import (
    SIMT_TYPES,
    TC_TAGS,
    KernelConfig,
    _b,
    _instance,
    _rows_key,
    _tc_smem,
    dtype_name,
    memoized,
    smem_ctas,
)
from .tiles import (
    DSD_GROUP,
    DSD_SIMT,
    DSD_SIMT_SMALL,
    DSD_STREAM,
    DSD_TC,
    DSD_TC_SMALL,
    WGMMA_DSD,
    WGMMA_DSD_CLUSTER,
    WGMMA_DSD_PAIR,
    WGMMA_DSD_PANEL,
    WGMMA_DSD_PANEL_TMA,
    WGMMA_DSD_SMALL,
    WGMMA_DSD_TALL,
    WGMMA_DSD_UNION,
    WGMMA_DSD_WS,
)


@memoized
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


@memoized
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


def stream_key(b: int, n: int) -> tuple | None:
    """The key ``(b, rows)`` of the small-N dsd's tile (:data:`DSD_STREAM`) for ``n`` rows
    of X at block size ``b``, or None where it has none."""
    return _rows_key(DSD_STREAM, b, n)


def small_rows(b: int, n: int) -> int:
    """Rows of the small-N TMA tile (:data:`WGMMA_DSD_SMALL`) that holds ``n`` rows of X at
    block size ``b``, or 0 where none does."""
    key = _rows_key(WGMMA_DSD_SMALL, b, n)
    return 0 if key is None or WGMMA_DSD_SMALL[key] is None else key[1]


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


@memoized
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


def _union_instance(tag: str, b: int, u, kn: bool, panel: bool) -> KernelConfig:
    expr = (f"dsd_wgmma_union<{tag},{b},{u.group},{u.m_tiles},{u.consumer_wgs},"
            f"{u.stages},{_b(kn)},{u.ctas_per_sm}"
            + (f",true,{u.producers}>" if panel else ">"))
    smem = u.stages * (64 * u.m_tiles + u.group * b) * 128 + 1024
    return KernelConfig("dsd_wgmma_union", expr, (u.consumer_wgs + u.producers) * 128, smem,
                        64 * u.m_tiles, u.group, "sm_90a", u.ctas_per_sm, panel=panel)


@memoized
def wgmma_config(dtype, b: int, kn: bool = False, union: bool = True,
                 tall: bool = False, panel: bool = False, cluster: bool = False,
                 pair: bool = False, whole: bool = False, small: int = 0) -> KernelConfig | None:
    """The Hopper wgmma dsd, or None where no wgmma kernel serves ``b``.

    ``kn``: X @ W with W's blocks read as stored ([k][n]). ``union=False``: the kernel
    used where the union kernel does not pay. ``tall``: the WGMMA_DSD_TALL tile, where
    one is set for ``b``. ``panel``: the kernel multiplying dense panels (W's blocks read
    transposed): the TMA kernel's (WGMMA_DSD_PANEL_TMA) where one is set for ``b``, else the
    union kernel's (WGMMA_DSD_PANEL), else None.
    ``cluster``: the WGMMA_DSD_CLUSTER tile (the kernel ``dsd_wgmma_tma_mc``), or None
    where none is set. ``pair``: the WGMMA_DSD_PAIR tile (two output blocks per tile), or
    None where none is set. ``whole`` (with ``panel``): the TMA kernel's panels over lists
    of whole 64-column slices of X (:func:`.worklists.lists`), or None where the panels are
    the union kernel's. ``small`` > 0: the WGMMA_DSD_SMALL tile for that many rows of X,
    or None where none holds them (:func:`small_rows`)."""
    name = dtype_name(dtype)
    if name not in TC_TAGS:
        return None
    tag = TC_TAGS[name]
    if panel:
        p, u = WGMMA_DSD_PANEL_TMA.get(b), WGMMA_DSD_PANEL.get(b)
        if p is None:
            return None if u is None or whole else _union_instance(tag, b, u, False, True)
        kn = False
    elif whole:
        raise ValueError("whole slices of X are a form of the dense panels: pass panel=True")
    elif WGMMA_DSD.get(b) is None:
        return None
    elif union and WGMMA_DSD_UNION.get(b) is not None:
        return _union_instance(tag, b, WGMMA_DSD_UNION[b], kn, False)
    elif small:
        key = _rows_key(WGMMA_DSD_SMALL, b, small)
        p = None if key is None else WGMMA_DSD_SMALL[key]
        if p is None:
            return None
        if not (p.tma and (p.rows > 0 or b == 32) and p.cluster == 1 and p.cols == 1):
            raise ValueError(f"the small-N tiles take TMA copies, X's rows as N (rows > 0; as M "
                             f"at b = 32), one CTA a cluster and one block a tile, got {p} at "
                             f"b = {b}")
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
        epi = p.epilogue
        if epi and not ((p.tma and p.rows > 0 and epi % 16 == 0 and p.rows % epi == 0)
                        or (panel and epi == 64 and p.warpgroups <= 2 and b * p.cols % 64 == 0)):
            raise ValueError(f"the epilogue's TMA store needs TMA copies and X's rows as N, in "
                             f"rounds of 16k rows dividing them, or panels in boxes of 64 x 64 "
                             f"(epilogue = 64, at most two consumer warpgroups, whole 64-column "
                             f"boxes), got {p} at b = {b}")
        rows = (p.tma and p.rows) or 64 * p.m_tiles * p.warpgroups
        expr = (f"{tag},{b},{p.m_tiles},{p.warpgroups},{p.stages},{_b(kn)},{p.ctas_per_sm},"
                f"{p.inflight}")
        mc = "_mc" if p.cluster > 1 else ""  # the clustered entry point of the same file
        cols = f",{p.cols}" if p.cols > 1 or epi or whole else ""
        cols += f",{epi}" if epi or whole else ""
        cols += ",true" if whole else ""
        expr = (f"dsd_wgmma_tma{mc}<{expr},{p.rows if p.tma else 0}{cols}>" if p.tma
                else f"dsd_wgmma_ws<{expr}>")
        smem = p.stages * (rows + b * p.cols) * 128 + 1024  # + slack: tiles on 1 KiB
        smem += p.warpgroups * epi * 128  # the TMA store's buffers, 128 bytes a row each
        threads = p.warpgroups * 128 + (32 if p.tma else 128)  # a producer warp or warpgroup
        family = "dsd_wgmma_tma" if p.tma else "dsd_wgmma_ws"
        cfg = KernelConfig(family, expr, threads, smem, rows, p.cols, "sm_90a",
                           p.ctas_per_sm, p.tma, 1, p.cluster, panel, epi, whole)
        # + the lists' copies (LIST_CAP ints a block) and the barriers
        static = 2048 * (1 + p.cols) + 32 * p.stages + 128
        if p.tma and not panel and smem_ctas(cfg, 90, static) < p.ctas_per_sm:
            raise ValueError(f"{p} at b = {b} needs {smem + static} bytes of shared memory a "
                             f"CTA, more than a Hopper SM gives each of {p.ctas_per_sm} CTA(s)")
        return cfg
    t = WGMMA_DSD[b]
    rows = 64 * t.m_tiles * t.warpgroups
    expr = f"dsd_wgmma_single<{tag},{b},{t.m_tiles},{t.warpgroups},{t.stages},{_b(kn)}>"
    smem = t.stages * (rows + b) * 128 + 1024
    return _instance(expr, t.warpgroups * 128, smem, rows, 1, "sm_90a")
