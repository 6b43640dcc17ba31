"""Kernel instances: a tile of :mod:`.tiles` made into a C++ name expression and its
launch shape. The builders are pure and memoized: those of the dsd kernels are in
:mod:`.dsd_configs`, those of the sdd kernels in :mod:`.sdd_configs`, and this module holds
what they share (:class:`KernelConfig`, shared-memory limits), the copy kernels around
them, and :func:`set_tiles`, which replaces table entries (tuning, tests) and clears every
cache that depends on them."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from .tiles import TABLES

TC_TAGS = {"float16": "F16", "bfloat16": "BF16"}
SIMT_TYPES = {"float32": "float", "float64": "double"}
#: The kernel sources, ``kernels/<family>.cu``: one kernel schedule per file, named after
#: its kernel (``dense.cu`` holds the dense path's scatter and gather).
FAMILIES = ("dsd_tc", "dsd_group_tc", "dsd_stream", "dsd_simt", "sdd_tc", "sdd_tile_tc",
            "sdd_stream", "sdd_simt", "sdd_tile_simt", "dsd_wgmma_single", "dsd_wgmma_ws",
            "dsd_wgmma_tma", "dsd_wgmma_union", "transpose_blocks", "sdd_wgmma",
            "sdd_wgmma_rest", "sdd_wgmma_tma", "dense")

#: Bumped by every :func:`set_tiles`; the plan caches key on it.
GENERATION = [0]
#: The memoized builders (:func:`memoized`), cleared by :func:`set_tiles`.
_BUILDERS: list = []


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
    epilogue: int = 0  # the dsd TMA store: rows of Y a round (panels: 64 x 64 boxes); 0: none
    whole: bool = False  # dsd panels: lists of whole 64-column slices of X, one box each

    @property
    def kernel(self) -> str:
        """The template's name, e.g. ``dsd_wgmma_tma``."""
        return self.name.split("<", 1)[0]


def memoized(builder):
    """``builder`` memoized, and cleared by every :func:`set_tiles`."""
    cached = functools.cache(builder)
    _BUILDERS.append(cached)
    return cached


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


def _rows_key(table, b: int, n: int) -> tuple | None:
    """The key ``(b, rows)`` of ``table`` (keyed by block size and rows up to) for ``n`` rows:
    the fewest rows that hold ``n``, or None where no tile of ``b`` does."""
    if n <= 0:
        return None
    rows = min((r for bb, r in table if bb == b and r >= n), default=None)
    return None if rows is None else (b, rows)


def ctas_per_sm(smem: int) -> int:
    """CTAs of a persistent kernel per SM: as many as fit an SM's 228 KiB of shared memory
    (1 KiB of it reserved per CTA). Where registers allow fewer at once, the grid runs in
    more than one wave (the measured tiles were chosen with it so); the short weight
    gradient's runner cuts its grid where that pays (``sdd_rules.short_grid_per_sm``), and
    ``tools/check_kernels.py`` lists the kernels planned past their registers."""
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


@functools.cache
def stream_finish_config(dtype) -> KernelConfig:
    """Adds ``dsd_stream``'s partial products in order, with alpha and beta."""
    return KernelConfig("dsd_stream", f"stream_finish<{TC_TAGS[dtype_name(dtype)]}>", 256, 0,
                        0, 1)


def set_tiles(**tables) -> None:
    """Replace tile-table entries, ``set_tiles(wgmma_ws={64: PersistentTile(...)})``, for
    tuning experiments and tests (plain tuples are converted to the table's record; None
    turns a family off for that block size), and clear every cache that depends on them.
    Without arguments it only clears the caches."""
    for key, entries in tables.items():
        table, record = TABLES[key]
        for b, tile in (entries or {}).items():
            table[b] = None if tile is None else record(*tile)
    for f in _BUILDERS:
        f.cache_clear()
    GENERATION[0] += 1
