"""Tile configurations of the CUDA kernels, as named records kept as data.

Each table maps a block size to the tile its kernel family runs (``None``: that family
is not used for the block size). The values are the fastest of the variants timed on an
H200; ``bench/NOTES.md`` records each variant, its prediction and its outcome.
:mod:`.configs` turns a tile into a kernel instance; :func:`.configs.set_tiles` replaces
entries for tuning.
"""

from __future__ import annotations

from typing import NamedTuple


# -- tile records ------------------------------------------------------------------------
class MmaTile(NamedTuple):
    """mma.sync dsd (``rows`` of X per CTA) or sdd (``rows`` = blocks per CTA)."""

    rows: int
    warps_m: int
    warps_n: int
    k: int  # depth per stage
    stages: int


class StreamTile(NamedTuple):
    """The small-N dsd that keeps X in shared memory (``dsd_stream``): X is staged ``chunk``
    of its block columns at a time, a CTA owns ``group`` output blocks, and W's blocks are
    copied ``entries`` at a time in a ring of ``stages`` (with as many chunks of X); a CTA
    takes at most ``max_run`` chunks."""

    chunk: int
    group: int
    entries: int
    stages: int
    max_run: int


class GroupTile(NamedTuple):
    """mma.sync dsd for small blocks: a group of adjacent output blocks shares X slices."""

    group: int
    rows: int
    warps_m: int
    warps_n: int
    entries: int  # list entries per stage
    stages: int


class WgmmaTile(NamedTuple):
    """Hopper single-block wgmma dsd, one output block per CTA (not persistent)."""

    m_tiles: int  # 64-row tiles per warpgroup
    warpgroups: int
    stages: int


class PersistentTile(NamedTuple):
    """Hopper persistent, warp-specialized single-block dsd."""

    m_tiles: int  # 64-row tiles per consumer warpgroup
    warpgroups: int  # consumer warpgroups
    stages: int
    ctas_per_sm: int
    inflight: int = 1  # slices of wgmmas a consumer keeps running
    tma: bool = False  # copies by the TMA engine (dsd_wgmma_tma), else cp.async
    rows: int = 0  # > 0 (b = 64, 128, TMA): rows of X per tile as wgmma's N
    cluster: int = 1  # > 1 (TMA): CTAs of a cluster sharing each block by multicast
    # > 1 (TMA): output blocks per tile, at b = 64 (rows > 0) one warpgroup each, at b <= 32
    # (rows = 0, the WGMMA_DSD_PANEL_TMA table) multiplied as one dense panel
    cols: int = 1
    # > 0: Y stored by TMA through shared memory: with rows > 0, rows of Y per round of
    # the store (64 columns x 2 bytes a row per consumer warpgroup); for the panels
    # (rows = 0) 64, boxes of 64 x 64 per warpgroup; 0: each thread stores its results
    # from registers
    epilogue: int = 0


class UnionTile(NamedTuple):
    """Hopper persistent grouped dsd: G output blocks walk the union of their lists."""

    group: int
    m_tiles: int
    consumer_wgs: int
    stages: int
    ctas_per_sm: int
    producers: int = 1  # copying warpgroups (more than one: the panel form only)


class SddWgmmaTile(NamedTuple):
    """Hopper wgmma sdd; ``flip`` stacks the group's blocks as wgmma's M (b <= 32); ``k``
    rows of the reduction per pipeline stage."""

    group: int
    wg_m: int
    wg_n: int
    stages: int
    flip: bool
    k: int = 64


class SddStreamTile(NamedTuple):
    """The weight gradient of a short reduction (``sdd_stream``): a CTA copies ``chunk`` of
    dY's block columns (all rows of the reduction) into shared memory once and stores the
    blocks of many block rows in that chunk. The plan takes it ahead of every other sdd
    kernel and the dense path where W's density is at least ``least_density`` (``inf``:
    only when forced) and W holds at least ``least_blocks`` blocks."""

    chunk: int
    least_density: float = 0.0
    warps: int = 8  # each walks its own block rows, with its own slice of X
    least_blocks: int = 0


class SddTile(NamedTuple):
    """Tiled small-block sdd on tensor cores: a CTA per tile of the block grid."""

    block_rows: int
    block_cols: int
    k: int
    warps_m: int
    warps_n: int
    stages: int


class SddSimtTile(NamedTuple):
    """Tiled small-block sdd on CUDA cores: one thread per 8 x 8 unit of stored blocks."""

    block_rows: int
    block_cols: int
    k: int
    stages: int


class SimtTile(NamedTuple):
    """CUDA-core dsd (``rows`` of X per CTA) or sdd (``rows`` = blocks per CTA)."""

    rows: int
    rows_per_thread: int
    cols_per_thread: int
    k: int
    stages: int


# -- the tables --------------------------------------------------------------------------
DSD_TC = {8: MmaTile(256, 8, 1, 32, 4), 16: MmaTile(256, 8, 1, 32, 4),
          32: MmaTile(256, 4, 1, 32, 4), 64: MmaTile(128, 4, 2, 64, 3),
          128: MmaTile(128, 2, 2, 64, 3)}
#: At most this many rows of X the product is memory-bound: short tiles (no MMA wasted on
#: absent rows) and deep pipelines that keep many bytes of W in flight.
SMALL_ROWS = 64
DSD_TC_SMALL = {8: MmaTile(64, 4, 1, 64, 6), 16: MmaTile(64, 4, 1, 64, 6),
                32: MmaTile(64, 4, 1, 64, 6), 64: MmaTile(64, 2, 2, 64, 6),
                128: MmaTile(64, 1, 4, 64, 4)}
SDD_TC = {8: MmaTile(16, 1, 4, 32, 4), 16: MmaTile(16, 1, 4, 32, 4),
          32: MmaTile(8, 1, 4, 32, 4), 64: MmaTile(2, 1, 2, 32, 4),
          128: MmaTile(1, 2, 2, 32, 4)}
DSD_GROUP = {8: GroupTile(16, 128, 4, 2, 4, 4)}
#: The small-N dsd with X in shared memory, by (block size, rows of X up to; no tile past
#: the largest): two CTAs fit an SM, so X's chunks narrow as its rows grow, and at
#: b = 16 past 16 rows a CTA's accumulators cover 16 output blocks (32 spilled registers).
#: b = 32 runs groups of 8 output blocks: more CTAs, and one output block a warp. b = 64
#: has no tile: its tile kernels were faster but for X @ W at high density (bench/NOTES.md).
#: Only b = 8 has a tile past 64 rows: there its tile kernels read X's slice once per
#: block, 16 times the block's own bytes, and the tile above runs 1.4-2.6x faster than
#: they do; at b = 16 and 32 the tile kernels stay faster.
DSD_STREAM = {(8, 16): StreamTile(64, 32, 128, 3, 64), (8, 32): StreamTile(32, 32, 128, 3, 64),
              (8, 64): StreamTile(16, 32, 128, 3, 64), (8, 128): StreamTile(8, 16, 128, 3, 128),
              (16, 16): StreamTile(16, 32, 48, 3, 64), (16, 32): StreamTile(16, 16, 32, 3, 64),
              (16, 64): StreamTile(8, 16, 32, 3, 64),
              (32, 16): StreamTile(16, 8, 8, 3, 64), (32, 32): StreamTile(8, 8, 8, 3, 64),
              (32, 64): StreamTile(4, 8, 8, 3, 64)}
WGMMA_DSD = {8: None, 16: WgmmaTile(1, 2, 4), 32: WgmmaTile(1, 2, 5), 64: WgmmaTile(1, 2, 4),
             128: WgmmaTile(1, 2, 4)}
#: Block sizes whose X @ W on a wgmma kernel reads W's blocks as stored (an N-major B
#: tile) rather than a block-transposed copy made per call ...
WGMMA_DSD_KN = {16, 32}
#: ... and, per block size, for at most this many rows of X: the transpose pass reads and
#: writes all of W, which at small N costs more than reading W as stored loses.
WGMMA_DSD_KN_ROWS = {64: 1024, 128: 128}
#: Where set, replaces WGMMA_DSD for the block size.
WGMMA_DSD_WS = {32: PersistentTile(2, 1, 3, 3, 0), 64: PersistentTile(2, 1, 4, 2, 0, True),
                128: PersistentTile(2, 1, 3, 2, 0, True)}
#: Taller tiles, taken where every CTA gets enough of them (dsd_rules.tall_pays): a tile
#: re-reads its block column's W blocks from L2, so taller tiles read W fewer times. At
#: b = 64 and 128 the epilogue stores Y by TMA in rounds of 128 and 64 rows, the most
#: that fits beside the stages (1.02-1.24x the register stores, bench/NOTES.md).
WGMMA_DSD_TALL = {32: PersistentTile(4, 2, 3, 1, 0, True),
                  64: PersistentTile(1, 1, 2, 2, 0, True, 256, epilogue=128),
                  128: PersistentTile(1, 2, 4, 1, 1, True, 256, epilogue=64)}
#: The tall tiles in clusters of two CTAs, neighbouring row tiles of one output block
#: column, which copy half of each W block and multicast it to both: W's bytes from L2
#: halve. Taken where there are row tiles for both (dsd_rules.cluster_pays).
WGMMA_DSD_CLUSTER = {32: None, 64: PersistentTile(1, 1, 2, 2, 0, True, 256, 2, epilogue=128),
                     128: PersistentTile(1, 2, 4, 1, 1, True, 256, 2, epilogue=64)}
#: Tiles of two neighbouring output blocks walking the union of their lists (each X slice
#: read once for both), taken where the two share enough of their lists
#: (dsd_rules.dsd_pair_pays), storing by TMA in rounds of 64 rows.
WGMMA_DSD_PAIR = {64: PersistentTile(1, 2, 4, 1, 1, True, 256, 1, 2, epilogue=64)}
#: The small-N tiles of the TMA kernel, by (block size, rows of X up to), X's rows as
#: wgmma's N (b = 64, 128; as M in b = 32's tile of 64 rows, rows 0): at most SMALL_ROWS
#: rows the products are bound by reading W, so the plan
#: cuts the lists into one run of equal entries per CTA (stream-K,
#: :func:`.worklists.streamk_host`) and each CTA streams its blocks through deep stages.
#: On an H200 (C = K = 8192 / 12288, d = 0.1-0.5, random, fp16, CUDA graphs) against the
#: split tile kernels: 1.1-1.7x at d >= 0.25; b = 128 keeps one CTA an SM with 8-10
#: stages (1.03-1.2x two CTAs of 4-5 at d >= 0.25), b = 64 two of 6-8 (one of 12-16 ran
#: 0.8-0.95x). A 128-row tile for 65-128 rows lost to the tall tile's whole lists
#: (0.6-1.1x): there X's slices are as many bytes as W's blocks (bench/NOTES.md).
WGMMA_DSD_SMALL = {(32, 64): PersistentTile(1, 1, 5, 3, 0, True, 0),
                   (64, 32): PersistentTile(1, 1, 8, 2, 0, True, 32),
                   (64, 64): PersistentTile(1, 1, 6, 2, 0, True, 64),
                   (128, 32): PersistentTile(1, 2, 10, 1, 0, True, 32),
                   (128, 64): PersistentTile(1, 2, 8, 1, 0, True, 64)}
#: Where set, replaces the kernels above when neighbouring output columns share enough
#: of their lists (dsd_rules.union_pays).
WGMMA_DSD_UNION = {16: UnionTile(16, 2, 2, 4, 1)}
#: The union kernel with its members' blocks multiplied as one dense panel (absent blocks
#: as zeros): replaces every kernel above where the members fill enough of the panel
#: (dsd_rules.panel_pays). A consumer warpgroup's panel is group / consumer_wgs * b columns
#: wide (wgmma's N, at most 256). b = 16 copies with two producer warpgroups, whose
#: registers go to the consumers (1.0-1.18x on an H100; no gain at b = 8 and 32).
WGMMA_DSD_PANEL = {8: UnionTile(32, 2, 2, 3, 1), 16: UnionTile(16, 2, 2, 4, 1, 2),
                   32: UnionTile(8, 2, 2, 4, 1)}
#: The panels of WGMMA_DSD_PANEL on the TMA kernel (dsd_wgmma_tma with ``cols`` > 1 and
#: ``rows`` = 0: X's rows as M, a panel of ``cols`` blocks as N, gathered per call): where
#: set, it replaces the union kernel's panel form for the block size. On an H100
#: (N = C = K = 8192, fp16, medians over d = 0.05-0.5, tiles in bands of 8 row tiles) it
#: ran banded layouts at 0.60 of dense at b = 32, 0.41 at b = 16 and 0.26 at b = 8, where
#: the union kernel ran 0.39, 0.30 and 0.18; clusters of two CTAs sharing the panels by
#: multicast were no faster once the tiles came in bands, and 3 stages were slower.
#: Y goes out by the TMA engine in boxes of 64 x 64 (``epilogue`` 64): on an H100 (same
#: shapes, random / Watts-Strogatz / banded, both products) 1.08-1.39x the register
#: stores wherever lists are short (banded, Watts-Strogatz at b >= 16; the most at
#: d = 0.05), 0.99-1.01x on random layouts (bench/NOTES.md).
WGMMA_DSD_PANEL_TMA = {8: PersistentTile(1, 2, 4, 1, 1, True, 0, 1, 32, 64),
                       16: PersistentTile(1, 2, 4, 1, 1, True, 0, 1, 16, 64),
                       32: PersistentTile(1, 2, 4, 1, 1, True, 0, 1, 8, 64)}
#: b = 16 and 32 take shallow stages (more CTAs per SM): at C = K >= 8192 their X and dY
#: slices come from memory, not L2, and want more copies in flight.
WGMMA_SDD = {8: None, 16: SddWgmmaTile(8, 2, 1, 3, True, 32), 32: SddWgmmaTile(4, 1, 1, 4, True),
             64: SddWgmmaTile(2, 1, 1, 4, False), 128: SddWgmmaTile(1, 2, 1, 5, False)}
#: The same for short reductions (sdd_rules.sdd_short_pays: a small-N weight gradient), run on a
#: grid sized to the device. Such a product is bound by storing the blocks: shallow stages
#: that fit more CTAs per SM beat deep pipelines. A reduction of at most
#: sdd_rules.SDD_ONE_SLICE_K rows takes slices of that depth instead of ``k``.
#: b = 128 takes one warpgroup a CTA (both m64 halves of the block in its registers) and
#: four stages 32 deep: three CTAs an SM by shared memory, and registers hold all three,
#: where two warpgroups and three stages planned four and held two. On an H200 (fp16,
#: random layouts, C = K = 8192 and 12288, d = 0.1-0.5, CUDA graphs, bench/NOTES.md 288)
#: 1.10-1.25x faster at 1-32 rows, 1.02-1.23x at 64-128 rows; 64 deep, the same tile held
#: one CTA an SM past 32 rows and ran 1.4-1.9x slower there.
WGMMA_SDD_SHORT = {8: None, 16: SddWgmmaTile(16, 2, 1, 3, True, 32),
                   32: SddWgmmaTile(4, 2, 1, 3, True), 64: SddWgmmaTile(2, 1, 1, 3, False),
                   128: SddWgmmaTile(1, 1, 1, 4, False, 32)}
#: The second part of the weight gradient in two parts (sdd_wgmma_rest: a block row's blocks
#: that the dense panels leave, a few per row, the reduction split across CTAs), per block
#: size; the same record as WGMMA_SDD. Its copies are 32- or 64-byte pieces of rows spread
#: over X and dY, so a CTA keeps many slices in flight: one warpgroup, 6 or 8 stages of
#: 32-deep slices. On an H200 (N = C = K = 8192, fp16, Watts-Strogatz, Barabási-Albert,
#: random and banded layouts), against WGMMA_SDD's tiles with the same split: b = 16
#: (theirs: 8 blocks, two warpgroups, 3 stages) 0.98-1.6x as fast on Watts-Strogatz and
#: banded layouts, up to 1.1x slower on random and Barabási-Albert ones; b = 32 (theirs:
#: 4 blocks, 4 stages of 64) 1.04-1.9x faster. Of 20 forms each (bench/NOTES.md 229) these
#: came within 1.11x of the best on every case but banded ones at b = 16.
WGMMA_SDD_REST = {8: None, 16: SddWgmmaTile(8, 1, 1, 6, True, 32),
                  32: SddWgmmaTile(2, 1, 1, 8, True, 32), 64: None, 128: None}
#: The wide tile for W of at least sdd_rules.SDD_WIDE_MIN_COLS columns and rows: a pair of
#: blocks of a block row per CTA (wgmma N = 256), so each X slice feeds two blocks.
WGMMA_SDD_WIDE = {8: None, 16: None, 32: None, 64: None,
                  128: SddWgmmaTile(2, 2, 1, 4, False)}
#: The persistent TMA kernel (sdd_wgmma_tma: copies by one producer lane through the TMA
#: engine, k = 64) for long reductions over a wide W (sdd_rules.sdd_wide_pays). At b = 128 on an
#: H100 (N = C = K = 8192) 1.2-1.4x the wide cp.async tile's speed, with 3 stages ahead of
#: 4 and 2; at b = 64 no tile of it beat the cp.async kernel's two CTAs per SM. Again at
#: b = 64, d <= 0.08 (bench/NOTES.md 253): groups of two, 4 stages, ran 1.03-1.26x the
#: cp.async tile in 18 of 21 cases on an H200 but 0.68-1.16x on an H100, so none here.
#: b = 128 with 4 stages again (bench/NOTES.md 263; H200, the kernel as at 26c9967): 1.04-1.06x
#: the 3 stages of 47a3a94 at d = 0.25-0.5 on random, Barabasi-Albert and Watts-Strogatz
#: layouts, 1.06-1.15x on Watts-Strogatz at d <= 0.15, 0.92-1.10x on random layouts there
#: (d = 0.05: one partial round of groups). The H100 is not measured with 4.
WGMMA_SDD_TMA = {8: None, 16: None, 32: None, 64: None,
                 128: SddWgmmaTile(2, 2, 1, 4, False)}
#: The paired tile of the TMA kernel (b = 64): two block rows together (paired by the
#: columns they share), D of 2b = 128 rows by ``group`` x b columns over the union of the
#: two rows' block columns, so each X and dY slice serves twice the MMAs of a one-row
#: tile (85 flops per L2 byte at a full tile, against 43 for the cp.async tile's two
#: blocks of one row). Absent
#: blocks are multiplied and not stored: sdd_rules.sdd_pair_pays decides by the layout. On
#: an H100 at N = C = K = 8192 (fp16) it ran 1.9-2.1x the one-row tile on banded layouts
#: and 1.1-1.8x on Watts-Strogatz ones; 4 stages or N = 128 tiles were no faster.
WGMMA_SDD_PAIR = {8: None, 16: None, 32: None, 64: SddWgmmaTile(4, 2, 1, 3, False),
                  128: None}
#: The TMA kernel's dense panels for small blocks (b <= 32): a tile of 128 / b adjacent
#: block rows by ``group`` adjacent block columns (D of 128 x group * b), reduced densely
#: and stored where W has blocks (sdd_rules.sdd_panel_pays).
WGMMA_SDD_PANEL = {8: SddWgmmaTile(32, 2, 1, 3, False), 16: SddWgmmaTile(16, 2, 1, 3, False),
                   32: SddWgmmaTile(8, 2, 1, 3, False), 64: None, 128: None}
#: The short-reduction sdd by (block size, reduction rows up to): ``chunk`` block columns of dY in
#: shared memory, walked by ``warps`` warps a CTA. At b = 8 and 16 the warps' MMA chains are short
#: and their latency bounds the kernel, so the tiles hold as many warps an SM as fit: 32 KB chunks
#: up to 16 rows (six CTAs of 8 warps), and from 32 rows (b = 16) or 64 (b = 8) CTAs of 16 warps,
#: two an SM where their chunks and slices of X allow; each CTA's 16 warps also share its chunk,
#: so X's slices are copied half as often as with two CTAs of 8. b = 8 past 64 rows (where the
#: kernel pairs blocks in its MMAs) runs fastest with one CTA of 32 warps an SM. b = 32 up to 16
#: rows is latency-bound as well (8 KB chunks). Past 16 rows a b = 32 block's MMAs are eight
#: independent chains, and X's slices, copied once per chunk, bound it: 128 KB chunks, one CTA an
#: SM, run fastest. b = 8 and 16 gained at every density measured against the kernels before them,
#: but at b = 16, C = K = 4096, d = 0.1 (0.93-0.95x, 6-13 µs). b = 32 is measured against the
#: short wgmma tile, which runs 1.13-1.31x faster since its epilogue of f4d54c8 (bench/NOTES.md
#: 294-295). Up to 16 rows that tile ties or wins at every size and density measured but
#: C = K = 12288, d >= 0.25 (the stream kernel at most 1.09x faster there), so the rule leaves
#: the stream kernel to be forced. Past 16 rows the stream kernel wins from d = 0.25 on where W
#: holds 8192 blocks or more (1.02-1.70x), and loses below d = 0.25 and at C = K = 4096,
#: d = 0.25 (4096 blocks: its grid narrows the chunks to fill the device, so X's slices are
#: copied more often); its least density and block count lie between those measured. All of
#: this is Hopper's: below sm_90 the stream kernel is weighed against the mma.sync kernel,
#: never measured, and b = 32 keeps the least densities it had before
#: (SDD_STREAM_LEAST_PRE_SM90). Devices with less shared memory than sm_90 get narrower
#: chunks (sdd_configs.sdd_stream_config).
SDD_STREAM = {(8, 16): SddStreamTile(128), (8, 32): SddStreamTile(128),
              (8, 64): SddStreamTile(64, warps=16), (8, 128): SddStreamTile(64, warps=32),
              (16, 16): SddStreamTile(64), (16, 32): SddStreamTile(64, warps=16),
              (16, 64): SddStreamTile(32), (16, 128): SddStreamTile(32, warps=16),
              (32, 16): SddStreamTile(8, float("inf")),
              (32, 32): SddStreamTile(64, 0.2, least_blocks=6144),
              (32, 64): SddStreamTile(32, 0.2, least_blocks=6144),
              (32, 128): SddStreamTile(16, 0.2, least_blocks=6144)}
#: b = 32's least densities of the short-reduction sdd below sm_90 (by the keys of
#: SDD_STREAM): those measured on Hopper against the short wgmma tile before its epilogue of
#: f4d54c8 (bench/NOTES.md 180), with no least block count.
SDD_STREAM_LEAST_PRE_SM90 = {(32, 16): 0.075, (32, 32): 0.175, (32, 64): 0.175,
                             (32, 128): 0.175}
SDD_TILE = {8: SddTile(16, 16, 64, 2, 4, 3)}
SDD_TILE_SIMT = {8: SddSimtTile(16, 16, 32, 2), 16: SddSimtTile(8, 8, 32, 2)}
DSD_SIMT = {8: SimtTile(128, 4, 4, 32, 3), 16: SimtTile(128, 8, 4, 16, 3),
            32: SimtTile(128, 8, 4, 32, 3), 64: SimtTile(128, 8, 8, 16, 3),
            128: SimtTile(64, 8, 8, 16, 3)}
DSD_SIMT_SMALL = {8: SimtTile(32, 2, 4, 16, 3), 16: SimtTile(32, 4, 4, 16, 3),
                  32: SimtTile(32, 4, 4, 32, 4), 64: SimtTile(32, 4, 4, 32, 4),
                  128: SimtTile(32, 4, 8, 32, 4)}
SDD_SIMT = {8: SimtTile(16, 8, 4, 16, 3), 16: SimtTile(8, 4, 8, 16, 3),
            32: SimtTile(4, 8, 4, 16, 3), 64: SimtTile(1, 8, 8, 16, 3),
            128: SimtTile(1, 8, 8, 16, 3)}
#: float64 takes half-size thread tiles, which fit its registers.
SDD_SIMT_F64 = {8: SimtTile(16, 4, 4, 16, 3), 16: SimtTile(8, 4, 4, 16, 3),
                32: SimtTile(2, 4, 4, 16, 3), 64: SimtTile(1, 4, 4, 16, 3),
                128: SimtTile(1, 8, 8, 16, 3)}

#: The tables :func:`set_tiles` knows, by keyword; each entry's record type.
TABLES = {
    "dsd": (DSD_TC, MmaTile), "dsd_small": (DSD_TC_SMALL, MmaTile), "sdd": (SDD_TC, MmaTile),
    "group": (DSD_GROUP, GroupTile), "stream": (DSD_STREAM, StreamTile),
    "wgmma": (WGMMA_DSD, WgmmaTile),
    "wgmma_ws": (WGMMA_DSD_WS, PersistentTile), "wgmma_tall": (WGMMA_DSD_TALL, PersistentTile),
    "wgmma_cluster": (WGMMA_DSD_CLUSTER, PersistentTile),
    "wgmma_pair": (WGMMA_DSD_PAIR, PersistentTile),
    "wgmma_small": (WGMMA_DSD_SMALL, PersistentTile),
    "wgmma_union": (WGMMA_DSD_UNION, UnionTile), "wgmma_panel": (WGMMA_DSD_PANEL, UnionTile),
    "wgmma_panel_tma": (WGMMA_DSD_PANEL_TMA, PersistentTile),
    "wgmma_sdd": (WGMMA_SDD, SddWgmmaTile),
    "wgmma_sdd_short": (WGMMA_SDD_SHORT, SddWgmmaTile),
    "wgmma_sdd_rest": (WGMMA_SDD_REST, SddWgmmaTile),
    "wgmma_sdd_wide": (WGMMA_SDD_WIDE, SddWgmmaTile),
    "wgmma_sdd_tma": (WGMMA_SDD_TMA, SddWgmmaTile),
    "wgmma_sdd_pair": (WGMMA_SDD_PAIR, SddWgmmaTile),
    "wgmma_sdd_panel": (WGMMA_SDD_PANEL, SddWgmmaTile),
    "sdd_tile": (SDD_TILE, SddTile), "sdd_tile_simt": (SDD_TILE_SIMT, SddSimtTile),
    "sdd_stream": (SDD_STREAM, SddStreamTile),
    "simt": (DSD_SIMT, SimtTile), "simt_small": (DSD_SIMT_SMALL, SimtTile),
    "sdd_simt": (SDD_SIMT, SimtTile), "sdd_simt_f64": (SDD_SIMT_F64, SimtTile),
}
