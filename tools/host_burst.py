"""Host µs of each call of a short burst issued right after a synchronisation, by its
position in the burst, next to the per-call cost of a long back-to-back loop: whether the
benchmark's host time (bursts of 32 calls onto an idle device) pays a start-up cost.

    python tools/host_burst.py [--n 32] [--ck 4096] [--b 64] [--dtype float16]
"""

from __future__ import annotations

import argparse
import statistics
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--ck", type=int, default=4096)
    ap.add_argument("--b", type=int, default=64)
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--bursts", type=int, default=200)
    args = ap.parse_args(argv)
    import cupy as cp

    import cubsparse as cs

    lay = cs.layouts.random(args.ck // args.b, args.ck // args.b, 0.1, seed=0)
    w = cs.BlockSparseMatrix.from_layout(lay, args.b, dtype=args.dtype, seed=1, backend="cuda")
    x = cp.random.default_rng(2).standard_normal((args.n, args.ck)).astype(args.dtype)
    calls = {"cubsparse.matmul(x, W)": lambda: cs.matmul(x, w),
             "cubsparse.sampled_matmul": lambda: cs.sampled_matmul(x.T, x, like=w),
             "cupy.matmul (dense)": (lambda wd: lambda: cp.matmul(x, wd))(w.toarray())}
    try:
        import torch

        xt, wt = torch.from_dlpack(x), torch.from_dlpack(w.toarray())
        calls["torch.matmul (dense)"] = lambda: torch.matmul(xt, wt)
    except ImportError:
        pass
    print(f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, {args.dtype}, "
          f"N = {args.n}, C = K = {args.ck}, b = {args.b}")
    print(f"{'call':26s} {'loop':>6s} {'#0':>6s} {'#1':>6s} {'#2-7':>6s} {'#8-31':>6s} "
          f"{'burst':>6s}  (µs per call)")
    for name, fn in calls.items():
        for _ in range(50):
            fn()
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for _ in range(2000):
            fn()
        loop = (time.perf_counter() - t0) / 2000 * 1e6
        cp.cuda.Device().synchronize()
        pos = [[] for _ in range(32)]
        whole = []
        for _ in range(args.bursts):
            cp.cuda.Device().synchronize()
            ts = [time.perf_counter()]
            for _ in range(32):
                fn()
                ts.append(time.perf_counter())
            for i in range(32):
                pos[i].append((ts[i + 1] - ts[i]) * 1e6)
            whole.append((ts[-1] - ts[0]) / 32 * 1e6)
        med = statistics.median
        print(f"{name:26s} {loop:6.1f} {med(pos[0]):6.1f} {med(pos[1]):6.1f} "
              f"{med([t for p in pos[2:8] for t in p]):6.1f} "
              f"{med([t for p in pos[8:] for t in p]):6.1f} {med(whole):6.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
