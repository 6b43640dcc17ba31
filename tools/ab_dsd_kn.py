"""Same-process A/B on the device: X @ W on the single-block wgmma kernel reading W's
blocks as stored (N-major B tile) against a block-transposed copy per call, fp16,
N=C=K=4096, d=0.25, CUDA-graph timed, interleaved rounds.

    PYTHONPATH=.:tools python3 tools/ab_dsd_kn.py [b ...]
"""

from __future__ import annotations

import sys

import cupy as cp

from cubsparse import _cuda
from gpu_probe import OPS, bench, graph_ms, setup, verify


def main():
    blocks = [int(a) for a in sys.argv[1:]] or [32, 64, 128]
    print("GPU:", cp.cuda.runtime.getDeviceProperties(0)["name"].decode())
    for b in blocks:
        W, xs, dys = setup(b, 0.25)
        times = {True: [], False: []}
        for _ in range(3):
            for kn in (True, False):
                if kn:
                    _cuda.WGMMA_DSD_KN.add(b)
                else:
                    _cuda.WGMMA_DSD_KN.discard(b)
                err = verify("fwd", W, xs[1], dys[1])
                assert err < 1e-2, err
                times[kn].append(graph_ms(lambda: OPS["fwd"](W, xs[0], dys[0]), reps=100))
        _cuda.WGMMA_DSD_KN.add(b)
        dense = bench(lambda: cp.matmul(xs[0], xs[1]), reps=50)
        print(f"b={b:4d} X@W as stored {min(times[True]):.4f}  transposed copy "
              f"{min(times[False]):.4f} ms (best of 3 rounds)  dense {dense:.4f}", flush=True)


if __name__ == "__main__":
    main()
