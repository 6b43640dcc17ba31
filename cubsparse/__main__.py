"""``python -m cubsparse``: build a layout, run the three products of a block-sparse layer,
check them against SciPy BSR in float64 and time them next to the dense product.

For a layer ``Y = X @ W`` with a block-sparse weight ``W`` (C x K) and a batch ``X``
(N x C), training needs three products:

* forward ``Y = X @ W``                                 -- ``matmul(X, W)``
* input gradient ``dX = dY @ W.T``                     -- ``matmul(dY, W.T)``
* weight gradient ``dW = (X.T @ dY)`` on W's blocks    -- ``sampled_matmul(X.T, dY, like=W)``

Run ``python -m cubsparse --help`` for the options. The exit status is 0 when every
check passes, 1 when one fails and 2 for a usage error.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence

import numpy as np

import cubsparse as cs
from cubsparse import _dtypes, layouts

LAYOUTS = ("random", "barabasi_albert", "watts_strogatz", "banded")
DTYPES = ("float16", "bfloat16", "float32", "float64")

#: Defaults per backend: the CPU run finishes in seconds on two cores, the GPU run is large
#: enough for the kernels to fill the device.
DEFAULTS = {
    "cpu": {"n": 256, "c": 1024, "dtype": "float32", "repeats": 5},
    "cuda": {"n": 4096, "c": 4096, "dtype": "float16", "repeats": 20},
}

#: Rows of Y and dX compared with the float64 reference. Those two products are row by row,
#: so a sample (always holding the first and last rows) checks them; SciPy's single-threaded
#: BSR product would otherwise dominate the run time of the GPU-sized defaults.
CHECK_ROWS = 1024

#: Rewiring probability of the Watts-Strogatz layout.
REWIRE = 0.1


# --------------------------------------------------------------------------- arguments


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Defaults shown in the help, except those that depend on the backend (None here: the
    help text names them)."""

    def _get_help_string(self, action):
        if action.default is None:
            return action.help
        return super()._get_help_string(action)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m cubsparse",
        description=(
            "Demo of cubsparse: a block-sparse weight W (C x K) in a layer Y = X @ W with a "
            "batch X (N x C). Runs the forward product, the input gradient and the weight "
            "gradient, checks them against SciPy BSR in float64 and times them next to the "
            "dense product of the same shape."
        ),
        epilog=(
            f"Defaults: on CPU N={DEFAULTS['cpu']['n']}, C=K={DEFAULTS['cpu']['c']}, "
            f"{DEFAULTS['cpu']['dtype']}; on CUDA N=C=K={DEFAULTS['cuda']['n']}, "
            f"{DEFAULTS['cuda']['dtype']}. Exit status: 0 all checks pass, 1 a check "
            "fails, 2 usage error."
        ),
        formatter_class=_HelpFormatter,
    )
    p.add_argument(
        "--backend", choices=("auto", "cpu", "cuda"), default="auto",
        help="where to run: auto picks cuda when CuPy sees a GPU",
    )
    cpu, cuda = DEFAULTS["cpu"], DEFAULTS["cuda"]
    p.add_argument("--n", type=int, help=f"rows of X (the batch) (default: {cpu['n']} on CPU, "
                   f"{cuda['n']} on CUDA)")
    p.add_argument("--c", type=int, help=f"rows of W (inputs of the layer) (default: "
                   f"{cpu['c']} on CPU, {cuda['c']} on CUDA)")
    p.add_argument("--k", type=int, help="columns of W (outputs of the layer) (default: C)")
    p.add_argument("--blocksize", type=int, default=32, choices=cs.BLOCK_SIZES)
    p.add_argument(
        "--density", type=float, default=0.25,
        help="fraction of non-zero blocks (graph layouts get as close as their parameters allow)",
    )
    p.add_argument("--dtype", choices=DTYPES, help=f"(default: {cpu['dtype']} on CPU, "
                   f"{cuda['dtype']} on CUDA)")
    p.add_argument("--layout", choices=LAYOUTS, default="random")
    p.add_argument("--seed", type=int, default=0, help="seed of the layout, W, X and dY")
    p.add_argument("--repeats", type=int, help=f"timed runs per product, the median reported "
                   f"(default: {cpu['repeats']} on CPU, {cuda['repeats']} on CUDA)")
    return p


def _resolve(p: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    args = p.parse_args(argv)
    if args.backend == "auto":
        args.backend = "cuda" if cs.cuda_available() else "cpu"
    elif args.backend == "cuda" and not cs.cuda_available():
        p.error(
            "--backend cuda: CuPy is not installed or sees no GPU; install the CUDA extra "
            "(pip install -e '.[test,cuda13]' or [cuda12]) on a machine with an NVIDIA GPU"
        )
    d = DEFAULTS[args.backend]
    args.n = d["n"] if args.n is None else args.n
    args.c = d["c"] if args.c is None else args.c
    args.k = args.c if args.k is None else args.k
    args.dtype = d["dtype"] if args.dtype is None else args.dtype
    args.repeats = d["repeats"] if args.repeats is None else args.repeats

    b = args.blocksize
    if args.seed < 0:
        p.error(f"--seed must be a non-negative integer, got {args.seed}")
    for name in ("n", "c", "k", "repeats"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    for name in ("c", "k"):
        if getattr(args, name) % b:
            p.error(
                f"--{name} must be a multiple of --blocksize {b}, got {getattr(args, name)}"
            )
    if not 0.0 < args.density <= 1.0:
        p.error(f"--density must be in (0, 1], got {args.density}")
    if args.layout in ("barabasi_albert", "watts_strogatz"):
        if args.c != args.k:
            p.error(
                f"--layout {args.layout} is the adjacency matrix of a graph, so its block "
                f"grid is square: C and K must be equal, got C={args.c}, K={args.k} (drop "
                "--k, or use --layout random or banded)"
            )
        if args.layout == "barabasi_albert" and args.c // b < 2:
            p.error(
                f"--layout barabasi_albert needs at least 2 block rows, got C/b = {args.c // b}"
            )
    try:
        args.np_dtype = _dtypes.as_dtype(args.dtype)
    except TypeError as exc:
        p.error(str(exc))
    return args


# --------------------------------------------------------------------------- layout


def _make_layout(kind: str, rows: int, cols: int, density: float, seed: int):
    """The layout and a description of the generator call that made it."""
    if kind == "random":
        return layouts.random(rows, cols, density, seed=seed), (
            f"random({rows}, {cols}, density={density:g}, seed={seed})"
        )
    if kind == "barabasi_albert":
        # m edges per new node and the diagonal: about (1 + 2m) blocks per row.
        m = min(max(round((density * rows - 1) / 2), 1), rows - 1)
        return layouts.barabasi_albert(rows, m, seed=seed), (
            f"barabasi_albert({rows}, m={m}, seed={seed})"
        )
    if kind == "watts_strogatz":
        # k ring neighbours and the diagonal: k + 1 blocks per row; k even and < n.
        k = 2 * max(round((density * rows - 1) / 2), 0)
        k = min(k, rows - 1 - (rows - 1) % 2)
        return layouts.watts_strogatz(rows, k, REWIRE, seed=seed), (
            f"watts_strogatz({rows}, k={k}, p={REWIRE}, seed={seed})"
        )
    # banded: 2 * width + 1 blocks per (interior) row.
    width = max(round((density * cols - 1) / 2), 0)
    return layouts.banded(rows, width, cols=cols), f"banded({rows}, width={width}, cols={cols})"


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:.2f} MiB"


def _print_layout(desc: str, layout, args) -> None:
    s = layouts.summary(layout)
    b, item = args.blocksize, args.np_dtype.itemsize
    rows = [
        ("generator", f"layouts.{desc}"),
        ("W", f"{args.c} x {args.k} = {s['rows']} x {s['cols']} blocks of {b} x {b}"),
        (
            "blocks",
            f"{s['nnzb']} of {s['rows'] * s['cols']} non-zero, density {s['density']:.3f} "
            f"(asked {args.density:g})",
        ),
        ("per block row", f"min {s['row_min']}, mean {s['row_mean']:.1f}, max {s['row_max']}"),
        ("per block col", f"min {s['col_min']}, mean {s['col_mean']:.1f}, max {s['col_max']}"),
        ("empty", f"{s['empty_rows']} block rows, {s['empty_cols']} block columns"),
        (
            "memory",
            f"{_mib(s['nnzb'] * b * b * item)} as blocks vs {_mib(args.c * args.k * item)} "
            f"dense ({args.np_dtype.name})",
        ),
    ]
    for key, value in rows:
        print(f"    {key:<14} {value}")


# --------------------------------------------------------------------------- timing


def _timer(backend: str) -> Callable[[Callable[[], object], int], float]:
    """``time(fn, repeats)``: median seconds of ``repeats`` calls after one untimed call."""
    if backend == "cuda":
        import cupy

        def time_cuda(fn, repeats):
            fn()
            cupy.cuda.get_current_stream().synchronize()
            events = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(repeats)]
            for start, stop in events:
                start.record()
                fn()
                stop.record()
            events[-1][1].synchronize()
            return statistics.median(
                cupy.cuda.get_elapsed_time(start, stop) for start, stop in events
            ) / 1e3

        return time_cuda

    def time_cpu(fn, repeats):
        fn()
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    return time_cpu


def _fmt_time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.1f} us"


# --------------------------------------------------------------------------- checks


def _rel_error(got: np.ndarray, ref: np.ndarray) -> float:
    got = np.asarray(got, dtype=np.float64)
    num = float(np.linalg.norm(got - ref))
    den = float(np.linalg.norm(ref))
    return num / den if den else num


def _host64(array) -> np.ndarray:
    host = array if isinstance(array, np.ndarray) else array.get()
    return host.astype(np.float64)


def _device_line(backend: str) -> str:
    versions = f"NumPy {np.__version__}"
    try:
        import scipy

        versions += f", SciPy {scipy.__version__}"
    except ImportError:  # pragma: no cover - scipy is a dependency
        pass
    if backend == "cuda":
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        name = props["name"]
        name = name.decode() if isinstance(name, bytes) else name
        rt = cupy.cuda.runtime.runtimeGetVersion()
        return (
            f"{name} (sm_{props['major']}{props['minor']}), CuPy {cupy.__version__}, "
            f"CUDA runtime {rt // 1000}.{rt % 1000 // 10}, {versions}"
        )
    cpu = platform.processor() or platform.machine()
    return f"CPU {cpu}, {os.cpu_count()} cores, {versions}"


# --------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; ``argv`` defaults to ``sys.argv[1:]``. Returns the exit status."""
    args = _resolve(_parser(), argv)
    backend, dtype, b = args.backend, args.np_dtype, args.blocksize
    n, c, k = args.n, args.c, args.k
    steps = 5

    def step(i: int, msg: str) -> None:
        print(f"[{i}/{steps}] {msg}", flush=True)

    print(f"cubsparse {cs.__version__} demo on the {backend} backend")
    print(f"    {_device_line(backend)}")
    print(
        f"    layer Y = X @ W with X {n} x {c}, W {c} x {k} block-sparse "
        f"(blocksize {b}), {dtype.name}"
    )

    step(1, f"building the {args.layout} layout")
    t0 = time.perf_counter()
    layout, desc = _make_layout(args.layout, c // b, k // b, args.density, args.seed)
    _print_layout(desc, layout, args)
    if not layout.any():
        print(
            f"error: the layout has no blocks; raise --density (got {args.density:g})",
            file=sys.stderr,
        )
        return 2
    print(f"    built in {_fmt_time(time.perf_counter() - t0)}")

    step(2, f"making W, X and dY on the {backend} backend")
    W = cs.BlockSparseMatrix.from_layout(layout, b, dtype=dtype, seed=args.seed, backend=backend)
    rng = np.random.default_rng(args.seed + 1)
    x_host = rng.standard_normal((n, c), dtype=np.float32).astype(dtype)
    dy_host = rng.standard_normal((n, k), dtype=np.float32).astype(dtype)
    if backend == "cuda":
        import cupy as xp
    else:
        xp = np
    X, dY = xp.asarray(x_host), xp.asarray(dy_host)
    print(f"    {W!r}")

    if backend == "cuda":
        step(3, f"compiling the CUDA kernels for {dtype.name}, blocksize {b} (cs.warmup)")
        t0 = time.perf_counter()
        names = cs.warmup(dtypes=[dtype], blocksizes=[b])
        print(f"    {len(names)} kernels ready in {_fmt_time(time.perf_counter() - t0)}")
    else:
        step(3, "nothing to compile on the CPU backend (cs.warmup is a no-op)")

    # (result, cubsparse call, the call, useful flops)
    flops = 2 * n * W.nnz
    ops = [
        ("Y ", "matmul(X, W)", lambda: cs.matmul(X, W), flops),
        ("dX", "matmul(dY, W.T)", lambda: cs.matmul(dY, W.T), flops),
        (
            "dW",
            "sampled_matmul(X.T, dY, like=W)",
            lambda: cs.sampled_matmul(X.T, dY, like=W),
            flops,
        ),
    ]

    step(4, "checking each product against SciPy BSR in float64")
    tol = _dtypes.TOLERANCE[dtype.name]
    Ws = W.to_scipy().astype(np.float64)
    x64, dy64 = x_host.astype(np.float64), dy_host.astype(np.float64)
    if n > CHECK_ROWS:
        rows = np.unique(np.r_[0, n - 1, rng.choice(n, CHECK_ROWS - 2, replace=False)])
    else:
        rows = np.arange(n)
    errors = []
    for label, call, fn, _ in ops:
        t0 = time.perf_counter()
        result = fn()
        if label == "Y ":
            err = _rel_error(_host64(result)[rows], x64[rows] @ Ws)
        elif label == "dX":
            err = _rel_error(_host64(result)[rows], dy64[rows] @ Ws.T)
        else:
            got = result.to_scipy()
            if not (
                np.array_equal(got.indptr, Ws.indptr) and np.array_equal(got.indices, Ws.indices)
            ):
                err = float("inf")  # the result must keep W's layout
            else:
                # Reference blocks of X.T @ dY at W's (row, col) positions, in W's order.
                full = (x64.T @ dy64).reshape(c // b, b, k // b, b)
                block_rows = np.repeat(np.arange(c // b), np.diff(Ws.indptr))
                ref = full[block_rows, :, Ws.indices, :]
                err = _rel_error(got.data, ref)
        errors.append(err)
        verdict = "PASS" if err <= tol else "FAIL"
        print(
            f"    {call:<32} rel. error {err:.2e} (tol {tol:.1e}) {verdict}  "
            f"[{_fmt_time(time.perf_counter() - t0)}]",
            flush=True,
        )
    checked = "all" if len(rows) == n else f"{len(rows)} sampled"
    print(f"    (Y and dX compared on {checked} of {n} rows; dW on all {W.nnzb} blocks)")

    step(5, f"timing, median of {args.repeats} runs after one warm-up run")
    timer = _timer(backend)
    # NumPy has no fast half-precision GEMM, so the CPU's dense peer of a half type runs in
    # float32 (which is also what cubsparse computes in).
    dense_dtype = (
        _dtypes.compute_dtype(dtype) if backend == "cpu" and _dtypes.is_half(dtype) else dtype
    )
    Wd = W.toarray().astype(dense_dtype, copy=False)
    Xd, dYd = X.astype(dense_dtype, copy=False), dY.astype(dense_dtype, copy=False)
    dense = [lambda: Xd @ Wd, lambda: dYd @ Wd.T, lambda: Xd.T @ dYd]
    dense_flops = [2 * n * c * k] * 3
    timings = []
    for (_, call, fn, _), dfn in zip(ops, dense, strict=True):
        ts = timer(fn, args.repeats)
        td = timer(dfn, args.repeats)
        timings.append((ts, td))
        print(f"    {call:<32} {_fmt_time(ts):>12}   dense {_fmt_time(td):>12}", flush=True)

    peer = "cupy.matmul" if backend == "cuda" else "numpy.matmul"
    if dense_dtype != dtype:
        peer += f" in {dense_dtype.name}"
    unit, scale = ("TFLOP/s", 1e12) if backend == "cuda" else ("GFLOP/s", 1e9)
    header = (
        f"{'product':<38} {'cubsparse':>11} {unit:>8}  {'dense':>11} {unit:>8} "
        f"{'speedup':>8} {'rel. error':>10} {'check':>5}"
    )
    rule = "-" * len(header)
    print()
    print(f"Results: {dtype.name} on {backend}, dense peer {peer} of the same shape")
    print(rule)
    print(header)
    print(rule)
    for (label, call, _, work), (ts, td), err, dwork in zip(
        ops, timings, errors, dense_flops, strict=True
    ):
        verdict = "PASS" if err <= tol else "FAIL"
        print(
            f"{label} = {call:<33} {_fmt_time(ts):>11} {work / ts / scale:>8.1f}  "
            f"{_fmt_time(td):>11} {dwork / td / scale:>8.1f} {td / ts:>7.2f}x "
            f"{err:>10.2e} {verdict:>5}"
        )
    print(rule)
    print(f"{unit} count useful work: 2*N*nnz(W) for cubsparse, 2*N*C*K for dense.")
    if backend == "cpu":
        print("The CPU backend is the reference implementation (NumPy and SciPy), not a fast "
              "path: its times are not\nthe library's speed. The CUDA backend's are in "
              "docs/performance.md.")
    print(
        f"At density {W.density:.3f} cubsparse does {W.density:.1%} of the dense work: "
        f"ideal speedup {1 / W.density:.2f}x."
    )
    print(f"Tolerance for {dtype.name}: {tol:.1e} relative Frobenius error against float64.")

    failed = [ops[i][1] for i, e in enumerate(errors) if not e <= tol]
    if failed:
        print(f"FAIL: {', '.join(failed)} exceeded the {dtype.name} tolerance {tol:.1e}")
        return 1
    print(f"PASS: all 3 products match SciPy BSR (float64) within {tol:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
