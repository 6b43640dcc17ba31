"""The kernels of the whole-slice panels, the panels' TMA store, the two-part weight
gradient, the TMA weight gradient's last round in pieces and the TMA dsd's tiles taken
by deadline, the small-N tiles in stream-K runs and sdd_wgmma's weight-gradient tiles, on
small shapes, for compute-sanitizer runs of their own (racecheck over
every case of tests/gpu_sanitize_cases.py outlasts a device call). Exits 1 on a mismatch.
``python tools/racecheck_new.py order`` runs the deadline cases alone, ``runs`` the
stream-K runs alone, ``short`` sdd_wgmma's tiles alone."""
import sys

import cupy as cp
import numpy as np

import cubsparse as cs
from cubsparse._cuda import plans, sdd_configs, sdd_rules, sdd_worklists

rng = np.random.default_rng(3)
bad = 0
only = sys.argv[1] if len(sys.argv) > 1 else None
# the weight-gradient tiles of sdd_wgmma, whose epilogue trades its words through the
# stage of a group's last slice at b = 64 and at b = 128 but on the wide tile:
# the short tiles at one slice, a partial slice and several slices, one CTA walking every
# group, then two; the long tiles (and b = 128's wide one) at 256 rows; each tile also with
# alpha 2 (the epilogue's second form) and with beta 1 (its third)
if only in (None, "short"):
    rs = np.random.default_rng(11)  # its own draws: the sections below keep theirs
    off = {"sdd_stream": False, "sdd_tiled": False, "sdd_tma": False, "sdd_pair": False,
           "sdd_panel": False, "sdd_hybrid": False, "dense": False}
    for b in (128, 64, 32, 16):
        lay = rs.random((5, 6)) < 0.5
        lay[:, 3] = True
        W = cs.BlockSparseMatrix.from_layout(lay, b, dtype="float16", seed=7, backend="cuda")
        mask = np.kron(lay, np.ones((b, b)))
        cases = [(1, 1, "short", 1.0, 0.0), (32, 2, "short", 1.0, 0.0),
                 (77, 1, "short", 1.0, 0.0), (128, 2, "short", 1.0, 0.0),
                 (32, 2, "short", 2.0, 0.0), (77, 1, "short", 0.5, 1.0),
                 (256, None, "long", 2.0, 0.0), (256, None, "long", 1.0, 1.0)]
        if b == 128:
            cases += [(256, None, "wide", 1.0, 0.0), (256, None, "wide", 0.5, 1.0)]
        for n, limit, form, alpha, beta in cases:
            x = cp.asarray(rs.standard_normal((n, 5 * b))).astype("float16")
            dy = cp.asarray(rs.standard_normal((n, 6 * b))).astype("float16")
            short = form == "short"
            with plans.override(sdd_short=short, sdd_wide=form == "wide", grid_limit=limit,
                                **off):
                plan = cs.sampled_matmul_plan(x.T, dy, like=W)
                print(plan)
                want = sdd_configs.sdd_wgmma_config(
                    "float16", b, short, sdd_rules.SDD_ONE_SLICE_K if short and n <= 32
                    else None, wide=form == "wide")
                bad += plan.kernel.name != want.name
                out = W.copy()
                g = cs.sampled_matmul(x.T, dy, like=W, out=out, alpha=alpha, beta=beta)
                g = cp.asnumpy(g.toarray()).astype(np.float64)
            ref = alpha * (cp.asnumpy(x).astype(np.float64).T
                           @ cp.asnumpy(dy).astype(np.float64)) * mask
            ref += beta * cp.asnumpy(W.toarray()).astype(np.float64)
            err = np.linalg.norm(g - ref) / np.linalg.norm(ref)
            bad += not err < 1e-2
            grid = f"{limit} CTA(s)" if limit else "the plan's grid"
            print(b, f"{form} tile, {n} rows, {grid}, alpha {alpha}, beta {beta}", f"{err:.1e}")
if only == "short":
    cp.cuda.Device().synchronize()
    print("mismatches", bad)
    sys.exit(1 if bad else 0)
# the small-N TMA tiles in stream-K runs: a list of nine blocks cut across three CTAs'
# runs, an empty output block, 17 to 64 rows; then the rule's grid (runs of 4 entries)
if only in (None, "runs"):
    for b, n, limit in ((64, 17, 3), (128, 64, 3), (128, 17, None), (64, 64, None),
                        (32, 40, 3), (32, 64, None)):
        lay = rng.random((9, 7)) < 0.4
        lay[:, 4] = True
        lay[:, 2] = False
        W = cs.BlockSparseMatrix.from_layout(lay, b, dtype="float16", seed=5, backend="cuda")
        Wd = cp.asnumpy(W.toarray()).astype(np.float64)
        for op, rows_in, wd in ((W, 9, Wd), (W.T, 7, Wd.T)):
            x = cp.asarray(rng.standard_normal((n, rows_in * b))).astype("float16")
            ref = cp.asnumpy(x).astype(np.float64) @ wd
            with plans.override(streamk=True, grid_limit=limit, dense=False):
                plan = cs.matmul_plan(x, op)
                bad += not plan.runs
                got = cp.asnumpy(cs.matmul(x, op)).astype(np.float64)
            err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
            bad += not err < 1e-2
            print(b, n, plan.kernel.name, f"{plan.grid[0]} runs", f"{err:.1e}")
    if only == "runs":
        cp.cuda.Device().synchronize()
        print("mismatches", bad)
        sys.exit(1 if bad else 0)
# the TMA dsd's tall, clustered and two-block tiles taking their tiles by deadline: a hub
# list beside lists of one block, 700 rows (a partial last row tile), a few CTAs
for b, forced in ((128, {}), (64, {"cluster": True}), (64, {"dsd_pair": True})):
    lay = np.eye(9, 7, dtype=bool)
    lay[:, 3] = True
    W = cs.BlockSparseMatrix.from_layout(lay, b, dtype="float16", seed=5, backend="cuda")
    x = cp.asarray(rng.standard_normal((700, 9 * b))).astype("float16")
    ref = cp.asnumpy(x).astype(np.float64) @ cp.asnumpy(W.toarray()).astype(np.float64)
    with plans.override(**{"tall": True, "cluster": False, "dsd_pair": False,
                           "tile_order": True, "grid_limit": 4, "dense": False, **forced}):
        plan = cs.matmul_plan(x, W)
        bad += not plan.order
        got = cp.asnumpy(cs.matmul(x, W)).astype(np.float64)
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    bad += not err < 1e-2
    print(b, plan.kernel.name, "by deadline", f"{err:.1e}")
if only == "order":
    cp.cuda.Device().synchronize()
    print("mismatches", bad)
    sys.exit(1 if bad else 0)
for b in (8, 16, 32):
    nb = 2 * 128 // b + 3
    band = np.abs(np.subtract.outer(np.arange(nb), np.arange(nb))) <= 128 // b
    lay = band | (rng.random((nb, nb)) < 0.05)
    W = cs.BlockSparseMatrix.from_layout(lay, b, dtype="float16", seed=5, backend="cuda")
    Wd = cp.asnumpy(W.toarray()).astype(np.float64)
    x = cp.asarray(rng.standard_normal((300, nb * b))).astype("float16")
    xh = cp.asnumpy(x).astype(np.float64)
    cases = [("whole", {"panel": True, "panel_whole": True}),
             ("entries", {"panel": True, "panel_whole": False})]
    for name, forced in cases:
        with plans.override(grid_limit=2, band=2, dense=False, **forced):
            got = cp.asnumpy(cs.matmul(x, W)).astype(np.float64)
        err = np.linalg.norm(got - xh @ Wd) / np.linalg.norm(xh @ Wd)
        bad += not err < 1e-2
        print(b, name, f"{err:.1e}")
    for splits in (1, 3) if b in (16, 32) else ():
        with plans.override(sdd_hybrid=True, sdd_short=False, grid_limit=2, dense=False,
                            sdd_rest_splits=splits):
            g = cp.asnumpy(cs.sampled_matmul(x.T, x, like=W).toarray()).astype(np.float64)
        ref = (xh.T @ xh) * np.kron(lay, np.ones((b, b)))
        err = np.linalg.norm(g - ref) / np.linalg.norm(ref)
        bad += not err < 1e-2
        print(b, f"sdd two parts, {splits} split(s)", f"{err:.1e}")
# the TMA weight gradient with its last round's groups in pieces (b = 128 one-row groups,
# b = 64 paired rows): a few CTAs, at least two groups in the last round, three pieces each
for b, kind in ((128, "sdd_tma"), (64, "sdd_pair")):
    nb = 7
    lay = (rng.random((nb, nb)) < 0.5) | np.eye(nb, dtype=bool)
    W = cs.BlockSparseMatrix.from_layout(lay, b, dtype="float16", seed=5, backend="cuda")
    x = cp.asarray(rng.standard_normal((700, nb * b))).astype("float16")
    xh = cp.asnumpy(x).astype(np.float64)
    with plans.override(**{kind: True}, sdd_short=False, dense=False):
        k = cs.sampled_matmul_plan(x.T, x, like=W).kernel
    groups = sdd_worklists.sdd_work_host(W._structure, k.group, k.block_rows, k.panel).shape[0]
    ctas = next(c for c in range(2, groups) if groups % c >= 2)
    with plans.override(**{kind: True}, sdd_short=False, grid_limit=ctas, dense=False,
                        sdd_tail_splits=3):
        plan = cs.sampled_matmul_plan(x.T, x, like=W)
        print(plan)
        bad += plan.tail_splits != 3 or groups - plan.tail_whole < 2
        g = cp.asnumpy(cs.sampled_matmul(x.T, x, like=W).toarray()).astype(np.float64)
    ref = (xh.T @ xh) * np.kron(lay, np.ones((b, b)))
    err = np.linalg.norm(g - ref) / np.linalg.norm(ref)
    bad += not err < 1e-2
    print(b, f"{kind}, last round in pieces", f"{err:.1e}")
cp.cuda.Device().synchronize()
print("mismatches", bad)
sys.exit(1 if bad else 0)
