"""TF32 opt-in for float32: the keyword, the CUPY_TF32 convention, and its accuracy.

On the CUDA backend ``tf32=True`` routes float32 through the tensor-core kernels; the
result must stay within TF32's error (10-bit mantissa) of a float64 reference, and must
differ from the IEEE result (showing the other path ran). The CPU backend always computes
IEEE float32, so there both settings agree exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import poison, to_backend, to_numpy

import cubsparse as cs

TF32_TOL = 3e-3  # relative Frobenius error; TF32 rounds each operand to 11 significant bits


def _rel(out, ref):
    return np.linalg.norm(to_numpy(out).astype(np.float64) - ref) / np.linalg.norm(ref)


@pytest.fixture(params=[8, 32, 128], ids=lambda b: f"b{b}")
def problem(request, backend):
    b = request.param
    rng = np.random.default_rng(b)
    lay = rng.random((3, 4)) < 0.6
    lay[0, 0] = True
    lay[1] = False  # an empty block row
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype="float32", seed=b, backend=backend)
    x = rng.standard_normal((37, 3 * b)).astype(np.float32)
    dy = rng.standard_normal((37, 4 * b)).astype(np.float32)
    return w, x, dy


@pytest.mark.parametrize("op", ["x@W", "dy@W.T", "sdd", "W@d"])
def test_tf32_accuracy_and_path(problem, backend, op):
    w, x, dy = problem
    wd = to_numpy(w.toarray()).astype(np.float64)
    xb, dyb = to_backend(x, backend), to_backend(dy, backend)
    mask = np.kron(w.layout, np.ones((w.blocksize, w.blocksize)))
    if op == "x@W":
        def run(tf32):
            out = poison((37, w.shape[1]), np.float32, backend)
            return cs.matmul(xb, w, out=out, tf32=tf32)
        ref = x.astype(np.float64) @ wd
    elif op == "dy@W.T":
        run = lambda tf32: cs.matmul(dyb, w.T, tf32=tf32)  # noqa: E731
        ref = dy.astype(np.float64) @ wd.T
    elif op == "sdd":
        run = lambda tf32: cs.sampled_matmul(xb.T, dyb, like=w, tf32=tf32).toarray()  # noqa: E731
        ref = (x.T.astype(np.float64) @ dy) * mask
    else:
        run = lambda tf32: cs.matmul(w, dyb[:5].T, tf32=tf32)  # noqa: E731
        ref = wd @ dy[:5].T.astype(np.float64)
    fast, ieee = to_numpy(run(True)), to_numpy(run(False))
    assert np.isfinite(fast).all()
    assert _rel(fast, ref) < TF32_TOL
    assert _rel(ieee, ref) < 1e-5
    if backend == "cuda":
        assert not np.array_equal(fast, ieee), "tf32=True gave the IEEE result"
    else:
        np.testing.assert_array_equal(fast, ieee)


def test_cupy_tf32_environment_variable(problem, backend, monkeypatch):
    w, x, _ = problem
    xb = to_backend(x, backend)
    explicit = to_numpy(cs.matmul(xb, w, tf32=True))
    monkeypatch.setenv("CUPY_TF32", "1")
    np.testing.assert_array_equal(to_numpy(cs.matmul(xb, w)), explicit)
    monkeypatch.setenv("CUPY_TF32", "0")
    np.testing.assert_array_equal(to_numpy(cs.matmul(xb, w)),
                                  to_numpy(cs.matmul(xb, w, tf32=False)))


def test_tf32_ignored_for_other_dtypes(backend):
    w = cs.BlockSparseMatrix.from_layout(np.eye(2, dtype=bool), 16, dtype="float64", seed=0,
                                         backend=backend)
    x = to_backend(np.random.default_rng(0).standard_normal((3, 32)), backend)
    np.testing.assert_array_equal(to_numpy(cs.matmul(x, w, tf32=True)), to_numpy(cs.matmul(x, w)))


def test_tf32_rejects_non_bool(backend):
    w = cs.BlockSparseMatrix.from_layout(np.eye(2, dtype=bool), 16, backend=backend)
    x = to_backend(np.ones((3, 32), np.float32), backend)
    with pytest.raises(TypeError, match="tf32 must be True, False or None, got 'yes'"):
        cs.matmul(x, w, tf32="yes")
