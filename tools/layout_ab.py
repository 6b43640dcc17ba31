"""Same-process A/B of dsd kernel choices across sparsity layouts at a large N, timed as
the bench's sweep times (back-to-back eager calls, CUDA events, median), with efficiency
against dense cuBLAS (``cupy.matmul`` on the densified W) in the same process:
dense ms x density / sparse ms. Every variant's result is checked against float32 dense
math before it is timed; the dense path stays off.

A variant is ``rule`` (the plan's own choice), ``nopanel`` (panels forbidden),
``panel:G.M.C.S.P[.R]`` (the union kernel's panels forced with that tile: members, m64
tiles, consumer warpgroups, stages, CTAs per SM and, optionally, producer warpgroups, 1 if
left out), ``union`` (the union kernel's panels with the table's tile) or
``tma:W.S.I.L.G`` (the TMA kernel's panels forced with that tile: consumer warpgroups,
stages, slices in flight, CTAs per cluster, blocks per panel; the table's b = 32 tile is
``tma:2.4.1.1.8``), ``sddtma:G.M.N.S`` (the one-row TMA weight gradient forced with that
tile: blocks per group, warpgroups along M and N, stages), or ``epi:E.S`` (the tall,
clustered and two-block tiles of b = 64 and 128 with their epilogue stored by TMA in
rounds of E rows, 0 for register stores, and S stages, 0 for the table's; E = 0 or 64 also
sets the TMA panels' epilogue, 64 storing by TMA), or ``tall:S.C.R.E`` (the tall and
clustered tiles with S stages, C CTAs per SM, R rows of X per tile and their epilogue in
rounds of E rows). A suffix ``@R`` forces bands of R row
tiles in the TMA kernels' tile order (``plans.override(band=R)``), e.g. ``rule@4``.
``+name`` / ``-name`` force a plan decision on or off, e.g. ``-sdd_panel`` with ``--ops
sdd``, and ``name=V`` sets an integer one, e.g. ``sdd_rest_splits=1``; ``&`` joins
variants, e.g. ``+panel&+panel_whole`` (the TMA kernel's panels over whole slices of X).

    PYTHONPATH=.:tools python3 tools/layout_ab.py --b 8,16,32 --d 0.05,0.25 \\
        --layouts random,ws,banded --variants nopanel,panel:16.2.2.4.1,rule
"""

from __future__ import annotations

import argparse
import itertools

import cupy as cp
import numpy as np
from gpu_probe import OPS, PLANS, bench, csv_list, verify

import cubsparse as cs
from bench.cases import Case, make_layout
from cubsparse._cuda import configs, plans, tiles


def _variant(name: str, b: int):
    """(plan decisions, tile-table entries to set) of a variant for block size ``b``."""
    if "&" in name:  # variants combined, e.g. +panel&-panel_whole
        decisions, entries = {}, {}
        for part in name.split("&"):
            d, e = _variant(part, b)
            decisions.update(d)
            entries.update(e)
        return decisions, entries
    if "@" in name:
        name, band = name.split("@")
        decisions, entries = _variant(name, b)
        return {**decisions, "band": int(band)}, entries
    if name == "rule":
        return {}, {}
    if name[:1] in "+-":
        return {name[1:]: name[0] == "+"}, {}
    if "=" in name:  # an integer decision, e.g. sdd_rest_splits=1
        key, value = name.split("=")
        return {key: int(value)}, {}
    if name == "nopanel":
        return {"panel": False}, {}
    if name == "union":
        return {"panel": True}, {"wgmma_panel_tma": {b: None}}
    if name.startswith("panel:"):
        tile = tuple(int(v) for v in name[6:].split("."))
        return {"panel": True}, {"wgmma_panel": {b: tile}, "wgmma_panel_tma": {b: None}}
    if name.startswith("epi:"):
        epi, st = (int(v) for v in name[4:].split("."))
        return {}, {key: {b: table[b]._replace(epilogue=epi, stages=st or table[b].stages)}
                    for key, table in (("wgmma_tall", tiles.WGMMA_DSD_TALL),
                                       ("wgmma_cluster", tiles.WGMMA_DSD_CLUSTER),
                                       ("wgmma_pair", tiles.WGMMA_DSD_PAIR),
                                       ("wgmma_panel_tma", tiles.WGMMA_DSD_PANEL_TMA))
                    if table.get(b) is not None and (
                        table[b].rows > 0 or (key == "wgmma_panel_tma" and epi in (0, 64)))}
    if name.startswith("tall:"):  # the tall and clustered tiles' shape (their cluster kept)
        st, ctas, rows, epi = (int(v) for v in name[5:].split("."))
        return {}, {key: {b: table[b]._replace(stages=st, ctas_per_sm=ctas, rows=rows,
                                               epilogue=epi)}
                    for key, table in (("wgmma_tall", tiles.WGMMA_DSD_TALL),
                                       ("wgmma_cluster", tiles.WGMMA_DSD_CLUSTER))
                    if table.get(b) is not None and table[b].rows > 0}
    if name.startswith("tma:"):
        wg, st, inflight, cluster, g = (int(v) for v in name[4:].split("."))
        tile = tiles.PersistentTile(1, wg, st, 1, inflight, True, 0, cluster, g)
        return {"panel": True}, {"wgmma_panel_tma": {b: tile}}
    if name.startswith("sddtma:"):  # the one-row TMA weight gradient with that tile
        group, wm, wn, st = (int(v) for v in name[7:].split("."))
        tile = tiles.SddWgmmaTile(group, wm, wn, st, False)
        return {"sdd_tma": True, "sdd_pair": False}, {"wgmma_sdd_tma": {b: tile}}
    raise ValueError(f"unknown variant {name!r}")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layouts", type=csv_list(str), default=["random", "ws", "banded"])
    parser.add_argument("--ops", type=csv_list(str), default=["fwd", "bwd"])
    parser.add_argument("--n", type=int, default=8192)
    parser.add_argument("--ck", type=int, default=8192)
    parser.add_argument("--b", type=csv_list(int), default=[8, 16, 32])
    parser.add_argument("--d", type=csv_list(float), default=[0.05, 0.1, 0.25, 0.5])
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--variants", type=csv_list(str), default=["nopanel", "rule"])
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()
    saved = {"wgmma_panel": dict(tiles.WGMMA_DSD_PANEL),
             "wgmma_panel_tma": dict(tiles.WGMMA_DSD_PANEL_TMA),
             "wgmma_tall": dict(tiles.WGMMA_DSD_TALL),
             "wgmma_cluster": dict(tiles.WGMMA_DSD_CLUSTER),
             "wgmma_pair": dict(tiles.WGMMA_DSD_PAIR),
             "wgmma_sdd_tma": dict(tiles.WGMMA_SDD_TMA)}
    name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"GPU: {name}; N = {args.n}, C = K = {args.ck}, {args.dtype}; eager ms back to "
          "back, efficiency against cupy.matmul")
    head = "  ".join(f"{v[:18]:>18}" for v in args.variants)
    print(f"{'layout':>7} {'op':>4} {'b':>3} {'d':>5}  {head}  {'dense':>7}")
    rows = []
    for lay_name, b, d in itertools.product(args.layouts, args.b, args.d):
        lay, _ = make_layout(Case(args.n, args.ck, args.ck, b, d, args.dtype, layout=lay_name))
        w = cs.BlockSparseMatrix.from_layout(lay, b, dtype=args.dtype, seed=2, backend="cuda")
        dens = w.nnzb / lay.size
        xs = [cp.random.standard_normal((args.n, args.ck), dtype=cp.float32).astype(args.dtype)
              for _ in range(2)]
        wd = w.toarray()
        dense = bench(lambda x=xs[0], wd=wd: cp.matmul(x, wd), reps=args.reps)
        del wd
        for op in args.ops:
            ms, plan = [], []
            for v in args.variants:
                decisions, entries = _variant(v, b)
                configs.set_tiles(**entries)
                try:
                    with plans.override(dense=False, **decisions):
                        plan.append(str(PLANS[op](w, xs[0], xs[0])))
                        err = verify(op, w, xs[1], xs[1])
                        if not err < 2e-2:
                            raise AssertionError(f"{lay_name} {op} b={b} d={d} {v}: "
                                                 f"error {err:.3g}")
                        ms.append(bench(lambda op=op, w=w, x=xs[0]: OPS[op](w, x, x),
                                        reps=args.reps))
                finally:
                    configs.set_tiles(**saved)
            cells = "  ".join(f"{t:8.3f} {dense * dens / t:5.2f}    " for t in ms)
            print(f"{lay_name:>7} {op:>4} {b:3d} {dens:5.3f}  {cells}  {dense:7.3f}", flush=True)
            for v, p in zip(args.variants, plan, strict=True):
                print(f"      {v}: {p}")
            rows.append((lay_name, op, b, dens, ms, dense))
    print(f"\nsummary ({name}): efficiency of each variant, median over densities")
    for lay_name, op, b in dict.fromkeys((r[0], r[1], r[2]) for r in rows):
        sel = [r for r in rows if r[:3] == (lay_name, op, b)]
        effs = [np.median([r[5] * r[3] / r[4][i] for r in sel])
                for i in range(len(args.variants))]
        print(f"{lay_name:>7} {op:>4} b={b:<3d} " + "  ".join(
            f"{v[:18]}={e:.2f}" for v, e in zip(args.variants, effs, strict=True)))


if __name__ == "__main__":
    main()
