"""Small, representative GPU cases for compute-sanitizer (run by tests/sanitize.sh).

Every kernel family, dtype, block size and operand-layout variant runs once on a shape
with ragged rows (N not a multiple of the tile), an empty block row and column, and a
poisoned output; each result is checked against float64 NumPy so a run that "passes"
the sanitizer with wrong numbers still fails. Exits non-zero on any mismatch.
"""

from __future__ import annotations

import sys

import cupy as cp
import numpy as np

import cubsparse as cs
from cubsparse import _dtypes
from cubsparse._cuda import configs, dsd_configs, plans, sdd_configs, tiles


def _f64(a):
    return cp.asnumpy(a.astype(cp.float64) if a.dtype != cp.float64 else a)


def run() -> int:
    with plans.override(dense=False):  # the sparse kernels, whatever the cost model says
        return _run() | _chained()


def _chained() -> int:
    """Calls that read the last call's output with no synchronization between them, each
    repeated so that the compiled call path makes it (on Hopper with programmatic
    dependent launch). The sanitizer serializes kernels, so this checks the compiled
    path's accesses and values, not the ordering (tests/test_kernels.py checks the wait)."""
    rng = np.random.default_rng(8)
    bad = 0
    for dtype, b, n, c in [("float16", 32, 40, 512), ("float16", 16, 32, 1024),
                           ("float32", 16, 24, 256)]:
        W = cs.BlockSparseMatrix.from_layout(rng.random((c // b, c // b)) < 0.4, b,
                                             dtype=dtype, seed=2, backend="cuda")
        W.data[...] *= 0.5  # the chain's values stay level (float16 overflows otherwise)
        Wd = _f64(W.toarray())
        x = cp.asarray(rng.standard_normal((n, c))).astype(dtype)
        for _ in range(2):  # the first call plans, the second makes the compiled entry
            x @ W, x @ W.T, cs.sampled_matmul(x.T, x, like=W)
        h, ref = x, _f64(x)
        for i in range(6):
            h = h @ (W.T if i % 2 else W)
            ref = ref @ (Wd.T if i % 2 else Wd)
        g = cs.sampled_matmul(h.T, h, like=W).toarray()
        gref = (ref.T @ ref) * np.kron(W.layout, np.ones((b, b)))
        for name, out, r in [("chain", h, ref), ("chain sdd", g, gref)]:
            err = np.linalg.norm(_f64(out) - r) / max(np.linalg.norm(r), 1e-30)
            if not err < 10 * _dtypes.TOLERANCE[dtype]:
                bad += 1
                print(f"MISMATCH {dtype} b={b} {name}: rel err {err:.2e}")
    cp.cuda.Device().synchronize()
    print(f"chained calls done, {bad} mismatches")
    return 1 if bad else 0


def _run() -> int:
    rng = np.random.default_rng(7)
    bad = 0
    for dtype in [d.name for d in _dtypes.SUPPORTED_DTYPES]:
        tol = _dtypes.TOLERANCE[dtype]
        for b in _dtypes.BLOCK_SIZES:
            cb, kb, n = 3, 4, 37
            lay = rng.random((cb, kb)) < 0.6
            lay[1] = False
            lay[:, 2] = False
            lay[0, 0] = True
            W = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, seed=1, backend="cuda")
            Wd = _f64(W.toarray())
            x = cp.asarray(rng.standard_normal((n, cb * b))).astype(dtype)
            dy = cp.asarray(rng.standard_normal((n, kb * b))).astype(dtype)
            xh, dyh = _f64(x), _f64(dy)
            mask = np.kron(lay, np.ones((b, b)))
            results = {}
            y = cp.full((n, kb * b), cp.nan, dtype=dtype)
            results["x@W"] = (cs.matmul(x, W, out=y), xh @ Wd)
            results["dy@W.T"] = (cs.matmul(dy, W.T), dyh @ Wd.T)
            results["W@d"] = (W @ dy[:8].T, Wd @ dyh[:8].T)
            results["sdd x.T,dy"] = (cs.sampled_matmul(x.T, dy, like=W).toarray(),
                                     (xh.T @ dyh) * mask)
            x8, dy8 = x[:32], dy[:32]  # inner dim a multiple of 8: the row-major-a variants
            ref8 = (xh[:32].T @ dyh[:32]) * mask
            results["sdd a row-major"] = (
                cs.sampled_matmul(cp.ascontiguousarray(x8.T), dy8, like=W).toarray(), ref8)
            results["sdd b col-major"] = (
                cs.sampled_matmul(x8.T, cp.asfortranarray(dy8), like=W).toarray(), ref8)
            # the short-reduction sdd (b = 8, 16, 32 in 16 bits): 37 rows padded to 64, one CTA
            # a chunk (each warp several block rows), and 32 rows
            if sdd_configs.sdd_stream_config(dtype, b, 37) is not None:
                with plans.override(sdd_stream=True, sdd_stream_grid=1):
                    results["sdd stream 37, one CTA a chunk"] = (
                        cs.sampled_matmul(x.T, dy, like=W).toarray(), (xh.T @ dyh) * mask)
                    results["sdd stream 32"] = (cs.sampled_matmul(x8.T, dy8, like=W).toarray(),
                                                ref8)
            # one CTA walking every group: the short-reduction grid's pipeline across groups
            # (32 rows: one 32-deep slice each; 37: one 64-deep slice)
            with plans.override(sdd_short=True, grid_limit=1):
                results["sdd short, one CTA"] = (
                    cs.sampled_matmul(x8.T, dy8, like=W).toarray(), ref8)
                results["sdd short 37, one CTA"] = (
                    cs.sampled_matmul(x.T, dy, like=W).toarray(), (xh.T @ dyh) * mask)
            # the persistent TMA sdd (where it has a tile: b = 128, half types), one CTA
            # walking every group
            if sdd_configs.sdd_wgmma_config(dtype, b, tma=True) is not None:
                with plans.override(sdd_tma=True, sdd_short=False, grid_limit=1):
                    results["sdd tma, one CTA"] = (
                        cs.sampled_matmul(x.T, dy, like=W).toarray(), (xh.T @ dyh) * mask)
                # two or three CTAs, the groups of a partial last round in pieces (200 rows:
                # four slices, three pieces)
                xt, dt = (cp.asarray(rng.standard_normal((200, c * b))).astype(dtype)
                          for c in (cb, kb))
                for ctas in (2, 3):
                    with plans.override(sdd_tma=True, sdd_short=False, grid_limit=ctas,
                                        sdd_tail_splits=3):
                        results[f"sdd tma, {ctas} CTAs, last round in pieces"] = (
                            cs.sampled_matmul(xt.T, dt, like=W).toarray(),
                            (_f64(xt).T @ _f64(dt)) * mask)
            # the paired TMA sdd (b = 64, half types): two block rows per group, one CTA
            # walking every group and a CTA per group
            if sdd_configs.sdd_wgmma_config(dtype, b, pair=True) is not None:
                for ctas in (1, None):
                    with plans.override(sdd_pair=True, sdd_short=False, grid_limit=ctas):
                        results[f"sdd pair, grid_limit={ctas}"] = (
                            cs.sampled_matmul(x.T, dy, like=W).toarray(), (xh.T @ dyh) * mask)
                xt, dt = (cp.asarray(rng.standard_normal((200, c * b))).astype(dtype)
                          for c in (cb, kb))
                for ctas in (2, 3):  # the last round's groups in pieces (four slices, two)
                    with plans.override(sdd_pair=True, sdd_short=False, grid_limit=ctas,
                                        sdd_tail_splits=2):
                        results[f"sdd pair, {ctas} CTAs, last round in pieces"] = (
                            cs.sampled_matmul(xt.T, dt, like=W).toarray(),
                            (_f64(xt).T @ _f64(dt)) * mask)
            if dtype != "float64":  # split lists: float32 partials, added by the last CTA
                with plans.override(split=1):
                    results["x@W split"] = (cs.matmul(x, W), xh @ Wd)
                    results["dy@W.T split"] = (cs.matmul(dy, W.T), dyh @ Wd.T)
            # more rows than the small-N tiles take: the large-tile kernels (wgmma on Hopper
            # for half types at b >= 16; the CUDA-core kernel's large tiles)
            xl = cp.asarray(rng.standard_normal((n + 100, cb * b))).astype(dtype)
            dyl = cp.asarray(rng.standard_normal((n + 100, kb * b))).astype(dtype)
            xlh, dylh = _f64(xl), _f64(dyl)
            results["x@W large"] = (cs.matmul(xl, W), xlh @ Wd)
            results["dy@W.T large"] = (cs.matmul(dyl, W.T), dylh @ Wd.T)
            # a narrow W at 137 rows takes the short tiles (dsd_rules.short_pays); the regular
            # ones too, and both with split lists
            with plans.override(short=False):
                results["x@W large regular"] = (cs.matmul(xl, W), xlh @ Wd)
                results["dy@W.T large regular"] = (cs.matmul(dyl, W.T), dylh @ Wd.T)
            if dtype != "float64":
                for short in (False, True):
                    with plans.override(short=short, split=1):
                        results[f"x@W large split short={short}"] = (cs.matmul(xl, W),
                                                                     xlh @ Wd)
            if dtype in ("float16", "bfloat16"):
                with plans.override(split=1):
                    results["x@W large split"] = (cs.matmul(xl, W), xlh @ Wd)
                # the small-block kernels (b = 8) whatever the layout: grouped dsd, tiled sdd
                with plans.override(group=True, sdd_tiled=True):
                    results["x@W large grouped"] = (cs.matmul(xl, W), xlh @ Wd)
                    results["dy@W.T large grouped"] = (cs.matmul(dyl, W.T), dylh @ Wd.T)
                    results["sdd tiled"] = (cs.sampled_matmul(x.T, dy, like=W).toarray(),
                                            (xh.T @ dyh) * mask)
                # the persistent warp-specialized dsd (Hopper, b >= 32) whatever the
                # defaults, its grid capped at two CTAs so each walks several tiles
                # (cp.async producer), and its TMA forms: X's rows as wgmma's M or N
                if b >= 32:
                    saved, saved_tall = dict(tiles.WGMMA_DSD_WS), dict(tiles.WGMMA_DSD_TALL)
                    forms = {"persistent": (1, 2, 4, 1), "tma": (2, 1, 3, 2, 0, True)}
                    if b >= 64:
                        forms["rows-n"] = (1, b // 64, 3, 1, 1, True, 256)
                        # clusters of two CTAs multicasting W's blocks
                        forms["cluster"] = (1, b // 64, 3, 1, 1, True, 256, 2)
                        # the epilogue stored by TMA in rounds of 64 rows (the staging
                        # buffer reused four times a tile), alone and in clusters
                        forms["tma store"] = (1, b // 64, 3, 1, 1, True, 256, 1, 1, 64)
                        forms["cluster tma store"] = (1, b // 64, 3, 1, 1, True, 256, 2, 1, 64)
                    else:  # b = 32's tall tile: 512 rows, X in two TMA boxes
                        forms["tall"] = (4, 2, 3, 1, 0, True)
                    try:
                        for label, tile in forms.items():
                            configs.set_tiles(wgmma_ws={b: tile}, wgmma_tall={b: None})
                            with plans.override(grid_limit=2):
                                results[f"x@W {label}"] = (cs.matmul(xl, W), xlh @ Wd)
                                results[f"dy@W.T {label}"] = (cs.matmul(dyl, W.T), dylh @ Wd.T)
                    finally:
                        configs.set_tiles(wgmma_ws=saved, wgmma_tall=saved_tall)
                # the clustered tall tile with split lists (a cluster's second CTA past X)
                if dsd_configs.wgmma_config(dtype, b, cluster=True) is not None:
                    with plans.override(tall=True, cluster=True, dsd_pair=False, split=1,
                                        grid_limit=2):
                        results["x@W cluster split"] = (cs.matmul(xl, W), xlh @ Wd)
                        results["dy@W.T cluster split"] = (cs.matmul(dyl, W.T), dylh @ Wd.T)
                # the two-block TMA tile (b = 64), two CTAs walking the tiles
                if tiles.WGMMA_DSD_PAIR.get(b) is not None:
                    saved_pair = dict(tiles.WGMMA_DSD_PAIR)
                    try:  # with register stores, and by TMA in rounds of 64 rows
                        for epi in (0, 64):
                            configs.set_tiles(wgmma_pair={b: saved_pair[b]._replace(epilogue=epi)})
                            with plans.override(tall=True, dsd_pair=True, grid_limit=2):
                                results[f"x@W pair {epi}"] = (cs.matmul(xl, W), xlh @ Wd)
                                results[f"dy@W.T pair {epi}"] = (cs.matmul(dyl, W.T),
                                                                 dylh @ Wd.T)
                    finally:
                        configs.set_tiles(wgmma_pair=saved_pair)
                # the dense panels (Hopper, b <= 32) whatever the layout, two CTAs: the TMA
                # kernel's over the union's entries and over whole slices of X (tiles in
                # bands of two row tiles; and in clusters of two CTAs), then the union
                # kernel's, split lists too
                if tiles.WGMMA_DSD_PANEL.get(b) is not None:
                    tma = dict(tiles.WGMMA_DSD_PANEL_TMA)
                    forms = [("tma", {}, 2, False), ("tma whole", {}, 2, True),
                             ("union", {b: None}, None, None)]
                    if tma.get(b) is not None:
                        forms += [(f"tma cluster{' whole' * whole}",
                                   {b: tma[b]._replace(cluster=2)}, 1, whole)
                                  for whole in (False, True)]
                        # (the table's stores Y by TMA; this one from registers)
                        forms.append(("tma registers", {b: tma[b]._replace(epilogue=0)}, 2,
                                      False))
                    try:
                        for label, entry, band, whole in forms:
                            configs.set_tiles(wgmma_panel_tma=entry)
                            for split in (None, 1) if label == "union" else (None,):
                                with plans.override(grid_limit=2, panel=True, split=split,
                                                    band=band, panel_whole=whole):
                                    results[f"x@W panel {label} split={split}"] = (
                                        cs.matmul(xl, W), xlh @ Wd)
                                    results[f"dy@W.T panel {label} split={split}"] = (
                                        cs.matmul(dyl, W.T), dylh @ Wd.T)
                            configs.set_tiles(wgmma_panel_tma=tma)
                    finally:
                        configs.set_tiles(wgmma_panel_tma=tma)
                # the weight gradient in two parts (b = 16, 32; W's blocks fill some tiles
                # of a band and few elsewhere): two CTAs walking the panels, then the other
                # blocks' groups
                if b in (16, 32) and sdd_configs.sdd_wgmma_config(dtype, b, panel=True):
                    nbk = 2 * 128 // b + 3
                    band = np.abs(np.subtract.outer(np.arange(nbk), np.arange(nbk))) <= 128 // b
                    lay2 = band | (rng.random((nbk, nbk)) < 0.05)
                    W2 = cs.BlockSparseMatrix.from_layout(lay2, b, dtype=dtype, seed=5,
                                                          backend="cuda")
                    x2 = cp.asarray(rng.standard_normal((n, nbk * b))).astype(dtype)
                    d2 = cp.asarray(rng.standard_normal((n, nbk * b))).astype(dtype)
                    for splits in (1, 3):  # the second part's reduction whole, or split
                        with plans.override(sdd_hybrid=True, sdd_short=False, grid_limit=2,
                                            sdd_rest_splits=splits):
                            results[f"sdd two parts, {splits} split(s)"] = (
                                cs.sampled_matmul(x2.T, d2, like=W2).toarray(),
                                (_f64(x2).T @ _f64(d2)) * np.kron(lay2, np.ones((b, b))))
                # the TMA sdd's dense panels (b <= 32), two CTAs walking the tiles
                if sdd_configs.sdd_wgmma_config(dtype, b, panel=True) is not None:
                    with plans.override(sdd_panel=True, sdd_short=False, grid_limit=2):
                        results["sdd panel"] = (cs.sampled_matmul(x.T, dy, like=W).toarray(),
                                                (xh.T @ dyh) * mask)
                # the union dsd (Hopper, b = 16-64) whatever the layout, two CTAs
                if 16 <= b <= 64:
                    saved = dict(tiles.WGMMA_DSD_UNION)
                    configs.set_tiles(wgmma_union={b: (4, 1, 2, 3, 1)})
                    try:
                        with plans.override(grid_limit=2, union=True):
                            results["x@W union"] = (cs.matmul(xl, W), xlh @ Wd)
                            results["dy@W.T union"] = (cs.matmul(dyl, W.T), dylh @ Wd.T)
                    finally:
                        tiles.WGMMA_DSD_UNION.clear()
                        configs.set_tiles(wgmma_union=saved)
            if dtype == "float32" and tiles.SDD_TILE_SIMT.get(b) is not None:
                with plans.override(sdd_tiled=True):  # the CUDA-core tiled sdd
                    results["sdd tiled"] = (cs.sampled_matmul(x.T, dy, like=W).toarray(),
                                            (xh.T @ dyh) * mask)
            if dtype not in ("float16", "bfloat16") and b >= 16:
                # CUDA-core dsd: two runs of columns per thread (b = 8: one column)
                saved = dict(tiles.DSD_SIMT)
                configs.set_tiles(simt={b: (64, 4, 8, 32, 2)})
                try:
                    results["x@W two runs"] = (cs.matmul(xl, W), xlh @ Wd)
                    results["dy@W.T two runs"] = (cs.matmul(dyl, W.T), dylh @ Wd.T)
                finally:
                    configs.set_tiles(simt=saved)
            with plans.override(dense=True):  # the dense path: block scatter/gather, cuBLAS
                results["x@W dense"] = (cs.matmul(xl, W), xlh @ Wd)
                results["dy@W.T dense"] = (cs.matmul(dyl, W.T), dylh @ Wd.T)
                results["sdd dense"] = (cs.sampled_matmul(x.T, dy, like=W).toarray(),
                                        (xh.T @ dyh) * mask)
            if b in (8, 16, 32) and dtype in ("float16", "bfloat16"):
                # the small-N dsd with X in shared memory: one partial chunk of X's block
                # columns, warps past the last output block of the group
                with plans.override(stream=True, dense=False):
                    results["x@W stream"] = (cs.matmul(x[:17], W), xh[:17] @ Wd)
                    results["dy@W.T stream"] = (cs.matmul(dy[:5], W.T), dyh[:5] @ Wd.T)
                # a wider W: chunks with more blocks than a stage holds, runs of one and two
                # chunks per CTA (partial products, added by the group's CTAs in the launch;
                # at two, also by a second launch), a chunk without blocks
                lay = rng.random((150, 100)) < 0.35
                lay[64:128] = False
                Ww = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, seed=5, backend="cuda")
                Wwd = _f64(Ww.toarray())
                xw = cp.asarray(rng.standard_normal((17, 150 * b))).astype(dtype)
                dyw = cp.asarray(rng.standard_normal((17, 100 * b))).astype(dtype)
                for run, share in ((1, None), (2, None), (2, False)):
                    with plans.override(stream=True, dense=False, stream_run=run,
                                        stream_share=share):
                        tag = f"run={run}" + ("" if share is None else " second launch")
                        results[f"x@W stream {tag}"] = (cs.matmul(xw, Ww), _f64(xw) @ Wwd)
                        results[f"dy@W.T stream {tag}"] = (cs.matmul(dyw, Ww.T),
                                                            _f64(dyw) @ Wwd.T)
                if b == 8:  # the 128-row tile at 100 rows: partial products, second launch
                    xt = cp.asarray(rng.standard_normal((100, 150 * b))).astype(dtype)
                    dyt = cp.asarray(rng.standard_normal((100, 100 * b))).astype(dtype)
                    for share in (None, True):  # a second launch; the group's CTAs
                        with plans.override(stream=True, dense=False, stream_run=2,
                                            stream_share=share):
                            tag = "100 rows" + (" in the launch" if share else "")
                            results[f"x@W stream {tag}"] = (cs.matmul(xt, Ww), _f64(xt) @ Wwd)
                            results[f"dy@W.T stream {tag}"] = (cs.matmul(dyt, Ww.T),
                                                                _f64(dyt) @ Wwd.T)
                # a sparse W at 40 rows: chunks of one stage each, every X buffer in use
                lay = rng.random((150, 100)) < 0.03
                Ws = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, seed=6, backend="cuda")
                Wsd = _f64(Ws.toarray())
                xs = cp.asarray(rng.standard_normal((40, 150 * b))).astype(dtype)
                dys = cp.asarray(rng.standard_normal((40, 100 * b))).astype(dtype)
                with plans.override(stream=True, dense=False, stream_run=8):
                    results["x@W stream sparse"] = (cs.matmul(xs, Ws), _f64(xs) @ Wsd)
                    results["dy@W.T stream sparse"] = (cs.matmul(dys, Ws.T), _f64(dys) @ Wsd.T)
            with plans.override(dense=True, fill=True):  # W written whole, zeros too
                results["x@W dense fill"] = (cs.matmul(xl, W), xlh @ Wd)
                results["dy@W.T dense fill"] = (cs.matmul(dyl, W.T), dylh @ Wd.T)
            for name, (out, ref) in results.items():
                err = np.linalg.norm(_f64(out) - ref) / max(np.linalg.norm(ref), 1e-30)
                if not err < tol:
                    bad += 1
                    print(f"MISMATCH {dtype} b={b} {name}: rel err {err:.2e}")
    cp.cuda.Device().synchronize()
    print(f"sanitizer cases done, {bad} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(run())
