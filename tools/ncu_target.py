"""One launch of each op at N=C=K=4096, d=0.25, for ncu (tools/gpu_session.sh).

Usage: python tools/ncu_target.py [B] [DTYPE] (default: b=32 and 128, float16)."""
import sys

import cupy as cp

import cubsparse as cs

blocks = [int(sys.argv[1])] if len(sys.argv) > 1 else [32, 128]
dtype = sys.argv[2] if len(sys.argv) > 2 else "float16"
for b in blocks:
    W = cs.BlockSparseMatrix.from_layout(cs.layouts.random(4096 // b, 4096 // b, 0.25, seed=1), b,
                                         dtype=dtype, seed=2, backend="cuda")
    x = cp.random.standard_normal((4096, 4096), dtype=cp.float32)
    if dtype == "bfloat16":  # the top half of each float32: no bfloat16 arithmetic needed
        x = (x.view(cp.uint32) >> 16).astype(cp.uint16).view(W.dtype)
    else:
        x = x.astype(dtype)
    for _ in range(2):  # the first call compiles; ncu skips it via --launch-skip
        cs.matmul(x, W)
        cs.sampled_matmul(x.T, x, like=W)
cp.cuda.Device().synchronize()
