"""Tile sweep of the CUDA-core kernels (IEEE float32) on the device: every candidate tile
of ``X @ W``, ``dY @ W.T`` and the weight gradient (``sdd``) at C = K = 4096, random
layout, for N in {32, 128, 4096}, checked against float32 dense math and timed as
CUDA-graph replays, next to dense cupy.matmul, torch BSR and (for sdd) cuSPARSE SDDMM
through torch (eager, median of CUDA events) in the same process; each candidate's plan
under its line, the dense path off. The fastest correct tile per (b, N) is what goes into
DSD_SIMT / DSD_SIMT_SMALL / SDD_SIMT / SDD_TILE_SIMT in cubsparse/_cuda/tiles.py
(bench/NOTES.md keeps the history).

    PYTHONPATH=.:tools python3 tools/simt_sweep.py [--n=32,128,4096] [--density=0.1,0.5]
        [--ops=fwd,bwd,sdd] [--dtype=float32] [b ...]

Every candidate is compiled first, in parallel worker processes (CuPy's on-disk kernel
cache then serves the timing process).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp

import cupy as cp
from gpu_probe import bench, checked_ms, csv_list, setup

from cubsparse._cuda import configs, dsd_configs, plans, sdd_configs, tiles
from cubsparse._cuda.compile import get_kernel

# (rows per CTA, rows per thread, columns per thread, k depth, stages); the current
# choice of the table that N picks is tried first.
SMALL = {
    8: [(32, 2, 4, 32, 4), (32, 2, 4, 16, 3), (32, 4, 4, 32, 4), (64, 4, 4, 32, 4)],
    16: [(32, 4, 4, 32, 4), (32, 4, 4, 16, 3), (32, 2, 4, 32, 4), (32, 1, 4, 32, 4)],
    32: [(32, 4, 4, 32, 4), (32, 2, 4, 32, 4), (32, 4, 8, 32, 4), (32, 4, 4, 16, 3)],
    64: [(32, 4, 8, 32, 4), (32, 4, 4, 32, 4), (32, 2, 8, 32, 4), (32, 8, 8, 32, 4)],
    128: [(32, 4, 8, 32, 4), (32, 8, 8, 32, 4), (32, 4, 16, 32, 4), (32, 4, 8, 16, 3)],
}
LARGE = {
    8: [(128, 4, 4, 16, 3), (128, 8, 4, 16, 3), (64, 4, 4, 16, 3), (128, 4, 4, 32, 3)],
    16: [(128, 8, 4, 16, 3), (128, 4, 4, 16, 3), (128, 8, 8, 16, 3), (64, 4, 4, 16, 3)],
    32: [(128, 8, 4, 16, 3), (128, 8, 8, 16, 3), (64, 4, 4, 16, 3), (128, 8, 4, 32, 3)],
    64: [(128, 8, 8, 16, 3), (64, 8, 8, 16, 3), (128, 8, 4, 16, 3), (128, 8, 8, 32, 2)],
    128: [(64, 8, 8, 16, 3), (128, 8, 8, 16, 3), (32, 4, 8, 32, 4), (64, 4, 8, 16, 3)],
}

# the weight gradient: (blocks per CTA, rows per thread, columns per thread, k depth,
# stages), or ("tile", block rows, block columns, k depth, stages) for the tiled kernel
# (sdd_tile_simt, forced with plans.override(sdd_tiled=True))
SDD = {
    8: [(16, 8, 4, 16, 3), (16, 4, 8, 16, 3), ("tile", 16, 16, 32, 3), ("tile", 16, 16, 16, 4),
        ("tile", 8, 16, 32, 3), ("tile", 16, 16, 32, 2), ("tile", 16, 8, 32, 4)],
    16: [(8, 4, 8, 16, 3), (8, 8, 8, 16, 3), ("tile", 8, 8, 32, 3), ("tile", 8, 8, 16, 4),
         ("tile", 4, 8, 32, 3), ("tile", 8, 8, 32, 2)],
    32: [(4, 8, 8, 16, 3), (2, 8, 8, 16, 3), (4, 8, 4, 16, 3), (8, 8, 8, 16, 3)],
    64: [(2, 8, 8, 16, 3), (1, 8, 8, 16, 3), (2, 8, 8, 32, 2), (4, 8, 8, 16, 3)],
    128: [(1, 8, 8, 16, 3), (1, 8, 8, 32, 2), (1, 8, 4, 16, 3)],
}


def _tiles(op, b, cfg, small):
    """set_tiles keywords that force ``cfg`` for ``op``."""
    if op == "sdd" and cfg[0] == "tile":
        return {"sdd_tile_simt": {b: cfg[1:]}}
    if op == "sdd":
        return {"sdd_simt": {b: cfg}, "sdd_tile_simt": {b: None}}
    return {"simt_small": {b: cfg}} if small else {"simt": {b: cfg}}


def _compile(job):
    dtype, b, cfg, trans = job
    try:
        if trans is None:  # sdd, operands read in place (a = x.T, b = dy)
            if cfg[0] == "tile":
                configs.set_tiles(sdd_tile_simt={b: cfg[1:]})
                get_kernel(sdd_configs.sdd_tile_config(dtype, b))
            else:
                configs.set_tiles(sdd_simt={b: cfg})
                get_kernel(sdd_configs.sdd_config(dtype, b))
            return None
        configs.set_tiles(simt={b: cfg})  # the kernel's name depends on the tile only
        get_kernel(dsd_configs.dsd_config(dtype, b, trans))
        return None
    except Exception as exc:
        return f"{b} {cfg}: {str(exc).splitlines()[0][:200]}"


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=csv_list(int), default=[32, 128, 4096],
                        help="rows of X, comma-separated (default: 32,128,4096)")
    parser.add_argument("--density", type=csv_list(float), default=[0.1, 0.5],
                        help="comma-separated (default: 0.1,0.5)")
    parser.add_argument("--ops", type=csv_list(str), default=["fwd", "bwd"],
                        help="comma-separated ops of fwd, bwd, sdd (default: fwd,bwd)")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("blocks", type=int, nargs="*", default=[8, 16, 32, 64, 128],
                        help="block sizes (default: 8 16 32 64 128)")
    args = parser.parse_intermixed_args()
    ns, densities, ops, dtype, blocks = args.n, args.density, args.ops, args.dtype, args.blocks
    print("GPU:", cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), flush=True)
    jobs = [(dtype, b, c, t) for b in blocks for c in SMALL[b] + LARGE[b] for t in (False, True)
            if {"fwd", "bwd"} & set(ops)]
    jobs += [(dtype, b, c, None) for b in blocks for c in SDD[b] if "sdd" in ops]
    with mp.get_context("spawn").Pool(16) as pool:
        for err in pool.imap_unordered(_compile, jobs):
            if err:
                print("compile failed:", err, flush=True)
    print(f"compiled {len(jobs)} instantiations", flush=True)
    saved = {k: dict(tiles.TABLES[k][0]) for k in ("simt", "simt_small", "sdd_simt",
                                                   "sdd_tile_simt")}
    rows = []
    for b in blocks:
        for d in densities:
            for n in ns:
                W, xs, dys = setup(b, d, dtype, n=n)
                wd = W.toarray()
                dense = bench(lambda x=xs[0], w=wd: cp.matmul(x, w), reps=50)
                torch_ms = sddmm_ms = float("nan")
                try:
                    import torch
                    bsr = torch.as_tensor(wd).T.contiguous().to_sparse_bsr((b, b))
                    xt = torch.as_tensor(xs[0])
                    torch_ms = bench(lambda a=bsr, x=xt: a @ x.T, reps=50)
                    if "sdd" in ops:  # cuSPARSE SDDMM on W's element pattern
                        pat = torch.as_tensor((wd != 0).astype(wd.dtype)).to_sparse_csr()
                        dyt = torch.as_tensor(dys[0])
                        sddmm_ms = bench(lambda p=pat, x=xt, y=dyt: torch.sparse.sampled_addmm(
                            p, x.T, y, beta=0.0), reps=20)
                except Exception as exc:
                    print("torch peer refused:", str(exc)[:100])
                small = n <= tiles.SMALL_ROWS
                for op in ops:
                    cands = SDD[b] if op == "sdd" else SMALL[b] if small else LARGE[b]
                    for cfg in cands:
                        configs.set_tiles(**_tiles(op, b, cfg, small))
                        tiled = True if cfg[0] == "tile" else None  # else the rule
                        with plans.override(sdd_tiled=tiled, dense=False):
                            err, t, plan = checked_ms(op, W, xs, dys, 100, f"{op} {b} {cfg}")
                        peer = sddmm_ms if op == "sdd" else torch_ms
                        rows.append((b, d, n, op, cfg, t, dense, peer, err))
                        print(f"{b:4d} d={d:<4} N={n:<5d} {op} {cfg!s:26s} {t:8.4f} ms  "
                              f"dense {dense:7.4f}  peer {peer:7.4f}  err {err:.1e}",
                              flush=True)
                        if plan is not None:
                            print(f"     {plan}", flush=True)
                    configs.set_tiles(**saved)
                del W, wd, xs, dys
    print("\nbest per (b, density, N, op); ms; eff = dense * density / best:")
    print("(peer: torch BSR for X @ W, cuSPARSE SDDMM via torch.sparse.sampled_addmm for sdd)")
    print(f"{'b':>4} {'d':>5} {'N':>5} {'op':>4} {'best tile':26s} {'best':>8} {'first':>8} "
          f"{'dense':>8} {'peer':>8} {'eff':>5} {'vs peer':>8}")
    for key in dict.fromkeys(r[:4] for r in rows):
        ok = [r for r in rows if r[:4] == key and r[8] < 1e-4]
        if ok:
            best = min(ok, key=lambda r: r[5])
            first = next(r for r in rows if r[:4] == key)
            b, d, n, op = key
            print(f"{b:4d} {d:5.2f} {n:5d} {op:>4} {best[4]!s:26s} {best[5]:8.4f} "
                  f"{first[5]:8.4f} {best[6]:8.4f} {best[7]:8.4f} {best[6] * d / best[5]:5.2f} "
                  f"{best[7] / best[5]:8.2f}")


if __name__ == "__main__":
    main()
