"""Kernel-choice rules of the CUDA backend that need no GPU: the split of long work lists
at small N (``dsd_rules.split_length``), when the tiled weight gradient is taken
(``sdd_rules.sdd_tiled_pays``), when the persistent dsd takes its tall tiles
(``dsd_rules.tall_pays``), runs them in clusters (``dsd_rules.cluster_pays``) or two output blocks
per tile (``dsd_rules.dsd_pair_pays``), and when the weight gradient pairs block rows
(``sdd_rules.sdd_pair_pays``)."""

from __future__ import annotations

import numpy as np
import pytest

import cubsparse as cs
from cubsparse._cuda import (
    configs,
    dsd_configs,
    dsd_rules,
    plans,
    sdd_configs,
    sdd_rules,
    sdd_worklists,
    tiles,
    worklists,
)

SMS = 132  # an H100/H200


def split(s, trans, row_tiles, shortest=4):
    """dsd_rules.split_length for CTAs of two slots per SM."""
    return dsd_rules.split_length(worklists.list_lengths(s, trans, 1), row_tiles, 2 * SMS, shortest)


def _structure(lay):
    return cs.BlockSparseMatrix.from_layout(lay, 32, dtype="float32", backend="cpu")._structure


def test_short_lists_split_only_for_the_simt_kernel():
    # 32 block columns of at most 8 blocks: about 0.4 entries per CTA slot (2 per SM)
    lay = np.zeros((32, 32), dtype=bool)
    lay[:8, 0] = True
    lay[np.arange(32), np.arange(32)] = True
    s = _structure(lay)
    assert split(s, False, 1) == 0  # tensor cores: lists <= 8 stay
    assert split(s, False, 1, 1) == 1  # SIMT: one entry each


def test_split_follows_the_average_work_of_a_cta_slot():
    skewed = np.zeros((256, 64), dtype=bool)
    skewed[:, 0] = True          # a hub column of 256 entries
    skewed[np.arange(64), np.arange(64)] = True
    s = _structure(skewed)
    # 319 entries over 264 CTA slots: segments of the floor (a power of two)
    assert split(s, False, 1) == 4
    assert split(s, False, 1, 1) == 2
    # 64 row tiles: about 77 entries per slot; the hub is cut into segments of 128
    assert split(s, False, 64) == 128
    # 200 row tiles: the hub is within twice a slot's share, and stays whole
    assert split(s, False, 200) == 0
    # the transposed product walks block rows: 256 rows of at most 2 entries
    assert split(s, True, 1) == 0


@pytest.mark.parametrize("b", [8, 16])
def test_float32_tiled_sdd_follows_the_fill_of_its_tiles(b):
    tr, ts = sdd_configs.sdd_tile_shape(np.float32, b)
    fill = sdd_rules.SDD_TILE_SIMT_FILL[b]
    lay = np.zeros((4 * tr, 4 * ts), dtype=bool)
    lay[:tr, :ts] = True  # one full tile
    full = cs.BlockSparseMatrix.from_layout(lay, b, dtype="float32", backend="cpu")._structure
    assert sdd_rules.sdd_tiled_pays(full, np.float32, b, 16, 4096)
    # one block in each of the 16 tiles: each 1 / (tr * ts) full
    spread = np.zeros_like(lay)
    spread[::tr, ::ts] = True
    s = cs.BlockSparseMatrix.from_layout(spread, b, dtype="float32", backend="cpu")._structure
    assert not sdd_rules.sdd_tiled_pays(s, np.float32, b, 16, 4096)
    # just under and at the break-even fill, in a single tile
    k = int(np.ceil(fill * tr * ts))
    for count, pays in ((k - 1, False), (k, True)):
        one = np.zeros_like(lay)
        one[:tr, :ts].flat[:count] = True
        s = cs.BlockSparseMatrix.from_layout(one, b, dtype="float32", backend="cpu")._structure
        assert sdd_rules.sdd_tiled_pays(s, np.float32, b, 16, 4096) is pays


def test_half_type_tiled_sdd_follows_the_loads():
    tr, ts = sdd_configs.sdd_tile_shape(np.float16, 8)
    lay = np.zeros((tr, ts), dtype=bool)
    lay[0, 0] = True  # one block: one tile loads tr + ts columns, a group 1 + 1
    s = cs.BlockSparseMatrix.from_layout(lay, 8, dtype="float32", backend="cpu")._structure
    assert not sdd_rules.sdd_tiled_pays(s, np.float16, 8, 16, 4096)
    lay[:] = True  # a full tile: tr + ts against tr * (1 + 1) + tr * ts
    s = cs.BlockSparseMatrix.from_layout(lay, 8, dtype="float32", backend="cpu")._structure
    assert sdd_rules.sdd_tiled_pays(s, np.float16, 8, 16, 4096)
    # a reduction shorter than SDD_TILE_MIN_INNER: the per-row groups, however full
    assert sdd_rules.sdd_tiled_pays(s, np.float16, 8, 16, sdd_rules.SDD_TILE_MIN_INNER)
    assert not sdd_rules.sdd_tiled_pays(s, np.float16, 8, 16, sdd_rules.SDD_TILE_MIN_INNER - 1)
    assert not sdd_rules.sdd_tiled_pays(s, np.float16, 8, 16, 1)


@pytest.mark.parametrize("b", [16])  # (b = 8's short fill is its regular one)
def test_float32_tiled_sdd_of_a_short_reduction_needs_a_quarter_of_its_tiles(b):
    """Up to SDD_TILE_SHORT_INNER rows the float32 tile is taken from its short fill on."""
    assert sdd_rules.SDD_TILE_SIMT_FILL_SHORT[b] < sdd_rules.SDD_TILE_SIMT_FILL[b]
    tr, ts = sdd_configs.sdd_tile_shape(np.float32, b)
    k = int(np.ceil(sdd_rules.SDD_TILE_SIMT_FILL_SHORT[b] * tr * ts))
    lay = np.zeros((4 * tr, 4 * ts), dtype=bool)
    for count, pays in ((k - 1, False), (k, True)):
        one = np.zeros_like(lay)
        one[:tr, :ts].flat[:count] = True
        s = cs.BlockSparseMatrix.from_layout(one, b, dtype="float32", backend="cpu")._structure
        for inner in (1, sdd_rules.SDD_TILE_SHORT_INNER):
            assert sdd_rules.sdd_tiled_pays(s, np.float32, b, 16, inner) is pays
        # longer reductions keep the regular fill
        longer = sdd_rules.SDD_TILE_SHORT_INNER + 1
        assert sdd_rules.sdd_tiled_pays(s, np.float32, b, 16, longer) is (
            count >= sdd_rules.SDD_TILE_SIMT_FILL[b] * tr * ts)


@pytest.mark.parametrize("b", [32, 64, 128])
def test_tall_tiles_need_two_per_cta(monkeypatch, b):
    cfg = dsd_configs.wgmma_config("float16", b, tall=True)
    rows = cfg.rows_per_cta
    assert rows >= 256
    assert cfg.tma
    ctas = SMS * cfg.persistent
    n_out = 4096 // b
    # N = 512: at most 2 row tiles per output block, fewer tiles than two per CTA
    assert not dsd_rules.tall_pays(cfg, 512, n_out, ctas)
    assert dsd_rules.tall_pays(cfg, 4096, n_out, ctas)
    # fewer rows than one tall tile: never, however many output blocks
    assert not dsd_rules.tall_pays(cfg, rows // 2, 100 * ctas, ctas)
    # the boundary: exactly TALL_MIN_WAVES tiles per CTA
    n = -(-dsd_rules.TALL_MIN_WAVES * ctas // n_out) * rows
    assert dsd_rules.tall_pays(cfg, n, n_out, ctas)
    assert not dsd_rules.tall_pays(cfg, n - rows, n_out, ctas)
    # without a tall tile for b, tall=True gives the plain persistent tile
    plain = dsd_configs.wgmma_config("float16", b)
    assert plain.rows_per_cta < rows
    monkeypatch.setitem(tiles.WGMMA_DSD_TALL, b, None)
    configs.set_tiles()  # clears the config caches
    try:
        assert dsd_configs.wgmma_config("float16", b, tall=True) == plain
    finally:
        monkeypatch.undo()
        configs.set_tiles()


@pytest.mark.parametrize("b", [64, 128])
def test_clusters_need_paired_row_tiles_and_deep_lists(b):
    """The tall tile runs in clusters of two where its row tiles pair up and the mean list
    is CLUSTER_MIN_DEPTH deep; the plan of X @ W then names the clustered kernel and an
    even grid."""
    cfg = dsd_configs.wgmma_config("float16", b, kn=True, union=False, cluster=True)
    assert cfg.cluster == 2
    assert cfg.name.startswith("dsd_wgmma_tma_mc<")
    rows, kb = cfg.rows_per_cta, 8192 // b
    rng = np.random.default_rng(b)

    def structure(density):
        return cs.BlockSparseMatrix.from_layout(rng.random((kb, kb)) < density, b,
                                                backend="cpu")._structure

    deep, shallow = structure(0.5), structure(0.05)
    ctas = plans.persistent_ctas(cfg, SMS)
    assert ctas % 2 == 0
    assert dsd_rules.cluster_pays(cfg, deep, False, b, 8192, kb, ctas)
    assert not dsd_rules.cluster_pays(cfg, shallow, False, b, 8192, kb, ctas)
    # an odd count of row tiles leaves the last cluster's second CTA without rows
    assert not dsd_rules.cluster_pays(cfg, deep, False, b, 3 * rows, kb, ctas)
    assert not dsd_rules.cluster_pays(cfg, deep, False, b, rows, kb, ctas)
    p = plans.plan_dsd(deep, "float16", b, 8192, False, False, 90, SMS)
    assert p.kernel == cfg
    assert p.grid[0] % 2 == 0
    assert "dsd_wgmma_tma_mc" in str(p)
    # lists of a mean depth 2032 rows of W (measured 1.02-1.05x in clusters) against 1664
    assert dsd_rules.CLUSTER_MIN_DEPTH == 1792

    def depth(rows):  # each output block's list: `rows` of W's rows in blocks
        per = np.full(kb, rows // b)
        per[: (rows % b) * kb // b] += 1
        lay = (np.arange(kb)[:, None] - np.arange(kb)[None, :]) % kb < per[None, :]
        s = cs.BlockSparseMatrix.from_layout(lay, b, backend="cpu")._structure
        assert float(worklists.list_lengths(s, False, 1).mean()) * b == rows
        return s

    assert dsd_rules.cluster_pays(cfg, depth(2032), False, b, 8192, kb, ctas)
    assert not dsd_rules.cluster_pays(cfg, depth(1664), False, b, 8192, kb, ctas)
    p = plans.plan_dsd(shallow, "float16", b, 8192, False, False, 90, SMS)
    assert p.kernel.cluster == 1
    with plans.override(cluster=False):
        assert plans.plan_dsd(deep, "float16", b, 8192, False, False, 90, SMS).kernel.cluster == 1
    with plans.override(grid_limit=3):  # whole clusters only
        assert plans.persistent_ctas(cfg, SMS) == 2


def test_two_block_tiles_where_neighbouring_blocks_share_their_lists():
    """The b = 64 dsd takes its two-block tile where two neighbouring output blocks' lists
    share enough entries (banded, small-world), not on a random layout, and never split."""
    cfg = dsd_configs.wgmma_config("float16", 64, kn=True, union=False, pair=True)
    assert cfg.group == 2
    assert cfg.name.endswith(",256,2,64>")
    kb = 128
    band = np.abs(np.subtract.outer(np.arange(kb), np.arange(kb))) <= 8
    rnd = np.random.default_rng(3).random((kb, kb)) < band.mean()

    def structure(lay):
        return cs.BlockSparseMatrix.from_layout(lay, 64, backend="cpu")._structure

    banded, random = structure(band), structure(rnd)
    ctas = plans.persistent_ctas(cfg, SMS)
    for trans in (False, True):
        assert worklists.sharing(banded, trans, 2) >= dsd_rules.DSD_PAIR_MIN_SHARING
        assert dsd_rules.dsd_pair_pays(cfg, banded, trans, 8192, kb, ctas)
        assert not dsd_rules.dsd_pair_pays(cfg, random, trans, 8192, kb, ctas)
        # too few tiles for the grid
        assert not dsd_rules.dsd_pair_pays(cfg, banded, trans, 256, kb, ctas)
        p = plans.plan_dsd(banded, "float16", 64, 8192, trans, False, 90, SMS)
        assert p.kernel.group == 2
        assert p.split == 0
        assert plans.plan_dsd(random, "float16", 64, 8192, trans, False, 90, SMS).kernel.group == 1
        with plans.override(dsd_pair=False):
            p = plans.plan_dsd(banded, "float16", 64, 8192, trans, False, 90, SMS)
            assert p.kernel.group == 1


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_short_tiles_where_the_regular_ones_leave_sms_idle(dtype):
    cfg = dsd_configs.dsd_config(dtype, 64, False)
    rows = cfg.rows_per_cta
    assert rows > tiles.SMALL_ROWS
    # 16 output blocks: a few hundred rows leave most SMs idle; thousands fill them
    assert dsd_rules.short_pays(cfg, 128, 16, SMS)
    assert not dsd_rules.short_pays(cfg, 4096, 16, SMS)
    # the boundary: SHORT_FILL x SMS CTAs exactly
    n_out = 33  # 132 / 33 = 4 row tiles
    assert not dsd_rules.short_pays(cfg, 4 * rows, n_out, SMS)
    assert dsd_rules.short_pays(cfg, 3 * rows, n_out, SMS)
    assert not dsd_rules.short_pays(cfg, 128, 0, SMS)  # no output blocks: nothing to spread
    s = cs.BlockSparseMatrix.from_layout(np.eye(16, dtype=bool), 64, backend="cpu")._structure
    p = plans.plan_dsd(s, dtype, 64, 300, False, False, 80, SMS)
    small = dsd_configs.dsd_config(dtype, 64, False, small=True)
    assert p.kernel.rows_per_cta == small.rows_per_cta
    assert p.grid == (16, -(-300 // p.kernel.rows_per_cta))
    with plans.override(short=False):
        q = plans.plan_dsd(s, dtype, 64, 300, False, False, 80, SMS)
    assert q.kernel == cfg


def test_union_needs_more_sharing_at_few_rows():
    """The union dsd shares each X slice among the G output blocks of a group; below
    UNION_MIN_ROWS rows of X its few tiles need twice the sharing to pay."""
    g = 16
    lay = np.zeros((8, g), bool)
    lay[:, :4] = True  # every entry of the group's union list feeds 4 members
    s = cs.BlockSparseMatrix.from_layout(lay, 16, dtype="float32", backend="cpu")._structure
    assert worklists.sharing(s, False, g) == 4
    assert dsd_rules.UNION_MIN_SHARING <= 4 < 2 * dsd_rules.UNION_MIN_SHARING
    assert dsd_rules.union_pays(s, False, g, dsd_rules.UNION_MIN_ROWS)
    assert not dsd_rules.union_pays(s, False, g, dsd_rules.UNION_MIN_ROWS - 1)
    lay[:, :] = True  # 16 members per entry: pays at any N
    s = cs.BlockSparseMatrix.from_layout(lay, 16, dtype="float32", backend="cpu")._structure
    assert dsd_rules.union_pays(s, False, g, 128)


def test_paired_sdd_groups_cover_the_union_of_two_block_rows():
    """Block rows paired greedily by the columns they share (ties to the lower rows), a
    row left over paired with nothing; each pair's union of block columns in runs of the
    group size, each column's block in either row or -1. Every block appears once."""
    lay = np.array([[1, 0, 1, 0, 1],
                    [0, 1, 1, 0, 0],
                    [0, 0, 0, 0, 0],
                    [1, 1, 1, 1, 1],
                    [1, 0, 0, 0, 1]], bool)
    s = cs.BlockSparseMatrix.from_layout(lay, 8, backend="cpu")._structure
    # rows 0 and 3 share three columns; rows 1 and 4 share none (paired in row order);
    # the empty row 2 has nothing to compute
    assert sdd_worklists.sdd_row_pairs(s).tolist() == [[0, 3], [1, 4]]
    t = sdd_worklists.sdd_pair_groups_host(s, 2)
    assert t.tolist() == [[0, 3, 2, 0, 1, 0, -1, 5, 6],
                          [0, 3, 2, 2, 3, 1, -1, 7, 8],
                          [0, 3, 1, 4, -1, 2, -1, 9, -1],
                          [1, 4, 2, 0, 1, -1, 3, 10, -1],
                          [1, 4, 2, 2, 4, 4, -1, -1, 11]]
    blocks = t[:, 5:9].ravel()
    assert sorted(blocks[blocks >= 0].tolist()) == list(range(s.nnzb))
    assert sdd_worklists.pair_group_count(s, 2) == 5
    # an odd number of rows holding blocks: one left alone
    assert sdd_worklists.sdd_row_pairs(_structure(lay[:4])).tolist() == [[0, 3], [1, -1]]
    # banded: neighbours pair up
    band = cs.BlockSparseMatrix.from_layout(cs.layouts.banded(6, 3), 8, backend="cpu")
    pairs = sdd_worklists.sdd_row_pairs(band._structure)
    assert (np.abs(pairs[:, 0] - pairs[:, 1]) == 1).all(), pairs


def test_paired_sdd_follows_its_predicted_gain():
    """The paired tile where two block rows share most columns (banded layouts: about
    twice the one-row tile's speed), not where no two rows share one (a permutation:
    three quarters of its products wasted, against half of the one-row tile's);
    forced either way."""
    band = cs.BlockSparseMatrix.from_layout(cs.layouts.banded(128, 9), 8,
                                            backend="cpu")._structure
    rand = cs.BlockSparseMatrix.from_layout(np.eye(128, dtype=bool)[::-1], 8,
                                            backend="cpu")._structure
    pair = sdd_configs.sdd_wgmma_config("float16", 64, pair=True)
    one = sdd_configs.sdd_wgmma_config("float16", 64)
    assert 1.5 < sdd_rules.sdd_pair_gain(band, pair, one, SMS, 8192) <= (
        sdd_rules.SDD_PAIR_SPEED / sdd_rules.SDD_ONE_ROW_SPEED)
    assert sdd_rules.sdd_pair_gain(rand, pair, one, SMS, 8192) < sdd_rules.SDD_PAIR_MIN_GAIN
    # a shorter reduction gains less: the paired tile's stores are not hidden
    short = sdd_rules.sdd_pair_gain(band, pair, one, SMS, 256)
    assert short < sdd_rules.sdd_pair_gain(band, pair, one, SMS, 8192)
    store = sdd_rules.SDD_PAIR_STORE_SLICES
    assert short == pytest.approx(sdd_rules.sdd_pair_gain(band, pair, one, SMS, 8192)
                                  * 4 / (4 + store) * (128 + store) / 128)
    assert pair.block_rows == 2
    assert pair.name == "sdd_wgmma_tma<F16,64,4,2,1,3,2>"
    p = plans.plan_sdd(band, "float16", 64, 4096, True, False, False, 90, SMS)
    assert p.kernel == pair
    assert p.grid == min(sdd_worklists.pair_group_count(band, pair.group), SMS)
    assert "pair of block rows" in str(p)
    assert plans.plan_sdd(rand, "float16", 64, 4096, True, False, False, 90, SMS).kernel != pair
    with plans.override(sdd_pair=True):
        assert plans.plan_sdd(rand, "bfloat16", 64, 4096, True, False, False, 90,
                              SMS).kernel == sdd_configs.sdd_wgmma_config("bfloat16", 64, pair=True)
        # only b = 64 has a paired tile; short reductions and sm_80 keep their kernels
        assert plans.plan_sdd(band, "float16", 128, 4096, True, False, False, 90,
                              SMS).kernel.block_rows == 1
        assert plans.plan_sdd(band, "float16", 64, 32, True, False, False, 90,
                              SMS).kernel.block_rows == 1
        assert plans.plan_sdd(band, "float16", 64, 4096, True, False, False, 80,
                              SMS).kernel.block_rows == 1
    with plans.override(sdd_pair=False):
        assert plans.plan_sdd(band, "float16", 64, 4096, True, False, False, 90,
                              SMS).kernel != pair


def test_set_tiles_clears_every_builder():
    """Every memoized instance builder of the dsd and sdd kernels is registered with
    configs.set_tiles, which empties their caches and bumps the plans' generation; a tile
    changed through it reaches the next build."""
    builders = {f.__name__ for f in configs._BUILDERS}
    assert {"dsd_config", "group_config", "stream_config", "wgmma_config", "sdd_config",
            "sdd_tile_config", "sdd_stream_config", "sdd_wgmma_config"} <= builders
    key = (8, 128)
    kept = tiles.SDD_STREAM[key]
    before = sdd_configs.sdd_stream_config("float16", 8, 100)
    dsd_configs.dsd_config("float16", 64, False)
    generation = configs.GENERATION[0]
    configs.set_tiles(sdd_stream={key: kept._replace(chunk=kept.chunk // 2)})
    try:
        assert all(f.cache_info().currsize == 0 for f in configs._BUILDERS)
        assert configs.GENERATION[0] == generation + 1
        after = sdd_configs.sdd_stream_config("float16", 8, 100)
        assert after.group == before.group // 2
        assert after.smem < before.smem
    finally:
        configs.set_tiles(sdd_stream={key: kept})
    assert sdd_configs.sdd_stream_config("float16", 8, 100) == before


def _layouts_for_runs():
    rng = np.random.default_rng(5)
    hub = rng.random((40, 30)) < 0.2
    hub[:, 7] = True  # a list longer than most runs
    hub[:, [0, 12, 29]] = False  # empty lists, first, inside and last
    return {"random": cs.layouts.random(96, 96, 0.25, seed=1),
            "barabasi-albert": cs.layouts.barabasi_albert(64, 3, seed=2),
            "hub and empty lists": hub, "empty": np.zeros((5, 4), dtype=bool)}


@pytest.mark.parametrize("name", list(_layouts_for_runs()))
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("ctas", [1, 3, 7, 264, 5000])
def test_streamk_runs_cover_every_entry_once(name, trans, ctas):
    """The stream-K cut (worklists.streamk_host): every list entry in exactly one item,
    each item inside one list, run c holding entries cuts[c]..cuts[c + 1] (equal to one),
    every output block stored once (an uncut item, or the last piece adding its cut list's
    consecutive slots), at most a cut list at each end of a run."""
    lay = _layouts_for_runs()[name]
    s = _structure(lay)
    work, _, _, segs, ranges, n_slots = worklists.streamk_host(s, trans, ctas)
    ptr = worklists.lists(s, trans, 1)[0].astype(np.int64)
    total, n_out = int(ptr[-1]), ptr.shape[0] - 1
    assert ranges.shape == (ctas + 1,)
    assert ranges[0] == 0
    assert ranges[-1] == work.shape[0]
    assert np.all(np.diff(ranges) >= 0)
    seen = np.zeros(total, dtype=int)
    for j, q0, length, _ in work:
        assert ptr[j] <= q0
        assert q0 + length <= ptr[j + 1]
        seen[q0:q0 + length] += 1
    assert np.all(seen == 1)
    cuts = np.arange(ctas + 1) * total // ctas
    for c in range(ctas):  # run c: entries cuts[c] .. cuts[c + 1] - 1, in order
        got = [np.arange(q0, q0 + length) for _, q0, length, _ in work[ranges[c]:ranges[c + 1]]]
        assert np.array_equal(np.concatenate(got or [np.empty(0, int)]),
                              np.arange(cuts[c], cuts[c + 1]))
    counts = [int(work[ranges[c]:ranges[c + 1], 2].sum()) for c in range(ctas)]
    assert max(counts, default=0) - min(counts, default=0) <= 1
    assert sum(counts) == total
    for j in range(n_out):  # every output block once: whole, or in consecutive slots
        items = work[work[:, 0] == j]
        assert items.shape[0] >= 1
        if items.shape[0] == 1:
            assert items[0, 3] == -1
        else:
            slots = items[:, 3]
            assert np.array_equal(slots, np.arange(slots[0], slots[0] + slots.shape[0]))
            assert np.all(segs[slots] == [slots[0], slots.shape[0]])
    assert n_slots == int((work[:, 3] >= 0).sum()) == segs.shape[0]
    for c in range(ctas):  # cut lists only at a run's ends
        cut = np.flatnonzero(work[ranges[c]:ranges[c + 1], 3] >= 0)
        assert np.all((cut == 0) | (cut == ranges[c + 1] - ranges[c] - 1))


@pytest.mark.parametrize("b", [64, 128])
def test_small_n_takes_the_stream_k_runs_on_hopper(b):
    """At most SMALL_ROWS rows of X, 16-bit, b = 64 / 128 on Hopper: the TMA kernel's small
    tile (32 or 64 rows as wgmma's N) in a run per CTA; not past SMALL_ROWS, off Hopper,
    in float32, or forced off."""
    lay = cs.layouts.random(12288 // b, 12288 // b, 0.1, seed=3)
    s = cs.BlockSparseMatrix.from_layout(lay, b, dtype="float16", backend="cpu")._structure
    for n, rows in ((1, 32), (32, 32), (33, 64), (64, 64)):
        for trans in (False, True):
            p = plans.plan_dsd(s, "float16", b, n, trans, False, 90, SMS)
            assert p.runs, str(p)
            assert p.kernel.tma
            assert p.kernel.rows_per_cta == rows
            assert p.grid == (dsd_rules.streamk_ctas(s.nnzb, SMS * p.kernel.persistent),)
            assert p.split == 0
            assert p.slots == worklists.streamk_host(s, trans, p.grid[0])[5] > 0
            assert "runs of equal entries" in str(p)
            assert p.reads_w_as_stored
            assert p.w_copy is None
    assert not plans.plan_dsd(s, "float16", b, 65, False, False, 90, SMS).runs
    assert not plans.plan_dsd(s, "float16", b, 32, False, False, 80, SMS).runs
    assert not plans.plan_dsd(s, "float32", b, 32, False, False, 90, SMS).runs
    with plans.override(streamk=False):
        assert not plans.plan_dsd(s, "float16", b, 32, False, False, 90, SMS).runs
    # W of fewer bytes than STREAMK_MIN_BYTES keeps the tile kernels (b = 128)
    small = cs.layouts.random(8192 // b, 8192 // b, 0.1, seed=3)
    ss = cs.BlockSparseMatrix.from_layout(small, b, dtype="float16", backend="cpu")._structure
    assert ss.nnzb * b * b * 2 < 20 << 20
    # (13.4 MB: b = 64 takes the runs there, b = 128 keeps the tile kernels)
    assert plans.plan_dsd(ss, "float16", b, 32, False, False, 90, SMS).runs == (b == 64)


def test_small_n_stream_k_runs_at_b32_from_33_rows():
    """b = 32 takes its small tile (64 rows of X as M) in stream-K runs from 33 to 64 rows,
    ahead of the stream kernel; up to 32 rows the stream kernel (or the short tiles)
    stays."""
    lay = cs.layouts.random(256, 256, 0.5, seed=3)
    s = cs.BlockSparseMatrix.from_layout(lay, 32, dtype="float16", backend="cpu")._structure
    for n in (33, 48, 64):
        for trans in (False, True):
            p = plans.plan_dsd(s, "float16", 32, n, trans, False, 90, SMS)
            assert p.runs, str(p)
            assert p.kernel.rows_per_cta == 64
    for n in (1, 32):
        p = plans.plan_dsd(s, "float16", 32, n, False, False, 90, SMS)
        assert not p.runs, str(p)
    assert not plans.plan_dsd(s, "float16", 32, 65, False, False, 90, SMS).runs


@pytest.mark.parametrize("b", [32, 128])
def test_small_n_stream_k_runs_below_the_bytes_only_on_skewed_layouts(b):
    """Below STREAMK_MIN_BYTES the runs are taken where the longest list passes
    STREAMK_SKEW times the mean (a Barabási-Albert hub, which the tile kernels leave to one
    CTA) and W holds STREAMK_MIN_BYTES_SKEWED; a random layout of the same size keeps the
    tile kernels, and so does a skewed one below that."""
    from bench.cases import ba_m_for_density

    n = 33 if b == 32 else 32
    rows = 8192 // b
    hub = cs.layouts.barabasi_albert(rows, ba_m_for_density(rows, 0.1), seed=1)
    flat = cs.layouts.random(rows, rows, 0.1, seed=1)
    for lay, want in ((hub, True), (flat, False)):
        s = cs.BlockSparseMatrix.from_layout(lay, b, dtype="float16", backend="cpu")._structure
        assert dsd_rules.STREAMK_MIN_BYTES_SKEWED <= s.nnzb * b * b * 2 < \
            dsd_rules.STREAMK_MIN_BYTES[b]
        for trans in (False, True):
            assert plans.plan_dsd(s, "float16", b, n, trans, False, 90, SMS).runs == want
    rows = 4096 // b  # 3 MB: below both
    small = cs.layouts.barabasi_albert(rows, ba_m_for_density(rows, 0.1), seed=1)
    s = cs.BlockSparseMatrix.from_layout(small, b, dtype="float16", backend="cpu")._structure
    assert not plans.plan_dsd(s, "float16", b, n, False, False, 90, SMS).runs


def test_short_grid_is_cut_only_where_a_wave_is_partial_and_ctas_walk_groups():
    from cubsparse._cuda.sdd_rules import SHORT_GRID_MIN_WALK, short_grid_per_sm

    sms = 132
    walk = SHORT_GRID_MIN_WALK * 4 * sms  # groups from which 4 CTAs an SM each walk enough
    assert short_grid_per_sm(6, 4, walk, sms) == 4  # 1.5 waves: cut
    assert short_grid_per_sm(6, 4, walk - 1, sms) == 6  # too few groups a CTA
    assert short_grid_per_sm(7, 4, 10**6, sms) == 4
    assert short_grid_per_sm(4, 2, 10**6, sms) == 4  # two even waves: nothing to gain
    assert short_grid_per_sm(6, 3, 10**6, sms) == 6
    assert short_grid_per_sm(4, 4, 10**6, sms) == 4  # all held
    assert short_grid_per_sm(4, 6, 10**6, sms) == 4  # more held than shared memory allows
    assert short_grid_per_sm(6, 0, 10**6, sms) == 6  # the query failed: the plan's count
