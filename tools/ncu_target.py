"""One launch of each op at N=C=K=4096, d=0.25, for ncu (tools/gpu_session.sh); the sparse
kernels (dense path off), each op's plan printed first.

Usage: python tools/ncu_target.py [B] [DTYPE] (default: b=32 and 128, float16)."""

import argparse

import cupy as cp

import cubsparse as cs
from cubsparse._cuda import plans


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("b", type=int, nargs="?", help="block size (default: 32 and 128)")
    parser.add_argument("dtype", nargs="?", default="float16")
    args = parser.parse_args()
    blocks = [args.b] if args.b is not None else [32, 128]
    dtype = args.dtype
    with plans.override(dense=False):
        for b in blocks:
            lay = cs.layouts.random(4096 // b, 4096 // b, 0.25, seed=1)
            W = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, seed=2, backend="cuda")
            x = cp.random.standard_normal((4096, 4096), dtype=cp.float32)
            if dtype == "bfloat16":  # the top half of each float32: no bfloat16 arithmetic
                x = (x.view(cp.uint32) >> 16).astype(cp.uint16).view(W.dtype)
            else:
                x = x.astype(dtype)
            print(cs.matmul_plan(x, W))
            print(cs.sampled_matmul_plan(x.T, x, like=W), flush=True)
            for _ in range(2):  # ncu skips the first (warm-up) launches via --launch-skip
                cs.matmul(x, W)
                cs.sampled_matmul(x.T, x, like=W)
    cp.cuda.Device().synchronize()


if __name__ == "__main__":
    main()
