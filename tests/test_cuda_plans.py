"""Launch plans of the CUDA backend: which kernel a plan picks (pure, so pinned here on
any machine by a table), the plan's readable line, the dense path, reuse of a plan by
later calls, and the CUDA-graph recipe (capture once, replay after the operands change
in place)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import BACKENDS, poison, to_backend, to_numpy

import cubsparse as cs
from cubsparse._cuda import (
    configs,
    dense_model,
    device,
    dsd_configs,
    dsd_rules,
    plans,
    run_dsd,
    sdd_configs,
    sdd_rules,
    sdd_worklists,
    tiles,
    worklists,
)

CUDA = [p for p in BACKENDS if p.values == ("cuda",)]
SMS = 132  # an H100 / H200


def structure(rows, cols, density, seed=0):
    lay = cs.layouts.random(rows, cols, density, seed=seed)
    return cs.BlockSparseMatrix.from_layout(lay, 8, backend="cpu")._structure


# (dtype, b, rows of X, C = K, transposed, arch, density, expected kernel)
DSD_CHOICES = [
    ("float16", 64, 4096, 4096, False, 90, 0.25, "dsd_wgmma_tma<F16,64,1,1,2,true,2,0,256,1,128>"),
    ("float16", 128, 4096, 4096, True, 90, 0.25, "dsd_wgmma_tma<F16,128,1,2,4,false,1,1,256,1,64>"),
    ("float16", 32, 4096, 4096, False, 90, 0.25, "dsd_wgmma_tma<F16,32,4,2,3,true,1,0,0>"),
    ("float16", 32, 512, 4096, False, 90, 0.25, "dsd_wgmma_ws<F16,32,2,1,3,true,3,0>"),
    ("float16", 16, 4096, 4096, False, 90, 0.05, "dsd_wgmma_single<F16,16,1,2,4,true>"),
    ("float16", 64, 4096, 4096, False, 80, 0.25, "dsd_tc<F16,64,128,64,4,2,3,false>"),
    ("bfloat16", 64, 32, 12288, False, 90, 0.1, "dsd_wgmma_tma<BF16,64,1,1,8,true,2,0,32>"),
    ("bfloat16", 64, 32, 4096, False, 90, 0.1, "dsd_tc<BF16,64,64,64,2,2,6,false>"),
    ("bfloat16", 64, 32, 4096, False, 80, 0.1, "dsd_tc<BF16,64,64,64,2,2,6,false>"),
    ("float32", 32, 4096, 4096, True, 90, 0.25, "dsd_simt<float,32,128,8,4,32,3,true>"),
    ("float32", 32, 32, 4096, False, 90, 0.1, "dsd_simt<float,32,32,4,4,32,4,false>"),
    ("float64", 64, 4096, 4096, False, 90, 0.25, "dsd_simt<double,64,128,8,8,16,3,false>"),
    # 128 rows at C = K = 1024 (16 output blocks of 64): one regular 128-row tile per
    # column would fill 16 of 132 SMs, so the short tiles run (short_pays)
    ("float32", 64, 128, 1024, False, 90, 0.1, "dsd_simt<float,64,32,4,4,32,4,false>"),
    ("float16", 64, 128, 1024, True, 80, 0.1, "dsd_tc<F16,64,64,64,2,2,6,true>"),
]


@pytest.mark.parametrize(("dtype", "b", "n", "ck", "trans", "arch", "d", "kernel"),
                         DSD_CHOICES)
def test_dsd_plan_picks_the_kernel(dtype, b, n, ck, trans, arch, d, kernel):
    s = structure(ck // b, ck // b, d)
    p = plans.plan_dsd(s, dtype, b, n, trans, False, arch, SMS, dense_bytes_limit=None)
    assert p.path == "sparse"
    assert p.kernel.name == kernel
    line = str(p)
    assert line.startswith(f"X @ W{'.T' if trans else ''}, {n} rows, {dtype}, b = {b}: {kernel}")
    if p.kernel.persistent:
        assert p.grid == (min(p.grid[0], SMS * p.kernel.persistent),)
        assert "persistent" in line


def test_dense_path_where_the_model_says_so():
    s = structure(512, 512, 0.5)  # b = 8 at d = 0.5: the sparse kernels lose to cuBLAS ...
    assert dense_model.ratio("matmul", "float16", 8, 4096, 0.5) > 2
    # ... but for the dense panels over whole slices of X, which tie it (ratio 1: the
    # sparse path, which moves no dense copy of W)
    p = plans.plan_dsd(s, "float16", 8, 4096, False, False, 90, SMS, dense_bytes_limit=1 << 30)
    assert (p.path, p.panel, p.kernel.whole) == ("sparse", True, True)
    assert p.ratio == pytest.approx(1.0)
    with plans.override(panel=False):  # the other kernels: the dense path wins
        p = plans.plan_dsd(s, "float16", 8, 4096, False, False, 90, SMS, 1 << 30)
        assert p.path == "dense"
        # b = 8 in 16 bits at half density: W written whole (its 16-byte block rows scattered
        # alone would half-fill each sector they write)
        assert p.kernel.kernel == "fill_dense"
        assert "dense (W written whole" in str(p)
        with plans.override(fill=False):
            p = plans.plan_dsd(s, "float16", 8, 4096, False, False, 90, SMS, 1 << 30)
        assert p.kernel.kernel == "scatter_blocks"
        assert "dense (W's blocks scattered" in str(p)
        sparse = structure(512, 512, 0.1)  # below FILL_MIN_DENSITY: the scatter moves less
        with plans.override(dense=True):
            p = plans.plan_dsd(sparse, "float16", 8, 4096, False, False, 90, SMS, 1 << 30)
            assert (p.path, p.kernel.kernel) == ("dense", "scatter_blocks")
            p = plans.plan_dsd(s, "float32", 8, 4096, False, False, 90, SMS, 1 << 30)
            assert (p.path, p.kernel.kernel) == ("dense", "scatter_blocks")  # 32-byte rows
        # forbidden, or over the memory bound: sparse
        for limit in (None, 1 << 20):
            assert plans.plan_dsd(s, "float16", 8, 4096, False, False, 90, SMS,
                                  limit).path == "sparse"
    # b = 64 at d = 0.25: sparse wins
    s64 = structure(64, 64, 0.25)
    assert plans.plan_dsd(s64, "float16", 64, 4096, False, False, 90, SMS, 1 << 30).path == "sparse"
    # the weight gradient: the kernels of one block row per group lose to cuBLAS; the dense
    # panels, over tiles covering all of W, run at about its speed and keep the sparse path
    with plans.override(sdd_panel=False):
        q = plans.plan_sdd(s, "float16", 8, 4096, True, False, False, 90, SMS, 1 << 30)
    assert q.path == "dense"
    assert q.kernel.kernel == "gather_blocks"
    q = plans.plan_sdd(s, "float16", 8, 4096, True, False, False, 90, SMS, 1 << 30)
    assert q.path == "sparse"
    assert q.kernel.panel
    assert q.ratio == pytest.approx(1 / sdd_rules.SDD_PANEL_SPEED)


def test_small_n_plan_streams_w_with_x_in_shared_memory():
    """b = 8, 16 and 32 in 16 bits at the rows DSD_STREAM's tiles hold, where the grid fills the
    device: X's chunks in shared memory, W read once; the dense path is not weighed
    against it."""
    s = structure(1024, 1024, 0.25)
    for n, trans, arch in ((1, False, 90), (32, True, 80), (17, False, 90), (64, True, 90)):
        p = plans.plan_dsd(s, "bfloat16", 8, n, trans, False, arch, SMS, 1 << 34)
        assert (p.path, p.kernel.kernel) == ("sparse", "dsd_stream")
        assert p.kernel.rows_per_cta == 16 * -(-n // 16)
        t = dsd_configs.stream_tile(8, n)
        groups, chunks = 1024 // t.group, 1024 // t.chunk
        per_sm = 1 if arch == 80 else dsd_rules.STREAM_CTAS_PER_SM  # what the SM's memory holds
        run = dsd_rules.stream_run(groups, chunks, per_sm * SMS)
        assert p.grid == (groups, -(-chunks // run))
        assert p.split == run
        assert "chunk(s) per CTA" in str(p)
        assert p.ratio is None
        assert p.w_copy is None
    for b, n in ((8, 129), (16, 65), (32, 65)):  # past each block size's last tile
        assert plans.plan_dsd(s, "float16", b, n, False, False, 90, SMS, 1 << 34).kernel.kernel \
            != "dsd_stream", (b, n)
    assert plans.plan_dsd(s, "float32", 8, 32, False, False, 90, SMS).kernel.kernel \
        != "dsd_stream"
    assert plans.plan_dsd(s, "float16", 16, 32, False, False, 90, SMS).kernel.kernel \
        == "dsd_stream"  # b = 16 too (m16n8k16)
    for n, d in ((16, 0.05), (16, 0.1), (32, 0.1), (32, 0.25), (64, 0.25), (64, 0.5)):
        with plans.override(streamk=False):  # (past 32 rows the stream-K runs go first)
            got = plans.plan_dsd(structure(512, 512, d), "float16", 32, n, False, False, 90,
                                 SMS).kernel.kernel  # b = 32 from its tile's least density
        assert (got == "dsd_stream") == (d >= dsd_rules.STREAM_MIN_DENSITY[(32, n)]), (n, d)
    assert plans.plan_dsd(s, "float16", 8, 32, False, False, 75, SMS).kernel.kernel \
        != "dsd_stream"  # mma m16n8k8 in bfloat16 and movmatrix: sm_80 on
    # past 32 rows at b = 16, from d = 0.075 on (STREAM_MIN_DENSITY)
    for b, d, takes in ((16, 0.05, False), (16, 0.1, True), (8, 0.05, True), (8, 0.5, True)):
        ss = structure(1024, 1024, d)
        got = plans.plan_dsd(ss, "float16", b, 64, False, False, 90, SMS).kernel.kernel
        assert (got == "dsd_stream") == takes, (b, d)
        got = plans.plan_dsd(ss, "float16", b, 32, False, False, 90, SMS).kernel.kernel
        assert got == "dsd_stream", (b, d)
    small = structure(128, 128, 0.25)  # 4 x 2 CTAs: too few for the device
    assert plans.plan_dsd(small, "float16", 8, 32, False, False, 90, SMS).kernel.kernel \
        != "dsd_stream"
    with plans.override(stream=True):
        assert plans.plan_dsd(small, "float16", 8, 32, False, False, 90, SMS).kernel.kernel \
            == "dsd_stream"
    with plans.override(stream=False):
        assert plans.plan_dsd(s, "float16", 8, 32, False, False, 90, SMS).kernel.kernel \
            != "dsd_stream"
    with plans.override(stream_run=1000):  # one CTA per group writes Y itself
        p = plans.plan_dsd(s, "float16", 8, 32, False, False, 90, SMS)
        assert (p.grid, p.slots) == ((groups, 1), 0)
        assert "Y written by the CTA" in str(p)


def test_stream_tile_past_64_rows_stays_where_it_was_measured():
    """b = 8 at 65-128 rows: the 128-row tile where W has at least STREAM_MIN_BLOCKS blocks
    and its grid fills STREAM_MIN_GRID_FILL of the device's CTA slots; elsewhere the
    ladder and the dense model decide as before."""
    key = (8, 128)
    assert dsd_configs.stream_key(8, 65) == dsd_configs.stream_key(8, 128) == key
    assert dsd_configs.stream_key(8, 129) is None
    assert 13107 < dsd_rules.STREAM_MIN_BLOCKS[key] <= 26214  # (the measured sides)
    assert 192 / 264 < dsd_rules.STREAM_MIN_GRID_FILL[key] <= 256 / 264
    # (block grid side, density): C = K = 2048 to 16384 at b = 8; at 12288 96 groups of
    # output blocks make 192 CTAs for 264 slots
    for side, d, takes in ((256, 0.1, False), (256, 0.5, True), (512, 0.05, False),
                           (512, 0.1, True), (1024, 0.05, True), (1024, 0.5, True),
                           (1536, 0.25, False), (2048, 0.1, True)):
        s = structure(side, side, d)
        for n, trans in ((65, False), (100, True), (128, False)):
            p = plans.plan_dsd(s, "float16", 8, n, trans, False, 90, SMS, 1 << 34)
            assert (p.kernel.kernel == "dsd_stream") == takes, (side, d, n, trans)
            if takes:
                assert p.path == "sparse"
                assert p.kernel.rows_per_cta == 16 * -(-n // 16)
                assert not p.shared_sum  # past STREAM_SHARE_MAX_ROWS: a second launch adds
    # a forced run length changes the runs, not the choice (the rule judges its own grid)
    s = structure(1024, 1024, 0.25)
    for run in (1, 64, 1000):
        with plans.override(stream_run=run):
            p = plans.plan_dsd(s, "float16", 8, 128, False, False, 90, SMS, 1 << 34)
        assert p.kernel.kernel == "dsd_stream", run
        assert p.split == min(run, 128, 1024 // 8), run
    # measured on Hopper only: elsewhere the tile kernels keep these rows, where the tile
    # would fit (sm_89: one CTA an SM up to 112 rows; sm_80: one)
    for arch in (80, 89):
        p = plans.plan_dsd(s, "float16", 8, 100, False, False, arch, SMS, 1 << 34)
        assert p.kernel.kernel != "dsd_stream", arch
    assert dsd_rules.STREAM_MIN_ARCH[key] == 90
    # not square: 96 groups of K = 12288's output blocks x 2 runs leave the grid short of
    # the slots; 64 groups of K = 8192's x 4 runs of C = 12288's chunks fill them
    for rows, cols, takes in ((1024, 1536, False), (1536, 1024, True)):
        p = plans.plan_dsd(structure(rows, cols, 0.25), "float16", 8, 128, False, False, 90,
                           SMS, 1 << 34)
        assert (p.kernel.kernel == "dsd_stream") == takes, (rows, cols)
        if takes:
            assert p.grid == (64, 4)


def test_stream_partial_products_are_added_in_the_launch_up_to_32_rows():
    """Runs that leave partial products have them added by the group's own CTAs (one
    cooperative launch) up to STREAM_SHARE_MAX_ROWS rows, where the grid fits the device at
    once; past that, or forced off, or where the grid does not fit, a second launch adds
    them. The plan says which."""
    s = structure(1024, 1024, 0.25)
    for n in (1, 17, 32, 33, 64):
        p = plans.plan_dsd(s, "float16", 8, n, False, False, 90, SMS)
        assert p.kernel.kernel == "dsd_stream"
        assert p.slots > 0
        assert p.shared_sum == (n <= dsd_rules.STREAM_SHARE_MAX_ROWS), n
        assert ("cooperative launch" in str(p)) == p.shared_sum
        assert ("by a second launch" in str(p)) != p.shared_sum
    with plans.override(stream_share=False):
        assert not plans.plan_dsd(s, "float16", 8, 32, False, False, 90, SMS).shared_sum
    with plans.override(stream_share=True):
        assert plans.plan_dsd(s, "float16", 8, 64, False, False, 90, SMS).shared_sum
    with plans.override(stream_run=1000):  # one CTA per group: no partial products
        assert not plans.plan_dsd(s, "float16", 8, 32, False, False, 90, SMS).shared_sum
    tall = structure(2048, 1024, 0.05)  # capped runs: 2 per group of 32 groups ...
    with plans.override(stream=True, stream_run=1):  # ... or 128 per group: too many CTAs
        p = plans.plan_dsd(tall, "float16", 8, 16, False, False, 90, SMS)
    assert p.grid[0] * p.grid[1] > dsd_rules.STREAM_CTAS_PER_SM * SMS
    assert p.slots > 0
    assert not p.shared_sum


def test_stream_runs_fill_the_device_with_the_fewest_partial_products():
    """The shortest runs of chunks whose CTAs fit STREAM_CTAS_PER_SM to an SM at once (no
    second wave), never longer than the chunks there are."""
    slots = dsd_rules.STREAM_CTAS_PER_SM * 132
    for groups, chunks in ((32, 16), (48, 24), (16, 8), (100, 7), (300, 5), (1, 1)):
        run = dsd_rules.stream_run(groups, chunks, slots)
        assert 1 <= run <= chunks
        ctas = groups * -(-chunks // run)
        assert ctas <= slots or run == chunks
        assert run == 1 or groups * -(-chunks // (run - 1)) > slots
    assert dsd_rules.stream_run(32, 16, slots) == 2  # C = K = 8192: 8 runs of 2 chunks
    assert dsd_rules.stream_run(16, 8, slots) == 1
    assert dsd_rules.stream_run(300, 5, slots) == 5  # more groups than slots: one run each


def test_stream_plan_fits_the_device_and_caps_its_runs():
    """The small-N dsd only where its shared memory fits a CTA (sm_86 and sm_89 allow 99
    KiB: the 16-row tile at b = 8 fits, the 32-row one not), runs sized for the CTAs an
    SM holds (one on sm_80), and no run longer than the tile's max_run."""
    s = structure(1024, 1024, 0.25)
    for arch, n, fits in ((86, 16, True), (86, 32, False), (89, 64, False), (80, 32, True)):
        got = plans.plan_dsd(s, "float16", 8, n, False, False, arch, SMS).kernel.kernel
        assert (got == "dsd_stream") == fits, (arch, n)
    groups, chunks = 1024 // 32, 1024 // dsd_configs.stream_tile(8, 32).chunk
    assert plans.plan_dsd(s, "float16", 8, 32, False, False, 80, SMS).split == \
        dsd_rules.stream_run(groups, chunks, SMS)  # one CTA an SM on sm_80
    tall = structure(2048, 1024, 0.05)  # X @ W at 64 rows: 128 chunks of 16 block columns
    with plans.override(stream=True, stream_run=1000):
        p = plans.plan_dsd(tall, "float16", 8, 64, False, False, 90, SMS)
    assert (p.split, p.grid[1]) == (dsd_configs.stream_tile(8, 64).max_run, 2)


@pytest.mark.parametrize(("layout", "b", "whole"), [
    ("random", 8, True),     # every slice touched: one X copy a slice instead of 8
    ("random", 32, False),   # at d = 0.1 whole slices cover 1.4x the union's entries
    ("ws", 8, False),        # a ring's union: whole slices would cover 3.4x the entries
    ("banded", 8, True),     # runs of whole slices
])
def test_dense_panels_over_whole_slices_where_they_cover_little_more(layout, b, whole):
    """The TMA panels walk whole 64-column slices of X where those cover less than
    PANEL_WHOLE_GAIN times the union lists' entries (N = 8192, C = K = 1024 block rows
    of b = 8 or 256 of b = 32, d = 0.05-0.1); forced, either form runs."""
    nb = 8192 // b
    lay = {"random": lambda: cs.layouts.random(nb, nb, 0.1, seed=1),
           "ws": lambda: cs.layouts.watts_strogatz(nb, 26, 0.1, seed=1),
           "banded": lambda: cs.layouts.banded(nb, 51)}[layout]()
    s = cs.BlockSparseMatrix.from_layout(lay, b, backend="cpu")._structure
    g = dsd_configs.wgmma_config("float16", b, panel=True).group
    ratio = (worklists.panel_cover(s, False, g, 64 // b, whole=True)
             / worklists.panel_cover(s, False, g, 64 // b))
    assert (ratio < dsd_rules.PANEL_WHOLE_GAIN[b]) == whole
    with plans.override(panel=True):
        p = plans.plan_dsd(s, "float16", b, 8192, False, False, 90, SMS, None)
        assert p.kernel.whole == whole
        for forced in (False, True):
            with plans.override(panel_whole=forced):
                p = plans.plan_dsd(s, "float16", b, 8192, False, False, 90, SMS, None)
            assert p.kernel == dsd_configs.wgmma_config("float16", b, panel=True, whole=forced)
            assert p.pad == 64 // b


@pytest.mark.parametrize(("layout", "b", "two_parts"), [
    ("ws", 16, True),       # the band's tiles to the panels, the rewired blocks alone
    ("ws", 32, True),
    ("random", 32, False),  # no tile the blocks fill: one kernel
    ("banded", 32, False),  # d = 0.25: the band's edge tiles are filled enough
])
def test_weight_gradient_in_two_parts_where_some_tiles_are_filled(layout, b, two_parts):
    """The weight gradient at N = C = K = 8192, d = 0.25, runs in two parts where the
    panels over the tiles W's blocks fill plus the single-block kernel over the rest are
    predicted SDD_HYBRID_MIN_GAIN faster than either alone; forced off (or the panels
    forced off), one kernel; forced on, two parts wherever both have blocks."""
    nb = 8192 // b
    lay = {"random": lambda: cs.layouts.random(nb, nb, 0.25, seed=1),
           "ws": lambda: cs.layouts.watts_strogatz(nb, int(0.25 * nb) // 2 * 2, 0.1, seed=1),
           "banded": lambda: cs.layouts.banded(nb, int(0.25 * nb) // 2)}[layout]()
    s = cs.BlockSparseMatrix.from_layout(lay, b, backend="cpu")._structure

    def plan(**forced):
        with plans.override(**forced):
            return plans.plan_sdd(s, "float16", b, 8192, True, False, False, 90, SMS, None)

    p = plan()
    assert (p.rest is not None) == two_parts
    if two_parts:
        assert p.kernel.panel
        assert p.rest == sdd_configs.sdd_wgmma_config("float16", b, rest=True)
        assert "then the other blocks on sdd_wgmma_rest<" in str(p)
        assert p.rest_splits >= 1
        panels, singles, both = sdd_rules.sdd_hybrid_times(s, p.kernel, p.rest, b)
        assert both * sdd_rules.SDD_HYBRID_MIN_GAIN <= min(panels, singles)
    assert plan(sdd_hybrid=False).rest is None
    assert plan(sdd_panel=False).rest is None
    assert plan(sdd_panel=True).rest is None  # the panels alone, as forced
    forced = plan(sdd_hybrid=True)
    assert forced.kernel.panel
    # (the band fills every tile it touches: nothing left for a second part)
    assert (forced.rest is None) == (layout == "banded")


def test_forced_two_part_weight_gradient_at_a_short_reduction():
    """Forced on, the two parts run at 128 rows too, where the rule leaves them off (the
    short-reduction tile's range); forcing that tile on keeps them off."""
    lay = cs.layouts.watts_strogatz(256, 64, 0.1, seed=1)
    s = cs.BlockSparseMatrix.from_layout(lay, 32, backend="cpu")._structure
    assert sdd_rules.sdd_short_pays(128)
    assert plans.plan_sdd(s, "float16", 32, 128, True, False, False, 90, SMS, None).rest is None
    with plans.override(sdd_hybrid=True):
        assert plans.plan_sdd(s, "float16", 32, 128, True, False, False, 90, SMS,
                              None).rest is not None
    with plans.override(sdd_hybrid=True, sdd_short=True):
        assert plans.plan_sdd(s, "float16", 32, 128, True, False, False, 90, SMS,
                              None).rest is None


def test_panel_store_by_tma_needs_whole_64_column_boxes(monkeypatch):
    """A panel tile of 32 columns (b = 16, two blocks) stores Y from registers only: with
    the TMA store it is refused on the host, not left to the compiler."""
    tile = tiles.PersistentTile(1, 2, 4, 1, 1, True, 0, 1, 2, 64)
    monkeypatch.setitem(tiles.WGMMA_DSD_PANEL_TMA, 16, tile)
    configs.set_tiles()
    try:
        with pytest.raises(ValueError, match="whole 64-column"):
            dsd_configs.wgmma_config("float16", 16, panel=True)
        monkeypatch.setitem(tiles.WGMMA_DSD_PANEL_TMA, 16, tile._replace(epilogue=0))
        configs.set_tiles()
        assert dsd_configs.wgmma_config("float16", 16, panel=True).epilogue == 0
    finally:
        monkeypatch.undo()
        configs.set_tiles()


def test_sdd_two_part_tables_cover_every_block_once():
    """The two-part weight gradient's tables: the panel tiles the blocks fill at least
    ``min_fill`` of, and groups of up to ``rest_group`` of one block row's other blocks
    (listed by ``order``, wherever they lie in the row: a row's groups are full but its
    last); together every block once."""
    lay = cs.layouts.watts_strogatz(200, 20, 0.1, seed=1)
    s = cs.BlockSparseMatrix.from_layout(lay, 16, backend="cpu")._structure
    panels, rest, order = sdd_worklists.sdd_hybrid_host(s, 8, 16, 8, 0.2)
    assert panels.shape[0]
    assert rest.shape[0]
    assert ((panels[:, 2:] >= 0).sum(axis=1) >= 0.2 * 8 * 16).all()
    seen = np.zeros(s.nnzb, int)
    ids = panels[:, 2:]
    np.add.at(seen, ids[ids >= 0], 1)
    assert rest[0, 1] == 0
    assert (rest[1:, 1] == np.cumsum(rest[:-1, 2])).all()
    for i, (row, first, count) in enumerate(rest.tolist()):
        assert 1 <= count <= 8
        blocks = order[first:first + count]
        assert (s.rows[blocks] == row).all()
        if i + 1 < rest.shape[0] and rest[i + 1, 0] == row:
            assert count == 8  # only a row's last group is short
        seen[blocks] += 1
    assert (seen == 1).all()
    # the rewired blocks of a row are few and apart: fewer groups than runs of neighbours
    runs = 1 + np.count_nonzero((np.diff(order) != 1) | (np.diff(s.rows[order]) != 0))
    assert rest.shape[0] < runs


@pytest.mark.parametrize(("b", "groups", "inner", "splits"), [
    (16, 400, 8192, 4),     # b = 16: at least SDD_REST_LEAST_SPLITS
    (32, 400, 8192, 1),     # b = 32: a CTA a group where the groups fill the wave
    (32, 100, 8192, 5),     # as many as fill the wave
    (32, 600, 8192, 4),     # more groups than a wave holds: SDD_REST_SPLITS
    (16, 10, 8192, 8),      # at most SDD_REST_MAX_SPLITS
    (16, 10, 1024, 4),      # 32 slices of 32: at least SDD_REST_MIN_SLICES each
    (16, 10, 100, 1),       # 4 slices
])
def test_rest_splits(b, groups, inner, splits):
    """The second part's reduction is shared by as many CTAs as fill the device once (528
    slots), within the least and most splits and SDD_REST_MIN_SLICES slices each."""
    assert sdd_rules.SDD_REST_LEAST_SPLITS == {16: 4, 32: 1}
    assert sdd_rules.SDD_REST_SPLITS == 4
    assert sdd_rules.SDD_REST_MAX_SPLITS == 8
    assert sdd_rules.SDD_REST_MIN_SLICES == 8
    assert sdd_rules.sdd_rest_splits(b, groups, inner, 32, 528) == splits


def test_forced_rest_splits_reach_the_plan():
    """``sdd_rest_splits`` forces the second part's split; by the rule, 128 block rows'
    groups leave most of the device's slots to split their reductions, and a split second
    part runs beside the panels (``sdd_rest_beside``), a whole one after them."""
    lay = cs.layouts.watts_strogatz(128, 16, 0.1, seed=1)
    s = cs.BlockSparseMatrix.from_layout(lay, 16, backend="cpu")._structure
    with plans.override(sdd_hybrid=True):
        p = plans.plan_sdd(s, "float16", 16, 8192, True, False, False, 90, SMS, None)
    assert p.rest is not None, p
    assert p.rest_splits > 1, p
    assert f"{p.rest_splits} CTA(s) per group" in str(p)
    assert p.rest_beside  # split: beside the panels
    assert "beside the panels" in str(p)
    with plans.override(sdd_hybrid=True, sdd_rest_splits=3):
        p = plans.plan_sdd(s, "float16", 16, 8192, True, False, False, 90, SMS, None)
    assert p.rest_splits == 3
    with plans.override(sdd_hybrid=True, sdd_rest_splits=1):
        p = plans.plan_sdd(s, "float16", 16, 8192, True, False, False, 90, SMS, None)
    assert not p.rest_beside  # a CTA a group: after the panels
    with plans.override(sdd_hybrid=True, sdd_rest_splits=1, sdd_rest_beside=True):
        assert plans.plan_sdd(s, "float16", 16, 8192, True, False, False, 90, SMS,
                              None).rest_beside
    with plans.override(sdd_hybrid=True, sdd_rest_splits=0), pytest.raises(
            ValueError, match="sdd_rest_splits must be at least 1, got 0"):
        plans.plan_sdd(s, "float16", 16, 8192, True, False, False, 90, SMS, None)


@pytest.mark.parametrize(("groups", "slices", "splits"), [
    (528, 128, 1),   # four whole rounds of 132: nothing to cut
    (530, 128, 5),   # two groups in a fifth round
    (536, 128, 5),
    (563, 128, 3),   # 35: three pieces each fit one round of pieces
    (223, 128, 1),   # 91: pieces would save less than their partials cost
    (527, 128, 1),   # 131 of 132: the last round is nearly full
    (119, 128, 1),   # one partial round: pieces cannot make it shorter
    (530, 16, 1),    # a short reduction: the partials cost more than the round saved
    (530, 4, 1),     # one piece of SDD_TAIL_MIN_SLICES
])
def test_tail_split(groups, slices, splits):
    """The TMA sdd's last round: its groups cut into the number of pieces of least
    predicted time (SDD_PIECE_SLICES a piece and its share of the group's slices, the
    group's last piece reading every partial), taken where SDD_TAIL_MIN_GAIN faster."""
    assert sdd_rules.sdd_tail_split(groups, 132, slices) == splits


def test_tail_time():
    """The model behind the tail split: rounds of whole groups, then rounds of pieces, each
    a share of the slices plus SDD_PIECE_SLICES, and the last piece's sum of them all."""
    assert (sdd_rules.SDD_PIECE_SLICES, sdd_rules.SDD_TAIL_MIN_SLICES,
            sdd_rules.SDD_TAIL_MAX_SPLITS, sdd_rules.SDD_TAIL_MIN_GAIN) == (6, 4, 8, 1.05)
    assert sdd_rules.sdd_tail_time(528, 132, 128, 1) == 512
    assert sdd_rules.sdd_tail_time(528, 132, 128, 4) == 512  # no partial round to cut
    assert sdd_rules.sdd_tail_time(530, 132, 128, 1) == 640
    assert sdd_rules.sdd_tail_time(530, 132, 128, 8) == 4 * 128 + (16 + 6) + 8 * 6
    assert sdd_rules.sdd_tail_time(563, 132, 128, 4) == 4 * 128 + 2 * (32 + 6) + 4 * 6


def test_tail_split_reaches_the_plan():
    """b = 128, N = 8192 on 132 SMs: 64 block rows of 16 blocks make 512 groups of two,
    and 18 rows with a 17th block 530, whose last round's two groups run in five pieces
    each; with 16 such rows (528 groups, four whole rounds) every group runs whole.
    ``sdd_tail_splits`` forces a count, and below 1 is refused."""
    def plan(extra, **forced):
        lay = np.zeros((64, 64), bool)
        rows = np.arange(64)[:, None]
        lay[rows, (rows + 4 * np.arange(16)) % 64] = True
        lay[np.arange(extra), (np.arange(extra) + 1) % 64] = True
        s = cs.BlockSparseMatrix.from_layout(lay, 128, backend="cpu")._structure
        with plans.override(**forced):
            return plans.plan_sdd(s, "bfloat16", 128, 8192, True, False, False, 90, SMS, None)

    p = plan(18)
    assert (p.kernel.tma, p.kernel.group, p.tail_splits, p.tail_whole, p.grid) == (
        True, 2, 5, 528, 132), p
    assert "groups 528.. (the last round) each reduced in 5 pieces" in str(p)
    assert plan(18, sdd_tail_splits=2).tail_splits == 2
    q = plan(18, sdd_tail_splits=1)
    assert (q.tail_splits, q.tail_whole) == (1, 530)
    assert "pieces" not in str(q)
    q = plan(16)
    assert (q.tail_splits, q.tail_whole) == (1, 528)
    for bad in (0, 129):  # 8192 rows: 128 slices of 64
        with pytest.raises(ValueError, match=f"sdd_tail_splits must be 1 to the reduction's "
                                             f"128 64-deep slices, got {bad}"):
            plan(18, sdd_tail_splits=bad)


def test_whole_slice_lists():
    """Whole-slice lists: each group's touched slices, every block column of each in
    order (-1 past X's last), the union's blocks where it has them and -1 elsewhere."""
    lay = cs.layouts.random(37, 29, 0.15, seed=3)
    s = cs.BlockSparseMatrix.from_layout(lay, 8, backend="cpu")._structure
    for trans, nk in ((False, 37), (True, 29)):
        ptr, blk, gidx = worklists.lists(s, trans, 4, 8, whole=True)
        uptr, ublk, ugidx = s.grouped_lists(trans, 4)
        blk, ublk = blk.reshape(-1, 4), ublk.reshape(-1, 4)
        for g in range(ptr.shape[0] - 1):
            entries = range(ptr[g], ptr[g + 1])
            union = {int(ugidx[q]): tuple(ublk[q]) for q in range(uptr[g], uptr[g + 1])}
            assert len(entries) == 8 * len({k // 8 for k in union})
            for q in entries[::8]:
                first = int(gidx[q])
                assert first % 8 == 0
                assert first // 8 in {k // 8 for k in union}
                cols = np.arange(first, first + 8)
                assert (gidx[q:q + 8] == np.where(cols < nk, cols, -1)).all()
                for i, k in enumerate(cols):
                    assert tuple(blk[q + i]) == union.get(int(k), (-1,) * 4)
    with pytest.raises(ValueError, match="whole slices span at least two"):
        worklists.lists(s, False, 4, 1, whole=True)


def test_dsd_plan_takes_dense_panels_where_members_fill_them():
    """A banded W (neighbouring output blocks share their lists) at N = 8192: the TMA
    kernel's dense panels over whole slices of X (the band's lists are runs of slices),
    gathered per call; its dense-path ratio follows the share of W its panels cover. A
    random W at d = 0.05 fills too little of the panels, and at 128 rows the panels' tiles
    are too few for the device."""
    band = cs.BlockSparseMatrix.from_layout(cs.layouts.banded(256, 32), 16,
                                            backend="cpu")._structure
    panel = dsd_configs.wgmma_config("float16", 16, panel=True, whole=True)
    assert panel.group == 16
    assert panel.kernel == "dsd_wgmma_tma"
    assert panel.whole
    for trans in (False, True):
        p = plans.plan_dsd(band, "float16", 16, 8192, trans, False, 90, SMS, 1 << 30)
        assert (p.path, p.kernel, p.panel) == ("sparse", panel, True)
        assert "dense panels of 16 blocks (absent blocks multiplied as zeros" in str(p)
        assert p.w_copy == "panel_blocks"  # the panels gathered per call, zeros included
        assert "gathered into the panels per call" in str(p)
        cover = worklists.panel_cover(band, trans, panel.group, 4, whole=True)
        assert 0 < cover < 0.5
        speeds = np.array(dsd_rules.PANEL_WHOLE_SPEED)  # by cover, over whole slices
        assert p.ratio == pytest.approx(
            cover / np.interp(np.log(cover), np.log(speeds[:, 0]), speeds[:, 1]))
        assert plans.plan_dsd(band, "float16", 16, 128, trans, False, 90, SMS,
                              None).kernel != panel
    rand = structure(256, 256, 0.05)
    assert worklists.sharing(rand, False, panel.group) < dsd_rules.PANEL_MIN_FILL[16] * panel.group
    q = plans.plan_dsd(rand, "float16", 16, 8192, False, False, 90, SMS, None)
    assert q.kernel != panel
    assert not q.panel
    assert "panels" not in str(q)
    with plans.override(panel=True):  # (the union's entries: whole slices cover 1.7x them)
        assert plans.plan_dsd(rand, "float16", 16, 8192, False, False, 90, SMS,
                              None).kernel == dsd_configs.wgmma_config("float16", 16, panel=True)
    with plans.override(panel=False):
        assert plans.plan_dsd(band, "float16", 16, 8192, False, False, 90, SMS,
                              None).kernel != panel
    # panels off (the dense_panels option): not even a forced decision takes them
    with plans.override(panel=True):
        assert plans.plan_dsd(band, "float16", 16, 8192, False, False, 90, SMS, None,
                              panels=False).kernel != panel


def test_panel_config_falls_back_to_the_union_kernel(monkeypatch):
    """Without a TMA panel tile for the block size, the panels run on the union kernel
    (its PANEL flag set)."""
    monkeypatch.setitem(tiles.WGMMA_DSD_PANEL_TMA, 32, None)
    configs.set_tiles()
    try:
        union = dsd_configs.wgmma_config("bfloat16", 32, panel=True)
        assert union.kernel == "dsd_wgmma_union"
        assert ",true," in union.name
    finally:
        monkeypatch.undo()
        configs.set_tiles()
    assert dsd_configs.wgmma_config("bfloat16", 32, panel=True).kernel == "dsd_wgmma_tma"


def test_tma_panel_tiles_are_checked():
    """A tile of several blocks with X's rows as M must be a panel of b <= 32 on TMA
    copies, one m64 tile per warpgroup: the config says what it got."""
    kept = tiles.WGMMA_DSD_PANEL_TMA[32]
    configs.set_tiles(wgmma_panel_tma={32: kept._replace(m_tiles=2)})
    try:
        with pytest.raises(ValueError, match="m_tiles = 1"):
            dsd_configs.wgmma_config("float16", 32, panel=True)
    finally:
        configs.set_tiles(wgmma_panel_tma={32: kept})


def test_sdd_groups_cover_every_block_once():
    """The group table (a CTA's unit of the grouped sdd): runs of at most G blocks of one
    block row, in order, covering every stored block once; group_count is its length."""
    s = structure(37, 29, 0.2)
    for group in (1, 2, 4, 16):
        t = sdd_worklists.sdd_groups_host(s, group)
        assert sdd_worklists.group_count(s, group) == t.shape[0]
        assert (t[:, 2] >= 1).all()
        assert (t[:, 2] <= group).all()
        starts = np.concatenate([[0], np.cumsum(t[:, 2])[:-1]])
        assert (t[:, 1] == starts).all()  # consecutive runs of the block list
        assert t[:, 2].sum() == s.nnzb
        indptr = s.host_indptr
        assert (t[:, 1] >= indptr[t[:, 0]]).all()  # each run inside its block row
        assert (t[:, 1] + t[:, 2] <= indptr[t[:, 0] + 1]).all()


def test_split_rule_spares_persistent_kernels_the_short_gate():
    """Idle SMs split lists from a shorter longest list on CUDA cores (a few microseconds)
    than on the persistent wgmma kernels, whose CTAs already share the tiles: float32 at
    N = 1 splits, the persistent float16 kernel at N = 80 does not (A/B on an H100 at 128
    rows, where the tile now keeps its lists whole anyway)."""
    s = structure(4096 // 32, 4096 // 32, 0.1)
    assert plans.plan_dsd(s, "float32", 32, 1, False, False, 90, SMS, None).split > 0
    s = structure(4096 // 64, 4096 // 64, 0.1)
    p = plans.plan_dsd(s, "float16", 64, 80, False, False, 90, SMS, None)
    assert p.kernel.persistent
    assert p.split == 0


def test_persistent_tiles_that_x_fills_keep_their_lists_whole():
    """b = 128's 64 lists of about 6 blocks would leave SMs idle: on the persistent
    128-row tile they are split at N = 80 but kept whole from N = 96 (3/4 of the tile), where
    the partials cost more than the idle SMs (A/B on an H100 with lists of 3-40 blocks;
    longer lists: the next test); a narrow W's few long lists are still split there."""
    s = structure(8192 // 128, 8192 // 128, 0.1)
    p = plans.plan_dsd(s, "float16", 128, 80, False, False, 90, SMS, None)
    assert p.kernel.persistent, p
    assert p.split > 0, p
    for n in (96, 128):
        p = plans.plan_dsd(s, "float16", 128, n, False, False, 90, SMS, None)
        assert p.kernel.persistent, p
        assert p.kernel.rows_per_cta == 128, p
        assert p.split == 0, (n, p)
        with plans.override(split=8):  # the tile itself takes a split
            assert plans.plan_dsd(s, "float16", 128, n, False, False, 90, SMS, None).split == 8
    narrow = structure(16384 // 128, 512 // 128, 0.5)  # 4 lists of about 64 blocks
    p = plans.plan_dsd(narrow, "float16", 128, 128, False, False, 90, SMS, None)
    assert p.kernel.persistent, p
    assert p.split > 0, p


def test_b128_lists_of_16_to_48_blocks_split_at_their_mean():
    """On b = 128's persistent tile, at one row tile that X fills (96-128 rows), lists
    averaging SPLIT_MEAN_LIST blocks are cut at the largest power of two no longer than
    their mean (A/B on an H200: 1.02-1.24x); shorter or longer lists, b = 64 and two row
    tiles stay whole."""
    lo, hi = dsd_rules.SPLIT_MEAN_LIST
    assert (lo, hi) == (16, 48)
    for ck, d, want in ((8192, 0.25, 16), (8192, 0.5, 32), (12288, 0.25, 16),
                        (12288, 0.5, 32), (16384, 0.25, 32), (16384, 0.5, 0), (8192, 0.1, 0)):
        s = structure(ck // 128, ck // 128, d)
        mean = s.nnzb / (ck // 128)
        assert (lo <= mean <= hi) == (want > 0), (ck, d, mean)
        for n, trans in ((96, False), (128, True)):
            p = plans.plan_dsd(s, "float16", 128, n, trans, False, 90, SMS, None)
            assert p.kernel.persistent, p
            assert p.kernel.rows_per_cta == 128, p
            assert p.split == want, (ck, d, n, trans, p)
        # two row tiles, and b = 64's lists, stay whole
        assert plans.plan_dsd(s, "float16", 128, 256, False, False, 90, SMS, None).split == 0
    s = structure(8192 // 64, 8192 // 64, 0.25)  # b = 64: lists of about 32 blocks
    assert plans.plan_dsd(s, "float16", 64, 128, False, False, 90, SMS, None).split == 0


@pytest.mark.parametrize(("split", "group"), [(2, 1), (3, 1), (2, 4)])
def test_dsd_split_table_gives_each_slot_its_list(split, group):
    """dsd_host with a split: a list's segments cover it in order and take consecutive
    slots, and segs[slot] names the list's first slot and segment count (what the CTA of
    the last segment adds up); unsplit lists have no slot."""
    s = structure(23, 19, 0.3)
    work, _, _, segs, n_slots = worklists.dsd_host(s, False, split, group)
    ptr = worklists.lists(s, False, group)[0]
    assert segs.shape == (n_slots, 2)
    assert n_slots > 0
    for tile in range(ptr.shape[0] - 1):
        rows = work[work[:, 0] == tile]
        rows = rows[np.argsort(rows[:, 1])]
        assert rows[0, 1] == ptr[tile]
        assert rows[:, 2].sum() == ptr[tile + 1] - ptr[tile]
        assert (rows[1:, 1] == rows[:-1, 1] + rows[:-1, 2]).all()  # contiguous segments
        if rows.shape[0] == 1:
            assert rows[0, 3] == -1
            continue
        s0 = rows[0, 3]
        assert (rows[:, 3] == s0 + np.arange(rows.shape[0])).all()
        assert (segs[rows[:, 3]] == [s0, rows.shape[0]]).all()
    assert np.array_equal(np.sort(work[work[:, 3] >= 0, 3]), np.arange(n_slots))


@pytest.mark.parametrize("b", [8, 16, 32])
def test_sdd_plan_takes_dense_panels_where_blocks_fill_them(b):
    """The TMA sdd's dense panels (128 / b block rows by 256 / b block columns per tile):
    taken for a long reduction over a banded W, whose blocks fill most of the tiles that
    hold any; not for a short reduction, nor where the blocks fill too little of the tiles
    (a random W at d = 0.02), nor off Hopper; the decision can be forced."""
    band = cs.BlockSparseMatrix.from_layout(cs.layouts.banded(8192 // b, 8192 // b // 16), b,
                                            backend="cpu")._structure
    panel = sdd_configs.sdd_wgmma_config("float16", b, panel=True)
    assert (panel.block_rows, panel.group) == (128 // b, 256 // b)
    assert sdd_worklists.panel_fill(band, panel.block_rows, panel.group) > 0.5
    p = plans.plan_sdd(band, "float16", b, 8192, True, False, False, 90, SMS, None)
    assert p.kernel == panel
    tiles = sdd_worklists.sdd_panel_tiles_host(band, panel.block_rows, panel.group).shape[0]
    assert p.grid == min(tiles, SMS)
    assert f"dense panels of {128 // b} x {256 // b} blocks per tile" in str(p)
    # the dense path's model: the share of the block grid the tiles cover, at the panels' speed
    nbr, nbc = band.block_shape
    assert p.ratio == pytest.approx(tiles * panel.block_rows * panel.group / (nbr * nbc)
                                    / sdd_rules.SDD_PANEL_SPEED)
    assert plans.plan_sdd(band, "float16", b, 32, True, False, False, 90, SMS,
                          None).kernel != panel
    assert plans.plan_sdd(band, "float16", b, 8192, True, False, False, 80, SMS,
                          None).kernel != panel
    sparse = structure(8192 // b, 8192 // b, 0.02)
    assert sdd_worklists.panel_fill(sparse, panel.block_rows, panel.group) < \
        sdd_rules.SDD_PANEL_MIN_FILL[b]
    assert plans.plan_sdd(sparse, "float16", b, 8192, True, False, False, 90, SMS,
                          None).kernel != panel
    with plans.override(sdd_panel=True):
        assert plans.plan_sdd(sparse, "float16", b, 8192, True, False, False, 90, SMS,
                              None).kernel == panel


def test_panel_speed_follows_the_density():
    """The panels' speed per MMA: the table's points at their densities, in between
    interpolated in log density (rising with it), held past the ends."""
    for b, points in dsd_rules.PANEL_SPEED.items():
        for d, speed in points:
            assert dsd_rules.panel_speed(b, d) == pytest.approx(speed)
        (d0, s0), (d1, s1) = points[:2]
        mid = dsd_rules.panel_speed(b, (d0 * d1) ** 0.5)
        assert mid == pytest.approx((s0 + s1) / 2)
        assert dsd_rules.panel_speed(b, d0 / 10) == pytest.approx(s0)
        assert dsd_rules.panel_speed(b, 1.0) == pytest.approx(points[-1][1])


def test_sdd_panels_give_way_to_other_forced_sdd_decisions():
    """A forced sdd kernel (short tile, TMA tile, tiled small-block kernel) is not replaced
    by the panels' rule; a forced ``sdd_panel`` still takes them."""
    band = cs.BlockSparseMatrix.from_layout(cs.layouts.banded(256, 16), 32,
                                            backend="cpu")._structure
    panel = sdd_configs.sdd_wgmma_config("float16", 32, panel=True)
    assert plans.plan_sdd(band, "float16", 32, 8192, True, False, False, 90, SMS,
                          None).kernel == panel
    for forced in ({"sdd_short": True}, {"sdd_tma": True}, {"sdd_tiled": True}):
        with plans.override(**forced):
            assert plans.plan_sdd(band, "float16", 32, 8192, True, False, False, 90, SMS,
                                  None).kernel != panel, forced
    with plans.override(sdd_short=True, sdd_panel=True):
        assert plans.plan_sdd(band, "float16", 32, 8192, True, False, False, 90, SMS,
                              None).kernel == panel


def test_panel_plans_take_their_tiles_in_bands():
    """The TMA panels' plan: tiles in bands of DSD_PANEL_BAND row tiles (fewer where X has
    fewer), lists padded to whole 64-deep slices, the dense-path ratio counting the padding;
    other TMA plans keep one row tile per band; a band below one is refused."""
    band = cs.BlockSparseMatrix.from_layout(cs.layouts.banded(512, 15), 16,
                                            backend="cpu")._structure
    with plans.override(panel_whole=False):  # (the padding to count: the entries')
        p = plans.plan_dsd(band, "float16", 16, 8192, False, False, 90, SMS, None)
    assert p.panel
    assert (p.band, p.pad) == (dsd_rules.DSD_PANEL_BAND, 4)
    assert f"tiles taken in bands of {dsd_rules.DSD_PANEL_BAND} row tiles" in str(p)
    cover = worklists.panel_cover(band, False, p.kernel.group, 4)
    assert cover > worklists.panel_cover(band, False, p.kernel.group)
    assert p.ratio == pytest.approx(
            cover / dsd_rules.panel_speed(16, band.nnzb / np.prod(band.block_shape)))
    with plans.override(panel=True):
        short = plans.plan_dsd(band, "float16", 16, 300, False, False, 90, SMS, None)
    assert short.band == 3  # three row tiles of 128
    tall = plans.plan_dsd(structure(64, 64, 0.25), "float16", 128, 8192, False, False, 90,
                          SMS, None)
    assert tall.kernel.tma
    assert (tall.band, tall.pad) == (1, 1)
    with plans.override(band=0), pytest.raises(ValueError, match="at least one row tile"):
        plans.plan_dsd(band, "float16", 16, 8192, False, False, 90, SMS, None)


def test_panel_configs_are_checked(monkeypatch):
    """A tile of several blocks with X's rows as M is only the panels' (its lists padded,
    its blocks gathered); in another table it is refused. Lists of single blocks have no
    padding."""
    monkeypatch.setitem(tiles.WGMMA_DSD_PAIR, 32, tiles.PersistentTile(1, 2, 4, 1, 1, True, 0,
                                                                        1, 2))
    configs.set_tiles()
    try:
        with pytest.raises(ValueError, match="rows > 0"):
            dsd_configs.wgmma_config("float16", 32, pair=True)
    finally:
        monkeypatch.undo()
        configs.set_tiles()
    with pytest.raises(ValueError, match="only the lists of groups are padded"):
        worklists.lists(structure(8, 8, 0.5), False, 1, 2)


def test_sdd_panel_tiles_hold_each_block_once():
    """The panel tiles' table: the tiles of 4 x 8 blocks holding a stored block, each with
    its first block row and column and every stored block at its position (row-major), -1
    elsewhere; each block once."""
    s = structure(37, 29, 0.2)
    table = sdd_worklists.sdd_panel_tiles_host(s, 4, 8)
    lay = s.layout()
    ids = np.full(lay.shape, -1)
    ids[s.rows, s.host_indices] = np.arange(s.nnzb)
    assert (table[:, 0] % 4 == 0).all()
    assert (table[:, 1] % 8 == 0).all()
    seen = []
    for row in table:
        r0, c0, pos = row[0], row[1], row[2:].reshape(4, 8)
        want = np.full((4, 8), -1)
        part = ids[r0:r0 + 4, c0:c0 + 8]
        want[:part.shape[0], :part.shape[1]] = part
        assert np.array_equal(pos, want)
        assert (pos >= 0).any()
        seen += list(pos[pos >= 0])
    assert sorted(seen) == list(range(s.nnzb))
    assert sdd_worklists.panel_fill(s, 4, 8) == pytest.approx(s.nnzb / (table.shape[0] * 32))


@pytest.mark.parametrize("pad", [2, 4])
def test_padded_group_lists_keep_each_entry_at_a_slice_boundary(pad):
    """The TMA panels' lists: each group's union list in order, then entries of no block
    and X's block column -1 up to a multiple of ``pad``, every group starting on one."""
    s = structure(37, 29, 0.2)
    ptr, blk, gidx = worklists.lists(s, False, 8)
    pptr, pblk, pgidx = worklists.lists(s, False, 8, pad)
    assert (pptr % pad == 0).all()
    assert pptr.shape == ptr.shape
    pblk = pblk.reshape(-1, 8)
    for g in range(ptr.shape[0] - 1):
        n, a, p = ptr[g + 1] - ptr[g], ptr[g], pptr[g]
        assert pptr[g + 1] - p == -(-n // pad) * pad
        assert np.array_equal(pgidx[p:p + n], gidx[a:a + n])
        assert np.array_equal(pblk[p:p + n], blk.reshape(-1, 8)[a:a + n])
        assert (pgidx[p + n:pptr[g + 1]] == -1).all()
        assert (pblk[p + n:pptr[g + 1]] == -1).all()
    work = worklists.dsd_host(s, False, 0, 8, pad)[0]
    assert (work[:, 1] % pad == 0).all()
    assert (work[:, 2] % pad == 0).all()


@pytest.mark.usefixtures("no_tma_sdd")
def test_sdd_plan_takes_the_wide_tile_for_a_wide_w():
    """b = 128, a reduction too long for the short tile, the TMA kernel turned off: two
    blocks per CTA where W has at least SDD_WIDE_MIN_COLS columns and rows, one below; the
    decision can be forced."""
    wide = sdd_configs.sdd_wgmma_config("float16", 128, wide=True)
    regular = sdd_configs.sdd_wgmma_config("float16", 128)
    assert wide.group == 2
    assert regular.group == 1
    big = structure(sdd_rules.SDD_WIDE_MIN_COLS // 128, sdd_rules.SDD_WIDE_MIN_COLS // 128, 0.1)
    small = structure(sdd_rules.SDD_WIDE_MIN_COLS // 256, sdd_rules.SDD_WIDE_MIN_COLS // 128, 0.1)
    assert plans.plan_sdd(big, "float16", 128, 4096, True, False, False, 90, SMS).kernel == wide
    assert plans.plan_sdd(small, "float16", 128, 4096, True, False, False, 90, SMS).kernel == \
        regular
    # short reductions keep the short tile; b = 64 has no wide tile
    assert plans.plan_sdd(big, "float16", 128, 32, True, False, False, 90, SMS).grid > 0
    assert plans.plan_sdd(big, "float16", 64, 4096, True, False, False, 90, SMS).kernel == \
        sdd_configs.sdd_wgmma_config("float16", 64)
    with plans.override(sdd_wide=False):
        assert plans.plan_sdd(big, "bfloat16", 128, 4096, True, False, False, 90,
                              SMS).kernel == sdd_configs.sdd_wgmma_config("bfloat16", 128)
    with plans.override(sdd_wide=True):
        assert plans.plan_sdd(small, "float16", 128, 4096, True, False, False, 90,
                              SMS).kernel == wide


@pytest.fixture
def no_tma_sdd():
    with plans.override(sdd_tma=False, sdd_pair=False):
        yield


def test_sdd_plan_takes_the_tma_kernel_for_long_reductions_on_a_wide_w():
    """b = 128 on Hopper, a long reduction over a wide W: the persistent TMA sdd on a grid
    of its CTAs per SM, at most one per group; a narrow W, a short reduction, A read as
    [m][k] and sm_80 keep the cp.async kernels (b = 64 has no TMA tile); the decision can
    be forced."""
    b = 128
    tma = sdd_configs.sdd_wgmma_config("float16", b, tma=True)
    assert tma.tma
    assert tma.kernel == "sdd_wgmma_tma"
    big = structure(sdd_rules.SDD_WIDE_MIN_COLS // b, sdd_rules.SDD_WIDE_MIN_COLS // b, 0.1)
    small = structure(sdd_rules.SDD_WIDE_MIN_COLS // b // 2, sdd_rules.SDD_WIDE_MIN_COLS // b, 0.1)
    p = plans.plan_sdd(big, "float16", b, 4096, True, False, False, 90, SMS)
    assert p.kernel == tma
    assert p.grid == min(SMS * tma.persistent, sdd_worklists.group_count(big, tma.group))
    assert "sdd_wgmma_tma<" in str(p)
    assert "persistent" in str(p)
    for args in [(small, "float16", b, 4096, True, False, False, 90, SMS),
                 (big, "float16", b, 32, True, False, False, 90, SMS),
                 (big, "float16", b, 4096, False, False, False, 90, SMS),
                 (big, "float16", b, 4096, True, False, False, 80, SMS)]:
        assert not plans.plan_sdd(*args).kernel.tma, args[1:]
    with plans.override(sdd_tma=False):
        assert not plans.plan_sdd(big, "float16", b, 4096, True, False, False, 90,
                                  SMS).kernel.tma
    with plans.override(sdd_tma=True, grid_limit=3):
        p = plans.plan_sdd(small, "bfloat16", b, 4096, True, False, False, 90, SMS)
        assert p.kernel == sdd_configs.sdd_wgmma_config("bfloat16", b, tma=True)
        assert p.grid == 3
    assert sdd_configs.sdd_wgmma_config("float16", 64, tma=True) is None


@pytest.mark.parametrize("b", [16, 32, 64, 128])
def test_sdd_plan_runs_short_reductions_persistent(b):
    """A short reduction (the batch of a small-N weight gradient) runs the wgmma sdd on a
    grid sized to the device, at most one CTA per group; a long one a CTA per group (the
    short-reduction sdd of b = 16 forced off)."""
    s = structure(4096 // b, 4096 // b, 0.25)
    with plans.override(sdd_stream=False):
        short = plans.plan_sdd(s, "float16", b, 32, True, False, False, 90, SMS, None)
        mid = plans.plan_sdd(s, "float16", b, 100, True, False, False, 90, SMS, None)
    # one slice as deep as the reduction; longer ones in the tile's own slices
    assert short.kernel == sdd_configs.sdd_wgmma_config("float16", b, True,
                                                        sdd_rules.SDD_ONE_SLICE_K)
    assert f",{sdd_rules.SDD_ONE_SLICE_K}>" in short.kernel.name
    assert mid.kernel == sdd_configs.sdd_wgmma_config("float16", b, True)
    groups = sdd_worklists.group_count(s, short.kernel.group)
    assert short.grid == min(groups, SMS * short.kernel.persistent) > 0
    assert f"grid ({short.grid},)" in str(short)
    assert "persistent" in str(short)
    # (b = 64's paired tile and the small blocks' panels are persistent too)
    with plans.override(sdd_pair=False, sdd_panel=False):
        long = plans.plan_sdd(s, "float16", b, 4096, True, False, False, 90, SMS, None)
    assert long.grid == 0
    assert "persistent" not in str(long)
    with plans.override(sdd_short=True, grid_limit=3):
        assert plans.plan_sdd(s, "float16", b, 4096, True, False, False, 90, SMS, None).grid == 3
    # off Hopper the mma.sync sdd takes a CTA per group, and so does TF32
    with plans.override(sdd_stream=False):
        assert plans.plan_sdd(s, "float16", b, 32, True, False, False, 80, SMS, None).grid == 0
    assert plans.plan_sdd(s, "float32", b, 32, True, False, True, 90, SMS, None).grid == 0


def test_dense_model_has_no_data_for_float64_and_tf32():
    assert dense_model.ratio("matmul", "float64", 8, 4096, 0.5) is None
    assert dense_model.ratio("matmul", "float32", 8, 4096, 0.5, tf32=True) is None
    # interpolation stays inside the measured range
    lo = dense_model.ratio("matmul", "float16", 32, 4096, 0.25)
    hi = dense_model.ratio("matmul", "float16", 32, 4096, 0.5)
    mid = dense_model.ratio("matmul", "float16", 32, 4096, 0.35)
    assert min(lo, hi) <= mid <= max(lo, hi)


def test_override_forces_and_restores():
    s = structure(512, 512, 0.5)
    with plans.override(dense=False):
        assert plans.plan_dsd(s, "float16", 8, 4096, False, False, 90, SMS, 1 << 30).path == \
            "sparse"
        with plans.override(split=2, stream=False):
            p = plans.plan_dsd(s, "float16", 8, 64, False, False, 90, SMS, 1 << 30)
            assert p.split == 2
            assert p.slots > 0
            assert "split at 2" in str(p)
            assert "last CTA" in str(p)
    assert plans.forced("dense") is None
    assert plans.forced("split") is None
    with pytest.raises(ValueError, match="unknown plan decisions"), plans.override(colour=True):
        pass


def test_options_are_checked():
    with pytest.raises(ValueError, match="unknown options"):
        cs.set_options(dense=True)
    with pytest.raises(TypeError, match="dense_fallback must be True or False"):
        cs.set_options(dense_fallback=1)
    with pytest.raises(TypeError, match="dense_panels must be True or False"):
        cs.set_options(dense_panels="no")
    with cs.options(dense_panels=False):
        assert cs.get_options()["dense_panels"] is False
    assert cs.get_options()["dense_panels"] is True
    with pytest.raises(ValueError, match="dense_max_bytes"):
        cs.set_options(dense_max_bytes=-1)
    with cs.options(dense_max_bytes=5):
        assert cs.get_options()["dense_max_bytes"] == 5
    assert cs.get_options()["dense_max_bytes"] == 1 << 30


def test_the_runner_key_follows_the_options():
    """The options a plan reads are part of every runner's key, as the tuple the eager
    paths read (_options.KEY), kept in step by set_options."""
    from cubsparse import _options
    from cubsparse._cuda import run

    def key():
        return run._key("dsd", 0, 32, False, False)

    assert (_options.dense_bytes_limit(), _options.dense_panels()) == _options.KEY
    before = key()
    for change in ({"dense_fallback": False}, {"dense_max_bytes": 5}, {"dense_panels": False}):
        with cs.options(**change):
            assert (_options.dense_bytes_limit(), _options.dense_panels()) == _options.KEY
            assert key() != before, change
        assert key() == before


# -- on the device ---------------------------------------------------------------------------
def _ref(x, w, trans):
    wd = to_numpy(w.toarray()).astype(np.float64)
    return to_numpy(x).astype(np.float64) @ (wd.T if trans else wd)


def _check_alpha_beta(a, op, ref, rng, dtype, backend, tol):
    """``matmul(a, op, out=y, alpha=0.5, beta=2.0)`` against 0.5 ``ref`` + 2 ``y``."""
    y = to_backend(rng.standard_normal(ref.shape), backend).astype(dtype)
    y0 = to_numpy(y).astype(np.float64)
    cs.matmul(a, op, out=y, alpha=0.5, beta=2.0)
    want = 0.5 * ref + 2.0 * y0
    err = np.linalg.norm(to_numpy(y).astype(np.float64) - want) / np.linalg.norm(want)
    assert err < 2 * tol


@pytest.mark.parametrize("backend", CUDA, indirect=True)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("b", [8, 32])
@pytest.mark.parametrize("fill", [False, True])
def test_dense_path_matches_scipy(backend, dtype, b, fill):
    rng = np.random.default_rng(b)
    lay = rng.random((9, 7)) < 0.5
    lay[:, 3] = False
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, seed=3, backend=backend)
    tol = cs._dtypes.TOLERANCE[dtype]
    with plans.override(dense=True, fill=fill):
        x = to_backend(rng.standard_normal((50, 9 * b)), backend).astype(dtype)
        dy = to_backend(rng.standard_normal((50, 7 * b)), backend).astype(dtype)
        plan = cs.matmul_plan(x, w)
        assert plan.path == "dense"
        assert plan.kernel.kernel == ("fill_dense" if fill else "scatter_blocks")
        # W's values change in place between calls: each call writes the buffer again
        before = to_numpy(cs.matmul(x, w))
        w.data *= 2
        np.testing.assert_allclose(to_numpy(cs.matmul(x, w)).astype(np.float64),
                                   2 * before.astype(np.float64), rtol=0, atol=0)
        w.data /= 2
        for a, op, trans in ((x, w, False), (dy, w.T, True)):
            ref = _ref(a, w, trans)
            got = to_numpy(cs.matmul(a, op, out=poison(ref.shape, dtype, backend)))
            assert np.linalg.norm(got.astype(np.float64) - ref) / np.linalg.norm(ref) < tol
            _check_alpha_beta(a, op, ref, rng, dtype, backend, tol)
            first = to_numpy(cs.matmul(a, op))  # a repeated call takes the eager route
            np.testing.assert_array_equal(to_numpy(cs.matmul(a, op)), first)
            assert np.linalg.norm(first.astype(np.float64) - ref) / np.linalg.norm(ref) < tol
        d = to_backend(rng.standard_normal((7 * b, 5)), backend).astype(dtype)
        ref = to_numpy(w.toarray()).astype(np.float64) @ to_numpy(d).astype(np.float64)
        got = to_numpy(w @ d).astype(np.float64)  # (d.T @ W.T).T: X read as stored columns
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < tol
        assert cs.sampled_matmul_plan(x.T, dy, like=w).path == "dense"
        for a_op in (x.T, x.T.copy()):  # read as [k][m] (transposed) and as [m][k]
            g = cs.sampled_matmul(a_op, dy, like=w)
            g2 = cs.sampled_matmul(a_op, dy, like=w)
            np.testing.assert_array_equal(to_numpy(g.data), to_numpy(g2.data))
        g = cs.sampled_matmul(x.T, dy, like=w)
        mask = np.kron(lay, np.ones((b, b)))
        ref = (to_numpy(x).astype(np.float64).T @ to_numpy(dy).astype(np.float64)) * mask
        got = to_numpy(g.toarray()).astype(np.float64)
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < tol
        cs.sampled_matmul(x.T, dy, like=w, out=g, alpha=0.5, beta=2.0)
        got2 = to_numpy(g.toarray()).astype(np.float64)
        assert np.linalg.norm(got2 - 2.5 * got) / np.linalg.norm(2.5 * got) < 2 * tol


def _check_stream(w, lay_shape, n, dtype, backend, rng, **forced):
    """Both products of ``w`` on the stream kernel against float64 references: a poisoned
    output, two more calls giving the same bits, alpha and beta."""
    b = w.blocksize
    tol = cs._dtypes.TOLERANCE[dtype]
    x = to_backend(rng.standard_normal((n, lay_shape[0] * b)), backend).astype(dtype)
    dy = to_backend(rng.standard_normal((n, lay_shape[1] * b)), backend).astype(dtype)
    shared = []
    with plans.override(stream=True, dense=False, **forced):
        for a, op, trans in ((x, w, False), (dy, w.T, True)):
            plan = cs.matmul_plan(a, op)
            assert plan.kernel.kernel == "dsd_stream"
            # the runs' partial products are added in the launch wherever the grid fits on
            # the device at once, up to STREAM_SHARE_MAX_ROWS rows unless forced
            dev = device.current()
            fits = plan.grid[0] * plan.grid[1] <= device.sm_count(dev) * min(
                dsd_rules.STREAM_CTAS_PER_SM, dsd_configs.stream_ctas(b, n, device.arch(dev)))
            share = forced.get("stream_share", n <= dsd_rules.STREAM_SHARE_MAX_ROWS)
            assert plan.shared_sum == bool(plan.slots and fits and share), str(plan)
            shared.append(plan.shared_sum)
            # and the runner launches what the plan says: one cooperative launch, or the
            # main kernel and stream_finish
            runner = run_dsd._dsd_runner(n, w, trans, False)
            assert runner.plan == plan
            assert (runner.finish is not None) == bool(plan.slots and not plan.shared_sum)
            assert runner.main._api == ("cuLaunchCooperativeKernel" if plan.shared_sum
                                        else "cuLaunchKernel")
            ref = _ref(a, w, trans)
            got = cs.matmul(a, op, out=poison(ref.shape, dtype, backend))
            err = np.linalg.norm(to_numpy(got).astype(np.float64) - ref) / np.linalg.norm(ref)
            assert err < tol, (str(plan), err)
            again = [to_numpy(cs.matmul(a, op)) for _ in range(2)]
            np.testing.assert_array_equal(again[0], to_numpy(got))
            np.testing.assert_array_equal(again[1], to_numpy(got))
            _check_alpha_beta(a, op, ref, rng, dtype, backend, tol)
    return shared


def _stream_capable():
    import cupy

    if cupy.cuda.Device().compute_capability < "80":
        pytest.skip("mma m16n8k8 in bfloat16 and movmatrix need sm_80")


@pytest.mark.parametrize("backend", CUDA, indirect=True)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("b", [8, 16, 32])
@pytest.mark.parametrize("n", [1, 7, 16, 17, 32, 40, 64])
def test_stream_kernel_matches_scipy(backend, dtype, b, n):
    """The small-N dsd with X in shared memory, forced: a W whose block rows and columns
    are not whole chunks or groups, an empty block row and column, both products, alpha
    and beta, a poisoned output, and repeated calls giving the same bits."""
    _stream_capable()
    rng = np.random.default_rng(n)
    lay = rng.random((75, 45)) < 0.3  # 1 to 19 chunks of X's block columns, 2 to 10 groups
    lay[:, 7] = False
    lay[13, :] = False
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, seed=n, backend=backend)
    _check_stream(w, lay.shape, n, dtype, backend, rng)


@pytest.mark.parametrize("backend", CUDA, indirect=True)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("b", [8, 16, 32])
@pytest.mark.parametrize("run", [1, 2, 3, 1000])
@pytest.mark.parametrize("share", [True, False])
def test_stream_kernel_runs_of_chunks(backend, dtype, b, run, share):
    """Runs of 1, 2 and 3 chunks per CTA (partial products added in order, by the group's
    CTAs in the launch where the grid fits, or by a second launch) and one CTA per group
    writing Y itself (1000): chunks of X's block columns with more blocks than a stage
    holds, chunks without blocks in every group, N = 17 and 32; then a sparse W whose
    chunks fit one stage each, so that every X buffer is in use at once (N = 17 and 40)."""
    _stream_capable()
    rng = np.random.default_rng(run)
    lay = rng.random((200, 150)) < 0.35  # 5 to 50 chunks of X's block columns, 5 to 25 groups
    lay[64:128, :] = False  # X @ W: chunks without blocks
    lay[:, 64:128] = False  # dY @ W.T: likewise
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, seed=run, backend=backend)
    shared = []
    for n in (17, 32):
        shared += _check_stream(w, lay.shape, n, dtype, backend, rng, stream_run=run,
                                stream_share=share)
    sparse = rng.random((200, 150)) < 0.03
    w = cs.BlockSparseMatrix.from_layout(sparse, b, dtype=dtype, seed=run, backend=backend)
    for n in (17, 40):
        shared += _check_stream(w, sparse.shape, n, dtype, backend, rng, stream_run=run,
                                stream_share=share)
    if share and run in (2, 3):  # some of these grids fit: the shared sum ran
        assert any(shared)


@pytest.mark.parametrize("backend", CUDA, indirect=True)
@pytest.mark.parametrize("b", [32, 64])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_plan_is_built_once_and_calls_repeat_bitwise(backend, b, dtype):
    """Later calls reuse the first call's plan (one runner per rows / orientation), and the
    persistent kernels' tile counter is back at zero after every launch: three calls in a
    row give the same bits."""
    import cupy

    lay = cs.layouts.random(4096 // b, 4096 // b, 0.25, seed=1)
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, seed=2, backend=backend)
    x = cupy.random.default_rng(0).standard_normal((1024, 4096)).astype(dtype)
    first = w.__rmatmul__(x)
    runners = dict(w._runners)
    again = [x @ w for _ in range(3)]
    assert w._runners == runners
    assert len(runners) == 1
    for y in again:
        assert bool(cupy.array_equal(y, first))
    ref = _ref(x, w, False)
    err = np.linalg.norm(to_numpy(first).astype(np.float64) - ref) / np.linalg.norm(ref)
    assert err < cs._dtypes.TOLERANCE[dtype]


@pytest.mark.parametrize("backend", CUDA, indirect=True)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("b", [8, 16, 32])
@pytest.mark.parametrize("n", [1, 7, 16, 17, 32, 40, 64, 100, 128])
def test_short_reduction_sdd_matches_scipy(backend, dtype, b, n):
    """The short-reduction sdd (dY's chunks in shared memory), forced: block columns that
    are not whole chunks, an empty block row and column, N not a multiple of 16, a NaN
    poisoned result matrix overwritten, alpha and beta, repeated calls giving the same bits,
    and one CTA per chunk (every warp walking several block rows). This W has few block
    rows, so its chunks are narrowed; the next test runs the tile's full chunks."""
    _stream_capable()
    rng = np.random.default_rng(100 * b + n)
    lay = rng.random((70, 300 // (b // 8) if b < 32 else 100)) < 0.3  # 2-13 chunks of dY
    lay[5, :] = False
    lay[:, 11] = False
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, seed=n, backend=backend)
    x = to_backend(rng.standard_normal((n, lay.shape[0] * b)), backend).astype(dtype)
    dy = to_backend(rng.standard_normal((n, lay.shape[1] * b)), backend).astype(dtype)
    mask = np.kron(lay, np.ones((b, b)))
    ref = (to_numpy(x).astype(np.float64).T @ to_numpy(dy).astype(np.float64)) * mask
    tol = cs._dtypes.TOLERANCE[dtype]
    for grid in (None, 1):
        with plans.override(sdd_stream=True, dense=False, sdd_stream_grid=grid):
            plan = cs.sampled_matmul_plan(x.T, dy, like=w)
            assert plan.kernel.kernel == "sdd_stream", str(plan)
            assert grid is None or plan.grid == 1
            out = w.copy()
            out.data[...] = np.nan
            cs.sampled_matmul(x.T, dy, like=w, out=out)
            got = to_numpy(out.toarray()).astype(np.float64)
            err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
            assert err < tol, (str(plan), err)
            again = [to_numpy(cs.sampled_matmul(x.T, dy, like=w).data) for _ in range(2)]
            np.testing.assert_array_equal(again[0], to_numpy(out.data))
            np.testing.assert_array_equal(again[1], to_numpy(out.data))
            cs.sampled_matmul(x.T, dy, like=w, out=out, alpha=0.5, beta=2.0)
            got2 = to_numpy(out.toarray()).astype(np.float64)
            assert np.linalg.norm(got2 - 2.5 * got) / np.linalg.norm(2.5 * got) < 2 * tol


@pytest.mark.parametrize("backend", CUDA, indirect=True)
@pytest.mark.parametrize("b", [8, 16, 32])
@pytest.mark.parametrize("n", [9, 32, 100])
def test_short_reduction_sdd_full_chunks_match_scipy(backend, b, n):
    """The short-reduction sdd on a W with enough block rows to keep its tile's full chunks
    (and a last chunk cut short), against a float64 reference, bitwise repeatable."""
    _stream_capable()
    rng = np.random.default_rng(7 * b + n)
    dev = device.current()
    cfg = sdd_configs.sdd_stream_config("float16", b, n, device.arch(dev))  # as the plan's
    cols = cfg.group * 3 // 2  # a chunk and a half
    # block rows enough that two chunks' CTAs, a warp per block row, fill the CTA slots
    slots = configs.smem_ctas(cfg, device.arch(dev)) * device.sm_count(dev)
    lay = rng.random((max(1600, 2 * slots), cols)) < 0.05
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype="float16", seed=n, backend=backend)
    x = to_backend(rng.standard_normal((n, lay.shape[0] * b)), backend).astype("float16")
    dy = to_backend(rng.standard_normal((n, cols * b)), backend).astype("float16")
    with plans.override(sdd_stream=True, dense=False):
        plan = cs.sampled_matmul_plan(x.T, dy, like=w)
        assert plan.kernel.kernel == "sdd_stream", str(plan)
        assert plan.chunk == plan.kernel.group  # the tile's full chunks
        assert plan.chunks == 2
        got = cs.sampled_matmul(x.T, dy, like=w)
        again = cs.sampled_matmul(x.T, dy, like=w)
    np.testing.assert_array_equal(to_numpy(again.data), to_numpy(got.data))
    # block by block (a dense reference of this W would take gigabytes): block p at (r, c)
    # is X[:, r b ..].T @ dY[:, c b ..]
    indptr, cols_p = to_numpy(w.indptr), to_numpy(w.indices)
    rows_p = np.repeat(np.arange(lay.shape[0]), np.diff(indptr))
    xr = to_numpy(x).astype(np.float64).reshape(n, -1, b)[:, rows_p]
    dc = to_numpy(dy).astype(np.float64).reshape(n, -1, b)[:, cols_p]
    ref = np.einsum("npi,npj->pij", xr, dc)
    err = np.linalg.norm(to_numpy(got.data).astype(np.float64) - ref) / np.linalg.norm(ref)
    assert err < cs._dtypes.TOLERANCE["float16"], (str(plan), err)


def test_short_reduction_sdd_plan():
    """The short-reduction sdd up to the rows SDD_STREAM's tiles hold at b = 8 and 16 (b = 32 by
    its least density and block count, on Hopper past 16 rows only) in 16 bits, x and dy
    read in place, from sm_80 (narrower chunks where shared memory is smaller), ahead of the
    dense path; its grid fills the device once (at most a warp per block row); not for
    float32, b = 64, long reductions, other operand layouts, or an empty layout."""
    s = structure(1024, 1024, 0.25)
    for b in (8, 16):
        for inner, kp in ((1, 16), (16, 16), (17, 32), (64, 64), (100, 128), (128, 128)):
            p = plans.plan_sdd(s, "float16", b, inner, True, False, False, 90, SMS, 1 << 34)
            assert p.kernel == sdd_configs.sdd_stream_config("float16", b, inner)
            assert f"sdd_stream<F16,{b},{kp}," in p.kernel.name
            assert (p.path, p.ratio) == ("sparse", None)
            rows, cols = s.block_shape
            slots = configs.smem_ctas(p.kernel, 90) * SMS
            assert p.chunks == -(-cols // p.chunk)
            # at most a warp per block row, one wave, and no CTA slot left that a CTA could
            # take without breaking either
            w = p.kernel.threads // 32
            assert p.grid * w < rows + w
            assert p.chunks * p.grid <= slots
            assert p.grid * w >= rows or p.chunks * (p.grid + 1) > slots
            assert f"grid ({p.chunks}, {p.grid})" in str(p)
            assert f"{p.chunk} block columns at a time" in str(p)
            # the tile's chunks: 128 block rows fill half the CTA slots at their chunks
            assert p.chunk == p.kernel.group
        assert plans.plan_sdd(s, "bfloat16", b, 32, True, False, False, 80, SMS).kernel.kernel \
            == "sdd_stream"
        for args in [("float16", b, 129, True, False, False, 90),
                     ("float32", b, 32, True, False, False, 90),
                     ("float16", b, 32, False, False, False, 90),
                     ("float16", b, 32, True, True, False, 90),
                     ("float16", b, 32, True, False, False, 75)]:
            assert plans.plan_sdd(s, *args, SMS).kernel.kernel != "sdd_stream", args
        with plans.override(sdd_stream=False):
            assert plans.plan_sdd(s, "float16", b, 32, True, False, False, 90,
                                  SMS).kernel.kernel != "sdd_stream"
        with plans.override(dense=True):  # the dense path forced wins
            assert plans.plan_sdd(s, "float16", b, 32, True, False, False, 90, SMS,
                                  1 << 34).path == "dense"
    # a small W: chunks narrowed until the grid fills the device
    small = structure(256, 256, 0.1)
    p = plans.plan_sdd(small, "float16", 16, 8, True, False, False, 90, SMS)
    per_sm = configs.smem_ctas(p.kernel, 90)
    assert p.chunk < p.kernel.group
    warps = -(-small.block_shape[0] // (p.kernel.threads // 32))  # a warp per block row
    assert p.grid == warps
    assert 2 * p.chunks * warps >= per_sm * SMS  # at least half the slots filled ...
    wider = -(-small.block_shape[1] // (2 * p.chunk))
    assert 2 * wider * warps < per_sm * SMS  # ... where chunks twice as wide did not
    wide = sdd_rules.sdd_stream_grid(small, 2 * p.chunk, per_sm * SMS, p.kernel.threads // 32)
    assert wide[0] == p.chunk  # halved from twice as wide: the same chunk
    # b = 32: never by the rule up to 16 rows (the short wgmma tile instead); past 16 from
    # a least density and a least block count between those measured on either side
    # (a W of 128 x 128 blocks at d = 0.25 stays on the wgmma tile, at d = 0.5 it streams)
    for inner in (1, 16, 17, 32, 64, 128):
        tile = sdd_configs.sdd_stream_tile(32, inner)
        if inner <= 16:
            assert tile.least_density == float("inf")
        else:
            assert 0.1 < tile.least_density < 0.25
            assert 4096 < tile.least_blocks < 8192
        for rows, d, streams in ((256, 0.05, False), (256, 0.1, False), (128, 0.1, False),
                                 (128, 0.25, False), (128, 0.5, True), (256, 0.25, True),
                                 (256, 0.5, True)):
            got = plans.plan_sdd(structure(rows, rows, d), "float16", 32, inner, True, False,
                                 False, 90, SMS).kernel.kernel
            assert (got == "sdd_stream") == (streams and inner > 16), (inner, rows, d, got)
        with plans.override(sdd_stream=True):  # forced, it runs at every row count
            assert plans.plan_sdd(structure(128, 128, 0.1), "float16", 32, inner, True,
                                  False, False, 90, SMS).kernel.kernel == "sdd_stream"
    # with less shared memory than sm_90 the chunks narrow until a CTA fits
    for arch in (80, 86):
        for inner in (16, 32, 64, 128):
            cfg = sdd_configs.sdd_stream_config("float16", 32, inner, arch)
            assert configs.smem_ctas(cfg, arch) >= 1, (arch, inner)
            assert cfg.group <= sdd_configs.sdd_stream_tile(32, inner).chunk
            p = plans.plan_sdd(s, "float16", 32, inner, True, False, False, arch, SMS)
            assert p.kernel == cfg, (arch, inner, str(p))  # (d = 0.25: taken below sm_90)
    # below sm_90 b = 32 keeps its least densities from before Hopper's short tile sped up
    # (there is no wgmma tile there to weigh it against): 0.075 up to 16 rows, 0.175 past
    for inner, d, streams in ((16, 0.1, True), (16, 0.05, False), (32, 0.1, False),
                              (32, 0.25, True), (128, 0.25, True)):
        w = structure(128, 128, d)  # 4096 blocks at d = 0.25: below Hopper's least count
        for arch, want in ((80, streams), (90, False)):
            got = plans.plan_sdd(w, "float16", 32, inner, True, False, False, arch,
                                 SMS).kernel.kernel
            assert (got == "sdd_stream") == want, (inner, d, arch, got)
    assert plans.plan_sdd(s, "float16", 64, 32, True, False, False, 90, SMS).kernel.kernel \
        != "sdd_stream"
    empty = structure(64, 64, 0.0)
    assert plans.plan_sdd(empty, "float16", 8, 32, True, False, False, 90,
                          SMS).kernel.kernel != "sdd_stream"


@pytest.mark.parametrize("backend", CUDA, indirect=True)
@pytest.mark.parametrize("share", [True, False])
def test_stream_partial_sums_in_a_cuda_graph(backend, share):
    """The stream kernel with runs of two chunks, its partial products added in the launch
    (a cooperative launch, captured) or by a second launch: replays after X and W.data
    change in place give the new products, each replay the same bits as an eager call (the
    group counters are back at zero after every launch)."""
    import cupy

    _stream_capable()
    rng = cupy.random.default_rng(9)
    lay = cs.layouts.random(192, 128, 0.3, seed=3)
    w = cs.BlockSparseMatrix.from_layout(lay, 32, dtype="float16", seed=4, backend=backend)
    x = rng.standard_normal((32, 192 * 32)).astype("float16")
    y = cupy.empty((32, 128 * 32), "float16")
    stream = cupy.cuda.Stream(non_blocking=True)
    with plans.override(stream=True, dense=False, stream_run=2, stream_share=share), stream:
        plan = cs.matmul_plan(x, w)
        assert plan.slots, str(plan)
        assert plan.shared_sum == share, str(plan)
        cs.matmul(x, w, out=y)  # eager: builds the plan
        stream.begin_capture()
        cs.matmul(x, w, out=y)
        graph = stream.end_capture()
        for _ in range(3):
            x[...] = rng.standard_normal(x.shape).astype("float16")
            w.data[...] = rng.standard_normal(w.data.shape).astype("float16")
            y.fill(cupy.nan)
            graph.launch(stream)
            stream.synchronize()
            ref = _ref(x, w, False)
            got = to_numpy(y).astype(np.float64)
            assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < cs._dtypes.TOLERANCE[
                "float16"]
            np.testing.assert_array_equal(to_numpy(cs.matmul(x, w)), to_numpy(y))


@pytest.mark.parametrize("backend", CUDA, indirect=True)
@pytest.mark.parametrize(("dtype", "b", "n"), [("float16", 64, 512), ("float16", 32, 1024),
                                               ("float32", 32, 32), ("float16", 16, 64)])
def test_cuda_graph_replays_after_in_place_updates(backend, dtype, b, n):
    """The recipe: call each op once eagerly (plans, tables and kernels are made then), then
    capture the three ops into a CUDA graph with outputs allocated before the capture; the
    graph replays the same kernels on the same buffers, so after X, dY and W.data change
    in place a replay gives the new products."""
    import cupy

    rng = cupy.random.default_rng(5)
    lay = cs.layouts.random(1024 // b, 1024 // b, 0.25, seed=4)
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, seed=6, backend=backend)
    x = rng.standard_normal((n, 1024)).astype(dtype)
    dy = rng.standard_normal((n, 1024)).astype(dtype)
    y, dx = cupy.empty((n, 1024), dtype), cupy.empty((n, 1024), dtype)
    dw = w.copy()
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        def step():
            cs.matmul(x, w, out=y)
            cs.matmul(dy, w.T, out=dx)
            cs.sampled_matmul(x.T, dy, like=w, out=dw)

        step()  # eager: builds the plans
        stream.begin_capture()
        step()
        graph = stream.end_capture()
        for _ in range(2):
            x[...] = rng.standard_normal(x.shape).astype(dtype)
            dy[...] = rng.standard_normal(dy.shape).astype(dtype)
            w.data[...] = rng.standard_normal(w.data.shape).astype(dtype)
            y.fill(cupy.nan)
            dx.fill(cupy.nan)
            graph.launch(stream)
            stream.synchronize()
            tol = cs._dtypes.TOLERANCE[dtype]
            for got, ref in ((y, _ref(x, w, False)), (dx, _ref(dy, w, True))):
                got = to_numpy(got).astype(np.float64)
                assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < tol
            mask = np.kron(lay, np.ones((b, b)))
            ref = (to_numpy(x).astype(np.float64).T @ to_numpy(dy).astype(np.float64)) * mask
            got = to_numpy(dw.toarray()).astype(np.float64)
            assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < tol


@pytest.mark.parametrize("backend", CUDA, indirect=True)
@pytest.mark.parametrize("dense", [False, True])
def test_cuda_graph_captures_on_a_stream_without_a_tile_counter(backend, dense):
    """A stream that never ran the persistent TMA kernel eagerly (the plan was built on
    another stream, or its eager calls take the dense path, which the capture replaces by
    the sparse kernel) has no tile counter: one is made inside the capture and kept for
    that graph only, and the graph replays correctly."""
    import cupy

    b, n = 64, 512
    rng = cupy.random.default_rng(8)
    lay = cs.layouts.random(1024 // b, 1024 // b, 0.25, seed=9)
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype="float16", seed=10, backend=backend)
    x = rng.standard_normal((n, 1024)).astype("float16")
    y = cupy.empty((n, 1024), "float16")
    with plans.override(dense=False):
        sparse = cs.matmul_plan(x, w)
    if not sparse.kernel.tma:
        pytest.skip(f"this device's plan has no persistent TMA kernel: {sparse}")
    with plans.override(dense=dense):
        assert cs.matmul_plan(x, w).path == ("dense" if dense else "sparse")
        cs.matmul(x, w, out=y)  # builds the runner on the default stream
        cupy.cuda.Device().synchronize()
        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:
            if dense:
                cs.matmul(x, w, out=y)  # eager on this stream: the dense path
            assert not device.counter_kept(x.device.id, stream.ptr)
            stream.begin_capture()
            cs.matmul(x, w, out=y)
            graph = stream.end_capture()
            assert not device.counter_kept(x.device.id, stream.ptr)
            for _ in range(2):
                x[...] = rng.standard_normal(x.shape).astype("float16")
                y.fill(cupy.nan)
                graph.launch(stream)
                stream.synchronize()
                ref = _ref(x, w, False)
                got = to_numpy(y).astype(np.float64)
                assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-2
            fresh = cs.matmul(x, w)  # eager again: its own counter, zeroed now
            stream.synchronize()
            got = to_numpy(fresh).astype(np.float64)
            assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-2


def test_split_scratch_kept_in_the_layout_cache(monkeypatch):
    """A split product's kept workspace and counters live in the layout's cache (per
    device, thread and shape), so runners of one layout share them and a repeated call
    returns them without asking whether the stream is being captured."""
    from cubsparse._cuda import run

    class Layout:
        def __init__(self):
            self.cache = {}

        def cached(self, key, build):
            if key not in self.cache:
                self.cache[key] = build()
            return self.cache[key]

    lay = Layout()
    a = run._SplitScratch(lay, 0, (2, 32, 64), 4)
    b = run._SplitScratch(lay, 0, (2, 32, 64), 4)
    kept = (object(), object())
    a._ws[77], a._counts[77] = kept

    def no_stream():
        raise AssertionError("a kept scratch needs no stream query")

    monkeypatch.setattr(run, "_current_stream", no_stream)
    assert a(77) == kept
    assert b(77) == kept  # another runner of the layout: the same arrays
    assert run._SplitScratch(lay, 0, (2, 32, 32), 4)._ws == {}  # another shape: its own


def test_launch_packs_parameters_once(monkeypatch):
    """A Launch hands cuLaunchKernel pointers to its packed values: constants set once,
    per-call values written in place, tensor maps pointed at (a fake driver here)."""
    import ctypes

    from cubsparse._cuda import launch

    calls = []
    kinds = []

    def fake_launch(*args):
        if len(args) == 11:  # cuLaunchKernel takes `extra`, the cooperative launch not
            *args, _extra = args
        f, gx, gy, gz, bx, by, bz, smem, stream, pp = args
        params = ctypes.cast(pp, ctypes.POINTER(ctypes.c_void_p))
        calls.append((f, (gx, gy, gz), (bx, by, bz), smem, stream,
                      ctypes.cast(params[0], ctypes.POINTER(ctypes.c_uint64))[0],
                      ctypes.cast(params[1], ctypes.POINTER(ctypes.c_int32))[0],
                      ctypes.cast(params[2], ctypes.POINTER(ctypes.c_float))[0],
                      params[3]))
        if stream == 666:
            raise RuntimeError("CUDA_ERROR_INVALID_VALUE")

    class Fn:
        ptr, name = 1234, "k"

    class Map:
        address = 4096

    def launcher(cooperative=False):
        kinds.append(cooperative)
        return fake_launch

    monkeypatch.setattr(launch, "_launcher", launcher)
    L = launch.Launch(Fn(), (5,), (128,), 99, "pift", [None, 7, None, None])
    L.v[0].value = 0xABC
    L.v[2].value = 0.5
    L.set_map(3, Map())
    L(77)
    assert calls == [(1234, (5, 1, 1), (128, 1, 1), 99, 77, 0xABC, 7, 0.5, 4096)]
    L.v[0].value = 0xDEF
    L(78)
    assert calls[-1][4:6] == (78, 0xDEF)
    with pytest.raises(launch.LaunchError, match=r"k: CUDA_ERROR_INVALID_VALUE; grid \(5, 1, 1\)"):
        L(666)
    # a cooperative launch: the driver's other entry point, the same packed parameters
    C = launch.Launch(Fn(), (3, 2), (256,), 0, "pift", [5, 1, 2.0, Map()], cooperative=True)
    C(79)
    assert kinds == [False, True]
    assert calls[-1] == (1234, (3, 2, 1), (256, 1, 1), 0, 79, 5, 1, 2.0, 4096)


def test_order_pays_where_a_list_outlasts_a_row_tiles_share():
    """The deadline order pays where the longest list passes the shortest by more than
    ORDER_MIN_SPREAD of one taker's share of a row tile: never for lists of one length, one
    row tile or no lists."""
    even = np.full(64, 8)
    assert not dsd_rules.order_pays(even, 32, 132)
    hub = even.copy()
    share = (even.sum() + 64 * dsd_rules.ORDER_TILE_COST) / 132  # (about 4.4 blocks)
    hub[3] = 8 + int(dsd_rules.ORDER_MIN_SPREAD * share)  # (the share grows with the hub)
    assert not dsd_rules.order_pays(hub, 32, 132)
    hub[3] += 2
    assert dsd_rules.order_pays(hub, 32, 132)
    assert not dsd_rules.order_pays(hub, 1, 132)
    assert not dsd_rules.order_pays(hub, 32, 1)  # one taker: a share larger than the spread
    assert not dsd_rules.order_pays(np.zeros(0, np.int64), 32, 132)


def test_tile_order_takes_a_hub_list_early():
    """worklists.tile_order is a permutation of the (row tile, work item) tiles that keeps
    each row tile's lists longest first; a hub's tiles are taken rows ahead of their row
    tile (none later), and lists of one length keep the row-tile order."""
    lay = np.eye(64, dtype=bool)
    lay[:, 0] = True  # a hub: one list of 64 blocks beside 63 of one
    s = cs.BlockSparseMatrix.from_layout(lay, 128, backend="cpu")._structure
    rt, takers = 32, 132
    order = worklists.tile_order(s, False, 0, 1, rt, takers, dsd_rules.ORDER_SLACK,
                                 dsd_rules.ORDER_TILE_COST)
    nwork = worklists.dsd_host(s, False)[0].shape[0]
    assert np.array_equal(np.sort(order), np.arange(rt * nwork))
    row_tile, item = np.divmod(order, nwork)
    for r in range(rt):  # a row tile's own tiles: its items in order (longest first)
        assert np.all(np.diff(item[row_tile == r]) > 0)
    place = np.empty_like(order)
    place[order] = np.arange(order.size)
    moved = np.arange(order.size) - place  # how far ahead of the row-tile order
    hub = worklists.dsd_host(s, False)[0][:, 2].argmax()
    assert moved[hub::nwork][1:].min() > 0  # every hub tile past the first row tile's
    assert moved.min() >= -(nwork - 1)  # others wait at most a row tile's worth of tiles
    even = cs.BlockSparseMatrix.from_layout(np.eye(64, dtype=bool), 128,
                                            backend="cpu")._structure
    assert np.array_equal(worklists.tile_order(even, False, 0, 1, rt, takers, 1.5, 1.0),
                          np.arange(rt * 64))


def test_dsd_plans_take_long_lists_early():
    """The plan takes the deadline order on the TMA dsd's single-list tiles where a list is
    long (order_pays), not on balanced lists nor on the panels, and as forced."""
    lay = np.eye(64, dtype=bool)
    lay[:, 0] = True
    hub = cs.BlockSparseMatrix.from_layout(lay, 128, backend="cpu")._structure
    p = plans.plan_dsd(hub, "float16", 128, 8192, False, False, 90, SMS, None)
    assert p.kernel.tma
    assert not p.panel
    assert p.order
    assert "long lists' tiles taken early (tile_order)" in str(p)
    even = cs.BlockSparseMatrix.from_layout(np.eye(64, dtype=bool), 128,
                                            backend="cpu")._structure
    assert not plans.plan_dsd(even, "float16", 128, 8192, False, False, 90, SMS, None).order
    with plans.override(tile_order=False):
        assert not plans.plan_dsd(hub, "float16", 128, 8192, False, False, 90, SMS,
                                  None).order
    band = cs.BlockSparseMatrix.from_layout(cs.layouts.banded(512, 15), 16,
                                            backend="cpu")._structure
    with plans.override(tile_order=True):
        panel = plans.plan_dsd(band, "float16", 16, 8192, False, False, 90, SMS, None)
    assert panel.panel
    assert not panel.order


def test_pair_tiles_take_bands_over_a_large_w():
    """The two-block TMA tile (b = 64 on a banded W) takes its tiles in bands of
    DSD_PAIR_BAND row tiles where W's blocks pass DSD_PAIR_BAND_MIN_BYTES, one row tile at
    a time below; the single-block tiles keep one row tile whatever W's size."""
    for width, band in ((16, dsd_rules.DSD_PAIR_BAND), (6, 1)):
        lay = cs.layouts.banded(128, width)
        w = cs.BlockSparseMatrix.from_layout(lay, 64, backend="cpu")._structure
        big = w.nnzb * 64 * 64 * 2 > dsd_rules.DSD_PAIR_BAND_MIN_BYTES
        assert big == (band > 1)
        for trans in (False, True):
            p = plans.plan_dsd(w, "float16", 64, 8192, trans, False, 90, SMS, None)
            assert p.kernel.group == 2
            assert p.band == band
            assert (f"tiles taken in bands of {band} row tiles" in str(p)) == (band > 1)
    rnd = cs.BlockSparseMatrix.from_layout(cs.layouts.random(128, 128, 0.5, seed=1), 64,
                                           backend="cpu")._structure
    assert rnd.nnzb * 64 * 64 * 2 > dsd_rules.DSD_PAIR_BAND_MIN_BYTES
    single = plans.plan_dsd(rnd, "float16", 64, 8192, False, False, 90, SMS, None)
    assert single.kernel.group == 1
    assert single.band == 1
