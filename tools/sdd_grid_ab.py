"""Same-process A/B of the short weight gradient's persistent grid: CTAs per SM counted
from shared memory alone (as plans count them, "smem") against the count the driver's
occupancy rule gives (registers too, "held"), and the rule between them
(``sdd_rules.short_grid_per_sm``, "rule"). Each op-case: an eager loop of calls back to
back (µs a call), then CUDA-graph replays (µs, and the fraction of the copy rate),
interleaved rounds, best of them, each result checked against float32 dense math; the
plans under the row where their grids differ.

    PYTHONPATH=.:tools python3 tools/sdd_grid_ab.py [--b 16,32,64,128] [--n 1,32,64,128]
        [--ck 8192,12288] [--d 0.1,0.25,0.5]
"""

from __future__ import annotations

import argparse
import itertools

from ab_decision import checked_times, gpu_banner, operand_pairs, random_case
from gpu_probe import csv_list

from bench.cases import Case
from bench.runner import bandwidth_efficiency
from cubsparse._cuda import configs, plans, run_sdd

RULE = run_sdd._resident_grid


def held(p, dev, groups):
    """The grid cut to the CTAs the driver says an SM holds, wherever fewer."""
    return RULE(p, dev, groups, rule=lambda smem, n, groups, sms: n if 0 < n < smem else smem)


FORMS = {"smem": lambda p, dev, groups: p, "held": held, "rule": RULE}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--b", type=csv_list(int), default=[16, 32, 64, 128])
    p.add_argument("--n", type=csv_list(int), default=[1, 32, 64, 128])
    p.add_argument("--ck", type=csv_list(int), default=[8192, 12288])
    p.add_argument("--d", type=csv_list(float), default=[0.1, 0.25, 0.5])
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    bw = gpu_banner()
    print(f"{'b':>4} {'C=K':>6} {'d':>5} {'N':>4} | eager us: " + " ".join(FORMS)
          + " | graph us (bw): " + " ".join(FORMS) + " | over smem: held rule")
    rows = []
    for b, ck, d in itertools.product(args.b, args.ck, args.d):
        w = random_case(ck, b, d)
        for n in args.n:
            xs, dys = operand_pairs(n, ck)
            mb = Case(n, ck, ck, b, d, "float16").min_bytes(w.nnzb)
            eager, graph, plan = {}, {}, {}
            for _ in range(args.rounds):
                for name, form in FORMS.items():
                    run_sdd._resident_grid = form
                    configs.set_tiles()  # new runners, built with this form
                    with plans.override(dense=False):
                        plan[name], e, g = checked_times("sdd", w, xs, dys, f"b={b} N={n} {name}",
                                                         eager=True)
                    eager[name] = min(eager.get(name, e), e)
                    graph[name] = min(graph.get(name, g), g)
            run_sdd._resident_grid = RULE
            frac = {k: bandwidth_efficiency(mb, v * 1e-3, bw) for k, v in graph.items()}
            print(f"{b:4d} {ck:6d} {d:5.2f} {n:4d} | "
                  + " ".join(f"{eager[k]:7.1f}" for k in FORMS) + " | "
                  + " ".join(f"{graph[k]:7.1f} ({frac[k]:.2f})" for k in FORMS)
                  + f" | {graph['held'] / graph['smem']:5.2f} {graph['rule'] / graph['smem']:5.2f}",
                  flush=True)
            if len({str(v) for v in plan.values()}) > 1:
                for name in FORMS:
                    print(f"      {name}: {plan[name]}")
            rows.append((graph, str(plan["rule"]) != str(plan["smem"])))
    print(f"\n{len(rows)} op-cases; rule / smem, graph, where the rule cut the grid: "
          + " ".join(f"{g['rule'] / g['smem']:.2f}" for g, cut in rows if cut))


if __name__ == "__main__":
    main()
