"""Same-process A/B of the short weight gradient's persistent grid: CTAs per SM counted
from shared memory alone (as plans count them) against the driver's occupancy rule
(``run_sdd._resident_grid``, registers too). Each op-case: an eager loop of calls back to
back (µs a call), then CUDA-graph replays (µs, and the fraction of the copy rate),
interleaved rounds, best of them, each result checked against float32 dense math; the
grids of both plans under the row.

    PYTHONPATH=.:tools python3 tools/sdd_grid_ab.py [--b 16,32,64,128] [--n 1,32,64,128]
        [--ck 8192,12288] [--d 0.1,0.25,0.5]
"""

from __future__ import annotations

import argparse
import itertools

import cupy as cp
from ab_decision import copy_gbps
from gpu_probe import OPS, PLANS, bench, csv_list, graph_ms, verify

import cubsparse as cs
from bench.cases import Case
from bench.runner import bandwidth_efficiency
from cubsparse._cuda import configs, plans, run_sdd

RESIDENT = run_sdd._resident_grid


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--b", type=csv_list(int), default=[16, 32, 64, 128])
    p.add_argument("--n", type=csv_list(int), default=[1, 32, 64, 128])
    p.add_argument("--ck", type=csv_list(int), default=[8192, 12288])
    p.add_argument("--d", type=csv_list(float), default=[0.1, 0.25, 0.5])
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    bw = copy_gbps()
    print(f"GPU: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, "
          f"copy {bw:.0f} GB/s")
    print(f"{'b':>4} {'C=K':>6} {'d':>5} {'N':>4} | eager us: smem  driver | graph us: smem "
          f"(bw)  driver (bw) | driver / smem")
    forms = {"smem": lambda plan, dev: plan, "driver": RESIDENT}
    rows = []
    for b, ck, d in itertools.product(args.b, args.ck, args.d):
        lay = cs.layouts.random(ck // b, ck // b, d, seed=1)
        w = cs.BlockSparseMatrix.from_layout(lay, b, dtype="float16", seed=2, backend="cuda")
        for n in args.n:
            xs = [cp.random.standard_normal((n, ck), dtype=cp.float32).astype("float16")
                  for _ in range(2)]
            dys = [cp.random.standard_normal((n, ck), dtype=cp.float32).astype("float16")
                   for _ in range(2)]
            mb = Case(n, ck, ck, b, d, "float16").min_bytes(w.nnzb)
            eager, graph, plan = {}, {}, {}
            for _ in range(args.rounds):
                for name, form in forms.items():
                    run_sdd._resident_grid = form
                    configs.set_tiles()  # new runners, built with this form
                    with plans.override(dense=False):
                        plan[name] = PLANS["sdd"](w, xs[0], dys[0])
                        err = verify("sdd", w, xs[1], dys[1])
                        if not err < 2e-2:
                            raise AssertionError(f"b={b} N={n} {name}: error {err:.3g}")
                        def call(w=w, x=xs[0], dy=dys[0]):
                            return OPS["sdd"](w, x, dy)

                        e = bench(call, reps=100) * 1e3
                        g = graph_ms(call) * 1e3
                    eager[name] = min(eager.get(name, e), e)
                    graph[name] = min(graph.get(name, g), g)
            run_sdd._resident_grid = RESIDENT
            frac = {k: bandwidth_efficiency(mb, v * 1e-3, bw) for k, v in graph.items()}
            print(f"{b:4d} {ck:6d} {d:5.2f} {n:4d} | {eager['smem']:8.1f} {eager['driver']:7.1f}"
                  f" | {graph['smem']:8.1f} ({frac['smem']:.2f}) {graph['driver']:7.1f} "
                  f"({frac['driver']:.2f}) | {graph['driver'] / graph['smem']:5.2f}", flush=True)
            if str(plan["smem"]) != str(plan["driver"]):
                for name in forms:
                    print(f"      {name}: {plan[name]}")
            rows.append((b, ck, d, n, eager, graph, frac))
    changed = [r for r in rows if r[5]["driver"] != r[5]["smem"]]
    print(f"\n{len(rows)} op-cases; driver / smem, graph: "
          + " ".join(f"{r[5]['driver'] / r[5]['smem']:.2f}" for r in changed))


if __name__ == "__main__":
    main()
