"""The plan of ``(A @ B)`` sampled on W's layout (:func:`plan_sdd`, the weight gradient): a
ladder of the sdd kernels, the first whose rule (:mod:`.sdd_rules`) pays taken."""

from __future__ import annotations

from . import dense_model, sdd_rules, sdd_worklists
from .configs import TC_TAGS, dtype_name, gather_config, smem_ctas
from .decisions import decide, decide_ahead, forced
from .plan_records import SddPlan, persistent_ctas
from .sdd_configs import (
    sdd_config,
    sdd_stream_config,
    sdd_stream_tile,
    sdd_tile_config,
    sdd_wgmma_config,
)
from .tiles import WGMMA_SDD_REST

#: The sdd kernels a plan weighs after the short-reduction kernel and the dense panels:
#: forcing one on keeps those two off where their own decisions are left to the rule.
_SDD_LATER = ("sdd_short", "sdd_tiled", "sdd_tma", "sdd_wide", "sdd_pair")


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


def plan_sdd(structure, dtype, b: int, inner: int, a_km: bool, b_nk: bool, tf32: bool,
             arch: int, sms: int, dense_bytes_limit: int | None = None) -> SddPlan:
    """The plan of ``(A @ B)`` sampled on the layout, A of ``inner`` columns, read as
    ``a_km`` / ``b_nk`` say (pure); ``arch`` and ``sms`` as for :func:`.dsd_plans.plan_dsd`."""
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
            sdd_rules.sdd_stream_pays, structure, sdd_stream_tile(b, inner, arch)):
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
