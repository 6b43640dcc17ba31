"""Tile-configuration sweep on the device: every candidate tile of each op at N=C=K=4096
(or --n, --ck), fp16, density 0.25 (random layout), checked against float32 dense math,
CUDA-graph timed next to dense cupy.matmul. Prints one table, each candidate's plan under
its line; the fastest correct tile per (op, b) is what goes into the tables of
cubsparse/_cuda/tiles.py (bench/NOTES.md keeps the history).

    PYTHONPATH=.:tools python3 tools/tile_sweep.py [--wgmma] [--group] [--ws] [--union]
        [--ops=fwd,bwd,sdd] [--density=0.25] [--n=4096] [--ck=4096] [b ...]

At --n <= 32 the plan runs the wgmma sdd in 32-deep slices (sdd_rules.SDD_ONE_SLICE_K), so
its candidates of k = 64 run as k = 32 there.

Each candidate runs alone: the mma.sync tiles with the wgmma kernels switched off, a
wgmma tile with the mma.sync choice as it is. The plan decisions a candidate needs are
forced with ``plans.override``, the dense path always off.
"""

from __future__ import annotations

import argparse

import cupy as cp
from gpu_probe import OPS, bench, checked_ms, setup

from cubsparse._cuda import configs, plans, tiles

# dsd: (rows per CTA, warps m, warps n, k depth, stages); sdd: (blocks per CTA, warps m,
# warps n, k depth, stages). The current choice is listed first.
DSD = {
    8: [(256, 8, 1, 32, 4)],
    16: [(256, 8, 1, 32, 4), (256, 8, 1, 64, 3), (256, 4, 1, 64, 3), (128, 4, 1, 64, 4)],
    32: [(256, 8, 1, 32, 4), (256, 8, 1, 64, 3), (256, 4, 1, 32, 4), (256, 4, 1, 64, 3),
         (128, 4, 1, 64, 4), (128, 2, 1, 64, 4)],
    64: [(128, 4, 2, 32, 4), (128, 4, 2, 64, 3), (128, 2, 2, 32, 4), (128, 2, 2, 64, 3),
         (256, 4, 2, 64, 3), (256, 4, 2, 32, 4), (256, 4, 1, 64, 3)],
    128: [(128, 2, 4, 64, 3), (128, 2, 2, 64, 3), (256, 4, 2, 64, 3), (128, 4, 2, 64, 3),
          (128, 2, 2, 32, 4), (256, 4, 2, 32, 4)],
}
# The grouped small-block dsd (mma.sync): (output blocks per CTA, rows per CTA, warps m,
# warps n, list entries per stage, stages), tried after the single-block tiles.
GROUP = {
    8: [(16, 128, 4, 2, 8, 3), (16, 128, 4, 2, 4, 4), (16, 128, 4, 2, 4, 3), (32, 128, 4, 2, 4, 3),
        (32, 64, 2, 4, 4, 4), (16, 64, 2, 2, 8, 4), (32, 128, 2, 4, 4, 3), (8, 128, 4, 2, 8, 4)],
    16: [(16, 128, 4, 2, 4, 3), (8, 128, 4, 2, 4, 4), (16, 64, 2, 4, 4, 4), (8, 64, 2, 2, 4, 4)],
}
# The tiled small-block sdd: (block rows, block columns per tile, k depth, warps m, warps n,
# stages), tried after the other sdd tiles (chosen whatever the layout).
SDD_TILED = {
    8: [(16, 16, 32, 2, 4, 4), (16, 16, 32, 2, 4, 3), (16, 16, 64, 2, 4, 3), (16, 32, 32, 2, 4, 3),
        (8, 16, 32, 2, 4, 4), (16, 8, 32, 4, 2, 4)],
    16: [(8, 8, 32, 2, 4, 4), (8, 16, 32, 2, 4, 3)],
}
# Hopper single-block wgmma dsd, in WGMMA_DSD's format (64-row tiles per warpgroup,
# warpgroups, stages), tried after the mma.sync tiles for fwd and bwd.
WGMMA = {
    16: [(1, 2, 4), (1, 2, 6), (1, 1, 6)],
    32: [(1, 2, 4), (1, 2, 5), (1, 2, 6), (1, 1, 4), (1, 1, 6), (1, 1, 8), (2, 1, 4), (2, 1, 6),
         (2, 2, 3)],
    64: [(1, 2, 4), (1, 2, 5), (1, 1, 6), (2, 1, 4)],
    128: [(1, 2, 4), (1, 2, 3)],
}
# Hopper persistent warp-specialized dsd, in WGMMA_DSD_WS's format (64-row tiles per
# warpgroup, consumer warpgroups, stages, CTAs per SM[, slices in flight[, tma[, rows[,
# cluster]]]]), tried after the wgmma tiles (--ws: only these and the current wgmma tile).
WS = {
    32: [(2, 1, 3, 3, 0), (2, 1, 2, 4, 0), (2, 1, 3, 3), (2, 1, 4, 2, 0), (2, 1, 5, 2, 0),
         (1, 1, 4, 3, 0), (4, 1, 3, 1, 0), (4, 1, 2, 2, 0), (2, 2, 2, 2, 0),
         (4, 1, 2, 2, 0, 1), (4, 2, 3, 1, 0, 1)],  # TMA: 256- and 512-row (tall) tiles
    64: [(2, 1, 4, 2, 0, 1), (2, 1, 4, 2, 0), (2, 1, 2, 4, 0), (2, 1, 3, 2, 0),
         (1, 1, 2, 2, 0, 1, 256), (1, 1, 4, 2, 0, 1, 128),  # TMA; X's rows as wgmma's N
         (1, 1, 2, 2, 0, 1, 256, 2)],  # in clusters of two CTAs
    128: [(2, 1, 3, 2, 0, 1), (1, 2, 4, 1, 0), (1, 2, 5, 1, 0), (1, 2, 4, 1, 0, 1),
          (1, 2, 4, 1, 1, 1, 256), (1, 2, 3, 2, 0, 1, 128), (1, 2, 4, 1, 1, 1, 256, 2)],
}
# The two-block TMA dsd (b = 64), in WGMMA_DSD_PAIR's format (WS's, then blocks per tile),
# forced on for these (decisions tall and dsd_pair). It pays where neighbouring output
# blocks share their lists, so sweep it on such a layout (bench/NOTES.md 116-117 has
# banded and Watts-Strogatz results); the random layout of --density shows its cost.
PAIR = {
    64: [(1, 2, 4, 1, 1, 1, 256, 1, 2), (1, 2, 3, 1, 0, 1, 256, 1, 2)],
}
# Hopper persistent union dsd: (members per group, m64 tiles, consumer warpgroups, stages,
# CTAs per SM), W's blocks read as stored for X @ W (--union: only these and the current
# persistent or wgmma tile).
UNION = {
    16: [(16, 2, 2, 4, 1), (8, 1, 2, 4, 2), (4, 1, 2, 4, 3), (8, 2, 4, 4, 1)],
    32: [(8, 2, 2, 4, 1), (4, 2, 4, 4, 1), (4, 1, 2, 4, 2), (4, 1, 4, 4, 2), (2, 2, 2, 3, 2),
         (2, 1, 2, 4, 3)],
    64: [(2, 2, 2, 4, 1), (2, 1, 2, 4, 2)],
}
# Hopper wgmma sdd: (blocks per CTA, warpgroups along M, along N, stages, flip[, k depth]),
# tried after the mma.sync tiles; set for long and short reductions alike (--n picks which
# the plan runs).
WGMMA_SDD = {
    8: [(16, 1, 4, 32, 4)],
    16: [(16, 2, 1, 4, True), (8, 1, 1, 6, True), (4, 1, 1, 6, True), (8, 2, 1, 6, True),
         (16, 2, 1, 3, True, 32), (8, 1, 1, 3, True, 32), (8, 2, 1, 3, True, 32)],
    32: [(4, 2, 1, 4, True), (4, 2, 1, 3, True), (4, 2, 1, 5, True), (4, 2, 1, 6, True),
         (4, 1, 1, 4, True), (4, 1, 1, 6, True), (2, 1, 1, 4, True), (2, 1, 1, 6, True),
         (2, 1, 1, 8, True), (4, 2, 1, 3, True, 32), (4, 2, 1, 4, True, 32),
         (4, 1, 1, 3, True, 32), (2, 1, 1, 3, True, 32)],
    64: [(2, 1, 1, 4, False), (2, 1, 1, 3, False), (2, 1, 1, 5, False), (2, 1, 1, 6, False),
         (2, 1, 1, 8, False), (1, 1, 1, 4, False), (1, 1, 1, 6, False), (2, 1, 2, 4, False),
         (4, 1, 1, 4, False), (4, 1, 2, 4, False), (2, 1, 1, 3, False, 32),
         (2, 1, 1, 4, False, 32), (1, 1, 1, 3, False, 32), (4, 1, 1, 3, False, 32)],
    128: [(1, 2, 1, 4, False), (1, 2, 1, 3, False), (1, 2, 1, 5, False), (1, 2, 1, 6, False),
          (1, 1, 1, 3, False), (1, 1, 1, 4, False), (2, 1, 2, 4, False), (2, 2, 1, 4, False),
          (2, 2, 1, 3, False),
          (1, 2, 1, 3, False, 32), (1, 1, 1, 3, False, 32), (1, 2, 1, 4, False, 32)],
}
# Hopper persistent TMA sdd, in WGMMA_SDD_TMA's format (blocks per CTA, warpgroups along M,
# along N, stages, flip = False), tried after the other wgmma sdd tiles (decision sdd_tma
# forced on for these; bench/NOTES.md 100 has the b = 64 and 128 results at C = K = 8192).
WGMMA_SDD_TMA = {
    64: [(4, 1, 2, 4, False), (4, 1, 2, 3, False), (2, 1, 2, 3, False), (2, 1, 1, 3, False)],
    128: [(2, 2, 1, 3, False), (2, 2, 1, 4, False), (2, 2, 1, 2, False), (1, 2, 1, 3, False),
          (1, 2, 1, 2, False)],
}
# Its paired tile (two block rows per group, decision sdd_pair forced on for these;
# bench/NOTES.md 108 has the b = 64 results at C = K = 8192).
WGMMA_SDD_PAIR = {
    64: [(4, 2, 1, 3, False), (4, 2, 1, 4, False), (4, 1, 2, 3, False), (2, 2, 1, 3, False)],
}
SDD = {
    8: [(16, 1, 4, 32, 4)],
    16: [(16, 1, 4, 32, 4), (16, 1, 4, 32, 3), (16, 1, 4, 16, 4), (8, 1, 4, 32, 3),
         (16, 2, 4, 32, 3)],
    32: [(8, 1, 4, 32, 4), (8, 1, 4, 32, 3), (8, 1, 4, 16, 4), (8, 1, 4, 16, 6),
         (4, 1, 4, 32, 3), (8, 2, 4, 32, 3), (16, 1, 4, 32, 3), (8, 1, 4, 32, 2)],
    64: [(2, 1, 2, 32, 4), (2, 1, 2, 32, 3), (2, 1, 2, 16, 4), (4, 1, 4, 32, 3),
         (2, 2, 2, 32, 3)],
    128: [(1, 2, 2, 32, 4), (1, 2, 2, 32, 3), (1, 2, 2, 16, 4), (1, 2, 4, 32, 3)],
}
#: The tables a candidate sets (set_tiles keywords); all but dsd and sdd are switched off
#: for the block size before each candidate.
TUNED = ("dsd", "sdd", "wgmma", "wgmma_sdd", "wgmma_sdd_short", "wgmma_sdd_wide",
         "wgmma_sdd_tma", "wgmma_sdd_pair", "group", "sdd_tile", "wgmma_ws", "wgmma_union",
         "wgmma_tall", "wgmma_cluster", "wgmma_pair")


def _candidates(op, b, args, saved):
    """The candidates of ``op`` at block size ``b`` that the flags select: a tile, or
    (kind, *tile) for the kernel families other than the single-block mma.sync ones."""
    if op == "sdd":
        cands = (SDD.get(b, []) + [("wgmma_sdd", *c) for c in WGMMA_SDD.get(b, [])]
                 + [("wgmma_sdd_tma", *c) for c in WGMMA_SDD_TMA.get(b, [])]
                 + [("wgmma_sdd_pair", *c) for c in WGMMA_SDD_PAIR.get(b, [])]
                 + [("tile", *c) for c in SDD_TILED.get(b, [])])
    else:
        cands = (DSD[b] + [("group", *c) for c in GROUP.get(b, [])]
                 + [("wgmma", *c) for c in WGMMA.get(b, [])]
                 + [("ws", *c) for c in WS.get(b, [])]
                 + [("pair", *c) for c in PAIR.get(b, [])]
                 + [("union", *c) for c in UNION.get(b, [])])
    if args.wgmma:
        cands = [c for c in cands if str(c[0]).startswith("wgmma")]
    if args.group:  # the small-block kernels
        cands = [c for c in cands if c[0] in ("group", "tile")]
    if args.ws and saved["wgmma"].get(b):
        cands = [("wgmma", *saved["wgmma"][b])] + [c for c in cands if c[0] == "ws"]
    if args.union:
        now = ([("ws", *saved["wgmma_ws"][b])] if saved["wgmma_ws"].get(b) else
               [("wgmma", *saved["wgmma"][b])] if saved["wgmma"].get(b) else [])
        cands = now + [c for c in cands if c[0] == "union"]
    return cands


def _apply(op, b, cfg, saved):
    """Set the tiles of candidate ``cfg``; return the plan decisions it needs forced."""
    # the single-block mma.sync kernels unless named (and no tall tile taking the place
    # of a named persistent one)
    configs.set_tiles(**{k: {b: None} for k in TUNED if k not in ("dsd", "sdd")})
    kind = cfg[0]
    if kind == "tile":
        configs.set_tiles(sdd_tile={b: cfg[1:]})
    elif kind == "group":
        configs.set_tiles(group={b: cfg[1:]})
    elif kind == "wgmma":
        configs.set_tiles(wgmma={b: cfg[1:]})
    elif kind == "ws":  # the persistent form of the single-block wgmma kernel
        configs.set_tiles(wgmma={b: (1, 2, 4)}, wgmma_ws={b: cfg[1:]})
    elif kind == "pair":  # taken after the tall tile, which is restored for it
        configs.set_tiles(wgmma={b: saved["wgmma"][b]}, wgmma_ws={b: saved["wgmma_ws"][b]},
                          wgmma_tall={b: saved["wgmma_tall"][b]}, wgmma_pair={b: cfg[1:]})
    elif kind == "union":
        configs.set_tiles(wgmma={b: saved["wgmma"][b]}, wgmma_union={b: cfg[1:]})
    elif kind == "wgmma_sdd":
        configs.set_tiles(wgmma_sdd={b: cfg[1:]}, wgmma_sdd_short={b: cfg[1:]})
    elif kind == "wgmma_sdd_tma":  # the plan's regular wgmma sdd stays as the fallback
        configs.set_tiles(wgmma_sdd={b: saved["wgmma_sdd"][b]}, wgmma_sdd_tma={b: cfg[1:]})
    elif kind == "wgmma_sdd_pair":  # likewise
        configs.set_tiles(wgmma_sdd={b: saved["wgmma_sdd"][b]}, wgmma_sdd_pair={b: cfg[1:]})
    else:
        configs.set_tiles(**{op if op == "sdd" else "dsd": {b: cfg}})
    # the union kernel reads W's blocks as stored for X @ W
    tma, pair = kind == "wgmma_sdd_tma", kind == "wgmma_sdd_pair"
    return {"sdd_tiled": kind == "tile", "group": kind == "group", "union": kind == "union",
            "kn": True if kind == "union" else None, "dense": False,
            "tall": True if kind == "pair" else None, "dsd_pair": kind == "pair",
            "sdd_tma": tma, "sdd_pair": pair, "sdd_short": False if tma or pair else None}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wgmma", action="store_true", help="only the wgmma candidates")
    parser.add_argument("--group", action="store_true",
                        help="only the grouped small-block candidates")
    parser.add_argument("--ws", action="store_true",
                        help="the persistent dsd against the current wgmma tile")
    parser.add_argument("--union", action="store_true",
                        help="the union dsd against the current persistent or wgmma tile")
    parser.add_argument("--ops", type=lambda v: v.split(","), default=list(OPS),
                        help="comma-separated ops of fwd, bwd, sdd (default: all)")
    parser.add_argument("--density", type=float, default=0.25)
    parser.add_argument("--n", type=int, default=4096, help="rows of X and dY (default 4096)")
    parser.add_argument("--ck", type=int, default=4096, help="C = K (default 4096)")
    parser.add_argument("blocks", type=int, nargs="*", default=[16, 32, 64, 128],
                        help="block sizes (default: 16 32 64 128)")
    args = parser.parse_intermixed_args()
    density, ops, blocks = args.density, args.ops, args.blocks
    print("GPU:", cp.cuda.runtime.getDeviceProperties(0)["name"].decode())
    rows = []
    saved = {k: dict(tiles.TABLES[k][0]) for k in TUNED}
    for b in blocks:
        W, xs, dys = setup(b, density, n=args.n, c=args.ck, k=args.ck)
        wd = W.toarray()
        dense = bench(lambda x=xs[0], wd=wd: cp.matmul(x, wd), reps=50)
        for op in ops:
            for cfg in _candidates(op, b, args, saved):
                with plans.override(**_apply(op, b, cfg, saved)):
                    err, t, plan = checked_ms(op, W, xs, dys, 50, f"{op} {b} {cfg}")
                rows.append((b, op, cfg, t, dense, err))
                print(f"{b:4d} {op} {cfg!s:22s} {t:7.4f} ms  eff {dense * density / t:5.2f}  "
                      f"err {err:.1e}", flush=True)
                if plan is not None:
                    print(f"     {plan}", flush=True)
            configs.set_tiles(**{k: {b: saved[k].get(b)} for k in TUNED})
    print("\nbest per (b, op), dense ms in the same run:")
    for b in blocks:
        for op in ops:
            ok = [r for r in rows if r[0] == b and r[1] == op and r[5] < 1e-2]
            if ok:
                best = min(ok, key=lambda r: r[3])
                first = next(r for r in rows if r[0] == b and r[1] == op)
                print(f"{b:4d} {op} best {best[2]!s:22s} {best[3]:7.4f} (first {first[3]:7.4f}) "
                      f"dense {best[4]:7.4f} eff {best[4] * density / best[3]:5.2f}")


if __name__ == "__main__":
    main()
