"""Split work lists (CUDA backend): long lists cut into segments whose float32 partial
sums the CTA that stores a list's last segment adds in slot order, in the same launch
(tensor-core kernels and IEEE float32; float64 lists are never split). The split normally
starts only for small N on skewed layouts; here it is forced with a short segment length
so every path runs. A second call that matches the first bit for bit also shows that the
lists' counters were left at zero."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import BACKENDS, poison, to_backend, to_numpy

import cubsparse as cs

# The CUDA parameter of the shared backend fixture (with its visible skip without a GPU).
pytestmark = pytest.mark.parametrize(
    "backend", [p for p in BACKENDS if p.values == ("cuda",)], indirect=True
)


@pytest.fixture
def forced_split():
    """Lists split into segments of two entries, on the sparse kernels (no dense path), in
    the regular tiles (tests/test_cuda_tiles.py splits the short ones), not the small-N
    stream-K runs (which cut the lists their own way)."""
    from cubsparse._cuda import plans

    with plans.override(split=2, dense=False, short=False, streamk=False):
        yield


@pytest.mark.parametrize(("dtype", "tf32"), [("float16", False), ("bfloat16", False),
                                        ("float32", True), ("float32", False),
                                        ("float64", False)])  # float64 is never split
@pytest.mark.parametrize("b", [16, 32, 64])
@pytest.mark.parametrize("n", [33, 200])  # 200 rows: the large-tile kernels (wgmma on Hopper)
def test_split_lists_match_scipy_and_repeat_bitwise(backend, forced_split, dtype, tf32, b, n):
    # Hub rows and columns (long lists), an empty block row, and 13 block columns: not a
    # whole number of the wgmma kernel's output groups.
    lay = cs.layouts.barabasi_albert(13, 2, seed=3)
    lay[5] = False
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, seed=1, backend=backend)
    rng = np.random.default_rng(b)
    x = to_backend(rng.standard_normal((n, 13 * b)).astype(np.float32), backend).astype(w.dtype)
    wd = to_numpy(w.toarray().astype("float64"))
    xh = to_numpy(x.astype("float64"))
    tol = 3e-3 if tf32 else cs._dtypes.TOLERANCE[dtype]
    for op, ref in ((lambda out: cs.matmul(x, w, out=out, tf32=tf32), xh @ wd),
                    (lambda out: cs.matmul(x, w.T, out=out, tf32=tf32), xh @ wd.T)):
        first = op(poison((n, 13 * b), w.dtype, backend))
        again = op(poison((n, 13 * b), w.dtype, backend))
        got = to_numpy(first.astype("float64"))
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < tol
        np.testing.assert_array_equal(to_numpy(first.view("uint8")), to_numpy(again.view("uint8")))


@pytest.mark.parametrize("dtype", ["float16", "float32"])  # float32: the IEEE SIMT kernel
@pytest.mark.parametrize("n", [7, 150])
def test_split_with_beta_accumulates(backend, forced_split, dtype, n):
    lay = cs.layouts.barabasi_albert(10, 2, seed=5)
    w = cs.BlockSparseMatrix.from_layout(lay, 32, dtype=dtype, seed=2, backend=backend)
    rng = np.random.default_rng(0)
    x = to_backend(rng.standard_normal((n, 320)).astype(dtype), backend)
    y0 = rng.standard_normal((n, 320)).astype(dtype)
    y = to_backend(y0.copy(), backend)
    cs.matmul(x, w, out=y, alpha=2.0, beta=0.5)
    ref = 2.0 * to_numpy(x).astype(np.float64) @ to_numpy(w.toarray()).astype(np.float64) + 0.5 * y0
    tol = cs._dtypes.TOLERANCE[dtype] if dtype != "float16" else 4e-3
    assert np.linalg.norm(to_numpy(y) - ref) / np.linalg.norm(ref) < tol


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("n", [40, 300])  # 300 rows: the persistent wgmma kernels on Hopper
def test_split_on_two_streams_and_in_a_cuda_graph(backend, forced_split, dtype, n):
    """Each stream has its own workspace and counters; a split product captured on a stream
    that never ran one (its counters made inside the capture) replays correctly after X and
    W.data change in place, and an eager call on that stream between replays is right too
    (it does not take the graph's counters, whose zeroing only the replays perform)."""
    import cupy

    lay = cs.layouts.barabasi_albert(12, 2, seed=7)
    w = cs.BlockSparseMatrix.from_layout(lay, 32, dtype=dtype, seed=3, backend=backend)
    rng = cupy.random.default_rng(11)
    x = rng.standard_normal((n, 384)).astype(dtype)
    tol = cs._dtypes.TOLERANCE[dtype] if dtype != "float16" else 4e-3

    def check(y):
        ref = to_numpy(x).astype(np.float64) @ to_numpy(w.toarray()).astype(np.float64)
        got = to_numpy(y).astype(np.float64)
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < tol

    first = x @ w  # the default stream
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(2)]
    outs = []
    for st in streams:
        with st:
            outs.append(x @ w)
    for st in streams:
        st.synchronize()
    for y in outs:
        np.testing.assert_array_equal(to_numpy(y.view("uint8")), to_numpy(first.view("uint8")))
    check(first)

    y = cupy.empty((n, 384), dtype)
    st = cupy.cuda.Stream(non_blocking=True)  # no split product has run on it
    with st:
        st.begin_capture()
        cs.matmul(x, w, out=y)
        graph = st.end_capture()
        check(x @ w)  # eager, on the capture stream, before any replay
        for _ in range(3):
            x[...] = rng.standard_normal(x.shape).astype(dtype)
            w.data[...] = rng.standard_normal(w.data.shape).astype(dtype)
            y.fill(cupy.nan)
            graph.launch(st)
            st.synchronize()
            check(y)
            check(x @ w)
