"""Tile shapes of the Hopper wgmma sdd kernel (CUDA backend), each forced in turn, so every
code path runs whatever the defaults are: the group stacked along wgmma's M (flip) for
16-, 32- and 64-row blocks, or spread along N; one or two warpgroups along M and N; one
or two m64 tiles per warpgroup. Off Hopper the forced tiles are not used and the test
checks the mma.sync kernel instead."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from conftest import BACKENDS, poison, to_backend, to_numpy

import cubsparse as cs
from cubsparse._cuda import (
    configs,
    device,
    dsd_configs,
    dsd_rules,
    plans,
    sdd_configs,
    sdd_rules,
    sdd_worklists,
    tiles,
)

pytestmark = pytest.mark.parametrize(
    "backend", [p for p in BACKENDS if p.values == ("cuda",)], indirect=True
)


@pytest.fixture(autouse=True)
def sparse_only():
    """These tests pin sparse kernels: the dense path stays off."""
    with plans.override(dense=False):
        yield


@pytest.fixture
def force():
    """``force(**decisions)``: plans.override for the rest of the test."""
    with contextlib.ExitStack() as stack:
        yield lambda **d: stack.enter_context(plans.override(**d))


_RECORDS = {id(table): record for table, record in tiles.TABLES.values()}


def forced_tile(monkeypatch, b, tables, **decisions):
    """Body of a fixture that forces one tile: ``table[b] = tile`` for each (table, tile) of
    ``tables`` (a tuple is made into the table's record) and the plan ``decisions`` forced
    (plans.override), for one test; the caches are cleared on the way in and out. Yields
    ``b``."""
    for table, tile in tables:
        monkeypatch.setitem(table, b, None if tile is None else _RECORDS[id(table)](*tile))
    configs.set_tiles()  # no changes: clears every config cache
    with plans.override(**decisions):
        yield b
    configs.set_tiles()


def sdd_operands(backend, lay, b, dtype, n, rng, seed):
    """W of layout ``lay`` (values from ``seed``), and X and dY of ``n`` rows of W's rows and
    columns (from ``rng``): a weight gradient's operands."""
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, seed=seed, backend=backend)
    cb, kb = lay.shape
    x = to_backend(rng.standard_normal((n, cb * b)).astype(np.float32), backend).astype(w.dtype)
    dy = to_backend(rng.standard_normal((n, kb * b)).astype(np.float32), backend).astype(w.dtype)
    return w, x, dy


def check_sampled_matmul(backend, lay, b, dtype, n, rng):
    """sampled_matmul(x.T, dy, like=W) for W of layout ``lay`` against float64 NumPy, into a
    poisoned output; then alpha alone into a poisoned output (the epilogue's form for beta 0
    with alpha not 1), and alpha and beta on top of that result."""
    w, x, dy = sdd_operands(backend, lay, b, dtype, n, rng, 4)
    mask = np.kron(lay, np.ones((b, b)))
    ref = (to_numpy(x.astype("float64")).T @ to_numpy(dy.astype("float64"))) * mask
    out = cs.BlockSparseMatrix((poison((w.nnzb, b, b), w.dtype, backend), w.indices, w.indptr),
                               shape=w.shape)
    cs.sampled_matmul(x.T, dy, like=w, out=out)
    dense = to_numpy(out.toarray().astype("float64"))
    tol = cs._dtypes.TOLERANCE[dtype]
    assert np.linalg.norm(dense - ref) / np.linalg.norm(ref) < tol
    scaled = cs.BlockSparseMatrix((poison((w.nnzb, b, b), w.dtype, backend), w.indices,
                                   w.indptr), shape=w.shape)
    cs.sampled_matmul(x.T, dy, like=w, out=scaled, alpha=-1.5)
    dense_s = to_numpy(scaled.toarray().astype("float64"))
    assert np.linalg.norm(dense_s + 1.5 * ref) / np.linalg.norm(1.5 * ref) < tol
    # alpha and beta on top of the previous result: 0.5 * new + 2 * old = 2.5 * old
    cs.sampled_matmul(x.T, dy, like=w, out=out, alpha=0.5, beta=2.0)
    dense2 = to_numpy(out.toarray().astype("float64"))
    assert np.linalg.norm(dense2 - 2.5 * dense) / np.linalg.norm(2.5 * dense) < tol


def check_dsd_products(backend, monkeypatch, lay, b, dtype, n, rng, empty, seed=9):
    """X @ W (W's blocks read as stored and transposed) and dY @ W.T for W of layout
    ``lay`` against float64 NumPy, into poisoned outputs; the output blocks ``empty`` (of
    X @ W, of dY @ W.T; None: none checked) must be zeros; then alpha and beta on top of
    each result."""
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, seed=seed, backend=backend)
    wd = to_numpy(w.toarray().astype("float64"))
    tol = cs._dtypes.TOLERANCE[dtype]
    for trans, kn in ((False, True), (False, False), (True, False)):
        stack = contextlib.ExitStack()
        stack.enter_context(plans.override(kn=kn))
        stack.callback(configs.set_tiles)
        rows_in = lay.shape[1] if trans else lay.shape[0]
        x = to_backend(rng.standard_normal((n, rows_in * b)).astype(np.float32),
                       backend).astype(w.dtype)
        op = w.T if trans else w
        ref = to_numpy(x.astype("float64")) @ (wd.T if trans else wd)
        out = poison((n, ref.shape[1]), dtype, backend)
        got = to_numpy(cs.matmul(x, op, out=out).astype("float64"))
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < tol, (trans, kn)
        e = empty[trans]
        if e is not None:
            assert np.all(got[:, e * b:(e + 1) * b] == 0), (trans, kn)
        got2 = to_numpy(cs.matmul(x, op, out=out, alpha=0.5, beta=2.0).astype("float64"))
        assert np.linalg.norm(got2 - 2.5 * got) / np.linalg.norm(2.5 * got) < tol, (trans, kn)
        stack.close()


# (b, (blocks per CTA, warpgroups along M, along N, stages, flip[, k depth]))
SDD_TILES = [
    (16, (16, 2, 1, 4, True)),   # M = 256: two m64 tiles per warpgroup, N = 16
    (16, (8, 1, 1, 3, True, 32)),
    (32, (8, 1, 1, 4, True)),    # one warpgroup, four m64 tiles, N = 32
    (32, (4, 2, 1, 3, True)),
    (32, (4, 2, 1, 3, True, 32)),
    (64, (4, 2, 1, 4, True)),    # flipped 64-row blocks
    (64, (4, 1, 2, 4, False)),   # N = 256 over two warpgroups
    (64, (2, 1, 1, 4, False)),
    (64, (2, 1, 1, 3, False, 32)),
    (128, (2, 2, 1, 4, False)),  # M = 128 over two warpgroups, N = 256
    (128, (1, 1, 1, 4, False)),  # two m64 tiles in one warpgroup
    (128, (1, 2, 1, 3, False, 32)),
    (128, (1, 1, 1, 4, False, 32)),  # the short tile: one warpgroup, 32 deep
]


@pytest.fixture
def sdd_tile(request, monkeypatch):
    """The tile for long and short reductions alike (b = 64's paired tile off)."""
    b, cfg = request.param
    yield from forced_tile(monkeypatch, b, [(tiles.WGMMA_SDD, cfg), (tiles.WGMMA_SDD_SHORT, cfg),
                                            (tiles.WGMMA_SDD_WIDE, cfg)], sdd_pair=False)


@pytest.mark.parametrize("sdd_tile", SDD_TILES, indirect=True, ids=lambda t: f"b{t[0]}-{t[1]}")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("n", [1, 77, 300])  # rows of the reduction: one, a partial slice, several
@pytest.mark.parametrize("grid", ["group", "persistent"])
def test_wgmma_sdd_tiles_match_scipy(backend, force, sdd_tile, dtype, n, grid):
    """A CTA per group, or two CTAs (the short tile's persistent grid, capped) each walking
    groups of one or several slices."""
    b = sdd_tile
    if grid == "persistent":
        force(sdd_short=True, grid_limit=2)
    else:
        force(sdd_short=False)
    # 11 block columns: groups of every size up to 8, a partial last group; an empty row.
    rng = np.random.default_rng(n * b)
    lay = rng.random((3, 11)) < 0.6
    lay[1] = False
    lay[2, :9] = True
    check_sampled_matmul(backend, lay, b, dtype, n, rng)


# (b, (blocks per CTA, warpgroups along M, along N, stages, flip)) of the TMA sdd
SDD_TMA_TILES = [
    (64, (4, 1, 2, 4, False)),   # N = 256 over two warpgroups
    (64, (2, 1, 1, 3, False)),
    (128, (2, 2, 1, 4, False)),  # M = 128 over two warpgroups, N = 256
    (128, (1, 1, 1, 4, False)),  # two m64 tiles in one warpgroup
]


def tma_sdd_fixture(table, **decisions):
    """A fixture forcing the (b, tile) of its parameter into ``table`` of the persistent TMA
    sdd, with the plan ``decisions`` that take it."""

    @pytest.fixture
    def fixture(request, monkeypatch):
        b, cfg = request.param
        yield from forced_tile(monkeypatch, b, [(table, cfg)], sdd_short=False, **decisions)

    return fixture


def tile_cases(fixture, tile_list, ids=lambda t: f"b{t[0]}-{t[1]}", **params):
    """A test's cases: each tile of ``tile_list`` through the indirect ``fixture``, times
    every value of each of ``params`` (name: values)."""
    marks = [pytest.mark.parametrize(fixture, tile_list, indirect=True, ids=ids)]
    marks += [pytest.mark.parametrize(name, values) for name, values in params.items()]

    def apply(test):
        for mark in reversed(marks):
            test = mark(test)
        return test

    return apply


def tma_sdd_cases(fixture, tile_list):
    """The cases every TMA sdd tile runs: both half types, reductions of one row, a
    partial slice and several slices, a CTA per SM (or per group) or two CTAs walking all
    groups."""
    return tile_cases(fixture, tile_list, dtype=["float16", "bfloat16"], n=[1, 77, 300],
                      ctas=[0, 2])


sdd_tma_tile = tma_sdd_fixture(tiles.WGMMA_SDD_TMA, sdd_tma=True, sdd_pair=False)


@tma_sdd_cases("sdd_tma_tile", SDD_TMA_TILES)
def test_tma_sdd_tiles_match_scipy(backend, force, sdd_tma_tile, dtype, n, ctas):
    """The persistent TMA sdd: groups of every size up to the tile's, a partial last
    group (whose members past its count load out-of-bounds boxes), an empty block row."""
    b = sdd_tma_tile
    if ctas:
        force(grid_limit=ctas)
    rng = np.random.default_rng(n * b + 1)
    lay = rng.random((3, 11)) < 0.6
    lay[1] = False
    lay[2, :9] = True
    check_sampled_matmul(backend, lay, b, dtype, n, rng)
    # operands with their rows reversed (negative row strides), which a tensor map cannot
    # take: copied first
    w, x, dy = sdd_operands(backend, lay, b, dtype, n, rng, 7)
    xr, dyr = x[::-1], dy[::-1]
    mask = np.kron(lay, np.ones((b, b)))
    for a_op, b_op in [(xr.T, dy), (x.T, dyr), (xr.T, dyr)]:
        got = to_numpy(cs.sampled_matmul(a_op, b_op, like=w).toarray().astype("float64"))
        ref = (to_numpy(a_op.astype("float64")) @ to_numpy(b_op.astype("float64"))) * mask
        assert np.linalg.norm(got - ref) <= 1e-2 * np.linalg.norm(ref)
    with cs.options(dense_fallback=False):
        plan = str(cs.sampled_matmul_plan(
            to_backend(np.zeros((n, 3 * b), np.float32), backend).astype(dtype).T,
            to_backend(np.zeros((n, 11 * b), np.float32), backend).astype(dtype),
            like=cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, backend=backend)))
    assert "sdd_wgmma_tma<" in plan, plan


# (b, (block columns per tile, warpgroups along M, along N, stages, flip)) of the TMA
# sdd's dense panels (128 / b block rows per tile)
SDD_PANEL_TILES = [
    (32, (8, 2, 1, 3, False)),   # the table's: 4 x 8 blocks, N = 256
    (32, (4, 1, 2, 4, False)),   # N = 128 over two warpgroups, each two m64 tiles
    (16, (16, 2, 1, 3, False)),  # 8 x 16 blocks: 4-byte pair stores
    (8, (32, 2, 1, 3, False)),   # 16 x 32 blocks
    (8, (16, 2, 1, 2, False)),
]


sdd_panel_tile = tma_sdd_fixture(tiles.WGMMA_SDD_PANEL, sdd_panel=True, dense=False)


@tma_sdd_cases("sdd_panel_tile", SDD_PANEL_TILES)
def test_tma_sdd_panel_tiles_match_scipy(backend, force, sdd_panel_tile, dtype, n, ctas):
    """The TMA sdd's dense panels: partial tiles at the last block rows and columns (X's
    and dY's boxes past the matrix land as zeros), tiles holding one block or all of
    theirs, an empty tile region, a full block row and column; alpha and beta; results
    repeat bit for bit."""
    b = sdd_panel_tile
    if ctas:
        force(grid_limit=ctas)
    panel = sdd_configs.sdd_wgmma_config(dtype, b, panel=True)
    rows, cols = 2 * panel.block_rows + 3, 2 * panel.group + 3
    rng = np.random.default_rng(n * b + ctas)
    lay = rng.random((rows, cols)) < 0.3
    lay[:panel.block_rows, panel.group:2 * panel.group] = False  # an empty tile
    lay[panel.block_rows:2 * panel.block_rows, :panel.group] = False
    lay[panel.block_rows + 1, 2] = True  # ... and one holding a single block
    lay[-1, :] = True  # a full block row, in the partial last row of tiles
    lay[:, -1] = True  # a full block column, in the partial last column of tiles
    check_sampled_matmul(backend, lay, b, dtype, n, rng)
    w, x, dy = sdd_operands(backend, lay, b, dtype, n, rng, 3)
    plan = str(cs.sampled_matmul_plan(x.T, dy, like=w))
    assert "dense panels of" in plan, plan
    first = to_numpy(cs.sampled_matmul(x.T, dy, like=w).data)
    again = to_numpy(cs.sampled_matmul(x.T, dy, like=w).data)
    assert np.array_equal(first.view(np.uint16), again.view(np.uint16))


@pytest.mark.parametrize("b", [16, 32])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize(("n", "ctas", "splits", "beside"),
                         [(77, 0, 1, True), (77, 0, 4, False), (300, 2, 3, True),
                          (1000, 0, 0, True)])
def test_sdd_in_two_parts_matches_scipy(backend, force, b, dtype, n, ctas, splits, beside):
    """The weight gradient in two parts (Hopper): the dense panels over the tiles near the
    diagonal that W's blocks fill, then sdd_wgmma_rest over the scattered blocks they
    leave (a block row's blocks on both sides of the panels' tiles in one group, a block
    row with none left); the panels on the device's grid or two CTAs; the second part's
    reduction whole in one CTA, split four ways at 77 rows (three 32-deep slices: a CTA
    with none), three ways, or as the rule splits it; beside the panels on a side stream
    or after them; alpha and beta; results repeat bit for bit, and CUDA graphs captured
    from a stream used before and from a new one replay them."""
    import cupy

    force(sdd_hybrid=True, sdd_short=False, dense=False, grid_limit=ctas or None,
          sdd_rest_splits=splits or None, sdd_rest_beside=beside)
    rng = np.random.default_rng(n + b)
    nb = 4 * 128 // b + 3  # a partial last row and column of panel tiles
    lay = np.abs(np.subtract.outer(np.arange(nb), np.arange(nb))) <= 128 // b
    lay |= rng.random((nb, nb)) < 0.05  # scattered blocks away from the band
    lay[3, :] = True  # a block row crossing every tile
    check_sampled_matmul(backend, lay, b, dtype, n, rng)
    w, x, dy = sdd_operands(backend, lay, b, dtype, n, rng, 3)
    if device.arch(0) == 90:  # elsewhere another kernel runs
        plan = cs.sampled_matmul_plan(x.T, dy, like=w)
        assert plan.rest is not None, plan
        assert plan.kernel.panel
        filled, rest, _ = sdd_worklists.sdd_hybrid_host(w._structure, plan.kernel.block_rows,
                                                        plan.kernel.group, plan.rest.group,
                                                        sdd_rules.sdd_hybrid_fill(b))
        assert filled.shape[0]
        assert rest.shape[0]
        assert plan.rest_splits == (splits or sdd_rules.sdd_rest_splits(
            b, rest.shape[0], n, tiles.WGMMA_SDD_REST[b].k,
            device.sm_count(0) * configs.smem_ctas(plan.rest, 90)))
    first = to_numpy(cs.sampled_matmul(x.T, dy, like=w).data)
    again = to_numpy(cs.sampled_matmul(x.T, dy, like=w).data)
    assert np.array_equal(first.view(np.uint16), again.view(np.uint16))
    stream, other = (cupy.cuda.Stream(non_blocking=True) for _ in range(2))
    with other:
        eager = cs.sampled_matmul(x.T, dy, like=w)
    with stream:
        out = cs.sampled_matmul(x.T, dy, like=w)  # the runner, before the capture
        out.data.fill(np.nan)
        stream.begin_capture()
        cs.sampled_matmul(x.T, dy, like=w, out=out)
        with other:  # an eager call on another stream meanwhile: its own side stream
            cs.sampled_matmul(x.T, dy, like=w, out=eager)
        graph = stream.end_capture()
        assert np.isnan(to_numpy(out.data).astype(np.float32)).all()  # captured, not run
        graph.launch(stream)
        stream.synchronize()
    assert np.array_equal(to_numpy(out.data).view(np.uint16), first.view(np.uint16))
    other.synchronize()
    assert np.array_equal(to_numpy(eager.data).view(np.uint16), first.view(np.uint16))
    fresh = cupy.cuda.Stream(non_blocking=True)  # captured from its first call on
    with fresh:
        fresh.begin_capture()
        cs.sampled_matmul(x.T, dy, like=w, out=out)
        graph = fresh.end_capture()
        out.data.fill(np.nan)
        graph.launch(fresh)
        fresh.synchronize()
    assert np.array_equal(to_numpy(out.data).view(np.uint16), first.view(np.uint16))


@pytest.mark.parametrize(("b", "kind"), [(128, "sdd_tma"), (64, "sdd_pair"),
                                         (16, "sdd_panel")])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize(("n", "splits"), [(77, 2), (1000, 3), (1000, 8), (4096, 0)])
def test_tma_sdd_tail_pieces_match_scipy(backend, force, b, kind, dtype, n, splits):
    """The persistent TMA sdd with its last round's groups reduced in pieces: a few CTAs
    walking the groups, so that a partial last round holds some, each cut into 2, 3 or 8
    pieces (at 77 rows, a piece of one slice, the second partial) or as the rule cuts them
    (4096 rows, the CTAs chosen so that it does); the one-row tile, the paired tile and the
    dense panels; alpha and beta; results repeat bit for bit, and CUDA graphs captured on
    a new stream, from a stream's first call or after one, replay them twice (the
    counters back at zero after each launch)."""
    import cupy

    rng = np.random.default_rng(n + b + splits)
    nb = {128: 6, 64: 9, 16: 21}[b]
    lay = rng.random((nb, nb)) < 0.45
    lay |= np.abs(np.subtract.outer(np.arange(nb), np.arange(nb))) <= 2  # pairs share
    cfg = sdd_configs.sdd_wgmma_config(dtype, b, **{kind[4:]: True})
    count = sdd_worklists.sdd_work_host(
        cs.BlockSparseMatrix.from_layout(lay, b, backend="cpu")._structure, cfg.group,
        cfg.block_rows, cfg.panel).shape[0]
    slices = -(-n // 64)
    # a partial last round; by the rule, one it cuts into pieces
    ctas = next(c for c in range(3, count) if count % c and (
        splits or sdd_rules.sdd_tail_split(count, c, slices) > 1))
    force(**{kind: True}, sdd_short=False, sdd_hybrid=False, grid_limit=ctas,
          sdd_tail_splits=splits or None)
    check_sampled_matmul(backend, lay, b, dtype, n, rng)
    w, x, dy = sdd_operands(backend, lay, b, dtype, n, rng, 5)
    if device.arch(0) == 90:  # elsewhere another kernel runs
        plan = cs.sampled_matmul_plan(x.T, dy, like=w)
        assert plan.kernel == cfg, plan
        want = splits or sdd_rules.sdd_tail_split(count, ctas, slices)
        assert want > 1
        assert (plan.tail_splits, plan.tail_whole) == (want, count - count % ctas), plan
        assert f"in {want} pieces" in str(plan)
    first = to_numpy(cs.sampled_matmul(x.T, dy, like=w).data)
    again = to_numpy(cs.sampled_matmul(x.T, dy, like=w).data)
    assert np.array_equal(first.view(np.uint16), again.view(np.uint16))
    out = cs.sampled_matmul(x.T, dy, like=w)
    for warm in (False, True):  # a stream's first call captured (its counters made then)
        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:
            if warm:
                cs.sampled_matmul(x.T, dy, like=w, out=out)
            stream.begin_capture()
            cs.sampled_matmul(x.T, dy, like=w, out=out)
            graph = stream.end_capture()
            for _ in range(2):  # a counter left set would leave blocks unstored: NaN
                out.data.fill(np.nan)
                graph.launch(stream)
                stream.synchronize()
                assert np.array_equal(to_numpy(out.data).view(np.uint16),
                                      first.view(np.uint16))


SDD_PAIR_TILES = [
    (64, (4, 2, 1, 3, False)),  # the table's: a warpgroup per block row, N = 256
    (64, (2, 2, 1, 2, False)),  # N = 128, two stages
    (64, (4, 1, 2, 3, False)),  # both block rows in one warpgroup, two along N
]


sdd_pair_tile = tma_sdd_fixture(tiles.WGMMA_SDD_PAIR, sdd_pair=True, dense=False)


@tma_sdd_cases("sdd_pair_tile", SDD_PAIR_TILES)
def test_paired_tma_sdd_tiles_match_scipy(backend, force, sdd_pair_tile, dtype, n, ctas):
    """The TMA sdd's paired tile: rows sharing some columns, an empty row, two rows with
    disjoint columns, two full rows (paired together), an odd number of rows (one left
    alone: its partner's X boxes lie past the matrix and land as zeros); results repeat
    bit for bit."""
    b = sdd_pair_tile
    if ctas:
        force(grid_limit=ctas)
    rng = np.random.default_rng(n * 7 + ctas)
    lay = rng.random((8, 9)) < 0.5
    lay[[2, 3, 6], [2, 3, 6]] = True  # seven rows holding blocks: one is left alone
    lay[7] = False  # an empty row
    lay[4], lay[5] = np.arange(9) % 2 == 0, np.arange(9) % 2 == 1  # disjoint columns
    lay[0] = lay[1] = True  # full rows: the pair sharing most
    s = cs.BlockSparseMatrix.from_layout(lay, b, backend="cpu")._structure
    assert [0, 1] in sdd_worklists.sdd_row_pairs(s).tolist()
    assert (sdd_worklists.sdd_pair_groups_host(s, tiles.WGMMA_SDD_PAIR[b].group)[:, 1] < 0).any()
    check_sampled_matmul(backend, lay, b, dtype, n, rng)
    w, x, dy = sdd_operands(backend, lay, b, dtype, n, rng, 3)
    plan = str(cs.sampled_matmul_plan(x.T, dy, like=w))
    assert "pair of block rows" in plan, plan
    first = to_numpy(cs.sampled_matmul(x.T, dy, like=w).data)
    again = to_numpy(cs.sampled_matmul(x.T, dy, like=w).data)
    assert np.array_equal(first.view(np.uint16), again.view(np.uint16))
    # reversed rows (copied before the maps are made)
    mask = np.kron(lay, np.ones((b, b)))
    got = to_numpy(cs.sampled_matmul(x[::-1].T, dy[::-1], like=w).toarray().astype("float64"))
    ref = (to_numpy(x[::-1].astype("float64")).T @ to_numpy(dy[::-1].astype("float64"))) * mask
    assert np.linalg.norm(got - ref) <= 1e-2 * np.linalg.norm(ref)


@pytest.mark.parametrize("kn", [True, False])
@pytest.mark.parametrize("b", [16, 32, 64, 128])
def test_wgmma_dsd_reads_w_as_stored_or_transposed(backend, force, kn, b):
    """X @ W on the single-block wgmma kernel, with W's blocks read as stored (N-major B
    tile) and through a block-transposed copy: both must match SciPy."""
    force(kn=kn)
    rng = np.random.default_rng(b)
    lay = rng.random((5, 3)) < 0.6
    lay[:, 1] = False  # an empty output block column: zeros
    lay[0, 0] = True
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype="float16", seed=6, backend=backend)
    x = to_backend(rng.standard_normal((150, 5 * b)).astype(np.float16), backend)
    got = to_numpy(cs.matmul(x, w, out=poison((150, 3 * b), "float16", backend)))
    ref = to_numpy(x).astype(np.float64) @ to_numpy(w.toarray()).astype(np.float64)
    assert np.linalg.norm(got.astype(np.float64) - ref) / np.linalg.norm(ref) < 4e-3


# (b, (blocks per CTA, rows per CTA, warps along m, along n, entries per stage, stages))
GROUP_TILES = [
    (8, (16, 128, 4, 2, 8, 3)),
    (8, (32, 128, 4, 2, 4, 3)),  # 16 members per warp
    (8, (8, 64, 2, 2, 4, 4)),    # four warps
    (16, (16, 128, 4, 2, 4, 3)),
    (16, (8, 64, 2, 2, 2, 4)),
]


@pytest.fixture
def group_tile(request, monkeypatch):
    b, cfg = request.param
    # WGMMA_DSD None: the grouped mma.sync kernel on Hopper too
    yield from forced_tile(monkeypatch, b, [(tiles.DSD_GROUP, cfg), (tiles.WGMMA_DSD, None)],
                           group=True)


@pytest.mark.parametrize("group_tile", GROUP_TILES, indirect=True, ids=lambda t: f"b{t[0]}-{t[1]}")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("n", [65, 300])  # one partial row tile; several (lists split at both)
def test_grouped_small_block_dsd_tiles_match_scipy(backend, monkeypatch, group_tile, dtype, n):
    """X @ W and dY @ W.T on the grouped small-block kernel: lists longer than the kernel's
    shared-memory copy (300 entries), a partial last group, an empty output block, a full
    row, every entry present for some members and absent for others."""
    b = group_tile
    rng = np.random.default_rng(n + b)
    lay = rng.random((300, 37)) < 0.3
    lay[7, :] = True    # a full block row
    lay[:, 36] = True   # a full block column, in the partial last group
    lay[:, 5] = False   # an empty output block column of X @ W
    check_dsd_products(backend, monkeypatch, lay, b, dtype, n, rng, {False: 5, True: None},
                       seed=8)


@pytest.mark.parametrize("key", sorted(tiles.DSD_STREAM), ids=lambda k: f"b{k[0]}-rows{k[1]}")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("run", [None, 1, 3])  # the rule's runs, one chunk a CTA, three
def test_stream_dsd_tiles_match_scipy(backend, monkeypatch, force, key, dtype, run):
    """X @ W and dY @ W.T on each tile of the small-N dsd with X in shared memory, at three
    rows fewer than the tile holds (a partial last 16-row slice): a partial last chunk of
    X's block columns and group of output blocks, an empty output block of each product
    and a full block row; runs of chunks leaving partial products (added by the group's
    CTAs up to STREAM_SHARE_MAX_ROWS rows, else by a second launch) or none."""
    b, rows = key
    n = rows - 3
    if dsd_configs.stream_ctas(b, n, device.arch(0)) == 0:
        pytest.skip("the tile's shared memory does not fit this device")
    rng = np.random.default_rng(rows + b + (run or 0))
    lay = rng.random((70, 37)) < 0.35
    lay[9, :] = True    # a full block row
    lay[:, 5] = False   # an empty output block column of X @ W
    lay[11, :] = False  # ... and of dY @ W.T
    force(stream=True, **({} if run is None else {"stream_run": run}))
    check_dsd_products(backend, monkeypatch, lay, b, dtype, n, rng, {False: 5, True: 11},
                       seed=7)
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, backend=backend)
    x = to_backend(np.ones((n, 70 * b), np.float32), backend).astype(dtype)
    p = cs.matmul_plan(x, w)
    assert p.kernel.kernel == "dsd_stream"
    assert p.kernel.rows_per_cta == 16 * -(-n // 16)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("share", [None, True])  # second launch; the group's CTAs
def test_stream_dsd_runs_past_64_chunks(backend, monkeypatch, force, dtype, share):
    """b = 8's 128-row tile takes runs of up to 128 chunks of X's block columns: a run of
    100 chunks (800 block rows of W in chunks of 8), a partial last run, at 120 rows; the
    partial products added by a second launch (the plan's choice past 32 rows) or by the
    group's own CTAs in the launch."""
    b, n = 8, 120
    assert tiles.DSD_STREAM[(b, 128)].max_run >= 100
    if dsd_configs.stream_ctas(b, n, device.arch(0)) == 0:
        pytest.skip("the tile's shared memory does not fit this device")
    rng = np.random.default_rng(100)
    lay = rng.random((820, 20)) < 0.1
    lay[:, 3] = False  # an empty output block column of X @ W
    force(stream=True, stream_run=100, **({} if share is None else {"stream_share": share}))
    check_dsd_products(backend, monkeypatch, lay, b, dtype, n, rng, {False: 3, True: None},
                       seed=5)
    x = to_backend(np.ones((n, 820 * b), np.float32), backend).astype(dtype)
    p = cs.matmul_plan(x, cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype,
                                                           backend=backend))
    assert (p.kernel.kernel, p.split, p.grid) == ("dsd_stream", 100, (2, 2))
    assert p.shared_sum == bool(share)


def tiled_sdd_layout(rng, density):
    """A 37 x 29 block layout for the tiled sdd kernels (16 x 16 or 8 x 8 tiles): partial
    tiles at both edges, an empty tile, a full block row and column, a tile holding a
    single block."""
    lay = rng.random((37, 29)) < density
    lay[:16, 16:] = False  # an empty tile
    lay[5, :] = True
    lay[:, 27] = True
    lay[20:32, :16] = False
    lay[25, 3] = True      # a tile with a single block
    return lay


# (b, (block rows, block columns per tile, k depth, warps m, warps n, stages))
SDD_TILED = [
    (8, (16, 16, 32, 2, 4, 4)),
    (8, (8, 16, 32, 4, 2, 3)),   # 16-row warp tiles: one m16 tile spans two block rows
    (16, (8, 8, 32, 2, 4, 4)),
]


@pytest.fixture
def sdd_tiled(request, monkeypatch):
    b, cfg = request.param
    # WGMMA_SDD None: the tiled kernel on Hopper too
    yield from forced_tile(monkeypatch, b, [(tiles.SDD_TILE, cfg), (tiles.WGMMA_SDD, None)],
                           sdd_tiled=True)


@pytest.mark.parametrize("sdd_tiled", SDD_TILED, indirect=True, ids=lambda t: f"b{t[0]}-{t[1]}")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("n", [1, 77, 300])
def test_tiled_small_block_sdd_matches_scipy(backend, sdd_tiled, dtype, n):
    """The tiled sdd: partial tiles at both edges, empty tiles, a full block row and column,
    tiles with a single block; alpha and beta."""
    b = sdd_tiled
    rng = np.random.default_rng(n * b + 1)
    check_sampled_matmul(backend, tiled_sdd_layout(rng, 0.2), b, dtype, n, rng)


# (b, (block rows, block columns per tile, k depth, stages)) of the float32 tiled sdd on
# CUDA cores (one thread per 8 x 8 unit)
SDD_TILED_SIMT = [
    (8, (16, 16, 32, 3)),
    (8, (8, 16, 16, 4)),   # 128 threads; tiles taller than wide
    (16, (8, 8, 32, 3)),   # four units per block
    (16, (4, 8, 16, 2)),
]


@pytest.fixture
def sdd_tiled_simt(request, monkeypatch):
    b, cfg = request.param
    yield from forced_tile(monkeypatch, b, [(tiles.SDD_TILE_SIMT, cfg)],
                           sdd_tiled=True)


@pytest.mark.parametrize("sdd_tiled_simt", SDD_TILED_SIMT, indirect=True,
                         ids=lambda t: f"b{t[0]}-{t[1]}")
@pytest.mark.parametrize("n", [1, 77, 300])
def test_tiled_simt_sdd_matches_scipy(backend, sdd_tiled_simt, n):
    """The float32 tiled sdd: partial tiles at both edges, an empty tile, a full block row
    and column, a tile with a single block, a full tile (every unit live); alpha and
    beta."""
    b = sdd_tiled_simt
    rng = np.random.default_rng(n * b + 3)
    lay = tiled_sdd_layout(rng, 0.3)
    lay[32:, :16] = True   # full tiles along the bottom edge
    check_sampled_matmul(backend, lay, b, "float32", n, rng)


# (b, (m64 tiles per warpgroup, consumer warpgroups, stages, CTAs per SM[, slices in flight
# [, tma]]))
WS_TILES = [
    (32, (2, 1, 3, 3, 0)),  # one consumer warpgroup of two m64 tiles, stage freed at once
    (32, (2, 1, 3, 3)),     # the same keeping one slice's wgmmas running
    (32, (1, 2, 5, 2)),
    (32, (2, 2, 4, 1, 0)),  # two consumer warpgroups of two m64 tiles each
    (32, (1, 1, 3, 2)),     # one m64 tile, the shallowest pipeline
    (64, (2, 1, 4, 2, 0)),
    (128, (1, 2, 4, 1, 0)),
    (128, (1, 2, 3, 1)),
    # copies by TMA: two 64-byte-swizzled entries per slice at b = 32 (an odd list's last
    # slice reads an out-of-bounds box for its second), one 128-byte tile at b = 64, two
    # N-major panels of a block as stored at b = 128
    (32, (2, 1, 3, 3, 0, True)),
    (32, (4, 1, 2, 2, 0, True)),  # four m64 tiles, 256 rows
    (32, (4, 2, 3, 1, 0, True)),  # b = 32's tall tile: 512 rows, X in two boxes per entry
    (32, (1, 2, 4, 2, 1, True)),
    (64, (2, 1, 4, 2, 0, True)),
    (64, (2, 2, 3, 1, 1, True)),
    (128, (1, 2, 4, 1, 0, True)),
    (128, (2, 1, 3, 1, 1, True)),
    # X's rows as wgmma's N: 256-row tiles (two partial at n = 300), 128-row ones
    (64, (1, 1, 4, 1, 0, True, 256)),
    (64, (1, 1, 3, 2, 1, True, 128)),
    (128, (1, 2, 4, 1, 0, True, 256)),
    # clusters of two CTAs on neighbouring row tiles, each block copied half by each CTA
    # and multicast (n = 65: the second CTA's row tile lies past X)
    (64, (1, 1, 2, 2, 0, True, 256, 2)),
    (64, (1, 1, 3, 1, 1, True, 128, 2)),
    (128, (1, 2, 4, 1, 1, True, 256, 2)),
    (128, (1, 2, 3, 1, 0, True, 128, 2)),
    # the epilogue's TMA store, in rounds of 64 to 256 rows (n = 65: one partial round, the
    # rest past X; n = 300: a tile's rounds past X), alone and in clusters; beta != 0 takes
    # the register stores (split lists beside TMA-stored tiles: the tests below)
    (64, (1, 1, 2, 2, 0, True, 256, 1, 1, 64)),
    (64, (1, 1, 3, 1, 1, True, 128, 1, 1, 128)),
    (128, (1, 2, 4, 1, 1, True, 256, 1, 1, 64)),
    (128, (1, 2, 3, 1, 1, True, 256, 1, 1, 256)),
    (64, (1, 1, 2, 2, 0, True, 256, 2, 1, 128)),
    (128, (1, 2, 4, 1, 1, True, 256, 2, 1, 64)),
]


@pytest.fixture
def ws_tile(request, monkeypatch):
    b, cfg = request.param
    # WGMMA_DSD (1, ...): a single-block tile, which the persistent kernel replaces; no
    # tall tile to take its place
    yield from forced_tile(monkeypatch, b, [(tiles.WGMMA_DSD_WS, cfg),
                                            (tiles.WGMMA_DSD, (1, 2, 4)),
                                            (tiles.WGMMA_DSD_TALL, None)])


@pytest.mark.parametrize("ws_tile", WS_TILES, indirect=True, ids=lambda t: f"b{t[0]}-{t[1]}")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("grid_limit", [None, 3])  # 3 CTAs: each walks many tiles
@pytest.mark.parametrize("n", [65, 300])
def test_persistent_dsd_tiles_match_scipy(backend, monkeypatch, force, ws_tile, dtype,
        grid_limit, n):
    """X @ W (W's blocks read as stored and transposed) and dY @ W.T on the persistent,
    warp-specialized kernel: tiles of every list length down to empty, a list longer than
    the kernel's shared-memory copy, a partial last row tile, split lists (n = 65), a grid
    far smaller than the tiles so the stage ring wraps across tiles; alpha and beta."""
    b = ws_tile
    force(grid_limit=grid_limit)
    rng = np.random.default_rng(n + b)
    rows_w = 520 if b == 32 else 9  # b = 32: lists past LIST_CAP (512)
    lay = rng.random((rows_w, 6)) < 0.4
    lay[:, 2] = False   # an empty output block column of X @ W
    lay[:, 4] = True    # a full one
    lay[3, :] = False   # an empty output block column of dY @ W.T
    check_dsd_products(backend, monkeypatch, lay, b, dtype, n, rng, {False: 2, True: 3})


def _epilogue_tile(monkeypatch, b, epilogue, cluster):
    """The tall (or clustered) tile of b = 64 / 128 with its epilogue stored by TMA in
    rounds of ``epilogue`` rows."""
    tile = tiles.PersistentTile(1, b // 64, 2 if b == 64 else 4, 2 if b == 64 else 1, 1, True,
                                256, cluster, 1, epilogue)
    monkeypatch.setitem(tiles.WGMMA_DSD_TALL, b, tile)
    monkeypatch.setitem(tiles.WGMMA_DSD_CLUSTER, b, tile)
    configs.set_tiles()


@pytest.mark.parametrize(("b", "epilogue"), [(64, 128), (128, 64)])
@pytest.mark.parametrize("cluster", [1, 2])
@pytest.mark.parametrize("n", [65, 300])
def test_dsd_epilogue_tma_store_outputs(backend, monkeypatch, force, b, epilogue, cluster, n):
    """The tall tile's epilogue stored by TMA rounds, lists whole: alpha applied; `out` a
    view with rows further apart than its width (the map's row stride), its padding left
    untouched; outputs the map cannot take (4-byte aligned, or rows 8 bytes off 16) and
    beta != 0 on the register stores. Each result against float64 NumPy, and each call's
    store path checked where the runner sets it."""
    from cubsparse._cuda import run_dsd

    _epilogue_tile(monkeypatch, b, epilogue, cluster)
    force(tall=True, cluster=cluster == 2, dsd_pair=False, split=0, grid_limit=3)
    try:
        rng = np.random.default_rng(n + b + cluster)
        lay = rng.random((7, 5)) < 0.5
        lay[:, 1] = True
        w = cs.BlockSparseMatrix.from_layout(lay, b, dtype="float16", seed=3, backend=backend)
        x = to_backend(rng.standard_normal((n, 7 * b)).astype(np.float32),
                       backend).astype(w.dtype)
        plan = cs.matmul_plan(x, w)
        assert plan.kernel.epilogue == epilogue, plan
        assert plan.kernel.cluster == cluster, plan
        assert plan.split == 0, plan
        runner = run_dsd._dsd_runner(n, w, False, False)
        ref = to_numpy(x.astype("float64")) @ to_numpy(w.toarray().astype("float64"))
        tol = cs._dtypes.TOLERANCE["float16"]

        def check(got, want, by_tma):
            assert runner.main.v[runner.i_ctr + 3].value == by_tma
            got = to_numpy(got.astype("float64"))
            assert np.linalg.norm(got - want) / np.linalg.norm(want) < tol

        check(cs.matmul(x, w, alpha=-0.5), -0.5 * ref, 1)
        wide = poison((n, 5 * b + 24), "float16", backend)
        cs.matmul(x, w, out=wide[:, 8:8 + 5 * b])
        check(wide[:, 8:8 + 5 * b], ref, 1)
        assert np.isnan(to_numpy(wide[:, :8])).all()  # the padding is untouched
        assert np.isnan(to_numpy(wide[:, -16:])).all()
        cs.matmul(x, w, out=wide[:, 2:2 + 5 * b])  # 4 bytes past a 16-byte boundary
        check(wide[:, 2:2 + 5 * b], ref, 0)
        apart = poison((n, 5 * b + 4), "float16", backend)[:, :5 * b]  # rows 8 bytes off 16
        cs.matmul(x, w, out=apart)
        check(apart, ref, 0)
        cs.matmul(x, w, out=apart, alpha=2.0, beta=-1.0)
        check(apart, ref, 0)
    finally:
        configs.set_tiles()


@pytest.mark.parametrize(("b", "epilogue"), [(64, 128), (128, 64)])
def test_dsd_epilogue_tma_store_beside_split_lists(backend, monkeypatch, force, b, epilogue):
    """One launch with split lists (their partials summed by register stores) and whole
    ones (stored by TMA), into a poisoned output with beta 0."""
    from cubsparse._cuda import run_dsd

    _epilogue_tile(monkeypatch, b, epilogue, 1)
    force(tall=True, cluster=False, dsd_pair=False, split=4, grid_limit=3)
    try:
        rng = np.random.default_rng(b)
        lay = rng.random((12, 5)) < 0.2
        lay[:, 0] = True  # a list of 12: three segments
        lay[:3, 3] = True  # and short ones, whole
        w = cs.BlockSparseMatrix.from_layout(lay, b, dtype="float16", seed=5, backend=backend)
        x = to_backend(rng.standard_normal((300, 12 * b)).astype(np.float32),
                       backend).astype(w.dtype)
        plan = cs.matmul_plan(x, w)
        assert plan.split == 4, plan
        out = poison((300, 5 * b), "float16", backend)
        cs.matmul(x, w, out=out)
        runner = run_dsd._dsd_runner(300, w, False, False)
        assert runner.main.v[runner.i_ctr + 3].value == 1
        ref = to_numpy(x.astype("float64")) @ to_numpy(w.toarray().astype("float64"))
        got = to_numpy(out.astype("float64"))
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < cs._dtypes.TOLERANCE["float16"]
    finally:
        configs.set_tiles()


@pytest.mark.parametrize(("b", "epilogue"), [(64, 128), (128, 64)])
def test_dsd_epilogue_tma_store_in_a_cuda_graph(backend, monkeypatch, force, b, epilogue):
    """The tall tile with its TMA store captured into a CUDA graph (the Y map passed by
    value with the launch) replays into a poisoned output after X and W change in place."""
    import cupy

    from cubsparse._cuda import run_dsd

    _epilogue_tile(monkeypatch, b, epilogue, 1)
    force(tall=True, cluster=False, dsd_pair=False, split=0, grid_limit=3)
    try:
        rng = np.random.default_rng(b + 7)
        lay = rng.random((6, 5)) < 0.5
        lay[:, 2] = True
        w = cs.BlockSparseMatrix.from_layout(lay, b, dtype="float16", seed=2, backend=backend)
        x = to_backend(rng.standard_normal((300, 6 * b)).astype(np.float32),
                       backend).astype(w.dtype)
        assert cs.matmul_plan(x, w).kernel.epilogue == epilogue
        runner = run_dsd._dsd_runner(300, w, False, False)
        y = cupy.empty((300, 5 * b), "float16")
        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:
            cs.matmul(x, w, out=y)  # eager: plan, tables, kernel
            assert runner.main.v[runner.i_ctr + 3].value == 1  # stored by TMA
            stream.begin_capture()
            cs.matmul(x, w, out=y)
            graph = stream.end_capture()
            for seed in range(2):
                r = cupy.random.default_rng(seed)
                x[...] = r.standard_normal(x.shape).astype("float16")
                w.data[...] = r.standard_normal(w.data.shape).astype("float16")
                y.fill(cupy.nan)
                graph.launch(stream)
                stream.synchronize()
                ref = to_numpy(x.astype("float64")) @ to_numpy(w.toarray().astype("float64"))
                got = to_numpy(y.astype("float64"))
                assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < cs._dtypes.TOLERANCE[
                    "float16"]
    finally:
        configs.set_tiles()


@pytest.mark.parametrize("b", [64, 128])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("n", [65, 300])
def test_clustered_dsd_split_lists(backend, monkeypatch, force, b, dtype, n):
    """The clustered tall tile with its lists split (segments added up by the CTA of the
    last one): at n = 65 the second CTA of each cluster has no rows of X, at n = 300 both
    have; two CTAs walk every tile."""
    force(tall=True, cluster=True, dsd_pair=False, split=2, grid_limit=2, dense=False)
    rng = np.random.default_rng(n + b + 1)
    lay = rng.random((9, 6)) < 0.5
    lay[:, 4] = True    # a list of 9 blocks: five segments
    lay[3, :] = True    # and one of 6 for dY @ W.T
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, backend=backend)
    x = to_backend(rng.standard_normal((n, 9 * b)).astype(np.float32), backend).astype(w.dtype)
    plan = cs.matmul_plan(x, w)
    assert plan.kernel.name.startswith("dsd_wgmma_tma_mc<")
    assert plan.split == 2
    check_dsd_products(backend, monkeypatch, lay, b, dtype, n, rng, {False: None, True: None})


@pytest.mark.parametrize(("b", "kind"), [(64, "tall"), (128, "tall"), (64, "cluster"),
                                         (128, "cluster"), (64, "pair")])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("split", [0, 2])
def test_dsd_tiles_taken_by_deadline(backend, monkeypatch, force, b, kind, dtype, split):
    """The TMA dsd tiles (tall, clustered, two-block) taking their tiles in the deadline
    order (tile_order): a hub list of every block row beside lists of one block, so the
    hub's tiles are taken rows ahead; 1,100 rows (a partial last row tile), three CTAs (two
    clusters) walking them, lists whole and split (not the two-block tile, which never
    splits). Against SciPy, and bit for bit the results of the row-tile order."""
    from cubsparse._cuda import run_dsd

    if kind == "pair" and split:
        pytest.skip("the two-block tile stores its blocks whole")
    force(tall=True, cluster=kind == "cluster", dsd_pair=kind == "pair", split=split,
          grid_limit=4 if kind == "cluster" else 3, dense=False)
    rng = np.random.default_rng(b + split)
    lay = np.eye(12, 9, dtype=bool)
    lay[:, 5] = True    # X @ W's hub: a list of 12 blocks
    lay[7, :] = True    # dY @ W.T's: 9 blocks
    n = 1100
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, backend=backend)
    results = {}
    for order in (True, False):
        force(tile_order=order)
        for rows_in, op in ((12, w), (9, w.T)):
            x = to_backend(np.random.default_rng(rows_in).standard_normal(
                (n, rows_in * b)).astype(np.float32), backend).astype(w.dtype)
            plan = cs.matmul_plan(x, op)
            assert plan.order == order
            assert "taken early (tile_order)" in str(plan) or not order
            assert plan.kernel.group == (2 if kind == "pair" else 1)
            assert plan.kernel.cluster == (2 if kind == "cluster" else 1)
            results[order, rows_in] = to_numpy(cs.matmul(
                x, op, out=poison((n, op.shape[1]), dtype, backend)))
            runner = run_dsd._dsd_runner(n, w, rows_in == 9, False)
            assert bool(runner.main.v[runner.i_ctr + 4].value) == order  # the table's slot
        if order:
            check_dsd_products(backend, monkeypatch, lay, b, dtype, n, rng,
                               {False: None, True: None})
    for rows_in in (12, 9):
        assert np.array_equal(results[True, rows_in], results[False, rows_in])


# the two-block TMA tile (b = 64): (m64 tiles, consumer warpgroups, stages, CTAs per SM,
# slices in flight, tma, rows, cluster, blocks per tile[, TMA-store rows])
PAIR_TILES = [(1, 2, 4, 1, 1, True, 256, 1, 2), (1, 2, 3, 1, 0, True, 128, 1, 2),
              (1, 2, 4, 1, 1, True, 256, 1, 2, 64), (1, 2, 3, 1, 0, True, 128, 1, 2, 128)]


@pytest.fixture
def pair_tile(request, monkeypatch):
    yield from forced_tile(monkeypatch, 64, [(tiles.WGMMA_DSD_PAIR, request.param)],
                           tall=True, dsd_pair=True, cluster=False, dense=False)


@pytest.mark.parametrize("pair_tile", PAIR_TILES, indirect=True, ids=str)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("grid_limit", [None, 3])
@pytest.mark.parametrize("n", [65, 300])
def test_paired_dsd_tiles_match_scipy(backend, monkeypatch, force, pair_tile, dtype,
                                      grid_limit, n):
    """X @ W (W's blocks read as stored and transposed) and dY @ W.T on the two-block TMA
    tile: odd counts of output blocks (the last tile's second block lies past the output),
    an empty and a full output block, entries present in one block of a tile only, a
    partial last row tile, a grid of three CTAs walking many tiles; alpha and beta (the
    4-byte epilogue)."""
    b = pair_tile
    force(grid_limit=grid_limit)
    rng = np.random.default_rng(n + 3)
    lay = rng.random((9, 7)) < 0.5
    lay[:, 2] = False   # an empty output block column of X @ W
    lay[:, 4] = True    # a full one
    lay[3, :] = False   # an empty output block column of dY @ W.T
    check_dsd_products(backend, monkeypatch, lay, b, dtype, n, rng, {False: 2, True: 3})
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, backend=backend)
    x = to_backend(rng.standard_normal((n, 9 * b)).astype(np.float32), backend).astype(w.dtype)
    plan = cs.matmul_plan(x, w)
    assert plan.kernel.group == 2
    assert plan.kernel.name.startswith("dsd_wgmma_tma<")


@pytest.mark.parametrize("pair_tile", PAIR_TILES[:1], indirect=True, ids=str)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("band", [2, 3])
def test_paired_dsd_tiles_in_bands(backend, monkeypatch, force, pair_tile, dtype, band):
    """The two-block TMA tile taking its tiles in bands of two and three row tiles:
    1,300 rows (six row tiles, the last band partial at three), seven output blocks (the
    last pair half past the output), a grid of three CTAs."""
    b = pair_tile
    force(band=band, grid_limit=3)
    rng = np.random.default_rng(band)
    lay = np.abs(np.subtract.outer(np.arange(9), np.arange(7))) <= 2
    lay[0, 6] = True
    n = 1300
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, backend=backend)
    x = to_backend(np.zeros((n, 9 * b), np.float32), backend).astype(w.dtype)
    plan = cs.matmul_plan(x, w)
    assert plan.kernel.group == 2
    assert plan.band == band
    check_dsd_products(backend, monkeypatch, lay, b, dtype, n, rng, {False: None, True: None})


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_paired_dsd_taken_by_default_on_a_banded_layout(backend, monkeypatch, force, dtype):
    """The default plan of a banded b = 64 layout (a grid of two CTAs, so the tall tile is
    taken) is the two-block tile, for X @ W and dY @ W.T, and its results match SciPy."""
    force(grid_limit=2, dense=False)
    kb, n, b = 11, 512, 64
    lay = np.abs(np.subtract.outer(np.arange(kb), np.arange(kb))) <= 2
    rng = np.random.default_rng(5)
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, backend=backend)
    x = to_backend(rng.standard_normal((n, kb * b)).astype(np.float32), backend).astype(w.dtype)
    for op in (w, w.T):
        assert cs.matmul_plan(x, op).kernel.group == 2
    check_dsd_products(backend, monkeypatch, lay, b, dtype, n, rng, {False: None, True: None})


@pytest.mark.parametrize(("b", "n"), [(32, 600), (64, 600), (128, 600), (64, 1024), (128, 1024)])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_tall_tiles_taken_by_default(backend, monkeypatch, force, b, dtype, n):
    """The default choice of the tall persistent tile (a grid of two CTAs makes enough
    tiles per CTA at n = 600; X's rows as wgmma's N at b = 64, 128), and of its clusters
    where the row tiles pair up (n = 1024, b = 64, 128): X @ W with W read as stored and
    transposed, and dY @ W.T, against SciPy, with an empty output block each; then a
    layout without blocks, whose tensor map points at a stand-in block (zeros over a
    poisoned output)."""
    force(grid_limit=2)
    xcfg = dsd_configs.wgmma_config(dtype, b, tall=True)
    assert dsd_rules.tall_pays(xcfg, n, 5, plans.persistent_ctas(xcfg, device.sm_count(0)))
    rng = np.random.default_rng(b + 17)
    # n = 1024: lists deep enough for clusters (b = 64, 128)
    lay = rng.random((7 if n == 600 else 4096 // b, 5)) < (0.5 if n == 600 else 0.8)
    lay[:, 1] = False   # an empty output block of X @ W
    lay[4, :] = False   # and of dY @ W.T
    lay[0, 0] = True
    check_dsd_products(backend, monkeypatch, lay, b, dtype, n, rng, {False: 1, True: 4})
    rows = lay.shape[0]
    empty = cs.BlockSparseMatrix.from_layout(np.zeros((rows, 5), bool), b, dtype=dtype,
                                             backend=backend)
    x = to_backend(rng.standard_normal((n, rows * b)).astype(np.float32),
                   backend).astype(empty.dtype)
    got = to_numpy(cs.matmul(x, empty, out=poison((n, 5 * b), dtype, backend)).astype("float64"))
    assert np.all(got == 0)
    # X with its rows reversed (a negative row stride), which a tensor map cannot take:
    # copied first
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, seed=5, backend=backend)
    xr = x[::-1]
    ref = to_numpy(xr).astype(np.float64) @ to_numpy(w.toarray()).astype(np.float64)
    got = to_numpy(cs.matmul(xr, w).astype("float64"))
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-2
    ccfg = dsd_configs.wgmma_config(dtype, b, cluster=True)
    clustered = ccfg is not None and dsd_rules.cluster_pays(ccfg, w._structure, False, b, n, 5, 2)
    assert clustered == (n == 1024)
    kernel = cs.matmul_plan(x, w).kernel
    assert kernel.name.startswith("dsd_wgmma_tma_mc<" if clustered else "dsd_wgmma_tma<")
    assert kernel.group == 1


# (b, (members per group, m64 tiles, consumer warpgroups, stages, CTAs per SM))
UNION_TILES = [
    (32, (8, 2, 4, 3, 1)),   # one consumer warpgroup per two members
    (32, (4, 2, 2, 4, 1)),
    (32, (4, 1, 4, 3, 1)),   # one member per consumer, 64-row tiles
    (16, (16, 2, 4, 4, 1)),  # four 16-deep entries per slice: 64 presence bits
    (16, (8, 1, 2, 3, 1)),
    (64, (4, 2, 2, 4, 1)),   # one entry per slice
]


# (b, (members per group, m64 tiles, consumer warpgroups, stages, CTAs per SM)) of the
# panel union kernel; wgmma's N is members / consumer warpgroups * b
PANEL_TILES = [
    (8, (16, 2, 1, 4, 1)),   # eight 8-deep entries per slice, N = 128
    (8, (32, 1, 2, 3, 1)),   # 32 members: every presence bit of a word
    (16, (16, 2, 2, 4, 1)),
    (16, (4, 1, 1, 3, 2)),   # N = 64, two CTAs per SM
    (32, (8, 2, 2, 4, 1)),
    (32, (8, 1, 1, 3, 1)),   # N = 256
    # two producer warpgroups (registers moved to the consumers): rows 32 apart per thread
    (32, (8, 2, 2, 4, 1, 2)),
    (16, (8, 2, 1, 4, 1, 2)),  # a thread's rows in every other member's block
    (8, (32, 2, 2, 3, 1, 2)),  # ... in every fourth member's
]


def union_layout(rng):
    """275 x 37 blocks at d = 0.2 for the union and panel tiles: union lists past their
    shared-memory copy, a full output block of each product in its partial last group,
    output block 5 of X @ W and 9 of dY @ W.T empty."""
    lay = rng.random((275, 37)) < 0.2
    lay[:, 36] = True   # a full output block of X @ W, in the partial last group
    lay[270, :] = True  # a full one of dY @ W.T, in its partial last group
    lay[:, 5] = False   # an empty output block of X @ W
    lay[9, :] = False   # an empty one of dY @ W.T
    return lay


@pytest.fixture
def union_tile(request, monkeypatch):
    """("union" or "panel", b): the union kernel's tile (per present block or as dense
    panels) forced, and that kernel chosen."""
    kind, b, cfg = request.param
    table = tiles.WGMMA_DSD_UNION if kind == "union" else tiles.WGMMA_DSD_PANEL
    decisions = {"union": True, "panel": False} if kind == "union" else {"panel": True}
    # (the TMA kernel's panels, where set, would replace the union kernel's)
    for forced_b in forced_tile(monkeypatch, b, [(table, cfg), (tiles.WGMMA_DSD_PANEL_TMA, None)],
                                **decisions):
        yield kind, forced_b


def union_dsd_cases(fixture, tile_list, ids=lambda t: f"b{t[0]}-{t[1]}"):
    """The cases every union or panel dsd tile runs: both half types, the device's grid or
    three CTAs, 65 and 300 rows of X."""
    return tile_cases(fixture, tile_list, ids, dtype=["float16", "bfloat16"],
                      grid_limit=[None, 3], n=[65, 300])


@union_dsd_cases("union_tile", [("union", *t) for t in UNION_TILES]
                 + [("panel", *t) for t in PANEL_TILES], lambda t: f"{t[0]}-b{t[1]}-{t[2]}")
def test_union_dsd_tiles_match_scipy(backend, monkeypatch, force, union_tile, dtype,
        grid_limit, n):
    """The persistent union kernel, its members' MMAs per present block or as dense panels
    (absent blocks must multiply as zeros, over stages that held other blocks before):
    union lists longer than its shared-memory copy (256 entries), a last slice past the
    list's end, partial last groups in both products, an empty and a full output block,
    entries present for some members and absent for others, split lists (n = 65), a grid
    far smaller than the tiles; alpha and beta."""
    kind, b = union_tile
    force(grid_limit=grid_limit)
    rng = np.random.default_rng(n + b + 2)
    lay = union_layout(rng)
    if kind == "panel" and device.arch(0) == 90:  # elsewhere the rule's fallback runs
        w = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, backend=backend)
        x = to_backend(np.zeros((n, lay.shape[0] * b), np.float32), backend).astype(w.dtype)
        panel = dsd_configs.wgmma_config(dtype, b, panel=True)
        assert cs.matmul_plan(x, w).kernel == panel
        dy = to_backend(np.zeros((n, lay.shape[1] * b), np.float32), backend).astype(w.dtype)
        assert cs.matmul_plan(dy, w.T).kernel == panel
    check_dsd_products(backend, monkeypatch, lay, b, dtype, n, rng, {False: 5, True: 9})


# (b, (m64 tiles, consumer warpgroups, stages, CTAs per SM, slices in flight, tma, rows,
# cluster, blocks per tile)) of the TMA kernel's dense panels; wgmma's N is blocks x b
PANEL_TMA_TILES = [
    (8, (1, 2, 4, 1, 1, True, 0, 1, 32)),   # eight X boxes of 16-byte rows per slice
    (8, (1, 2, 3, 1, 1, True, 0, 2, 16)),   # ... in clusters of two
    (32, (1, 2, 4, 1, 1, True, 0, 1, 8)),   # N = 256: two entries per slice
    (32, (1, 1, 3, 1, 0, True, 0, 1, 4)),   # N = 128, one consumer warpgroup, none in flight
    (16, (1, 2, 4, 1, 1, True, 0, 1, 16)),  # four entries per slice
    (16, (1, 2, 3, 1, 1, True, 0, 1, 8)),
    (32, (1, 2, 4, 1, 1, True, 0, 2, 8)),   # clusters of two: each CTA copies half a panel
    (16, (1, 2, 4, 1, 1, True, 0, 2, 16)),
    # Y stored by TMA in boxes of 64 rows x 64 columns (partial last groups and row tiles
    # clipped by the map; beta != 0 and misaligned outputs through register stores)
    (8, (1, 2, 4, 1, 1, True, 0, 1, 32, 64)),
    (16, (1, 2, 4, 1, 1, True, 0, 2, 16, 64)),
    (32, (1, 1, 3, 1, 0, True, 0, 1, 4, 64)),   # one warpgroup, N = 128: two boxes a tile
]
# ... and over whole 64-column slices of X: one X box of 128-byte rows per slice, the
# slices past the union's entries multiplied as zeros, the last slice past X's end
PANEL_TMA_WHOLE = [
    (8, (1, 2, 4, 1, 1, True, 0, 1, 32)),
    (8, (1, 2, 3, 1, 1, True, 0, 2, 16)),
    (16, (1, 2, 4, 1, 1, True, 0, 1, 16)),
    (32, (1, 2, 4, 1, 1, True, 0, 1, 8)),
    (32, (1, 1, 3, 1, 0, True, 0, 2, 4)),
    (8, (1, 2, 4, 1, 1, True, 0, 1, 32, 64)),   # Y stored by TMA
    (32, (1, 2, 4, 1, 1, True, 0, 2, 8, 64)),
]


@pytest.fixture
def panel_tma_tile(request, monkeypatch):
    """(b, whole): the TMA kernel's panel tile forced, over whole slices of X or not."""
    b, cfg, whole = request.param
    for forced_b in forced_tile(monkeypatch, b, [(tiles.WGMMA_DSD_PANEL_TMA, cfg)],
                                panel=True, panel_whole=whole, dense=False):
        yield forced_b, whole


@union_dsd_cases("panel_tma_tile", [(*t, False) for t in PANEL_TMA_TILES]
                 + [(*t, True) for t in PANEL_TMA_WHOLE],
                 lambda t: f"b{t[0]}-{t[1]}" + ("-whole" if t[2] else ""))
def test_tma_panel_dsd_tiles_match_scipy(backend, monkeypatch, force, panel_tma_tile, dtype,
                                         grid_limit, n):
    """X @ W and dY @ W.T on the TMA kernel's dense panels, over the union lists' entries
    or whole slices of X: absent blocks landing as zeros over stages that held other
    blocks, union lists of up to 275 entries, a last slice past the list's (or X's) end,
    partial last groups (the output past them never written), an empty and a full output
    block, a partial last row tile (and, in clusters, a second CTA with no rows of X at
    n = 65), a grid of two or three CTAs walking many tiles; alpha and beta."""
    b, whole = panel_tma_tile
    force(grid_limit=grid_limit)
    rng = np.random.default_rng(n + b + 7)
    lay = union_layout(rng)
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, backend=backend)
    if device.arch(0) == 90:  # elsewhere the rule's fallback runs
        panel = dsd_configs.wgmma_config(dtype, b, panel=True, whole=whole)
        assert panel.kernel.startswith("dsd_wgmma_tma")
        assert panel.group > 1
        assert panel.whole == whole
        for rows_in, op in ((lay.shape[0], w), (lay.shape[1], w.T)):
            x = to_backend(np.zeros((n, rows_in * b), np.float32), backend).astype(w.dtype)
            assert cs.matmul_plan(x, op).kernel == panel
    check_dsd_products(backend, monkeypatch, lay, b, dtype, n, rng, {False: 5, True: 9})


@pytest.mark.parametrize(("b", "cluster", "band"), [(16, 1, 3), (32, 2, 2), (8, 1, 4)])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_tma_panel_dsd_tiles_in_bands(backend, monkeypatch, force, b, cluster, band, dtype):
    """The TMA kernel's panels with their tiles in bands of 2-4 row tiles: 1,300 rows of X
    (11 row tiles; 6 of clusters of two), so the last band is partial, walked by a grid of
    five CTAs (four in clusters); then a layout with no block (the panels' stand-in), whose
    products are zeros."""
    tile = tiles.WGMMA_DSD_PANEL_TMA[b]._replace(cluster=cluster)
    monkeypatch.setitem(tiles.WGMMA_DSD_PANEL_TMA, b, tile)
    configs.set_tiles()
    force(panel=True, band=band, grid_limit=5, dense=False)
    rng = np.random.default_rng(b + cluster)
    lay = rng.random((40, 37)) < 0.3
    n = 1300
    if device.arch(0) == 90:  # elsewhere the rule's fallback runs
        w = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, backend=backend)
        x = to_backend(np.zeros((n, 40 * b), np.float32), backend).astype(w.dtype)
        plan = cs.matmul_plan(x, w)
        assert plan.kernel.panel
        assert plan.kernel.cluster == cluster
        assert plan.band == band
    check_dsd_products(backend, monkeypatch, lay, b, dtype, n, rng, {False: None, True: None})
    w = cs.BlockSparseMatrix.from_layout(np.zeros((9, 7), bool), b, dtype=dtype,
                                         backend=backend)
    for rows_in, op in ((9, w), (7, w.T)):
        x = to_backend(rng.standard_normal((n, rows_in * b)).astype(np.float32),
                       backend).astype(w.dtype)
        out = poison((n, op.shape[1]), dtype, backend)
        assert (to_numpy(cs.matmul(x, op, out=out).astype("float64")) == 0).all()
    configs.set_tiles()


# (b, (rows per CTA, rows per thread, columns per thread, k depth, stages)) of the CUDA-core
# dsd (IEEE float32, float64), forced as the tile for every N
SIMT_TILES = [
    (8, (32, 2, 4, 32, 4)),     # one warp; a k slice spans four blocks
    (8, (128, 4, 4, 16, 3)),
    (16, (32, 4, 4, 16, 3)),
    (32, (64, 4, 8, 32, 2)),    # B[k][n]: two runs of four columns per thread
    (64, (128, 8, 8, 16, 3)),
    (128, (32, 4, 8, 32, 4)),   # the widest copy rows: 32 segments per row of B[k][n]
]


@pytest.fixture
def simt_tile(request, monkeypatch):
    b, cfg = request.param
    yield from forced_tile(monkeypatch, b, [(tiles.DSD_SIMT, cfg), (tiles.DSD_SIMT_SMALL, cfg)])


@pytest.mark.parametrize("simt_tile", SIMT_TILES, indirect=True, ids=lambda t: f"b{t[0]}-{t[1]}")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [1, 45, 300])  # one row; a partial tile; several (lists split)
def test_simt_dsd_tiles_match_scipy(backend, monkeypatch, simt_tile, dtype, n):
    """X @ W and dY @ W.T on the CUDA-core kernel with each tile: a full block row and
    column (lists longer than the kernel's shared-memory copy at b = 8), an empty output
    block of each product, partial row tiles; alpha and beta."""
    b = simt_tile
    rng = np.random.default_rng(n + 3 * b)
    rows = 530 if b == 8 else 40  # 530 entries: past LIST_CAP (512)
    lay = rng.random((rows, 23)) < 0.25
    lay[:, 4] = True    # a full block column: the longest list of X @ W
    lay[:, 9] = False   # an empty output block of X @ W
    lay[11, :] = False  # an empty output block of dY @ W.T
    lay[6, :] = True
    lay[6, 9] = False
    check_dsd_products(backend, monkeypatch, lay, b, dtype, n, rng, {False: 9, True: 11})


# (b, (blocks per CTA, rows per thread, columns per thread, k depth, stages)) of the
# CUDA-core sdd, for both float32 and float64
SDD_SIMT_TILES = [
    (8, (16, 4, 8, 16, 3)),
    (8, (4, 8, 4, 16, 2)),      # one thread row (TY = 1), 8 threads; partial last groups
    (16, (8, 4, 4, 16, 3)),
    (32, (2, 4, 4, 16, 4)),
    (64, (2, 8, 8, 16, 3)),
]


@pytest.fixture
def sdd_simt_tile(request, monkeypatch):
    b, cfg = request.param
    # SDD_TILE_SIMT None: the group kernel even where the tiled one would pay
    yield from forced_tile(monkeypatch, b, [(tiles.SDD_SIMT, cfg), (tiles.SDD_SIMT_F64, cfg),
                                            (tiles.SDD_TILE_SIMT, None)])


@pytest.mark.parametrize("sdd_simt_tile", SDD_SIMT_TILES, indirect=True,
                         ids=lambda t: f"b{t[0]}-{t[1]}")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [1, 37, 300])  # inner dimension: one slice, ragged, several
def test_simt_sdd_tiles_match_scipy(backend, sdd_simt_tile, dtype, n):
    """The CUDA-core weight gradient with each tile: partial groups, a full block row and
    column, an empty block row; alpha and beta; x.T and dy read in place, then a row-major
    a and a column-major b (the other operand layouts)."""
    b = sdd_simt_tile
    rng = np.random.default_rng(n * b + 5)
    lay = rng.random((11, 19)) < 0.3
    lay[2, :] = True
    lay[:, 17] = True
    lay[5, :] = False
    check_sampled_matmul(backend, lay, b, dtype, n, rng)
    if n != 37:
        return
    # the other operand layouts: a row-major, b column-major (40 rows: whole 16-byte copies)
    cupy = pytest.importorskip("cupy")
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, seed=4, backend=backend)
    x = to_backend(rng.standard_normal((40, 11 * b)), backend).astype(dtype)
    dy = to_backend(rng.standard_normal((40, 19 * b)), backend).astype(dtype)
    got = cs.sampled_matmul(cupy.ascontiguousarray(x.T), cupy.asfortranarray(dy), like=w)
    ref = (to_numpy(x).astype(np.float64).T @ to_numpy(dy).astype(np.float64)) * np.kron(
        lay, np.ones((b, b)))
    dense = to_numpy(got.toarray()).astype(np.float64)
    assert np.linalg.norm(dense - ref) / np.linalg.norm(ref) < cs._dtypes.TOLERANCE[dtype]


@pytest.mark.parametrize(("dtype", "tf32"), [("float16", False), ("float32", True),
                                        ("float32", False), ("float64", False)])
@pytest.mark.parametrize("b", [8, 64, 128])
@pytest.mark.parametrize("split", [0, 2])
def test_short_tiles_at_many_rows_match_scipy(backend, dtype, tf32, b, split):
    # The short mma.sync / CUDA-core dsd tiles taken past SMALL_ROWS rows
    # (dsd_rules.short_pays), forced at 1000 rows: many row tiles, the last one partial.
    if dtype == "float16" and b >= 16 and device.arch(device.current()) == 90:
        pytest.skip("Hopper runs these rows on its wgmma kernels, which have no short tile")
    lay = cs.layouts.random(5, 3, 0.6, seed=b)
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, seed=3, backend=backend)
    rng = np.random.default_rng(b + 1)
    n = 1000
    x = to_backend(rng.standard_normal((n, 5 * b)).astype(np.float32), backend).astype(w.dtype)
    dy = to_backend(rng.standard_normal((n, 3 * b)).astype(np.float32), backend).astype(w.dtype)
    wd = to_numpy(w.toarray().astype("float64"))
    tol = 3e-3 if tf32 else cs._dtypes.TOLERANCE[dtype]
    with plans.override(short=True, group=False, union=False, tall=False, dense=False,
                        split=split):
        for a, op, ref, cols in ((x, w, to_numpy(x.astype("float64")) @ wd, 3 * b),
                                 (dy, w.T, to_numpy(dy.astype("float64")) @ wd.T, 5 * b)):
            plan = cs.matmul_plan(a, op, tf32=tf32)
            short = dsd_configs.dsd_config(dtype, b, op is not w, tf32, small=True)
            assert plan.kernel == short, str(plan)
            got = to_numpy(cs.matmul(a, op, out=poison((n, cols), w.dtype, backend),
                                     tf32=tf32).astype("float64"))
            assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < tol


@pytest.mark.parametrize("b", [32, 64, 128])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("n", [1, 17, 32, 33, 64])
@pytest.mark.parametrize("grid_limit", [None, 3])
def test_small_n_stream_k_runs_match_scipy(backend, monkeypatch, force, b, dtype, n,
                                           grid_limit):
    """The small-N TMA tile in runs of equal entries (stream-K): X's 1-64 rows in tiles of
    32 or 64 rows as wgmma's N (b = 64, 128) or 64 as M (b = 32; rows past X read as
    zeros, never stored), a list of eight blocks cut across
    the runs of three CTAs, empty output blocks (zeros), or the grid of the rule (runs of
    at least STREAMK_MIN_RUN entries); alpha and beta on top, which needs the partials'
    counters back at zero after each call."""
    force(streamk=True, grid_limit=grid_limit, dense=False)
    rng = np.random.default_rng(n + b)
    lay = rng.random((9, 7)) < 0.4
    lay[:, 4] = True  # X @ W: a list of eight blocks
    lay[:, 2] = False  # X @ W: an empty output block
    lay[6, :] = False  # dY @ W.T: an empty output block
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, backend=backend)
    for rows_in, op in ((9, w), (7, w.T)):
        x = to_backend(rng.standard_normal((n, rows_in * b)).astype(np.float32),
                       backend).astype(w.dtype)
        plan = cs.matmul_plan(x, op)
        assert plan.runs, str(plan)
        assert plan.kernel.rows_per_cta == (32 if n <= 32 and b > 32 else 64)
        if grid_limit:
            assert plan.grid == (grid_limit,)
            assert plan.slots > 0
    check_dsd_products(backend, monkeypatch, lay, b, dtype, n, rng, {False: 2, True: 6})


@pytest.mark.parametrize("b", [64, 128])
@pytest.mark.parametrize("n", [8, 64])
def test_small_n_stream_k_runs_are_deterministic(backend, force, b, n):
    """The stream-K runs on a Barabási-Albert layout (hub lists cut across many CTAs) over
    the whole grid: the same bits call after call, on two streams, and in a CUDA graph
    replayed after eager calls, each against float64 NumPy."""
    import cupy

    force(streamk=True, dense=False)
    lay = cs.layouts.barabasi_albert(3072 // b, 2, seed=4)
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype="float16", seed=3, backend=backend)
    wd = to_numpy(w.toarray().astype("float64"))
    x = to_backend(np.random.default_rng(b).standard_normal((n, w.shape[0])).astype(
        np.float32), backend).astype(w.dtype)
    plan = cs.matmul_plan(x, w)
    assert plan.runs, str(plan)
    assert plan.slots > 0
    ref = to_numpy(x.astype("float64")) @ wd
    first = to_numpy(cs.matmul(x, w))
    assert np.linalg.norm(first - ref) / np.linalg.norm(ref) < cs._dtypes.TOLERANCE["float16"]
    side = cupy.cuda.Stream(non_blocking=True)
    for stream in (cupy.cuda.Stream.null, side, cupy.cuda.Stream.null):
        with stream:
            for _ in range(3):
                out = poison((n, w.shape[1]), "float16", backend)
                assert np.array_equal(to_numpy(cs.matmul(x, w, out=out)), first)
    out = poison((n, w.shape[1]), "float16", backend)
    with side:
        side.begin_capture()
        cs.matmul(x, w, out=out)
        graph = side.end_capture()
        for _ in range(2):
            cs.matmul(x, w)
            out[...] = 0
            graph.launch(side)
        side.synchronize()
    assert np.array_equal(to_numpy(out), first)


@pytest.mark.parametrize(("b", "n", "cols"), [(32, 32, 6144), (64, 32, 6144), (64, 32, 2048),
                                             (64, 128, 6144), (128, 32, 6144)])
def test_short_sdd_grid_counts_the_ctas_an_sm_holds(backend, force, b, n, cols):
    """The small-N weight gradient's persistent grid: the plan counts CTAs per SM from
    shared memory; the runner cuts it to what the driver says an SM holds (registers too)
    where sdd_rules.short_grid_per_sm says so (a partial last wave, enough groups a CTA;
    at 2048 columns b = 64 has too few). The product still matches float64."""
    if device.arch(0) != 90:
        pytest.skip("the short wgmma tile is Hopper's")
    force(sdd_short=True, sdd_stream=False, sdd_panel=False, dense=False)
    from cubsparse._cuda.compile import get_kernel

    lay = cs.layouts.random(cols // b, cols // b, 0.5, seed=b)
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype="float16", seed=1, backend=backend)
    rng = np.random.default_rng(n)
    x, dy = (to_backend(rng.standard_normal((n, w.shape[i])).astype(np.float32),
                        backend).astype("float16") for i in (0, 1))
    sms = device.sm_count(device.current())
    pure = plans.plan_sdd(w._structure, "float16", b, n, True, False, False, 90, sms, None)
    plan = cs.sampled_matmul_plan(x.T, dy, like=w)
    cfg = plan.kernel
    assert cfg.kernel == "sdd_wgmma", str(plan)
    assert cfg.name == pure.kernel.name
    held = device.resident_ctas(get_kernel(pure.kernel), cfg.threads, cfg.smem)
    assert held > 0
    groups = sdd_worklists.sdd_work_host(w._structure, cfg.group, 1, False).shape[0]
    want = sdd_rules.short_grid_per_sm(pure.kernel.persistent, held, groups, sms)
    assert cfg.persistent == want, str(plan)
    if b in (32, 64) and n == 32 and cols == 6144:  # registers hold fewer CTAs (H200, nvcc 13)
        assert want < pure.kernel.persistent, str(plan)
    if b == 128:  # its one-warpgroup tile: 168 registers hold the 3 CTAs shared memory allows,
        # the most registers that do (a compiler that gives it more costs a CTA an SM)
        assert held >= pure.kernel.persistent, f"{held} held, {pure.kernel.persistent} planned"
    assert plan.grid == min(groups, want * sms), str(plan)
    assert f"({want}/SM, persistent)" in str(plan)
    ref = (to_numpy(x).astype(np.float64).T @ to_numpy(dy).astype(np.float64)) * np.kron(
        lay, np.ones((b, b)))
    out = to_numpy(cs.sampled_matmul(x.T, dy, like=w).toarray()).astype(np.float64)
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < cs._dtypes.TOLERANCE["float16"]
