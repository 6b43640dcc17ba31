"""Same-process A/B of one plan decision on the device: each op timed with the decision
forced to each value in turn (``plans.override``), interleaved rounds, checked against
float32 dense math, beside dense cuBLAS on the densified matrix (back-to-back calls:
CuPy's cuBLAS calls cannot be captured). Times are CUDA-graph replays of one call (µs,
best of the rounds); "bw" is the op's minimum bytes over its time
over the device's copy bandwidth (measured as the bench measures it). The dense path is off
and each value's plan is printed under its row.

    PYTHONPATH=.:tools python3 tools/ab_decision.py --decision sdd_short \\
        --values true,false --ops sdd --n 1,32,128,1024 --ck 12288 --b 32,64 --d 0.1
    PYTHONPATH=.:tools python3 tools/ab_decision.py --decision kn --fixed tall=false \\
        --ops fwd --n 4096 --ck 4096 --b 32,64,128 --d 0.25
"""

from __future__ import annotations

import argparse
import itertools

import cupy as cp
from gpu_probe import OPS, PLANS, bench, csv_list, graph_ms, verify

import cubsparse as cs
from bench.cases import Case
from bench.runner import bandwidth_efficiency
from cubsparse._cuda import plans


def _value(text: str):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    return None if low == "none" else int(text)


def copy_gbps() -> float:
    """Device-to-device copy bandwidth, read + write bytes per second / 1e9: the better of
    the copy engine and CuPy's copy kernel over 1 GiB, as the bench measures its ceiling."""
    from bench import device

    return device.copy_bandwidth(device.get_backend("cuda"))["GBps"]


def random_case(ck: int, b: int, d: float, dtype: str = "float16"):
    """A random-layout W of C = K = ``ck`` on the GPU (the same layout for every tool)."""
    lay = cs.layouts.random(ck // b, ck // b, d, seed=1)
    return cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, seed=2, backend="cuda")


def operand_pairs(n: int, ck: int, dtype: str = "float16"):
    """Two fresh X and two fresh dY of ``n`` rows: one set to check, one to time."""
    def draw():
        return cp.random.standard_normal((n, ck), dtype=cp.float32).astype(dtype)

    return [draw() for _ in range(2)], [draw() for _ in range(2)]


def gpu_banner() -> float:
    """Prints the GPU's name, its copy bandwidth (:func:`copy_gbps`) and the path eager
    calls take (``bench.device.eager_path``: without the compiled path, eager figures of
    short kernels are the Python path's host time); returns the bandwidth."""
    from bench.device import eager_path

    bw = copy_gbps()
    print(f"GPU: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, copy {bw:.0f} GB/s, "
          f"eager calls: {eager_path()}")
    return bw


def checked_times(op: str, w, xs, dys, label: str, eager: bool = False):
    """``(plan, eager µs, graph µs)`` of ``op`` under the decisions and tiles in force: its
    plan, a result on the second X and dY checked against float32 dense math (an
    AssertionError naming ``label`` past 2e-2), then the first pair timed by an eager loop
    of back-to-back calls (with ``eager``, else NaN) and by CUDA-graph replay."""
    plan = PLANS[op](w, xs[0], dys[0])
    err = verify(op, w, xs[1], dys[1])
    if not err < 2e-2:
        raise AssertionError(f"{label}: error {err:.3g}")

    def call():
        return OPS[op](w, xs[0], dys[0])

    e = bench(call, reps=100) * 1e3 if eager else float("nan")
    return plan, e, graph_ms(call) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--decision", required=True, choices=plans.DECISIONS)
    parser.add_argument("--values", type=csv_list(_value), default=[True, False])
    parser.add_argument("--fixed", type=csv_list(str), default=[],
                        help="other decisions held, e.g. tall=false,split=0")
    parser.add_argument("--ops", type=csv_list(str), default=["fwd", "bwd", "sdd"])
    parser.add_argument("--n", type=csv_list(int), default=[32, 128])
    parser.add_argument("--ck", type=csv_list(int), default=[4096])
    parser.add_argument("--b", type=csv_list(int), default=[32, 64])
    parser.add_argument("--d", type=csv_list(float), default=[0.1])
    parser.add_argument("--dtype", type=csv_list(str), default=["float16"])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    fixed = {k: _value(v) for k, v in (f.split("=") for f in args.fixed)}
    fixed.setdefault("dense", False)
    bw = gpu_banner()
    vals = "  ".join(f"{v!s:>14}" for v in args.values)
    print(f"{'op':>4} {'dtype':>8} {'N':>5} {'C=K':>6} {'b':>4} {'d':>5}  {vals}  "
          f"{'dense':>7}  (us graph, bw)")
    rows = []
    for dtype, ck, b, d, n in itertools.product(args.dtype, args.ck, args.b, args.d, args.n):
        w = random_case(ck, b, d, dtype)
        xs, dys = operand_pairs(n, ck, dtype)
        wd = w.toarray()
        dense = bench(lambda x=xs[0], wd=wd: cp.matmul(x, wd), reps=50) * 1e3
        for op in args.ops:
            best, plan = {}, {}
            for _ in range(args.rounds):
                for v in args.values:
                    with plans.override(**{**fixed, args.decision: v}):
                        plan[v], _, t = checked_times(op, w, xs, dys, f"{op} {args.decision}={v}")
                        best[v] = min(best.get(v, t), t)
            mb = Case(n, ck, ck, b, d, dtype).min_bytes(w.nnzb)
            cells = "  ".join(f"{best[v]:8.1f} {bandwidth_efficiency(mb, best[v] * 1e-3, bw):5.2f}"
                              for v in args.values)
            print(f"{op:>4} {dtype:>8} {n:5d} {ck:6d} {b:4d} {d:5.2f}  {cells}  {dense:7.1f}",
                  flush=True)
            for v in args.values:
                print(f"      {args.decision}={v}: {plan[v]}")
            rows.append((op, dtype, n, ck, b, d, [best[v] for v in args.values], dense))
    print("\nsummary: time of each value over the first's")
    for op, dtype, n, ck, b, d, ts, dense in rows:
        print(f"{op:>4} {dtype:>8} N={n:<5d} C=K={ck:<6d} b={b:<4d} d={d:<5.2f} "
              + " ".join(f"{t / ts[0]:5.2f}" for t in ts) + f"  dense/first {dense / ts[0]:5.2f}")


if __name__ == "__main__":
    main()
