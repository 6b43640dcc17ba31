"""The weight gradient in two parts, each launch timed alone: the dense panels over the
tiles W's blocks fill, and the second part (``sdd_wgmma_rest``) over the other blocks,
with its reduction split as the rule says and as each ``--splits`` forces, on the tile
table's tile and each ``--tiles`` one (``G.WM.S.K``: blocks per group, warpgroups along M,
stages, slice depth; flipped, one warpgroup along N). Prints, per
case, the second part's groups and blocks, its time and the cost per slice of N rows it
implies in dense block positions (what ``sdd_rules.SDD_REST_COST`` models), against dense
cuBLAS (``cupy.matmul``) in the same process. The result is checked against float32 dense
math first.

    PYTHONPATH=.:tools python3 tools/sdd_rest_probe.py --b 16,32 --layouts ws,ba \\
        --splits 1,4 --tiles 4.1.8.32
"""

from __future__ import annotations

import argparse
import itertools

import cupy as cp
from gpu_probe import bench, csv_list, verify

import cubsparse as cs
from bench.cases import Case, make_layout
from cubsparse._cuda import configs, plans, run_sdd, sdd_rules, sdd_worklists, tiles


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layouts", type=csv_list(str), default=["ws", "ba", "random"])
    parser.add_argument("--n", type=int, default=8192)
    parser.add_argument("--ck", type=int, default=8192)
    parser.add_argument("--b", type=csv_list(int), default=[16, 32])
    parser.add_argument("--d", type=csv_list(float), default=[0.05, 0.1, 0.25, 0.5])
    parser.add_argument("--splits", type=csv_list(int), default=[1])
    parser.add_argument("--tiles", type=csv_list(str), default=[])
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()
    name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"GPU: {name}; N = {args.n}, C = K = {args.ck}, {args.dtype}; ms per launch, "
          "back to back; cost = rest ms / dense ms x block positions / (groups + blocks)")
    print(f"{'layout':>7} {'b':>3} {'d':>5} {'tile':>9} {'groups':>6} {'blocks':>6} {'splits':>6} "
          f"{'panels':>7} {'rest':>7} {'both':>7} {'eff':>5} {'cost':>6} {'dense':>7}")
    stream = cp.cuda.get_current_stream()
    for lay_name, b, d in itertools.product(args.layouts, args.b, args.d):
        lay, _ = make_layout(Case(args.n, args.ck, args.ck, b, d, args.dtype, layout=lay_name))
        w = cs.BlockSparseMatrix.from_layout(lay, b, dtype=args.dtype, seed=2, backend="cuda")
        s = w._structure
        dens = w.nnzb / lay.size
        x, dy = (cp.random.standard_normal((args.n, args.ck), dtype=cp.float32)
                 .astype(args.dtype) for _ in range(2))
        wd = w.toarray()
        dense = bench(lambda x=x, wd=wd: cp.matmul(x, wd), reps=args.reps)
        del wd
        saved = dict(tiles.WGMMA_SDD_REST)
        for tile, splits in itertools.product(["table", *args.tiles], [0, *args.splits]):
            if tile != "table":
                g, wm, st, k = (int(v) for v in tile.split("."))
                configs.set_tiles(wgmma_sdd_rest={b: (g, wm, 1, st, True, k)})
            try:
                with plans.override(dense=False, sdd_hybrid=True, sdd_short=False,
                                    sdd_rest_splits=splits or None):
                    err = verify("sdd", w, x, dy)
                    if not err < 2e-2:
                        raise AssertionError(f"{lay_name} b={b} d={d} {tile} splits={splits}:"
                                             f" error {err:.3g}")
                    r = run_sdd._SddRunner(w, 0, args.n, True, False, False,
                                           sparse_only=True)
            finally:
                configs.set_tiles(wgmma_sdd_rest=saved)
            p = r.plan
            if p.rest is None:
                print(f"{lay_name:>7} {b:3d} {dens:5.3f}  one part: {p}")
                break
            ops = run_sdd.sdd_operands(x.T, dy, False)
            out = cp.empty(w._data.shape, w.dtype)
            r(x.T, dy, ops, out, 1.0, 0.0, stream.ptr)  # sets every parameter
            _, groups, order = sdd_worklists.sdd_hybrid_host(
                s, p.kernel.block_rows, p.kernel.group, p.rest.group,
                sdd_rules.sdd_hybrid_fill(b))
            panels = bench(lambda r=r: r.main(stream.ptr), reps=args.reps)
            rest = bench(lambda r=r: r.rest(stream.ptr), reps=args.reps)
            both = bench(lambda r=r, ops=ops, out=out, x=x, dy=dy: r(x.T, dy, ops, out, 1.0, 0.0,
                                                                      stream.ptr),
                         reps=args.reps)
            units = groups.shape[0] + order.shape[0]
            cost = rest / dense * lay.size / units
            print(f"{lay_name:>7} {b:3d} {dens:5.3f} {tile:>9} {groups.shape[0]:6d} "
                  f"{order.shape[0]:6d} "
                  f"{p.rest_splits:6d} {panels:7.3f} {rest:7.3f} {both:7.3f} "
                  f"{dense * dens / both:5.2f} {cost:6.2f} {dense:7.3f}", flush=True)


if __name__ == "__main__":
    main()
