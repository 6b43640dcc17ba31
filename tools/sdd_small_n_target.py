"""A target for ncu: the weight gradient at a few rows (default b = 128, N = 32,
C = K = 12288, d = 0.5, float16), called three times, with plan decisions forced as
``name=value`` arguments.

    ncu -k regex:sdd_wgmma --launch-skip 1 --launch-count 1 \\
        python3 tools/sdd_small_n_target.py [b] [n] [density] [decision=value ...]
"""
import sys

import cupy as cp

import cubsparse as cs
from cubsparse._cuda import plans

args = [a for a in sys.argv[1:] if "=" not in a]
forced = {k: v.lower() == "true" if v.lower() in ("true", "false") else int(v)
          for k, v in (a.split("=") for a in sys.argv[1:] if "=" in a)}
b, n, d = (int(args[0]) if args else 128, int(args[1]) if len(args) > 1 else 32,
           float(args[2]) if len(args) > 2 else 0.5)
ck = 12288
w = cs.BlockSparseMatrix.from_layout(cs.layouts.random(ck // b, ck // b, d, seed=1), b,
                                     dtype="float16", seed=2, backend="cuda")
x = cp.random.standard_normal((n, ck), dtype=cp.float32).astype("float16")
dy = cp.random.standard_normal((n, ck), dtype=cp.float32).astype("float16")
with plans.override(dense=False, **forced):
    print(cs.sampled_matmul_plan(x.T, dy, like=w))
    for _ in range(3):
        cs.sampled_matmul(x.T, dy, like=w)
cp.cuda.Device().synchronize()
