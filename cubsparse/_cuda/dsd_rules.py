"""When each dsd kernel pays: the rules a plan (:mod:`.plans`) reads for ``Y = X @ op(W)``.

Each constant states a rule with the measurement behind its value; the functions apply
them to a layout's cached statistics. Tools and tests force the decisions they feed
through :func:`.decisions.override`.
"""

from __future__ import annotations

import numpy as np

from . import worklists
from .configs import KernelConfig

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
#: The same panels over whole 64-column slices of X (``panel_whole``) multiply every
#: block row of each slice the union touches, at one copy of X per slice where the
#: union's entries take one each (8 a slice at b = 8, 4 at b = 16, 2 at b = 32): their
#: speed per MMA is the entries' times this gain, the median of the ratio over random,
#: Barabási-Albert, Watts-Strogatz and banded layouts on an H200 (N = C = K = 8192, fp16,
#: d = 0.05-0.5; 1.33-1.83 at b = 8, 1.05-1.40 at b = 16, 1.01-1.13 at b = 32; whole
#: slices ran at 0.86-0.93 of cuBLAS per MMA wherever lists were long).
PANEL_WHOLE_GAIN = {8: 1.42, 16: 1.13, 32: 1.05}
#: Over whole slices the panels' speed per MMA (for the dense path's choice) follows how
#: long their lists are, the share of W's block grid they cover, more than W's density:
#: (cover, speed) points, interpolated in log cover and held at the ends. From the H200
#: sweep at 5d0ea25 (N = C = K = 8192, both products, float16 and bfloat16, eager; the
#: panels storing Y by TMA): 0.65-0.73 at a cover of 0.08-0.09 (banded, d = 0.05),
#: 0.79-0.86 at 0.14, 0.93-0.99 at 0.28, 0.99-1.06 at 0.52 and 0.94-1.13 where the panels
#: cover all of W; held at 1.0 above.
PANEL_WHOLE_SPEED = ((0.08, 0.68), (0.136, 0.8), (0.28, 0.94), (0.5, 1.0))
#: The persistent TMA dsd kernel takes its tiles row tile by row tile, every work item of
#: one before the next, so the CTAs running at one time share X's rows. Its dense panels
#: instead take bands of this many row tiles, group by group within a band, so that the
#: CTAs also share the panels: at b = 32 on an H100 (N = C = K = 8192, fp16) the panels of
#: a banded layout at d = 0.5 (70 MB, more than L2 holds) ran 1.6 ms with bands of 1 row
#: tile and 0.92 ms with 8; bands of 2 / 4 / 8 gave medians of 0.55 / 0.58 / 0.60 of dense
#: on banded layouts. The tall tiles ran slower in bands (b = 64: 0.50 -> 0.47 with 4).
DSD_PANEL_BAND = 8
#: The persistent TMA dsd kernel hands out its tiles row tile by row tile, each row tile's
#: longest lists first, so a list far longer than a CTA's share of one row tile, as a
#: scale-free layout's hub has, starts near the end and runs on alone while the other SMs
#: idle. The plan then has the tiles taken by deadline (:func:`.worklists.tile_order`): a
#: tile is due ORDER_SLACK times its cost before the end of its row tile's share of the
#: launch, a cost being its list's blocks plus ORDER_TILE_COST for its epilogue. It does
#: so where the longest list's cost passes the shortest's by more than ORDER_MIN_SPREAD
#: shares (one taker's: a CTA's, or a cluster's, of a row tile's work). On an H200 at
#: N = C = K = 8192 (both products, random, Barabási-Albert, Watts-Strogatz and banded
#: layouts, d = 0.05-0.5, in one process against the row-tile order): at spreads of
#: 5.2-10.4 shares (Barabási-Albert at d <= 0.1) 0.99-1.16x, 1.04-1.16x at b = 128; at
#: 2.4-3.9 (random layouts at d <= 0.1) 0.98-1.03x; below 2 shares 0.97-1.06x
#: (bench/NOTES.md 245-246).
ORDER_SLACK = 1.5
ORDER_TILE_COST = 1.0
ORDER_MIN_SPREAD = 4.5
#: Tiles per persistent CTA below which the tall tiles are not used.
TALL_MIN_WAVES = 2
#: Mean reduction depth (list length x b, rows of W) from which the tall tile runs in
#: clusters of two CTAs sharing W's blocks by multicast: a cluster's CTAs wait for each
#: other at every stage, which short lists pay for (N = C = K = 8192, b = 64 and 128, against
#: the tall tile, on an H100: 0.85-0.89x at depth 410, 0.92-0.96x at 819, 1.01-1.03x at
#: 2048, 1.03-1.08x at 4096; again on an H200 with the TMA-store epilogue, bench/NOTES.md
#: 241: 0.75-1.01x at depths 410-819, 1.02x and 1.05x at 2032 (banded and Barabasi-Albert
#: layouts at b = 128, d = 0.25, which 2048 left out), 1.00-1.02x at 2048-2100).
CLUSTER_MIN_DEPTH = 1792
#: Stored blocks per union-list entry (1-2) from which the two-block dsd tile
#: (tiles.WGMMA_DSD_PAIR) replaces the tall tile: an entry costs its X slice once for both
#: blocks, and an absent block costs MMAs on zeros.
DSD_PAIR_MIN_SHARING = 1.5
#: The two-block tile takes its tiles in bands of DSD_PAIR_BAND row tiles too, where W's
#: stored blocks pass DSD_PAIR_BAND_MIN_BYTES (about half the L2 of an H100 or H200): the
#: CTAs then re-read a pair's blocks for neighbouring row tiles while L2 still holds them,
#: where row tile by row tile every row tile streamed all of W. On an H200 at
#: N = C = K = 8192 (fp16, b = 64, banded and Watts-Strogatz layouts), bands of 2 / 4 / 8
#: against one row tile: d = 0.25 (W 34 MB) 1.02-1.04 / 1.03-1.08 / 1.02-1.10x, d = 0.5
#: 1.03-1.08 / 1.05-1.12 / 1.04-1.12x, d = 0.1 (13 MB) 0.99-1.00 / 0.99-1.00 / 0.97-1.01x.
#: The single-block tiles gained nothing from bands (random and Barabási-Albert b = 64,
#: d = 0.25: 0.97-1.00x with 4), nor the clustered ones much (b = 128, d >= 0.25:
#: 0.90-1.04x), whose clusters already share W's blocks (bench/NOTES.md 248-249).
DSD_PAIR_BAND = 4
DSD_PAIR_BAND_MIN_BYTES = 24 << 20
#: Fraction of the SMs the regular mma.sync / CUDA-core dsd tiles must fill; with fewer
#: CTAs the short (SMALL_ROWS) tiles are taken at any number of rows.
SHORT_FILL = 1.0
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
#: The persistent single-block tiles of b >= 64 keep their lists whole where X fills at
#: least SPLIT_WHOLE_FILL of their row tiles, there are at least SPLIT_WHOLE_MIN_TILES
#: tiles and no list is longer than SPLIT_WHOLE_MAX_LIST: a segment's partial (rows x b
#: float32, written, then read back by the list's last CTA) then costs more than idle SMs
#: do. Measured on square W at N = 96-256 with 16-64 tiles and lists of up to 40 blocks:
#: whole lists ran 0.49-0.96x the split's time in every case (H100, bench/NOTES.md 192).
#: Outside those bounds (fewer rows, a narrow W's few long lists) the idle rule below
#: still splits.
SPLIT_WHOLE_FILL = 0.75
SPLIT_WHOLE_MIN_TILES = 16
SPLIT_WHOLE_MAX_LIST = 48
#: ... but at b = 128, within those bounds and at most SPLIT_MEAN_MAX_ROWS rows of X (one
#: row tile), lists averaging SPLIT_MEAN_LIST blocks (the mean of the lists that have
#: any) are cut at the largest power of two no longer than their mean: only the longer
#: lists split, once or twice, and their tiles no longer finish last. On an H200 at
#: N = 96 and 128, C = K = 4096-16384 (32-128 tiles for 264 CTA slots), d = 0.25-0.5,
#: that ran 1.01-1.18x faster than whole lists; lists averaging 64 blocks ran fastest
#: whole, and b = 64 (128-256 tiles) too (bench/NOTES.md).
SPLIT_MEAN_MAX_ROWS = 128
SPLIT_MEAN_LIST = (16, 48)
#: One SM's share of the device's memory bandwidth, bytes per microsecond (H100/H200:
#: 3.3-4.8 TB/s over 132 SMs).
SM_BYTES_PER_US = 30_000
#: The stream-K runs of the small-N TMA tile hold at least this many list entries: at
#: b = 128, C = K = 8192, d = 0.1 (410 entries) runs of 1.6 entries on 264 CTAs ran
#: 0.77-0.99x the split tile kernels' lists of four (bench/NOTES.md).
STREAMK_MIN_RUN = 4
#: ... and take X of at least this many rows, by block size: up to 32 rows at b = 32 the
#: stream kernel (X in shared memory) ran 1.0-1.6x the b = 32 tile's runs, from 33 rows
#: the runs 1.0-1.6x the stream and mma.sync kernels (H200, bench/NOTES.md).
STREAMK_MIN_ROWS = {32: 33}
#: ... and W of at least this many bytes of blocks: at C = K = 8192, d = 0.1 (13.4 MB) the
#: runs ran 0.8-1.0x the tile kernels at b = 32 and 0.92-1.0x at b = 128 (1.05-1.18x at
#: b = 64), from 30 MB (C = K = 12288, d = 0.1) 1.0-1.3x at both; b = 64 below 8 MB was
#: not measured, so it keeps the tile kernels there.
STREAMK_MIN_BYTES = {32: 20 << 20, 64: 8 << 20, 128: 20 << 20}
#: ... but on layouts whose longest list passes STREAMK_SKEW times the mean (Barabási-
#: Albert at d = 0.1: 3.0-3.8; random ones at most 2.2) from this many: there at
#: C = K = 8192 (14 MB) the runs ran 1.4-1.8x at b = 32 and 1.07-1.24x at b = 128, at
#: C = K = 4096 (3 MB) 0.55-1.03x (H200, bench/NOTES.md).
STREAMK_SKEW = 2.5
STREAMK_MIN_BYTES_SKEWED = 8 << 20
#: A launch covers at most this many row tiles (the grid's y limit).
MAX_GRID_Y = 65535
#: Bytes of float32 partial sums a split product may use.
MAX_WORKSPACE = 256 << 20
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
#: The least count of W's blocks the small-N dsd's tile takes, by the tile's key; others
#: take any. Past 64 rows a run's partial products (rows x its group's columns in float32)
#: weigh as much as many blocks, so few blocks are faster on the tile kernels: 6,554 and
#: 13,107 blocks were, 26,214 and more were not (the bound lies between; b = 8, 128 rows).
STREAM_MIN_BLOCKS = {(8, 128): 18432}
#: The least share of the device's CTA slots (as many a SM as hold the tile, at most
#: STREAM_CTAS_PER_SM) the tile's grid of groups x the rule's runs fills, by the tile's
#: key; others take any. b = 8's 128-row tile filled
#: 256 of an H200's 264 slots at C = K = 2048-8192 and 16384 and there beat the dense path
#: (W scattered or written whole, then cuBLAS) by 1.07-1.4x; at C = K = 12288 its 96
#: groups make 192 CTAs, and the dense path was up to 1.16x faster (bench/NOTES.md). The
#: small-N dsd's plans do not weigh the dense path, so the tile runs where it fills the
#: device.
STREAM_MIN_GRID_FILL = {(8, 128): 0.9}
#: The least compute capability a tile of the small-N dsd runs on, by the tile's key;
#: others run wherever their shared memory fits. The bounds above were measured on Hopper
#: (two CTAs an SM); elsewhere the tile kernels keep those rows.
STREAM_MIN_ARCH = {(8, 128): 90}
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


def split_rule(lens: np.ndarray, cfg: KernelConfig, b: int, rows: int, sms: int,
               tc: bool, itemsize: int) -> int:
    """Longest list a CTA of ``cfg`` takes (0: lists whole) for lists of ``lens`` entries
    and ``rows`` rows of X: split where the SMs would idle or the longest list would be
    slow (SPLIT_FILL ... SPLIT_MIN_US, a list's time from its bytes at SM_BYTES_PER_US),
    in segments of :func:`split_length`, longer for small blocks, whose entries carry
    fewer bytes; not on a persistent tile of b >= 64 within the SPLIT_WHOLE_* bounds, but
    at the mean list length on b = 128's within the SPLIT_MEAN_* bounds."""
    row_tiles = -(-rows // cfg.rows_per_cta)
    longest = int(lens.max()) if lens.size else 0
    filled = (cfg.persistent and b >= 64 and rows >= SPLIT_WHOLE_FILL * cfg.rows_per_cta
              and lens.size * row_tiles >= SPLIT_WHOLE_MIN_TILES)
    if filled and b == 128 and rows <= SPLIT_MEAN_MAX_ROWS and row_tiles == 1:
        mean = float(lens[lens > 0].mean()) if lens.any() else 0.0
        if SPLIT_MEAN_LIST[0] <= mean <= SPLIT_MEAN_LIST[1]:
            return 1 << int(np.log2(mean))
    if filled and longest <= SPLIT_WHOLE_MAX_LIST:
        return 0
    shortest = max(4, 256 // b) if tc else max(1, 4096 // (b * b))
    slots = max(2, 512 // cfg.threads) * sms
    entry_bytes = (cfg.group * b * b + cfg.rows_per_cta * b) * itemsize
    longest_us = longest * entry_bytes / SM_BYTES_PER_US
    fill, min_us = ((SPLIT_FILL_PERSISTENT, SPLIT_IDLE_MIN_US_PERSISTENT) if cfg.persistent
                    else (SPLIT_FILL, SPLIT_IDLE_MIN_US) if tc
                    else (SPLIT_FILL_SIMT, SPLIT_IDLE_MIN_US_SIMT))
    idle = lens.size * row_tiles < fill * sms and longest_us > min_us
    slow = not cfg.persistent and longest_us > SPLIT_MIN_US
    return split_length(lens, row_tiles, slots, shortest) if idle or slow else 0


def group_pays(structure, trans: bool, group: int) -> bool:
    """The grouped mma.sync dsd's X slices feed at least GROUP_MIN_SHARING members."""
    return worklists.sharing(structure, trans, group) >= GROUP_MIN_SHARING


def fill_pays(structure, b: int, itemsize: int) -> bool:
    """The dense path writes W whole (FILL_MIN_DENSITY): its block rows are short and W is
    dense enough."""
    rows, cols = structure.block_shape
    least = FILL_MIN_DENSITY.get(b * itemsize)
    return least is not None and rows * cols > 0 and structure.nnzb >= least * rows * cols


def stream_pays(structure, groups: int, chunks: int, sms: int, key: tuple,
                grid_fill: float, arch: int) -> bool:
    """The small-N dsd with X in shared memory has at least STREAM_MIN_FILL x ``sms`` pairs
    of a group of output blocks and a chunk of X's block columns to share out, W has
    blocks, W is as dense as STREAM_MIN_DENSITY asks of its tile (``key``) and has
    STREAM_MIN_BLOCKS blocks, its grid fills ``grid_fill`` of the device's CTA slots, at
    least STREAM_MIN_GRID_FILL, and the device's ``arch`` is at least STREAM_MIN_ARCH."""
    rows, cols = structure.block_shape
    return (structure.nnzb > 0 and groups * chunks >= STREAM_MIN_FILL * sms
            and structure.nnzb >= STREAM_MIN_DENSITY.get(key, 0.0) * rows * cols
            and structure.nnzb >= STREAM_MIN_BLOCKS.get(key, 0)
            and grid_fill >= STREAM_MIN_GRID_FILL.get(key, 0.0)
            and arch >= STREAM_MIN_ARCH.get(key, 0))


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
    return _log_interp(PANEL_SPEED.get(b, ((1.0, 0.5),)), density)


def _log_interp(points, x: float) -> float:
    """(x, y) ``points`` interpolated at ``x`` in log x, held at the ends."""
    p = np.array(points)
    return float(np.interp(np.log(max(x, 1e-9)), np.log(p[:, 0]), p[:, 1]))


def panel_time(structure, trans: bool, group: int, b: int, pad: int, whole: bool) -> float:
    """The dense panels' predicted time against dense cuBLAS's: the share of W's block
    grid they cover (the lists padded to ``pad`` entries, or widened to whole slices of
    it) over their speed per MMA (:func:`panel_speed`; over whole slices of X,
    :data:`PANEL_WHOLE_SPEED` at their cover)."""
    rows, cols = structure.block_shape
    cover = worklists.panel_cover(structure, trans, group, pad, whole)
    speed = (_log_interp(PANEL_WHOLE_SPEED, cover) if whole else
             panel_speed(b, structure.nnzb / (rows * cols) if rows * cols else 0.0))
    return cover / speed


def panel_whole_pays(structure, trans: bool, group: int, b: int) -> bool:
    """The panels over whole slices of X are predicted faster than over the union lists'
    entries: whole slices cover less than PANEL_WHOLE_GAIN times the entries' share of W.
    On the H200 sweep behind the gain this took the faster form in 45 of the 48 cases (the
    other three within 7 %)."""
    pad = 64 // b
    return (worklists.panel_cover(structure, trans, group, pad, True)
            < PANEL_WHOLE_GAIN.get(b, 1.0) * worklists.panel_cover(structure, trans, group, pad))


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


def streamk_ctas(entries: int, slots: int) -> int:
    """CTAs of the stream-K runs over ``entries`` list entries on ``slots`` CTA slots: a
    slot each, but no run shorter than STREAMK_MIN_RUN entries (a short run's partial
    tile and its fill cost as much as its blocks)."""
    return max(1, min(slots, entries // STREAMK_MIN_RUN))


def streamk_pays(structure, trans: bool, n: int, b: int, slots: int) -> bool:
    """The small-N TMA tile in runs of equal entries (stream-K) for ``n`` rows of X: W has
    blocks, at least STREAMK_MIN_BYTES of them in 16-bit (STREAMK_MIN_BYTES_SKEWED where
    the longest list passes STREAMK_SKEW times the mean, which the runs share out and the
    tile kernels leave to one CTA), X at least STREAMK_MIN_ROWS rows, and the float32
    partials of its ``slots`` cut lists fit MAX_WORKSPACE."""
    if not (structure.nnzb > 0 and n >= STREAMK_MIN_ROWS.get(b, 1)
            and slots * n * b * 4 <= MAX_WORKSPACE):
        return False
    least = STREAMK_MIN_BYTES.get(b, 0)
    if least:
        lens = worklists.list_lengths(structure, trans, 1)
        lens = lens[lens > 0]
        if lens.max() > STREAMK_SKEW * lens.mean():
            least = min(least, STREAMK_MIN_BYTES_SKEWED)
    return structure.nnzb * b * b * 2 >= least


def short_pays(cfg: KernelConfig, n: int, n_out: int, sms: int) -> bool:
    """The regular tiles of ``cfg`` leave SMs idle: ``n`` rows of X in tiles of
    ``cfg.rows_per_cta`` over ``n_out`` output blocks make fewer than SHORT_FILL x ``sms``
    CTAs (a narrow W at a few hundred rows), so the short tiles, two to four times as many
    CTAs, spread the same work wider. Without output blocks there is nothing to spread."""
    return n_out > 0 and -(-n // cfg.rows_per_cta) * n_out < SHORT_FILL * sms


def tile_queue(cfg: KernelConfig, n: int, grid: tuple) -> tuple[int, int]:
    """(row tiles, takers) of the persistent TMA dsd's tile queue for ``n`` rows of X on
    ``grid``: a cluster's CTAs share a row tile of ``cluster`` x ``rows_per_cta`` rows and
    take their tiles together, as the kernel counts them."""
    return -(-n // (cfg.rows_per_cta * cfg.cluster)), grid[0] // cfg.cluster


def order_pays(lens: np.ndarray, row_tiles: int, takers: int) -> bool:
    """Take the tiles by deadline: for lists of ``lens`` blocks over ``row_tiles`` row
    tiles and ``takers`` persistent CTAs (or clusters), the longest list passes the
    shortest by more than ORDER_MIN_SPREAD of one taker's share of a row tile
    (:func:`.worklists.tile_costs`, as the order itself counts it)."""
    if lens.size < 1 or row_tiles < 2 or takers < 1:
        return False
    share = worklists.tile_costs(lens, takers, ORDER_TILE_COST)[1]
    return float(lens.max() - lens.min()) > ORDER_MIN_SPREAD * share


def tile_band(structure, cfg: KernelConfig, b: int, itemsize: int) -> int:
    """Row tiles per band of the TMA dsd kernel's tile order for the tile ``cfg``:
    DSD_PANEL_BAND for the dense panels, DSD_PAIR_BAND for the two-block tile over a W of
    more than DSD_PAIR_BAND_MIN_BYTES, else 1 (row tile by row tile)."""
    if cfg.panel:
        return DSD_PANEL_BAND
    if cfg.group > 1 and structure.nnzb * b * b * itemsize > DSD_PAIR_BAND_MIN_BYTES:
        return DSD_PAIR_BAND
    return 1
