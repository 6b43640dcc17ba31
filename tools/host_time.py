"""Host time per eager call of the three ops next to cupy.matmul and torch.matmul, and the
eager loop against CUDA-graph replay, on small N (where the host bounds an eager script).

    python tools/host_time.py [--n 1,32,128] [--ck 1024,4096,12288] [--b 32,64]
                              [--layout random|ba|ws|banded] [--density 0.1]

Prints one row per (dtype, N, C = K, b, op) with the GPU's name (``out=`` is
``cs.matmul(x, W, out=y)`` into one array, ``smp out=`` ``cs.sampled_matmul(x.T, dy,
like=W, out=G)`` into one matrix, as the PyTorch layer calls them): host µs per call (a
burst of calls with no synchronization, divided by the calls), eager ms per call (events
around a loop of calls), graph ms per call (replay), and the same for the dense peers on
the densified matrix. The benchmark suite's ``eager`` preset is the full measurement;
this is the quick look while working on the launch path.
"""

from __future__ import annotations

import argparse
import statistics
import time


def _host_us(fn, sync, calls=40, reps=15):
    out = []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter() - t0) / calls * 1e6)
        sync()
    return statistics.median(out)


def _host_ab(fn, sync, toggle, calls=40, reps=15):
    """Host µs per call with the compiled call path on and off (``toggle(on)``), bursts of
    the two interleaved so that drift in the host's speed falls on both: the two medians."""
    out = {True: [], False: []}
    for _ in range(reps):
        for on in (True, False):
            toggle(on)
            for _ in range(3):  # a Python call plans or arms: the burst is the steady state
                fn()
            sync()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            out[on].append((time.perf_counter() - t0) / calls * 1e6)
            sync()
    toggle(True)
    return statistics.median(out[True]), statistics.median(out[False])


def _eager_ms(cp, fn, calls=200):
    s = cp.cuda.get_current_stream()
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    fn()
    e0.record(s)
    for _ in range(calls):
        fn()
    e1.record(s)
    e1.synchronize()
    return cp.cuda.get_elapsed_time(e0, e1) / calls


def _graph_ms(cp, fn, calls=50):
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        fn()
        s.begin_capture()
        for _ in range(calls):
            fn()
        g = s.end_capture()
        g.launch(s)
        s.synchronize()
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record(s)
        for _ in range(5):
            g.launch(s)
        e1.record(s)
        e1.synchronize()
    return cp.cuda.get_elapsed_time(e0, e1) / (5 * calls)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="1,32,128")
    ap.add_argument("--ck", default="1024,4096,12288")
    ap.add_argument("--b", default="32,64")
    ap.add_argument("--dtypes", default="float32,float16")
    ap.add_argument("--density", type=float, default=0.1)
    ap.add_argument("--layout", default="random", help="random, ba, ws or banded")
    ap.add_argument("--ab", action="store_true",
                    help="only host µs of cubsparse's ops, the compiled call path against the "
                         "Python path, interleaved in this process")
    args = ap.parse_args(argv)
    import cupy as cp

    import cubsparse as cs
    from bench.cases import Case, make_layout

    try:
        import torch
    except ImportError:
        torch = None
    from cubsparse._cuda import fastcall

    gpu = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    ab = []
    sync = cp.cuda.get_current_stream().synchronize
    rows = []
    for dt in args.dtypes.split(","):
        for ck in (int(v) for v in args.ck.split(",")):
            for b in (int(v) for v in args.b.split(",")):
                lay, _ = make_layout(Case(0, ck, ck, b, args.density, dt, args.layout))
                w = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dt, seed=1, backend="cuda")
                g = w.copy()
                wd = w.toarray()
                for n in (int(v) for v in args.n.split(",")):
                    rng = cp.random.default_rng(n)
                    x = rng.standard_normal((n, ck), dtype=cp.float32).astype(dt)
                    dy = rng.standard_normal((n, ck), dtype=cp.float32).astype(dt)
                    xt = torch.as_tensor(x, device="cuda") if torch else None
                    wt = torch.as_tensor(wd, device="cuda") if torch else None
                    yo = cp.empty((n, ck), dtype=dt)
                    ops = {
                        "X @ W": lambda x=x, w=w: x @ w,
                        "dY @ W.T": lambda dy=dy, w=w: dy @ w.T,
                        "out=": lambda x=x, w=w, yo=yo: cs.matmul(x, w, out=yo),
                        "sampled": lambda x=x, dy=dy, w=w: cs.sampled_matmul(x.T, dy, like=w),
                        "smp out=": lambda x=x, dy=dy, w=w, g=g: cs.sampled_matmul(
                            x.T, dy, like=w, out=g),
                        "cupy.matmul": lambda x=x, wd=wd: cp.matmul(x, wd),
                    }
                    if torch:
                        ops["torch.matmul"] = lambda xt=xt, wt=wt: torch.matmul(xt, wt)
                    if args.ab:
                        def toggle(on, w=w, g=g):
                            fastcall.ENABLED = on
                            if not on:
                                for m in (w, g):
                                    m.__dict__.pop("_fast", None)

                        for name in ("X @ W", "dY @ W.T", "out=", "sampled", "smp out="):
                            on, off = _host_ab(ops[name], sync, toggle)
                            plan = (cs.matmul_plan(x, w) if name == "X @ W" else
                                    cs.sampled_matmul_plan(x.T, dy, like=w)
                                    if name == "sampled" else "")
                            ab.append((dt, n, ck, b, name, on, off))
                            print(f"{dt:8s} N={n:<4d} C=K={ck:<6d} b={b:<3d} {name:9s} host "
                                  f"{on:6.1f} us compiled, {off:6.1f} us Python  {plan}",
                                  flush=True)
                        continue
                    for name, fn in ops.items():
                        host = _host_us(fn, sync)
                        eager = _eager_ms(cp, fn)
                        graph = None
                        if not name.startswith("torch"):
                            try:  # CuPy refuses cuBLAS inside a capture
                                graph = _graph_ms(cp, fn)
                            except NotImplementedError:
                                graph = None
                        plan = ""
                        if name == "X @ W":
                            plan = str(cs.matmul_plan(x, w))
                        rows.append((dt, n, ck, b, name, host, eager, graph, plan))
                        print(f"{dt:8s} N={n:<4d} C=K={ck:<6d} b={b:<3d} {name:13s} host "
                              f"{host:6.1f} us  eager {eager * 1e3:8.1f} us  graph "
                              f"{'-' if graph is None else f'{graph * 1e3:8.1f}'} us  {plan}",
                              flush=True)
    if args.ab:
        print(f"\n== host us per call, {gpu}, {args.layout} layouts, d = {args.density}: "
              "the compiled call path / the Python path")
        print(f"{'dtype':8s} {'N':>4s} {'C=K':>6s} {'b':>3s} " + " ".join(
            f"{name:>13s}" for name in ("X@W", "dY@W.T", "out=", "sampled", "smp out=")))
        for i in range(0, len(ab), 5):
            r = ab[i:i + 5]
            print(f"{r[0][0]:8s} {r[0][1]:4d} {r[0][2]:6d} {r[0][3]:3d} " + " ".join(
                f"{on:6.1f}/{off:6.1f}" for *_, on, off in r))
        return 0
    print(f"\n== host us per call, {gpu}, {args.layout} layouts, d = {args.density}: "
          "cubsparse ops vs cupy.matmul / torch.matmul")
    print(f"{'dtype':8s} {'N':>4s} {'C=K':>6s} {'b':>3s} {'X@W':>6s} {'dYW.T':>6s} "
          f"{'out=':>6s} {'sampl':>6s} {'smp o=':>6s} {'cupy':>6s} {'torch':>6s}  "
          "eager/graph X@W")
    key = {}
    for r in rows:
        key.setdefault(r[:4], {})[r[4]] = r
    for k, d in key.items():
        def h(name, d=d):
            return f"{d[name][5]:6.1f}" if name in d else "     -"
        xw = d["X @ W"]
        print(f"{k[0]:8s} {k[1]:4d} {k[2]:6d} {k[3]:3d} {h('X @ W')} {h('dY @ W.T')} "
              f"{h('out=')} {h('sampled')} {h('smp out=')} {h('cupy.matmul')} "
              f"{h('torch.matmul')}  "
              f"{xw[6] / xw[7]:.2f}" if xw[7] else "-")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
