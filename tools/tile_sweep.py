"""Tile-configuration sweep on the device: every candidate tile of each op at N=C=K=4096,
fp16, density 0.25 (random layout), checked against float32 dense math, CUDA-graph timed
next to dense cupy.matmul. Prints one table; the fastest correct tile per (op, b) is
what goes into DSD_TC / SDD_TC in cubsparse/_cuda.py (bench/NOTES.md keeps the history).

    PYTHONPATH=.:tools python3 tools/tile_sweep.py [--wgmma] [--group] [--ws] [--union]
        [--ops=fwd,bwd,sdd]
        [--density=0.25] [b ...]

Each candidate runs alone: the mma.sync tiles with the wgmma kernels switched off, a
wgmma tile with the mma.sync choice as it is.
"""

from __future__ import annotations

import sys

import cupy as cp

from cubsparse import _cuda
from gpu_probe import OPS, bench, checked_ms, setup

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
# Hopper wgmma dsd: (output blocks per CTA, 64-row tiles, warpgroups, stages[, swap]),
# tried after the mma.sync tiles for fwd and bwd.
WGMMA = {
    16: [(4, 1, 2, 4), (4, 1, 2, 6), (4, 1, 1, 6), (2, 1, 1, 6)],
    32: [(1, 1, 2, 4), (1, 1, 2, 5), (1, 1, 2, 6), (1, 1, 1, 4), (1, 1, 1, 6), (1, 1, 1, 8),
         (1, 2, 1, 4), (1, 2, 1, 6), (1, 2, 2, 3)],
    64: [(1, 1, 2, 4), (1, 1, 2, 5), (1, 1, 1, 6), (1, 2, 1, 4)],
    128: [(1, 1, 2, 4), (1, 1, 2, 3)],
}
# Hopper persistent warp-specialized dsd, in WGMMA_DSD_WS's format (64-row tiles per
# warpgroup, consumer warpgroups, stages, CTAs per SM[, slices in flight[, tma[, rows]]]),
# tried after the wgmma tiles (--ws: only these and the current wgmma tile).
WS = {
    32: [(2, 1, 3, 3, 0), (2, 1, 2, 4, 0), (2, 1, 3, 3), (2, 1, 4, 2, 0), (2, 1, 5, 2, 0),
         (1, 1, 4, 3, 0), (4, 1, 3, 1, 0), (4, 1, 2, 2, 0), (2, 2, 2, 2, 0),
         (4, 1, 2, 2, 0, 1), (4, 2, 3, 1, 0, 1)],  # TMA: 256- and 512-row (tall) tiles
    64: [(2, 1, 4, 2, 0, 1), (2, 1, 4, 2, 0), (2, 1, 2, 4, 0), (2, 1, 3, 2, 0),
         (1, 1, 2, 2, 0, 1, 256), (1, 1, 4, 2, 0, 1, 128)],  # TMA; X's rows as wgmma's N
    128: [(2, 1, 3, 2, 0, 1), (1, 2, 4, 1, 0), (1, 2, 5, 1, 0), (1, 2, 4, 1, 0, 1),
          (1, 2, 4, 1, 1, 1, 256), (1, 2, 3, 2, 0, 1, 128)],
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
# Hopper wgmma sdd: (blocks per CTA, warpgroups along M, along N, stages, flip), tried
# after the mma.sync tiles.
WGMMA_SDD = {
    8: [(16, 1, 4, 32, 4)],
    16: [(16, 2, 1, 4, True), (8, 1, 1, 6, True), (4, 1, 1, 6, True), (8, 2, 1, 6, True)],
    32: [(4, 2, 1, 4, True), (4, 2, 1, 3, True), (4, 2, 1, 5, True), (4, 2, 1, 6, True),
         (4, 1, 1, 4, True), (4, 1, 1, 6, True), (2, 1, 1, 4, True), (2, 1, 1, 6, True),
         (2, 1, 1, 8, True)],
    64: [(2, 1, 1, 4, False), (2, 1, 1, 3, False), (2, 1, 1, 5, False), (2, 1, 1, 6, False),
         (2, 1, 1, 8, False), (1, 1, 1, 4, False), (1, 1, 1, 6, False), (2, 1, 2, 4, False)],
    128: [(1, 2, 1, 4, False), (1, 2, 1, 3, False), (1, 2, 1, 5, False), (1, 2, 1, 6, False),
          (1, 1, 1, 3, False), (1, 1, 1, 4, False)],
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


def main():
    only_wgmma = "--wgmma" in sys.argv  # only the wgmma candidates
    only_group = "--group" in sys.argv  # only the grouped small-block candidates
    only_ws = "--ws" in sys.argv  # the persistent dsd against the current wgmma tile
    only_union = "--union" in sys.argv  # the union dsd against the current wgmma tile
    density = float(next((a[10:] for a in sys.argv if a.startswith("--density=")), 0.25))
    ops = next((a[6:].split(",") for a in sys.argv if a.startswith("--ops=")), list(OPS))
    blocks = [int(a) for a in sys.argv[1:] if a.isdigit()] or [16, 32, 64, 128]
    print("GPU:", cp.cuda.runtime.getDeviceProperties(0)["name"].decode())
    rows = []
    saved = (dict(_cuda.DSD_TC), dict(_cuda.SDD_TC), dict(_cuda.WGMMA_DSD), dict(_cuda.WGMMA_SDD),
             dict(_cuda.DSD_GROUP), dict(_cuda.SDD_TILE), _cuda._sdd_tiled_pays, _cuda._group_pays,
             dict(_cuda.WGMMA_DSD_WS), dict(_cuda.WGMMA_DSD_UNION), set(_cuda.WGMMA_DSD_KN),
             _cuda._union_pays, dict(_cuda.WGMMA_DSD_TALL))
    for b in blocks:
        W, xs, dys = setup(b, density)
        dense = bench(lambda: cp.matmul(xs[0], xs[1]), reps=50)
        for op in ops:
            if op == "sdd":
                cands = (SDD.get(b, []) + [("wgmma_sdd",) + c for c in WGMMA_SDD.get(b, [])]
                         + [("tile",) + c for c in SDD_TILED.get(b, [])])
            else:
                cands = (DSD[b] + [("group",) + c for c in GROUP.get(b, [])]
                         + [("wgmma",) + c for c in WGMMA.get(b, [])]
                         + [("ws",) + c for c in WS.get(b, [])]
                         + [("union",) + c for c in UNION.get(b, [])])
            if only_wgmma:
                cands = [c for c in cands if str(c[0]).startswith("wgmma")]
            if only_group:  # the small-block kernels
                cands = [c for c in cands if c[0] in ("group", "tile")]
            if only_ws and saved[2].get(b):
                cands = [("wgmma",) + saved[2][b]] + [c for c in cands if c[0] == "ws"]
            if only_union:
                now = ([("ws",) + saved[8][b]] if saved[8].get(b) else
                       [("wgmma",) + saved[2][b]] if saved[2].get(b) else [])
                cands = now + [c for c in cands if c[0] == "union"]
            for cfg in cands:
                # the single-block mma.sync kernels unless named (and no tall tile taking
                # the place of a named persistent one)
                _cuda.set_tiles(wgmma={b: None}, wgmma_sdd={b: None}, group={b: None},
                                sdd_tile={b: None}, wgmma_ws={b: None}, wgmma_union={b: None},
                                wgmma_tall={b: None})
                _cuda._sdd_tiled_pays = lambda *args: cfg[0] == "tile"
                _cuda._group_pays = lambda *args: cfg[0] == "group"
                _cuda._union_pays = lambda *args: cfg[0] == "union"
                _cuda.WGMMA_DSD_KN = saved[10] | ({b} if cfg[0] == "union" else set())
                if cfg[0] == "tile":
                    _cuda.set_tiles(sdd_tile={b: cfg[1:]})
                elif cfg[0] == "group":
                    _cuda.set_tiles(group={b: cfg[1:]})
                elif cfg[0] == "wgmma":
                    _cuda.set_tiles(wgmma={b: cfg[1:]})
                elif cfg[0] == "ws":  # the persistent form of the single-block wgmma kernel
                    _cuda.set_tiles(wgmma={b: (1, 1, 2, 4)}, wgmma_ws={b: cfg[1:]})
                elif cfg[0] == "union":
                    _cuda.set_tiles(wgmma={b: saved[2][b]}, wgmma_union={b: cfg[1:]})
                elif cfg[0] == "wgmma_sdd":
                    _cuda.set_tiles(wgmma_sdd={b: cfg[1:]})
                else:
                    _cuda.set_tiles(**({"sdd": {b: cfg}} if op == "sdd" else {"dsd": {b: cfg}}))
                err, t = checked_ms(op, W, xs, dys, 50, f"{op} {b} {cfg}")
                rows.append((b, op, cfg, t, dense, err))
                print(f"{b:4d} {op} {str(cfg):22s} {t:7.4f} ms  eff {dense * density / t:5.2f}  err {err:.1e}",
                      flush=True)
            _cuda.DSD_TC.update(saved[0])
            _cuda.SDD_TC.update(saved[1])
            _cuda.set_tiles(wgmma={b: saved[2][b]}, wgmma_sdd={b: saved[3][b]},
                            wgmma_ws={b: saved[8].get(b)}, wgmma_union={b: saved[9].get(b)},
                            group={b: saved[4].get(b)}, sdd_tile={b: saved[5].get(b)},
                            wgmma_tall={b: saved[12].get(b)})
            _cuda._sdd_tiled_pays, _cuda._group_pays = saved[6], saved[7]
            _cuda._union_pays, _cuda.WGMMA_DSD_KN = saved[11], saved[10]
    print("\nbest per (b, op), dense ms in the same run:")
    for b in blocks:
        for op in ops:
            ok = [r for r in rows if r[0] == b and r[1] == op and r[5] < 1e-2]
            if ok:
                best = min(ok, key=lambda r: r[3])
                first = [r for r in rows if r[0] == b and r[1] == op][0]
                print(f"{b:4d} {op} best {str(best[2]):22s} {best[3]:7.4f} (first {first[3]:7.4f}) "
                      f"dense {best[4]:7.4f} eff {best[4] * density / best[3]:5.2f}")


if __name__ == "__main__":
    main()
