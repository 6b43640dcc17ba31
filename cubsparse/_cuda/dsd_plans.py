"""The plan of ``Y = X @ op(W)`` (:func:`plan_dsd`): a ladder of the dsd kernels, the first
whose rule (:mod:`.dsd_rules`) pays taken."""

from __future__ import annotations

from . import dense_model, dsd_rules, worklists
from .configs import TC_TAGS, KernelConfig, dtype_name, fill_config, scatter_config
from .decisions import decide, decide_ahead, forced
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
from .plan_records import DsdPlan, persistent_ctas
from .tiles import SMALL_ROWS, WGMMA_DSD_KN, WGMMA_DSD_KN_ROWS, WGMMA_DSD_TALL


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
