"""Quick GPU probe of the sparse kernels: correctness of every op/dtype/blocksize against
float64 NumPy, bitwise determinism, and timings of the three ops against dense cupy.matmul
and torch BSR. Every section runs with the dense path off (``plans.override(dense=False)``),
so the kernels probed are the sparse ones whatever the cost model would pick.

    PYTHONPATH=. python tools/gpu_probe.py [--quick | --speed | --split | --fp32]

Also the helpers of the tile sweeps (``tools/tile_sweep.py``, ``tools/simt_sweep.py``) and
the A/B tools (``tools/stream_ab.py``, ``tools/sdd_stream_ab.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import time

import cupy as cp
import numpy as np

import cubsparse as cs
from cubsparse import _dtypes
from cubsparse._cuda import configs, plans, tiles


def _f64(a):
    """A CuPy array as float64 NumPy (through float32 for the 16-bit dtypes)."""
    return cp.asnumpy(a.astype(cp.float64 if a.dtype == cp.float64 else cp.float32)).astype(
        np.float64)


def rel(out, ref):
    out = out.astype(np.float64) if isinstance(out, np.ndarray) else _f64(out)
    n = np.linalg.norm(ref)
    return np.linalg.norm(out - ref) / (n if n else 1.0)


def check(dtype, b, n, cb, kb, density, layout_kind, rng):
    if layout_kind == "ba":
        lay = cs.layouts.barabasi_albert(cb, 2, seed=int(rng.integers(1 << 30)))
        kb = cb
    else:
        lay = rng.random((cb, kb)) < density
        if cb > 2:
            lay[1] = False
        if kb > 2:
            lay[:, 0] = False
    W = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, seed=int(rng.integers(1 << 30)),
                                         backend="cuda")
    Wd = _f64(W.toarray())
    x = cp.asarray(rng.standard_normal((n, cb * b)).astype(np.float32)).astype(W.dtype)
    dy = cp.asarray(rng.standard_normal((n, kb * b)).astype(np.float32)).astype(W.dtype)
    xh, dyh = _f64(x), _f64(dy)
    tol = _dtypes.TOLERANCE[np.dtype(W.dtype).name]
    res = {}
    y = cp.full((n, kb * b), cp.nan, dtype=W.dtype)
    cs.matmul(x, W, out=y)
    res["fwd"] = rel(y, xh @ Wd)
    y2 = cs.matmul(x, W)
    res["fwd_det"] = bool((y2.view(cp.uint8) == y.view(cp.uint8)).all()) if n else True
    dx = cs.matmul(dy, W.T)
    res["bwd"] = rel(dx, dyh @ Wd.T)
    mask = np.kron(lay, np.ones((b, b)))
    dW = cs.sampled_matmul(x.T, dy, like=W)
    res["sdd"] = rel(dW.toarray(), (xh.T @ dyh) * mask)
    dW2 = cs.sampled_matmul(x.T, dy, like=W)
    res["sdd_det"] = bool((dW2.data.view(cp.uint8) == dW.data.view(cp.uint8)).all())
    # accumulation and the other operand layouts
    acc = cp.asarray(rng.standard_normal((n, kb * b)).astype(np.float32)).astype(W.dtype)
    acch = _f64(acc)
    cs.matmul(x, W, out=acc, alpha=2.0, beta=0.5)
    res["beta"] = rel(acc, 2 * xh @ Wd + 0.5 * acch)
    d = cp.asarray(rng.standard_normal((kb * b, 5)).astype(np.float32)).astype(W.dtype)
    res["W@d"] = rel(W @ d, Wd @ _f64(d))
    xc = cp.ascontiguousarray(x.T)  # a row-major (C, n) operand
    if n % 8 == 0:
        dwc = cs.sampled_matmul(xc, cp.asfortranarray(dy), like=W)
        res["sdd_mk"] = rel(dwc.toarray(), (xh.T @ dyh) * mask)
    ok = (all(v < tol * (1 if k != "beta" else 2) for k, v in res.items() if isinstance(v, float))
          and all(v for v in res.values() if isinstance(v, bool)))
    return ok, res


def csv_list(kind):
    """A parser of comma-separated command-line lists: ``csv_list(int)("1,32")`` is
    ``[1, 32]``."""
    return lambda text: [kind(v) for v in text.split(",")]


ints, floats = csv_list(int), csv_list(float)


def copy_rate() -> float:
    """TB/s read + written by a device-to-device copy, as the bench measures its ceiling."""
    from bench import device

    return device.copy_bandwidth(device.get_backend("cuda"))["GBps"] / 1e3


def bench(fn, reps=30, warm=5):
    """Median of CUDA-event timings; calls are queued (no sync between them) so the host's
    launch overhead overlaps the previous call's GPU work, as in a training loop."""
    for _ in range(warm):
        fn()
    cp.cuda.Device().synchronize()
    evs = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(reps)]
    for s, e in evs:
        s.record()
        fn()
        e.record()
    evs[-1][1].synchronize()
    return float(np.median([cp.cuda.get_elapsed_time(s, e) for s, e in evs]))


def host_overhead(fn, reps=200):
    """Host microseconds per call (GPU work is tiny so the queue never fills)."""
    fn()
    cp.cuda.Device().synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    dt = (time.perf_counter() - t) / reps * 1e6
    cp.cuda.Device().synchronize()
    return dt


def setup(b, density, dtype="float16", n=4096, c=4096, k=4096):
    lay = cs.layouts.random(c // b, k // b, density, seed=1)
    W = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, seed=2, backend="cuda")
    xs = [cp.random.standard_normal((n, c), dtype=cp.float32).astype(dtype) for _ in range(3)]
    dys = [cp.random.standard_normal((n, k), dtype=cp.float32).astype(dtype) for _ in range(3)]
    return W, xs, dys


def cycler(items):
    state = [0]

    def pick():
        state[0] += 1
        return items[state[0] % len(items)]
    return pick


OPS = {
    "fwd": lambda W, x, dy: cs.matmul(x, W),
    "bwd": lambda W, x, dy: cs.matmul(dy, W.T),
    "sdd": lambda W, x, dy: cs.sampled_matmul(x.T, dy, like=W),
}
#: The plan each op of OPS runs (its str() names the kernel, tiles and grid).
PLANS = {
    "fwd": lambda W, x, dy: cs.matmul_plan(x, W),
    "bwd": lambda W, x, dy: cs.matmul_plan(dy, W.T),
    "sdd": lambda W, x, dy: cs.sampled_matmul_plan(x.T, dy, like=W),
}


def time_op(op, W, xs, dys):
    px, pd = cycler(xs), cycler(dys)
    return bench(lambda: OPS[op](W, px(), pd()))


def verify(op, W, x, dy):
    """Relative error of one result against cupy float32 dense math."""
    Wd = W.toarray().astype(cp.float32)
    xf, dyf = x.astype(cp.float32), dy.astype(cp.float32)
    if op == "fwd":
        ref, out = xf @ Wd, OPS[op](W, x, dy)
    elif op == "bwd":
        ref, out = dyf @ Wd.T, OPS[op](W, x, dy)
    else:
        mask = cp.asarray(np.kron(W.layout, np.ones((W.blocksize, W.blocksize), np.float32)))
        ref, out = (xf.T @ dyf) * mask, OPS[op](W, x, dy).toarray()
    return float(cp.linalg.norm(out.astype(cp.float32) - ref) / cp.linalg.norm(ref))


def checked_ms(op, W, xs, dys, reps, label):
    """(relative error, CUDA-graph ms, plan) of ``op`` with the current tiles and plan
    overrides, checked on one input set and timed on another; (nan, nan, None) with a
    printed line if the tile fails."""
    try:
        plan = PLANS[op](W, xs[0], dys[0])
        err = verify(op, W, xs[1], dys[1])
        return err, graph_ms(lambda: OPS[op](W, xs[0], dys[0]), reps=reps), plan
    except Exception as exc:  # a failing candidate tile is a result
        print("failed", label, str(exc).splitlines()[0][:200])
        return float("nan"), float("nan"), None


def peers(b, density, W, xs, dtype="float16"):
    Wd = W.toarray()
    px = cycler(xs)
    out = {"dense": bench(lambda: cp.matmul(px(), Wd))}
    try:
        import torch
        Wt = torch.as_tensor(Wd, device="cuda")
        bsr = Wt.T.contiguous().to_sparse_bsr((b, b))  # y.T = W.T @ x.T
        pt = cycler([torch.as_tensor(x, device="cuda") for x in xs])
        out["torch_bsr"] = bench(lambda: bsr @ pt().T)
    except Exception as exc:
        out["torch_bsr"] = float("nan")
        print("torch BSR refused:", str(exc)[:100])
    return out


def fp32_section():
    """float32: IEEE and TF32 kernels against dense SGEMM (cupy) and TF32 GEMM (torch)."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = True
    print(f"{'b':>4} {'op':>4} {'ieee ms':>8} {'tf32 ms':>8} {'sgemm':>7} {'tf32 gemm':>9} "
          f"{'eff ieee':>8} {'eff tf32':>8}")
    for b in (32, 64, 128):
        W, xs, dys = setup(b, 0.25, dtype="float32")
        Wd = W.toarray()
        px, pt = cycler(xs), cycler([torch.as_tensor(x, device="cuda") for x in xs])
        dense = bench(lambda p=px, w=Wd: cp.matmul(p(), w))
        wt = torch.as_tensor(Wd, device="cuda")
        dense_tf32 = bench(lambda p=pt, w=wt: p() @ w)
        for op in OPS:
            px, pd = cycler(xs), cycler(dys)
            f = {"fwd": lambda t, px=px, W=W: cs.matmul(px(), W, tf32=t),
                 "bwd": lambda t, pd=pd, W=W: cs.matmul(pd(), W.T, tf32=t),
                 "sdd": lambda t, px=px, pd=pd, W=W: cs.sampled_matmul(px().T, pd(), like=W,
                                                                      tf32=t)}[op]
            ti, tt = bench(lambda f=f: f(False)), bench(lambda f=f: f(True))
            print(f"{b:4d} {op:>4} {ti:8.3f} {tt:8.3f} {dense:7.3f} {dense_tf32:9.3f} "
                  f"{dense * 0.25 / ti:8.2f} {dense_tf32 * 0.25 / tt:8.2f}")


def graph_ms(fn, reps=200):
    """Median-free mean of CUDA-graph replays: host launch overhead excluded."""
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        fn()
        stream.synchronize()
        stream.begin_capture()
        fn()
        graph = stream.end_capture()
        graph.launch(stream)
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record(stream)
        for _ in range(reps):
            graph.launch(stream)
        e.record(stream)
        e.synchronize()
    return cp.cuda.get_elapsed_time(s, e) / reps


def split_section():
    """Skewed (Barabasi-Albert) layouts at small N, with and without split lists; the
    split product's plan under each row."""
    print(f"{'b':>4} {'N':>4} {'op':>4} {'unsplit ms':>10} {'split ms':>9} {'max list':>8}")
    for b, n, m in ((128, 32, 2), (32, 32, 3), (64, 128, 3)):
        lay = cs.layouts.barabasi_albert(4096 // b, m, seed=1)
        W = cs.BlockSparseMatrix.from_layout(lay, b, dtype="float16", seed=2, backend="cuda")
        x = cp.random.standard_normal((n, 4096), dtype=cp.float32).astype(cp.float16)
        for op, w in (("fwd", W), ("bwd", W.T)):
            with plans.override(split=0):
                t0 = graph_ms(lambda x=x, w=w: cs.matmul(x, w))
            t1 = graph_ms(lambda x=x, w=w: cs.matmul(x, w))
            print(f"{b:4d} {n:4d} {op:>4} {t0:10.4f} {t1:9.4f} {int(lay.sum(0).max()):8d}")
            print(f"     {cs.matmul_plan(x, w)}")


def speed_section(blocks=(16, 32, 64, 128), densities=(0.25, 1.0)):
    """The speed check: N=C=K=4096 fp16, CUDA-graph timed, against dense cupy.matmul and
    torch BSR (also graph timed), with each op's error against float32 dense math."""
    print(f"{'b':>4} {'d':>5} {'op':>4} {'ms':>7} {'dense':>7} {'torch':>7} {'eff':>5} {'err':>8}")
    for d in densities:
        for b in blocks:
            W, xs, dys = setup(b, d)
            Wd = W.toarray()
            dense = bench(lambda x=xs[0], w=Wd: cp.matmul(x, w), reps=50)
            try:
                import torch
                bsr = torch.as_tensor(Wd, device="cuda").T.contiguous().to_sparse_bsr((b, b))
                xt = torch.as_tensor(xs[0], device="cuda")
                tb = bench(lambda a=bsr, x=xt: a @ x.T, reps=50)
            except Exception as exc:
                tb = float("nan")
                print("torch BSR refused:", str(exc)[:100])
            for op in OPS:
                err = verify(op, W, xs[1], dys[1])
                t = graph_ms(lambda f=OPS[op], W=W, x=xs[0], dy=dys[0]: f(W, x, dy), reps=50)
                print(f"{b:4d} {d:5.2f} {op:>4} {t:7.4f} {dense:7.4f} {tb:7.4f} "
                      f"{dense * d / t:5.2f} {err:8.1e}")


@contextlib.contextmanager
def large_tiles_at_small_n(b):
    """The small-N tables (n <= SMALL_ROWS) hold the large-N tiles of ``b`` meanwhile."""
    keep = {"dsd_small": dict(tiles.DSD_TC_SMALL), "simt_small": dict(tiles.DSD_SIMT_SMALL)}
    configs.set_tiles(dsd_small={b: tiles.DSD_TC[b]}, simt_small={b: tiles.DSD_SIMT[b]})
    try:
        yield
    finally:
        configs.set_tiles(**keep)


def correctness_and_small_n(quick):
    dev = cp.cuda.runtime.getDeviceProperties(0)
    print("GPU:", dev["name"].decode(), "cupy", cp.__version__)
    try:
        z = cp.zeros(4, dtype=_dtypes.bfloat16)
        print("cupy bfloat16 ok:", z.dtype)
    except Exception as exc:
        print("cupy bfloat16 FAILED:", exc)
    t0 = time.time()
    cs.warmup(verbose=False)
    print(f"warmup compiled all kernels in {time.time() - t0:.1f} s")
    rng = np.random.default_rng(1234)
    fails = 0
    total = 0
    cases = [(1, 3, 5, 0.5, "rand"), (77, 4, 3, 0.6, "rand"), (256, 6, 6, 0.0, "rand"),
             (130, 5, 5, 1.0, "rand"), (96, 12, 12, 0, "ba")]
    for dtype in (["float16"] if quick else ["float16", "bfloat16", "float32", "float64"]):
        for b in [8, 16, 32, 64, 128]:
            for (n, cb, kb, d, kind) in cases:
                total += 1
                ok, res = check(dtype, b, n, cb, kb, d, kind, rng)
                if not ok:
                    fails += 1
                    print("FAIL", dtype, b, n, cb, kb, d, kind,
                          {k: (f"{v:.2e}" if isinstance(v, float) else v)
                           for k, v in res.items()})
    print(f"correctness: {total - fails}/{total} cases passed")
    W, xs, dys = setup(32, 0.02, n=32, c=1024, k=1024)
    for op in OPS:
        us = host_overhead(lambda f=OPS[op]: f(W, xs[0], dys[0]))
        print(f"host overhead {op}: {us:.1f} us/call")

    # The small-N tiles against the large-N ones (put in the small-N tables) at N = 32.
    variants = [("large tiles", large_tiles_at_small_n, ("fwd", "bwd")),
                ("small-N tiles", lambda b: contextlib.nullcontext(), ("fwd", "bwd")),
                ("sdd", lambda b: contextlib.nullcontext(), ("sdd",))]
    rows = []
    for b, d in ((32, 0.1), (64, 0.1), (128, 0.1), (32, 0.02)):
        W, xs, dys = setup(b, d, n=32, c=12288, k=12288)
        pr = peers(b, d, W, xs)
        for label, tiles_of, ops in variants:
            with tiles_of(b):
                for op in ops:
                    plan = None
                    try:
                        plan = PLANS[op](W, xs[0], dys[0])
                        err = verify(op, W, xs[0], dys[0])
                        t = time_op(op, W, xs, dys)
                    except Exception as exc:
                        print("variant failed", b, label, op, str(exc)[:300])
                        err, t = float("nan"), float("nan")
                    rows.append((b, d, op, label, t, pr["dense"], pr["torch_bsr"], err, plan))
    # Bandwidth efficiency (N=32): bytes of W's blocks + X + Y once each over 4.2 TB/s.
    print(f"{'b':>4} {'d':>5} {'op':>4} {'variant':>16} {'ms':>7} {'dense':>7} {'torch':>7} "
          f"{'bw eff':>6} {'err':>8}")
    for b, d, op, v, t, dn, tb, err, plan in rows:
        nbytes = 2 * (12288 * 12288 * d + 2 * 32 * 12288)
        print(f"{b:4d} {d:5.2f} {op:>4} {v:>16} {t:7.4f} {dn:7.4f} {tb:7.4f} "
              f"{nbytes / (t * 1e-3) / 4.2e12:6.2f} {err:8.1e}")
        print(f"     {plan}")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="correctness of float16 only (then the N = 32 timings)")
    parser.add_argument("--speed", action="store_true",
                        help="only the speed check at N = C = K = 4096")
    parser.add_argument("--split", action="store_true",
                        help="only split against whole lists on skewed layouts")
    parser.add_argument("--fp32", action="store_true",
                        help="only float32: IEEE and TF32 against SGEMM and TF32 GEMM")
    args = parser.parse_args()
    with plans.override(dense=False):  # the sparse kernels, whatever the cost model says
        if args.speed:
            print("GPU:", cp.cuda.runtime.getDeviceProperties(0)["name"].decode())
            speed_section()
        elif args.split:
            split_section()
        elif args.fp32:
            fp32_section()
        else:
            correctness_and_small_n(args.quick)


if __name__ == "__main__":
    main()
