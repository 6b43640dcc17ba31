"""Plan decisions forced by tools and tests: :func:`override` and what reads it.

A plan (:mod:`.plans`) takes each decision by its rule (:mod:`.dsd_rules`,
:mod:`.sdd_rules`) unless a ``with override(...)`` block forces it. Every change bumps
:data:`.configs.GENERATION`, so that cached runners make new plans.
"""

from __future__ import annotations

import contextlib

from .configs import GENERATION

_FORCED: dict = {}
DECISIONS = ("panel", "panel_whole", "union", "group", "tall", "cluster", "dsd_pair", "short", "kn",
             "sdd_tiled", "sdd_short", "sdd_wide", "sdd_tma", "sdd_pair", "sdd_panel",
             "sdd_hybrid", "sdd_rest_splits", "sdd_rest_beside", "sdd_tail_splits",
             "split", "grid_limit", "band", "tile_order", "dense", "fill", "stream",
             "stream_run", "stream_share", "streamk",
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
    ``panel_whole`` : bool
        Where the TMA kernel's dense panels run, walk whole 64-column slices of X (one copy
        of X per slice, blocks absent from the slices multiplied as zeros) or the union
        lists' own entries (a copy per entry).
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
    ``sdd_hybrid`` : bool
        Run the weight gradient in two parts (the TMA sdd's dense panels over the tiles W's
        blocks fill, ``sdd_wgmma_rest`` over the other blocks), or not, wherever
        both are configured and both parts have blocks; forced on, at any reduction but
        where ``sdd_short`` is forced on; off where ``sdd_panel`` is forced off. Where left
        to the rule (long reductions only), another sdd decision forced on, ``sdd_panel``
        included, keeps it off.
    ``sdd_rest_splits`` : int
        CTAs sharing each group's reduction in the second part of the weight gradient in
        two parts (the rule: :func:`.sdd_rules.sdd_rest_splits`).
    ``sdd_rest_beside`` : bool
        Run that second part on a side stream beside the panels (sharing the SMs the
        panels' CTAs leave), or after them on the caller's stream.
    ``sdd_tail_splits`` : int
        CTAs sharing the reduction of each group the TMA weight gradient's last round
        holds (1: every group whole; the rule: :func:`.sdd_rules.sdd_tail_split`).
    ``kn`` : bool
        X @ W on a wgmma kernel reads W's blocks as stored (else a transposed copy).
    ``split`` : int
        Longest list per CTA (0: no split).
    ``grid_limit`` : int
        Cap on a persistent kernel's CTAs (they then walk more tiles each).
    ``band`` : int
        Row tiles per band of the TMA dsd kernel's tile order, at least 1 (the rule:
        :func:`.dsd_rules.tile_band`, :data:`DSD_PANEL_BAND` for the panels).
    ``tile_order`` : bool
        The TMA dsd kernel's tiles (other than the panels') taken by deadline (a long
        list's tiles ahead of their row tile, :func:`.worklists.tile_order`) or row tile by
        row tile; only where the band is one row tile (else the bands' order stands). The
        rule: :func:`.dsd_rules.order_pays`.
    ``dense`` : bool
        Take the dense path (where the dtype has one) or never.
    ``fill`` : bool
        The dense path writes the whole dense W (zeros too) rather than scattering W's
        blocks into a buffer that keeps its zeros.
    ``stream`` : bool
        Take (or not) the small-N dsd that keeps X in shared memory and reads each block
        of W once, wherever a tile of ``tiles.DSD_STREAM`` holds the rows of X.
    ``stream_run`` : int
        Chunks of X's block columns per CTA of that dsd (at least 1, at most its tile's
        ``max_run``; at least as many as there are means one CTA per group of output
        blocks, writing Y itself).
    ``streamk`` : bool
        At most SMALL_ROWS rows of X on Hopper (b = 32-128, 16-bit), take (or not) the
        TMA kernel's small tile with the lists cut into one run of equal entries per CTA
        (stream-K, :func:`.worklists.streamk_host`), ahead of the stream kernel and the
        short tiles. Where left to the rule, a forced ``stream``, ``split`` or ``short``
        keeps it off.
    ``sdd_stream`` : bool
        Take (or not) the short-reduction sdd that stages dY's chunks in shared memory,
        wherever a tile of ``tiles.SDD_STREAM`` holds the reduction's rows (16-bit, x and
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


def decide(name: str, rule, *args) -> bool:
    """The decision ``name``: as forced, else ``rule(*args)``."""
    value = _FORCED.get(name)
    return rule(*args) if value is None else bool(value)


def decide_ahead(name: str, rivals: tuple, rule, *args) -> bool:
    """A decision taken ahead of ``rivals``: as forced, else off while a rival is forced on
    (so that forcing a later kernel reaches it), else ``rule(*args)``."""
    if name in _FORCED:
        return bool(_FORCED[name])
    return not any(_FORCED.get(k) for k in rivals) and rule(*args)
