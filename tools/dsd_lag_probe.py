"""The tall TMA dsd tile (b = 64 and 128) with its second consumer warpgroup held back:
both warpgroups own half of each block's columns over the tile's rows and share every
stage, but nothing else ties them, so a lag given at the start could carry from tile to
tile, one warpgroup's epilogue then running beside the other's MMAs instead of both at
once while the tensor cores idle (bench/NOTES.md 255-260). ``start:NS`` sleeps warpgroup 1
NS nanoseconds once, before its first tile; ``tile:NS`` before each of its tiles. Timed as
eager calls back to back beside dense cuBLAS; each result is checked bit for bit against
the kernel as shipped (a lag changes no value). The kernel source is patched in this
process only.

    PYTHONPATH=.:tools python3 tools/dsd_lag_probe.py [--cases 128:0.1,...] [--lags ...]
"""

from __future__ import annotations

import argparse
import functools

from dsd_time_split import case_operands, use_source

from cubsparse._cuda import compile as cc

CONSUMER = "    const int wg = tid / 128;  // consumer warpgroup\n"
TILE = "      const int j = item.x, len = item.z, slot = item.w;\n"
_SOURCE = cc.source.__wrapped__


def lagged_source(lag: str):
    """``compile.source`` with warpgroup 1 of the TMA dsd held back as ``lag`` says."""
    where, ns = lag.split(":") if ":" in lag else ("none", "0")

    def source(family: str) -> str:
        text = _SOURCE(family)
        if family != "dsd_wgmma_tma" or where == "none":
            return text
        anchor = CONSUMER if where == "start" else TILE
        if text.count(anchor) != 1:
            raise RuntimeError("dsd_wgmma_tma.cu changed: no consumer start to patch")
        sleep = f"    if (XN > 0 && tid / 128 == 1) __nanosleep({int(ns)});\n"
        return text.replace(anchor, anchor + sleep)

    return source


def main():
    import cupy as cp
    from gpu_probe import bench

    import cubsparse as cs
    from cubsparse._cuda import plans

    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layout", default="random")
    parser.add_argument("--n", type=int, default=8192)
    parser.add_argument("--cases", default="128:0.05,128:0.1,128:0.25,128:0.5", help="b:d")
    parser.add_argument("--ops", default="fwd", help="fwd, bwd or fwd,bwd")
    parser.add_argument("--lags", default="start:500,start:1000,start:2000,start:4000,tile:500")
    args = parser.parse_args()
    lags = ["none", *args.lags.split(",")]
    print(cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "- eager ms back to back,",
          args.layout, "layouts, N = C = K =", args.n, "float16; shipped timed first and last")
    print(f"{'b':>4} {'d':>5} {'op':>4}  " + "  ".join(f"{m:>11}" for m in lags)
          + f"  {'none':>11}   dense")
    for b, w, x, dense in case_operands(args.cases, args.n, args.layout):
        for op in args.ops.split(","):
            call = functools.partial(cs.matmul, x, w if op == "fwd" else w.T)
            ms, want = [], None
            for lag in [*lags, "none"]:
                use_source(lagged_source(lag))
                with plans.override(dense=False):
                    got = call()
                    if want is None:
                        want = got
                    elif not bool((got == want).all()):
                        raise AssertionError(f"b={b} {op} {lag}: not the shipped result")
                    ms.append(bench(call, reps=10))
            print(f"{b:4d} {w.density:5.3f} {op:>4}  " + "  ".join(f"{t:11.4f}" for t in ms)
                  + f"   {dense:.3f}", flush=True)
    use_source(_SOURCE)


if __name__ == "__main__":
    main()
