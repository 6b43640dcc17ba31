"""The small-N weight gradient at b = 16-128 on each candidate short tile
(``tiles.WGMMA_SDD_SHORT``): CUDA-graph µs and the fraction of the copy rate (with
``--eager``, an eager loop's µs a call before them), each result checked against float32
dense math. The current tile is listed first, and the summary divides by the first
candidate run; above the rows of the first and last N, at the first density, each
candidate's plan names the kernel it ran and its grid.

    PYTHONPATH=.:tools python3 tools/sdd_short_tiles.py [--n 32,64,128] [--ck 12288]
        [--d 0.1,0.5] [--b 64,128] [--only 0,1] [--eager]
"""

from __future__ import annotations

import argparse
import itertools

from ab_decision import checked_times, gpu_banner, operand_pairs, random_case
from gpu_probe import csv_list

from bench.cases import Case
from bench.runner import bandwidth_efficiency
from cubsparse._cuda import configs, plans, tiles

# (group, warpgroups m, warpgroups n, stages, flip, k); the current tile first. At most
# 32 rows the plan runs k = 32 (sdd_rules.SDD_ONE_SLICE_K), so a candidate's k shows at
# 33-128 rows only. "tma" is the persistent TMA kernel (tiles.WGMMA_SDD_TMA, b = 128 only),
# the plan's choice past the short tile over a wide W. b = 128's second entry is its
# former tile (two warpgroups, NOTES 288). The runner's
# grid rule (sdd_rules.short_grid_per_sm) applies to each. wgmma_pipeline needs 3 stages
# or more. At b = 16 and 32 registers hold fewer CTAs an SM than shared memory at 32 rows,
# so stages past three come without losing one there.
CANDIDATES = {
    16: [tuple(tiles.WGMMA_SDD_SHORT[16]), (16, 2, 1, 4, True, 32), (16, 2, 1, 5, True, 32),
         (8, 2, 1, 4, True, 32)],
    32: [tuple(tiles.WGMMA_SDD_SHORT[32]), (4, 2, 1, 4, True, 64), (4, 2, 1, 5, True, 64),
         (4, 1, 1, 5, True, 64), (2, 1, 1, 6, True, 64)],
    64: [tuple(tiles.WGMMA_SDD_SHORT[64]), (2, 1, 1, 3, False, 32), (2, 1, 1, 4, False, 32),
         (1, 1, 1, 3, False, 64)],
    128: [tuple(tiles.WGMMA_SDD_SHORT[128]), (1, 2, 1, 3, False, 64),
          (1, 1, 1, 3, False, 64), (1, 1, 1, 4, False, 64), (1, 1, 1, 5, False, 64),
          (1, 1, 1, 6, False, 32), "tma"],
}


def candidates(b, only):
    """b's candidates, or those of them at the indices ``only`` (each b has its own list:
    an index past it is left out)."""
    return CANDIDATES[b] if not only else [CANDIDATES[b][i] for i in only
                                           if i < len(CANDIDATES[b])]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=csv_list(int), default=[32, 64, 128])
    p.add_argument("--ck", type=csv_list(int), default=[12288])
    p.add_argument("--d", type=csv_list(float), default=[0.1, 0.5])
    p.add_argument("--b", type=csv_list(int), default=[64, 128])
    p.add_argument("--only", type=csv_list(int), default=None,
                   help="indices into each b's candidate list, e.g. 0,1")
    p.add_argument("--eager", action="store_true",
                   help="also time an eager loop of calls (µs a call), first in each cell")
    args = p.parse_args()
    bw = gpu_banner()
    saved = dict(tiles.WGMMA_SDD_SHORT)
    rows = []
    for b, ck, d in itertools.product(args.b, args.ck, args.d):
        w = random_case(ck, b, d)
        for n in args.n:
            xs, dys = operand_pairs(n, ck)
            mb = Case(n, ck, ck, b, d, "float16").min_bytes(w.nnzb)
            times, eager = [], []
            cands = candidates(b, args.only)
            for tile in cands:
                tma = tile == "tma"
                if not tma:
                    configs.set_tiles(wgmma_sdd_short={b: tile})
                forced = ({"sdd_short": False, "sdd_tma": True, "sdd_pair": False} if tma
                          else {"sdd_short": True, "sdd_stream": False})
                try:
                    with plans.override(dense=False, **forced):
                        plan, e, t = checked_times("sdd", w, xs, dys, str(tile), args.eager)
                except Exception as exc:  # a failing candidate is a result
                    print(f"b={b} N={n} d={d} {tile}: failed {str(exc).splitlines()[0][:160]}")
                    e, t, plan = float("nan"), float("nan"), None
                times.append(t)
                eager.append(e)
                if plan is not None and n in (args.n[0], args.n[-1]) and d == args.d[0]:
                    print(f"  {tile}: {plan}")
            configs.set_tiles(wgmma_sdd_short=saved)
            cells = " ".join((f"{e:7.1f} " if args.eager else "")
                             + f"{t:7.1f} {bandwidth_efficiency(mb, t * 1e-3, bw):4.2f}"
                             for e, t in zip(eager, times, strict=True))
            print(f"b={b:<4d} C=K={ck:<6d} d={d:<4.2f} N={n:<4d} {mb / 1e6:6.1f} MB  {cells}",
                  flush=True)
            rows.append((b, ck, d, n, times))
    print("\nsummary: each candidate's time over the first one's (below 1: faster)")
    for b, ck, d, n, times in rows:
        print(f"b={b:<4d} C=K={ck:<6d} d={d:<4.2f} N={n:<4d} "
              + " ".join(f"{t / times[0]:5.2f}" for t in times))
    for b in args.b:
        print(f"b={b} candidates: " + "  ".join(str(c) for c in candidates(b, args.only)))


if __name__ == "__main__":
    main()
