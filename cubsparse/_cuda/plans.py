"""Kernel choice: one pure function per primitive that returns a named plan.

:func:`plan_dsd` and :func:`plan_sdd` take the layout (through its cached statistics),
the dtype, the block size, the number of rows, which operand is transposed, TF32 and
the device's architecture and SM count, and return a :class:`DsdPlan` / :class:`SddPlan`
whose ``str()`` is a readable line. They read the tile tables of :mod:`.tiles` and the
rules below; :func:`override` forces any decision for tuning tools and tests. Plans are
cached by the caller (:mod:`.run`), keyed by :data:`.configs.GENERATION`, which every
:func:`override` and :func:`.configs.set_tiles` bumps.
"""

from __future__ import annotations

import contextlib
import dataclasses

import numpy as np

from . import dense_model, worklists
from .configs import (
    GENERATION,
    TC_TAGS,
    KernelConfig,
    ctas_per_sm,
    dsd_config,
    dtype_name,
    fill_config,
    gather_config,
    group_config,
    scatter_config,
    sdd_config,
    sdd_stream_config,
    sdd_stream_tile,
    sdd_tile_config,
    sdd_tile_shape,
    sdd_wgmma_config,
    smem_ctas,
    stream_config,
    stream_ctas,
    stream_key,
    stream_tile,
    wgmma_config,
)
from .tiles import SMALL_ROWS, WGMMA_DSD_KN, WGMMA_DSD_KN_ROWS, WGMMA_DSD_TALL

# -- rules ---------------------------------------------------------------------------------
#: Blocks per union entry from which the grouped small-block dsd beats one block per CTA.
GROUP_MIN_SHARING = 2.0
#: The same for the union wgmma dsd against the single-block kernel ...
UNION_MIN_SHARING = 3.0
#: ... twice that below this many rows of X, where its few tiles leave SMs idle.
UNION_MIN_ROWS = 2048
#: The dense panels (the TMA kernel's, tiles.WGMMA_DSD_PANEL_TMA, else the union kernel's,
#: tiles.WGMMA_DSD_PANEL) multiply every member's block of each union entry, present or
#: not. They are taken where the present blocks fill at least this fraction of the panels,
#: per block size. Measured with the union kernel's panels, and kept for the TMA kernel's,
#: which ran faster than those on every layout where the rule takes panels (bench/NOTES.md
#: 121-128), on an H100 at N = C = K = 8192 (fp16;
#: random, Barabasi-Albert, Watts-Strogatz and banded layouts, d = 0.05-0.5): at b = 8 it
#: beat the grouped kernel at every fill from 0.06; at b = 16 the single-block kernel from
#: 0.25 and lost at 0.14 and below; at b = 32 the tall tiles from 0.48, losing at 0.31 ...
PANEL_MIN_FILL = {8: 0.05, 16: 0.2, 32: 0.4}
#: ... and where its tiles (groups x row tiles) give every persistent CTA PANEL_MIN_WAVES
#: of them: its groups are few, and smaller products were not measured.
PANEL_MIN_WAVES = 2
#: Its time is predicted (for the dense path's choice) as dense cuBLAS's times the share
#: of W's block grid its panels cover, over its speed per MMA against cuBLAS's, which grows
#: with W's density (longer lists per tile): (density, speed) points per block size,
#: interpolated in log density (:func:`panel_speed`). The medians over random,
#: Barabási-Albert, Watts-Strogatz and banded layouts of the TMA kernel's panels on an H100
#: (N = C = K = 8192, fp16, 9c78958; banded ones lowest, e.g. 0.34-0.60 at b = 8).
PANEL_SPEED = {8: ((0.05, 0.47), (0.1, 0.5), (0.25, 0.565), (0.5, 0.61)),
               16: ((0.05, 0.48), (0.1, 0.62), (0.25, 0.82), (0.5, 0.89)),
               32: ((0.05, 0.5), (0.1, 0.66), (0.25, 0.78), (0.5, 0.95))}
#: The persistent TMA dsd kernel takes its tiles row tile by row tile, every work item of
#: one before the next, so the CTAs running at one time share X's rows. Its dense panels
#: instead take bands of this many row tiles, group by group within a band, so that the
#: CTAs also share the panels: at b = 32 on an H100 (N = C = K = 8192, fp16) the panels of
#: a banded layout at d = 0.5 (70 MB, more than L2 holds) ran 1.6 ms with bands of 1 row
#: tile and 0.92 ms with 8; bands of 2 / 4 / 8 gave medians of 0.55 / 0.58 / 0.60 of dense
#: on banded layouts. The tall tiles ran slower in bands (b = 64: 0.50 -> 0.47 with 4).
DSD_PANEL_BAND = 8
#: Tiles per persistent CTA below which the tall tiles are not used.
TALL_MIN_WAVES = 2
#: Mean reduction depth (list length x b, rows of W) from which the tall tile runs in
#: clusters of two CTAs sharing W's blocks by multicast: a cluster's CTAs wait for each
#: other at every stage, which short lists pay for (N = C = K = 8192, b = 64 and 128, against
#: the tall tile: 0.85-0.89x at depth 410, 0.92-0.96x at 819, 1.01-1.03x at 2048,
#: 1.03-1.08x at 4096).
CLUSTER_MIN_DEPTH = 2048
#: Stored blocks per union-list entry (1-2) from which the two-block dsd tile
#: (tiles.WGMMA_DSD_PAIR) replaces the tall tile: an entry costs its X slice once for both
#: blocks, and an absent block costs MMAs on zeros.
DSD_PAIR_MIN_SHARING = 1.5
#: Fraction of the SMs the regular mma.sync / CUDA-core dsd tiles must fill; with fewer
#: CTAs the short (SMALL_ROWS) tiles are taken at any number of rows.
SHORT_FILL = 1.0
#: The float32 tiled sdd's break-even fill (stored blocks per block of its non-empty tiles).
SDD_TILE_SIMT_FILL = {8: 0.25, 16: 0.75}
#: The same for a reduction of at most SDD_TILE_SHORT_INNER rows (a small-N weight
#: gradient): the tile's one pass over its operands costs about what a group's does, and
#: its stores of whole tiles win from a quarter of the blocks on (bench/NOTES.md).
SDD_TILE_SIMT_FILL_SHORT = {8: 0.25, 16: 0.25}
SDD_TILE_SHORT_INNER = 32
#: Shortest reduction at which the 16-bit tiled sdd (``sdd_tile_tc``) is weighed at all.
#: Below it a CTA's tile is one slice of loads, MMAs and stores in a row, with one CTA an
#: SM (its registers): fixed latency per tile that the per-row groups, many CTAs an SM,
#: overlap. At 1-32 rows they ran 1.3-4x faster; at 128 rows the two were even at a
#: quarter of the blocks, and the tile 1.7x faster at half (bench/NOTES.md).
SDD_TILE_MIN_INNER = 128
#: A split costs float32 partial tiles and a tail: the CTA that stores a list's last
#: segment then adds up the list's partials (split_finish in common.cuh), in the same
#: launch. Lists are split where the kernel would leave SMs idle: fewer CTAs (work items x
#: row tiles) than SPLIT_FILL x the SMs (SPLIT_FILL_SIMT on CUDA cores, whose CTAs need
#: more company to hide their latency), or, for a persistent kernel (which balances its
#: tiles itself), fewer tiles than SPLIT_FILL_PERSISTENT x the SMs; and only where the
#: longest list would take longer than SPLIT_IDLE_MIN_US (SPLIT_IDLE_MIN_US_SIMT on CUDA
#: cores, which the byte model below underestimates: they are bound by their FMAs;
#: SPLIT_IDLE_MIN_US_PERSISTENT for the persistent kernels, whose CTAs already share the
#: tiles), since a shorter product gains less than the tail costs. Without idle SMs lists
#: are split where the longest would take longer than SPLIT_MIN_US (persistent kernels
#: never). Times are microseconds, predicted from a list's bytes at one SM's share of the
#: memory bandwidth.
SPLIT_FILL = 1.5
SPLIT_FILL_SIMT = 4.0
SPLIT_FILL_PERSISTENT = 0.5
SPLIT_IDLE_MIN_US = 5.0
SPLIT_IDLE_MIN_US_SIMT = 2.0
SPLIT_IDLE_MIN_US_PERSISTENT = 15.0
SPLIT_MIN_US = 20.0
#: One SM's share of the device's memory bandwidth, bytes per microsecond (H100/H200:
#: 3.3-4.8 TB/s over 132 SMs).
SM_BYTES_PER_US = 30_000
#: A launch covers at most this many row tiles (the grid's y limit).
MAX_GRID_Y = 65535
#: Bytes of float32 partial sums a split product may use.
MAX_WORKSPACE = 256 << 20
#: Longest reduction (rows of X and dY) for which the wgmma sdd takes its short tile
#: (tiles.WGMMA_SDD_SHORT) on a grid sized to the device, each CTA walking groups with the
#: next group's copies in flight while it stores a group. Below it a group is a few
#: slices, and a CTA per group spends most of its life waiting for its copies and then
#: for its stores.
SDD_SHORT_INNER = 128
#: A reduction this short is one slice of this depth in the short tile (no k padding, half
#: the shared memory per stage, twice the CTAs per SM).
SDD_ONE_SLICE_K = 32
#: Columns and rows of W from which the wgmma sdd's longer reductions take the wide tile
#: (tiles.WGMMA_SDD_WIDE: two blocks of a block row per CTA, each X slice feeding both).
#: Measured on an H100 at b = 128: 1.12-1.26x faster at C = K = 8192 and 12288 (N = 256 to
#: 8192, d = 0.05-0.5), 1.6x slower at C = K = 4096 (N = 4096 and 16384).
SDD_WIDE_MIN_COLS = 8192
#: The paired TMA sdd tile (tiles.WGMMA_SDD_PAIR) multiplies both block rows of a pair at
#: every column either holds, present or not, in groups of four columns. Its time against
#: the one-row tile's is predicted from the share of each tile's products that are stored
#: blocks (group padding included), the share of its CTA-rounds that are busy, and each
#: tile's efficiency where all its products are stored (SDD_PAIR_SPEED, SDD_ONE_ROW_SPEED:
#: H100, N = C = K = 8192, fp16, banded d = 0.5 and random d = 0.5). It is taken where
#: the prediction is SDD_PAIR_MIN_GAIN faster. Measured against the one-row tile, same
#: sizes: banded 1.9-2.1x, Watts-Strogatz 1.0-1.8x, Barabasi-Albert and random 0.87-0.92x
#: at d = 0.05 and 1.13-1.45x from d = 0.1 (rows paired by shared columns).
SDD_PAIR_SPEED = 0.88
SDD_ONE_ROW_SPEED = 0.435
SDD_PAIR_MIN_GAIN = 1.1
#: The TMA sdd's dense panels (tiles.WGMMA_SDD_PANEL: 128 / b block rows by ``group`` block
#: columns per tile, reduced densely) are taken for a long reduction where W's blocks fill
#: at least this share of the tiles that hold any, per block size. On an H100 (N = C = K =
#: 8192, fp16) the panels ran at about SDD_PANEL_SPEED of cuBLAS per MMA, and the kernels
#: they replace at 0.17-0.24 of dense (b = 32), 0.06-0.09 (b = 16) and 0.01-0.24 (b = 8):
#: at b = 32 the panels tied at a fill of 0.25 and lost at 0.1; at b = 16 they won from
#: 0.1 and lost at 0.05; at b = 8 they won at every fill measured (0.05 up) ...
SDD_PANEL_MIN_FILL = {8: 0.04, 16: 0.08, 32: 0.25}
#: ... and there are this many tiles per SM (fewer leave SMs idle for the whole reduction).
SDD_PANEL_MIN_WAVES = 1
#: The panels' speed per MMA against cuBLAS: their time, for the dense path's choice, is
#: dense cuBLAS's times the share of W's block grid their tiles cover over this. On an
#: H100 (N = C = K = 8192, fp16, 9c78958) 0.82-1.03 where the tiles cover all of W (random,
#: Barabási-Albert and Watts-Strogatz layouts), 0.67-0.89 on banded ones.
SDD_PANEL_SPEED = 0.92
#: The paired tile's store of a group costs about this many 64-deep slices of its main loop
#: (one CTA per SM: nothing else runs meanwhile), which the one-row tile's two CTAs per SM
#: hide. Fitted to N = 256-1024 on the same H100 (banded d = 0.1: 1.26x at N = 256, 1.73x
#: at 1024; random d = 0.25: 0.90x and 1.05x; Watts-Strogatz d = 0.25, N = 512: 1.22x).
SDD_PAIR_STORE_SLICES = 2.4
#: The dense path writes the whole dense W (``fill_dense``: the zeros too) instead of
#: scattering W's blocks, where a block row is this many bytes and W at least this dense:
#: a 16-byte block row written alone fills half a memory sector, which halves the
#: scatter's write rate, so from about a quarter of the blocks on, writing every element
#: in whole sectors is faster.
FILL_MIN_DENSITY = {16: 0.25}
#: The small-N dsd with X in shared memory (``dsd_stream``) is taken where W has at least
#: this many (group of output blocks, chunk of X's block columns) pairs per SM to share
#: out; with fewer, SMs would sit idle.
STREAM_MIN_FILL = 1.0
#: CTAs per SM the small-N dsd's runs of chunks are sized for, where the SM's shared memory
#: holds them (two on sm_90, one on sm_80); fewer, longer runs leave fewer float32 partial
#: products to add.
STREAM_CTAS_PER_SM = 2
#: The least density of W the small-N dsd takes, by its tile's key (block size, rows of X
#: up to); others take any. Below it, copying a chunk of X into every group's CTA costs
#: more than W's few blocks save, and the tile kernels are faster: each value lies between
#: the densities measured on either side of the crossing (bench/NOTES.md).
STREAM_MIN_DENSITY = {(16, 64): 0.075, (32, 16): 0.075, (32, 32): 0.175, (32, 64): 0.3}
#: Most rows of X at which the small-N dsd's partial products are added by the group's own
#: CTAs in the launch rather than by a second launch. That saves the second launch's host
#: time (about 5 µs a call) and costs some GPU time, since a group's CTAs add their share
#: only after its slowest run is done; the share grows with the rows, and past 32 rows the
#: GPU time lost outweighed the host time saved in eager loops (bench/NOTES.md).
STREAM_SHARE_MAX_ROWS = 32


def split_length(lens: np.ndarray, row_tiles: int, slots: int, shortest: int = 4) -> int:
    """Longest list a CTA should take, 0 for no split. Splitting pays only when there are
    few CTAs (small N): lists longer than twice the average work of one of ``slots`` CTA
    slots are cut into segments of at least ``shortest`` entries (a power of two, so that
    few tables are cached)."""
    if lens.size == 0:
        return 0
    avg = int(lens.sum()) * row_tiles / slots
    if lens.max() <= 2 * max(avg, shortest):
        return 0
    return 1 << int(np.ceil(np.log2(max(avg, shortest))))


def group_pays(structure, trans: bool, group: int) -> bool:
    """The grouped mma.sync dsd's X slices feed at least GROUP_MIN_SHARING members."""
    return worklists.sharing(structure, trans, group) >= GROUP_MIN_SHARING


def fill_pays(structure, b: int, itemsize: int) -> bool:
    """The dense path writes W whole (FILL_MIN_DENSITY): its block rows are short and W is
    dense enough."""
    rows, cols = structure.block_shape
    least = FILL_MIN_DENSITY.get(b * itemsize)
    return least is not None and rows * cols > 0 and structure.nnzb >= least * rows * cols


def stream_pays(structure, groups: int, chunks: int, sms: int, key: tuple) -> bool:
    """The small-N dsd with X in shared memory has at least STREAM_MIN_FILL x ``sms`` pairs
    of a group of output blocks and a chunk of X's block columns to share out, W has
    blocks, and W is as dense as STREAM_MIN_DENSITY asks of its tile (``key``)."""
    rows, cols = structure.block_shape
    return (structure.nnzb > 0 and groups * chunks >= STREAM_MIN_FILL * sms
            and structure.nnzb >= STREAM_MIN_DENSITY.get(key, 0.0) * rows * cols)


def stream_run(groups: int, chunks: int, slots: int) -> int:
    """Chunks of X's block columns per CTA of the small-N dsd: the shortest run whose CTAs
    all run at once in the device's ``slots`` (no second wave), so the fewest partial
    products that keep the SMs busy."""
    return next((run for run in range(1, chunks) if groups * -(-chunks // run) <= slots),
                max(chunks, 1))


def union_pays(structure, trans: bool, group: int, n: int) -> bool:
    """The union wgmma dsd's X slices feed enough members for ``n`` rows of X."""
    need = UNION_MIN_SHARING * (1 if n >= UNION_MIN_ROWS else 2)
    return worklists.sharing(structure, trans, group) >= need


def panel_speed(b: int, density: float) -> float:
    """The dense panels' speed per MMA against cuBLAS at block size ``b`` and W's
    ``density`` (:data:`PANEL_SPEED`, interpolated in log density, held at its ends)."""
    points = np.array(PANEL_SPEED.get(b, ((1.0, 0.5),)))
    return float(np.interp(np.log(max(density, 1e-9)), np.log(points[:, 0]), points[:, 1]))


def panel_pays(structure, trans: bool, cfg: KernelConfig, b: int, n: int, ctas: int) -> bool:
    """The members' present blocks fill at least PANEL_MIN_FILL of the dense panels of
    ``cfg``, and its tiles for ``n`` rows of X give each of ``ctas`` persistent CTAs
    PANEL_MIN_WAVES."""
    n_out = structure.block_shape[0] if trans else structure.block_shape[1]
    tiles = -(-n_out // cfg.group) * -(-n // cfg.rows_per_cta)
    return (tiles >= PANEL_MIN_WAVES * ctas and worklists.sharing(structure, trans, cfg.group)
            >= PANEL_MIN_FILL.get(b, 1.0) * cfg.group)


def tall_pays(cfg: KernelConfig, n: int, n_out: int, ctas: int) -> bool:
    """X has at least a tall tile of rows (else most of the tile's MMAs and copies are of
    absent rows), and every one of ``ctas`` persistent CTAs gets TALL_MIN_WAVES tiles of
    ``cfg`` for ``n`` rows of X and ``n_out`` output blocks (with fewer, taller tiles leave
    CTAs idle)."""
    return n >= cfg.rows_per_cta and -(-n // cfg.rows_per_cta) * n_out >= TALL_MIN_WAVES * ctas


def cluster_pays(cfg: KernelConfig, structure, trans: bool, b: int, n: int, n_out: int,
                 ctas: int) -> bool:
    """The clustered tall tile (``cfg``) has row tiles for both CTAs of a cluster (an odd
    last one leaves a CTA without rows), gives each of ``ctas`` CTAs TALL_MIN_WAVES tiles,
    and its lists are CLUSTER_MIN_DEPTH deep on average."""
    row_tiles = -(-n // cfg.rows_per_cta)
    lens = worklists.list_lengths(structure, trans, 1)
    return (row_tiles >= 2 and row_tiles % 2 == 0 and row_tiles * n_out >= TALL_MIN_WAVES * ctas
            and lens.size > 0 and float(lens.mean()) * b >= CLUSTER_MIN_DEPTH)


def dsd_pair_pays(cfg: KernelConfig, structure, trans: bool, n: int, n_out: int,
                  ctas: int) -> bool:
    """The two-block tile ``cfg`` finds DSD_PAIR_MIN_SHARING stored blocks per entry of its
    union lists, X has a tile of rows, and its tiles give each of ``ctas`` CTAs
    TALL_MIN_WAVES."""
    tiles = -(-n_out // cfg.group) * -(-n // cfg.rows_per_cta)
    return (n >= cfg.rows_per_cta and tiles >= TALL_MIN_WAVES * ctas
            and worklists.sharing(structure, trans, cfg.group) >= DSD_PAIR_MIN_SHARING)


def short_pays(cfg: KernelConfig, n: int, n_out: int, sms: int) -> bool:
    """The regular tiles of ``cfg`` leave SMs idle: ``n`` rows of X in tiles of
    ``cfg.rows_per_cta`` over ``n_out`` output blocks make fewer than SHORT_FILL x ``sms``
    CTAs (a narrow W at a few hundred rows), so the short tiles, two to four times as many
    CTAs, spread the same work wider. Without output blocks there is nothing to spread."""
    return n_out > 0 and -(-n // cfg.rows_per_cta) * n_out < SHORT_FILL * sms


def sdd_short_pays(inner: int) -> bool:
    """The wgmma sdd's reduction is short enough (SDD_SHORT_INNER) for the short tile on a
    persistent grid."""
    return inner <= SDD_SHORT_INNER


def sdd_wide_pays(structure, b: int) -> bool:
    """W has at least SDD_WIDE_MIN_COLS columns and rows, where the wgmma sdd's wide tile
    beats one block per CTA, and the persistent TMA kernel (decision ``sdd_tma``, taken
    first where configured) beats both."""
    return min(structure.block_shape) * b >= SDD_WIDE_MIN_COLS


def _busy_rounds(items: int, slots: int) -> float:
    """The share of ceil(items / slots) rounds of ``slots`` CTAs that ``items`` fill."""
    return items / (-(-items // slots) * slots) if items else 0.0


def sdd_pair_gain(structure, pair: KernelConfig, one: KernelConfig, sms: int,
                  inner: int) -> float:
    """The paired tile ``pair``'s predicted speed over the one-row tile ``one`` (a CTA per
    group, as many per SM as shared memory holds) for a reduction of ``inner`` rows."""
    nnzb = structure.nnzb
    pairs = worklists.pair_group_count(structure, pair.group)
    ones = worklists.group_count(structure, one.group)
    if not nnzb or not pairs or not ones:
        return 0.0
    paired = (SDD_PAIR_SPEED * nnzb / (2 * pair.group * pairs)
              * _busy_rounds(pairs, sms * pair.persistent))
    single = (SDD_ONE_ROW_SPEED * nnzb / (one.group * ones)
              * _busy_rounds(ones, sms * ctas_per_sm(one.smem)))
    slices = -(-inner // 64)  # the TMA kernel's slices are 64 deep
    return paired / single * slices / (slices + SDD_PAIR_STORE_SLICES)


def sdd_pair_pays(structure, pair: KernelConfig, one: KernelConfig, sms: int,
                  inner: int) -> bool:
    """The paired tile is predicted SDD_PAIR_MIN_GAIN faster than one block row per
    group (:func:`sdd_pair_gain`)."""
    return sdd_pair_gain(structure, pair, one, sms, inner) >= SDD_PAIR_MIN_GAIN


def sdd_panel_pays(structure, cfg: KernelConfig, b: int, inner: int, sms: int) -> bool:
    """The TMA sdd's dense panels ``cfg`` pay: a reduction too long for the short tile,
    SDD_PANEL_MIN_FILL of the tiles' positions holding blocks, and SDD_PANEL_MIN_WAVES
    tiles per SM."""
    rows, group = cfg.block_rows, cfg.group
    return (not sdd_short_pays(inner)
            and worklists.panel_fill(structure, rows, group) >= SDD_PANEL_MIN_FILL.get(b, 1.0)
            and worklists.sdd_work_host(structure, group, rows, True).shape[0]
            >= SDD_PANEL_MIN_WAVES * sms)


def sdd_stream_grid(structure, chunk: int, slots: int, warps: int = 8) -> tuple[int, int, int]:
    """(block columns per chunk, chunks, CTAs per chunk) of the short-reduction sdd of
    ``warps`` warps a CTA: as many CTAs per chunk as fill the device's ``slots`` once, at
    most a warp per block row. Where W has too few block rows for that to fill half the
    slots, the chunks are halved from the tile's ``chunk`` (down to 8 block columns) until
    it does: narrower chunks cost every CTA a copy of X's slice per block row, so they are
    cut only as far as needed."""
    rows, cols = structure.block_shape
    per_chunk = -(-rows // warps)

    def chunks(c):
        return max(1, -(-cols // c))

    while chunk > 8 and 2 * per_chunk * chunks(chunk) < slots:
        chunk //= 2
    n = chunks(chunk)
    return chunk, n, max(1, min(per_chunk, slots // n))


def sdd_stream_pays(structure, tile) -> bool:
    """The short-reduction sdd (``sdd_stream``) pays where W is at least as dense as its
    ``tile`` needs (:data:`.tiles.SDD_STREAM`)."""
    rows, cols = structure.block_shape
    return structure.nnzb >= tile.least_density * rows * cols


def sdd_tiled_pays(structure, dtype, b: int, group: int, inner: int) -> bool:
    """The tiled sdd beats groups of ``group`` blocks of one block row, for a reduction of
    ``inner`` rows. Tensor cores: from SDD_TILE_MIN_INNER rows, when it loads fewer operand
    columns, (tr + ts) per non-empty tile against 1 + count per group. CUDA cores
    (float32), bound by FMAs: when its tiles are full enough (SDD_TILE_SIMT_FILL, or
    SDD_TILE_SIMT_FILL_SHORT up to SDD_TILE_SHORT_INNER rows), since the threads of absent
    blocks idle."""
    tr, ts = sdd_tile_shape(dtype, b)
    simt = dtype_name(dtype) == "float32"
    if not simt and inner < SDD_TILE_MIN_INNER:
        return False
    fill = (SDD_TILE_SIMT_FILL_SHORT if inner <= SDD_TILE_SHORT_INNER
            else SDD_TILE_SIMT_FILL).get(b) if simt else None

    def count():
        ntiles = worklists.block_tiles(structure, tr, ts)[0].shape[0]
        if simt:
            return structure.nnzb >= fill * ntiles * tr * ts
        counts = np.diff(structure.host_indptr.astype(np.int64))
        grouped = int(((counts + group - 1) // group).sum() + counts.sum())
        return ntiles * (tr + ts) < grouped

    return structure.cached(("sdd_tiled_pays", simt, tr, ts, group, fill), count)


# -- forced decisions ----------------------------------------------------------------------
_FORCED: dict = {}
DECISIONS = ("panel", "union", "group", "tall", "cluster", "dsd_pair", "short", "kn",
             "sdd_tiled", "sdd_short", "sdd_wide", "sdd_tma", "sdd_pair", "sdd_panel", "split",
             "grid_limit", "band", "dense", "fill", "stream", "stream_run", "stream_share",
             "sdd_stream", "sdd_stream_grid")


@contextlib.contextmanager
def override(**decisions):
    """Force plan decisions inside a ``with`` block (tuning tools, tests).

    Each keyword forces one decision; ``None`` restores its rule:

    ``panel``, ``union``, ``group``, ``tall``, ``short``, ``sdd_tiled`` : bool
        Take (or not) the dense panels of the wgmma dsd (before any other rule), the union wgmma
        dsd, the grouped mma.sync dsd, the tall persistent
        tiles, the short mma.sync / CUDA-core dsd tiles past SMALL_ROWS rows, the tiled
        small-block sdd, wherever one is configured.
    ``cluster`` : bool
        Take (or not) the tall tile in clusters of two CTAs that share W's blocks by
        multicast, wherever one is configured (after the tall tile was taken).
    ``dsd_pair`` : bool
        Take (or not) the two-block TMA dsd tile, wherever one is configured (after the
        tall tile was taken, before its clusters).
    ``sdd_short`` : bool
        Run the wgmma sdd's short-reduction tile on a grid sized to the device (each CTA
        walks groups), or its regular tile with a CTA per group.
    ``sdd_wide`` : bool
        Take (or not) the wgmma sdd's wide tile for a reduction too long for the short
        one, wherever one is configured.
    ``sdd_tma`` : bool
        Take (or not) the persistent TMA wgmma sdd for a reduction too long for the short
        tile, wherever one is configured (before the wide tile).
    ``sdd_pair`` : bool
        Take (or not) the TMA wgmma sdd's paired tile (two block rows per group) for a
        reduction too long for the short tile, wherever one is configured (before the
        other TMA tile and the wide tile).
    ``sdd_panel`` : bool
        Take (or not) the TMA wgmma sdd's dense panels for small blocks, wherever one is
        configured. Where left to the rule, another sdd decision forced on (``sdd_short``,
        ``sdd_tiled``, ``sdd_tma``, ``sdd_wide``, ``sdd_pair``) keeps the panels off.
    ``kn`` : bool
        X @ W on a wgmma kernel reads W's blocks as stored (else a transposed copy).
    ``split`` : int
        Longest list per CTA (0: no split).
    ``grid_limit`` : int
        Cap on a persistent kernel's CTAs (they then walk more tiles each).
    ``band`` : int
        Row tiles per band of the TMA dsd kernel's tile order (:data:`DSD_PANEL_BAND`), at
        least 1.
    ``dense`` : bool
        Take the dense path (where the dtype has one) or never.
    ``fill`` : bool
        The dense path writes the whole dense W (zeros too) rather than scattering W's
        blocks into a buffer that keeps its zeros.
    ``stream`` : bool
        Take (or not) the small-N dsd that keeps X in shared memory and reads each block
        of W once, wherever one is configured (at most ``STREAM_MAX_ROWS`` rows of X).
    ``stream_run`` : int
        Chunks of X's block columns per CTA of that dsd (at least 1, at most its tile's
        ``max_run``; at least as many as there are means one CTA per group of output
        blocks, writing Y itself).
    ``sdd_stream`` : bool
        Take (or not) the short-reduction sdd that stages dY's chunks in shared memory,
        wherever one is configured (at most ``SDD_STREAM_MAX_INNER`` rows, 16-bit, x and
        dy read in place), ahead of every other sdd kernel and the dense path. Where left to
        the rule, another sdd decision or the dense path forced on keeps it off.
    ``sdd_stream_grid`` : int
        CTAs per chunk of dY of that sdd (the rule: as many as fill the device once, at
        most one warp per block row).
    ``stream_share`` : bool
        Where that dsd's CTAs leave partial products, let each group's CTAs add them up in
        the same launch (the rule: up to ``STREAM_SHARE_MAX_ROWS`` rows of X; True: at any
        rows) or in a second launch (False). The in-launch sum needs every CTA of the grid
        on the device at once: where the grid does not fit, a second launch adds them.

    Examples
    --------
    >>> from cubsparse._cuda import plans
    >>> with plans.override(split=0, dense=False):
    ...     plans.forced("split")
    0
    """
    unknown = set(decisions) - set(DECISIONS)
    if unknown:
        raise ValueError(f"unknown plan decisions {sorted(unknown)}; known: {DECISIONS}")
    saved = dict(_FORCED)
    for k, v in decisions.items():
        if v is None:
            _FORCED.pop(k, None)
        else:
            _FORCED[k] = v
    GENERATION[0] += 1
    try:
        yield
    finally:
        _FORCED.clear()
        _FORCED.update(saved)
        GENERATION[0] += 1


def forced(name: str, default=None):
    """The forced value of a decision, or ``default``."""
    return _FORCED.get(name, default)


def _decide(name: str, rule, *args) -> bool:
    value = _FORCED.get(name)
    return rule(*args) if value is None else bool(value)


# -- plans ---------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class DsdPlan:
    """How ``Y = X @ op(W)`` runs for one layout, dtype and number of rows of X."""

    product: str  # "X @ W" or "X @ W.T"
    rows: int  # of X
    dtype: str
    blocksize: int
    path: str  # "sparse" or "dense"
    kernel: KernelConfig  # the sparse kernel (dense path: the scatter or the fill)
    reads_w_as_stored: bool  # else W's blocks are read transposed ([n][k])
    # per call: None, "transpose_blocks" (wgmma), "transpose" (TF32) or "panel_blocks" (the
    # TMA kernel's dense panels gathered, zeros for absent members)
    w_copy: str | None
    split: int  # longest list per CTA, 0: lists whole (dsd_stream: X's chunks per CTA)
    slots: int  # float32 workspace tiles of the split lists (dsd_stream: partial products)
    grid: tuple
    ratio: float | None  # the dense model's sparse / dense time, where it has one
    band: int = 1  # TMA kernels: row tiles per band of the tile order (DSD_PANEL_BAND)
    pad: int = 1  # the union lists padded to a multiple of this many entries (TMA panels)
    # dsd_stream with partial products: the group's CTAs add them in the launch (a
    # cooperative launch, every CTA resident at once), else a second launch does
    shared_sum: bool = False

    @property
    def panel(self) -> bool:
        """Whether the sparse kernel multiplies dense panels of a group's blocks (absent
        ones as zeros)."""
        return self.path == "sparse" and self.kernel.panel

    def __str__(self) -> str:
        if self.path == "dense":
            how = ("W written whole" if self.kernel.kernel == "fill_dense"
                   else "W's blocks scattered")
            return (f"{self.product}, {self.rows} rows, {self.dtype}, b = {self.blocksize}: "
                    f"dense ({how}, then cuBLAS; model: sparse {self.ratio:.2f}x dense)")
        k = self.kernel
        parts = [f"{self.product}, {self.rows} rows, {self.dtype}, b = {self.blocksize}: "
                 f"{k.name}", f"{k.rows_per_cta} rows x {k.group} block(s) per tile",
                 f"grid {self.grid}" + (f" ({k.persistent}/SM, persistent)" if k.persistent
                                        else "")]
        if self.panel:
            parts.append(f"dense panels of {k.group} blocks (absent blocks multiplied as "
                         "zeros; set_options(dense_panels=False) forbids them)")
        if self.band > 1:
            parts.append(f"tiles taken in bands of {self.band} row tiles")
        if self.w_copy == "panel_blocks":
            parts.append("W's blocks gathered into the panels per call (panel_blocks)")
        elif self.w_copy:
            parts.append(f"W's blocks transposed per call ({self.w_copy})")
        if k.kernel == "dsd_stream":
            chunk = stream_tile(self.blocksize, self.rows).chunk
            parts.append(f"X staged {chunk} block columns at a time, {self.split} chunk(s) "
                         "per CTA"
                         + (f", {self.slots} partial products added in order "
                            + ("by the group's CTAs (one cooperative launch)" if self.shared_sum
                               else "by a second launch") if self.slots
                            else ", Y written by the CTA"))
        elif self.split:
            parts.append(f"lists split at {self.split} ({self.slots} partial tiles, added "
                         "by each list's last CTA)")
        return ", ".join(parts)


@dataclasses.dataclass(frozen=True)
class SddPlan:
    """How ``(A @ B)`` sampled on a layout runs for one dtype and operand layout."""

    dtype: str
    blocksize: int
    path: str  # "sparse" or "dense"
    kernel: KernelConfig  # dense path: the block gather
    tiled: bool  # the tiled small-block kernel (a CTA per tile of the block grid)
    a_km: bool  # A read as [k][m] rows (x.T in place), else [m][k]
    b_nk: bool  # B read as [n][k] rows, else [k][n]
    tf32: bool
    ratio: float | None
    grid: int = 0  # CTAs of a persistent grid (0: one per tile or group); sdd_stream: per chunk
    chunks: int = 0  # sdd_stream: chunks of dY's block columns (the grid's other dimension)
    chunk: int = 0  # sdd_stream: block columns per chunk (at most its tile's)

    def __str__(self) -> str:
        head = f"sampled A @ B, {self.dtype}, b = {self.blocksize}: "
        if self.path == "dense":
            return head + (f"dense (cuBLAS product, then W's blocks gathered; model: sparse "
                           f"{self.ratio:.2f}x dense)")
        k = self.kernel
        if k.kernel == "sdd_stream":
            return head + (f"{k.name}, dY staged {self.chunk} block columns at a time, "
                           f"block rows walked by warps, grid ({self.chunks}, {self.grid}), A "
                           "as [k][m], B as [k][n]")
        per = (f"dense panels of {k.block_rows} x {k.group} blocks per tile (stored where W "
               "has them)" if k.panel else
               f"{k.group} block columns of a pair of block rows per group"
               if k.block_rows == 2 else
               f"{k.group} block(s) of a block row per " + ("group" if self.grid else "CTA"))
        per += f", grid ({self.grid},) ({k.persistent}/SM, persistent)" if self.grid else ""
        return head + (f"{self.kernel.name}, " + ("tiles of the block grid" if self.tiled
                       else per)
                       + f", A as {'[k][m]' if self.a_km else '[m][k]'}"
                       + f", B as {'[n][k]' if self.b_nk else '[k][n]'}")


def persistent_ctas(cfg: KernelConfig, sms: int) -> int:
    """Grid of a persistent kernel: ``cfg.persistent`` CTAs per SM (or the forced cap), in
    whole clusters."""
    ctas = sms * cfg.persistent
    limit = _FORCED.get("grid_limit")
    ctas = min(ctas, limit) if limit else ctas
    return max(ctas - ctas % cfg.cluster, cfg.cluster)


def plan_dsd(structure, dtype, b: int, n: int, trans: bool, tf32: bool, arch: int,
             sms: int, dense_bytes_limit: int | None = None, panels: bool = True) -> DsdPlan:
    """The plan of ``Y = X @ op(W)`` for ``n`` rows of X (pure: same inputs, same plan).

    ``arch`` is the compute capability (90: Hopper), ``sms`` the device's SM count,
    ``dense_bytes_limit`` the most memory the dense path may hold (None: no dense path),
    ``panels`` whether dense panels may run (they multiply absent blocks as zeros; not
    even a forced ``panel`` decision overrides False).
    """
    name = dtype_name(dtype)
    n_out = structure.block_shape[0] if trans else structure.block_shape[1]
    tf32 = tf32 and name == "float32"
    tc = name in TC_TAGS or tf32
    small = n <= SMALL_ROWS
    product = "X @ W.T" if trans else "X @ W"
    # At a few rows of X and small blocks, X in shared memory and W streamed once; it beats
    # the dense path there too (the path's rewrite of W alone costs more), so no ratio.
    scfg = stream_config(name, b, trans, n) if arch >= 80 else None
    per_sm = min(STREAM_CTAS_PER_SM, stream_ctas(b, n, arch)) if scfg is not None else 0
    if per_sm:  # (its shared memory fits the device)
        stile = stream_tile(b, n)
        groups = -(-n_out // scfg.group)
        chunks = worklists.stream_chunks(structure, trans, stile.chunk)
        if _decide("stream", stream_pays, structure, groups, chunks, sms, stream_key(b, n)):
            run = min(chunks, stile.max_run,
                      max(1, int(forced("stream_run")
                                 or stream_run(groups, chunks, per_sm * sms))))
            runs = -(-chunks // run)
            shared = runs > 1 and _decide("stream_share", lambda: n <= STREAM_SHARE_MAX_ROWS
                                          ) and groups * runs <= per_sm * sms
            return DsdPlan(product, n, name, b, "sparse", scfg, True, None, run,
                           runs if runs > 1 else 0, (groups, runs), None, shared_sum=shared)
    # The kernel ladder: Hopper wgmma (dense panels, union, persistent, tall), else
    # grouped mma.sync, else one block per CTA on mma.sync or CUDA cores.
    wcfg, kn = (_wgmma_choice(structure, name, b, n, n_out, trans, sms, panels)
                if name in TC_TAGS and not small and arch == 90 else (None, False))
    gcfg = group_config(name, b, trans) if wcfg is None and not small else None
    if gcfg is not None and not _decide("group", group_pays, structure, trans, gcfg.group):
        gcfg = None
    if wcfg is None and gcfg is None and not small:
        small = _decide("short", short_pays, dsd_config(name, b, trans, tf32), n, n_out, sms)
    cfg = wcfg or gcfg or dsd_config(name, b, trans, tf32, small)
    panel = cfg.panel
    w_copy = None
    if panel and cfg.tma:  # the TMA kernel reads whole panels, zeros included
        w_copy = "panel_blocks"
    elif not trans and (tf32 or (wcfg is not None and not kn)):
        # These kernels read W's blocks with k contiguous ([n][k]): TF32 because ldmatrix
        # moves 16-bit elements, the other wgmma kernels for their K-major descriptors.
        w_copy = "transpose_blocks" if wcfg is not None else "transpose"

    # Long lists are split where there are few CTAs; float64 never (no float32 partials).
    # Segments of small blocks are longer: their entries carry fewer bytes.
    row_tiles = -(-n // cfg.rows_per_cta)
    split = 0
    # (the two-block TMA tile stores its blocks whole: no split)
    if name != "float64" and n <= MAX_GRID_Y * cfg.rows_per_cta and not (
            cfg.tma and cfg.group > 1):
        shortest = max(4, 256 // b) if tc else max(1, 4096 // (b * b))
        slots = max(2, 512 // cfg.threads) * sms
        split = _FORCED.get("split")
        if split is None:
            lens = worklists.list_lengths(structure, trans, cfg.group)
            entry_bytes = (cfg.group * b * b + cfg.rows_per_cta * b) * _itemsize(name)
            longest_us = (int(lens.max()) if lens.size else 0) * entry_bytes / SM_BYTES_PER_US
            fill, min_us = ((SPLIT_FILL_PERSISTENT, SPLIT_IDLE_MIN_US_PERSISTENT)
                            if cfg.persistent else (SPLIT_FILL, SPLIT_IDLE_MIN_US) if tc
                            else (SPLIT_FILL_SIMT, SPLIT_IDLE_MIN_US_SIMT))
            idle = lens.size * row_tiles < fill * sms and longest_us > min_us
            slow = not cfg.persistent and longest_us > SPLIT_MIN_US
            split = split_length(lens, row_tiles, slots, shortest) if idle or slow else 0
    # (the TMA kernel's panels walk lists padded to whole 64-deep slices)
    pad = 64 // b if panel and cfg.tma else 1
    work, _, _, _, n_slots = worklists.dsd_host(structure, trans, split, cfg.group, pad)
    if split and n_slots * n * cfg.group * b * 4 > MAX_WORKSPACE:
        split = 0
        work, _, _, _, n_slots = worklists.dsd_host(structure, trans, 0, cfg.group, pad)
    if not n_slots:  # no list longer than a segment: nothing to add up
        split = 0
    grid = (work.shape[0], row_tiles)
    if cfg.persistent:  # one 1-D grid walks every (work item, row tile), by clusters
        c = cfg.cluster
        grid = (min(grid[0] * -(-grid[1] // c) * c, persistent_ctas(cfg, sms)),)
    # The dense model's ratios are those of the other kernels; the panel kernel's time
    # follows the share of W its panels cover.
    rows, cols = structure.block_shape
    panel_ratio = (worklists.panel_cover(structure, trans, cfg.group, pad)
                   / panel_speed(b, structure.nnzb / (rows * cols)) if panel else None)
    dense, ratio = _dense_choice("matmul_t" if trans else "matmul", structure, name, b, n,
                                 tf32, dense_bytes_limit, panel_ratio)
    if dense:
        fill = _decide("fill", fill_pays, structure, b, _itemsize(name))
        return DsdPlan(product, n, name, b, "dense",
                       (fill_config if fill else scatter_config)(name, b), kn or trans, None,
                       0, 0, (), ratio)
    band = forced("band", DSD_PANEL_BAND if panel else 1) if cfg.tma else 1
    if not (isinstance(band, int) and band >= 1):
        raise ValueError(f"a band is at least one row tile, got band = {band!r}")
    band = min(band, max(1, row_tiles))  # (keeps band x work items within the kernel's int)
    return DsdPlan(product, n, name, b, "sparse", cfg, kn or trans,
                   w_copy, split, n_slots if split else 0, grid, ratio, band, pad)


def _wgmma_choice(structure, name: str, b: int, n: int, n_out: int, trans: bool, sms: int,
                  panels: bool) -> tuple[KernelConfig | None, bool]:
    """The Hopper step of :func:`plan_dsd`'s ladder: (the wgmma kernel or None, whether it
    reads W's blocks as stored)."""
    pcfg = wgmma_config(name, b, panel=True) if panels else None
    if pcfg is not None and _decide("panel", panel_pays, structure, trans, pcfg, b, n,
                                    persistent_ctas(pcfg, sms)):
        return pcfg, False  # panels read W's blocks transposed
    wcfg = wgmma_config(name, b)
    if wcfg is None:
        return None, False
    union = wcfg.group > 1
    if union and not _decide("union", union_pays, structure, trans, wcfg.group, n):
        union, wcfg = False, wgmma_config(name, b, union=False)
    kn = _decide("kn", lambda: b in WGMMA_DSD_KN or n <= WGMMA_DSD_KN_ROWS.get(b, 0))
    if kn and not trans:
        wcfg = wgmma_config(name, b, True, union)
    if wcfg.persistent and WGMMA_DSD_TALL.get(b) is not None:
        # Tall tiles read W as stored: at b = 64, 128 the block is the M-major A operand
        # of X @ W; b = 32 reads it as stored anyway.
        xcfg = wgmma_config(name, b, not trans, union, True)
        if _decide("tall", tall_pays, xcfg, n, n_out, persistent_ctas(xcfg, sms)):
            wcfg, kn = xcfg, True
            # two blocks per tile, else clusters of two CTAs, where each pays
            pcfg = wgmma_config(name, b, not trans, union, pair=True)
            if pcfg is not None and _decide("dsd_pair", dsd_pair_pays, pcfg, structure, trans,
                                            n, n_out, persistent_ctas(pcfg, sms)):
                return pcfg, True
            ccfg = wgmma_config(name, b, not trans, union, cluster=True)
            if ccfg is not None and _decide("cluster", cluster_pays, ccfg, structure, trans,
                                            b, n, n_out, persistent_ctas(ccfg, sms)):
                return ccfg, True
    return wcfg, kn


def plan_sdd(structure, dtype, b: int, inner: int, a_km: bool, b_nk: bool, tf32: bool,
             arch: int, sms: int, dense_bytes_limit: int | None = None) -> SddPlan:
    """The plan of ``(A @ B)`` sampled on the layout, A of ``inner`` columns, read as
    ``a_km`` / ``b_nk`` say (pure); ``arch`` and ``sms`` as for :func:`plan_dsd`."""
    name = dtype_name(dtype)
    tf32 = tf32 and name == "float32"
    tiled, wcfg = False, None
    # A short reduction at small blocks: dY's chunks in shared memory, W's blocks stored in
    # order; it beats the dense path there too (which writes the whole product), so no ratio.
    scfg = (sdd_stream_config(name, b, inner, arch) if a_km and not b_nk and arch >= 80
            else None)
    per_sm = smem_ctas(scfg, arch) if scfg is not None else 0
    if per_sm and structure.nnzb and _decide_ahead(
            "sdd_stream", (*_SDD_LATER, "sdd_panel", "dense"), sdd_stream_pays, structure,
            sdd_stream_tile(b, inner)):
        chunk, chunks, per_chunk = sdd_stream_grid(structure, scfg.group, per_sm * sms,
                                                   scfg.threads // 32)
        per_chunk = int(forced("sdd_stream_grid") or per_chunk)
        return SddPlan(name, b, "sparse", scfg, False, a_km, b_nk, False, None, per_chunk,
                       chunks, chunk)
    hopper = name in TC_TAGS and a_km and not b_nk and arch == 90
    pcfg = sdd_wgmma_config(name, b, panel=True) if hopper and not tf32 else None
    if tf32:  # TF32 reads A[m][k] and B[n][k]
        cfg, a_km, b_nk = sdd_config(name, b, tf32=True), False, True
    elif pcfg is not None and _decide_ahead("sdd_panel", _SDD_LATER, sdd_panel_pays,
                                            structure, pcfg, b, inner, sms):
        cfg = pcfg  # the dense panels, first where they pay
    else:
        wcfg = sdd_wgmma_config(name, b) if hopper else None
        tcfg = sdd_tile_config(name, b) if a_km and not b_nk and wcfg is None else None
        if tcfg is not None:
            tiled = _decide("sdd_tiled", sdd_tiled_pays, structure, name, b,
                            sdd_config(name, b, a_km, b_nk).group, inner)
        cfg = tcfg if tiled else (wcfg or sdd_config(name, b, a_km, b_nk))
    if cfg is wcfg and _decide("sdd_short", sdd_short_pays, inner):
        cfg = sdd_wgmma_config(name, b, True, SDD_ONE_SLICE_K if inner <= SDD_ONE_SLICE_K
                               else None) or cfg
    elif cfg is wcfg:
        # a longer reduction: the paired tile where pairs of block rows share their
        # columns; over a wide W the TMA kernel, else the wide tile (the same rule, each
        # its own decision)
        pcfg = sdd_wgmma_config(name, b, pair=True)
        if pcfg is not None and _decide("sdd_pair", sdd_pair_pays, structure, pcfg, cfg, sms,
                                            inner):
            cfg = pcfg
        else:
            for decision, kw in (("sdd_tma", {"tma": True}), ("sdd_wide", {"wide": True})):
                alt = sdd_wgmma_config(name, b, **kw)
                if alt is not None and _decide(decision, sdd_wide_pays, structure, b):
                    cfg = alt
                    break
    # a persistent grid: every CTA walks groups (or panel tiles)
    count = worklists.sdd_work_host(structure, cfg.group, cfg.block_rows, cfg.panel).shape[0]
    grid = min(count, persistent_ctas(cfg, sms)) if cfg.persistent else 0
    rows, cols = structure.block_shape
    panel_ratio = (count * cfg.block_rows * cfg.group / (rows * cols) / SDD_PANEL_SPEED
                   if cfg.panel else None)
    dense, ratio = _dense_choice("sampled", structure, name, b, inner, tf32, dense_bytes_limit,
                                 panel_ratio)
    if dense:
        return SddPlan(name, b, "dense", gather_config(name, b), False, a_km, b_nk, tf32, ratio)
    return SddPlan(name, b, "sparse", cfg, tiled, a_km, b_nk, tf32, ratio, grid)


#: The sdd kernels a plan weighs after the short-reduction kernel and the dense panels:
#: forcing one on keeps those two off where their own decisions are left to the rule.
_SDD_LATER = ("sdd_short", "sdd_tiled", "sdd_tma", "sdd_wide", "sdd_pair")


def _decide_ahead(name: str, rivals: tuple, rule, *args) -> bool:
    """A decision taken ahead of ``rivals``: as forced, else off while a rival is forced on
    (so that forcing a later kernel reaches it), else ``rule(*args)``."""
    if name in _FORCED:
        return bool(_FORCED[name])
    return not any(_FORCED.get(k) for k in rivals) and rule(*args)


def _itemsize(name: str) -> int:
    return 2 if name in TC_TAGS else np.dtype(name).itemsize


def _dense_choice(op: str, structure, name: str, b: int, n: int, tf32: bool,
                  limit: int | None, ratio: float | None = None) -> tuple[bool, float | None]:
    """(take the dense path, the model's sparse / dense time ratio) for ``op`` with ``n``
    rows (inner dimension for "sampled"). Dense where the ratio exceeds one plus the dense
    path's own overhead (moving the blocks) and its buffer fits ``limit`` (None: never).
    A ``ratio`` given replaces the dense model's."""
    rows, cols = structure.block_shape
    nnzb = structure.nnzb
    if ratio is None:
        ratio = dense_model.ratio(op, name, b, n,
                                  nnzb / (rows * cols) if rows * cols else 0.0, tf32)
    if limit is None or nnzb == 0:
        return False, ratio
    force = _FORCED.get("dense")
    if force is not None:
        return bool(force), ratio
    if ratio is None or rows * cols * b * b * _itemsize(name) > limit:
        return False, ratio
    overhead = dense_model.overhead(name, rows * b, cols * b, n, nnzb * b * b)
    return ratio > 1.0 + overhead, ratio
