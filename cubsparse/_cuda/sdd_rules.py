"""When each sdd kernel pays: the rules a plan (:mod:`.plans`) reads for the weight
gradient, ``(A @ B)`` sampled on W's blocks.

Each constant states a rule with the measurement behind its value; the functions apply
them to a layout's cached statistics. Tools and tests force the decisions they feed
through :func:`.decisions.override`.
"""

from __future__ import annotations

import numpy as np

from . import sdd_worklists
from .configs import KernelConfig, ctas_per_sm, dtype_name
from .sdd_configs import sdd_tile_shape

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
#: The single-block wgmma sdd's speed per stored block against cuBLAS per MMA at a long
#: reduction, per block size (the kernels the panels replace, above: 0.06-0.09 at b = 16,
#: 0.17-0.24 at b = 32). With SDD_PANEL_SPEED it sets which tiles of a layout the panels
#: take in the weight gradient in two parts (:func:`sdd_hybrid_pays`): those whose blocks
#: fill at least SDD_SINGLE_SPEED / SDD_PANEL_SPEED of them (0.08 at b = 16, 0.22 at
#: b = 32); ``sdd_wgmma_rest`` takes the other blocks, in a second launch.
SDD_SINGLE_SPEED = {16: 0.075, 32: 0.2}
#: That second launch (``sdd_wgmma_rest``) reads, per group of a block row's blocks, X's
#: slice once and each block's slice of dY, N rows each. Its time is about SDD_REST_COST
#: block positions of the dense product (which, like a slice, takes time in proportion to
#: N) per slice read, plus SDD_REST_FLOOR slices' worth for the launch (a CTA's pipeline
#: over its share of N). Fitted on an H200 (N = C = K = 8192, fp16; Watts-Strogatz,
#: Barabási-Albert, random and banded layouts, d = 0.05-0.5, 120-13,600 slices): about
#: 68 ns a slice at b = 16 and 71 ns at b = 32, plus 27 and 22 µs, each case within 10 %
#: but one (b = 32, Watts-Strogatz d = 0.05: 0.090 ms against 0.071 predicted).
SDD_REST_COST = {16: 14.3, 32: 3.8}
SDD_REST_FLOOR = {16: 400, 32: 300}
#: CTAs per group of that launch (:func:`sdd_rest_splits`): at least SDD_REST_SPLITS where
#: the groups need more than one wave of CTAs; where they fit one, at least
#: SDD_REST_LEAST_SPLITS and as many as fill the wave. On the same H200 four CTAs a group
#: ran 1.1-1.9x faster than one at b = 16 (whatever the groups), and at b = 32 where the
#: groups outnumber the CTAs the device holds; one a group was 1.04-1.2x faster at b = 32
#: where the groups fill a wave alone.
SDD_REST_SPLITS = 4
SDD_REST_LEAST_SPLITS = {16: 4, 32: 1}
#: At most this many CTAs share a group's reduction, each over at least
#: SDD_REST_MIN_SLICES of its slices: more spend the time saved on the partials (16 a group
#: ran 1.1-1.5x slower than 4).
SDD_REST_MAX_SPLITS = 8
SDD_REST_MIN_SLICES = 8
#: The two parts are taken where they are predicted this much faster than either alone.
#: On the H200 sweep behind SDD_REST_COST (b = 16, 32; four layouts, d = 0.05-0.1, and
#: Watts-Strogatz to 0.5) the rule then takes them in the 9 cases where they ran
#: 1.25-2.78x faster than one kernel, and in none that ran slower (a case predicted 1.004x
#: faster ran at 0.93x: hence the margin); it leaves out four that ran 1.03-1.13x faster
#: (banded at both block sizes, random at b = 16, d = 0.05).
SDD_HYBRID_MIN_GAIN = 1.05
#: The paired tile's store of a group costs about this many 64-deep slices of its main loop
#: (one CTA per SM: nothing else runs meanwhile), which the one-row tile's two CTAs per SM
#: hide. Fitted to N = 256-1024 on the same H100 (banded d = 0.1: 1.26x at N = 256, 1.73x
#: at 1024; random d = 0.25: 0.90x and 1.05x; Watts-Strogatz d = 0.25, N = 512: 1.22x).
SDD_PAIR_STORE_SLICES = 2.4

#: The persistent TMA sdd reduces each group whole, one group per CTA at a time: a round
#: of groups takes a group's whole reduction (about 0.1 ms at b = 128 and N = 8192), so a
#: last round holding a few groups costs nearly a full one. The groups of that round are
#: instead cut into pieces of their reduction (:func:`sdd_tail_split`). A piece costs its
#: share of the group's 64-deep slices plus SDD_PIECE_SLICES slices' worth for its float32
#: partial (every TMA sdd tile is 128 x 256: 128 KB), and the group's last piece reads all
#: of them. Fitted on an H200 (N = C = K = 8192, fp16, b = 128, random layouts at d = 0.05,
#: whose 119 groups cut into 2, 4 and 8 pieces ran 1.17x, 1.35x and 1.98x slower than
#: whole: 5.4-7.8 slices a piece). Pieces span at least SDD_TAIL_MIN_SLICES slices, a group
#: at most SDD_TAIL_MAX_SPLITS pieces, and the split is taken where it is predicted
#: SDD_TAIL_MIN_GAIN faster than whole groups.
SDD_PIECE_SLICES = 6
SDD_TAIL_MIN_SLICES = 4
SDD_TAIL_MAX_SPLITS = 8
SDD_TAIL_MIN_GAIN = 1.05


def sdd_tail_time(groups: int, slots: int, slices: int, splits: int) -> float:
    """The persistent TMA sdd's time in slices of one CTA: ``groups`` groups of ``slices``
    slices each on ``slots`` CTAs, the last round's groups cut into ``splits`` pieces."""
    rounds, tail = divmod(groups, slots)
    if tail == 0 or splits <= 1:
        return -(-groups // slots) * slices
    piece_rounds = -(-tail * splits // slots)
    return (rounds * slices + piece_rounds * (slices / splits + SDD_PIECE_SLICES)
            + splits * SDD_PIECE_SLICES)


def sdd_tail_split(groups: int, slots: int, slices: int) -> int:
    """How many pieces the persistent TMA sdd cuts the reduction of each group of its last
    round into (:data:`SDD_PIECE_SLICES`): the count of least predicted time, 1 (whole
    groups) unless that is SDD_TAIL_MIN_GAIN faster."""
    most = min(SDD_TAIL_MAX_SPLITS, slices // SDD_TAIL_MIN_SLICES)
    whole = sdd_tail_time(groups, slots, slices, 1)
    best = min(range(1, max(1, most) + 1),
               key=lambda s: (sdd_tail_time(groups, slots, slices, s), s))
    return best if whole >= SDD_TAIL_MIN_GAIN * sdd_tail_time(groups, slots, slices, best) else 1


def sdd_short_pays(inner: int) -> bool:
    """The wgmma sdd's reduction is short enough (SDD_SHORT_INNER) for the short tile on a
    persistent grid."""
    return inner <= SDD_SHORT_INNER


#: The short tile's persistent grid counts CTAs per SM from shared memory (plans are pure);
#: registers can hold fewer at once (at 1-32 rows: b = 32 4 of 7, b = 64 4 of 6; b = 128's former
#: tile of two warpgroups 2 of 4, its tile since NOTES 288 all 3). Such a grid runs in waves, and
#: where they do not divide evenly the last one runs alone, partly filling the GPU.
#: short_grid_per_sm cuts the grid to the CTAs held at once where each then walks at least this
#: many groups. Same-process A/B on an NVIDIA H200 (fp16, random layouts, C = K = 8192 and 12288,
#: d = 0.1-0.5, 1 and 32 rows, the grid always cut against never, commit 938ab96, bench/NOTES.md
#: 281), time cut / uncut: b = 64 0.89-0.97 where a CTA of the cut grid walks 3.6-17.5 groups,
#: 1.09-1.11 at 1.6; b = 32 0.93-1.02 at 3.3-35; b = 128's former tile (two even waves) 0.98-1.00
#: at 3.9-17.5, 1.04-1.09 at 1.6 and 3.5.
SHORT_GRID_MIN_WALK = 2


def short_grid_per_sm(smem_ctas: int, resident: int, groups: int, sms: int) -> int:
    """CTAs per SM of the short tile's persistent grid over ``groups`` groups on ``sms``
    SMs: ``resident`` (what an SM holds at once by the driver's rule, registers too; 0
    where unknown) where fewer than ``smem_ctas`` (what shared memory allows, the plan's
    count) leave a partial last wave and each CTA walks SHORT_GRID_MIN_WALK groups or more,
    else ``smem_ctas``.

    >>> short_grid_per_sm(6, 4, 9216, 132)  # b = 64: 1.5 waves, 17 groups a CTA if cut
    4
    >>> short_grid_per_sm(6, 4, 819, 132)  # too few groups to walk
    6
    >>> short_grid_per_sm(4, 2, 4608, 132)  # b = 128's former tile: two even waves
    4
    """
    if not 0 < resident < smem_ctas or smem_ctas % resident == 0:
        return smem_ctas
    return resident if groups >= SHORT_GRID_MIN_WALK * resident * sms else smem_ctas


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
    pairs = sdd_worklists.pair_group_count(structure, pair.group)
    ones = sdd_worklists.group_count(structure, one.group)
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
            and sdd_worklists.panel_fill(structure, rows, group) >= SDD_PANEL_MIN_FILL.get(b, 1.0)
            and sdd_worklists.sdd_work_host(structure, group, rows, True).shape[0]
            >= SDD_PANEL_MIN_WAVES * sms)


def sdd_hybrid_fill(b: int) -> float:
    """The least share of a panel tile's positions its stored blocks fill for the panels to
    take it in the two-part weight gradient (:data:`SDD_SINGLE_SPEED`)."""
    return SDD_SINGLE_SPEED[b] / SDD_PANEL_SPEED


def sdd_hybrid_times(structure, panel: KernelConfig, rest: KernelConfig, b: int):
    """Predicted times against dense cuBLAS's of the weight gradient on the panels alone,
    on the single-block kernel alone and in two parts: the panels over the tiles their
    blocks fill (:func:`sdd_hybrid_fill`), then ``rest`` over the other blocks, a slice of
    X per group and one of dY per block (:data:`SDD_REST_COST`, :data:`SDD_REST_FLOOR`)."""
    rows, cols = structure.block_shape
    grid = rows * cols
    per_tile = panel.block_rows * panel.group
    tiles = sdd_worklists.sdd_work_host(structure, panel.group, panel.block_rows, True).shape[0]
    dense, groups, order = sdd_worklists.sdd_hybrid_host(
        structure, panel.block_rows, panel.group, rest.group, sdd_hybrid_fill(b))
    return (tiles * per_tile / grid / SDD_PANEL_SPEED,
            structure.nnzb / grid / SDD_SINGLE_SPEED[b],
            dense.shape[0] * per_tile / grid / SDD_PANEL_SPEED
            + (groups.shape[0] + order.shape[0] + SDD_REST_FLOOR[b]) * SDD_REST_COST[b]
            / grid)


def sdd_rest_splits(b: int, groups: int, inner: int, k: int, slots: int) -> int:
    """How many CTAs share each of ``groups`` groups' reduction of ``inner`` rows in the
    second part (slices ``k`` deep) on a device that holds ``slots`` of its CTAs at once:
    as many as fill that wave, at least SDD_REST_LEAST_SPLITS (SDD_REST_SPLITS where the
    groups need more than a wave), at most SDD_REST_MAX_SPLITS, each over at least
    SDD_REST_MIN_SLICES slices."""
    groups = max(1, groups)
    least = SDD_REST_LEAST_SPLITS.get(b, 1) if groups <= slots else SDD_REST_SPLITS
    return max(1, min(max(least, slots // groups), SDD_REST_MAX_SPLITS,
                      -(-inner // k) // SDD_REST_MIN_SLICES))


def sdd_rest_beside_pays(splits: int) -> bool:
    """The second part runs beside the panels, on a side stream, where its reduction is
    split (``splits`` CTAs a group). Its short CTAs then take the SM room the panels' CTAs
    leave as it comes. On an H200 (N = C = K = 8192, fp16) that was 1.02-1.28x faster
    (Watts-Strogatz and Barabási-Albert, b = 16 and 32); with a CTA per group reducing
    all of N (b = 32, Watts-Strogatz, d <= 0.1) it was 1.04-1.10x slower: few of those
    CTAs fit beside the panels, and the last ones finish after them."""
    return splits > 1


def sdd_hybrid_pays(structure, panel: KernelConfig, rest: KernelConfig, b: int) -> bool:
    """The weight gradient in two parts is predicted SDD_HYBRID_MIN_GAIN faster than the
    panels alone and than the single-block kernel alone (:func:`sdd_hybrid_times`): on a
    small-world layout the panels take the band of W's blocks near the diagonal, and
    ``sdd_wgmma_rest`` the blocks rewired away from it. (The plan runs one kernel where a
    part is left empty.)"""
    if b not in SDD_SINGLE_SPEED or not structure.nnzb:
        return False
    panels, singles, hybrid = sdd_hybrid_times(structure, panel, rest, b)
    return hybrid * SDD_HYBRID_MIN_GAIN <= min(panels, singles)


def sdd_stream_grid(structure, chunk: int, slots: int, warps: int) -> tuple[int, int, int]:
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
    """The short-reduction sdd (``sdd_stream``) pays where W is at least as dense, and holds
    at least as many blocks, as its ``tile`` needs (:data:`.tiles.SDD_STREAM`)."""
    rows, cols = structure.block_shape
    return (structure.nnzb >= tile.least_density * rows * cols
            and structure.nnzb >= tile.least_blocks)


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
        ntiles = sdd_worklists.block_tiles(structure, tr, ts)[0].shape[0]
        if simt:
            return structure.nnzb >= fill * ntiles * tr * ts
        counts = np.diff(structure.host_indptr.astype(np.int64))
        grouped = int(((counts + group - 1) // group).sum() + counts.sum())
        return ntiles * (tr + ts) < grouped

    return structure.cached(("sdd_tiled_pays", simt, tr, ts, group, fill), count)
