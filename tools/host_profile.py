"""cProfile of eager calls of the three ops, to see where the host time of a call goes.

    python tools/host_profile.py [--n 32] [--ck 4096] [--b 32] [--dtype float16] [--calls 2000]
    python tools/host_profile.py --breakdown [--op sampled]   # each step of one call, timed alone
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
    ap.add_argument("--breakdown", action="store_true",
                    help="time the steps of one call apart instead of profiling")
    ap.add_argument("--op", choices=("xw", "sampled"), default="xw",
                    help="the call --breakdown takes apart: x @ W or the weight gradient")
    args = ap.parse_args(argv)
    import cupy as cp

    import cubsparse as cs

    lay = cs.layouts.random(args.ck // args.b, args.ck // args.b, args.density, seed=0)
    w = cs.BlockSparseMatrix.from_layout(lay, args.b, dtype=args.dtype, seed=1, backend="cuda")
    x = cp.ones((args.n, args.ck), args.dtype)
    if args.breakdown:
        if args.op == "sampled":
            return breakdown_sampled(cp, cs, x, w, args.calls)
        return breakdown(cp, cs, x, w, args.calls)
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


def breakdown(cp, cs, x, w, calls) -> int:
    """Host µs of each step of an eager X @ W, each timed alone in a loop."""
    from cubsparse import _ops
    from cubsparse._cuda import device, launch, outputs, run, run_dsd

    x @ w
    r = run_dsd._dsd_runner(x.shape[0], w, False, False)
    stream = run._stream()
    width = r.width
    lib = device.libcuda()
    outs = outputs.Outputs((x.shape[0], width), x.dtype)
    y_out = cp.ndarray((x.shape[0], width), x.dtype)
    m = r.main
    lk = launch._launcher()
    steps = {
        "x @ W (whole call)": lambda: x @ w,
        "cubsparse.matmul(x, W)": lambda: cs.matmul(x, w),
        "eager path (_ops.eager_matmul)": lambda: _ops.eager_matmul(x, w),
        "_cuda.dsd_eager (after the checks)": lambda: run_dsd.dsd_eager(x, w, False, False),
        "_cuda.dsd (the general path)": lambda: run_dsd.dsd(x, w, False, None, 1.0, 0.0),
        "general operand checks": lambda: _ops._matmul_operands(x, w, None, 1.0, 0.0),
        "runner lookup (general)": lambda: run_dsd._dsd_runner(x.shape[0], w, False, False),
        "cupy.ndarray (a new output)": lambda: cp.ndarray((x.shape[0], width), x.dtype),
        "Outputs.take (a reused output)": lambda: outs.take(stream),
        "current stream": run._stream,
        "runner call (parameters + launch)": lambda: r(x, w._data, y_out, 1.0, 0.0, stream),
        "Launch (cupy driver.launchKernel)": lambda: m(stream),
        "launchKernel alone": lambda: lk(m._fn, *m._shape, stream, m._pp, 0),
        "ctypes cuLaunchKernel": lambda: lib.cuLaunchKernel(m._fn, *m._shape, stream, m._pp,
                                                            None),
        "ctypes call, no launch (cuCtxGetDevice)": lambda: lib.cuCtxGetDevice(
            launch.ctypes.byref(launch.ctypes.c_int())),
    }
    _time_steps(cp, steps, calls)
    print(f"plan: {cs.matmul_plan(x, w)}")
    return 0


def breakdown_sampled(cp, cs, x, w, calls) -> int:
    """Host µs of each step of an eager ``sampled_matmul(x.T, dy, like=W)``, each timed
    alone in a loop."""
    from cubsparse import _ops
    from cubsparse._cuda import run, run_sdd

    xt, dy = x.T, x
    cs.sampled_matmul(xt, dy, like=w)
    ops = run_sdd.sdd_operands(xt, dy, False)
    key = run._key("sdd", run._get_device(), ops[6], ops[4], ops[5], False)
    r = w._runners[key]
    stream = run._stream()
    data = cp.ndarray(w._data.shape, w._data.dtype)
    m = r.main
    steps = {
        "sampled_matmul(x.T, dy, like=W) (whole call)": lambda: cs.sampled_matmul(x.T, dy,
                                                                                 like=w),
        "the same, x.T made beforehand": lambda: cs.sampled_matmul(xt, dy, like=w),
        "x.T (a CuPy view)": lambda: x.T,
        "eager path (_ops._eager_sampled)": lambda: _ops._eager_sampled(xt, dy, w, None),
        "_cuda.sdd_eager (after the checks)": lambda: run_sdd.sdd_eager(xt, dy, w, False),
        "sdd_operands": lambda: run_sdd.sdd_operands(xt, dy, False),
        "runner key": lambda: run._key("sdd", run._get_device(), ops[6], ops[4], ops[5],
                                       False),
        "Outputs.take (a reused output)": lambda: r.outputs.take(stream),
        "cupy.ndarray (a new output)": lambda: cp.ndarray(w._data.shape, w._data.dtype),
        "the result matrix (_from_parts)": lambda: type(w)._from_parts(data, w._structure,
                                                                       w._blocksize),
        "runner call (parameters + launch)": lambda: r(xt, dy, ops, data, 1.0, 0.0, stream),
        "Launch (cupy driver.launchKernel)": lambda: m(stream),
    }
    _time_steps(cp, steps, calls)
    print(f"plan: {cs.sampled_matmul_plan(xt, dy, like=w)}")
    return 0


def _time_steps(cp, steps: dict, calls: int) -> None:
    """Print the best of five loops' µs per call of each step."""
    import time

    for name, fn in steps.items():
        fn()
        cp.cuda.get_current_stream().synchronize()
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(calls // 10):
                fn()
            best = min(best, (time.perf_counter() - t0) / (calls // 10) * 1e6)
            cp.cuda.get_current_stream().synchronize()
        print(f"{name:46s} {best:7.2f} us")


if __name__ == "__main__":
    raise SystemExit(main())
