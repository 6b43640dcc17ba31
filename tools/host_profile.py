"""cProfile of eager calls of the three ops, to see where the host time of a call goes.

    python tools/host_profile.py [--n 32] [--ck 4096] [--b 32] [--dtype float16] [--calls 2000]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--ck", type=int, default=4096)
    ap.add_argument("--b", type=int, default=32)
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--density", type=float, default=0.1)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--top", type=int, default=18)
    args = ap.parse_args(argv)
    import cupy as cp

    import cubsparse as cs

    lay = cs.layouts.random(args.ck // args.b, args.ck // args.b, args.density, seed=0)
    w = cs.BlockSparseMatrix.from_layout(lay, args.b, dtype=args.dtype, seed=1, backend="cuda")
    x = cp.ones((args.n, args.ck), args.dtype)
    ops = {"X @ W": lambda: x @ w, "dY @ W.T": lambda: x @ w.T,
           "sampled": lambda: cs.sampled_matmul(x.T, x, like=w)}
    for name, fn in ops.items():
        fn()
        cp.cuda.get_current_stream().synchronize()
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.calls):
            fn()
        prof.disable()
        cp.cuda.get_current_stream().synchronize()
        print(f"== {name}: {args.calls} calls, {args.dtype}, N = {args.n}, C = K = {args.ck}, "
              f"b = {args.b}")
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
