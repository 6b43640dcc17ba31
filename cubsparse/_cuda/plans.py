"""Kernel choice: one pure function per primitive that returns a named plan.

:func:`plan_dsd` and :func:`plan_sdd` take the layout (through its cached statistics),
the dtype, the block size, the number of rows, which operand is transposed, TF32 and
the device's architecture and SM count, and return a :class:`DsdPlan` / :class:`SddPlan`
whose ``str()`` is a readable line. Each is a ladder of kernels, the first whose rule pays
taken: the rules, with the measurements behind them, are in :mod:`.dsd_rules` and
:mod:`.sdd_rules`, the tiles in :mod:`.tiles`, and :func:`override` (from
:mod:`.decisions`) forces any decision for tuning tools and tests. Plans are cached by
the caller (:mod:`.run`), keyed by :data:`.configs.GENERATION`, which every
:func:`override` and :func:`.configs.set_tiles` bumps.
"""

from __future__ import annotations

import dataclasses

from . import dense_model, dsd_rules, sdd_rules, sdd_worklists, worklists
from .configs import (
    TC_TAGS,
    KernelConfig,
    dtype_name,
    fill_config,
    gather_config,
    scatter_config,
    smem_ctas,
)
from .decisions import DECISIONS, decide, decide_ahead, forced, override
from .dsd_configs import (
    dsd_config,
    group_config,
    small_rows,
    stream_config,
    stream_ctas,
    stream_key,
    stream_tile,
    wgmma_config,
)
from .sdd_configs import (
    sdd_config,
    sdd_stream_config,
    sdd_stream_tile,
    sdd_tile_config,
    sdd_wgmma_config,
)
from .tiles import SMALL_ROWS, WGMMA_DSD_KN, WGMMA_DSD_KN_ROWS, WGMMA_DSD_TALL, WGMMA_SDD_REST

#: The plan-override API (:mod:`.decisions`), kept here beside the plans it forces.
__all__ = ["DECISIONS", "DsdPlan", "SddPlan", "forced", "override", "persistent_ctas",
           "plan_dsd", "plan_sdd"]


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
    band: int = 1  # TMA kernels: row tiles per band of the tile order (dsd_rules.DSD_PANEL_BAND)
    pad: int = 1  # the union lists padded to a multiple of this many entries (TMA panels)
    # dsd_stream with partial products: the group's CTAs add them in the launch (a
    # cooperative launch, every CTA resident at once), else a second launch does
    shared_sum: bool = False
    # the lists cut into one run of equal entries per CTA (stream-K,
    # worklists.streamk_host), each CTA's run fixed: the small-N TMA tile
    runs: bool = False
    # the TMA kernel's tiles taken by deadline (worklists.tile_order), else in its own order
    order: bool = False

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
        if self.order:
            parts.append("long lists' tiles taken early (tile_order)")
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
        elif self.runs:
            parts.append(f"lists cut into {self.grid[0]} runs of equal entries, one a CTA "
                         "(stream-K" + (f"; {self.slots} partial tiles, added by each list's "
                                        "last CTA)" if self.slots else ")"))
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
    # the weight gradient in two parts: sdd_wgmma_rest over the blocks the dense panels
    # (``kernel``) leave, in a second launch, ``rest_splits`` CTAs per group of them
    rest: KernelConfig | None = None
    rest_splits: int = 1  # CTAs sharing each of its groups' reduction
    rest_beside: bool = False  # run on a side stream beside the panels
    # the persistent TMA kernel alone: groups [0, tail_whole) reduced whole, each later one
    # (the last round's) in ``tail_splits`` pieces, their float32 partials added in order
    tail_splits: int = 1
    tail_whole: int = 0

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
        if self.rest is not None:
            per += (f"; the tiles the blocks fill, then the other blocks on {self.rest.name}, "
                    f"up to {self.rest.group} of a block row per group, "
                    f"{self.rest_splits} CTA(s) per group"
                    + (", beside the panels" if self.rest_beside else ""))
        if self.tail_splits > 1:
            per += (f"; groups {self.tail_whole}.. (the last round) each reduced in "
                    f"{self.tail_splits} pieces")
        return head + (f"{self.kernel.name}, " + ("tiles of the block grid" if self.tiled
                       else per)
                       + f", A as {'[k][m]' if self.a_km else '[m][k]'}"
                       + f", B as {'[n][k]' if self.b_nk else '[k][n]'}")


def persistent_ctas(cfg: KernelConfig, sms: int) -> int:
    """Grid of a persistent kernel: ``cfg.persistent`` CTAs per SM (or the forced cap), in
    whole clusters."""
    ctas = sms * cfg.persistent
    limit = forced("grid_limit")
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
    # A few rows on Hopper (b = 32-128, the rows of a WGMMA_DSD_SMALL tile): the TMA
    # kernel's small tile, its CTAs streaming runs of equal entries (stream-K), where the
    # tile kernels' CTAs took whole or split lists in a last partial wave (bench/NOTES.md);
    # ahead of the stream kernel below, but where its rule leaves that one the rows.
    streamk, n_slots = None, 0
    rows = small_rows(b, n) if arch == 90 and name in TC_TAGS else 0
    if rows:
        streamk = wgmma_config(name, b, not trans, False, small=rows)
        if streamk is not None:
            ctas = dsd_rules.streamk_ctas(structure.nnzb, persistent_ctas(streamk, sms))
            n_slots = worklists.streamk_host(structure, trans, ctas)[5]
            if not decide_ahead("streamk", ("stream", "split", "short"),
                                dsd_rules.streamk_pays, structure, trans, n, b, n_slots):
                streamk = None
    # At a few rows of X and small blocks, X in shared memory and W streamed once; it beats
    # the dense path there too (the path's rewrite of W alone costs more), so no ratio.
    # Past 64 rows (b = 8) its rule keeps it to the sizes of W where it was measured so.
    scfg = stream_config(name, b, trans, n) if arch >= 80 and streamk is None else None
    per_sm = min(dsd_rules.STREAM_CTAS_PER_SM, stream_ctas(b, n, arch)) if scfg is not None else 0
    if per_sm:  # (its shared memory fits the device)
        stile = stream_tile(b, n)
        groups = -(-n_out // scfg.group)
        chunks = worklists.stream_chunks(structure, trans, stile.chunk)
        slots = max(1, per_sm * sms)
        ruled = min(chunks, stile.max_run, dsd_rules.stream_run(groups, chunks, slots))
        # (the rule judges the grid of its own runs; a forced run length changes only that)
        run = min(chunks, stile.max_run, max(1, int(forced("stream_run") or ruled)))
        runs = -(-chunks // run)
        if decide("stream", dsd_rules.stream_pays, structure, groups, chunks, sms,
                  stream_key(b, n), groups * -(-chunks // ruled) / slots, arch):
            shared = (runs > 1 and groups * runs <= slots
                      and decide("stream_share", lambda: n <= dsd_rules.STREAM_SHARE_MAX_ROWS))
            return DsdPlan(product, n, name, b, "sparse", scfg, True, None, run,
                           runs if runs > 1 else 0, (groups, runs), None, shared_sum=shared)
    # The kernel ladder: Hopper wgmma (dense panels, union, persistent, tall), else
    # grouped mma.sync, else one block per CTA on mma.sync or CUDA cores.
    wcfg, kn = ((streamk, not trans) if streamk is not None else
                _wgmma_choice(structure, name, b, n, n_out, trans, sms, panels)
                if name in TC_TAGS and not small and arch == 90 else (None, False))
    gcfg = group_config(name, b, trans) if wcfg is None and not small else None
    if gcfg is not None and not decide("group", dsd_rules.group_pays, structure, trans, gcfg.group):
        gcfg = None
    if wcfg is None and gcfg is None and not small:
        small = decide("short", dsd_rules.short_pays, dsd_config(name, b, trans, tf32), n,
                       n_out, sms)
    cfg = wcfg or gcfg or dsd_config(name, b, trans, tf32, small)
    panel = cfg.panel
    if panel and cfg.tma and decide("panel_whole", dsd_rules.panel_whole_pays, structure,
                                    trans, cfg.group, b):
        cfg = wgmma_config(name, b, panel=True, whole=True)  # whole slices of X
    w_copy = None
    if panel and cfg.tma:  # the TMA kernel reads whole panels, zeros included
        w_copy = "panel_blocks"
    elif not trans and (tf32 or (wcfg is not None and not kn)):
        # These kernels read W's blocks with k contiguous ([n][k]): TF32 because ldmatrix
        # moves 16-bit elements, the other wgmma kernels for their K-major descriptors.
        w_copy = "transpose_blocks" if wcfg is not None else "transpose"

    # Long lists are split where there are few CTAs (dsd_rules.split_rule: on the
    # persistent b >= 64 tiles that X fills only b = 128's longer lists, at their mean);
    # float64 never (no float32 partials), nor the two-block TMA tile (it stores its
    # blocks whole).
    row_tiles = -(-n // cfg.rows_per_cta)
    split = 0
    if streamk is None and name != "float64" and n <= dsd_rules.MAX_GRID_Y * cfg.rows_per_cta and (
            not (cfg.tma and cfg.group > 1)):
        split = forced("split")
        if split is None:
            split = dsd_rules.split_rule(worklists.list_lengths(structure, trans, cfg.group),
                                         cfg, b, n, sms, tc,
                                         dense_model.itemsize(name))
    # (the TMA kernel's panels walk lists padded to whole 64-deep slices)
    pad = 64 // b if panel and cfg.tma else 1
    if streamk is not None:  # a CTA a run (n_slots: the cut lists' pieces)
        work, grid = None, (ctas,)
    else:
        work, _, _, _, n_slots = worklists.dsd_host(structure, trans, split, cfg.group, pad,
                                                    cfg.whole)
        if split and n_slots * n * cfg.group * b * 4 > dsd_rules.MAX_WORKSPACE:
            split = 0
            work, _, _, _, n_slots = worklists.dsd_host(structure, trans, 0, cfg.group, pad,
                                                        cfg.whole)
        if not n_slots:  # no list longer than a segment: nothing to add up
            split = 0
        grid = (work.shape[0], row_tiles)
        if cfg.persistent:  # one 1-D grid walks every (work item, row tile), by clusters
            c = cfg.cluster
            grid = (min(grid[0] * -(-grid[1] // c) * c, persistent_ctas(cfg, sms)),)
    # The dense model's ratios are those of the other kernels; the panel kernel's time
    # follows the share of W its panels cover.
    panel_ratio = (dsd_rules.panel_time(structure, trans, cfg.group, b, pad, cfg.whole)
                   if panel else None)
    dense, ratio = dense_model.choice("matmul_t" if trans else "matmul", structure, name, b,
                                      n, tf32, dense_bytes_limit, panel_ratio)
    if dense:
        fill = decide("fill", dsd_rules.fill_pays, structure, b, dense_model.itemsize(name))
        return DsdPlan(product, n, name, b, "dense",
                       (fill_config if fill else scatter_config)(name, b), kn or trans, None,
                       0, 0, (), ratio)
    if streamk is not None:
        return DsdPlan(product, n, name, b, "sparse", cfg, True, None, 0, n_slots, grid, ratio,
                       runs=True)
    band = forced("band", dsd_rules.tile_band(structure, cfg, b, dense_model.itemsize(name))
                  ) if cfg.tma else 1
    if not (isinstance(band, int) and band >= 1):
        raise ValueError(f"a band is at least one row tile, got band = {band!r}")
    band = min(band, max(1, row_tiles))  # (keeps band x work items within the kernel's int)
    # Tiles by deadline (dsd_rules.order_pays), on the TMA kernel's tiles other than the
    # panels', where they are taken row tile by row tile.
    order = cfg.tma and not panel and band == 1 and decide(
        "tile_order", dsd_rules.order_pays, work[:, 2], *dsd_rules.tile_queue(cfg, n, grid))
    return DsdPlan(product, n, name, b, "sparse", cfg, kn or trans,
                   w_copy, split, n_slots if split else 0, grid, ratio, band, pad, order=order)


def _wgmma_choice(structure, name: str, b: int, n: int, n_out: int, trans: bool, sms: int,
                  panels: bool) -> tuple[KernelConfig | None, bool]:
    """The Hopper step of :func:`plan_dsd`'s ladder: (the wgmma kernel or None, whether it
    reads W's blocks as stored)."""
    pcfg = wgmma_config(name, b, panel=True) if panels else None
    if pcfg is not None and decide("panel", dsd_rules.panel_pays, structure, trans, pcfg, b, n,
                                    persistent_ctas(pcfg, sms)):
        return pcfg, False  # panels read W's blocks transposed
    wcfg = wgmma_config(name, b)
    if wcfg is None:
        return None, False
    union = wcfg.group > 1
    if union and not decide("union", dsd_rules.union_pays, structure, trans, wcfg.group, n):
        union, wcfg = False, wgmma_config(name, b, union=False)
    kn = decide("kn", lambda: b in WGMMA_DSD_KN or n <= WGMMA_DSD_KN_ROWS.get(b, 0))
    if kn and not trans:
        wcfg = wgmma_config(name, b, True, union)
    if wcfg.persistent and WGMMA_DSD_TALL.get(b) is not None:
        # Tall tiles read W as stored: at b = 64, 128 the block is the M-major A operand
        # of X @ W; b = 32 reads it as stored anyway.
        xcfg = wgmma_config(name, b, not trans, union, True)
        if decide("tall", dsd_rules.tall_pays, xcfg, n, n_out, persistent_ctas(xcfg, sms)):
            wcfg, kn = xcfg, True
            # two blocks per tile, else clusters of two CTAs, where each pays
            pcfg = wgmma_config(name, b, not trans, union, pair=True)
            if pcfg is not None and decide("dsd_pair", dsd_rules.dsd_pair_pays, pcfg,
                                           structure, trans, n, n_out,
                                           persistent_ctas(pcfg, sms)):
                return pcfg, True
            ccfg = wgmma_config(name, b, not trans, union, cluster=True)
            if ccfg is not None and decide("cluster", dsd_rules.cluster_pays, ccfg, structure,
                                           trans, b, n, n_out, persistent_ctas(ccfg, sms)):
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
    if per_sm and structure.nnzb and decide_ahead(
            "sdd_stream", (*_SDD_LATER, "sdd_panel", "sdd_hybrid", "dense"),
            sdd_rules.sdd_stream_pays, structure, sdd_stream_tile(b, inner)):
        chunk, chunks, per_chunk = sdd_rules.sdd_stream_grid(
            structure, scfg.group, per_sm * sms, scfg.threads // 32)
        per_chunk = int(forced("sdd_stream_grid") or per_chunk)
        return SddPlan(name, b, "sparse", scfg, False, a_km, b_nk, False, None, per_chunk,
                       chunks, chunk)
    hopper = name in TC_TAGS and a_km and not b_nk and arch == 90
    pcfg = sdd_wgmma_config(name, b, panel=True) if hopper and not tf32 else None
    if tf32:  # TF32 reads A[m][k] and B[n][k]
        cfg, a_km, b_nk = sdd_config(name, b, tf32=True), False, True
    elif pcfg is not None and decide_ahead("sdd_panel", _SDD_LATER, sdd_rules.sdd_panel_pays,
                                           structure, pcfg, b, inner, sms):
        cfg = pcfg  # the dense panels, first where they pay
    else:
        wcfg = sdd_wgmma_config(name, b) if hopper else None
        tcfg = sdd_tile_config(name, b) if a_km and not b_nk and wcfg is None else None
        if tcfg is not None:
            tiled = decide("sdd_tiled", sdd_rules.sdd_tiled_pays, structure, name, b,
                           sdd_config(name, b, a_km, b_nk).group, inner)
        cfg = tcfg if tiled else (wcfg or sdd_config(name, b, a_km, b_nk))
    if cfg is wcfg and decide("sdd_short", sdd_rules.sdd_short_pays, inner):
        one_slice = sdd_rules.SDD_ONE_SLICE_K
        cfg = sdd_wgmma_config(name, b, True, one_slice if inner <= one_slice else None) or cfg
    elif cfg is wcfg:
        # a longer reduction: the paired tile where pairs of block rows share their
        # columns; over a wide W the TMA kernel, else the wide tile (the same rule, each
        # its own decision)
        pair = sdd_wgmma_config(name, b, pair=True)
        if pair is not None and decide("sdd_pair", sdd_rules.sdd_pair_pays, structure, pair,
                                       cfg, sms, inner):
            cfg = pair
        else:
            for decision, kw in (("sdd_tma", {"tma": True}), ("sdd_wide", {"wide": True})):
                alt = sdd_wgmma_config(name, b, **kw)
                if alt is not None and decide(decision, sdd_rules.sdd_wide_pays, structure, b):
                    cfg = alt
                    break
    # In two parts where W's blocks fill some panel tiles and leave the rest nearly empty
    # (a small-world layout): the panels over the filled tiles, sdd_wgmma_rest over the
    # other blocks. Not where the panels are forbidden or another kernel forced.
    rest = sdd_wgmma_config(name, b, rest=True) if pcfg is not None and not tiled else None
    # (a forced sdd_hybrid runs at any reduction; the rule, at long ones only)
    long = (forced("sdd_short") is not True if forced("sdd_hybrid")
            else not decide("sdd_short", sdd_rules.sdd_short_pays, inner))
    if rest is not None and not (
            long and forced("sdd_panel") is not False
            and decide_ahead("sdd_hybrid", (*_SDD_LATER, "sdd_panel"),
                             sdd_rules.sdd_hybrid_pays, structure, pcfg, rest, b)):
        rest = None
    if rest is not None:  # (forced, a part may be empty: then one kernel runs)
        filled, rest_groups, _ = sdd_worklists.sdd_hybrid_host(
            structure, pcfg.block_rows, pcfg.group, rest.group, sdd_rules.sdd_hybrid_fill(b))
        if not (filled.shape[0] and rest_groups.shape[0]):
            rest = None
    rows, cols = structure.block_shape
    rest_splits = 1
    if rest is not None:
        cfg = pcfg
        count = filled.shape[0]
        panel_ratio = sdd_rules.sdd_hybrid_times(structure, cfg, rest, b)[2]
        rest_splits = _forced_count("sdd_rest_splits") or sdd_rules.sdd_rest_splits(
            b, rest_groups.shape[0], inner, WGMMA_SDD_REST[b].k,
            sms * max(1, smem_ctas(rest, arch)))
    else:  # a persistent grid: every CTA walks groups (or panel tiles)
        count = sdd_worklists.sdd_work_host(structure, cfg.group, cfg.block_rows,
                                            cfg.panel).shape[0]
        panel_ratio = (count * cfg.block_rows * cfg.group / (rows * cols)
                       / sdd_rules.SDD_PANEL_SPEED if cfg.panel else None)
    grid = min(count, persistent_ctas(cfg, sms)) if cfg.persistent else 0
    tail_splits, tail_whole = 1, count
    if cfg.tma and rest is None and count:  # the last round's groups cut into pieces
        slots, slices = persistent_ctas(cfg, sms), -(-inner // 64)
        tail_splits = (_forced_count("sdd_tail_splits", slices,
                                     f"the reduction's {slices} 64-deep slices")
                       or sdd_rules.sdd_tail_split(count, slots, slices))
        tail_whole = count - count % slots
        if tail_splits == 1 or tail_whole == count:
            tail_splits, tail_whole = 1, count
        else:
            grid = min(tail_whole + (count - tail_whole) * tail_splits, slots)
    dense, ratio = dense_model.choice("sampled", structure, name, b, inner, tf32,
                                      dense_bytes_limit, panel_ratio)
    if dense:
        return SddPlan(name, b, "dense", gather_config(name, b), False, a_km, b_nk, tf32, ratio)
    return SddPlan(name, b, "sparse", cfg, tiled, a_km, b_nk, tf32, ratio, grid, rest=rest,
                   rest_splits=rest_splits, tail_splits=tail_splits, tail_whole=tail_whole,
                   rest_beside=rest is not None and decide(
                       "sdd_rest_beside", sdd_rules.sdd_rest_beside_pays, rest_splits))


def _forced_count(name: str, most: int | None = None, of: str = "") -> int | None:
    """The count forced for decision ``name`` (None where left to the rule): at least 1 and,
    where ``most`` is given, at most that (``of`` says what it is)."""
    value = forced(name)
    if value is None:
        return None
    if most is None and int(value) < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")
    if most is not None and not 1 <= int(value) <= most:
        raise ValueError(f"{name} must be 1 to {of}, got {value}")
    return int(value)


#: The sdd kernels a plan weighs after the short-reduction kernel and the dense panels:
#: forcing one on keeps those two off where their own decisions are left to the rule.
_SDD_LATER = ("sdd_short", "sdd_tiled", "sdd_tma", "sdd_wide", "sdd_pair")
