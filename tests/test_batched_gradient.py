"""The batched weight gradient: ``sampled_matmul(a, b, like=W)`` with leading (batch)
dimensions sums the products, ``dW = sum_t x[t].T @ dy[t]``, as one product over the
concatenated inner dimension; against float64 NumPy on both backends."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import poison, to_backend, to_numpy

import cubsparse as cs


def _ref(xs, dys, lay, b):
    xs, dys = to_numpy(xs).astype(np.float64), to_numpy(dys).astype(np.float64)
    total = sum(xs[t].T @ dys[t] for t in range(xs.shape[0]))
    return total * np.kron(lay, np.ones((b, b)))


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("steps", [1, 3])
def test_batched_gradient_sums_the_steps(backend, dtype, steps):
    rng = np.random.default_rng(steps)
    lay = rng.random((3, 5)) < 0.5
    lay[0, 0] = True
    b = 16
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, seed=1, backend=backend)
    xs = to_backend(rng.standard_normal((steps, 24, 3 * b)), backend).astype(dtype)
    dys = to_backend(rng.standard_normal((steps, 24, 5 * b)), backend).astype(dtype)
    ref = _ref(xs, dys, lay, b)
    out = cs.BlockSparseMatrix((poison((w.nnzb, b, b), dtype, backend), w.indices, w.indptr),
                               shape=w.shape)
    got = cs.sampled_matmul(xs.swapaxes(-1, -2), dys, like=w, out=out)
    assert got is out
    dense = to_numpy(got.toarray()).astype(np.float64)
    tol = cs._dtypes.TOLERANCE[dtype]
    assert np.linalg.norm(dense - ref) / np.linalg.norm(ref) < tol
    # accumulation: beta = 1 adds another batch's sum
    cs.sampled_matmul(xs.swapaxes(-1, -2), dys, like=w, out=out, beta=1.0)
    dense2 = to_numpy(out.toarray()).astype(np.float64)
    assert np.linalg.norm(dense2 - 2 * ref) / np.linalg.norm(2 * ref) < tol


def test_batched_gradient_of_strided_steps_and_a_transposed_like(backend):
    """Every other step of a batch (not contiguous: the batch cannot merge as a view) and
    two leading dimensions; a transposed ``like`` swaps the roles of a and b."""
    rng = np.random.default_rng(7)
    lay = rng.random((4, 2)) < 0.6
    lay[1, 1] = True
    b = 8
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype="float64", seed=2, backend=backend)
    xs = to_backend(rng.standard_normal((2, 6, 10, 4 * b)), backend)[:, ::2]
    dys = to_backend(rng.standard_normal((2, 6, 10, 2 * b)), backend)[:, ::2]
    got = cs.sampled_matmul(xs.swapaxes(-1, -2), dys, like=w)
    ref = _ref(xs.reshape(-1, 10, 4 * b), dys.reshape(-1, 10, 2 * b), lay, b)
    np.testing.assert_allclose(to_numpy(got.toarray()), ref, rtol=1e-10, atol=1e-10)
    # like = W.T: the gradient of y = x @ W.T, sum_t dy[t].T @ x[t] on W.T's blocks
    gt = cs.sampled_matmul(dys.swapaxes(-1, -2), xs, like=w.T)
    np.testing.assert_allclose(to_numpy(gt.toarray()), ref.T, rtol=1e-10, atol=1e-10)


def test_batched_gradient_needs_matching_leading_dimensions(backend):
    w = cs.BlockSparseMatrix.from_layout(np.eye(2, dtype=bool), 8, backend=backend)
    xs = to_backend(np.ones((3, 16, 4), np.float32), backend)
    with pytest.raises(ValueError, match=r"same leading \(batch\) dimensions, got shapes "
                                         r"\(3, 16, 4\) and \(2, 4, 16\)"):
        cs.sampled_matmul(xs, to_backend(np.ones((2, 4, 16), np.float32), backend), like=w)
    with pytest.raises(ValueError, match="same leading"):
        cs.sampled_matmul(xs, to_backend(np.ones((4, 16), np.float32), backend), like=w)
