"""One dsd product (``X @ W``) run a few times on a bench layout, for a profiler:

    ncu --kernel-name regex:dsd_wgmma_union --launch-skip 1 --launch-count 1 \\
        python3 tools/ncu_dsd.py --layout banded --b 16 --d 0.25 --force panel=true

``--force`` takes plan decisions as ``name=value`` (``plans.override``); the dense path
stays off. The plan is printed first.
"""

from __future__ import annotations

import argparse

import cupy as cp

import cubsparse as cs
from bench.cases import Case, make_layout
from cubsparse._cuda import plans


def _decision(text: str):
    name, value = text.split("=")
    low = value.lower()
    return name, (low == "true" if low in ("true", "false") else int(value))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layout", default="random")
    parser.add_argument("--n", type=int, default=8192)
    parser.add_argument("--ck", type=int, default=8192)
    parser.add_argument("--b", type=int, default=16)
    parser.add_argument("--d", type=float, default=0.25)
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--force", type=_decision, action="append", default=[])
    args = parser.parse_args()
    lay, _ = make_layout(Case(args.n, args.ck, args.ck, args.b, args.d, args.dtype,
                              layout=args.layout))
    w = cs.BlockSparseMatrix.from_layout(lay, args.b, dtype=args.dtype, seed=2, backend="cuda")
    x = cp.random.standard_normal((args.n, args.ck), dtype=cp.float32).astype(args.dtype)
    with plans.override(dense=False, **dict(args.force)):
        print(cs.matmul_plan(x, w))
        for _ in range(args.calls):
            cs.matmul(x, w)
    cp.cuda.Device().synchronize()


if __name__ == "__main__":
    main()
