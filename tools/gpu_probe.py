"""Quick GPU probe: correctness of every op/dtype/blocksize against float64 NumPy, bitwise
determinism, and timings of the three ops against dense cupy.matmul and torch BSR.

    PYTHONPATH=. python tools/gpu_probe.py [--quick]
"""

from __future__ import annotations

import sys
import time

import cupy as cp
import numpy as np

import cubsparse as cs
from cubsparse import _dtypes


def rel(out, ref):
    out = cp.asnumpy(out).astype(np.float64) if not isinstance(out, np.ndarray) else out.astype(np.float64)
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
    W = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, seed=int(rng.integers(1 << 30)), backend="cuda")
    Wd = cp.asnumpy(W.toarray().astype(cp.float32 if dtype != "float64" else cp.float64)).astype(np.float64)
    x = cp.asarray(rng.standard_normal((n, cb * b)).astype(np.float32)).astype(W.dtype)
    dy = cp.asarray(rng.standard_normal((n, kb * b)).astype(np.float32)).astype(W.dtype)
    xh = cp.asnumpy(x.astype(cp.float64 if dtype == "float64" else cp.float32)).astype(np.float64)
    dyh = cp.asnumpy(dy.astype(cp.float64 if dtype == "float64" else cp.float32)).astype(np.float64)
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
    res["sdd"] = rel(dW.toarray().astype(cp.float64 if dtype == "float64" else cp.float32), (xh.T @ dyh) * mask)
    dW2 = cs.sampled_matmul(x.T, dy, like=W)
    res["sdd_det"] = bool((dW2.data.view(cp.uint8) == dW.data.view(cp.uint8)).all())
    # accumulation and the other operand layouts
    acc = cp.asarray(rng.standard_normal((n, kb * b)).astype(np.float32)).astype(W.dtype)
    acch = cp.asnumpy(acc.astype(cp.float64)) if dtype == "float64" else cp.asnumpy(acc.astype(cp.float32)).astype(np.float64)
    cs.matmul(x, W, out=acc, alpha=2.0, beta=0.5)
    res["beta"] = rel(acc, 2 * xh @ Wd + 0.5 * acch)
    d = cp.asarray(rng.standard_normal((kb * b, 5)).astype(np.float32)).astype(W.dtype)
    dh = cp.asnumpy(d.astype(cp.float64 if dtype == "float64" else cp.float32)).astype(np.float64)
    res["W@d"] = rel(W @ d, Wd @ dh)
    xc = cp.ascontiguousarray(x.T)  # a row-major (C, n) operand
    if n % 8 == 0:
        res["sdd_mk"] = rel(cs.sampled_matmul(xc, cp.asfortranarray(dy), like=W).toarray().astype(cp.float64), (xh.T @ dyh) * mask)
    ok = all(v < tol * (1 if k != "beta" else 2) for k, v in res.items() if isinstance(v, float)) and all(v for v in res.values() if isinstance(v, bool))
    return ok, res


def bench(fn, reps=30, warm=5):
    for _ in range(warm):
        fn()
    s, e = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(reps):
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(cp.cuda.get_elapsed_time(s, e))
    return float(np.median(times))


def perf(b, density, dtype="float16", n=4096, c=4096, k=4096):
    rng = np.random.default_rng(0)
    lay = cs.layouts.random(c // b, k // b, density, seed=1)
    W = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, seed=2, backend="cuda")
    xs = [cp.random.standard_normal((n, c), dtype=cp.float32).astype(dtype) for _ in range(3)]
    dys = [cp.random.standard_normal((n, k), dtype=cp.float32).astype(dtype) for _ in range(3)]
    Wd = W.toarray()
    it = iter(range(10**9))
    pick = lambda l: l[next(it) % len(l)]
    out = {}
    out["dense"] = bench(lambda: cp.matmul(pick(xs), Wd))
    out["fwd"] = bench(lambda: cs.matmul(pick(xs), W))
    out["bwd"] = bench(lambda: cs.matmul(pick(dys), W.T))
    out["sdd"] = bench(lambda: cs.sampled_matmul(pick(xs).T, pick(dys), like=W))
    try:
        import torch
        tdt = getattr(torch, dtype)
        Wt = torch.as_tensor(Wd, device="cuda")
        bsr = Wt.T.contiguous().to_sparse_bsr((b, b))  # y.T = W.T @ x.T
        xt = [torch.as_tensor(x, device="cuda") for x in xs]
        out["torch_bsr"] = bench(lambda: (bsr @ pick(xt).T))
    except Exception as exc:  # noqa: BLE001
        out["torch_bsr"] = f"refused: {str(exc)[:80]}"
    return out


def main():
    quick = "--quick" in sys.argv
    dev = cp.cuda.runtime.getDeviceProperties(0)
    print("GPU:", dev["name"].decode(), "cupy", cp.__version__)
    try:
        z = cp.zeros(4, dtype=_dtypes.bfloat16); print("cupy bfloat16 ok:", z.dtype)
    except Exception as exc:  # noqa: BLE001
        print("cupy bfloat16 FAILED:", exc)
    t0 = time.time()
    cs.warmup(verbose=False)
    print(f"warmup compiled all kernels in {time.time() - t0:.1f} s")
    rng = np.random.default_rng(1234)
    fails = 0
    total = 0
    for dtype in ["float16", "bfloat16", "float32", "float64"]:
        for b in [8, 16, 32, 64, 128]:
            for (n, cb, kb, d, kind) in [(1, 3, 5, 0.5, "rand"), (77, 4, 3, 0.6, "rand"), (256, 6, 6, 0.0, "rand"), (130, 5, 5, 1.0, "rand"), (96, 12, 12, 0, "ba")]:
                total += 1
                ok, res = check(dtype, b, n, cb, kb, d, kind, rng)
                if not ok:
                    fails += 1
                    print("FAIL", dtype, b, n, cb, kb, d, kind, {k: (f"{v:.2e}" if isinstance(v, float) else v) for k, v in res.items()})
    print(f"correctness: {total - fails}/{total} cases passed")
    rows = []
    for b in ([32, 64] if quick else [16, 32, 64, 128]):
        for d in [0.25] if quick else [0.05, 0.25]:
            r = perf(b, d)
            rows.append((b, d, r))
    print(f"{'b':>4} {'d':>5} {'dense':>8} {'fwd':>8} {'bwd':>8} {'sdd':>8} {'torchbsr':>9}  eff(fwd,bwd,sdd)")
    for b, d, r in rows:
        eff = [r["dense"] * d / r[k] for k in ("fwd", "bwd", "sdd")]
        tb = r["torch_bsr"] if isinstance(r["torch_bsr"], str) else f"{r['torch_bsr']:.3f}"
        print(f"{b:4d} {d:5.2f} {r['dense']:8.3f} {r['fwd']:8.3f} {r['bwd']:8.3f} {r['sdd']:8.3f} {tb:>9}  " + " ".join(f"{e:.2f}" for e in eff))


if __name__ == "__main__":
    main()
