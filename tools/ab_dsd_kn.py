"""Same-process A/B on the device: X @ W on the single-block wgmma kernel reading W's
blocks as stored (N-major B tile) against a block-transposed copy per call, fp16,
N=C=K=4096, d=0.25, CUDA-graph timed, interleaved rounds. Forced with
``plans.override(kn=...)``; the tall tiles (which always read W as stored) and the dense
path are off, and each side's plan is printed under the timings.

    PYTHONPATH=.:tools python3 tools/ab_dsd_kn.py [b ...]
"""

from __future__ import annotations

import argparse

import cupy as cp
from gpu_probe import OPS, PLANS, bench, graph_ms, setup, verify

from cubsparse._cuda import plans


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("blocks", type=int, nargs="*", default=[32, 64, 128],
                        help="block sizes (default: 32 64 128)")
    blocks = parser.parse_args().blocks
    print("GPU:", cp.cuda.runtime.getDeviceProperties(0)["name"].decode())
    for b in blocks:
        W, xs, dys = setup(b, 0.25)
        times = {True: [], False: []}
        plan = {}
        for _ in range(3):
            for kn in (True, False):
                with plans.override(kn=kn, tall=False, dense=False):
                    plan[kn] = PLANS["fwd"](W, xs[0], dys[0])
                    err = verify("fwd", W, xs[1], dys[1])
                    assert err < 1e-2, err
                    times[kn].append(graph_ms(lambda W=W, x=xs[0], dy=dys[0]: OPS["fwd"](W, x, dy),
                                              reps=100))
        dense = bench(lambda x=xs[0], y=xs[1]: cp.matmul(x, y), reps=50)
        print(f"b={b:4d} X@W as stored {min(times[True]):.4f}  transposed copy "
              f"{min(times[False]):.4f} ms (best of 3 rounds)  dense {dense:.4f}", flush=True)
        for kn in (True, False):
            print(f"     {plan[kn]}", flush=True)


if __name__ == "__main__":
    main()
