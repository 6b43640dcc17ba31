"""Bad inputs raise ValueError/TypeError saying what was expected and what was given;
nothing is modified in place unless ``out=`` asks for it."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import array_bytes, poison, to_backend, xp_for
from hypothesis import given
from hypothesis import strategies as st
from strategies import cases

import cubsparse as cs

B = 8


def parts(backend, data_shape=(2, B, B), dtype="float32", indices=(1, 0), indptr=(0, 1, 2)):
    xp = xp_for(backend)
    return (xp.ones(data_shape, dtype=dtype), xp.asarray(indices, dtype=xp.int32),
            xp.asarray(indptr, dtype=xp.int32))


def matrix(backend, layout=((False, True), (True, True)), b=B, dtype="float32"):
    """A small matrix: 16x16, 3 blocks by default."""
    return cs.BlockSparseMatrix.from_layout(np.array(layout), b, dtype=dtype, seed=0,
                                            backend=backend)


# -- constructor ------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(B, B), (2, B, B, 1), (2,)])
def test_data_wrong_rank(backend, shape):
    xp = xp_for(backend)
    _, ind, ptr = parts(backend)
    with pytest.raises(ValueError, match=r"data must have shape \(nnzb, b, b\).*got \("):
        cs.BlockSparseMatrix((xp.ones(shape, dtype="float32"), ind, ptr), shape=(16, 16))


def test_data_non_square_blocks(backend):
    with pytest.raises(ValueError, match=r"square blocks, got \(2, 8, 16\)"):
        cs.BlockSparseMatrix(parts(backend, data_shape=(2, 8, 16)), shape=(16, 32))


@pytest.mark.parametrize("b", [4, 12, 24, 256])
def test_unsupported_blocksize(backend, b):
    xp = xp_for(backend)
    msg = rf"blocksize must be one of \(8, 16, 32, 64, 128\), got {b}"
    data = xp.ones((1, b, b), dtype="float32")
    with pytest.raises(ValueError, match=msg):
        cs.BlockSparseMatrix((data, xp.asarray([0]), xp.asarray([0, 1])), shape=(b, b))
    with pytest.raises(ValueError, match=msg):
        cs.BlockSparseMatrix.from_layout(np.ones((1, 1), bool), b, backend=backend)
    with pytest.raises(ValueError, match=msg):
        cs.BlockSparseMatrix.from_dense(xp.ones((b, b), dtype="float32"), b)
    with pytest.raises(ValueError, match=msg):
        cs.BlockSparseMatrix.from_scipy(sp.eye_array(b, dtype=np.float32, format="csr"),
                                        blocksize=b, backend=backend)


@pytest.mark.parametrize("bad", [(8, 16), (8, 8, 8), 8.0, "8", True])
def test_bad_blocksize_type(backend, bad):
    with pytest.raises((TypeError, ValueError), match=r"blocks must be square|blocksize must be"):
        cs.BlockSparseMatrix.from_layout(np.ones((1, 1), bool), bad, backend=backend)


@pytest.mark.parametrize("dtype", ["int32", "int64", "complex64", "float128", "bool"])
def test_unsupported_dtype(backend, dtype):
    if dtype == "float128" and not hasattr(np, "float128"):
        pytest.skip("no float128 on this platform")
    if dtype == "float128" and backend == "cuda":
        pytest.skip("CuPy has no float128")
    xp = xp_for(backend)
    msg = rf"dtype must be one of float16, .*float32, float64; got {dtype}"
    data = xp.ones((1, B, B), dtype=dtype)
    idx, ptr = xp.asarray([0]), xp.asarray([0, 1])
    with pytest.raises(TypeError, match=msg):
        cs.BlockSparseMatrix((data, idx, ptr), shape=(B, B))
    with pytest.raises(TypeError, match=msg):
        cs.BlockSparseMatrix.from_layout(np.ones((1, 1), bool), B, dtype=dtype, backend=backend)
    with pytest.raises(TypeError, match=msg):
        cs.BlockSparseMatrix.from_dense(xp.ones((B, B), dtype=dtype), B)
    W = matrix(backend)
    with pytest.raises(TypeError, match=msg):
        W.astype(dtype)


def test_unsupported_dtype_from_scipy(backend):
    s = sp.eye_array(16, dtype=np.int32, format="csr")
    with pytest.raises(TypeError, match=r"dtype must be one of .*; got int32"):
        cs.BlockSparseMatrix.from_scipy(s, blocksize=B, backend=backend)


@pytest.mark.parametrize("shape", [(20, 16), (16, 12), (-16, 16)])
def test_shape_not_multiple_of_blocksize(backend, shape):
    msg = rf"multiples of the block size 8, got \({shape[0]}, {shape[1]}\)"
    with pytest.raises(ValueError, match=msg):
        cs.BlockSparseMatrix(parts(backend), shape=shape)


@pytest.mark.parametrize("shape", [(16,), (16, 16, 16), "16x16", (16.5, 16)])
def test_shape_not_a_pair_of_ints(backend, shape):
    with pytest.raises(ValueError, match=r"shape must be a pair of ints \(M, N\), got"):
        cs.BlockSparseMatrix(parts(backend), shape=shape)


def test_dense_shape_not_multiple_of_blocksize(backend):
    xp = xp_for(backend)
    with pytest.raises(ValueError, match=r"multiple of blocksize 8, got \(12, 16\)"):
        cs.BlockSparseMatrix.from_dense(xp.ones((12, 16), dtype="float32"), B)
    s = sp.eye_array(12, dtype=np.float32, format="csr")
    with pytest.raises(ValueError, match=r"multiple of blocksize 8, got \(12, 12\)"):
        cs.BlockSparseMatrix.from_scipy(s, blocksize=B, backend=backend)


@pytest.mark.parametrize("indptr", [(0, 2), (0, 1, 2, 2)])
def test_indptr_wrong_length(backend, indptr):
    msg = rf"indptr must have M//blocksize \+ 1 = 3 entries, got {len(indptr)}"
    with pytest.raises(ValueError, match=msg):
        cs.BlockSparseMatrix(parts(backend, indptr=indptr), shape=(16, 16))


def test_indptr_not_starting_at_zero(backend):
    with pytest.raises(
        ValueError,
        match=r"indptr must start at 0 and end at nnzb = 2, got 1 and 2",
    ):
        cs.BlockSparseMatrix(parts(backend, indptr=(1, 1, 2)), shape=(16, 16))
    with pytest.raises(ValueError, match=r"end at nnzb = 2, got 0 and 3"):
        cs.BlockSparseMatrix(parts(backend, indptr=(0, 1, 3)), shape=(16, 16))


def test_indptr_decreasing(backend):
    with pytest.raises(
        ValueError,
        match=r"indptr must be non-decreasing, but indptr\[2\] < indptr\[1\] \(1 < 3\)",
    ):
        cs.BlockSparseMatrix(
            parts(backend, data_shape=(2, B, B), indices=(0, 1), indptr=(0, 3, 1, 2)),
            shape=(24, 16),
        )


@pytest.mark.parametrize(("indices", "first"), [((0, 2), 1), ((-1, 0), 0), ((5, 1), 0)])
def test_indices_out_of_range(backend, indices, first):
    lo, hi = min(indices), max(indices)
    msg = (rf"indices must lie in \[0, 2\) \(N // blocksize\), got values in \[{lo}, {hi}\] "
           rf"\(first offending entry: indices\[{first}\] = {indices[first]}\)")
    with pytest.raises(ValueError, match=msg):
        cs.BlockSparseMatrix(parts(backend, indices=indices, indptr=(0, 1, 2)), shape=(16, 16))


def test_indices_unsorted_and_duplicate(backend):
    with pytest.raises(
        ValueError,
        match=r"sorted and unique.*unsorted entries at positions 0 and 1",
    ):
        cs.BlockSparseMatrix(parts(backend, indices=(1, 0), indptr=(0, 2, 2)), shape=(16, 16))
    with pytest.raises(
        ValueError,
        match=r"sorted and unique.*duplicate entries at positions 0 and 1",
    ):
        cs.BlockSparseMatrix(parts(backend, indices=(1, 1), indptr=(0, 2, 2)), shape=(16, 16))
    # Decreasing across a row boundary is fine.
    W = cs.BlockSparseMatrix(parts(backend, indices=(1, 0), indptr=(0, 1, 2)), shape=(16, 16))
    assert W.nnzb == 2


def test_indices_wrong_count_rank_and_type(backend):
    xp = xp_for(backend)
    data, ind, ptr = parts(backend)
    with pytest.raises(ValueError, match=r"one entry per block \(nnzb = 2\), got 3"):
        cs.BlockSparseMatrix((data, xp.asarray([0, 1, 0]), ptr), shape=(16, 16))
    with pytest.raises(ValueError, match=r"indices must be 1-D, got shape \(2, 1\)"):
        cs.BlockSparseMatrix((data, ind.reshape(2, 1), ptr), shape=(16, 16))
    with pytest.raises(TypeError, match=r"indices must hold integers, got dtype float"):
        cs.BlockSparseMatrix((data, ind.astype("float32"), ptr), shape=(16, 16))
    with pytest.raises(TypeError, match=r"indptr must be a .* array like data .*got list"):
        cs.BlockSparseMatrix((data, ind, [0, 1, 2]), shape=(16, 16))


def test_constructor_needs_a_triple(backend):
    with pytest.raises(TypeError, match=r"expects a tuple \(data, indices, indptr\), got list"):
        cs.BlockSparseMatrix(list(parts(backend)), shape=(16, 16))
    with pytest.raises(TypeError, match=r"data must be a NumPy or CuPy array, got list"):
        cs.BlockSparseMatrix(([[[1.0]]], np.array([0]), np.array([0, 1])), shape=(8, 8))


def test_check_false_skips_validation_until_check_format(backend):
    bad = parts(backend, indices=(1, 1), indptr=(0, 2, 2))
    W = cs.BlockSparseMatrix(bad, shape=(16, 16), check=False)
    W.check_format(full=False)  # O(1): does not look at the indices
    with pytest.raises(ValueError, match=r"duplicate entries at positions 0 and 1"):
        W.check_format(full=True)


def test_layout_cannot_be_corrupted_through_indices(backend):
    W = matrix(backend, layout=((True, True), (False, True)))  # indices [0, 1, 1]
    W.check_format(full=True)
    if backend == "cpu":  # read-only NumPy arrays
        with pytest.raises(ValueError, match="read-only"):
            W.indices[...] = W.indices[::-1].copy()
    else:  # a CuPy copy: writing it leaves W alone
        ind = W.indices
        ind[...] = ind[::-1].copy()
    assert W.indices.tolist() == [0, 1, 1]
    W.check_format(full=True)
    # check_format still catches a layout that was never valid (check=False).
    bad = cs.BlockSparseMatrix(parts(backend, indices=(1, 1), indptr=(0, 2, 2)), shape=(16, 16),
                               check=False)
    with pytest.raises(ValueError, match=r"sorted and unique.*duplicate"):
        bad.check_format(full=True)


# -- layouts ----------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", [np.ones(3, bool), np.ones((2, 2, 2), bool), np.bool_(True)])
def test_layout_not_2d(backend, layout):
    with pytest.raises(ValueError, match=r"layout must be a 2-D array of bools, got \d-D"):
        cs.BlockSparseMatrix.from_layout(layout, B, backend=backend)
    xp = xp_for(backend)
    with pytest.raises(ValueError, match=r"layout must be a 2-D array of bools"):
        cs.BlockSparseMatrix.from_dense(xp.ones((16, 16), dtype="float32"), B, layout=layout)


@pytest.mark.parametrize("layout", [np.array([[0, 2], [1, 0]]), np.array([[0.0, 1.0]]),
                                    np.array([[-1, 1]])])
def test_layout_values_not_0_1(backend, layout):
    with pytest.raises(TypeError, match=r"layout must hold bools \(or 0/1 integers\), got"):
        cs.BlockSparseMatrix.from_layout(layout, B, backend=backend)


def test_layout_0_1_integers_accepted(backend):
    W = cs.BlockSparseMatrix.from_layout(np.array([[0, 1], [1, 0]]), B, backend=backend)
    assert np.array_equal(W.layout, [[False, True], [True, False]])


def test_from_dense_layout_wrong_shape(backend):
    xp = xp_for(backend)
    with pytest.raises(ValueError, match=r"layout must have shape \(2, 2\) .*got \(2, 3\)"):
        cs.BlockSparseMatrix.from_dense(xp.ones((16, 16), dtype="float32"), B,
                                        layout=np.ones((2, 3), bool))


def test_other_constructor_errors(backend):
    xp = xp_for(backend)
    with pytest.raises(TypeError, match=r"a must be a NumPy or CuPy array, got list"):
        cs.BlockSparseMatrix.from_dense([[1.0] * 8] * 8, B)
    with pytest.raises(ValueError, match=r"a must be 2-D, got 3-D"):
        cs.BlockSparseMatrix.from_dense(xp.ones((1, 8, 8), dtype="float32"), B)
    with pytest.raises(TypeError, match=r"s must be a scipy.sparse matrix or array, got ndarray"):
        cs.BlockSparseMatrix.from_scipy(np.eye(8, dtype=np.float32), B, backend=backend)
    with pytest.raises(ValueError, match=r"blocksize is required for a csr input"):
        cs.BlockSparseMatrix.from_scipy(sp.eye_array(8, dtype=np.float32, format="csr"),
                                        backend=backend)
    with pytest.raises(ValueError, match=r"init must be .*got 'gaussian'"):
        cs.BlockSparseMatrix.from_layout(np.ones((1, 1), bool), B, init="gaussian",
                                         backend=backend)
    with pytest.raises(ValueError, match=r"init returned shape \(1, 4\), expected \(1, 8, 8\)"):
        cs.BlockSparseMatrix.from_layout(np.ones((1, 1), bool), B,
                                         init=lambda rng, shape: np.ones((1, 4)), backend=backend)
    with pytest.raises(ValueError, match=r"backend must be one of \('cpu', 'cuda'\), got 'gpu'"):
        cs.BlockSparseMatrix.from_layout(np.ones((1, 1), bool), B, backend="gpu")


# -- mixing array modules ---------------------------------------------------------------------
def test_mixed_numpy_cupy(backend):
    if backend != "cuda":
        pytest.skip("mixing NumPy and CuPy arrays needs the cuda backend")
    import cupy

    data = cupy.ones((2, B, B), dtype="float32")
    with pytest.raises(TypeError, match=r"indices must be a CuPy array like data .*got ndarray"):
        cs.BlockSparseMatrix((data, np.array([1, 0]), cupy.asarray([0, 1, 2])), shape=(16, 16))
    W = matrix("cuda")
    x = np.ones((3, 16), dtype="float32")
    with pytest.raises(TypeError, match=r"NumPy array but the sparse operand lives on the cuda"):
        cs.matmul(x, W)
    with pytest.raises(TypeError, match=r"NumPy array but the sparse operand lives on the cuda"):
        cs.matmul(W, x.T)
    with pytest.raises(TypeError, match=r"a is a NumPy array but like lives on the cuda"):
        cs.sampled_matmul(x.T, cupy.asarray(x), like=W)
    Wc = matrix("cpu")
    with pytest.raises(TypeError, match=r"CuPy array but the sparse operand lives on the cpu"):
        cs.matmul(cupy.asarray(x), Wc)
    with pytest.raises(TypeError, match=r"out is a NumPy array"):
        cs.matmul(cupy.asarray(x), W, out=np.zeros((3, 16), dtype="float32"))


# -- matmul ------------------------------------------------------------------------------------
def test_matmul_shape_mismatch(backend):
    xp = xp_for(backend)
    W = matrix(backend, layout=np.ones((2, 3), bool))  # 16 x 24
    f = "float32"
    with pytest.raises(
        ValueError,
        match=r"last dimension must equal the sparse operand's rows \(16\), got shape \(3, 24\)",
    ):
        cs.matmul(xp.ones((3, 24), f), W)
    with pytest.raises(ValueError, match=r"rows \(24\), got shape \(3, 16\)"):
        cs.matmul(xp.ones((3, 16), f), W.T)
    with pytest.raises(
        ValueError,
        match=r"must have shape \(24,\) or \(24, k\) .*got shape \(16, 2\)",
    ):
        cs.matmul(W, xp.ones((16, 2), f))
    with pytest.raises(
        ValueError,
        match=r"must have shape \(16,\) or \(16, k\) .*got shape \(24,\)",
    ):
        cs.matmul(W.T, xp.ones(24, f))
    with pytest.raises(ValueError, match=r"got shape \(24, 2, 2\)"):
        cs.matmul(W, xp.ones((24, 2, 2), f))
    with pytest.raises(ValueError, match=r"got shape \(\)"):
        cs.matmul(xp.ones((), f), W)


def test_matmul_operator_shape_mismatch(backend):
    """``x @ W`` goes through matmul's checks (for NumPy and CuPy left operands alike)."""
    xp = xp_for(backend)
    W = matrix(backend, layout=np.ones((2, 3), bool))  # 16 x 24
    with pytest.raises(ValueError, match=r"rows \(16\), got shape \(3, 24\)"):
        xp.ones((3, 24), "float32") @ W
    with pytest.raises(ValueError, match=r"must have shape \(24,\) or \(24, k\)"):
        W @ xp.ones((16, 2), "float32")


def test_matmul_dtype_mismatch(backend):
    xp = xp_for(backend)
    W = matrix(backend)
    with pytest.raises(
        TypeError,
        match=r"has dtype float64 but the sparse operand has dtype float32",
    ):
        cs.matmul(xp.ones((3, 16), "float64"), W)
    with pytest.raises(
        TypeError,
        match=r"has dtype float16 but the sparse operand has dtype float32",
    ):
        cs.matmul(W, xp.ones((16, 3), "float16"))
    with pytest.raises(
        TypeError,
        match=r"has dtype int32 but the sparse operand has dtype float32",
    ):
        cs.matmul(xp.ones((3, 16), "int32"), W.T)
    with pytest.raises(TypeError, match=r"must be a NumPy or CuPy array, got list"):
        cs.matmul([[1.0] * 16], W)


def test_matmul_beta_without_out(backend):
    xp = xp_for(backend)
    W = matrix(backend)
    with pytest.raises(ValueError, match=r"beta = 0.5 accumulates into out, so out must be given"):
        cs.matmul(xp.ones((3, 16), "float32"), W, beta=0.5)
    with pytest.raises(ValueError, match=r"beta = 1.0 accumulates into out"):
        cs.sampled_matmul(xp.ones((16, 3), "float32"), xp.ones((3, 16), "float32"), like=W,
                          beta=1.0)


@pytest.mark.parametrize("bad", ["2", None, 1j, True])
def test_matmul_bad_scalars(backend, bad):
    xp = xp_for(backend)
    W = matrix(backend)
    x = xp.ones((3, 16), "float32")
    with pytest.raises(TypeError, match=r"alpha must be a real number, got"):
        cs.matmul(x, W, alpha=bad)
    with pytest.raises(TypeError, match=r"beta must be a real number, got"):
        cs.matmul(x, W, out=xp.zeros((3, 16), "float32"), beta=bad)


def test_matmul_out_wrong_shape_or_dtype(backend):
    xp = xp_for(backend)
    W = matrix(backend, layout=np.ones((2, 3), bool))  # 16 x 24
    x = xp.ones((2, 3, 16), "float32")
    with pytest.raises(ValueError, match=r"out must have shape \(2, 3, 24\), got \(6, 24\)"):
        cs.matmul(x, W, out=poison((6, 24), "float32", backend))
    with pytest.raises(
        TypeError,
        match=r"out has dtype float64 but the sparse operand has dtype float32",
    ):
        cs.matmul(x, W, out=poison((2, 3, 24), "float64", backend))
    with pytest.raises(ValueError, match=r"out must have shape \(16, 2\), got \(16, 3\)"):
        cs.matmul(W, xp.ones((24, 2), "float32"), out=poison((16, 3), "float32", backend))
    with pytest.raises(ValueError, match=r"out must have shape \(16,\), got \(16, 1\)"):
        cs.matmul(W, xp.ones(24, "float32"), out=poison((16, 1), "float32", backend))
    with pytest.raises(TypeError, match=r"out must be a NumPy or CuPy array, got list"):
        cs.matmul(W, xp.ones(24, "float32"), out=[0.0] * 16)


def test_matmul_of_two_sparse_matrices(backend):
    W = matrix(backend)
    with pytest.raises(
        TypeError,
        match=r"exactly one BlockSparseMatrix and one dense array, got BlockSparseMatrix and "
        r"BlockSparseMatrix",
    ):
        cs.matmul(W, W)
    with pytest.raises(
        TypeError,
        match=r"exactly one BlockSparseMatrix .*got BlockSparseMatrix and BlockSparseMatrix",
    ):
        cs.matmul(W, W.T)
    with pytest.raises(TypeError):
        W @ W
    with pytest.raises(TypeError):
        W @ W.T
    xp = xp_for(backend)
    with pytest.raises(TypeError, match=r"got ndarray and ndarray"):
        cs.matmul(xp.ones((2, 2), "float32"), xp.ones((2, 2), "float32"))


# -- sampled_matmul ----------------------------------------------------------------------------
def test_sampled_matmul_wrong_shapes(backend):
    xp = xp_for(backend)
    W = matrix(backend, layout=np.ones((2, 3), bool))  # 16 x 24
    f = "float32"
    with pytest.raises(
        ValueError,
        match=r"a @ b must have like's shape \(16, 24\) .*got a \(24, 5\) and b \(5, 24\)",
    ):
        cs.sampled_matmul(xp.ones((24, 5), f), xp.ones((5, 24), f), like=W)
    with pytest.raises(ValueError, match=r"got a \(16, 5\) and b \(4, 24\)"):
        cs.sampled_matmul(xp.ones((16, 5), f), xp.ones((4, 24), f), like=W)
    with pytest.raises(
        ValueError,
        match=r"like's shape \(24, 16\).*got a \(16, 5\) and b \(5, 24\)",
    ):
        cs.sampled_matmul(xp.ones((16, 5), f), xp.ones((5, 24), f), like=W.T)
    with pytest.raises(
        ValueError,
        match=r"a and b must be 2-D, or have the same leading \(batch\) dimensions, got "
              r"shapes \(16, 5, 1\) and \(5, 24\)",
    ):
        cs.sampled_matmul(xp.ones((16, 5, 1), f), xp.ones((5, 24), f), like=W)
    with pytest.raises(ValueError, match=r"leading \(batch\) dimensions, got shapes \(16, 5\) "
                                         r"and \(5,\)"):
        cs.sampled_matmul(xp.ones((16, 5), f), xp.ones(5, f), like=W)


def test_sampled_matmul_bad_types(backend):
    xp = xp_for(backend)
    W = matrix(backend)
    a, b = xp.ones((16, 3), "float32"), xp.ones((3, 16), "float32")
    with pytest.raises(TypeError, match=r"like must be a BlockSparseMatrix, got ndarray"):
        cs.sampled_matmul(a, b, like=xp.ones((16, 16), "float32"))
    # the operand that is off is named; both off: a, never a silent float64 result
    with pytest.raises(TypeError, match=r"b has dtype float64 but like has dtype float32"):
        cs.sampled_matmul(a, b.astype("float64"), like=W)
    with pytest.raises(TypeError, match=r"a has dtype float64 but like has dtype float32"):
        cs.sampled_matmul(a.astype("float64"), b, like=W)
    with pytest.raises(TypeError, match=r"a has dtype float64 but like has dtype float32"):
        cs.sampled_matmul(a.astype("float64"), b.astype("float64"), like=W)
    with pytest.raises(TypeError, match=r"a has dtype int32 but like has dtype float32"):
        cs.sampled_matmul(a.astype("int32"), b.astype("int32"), like=W)
    with pytest.raises(TypeError, match=r"a must be a NumPy or CuPy array, got list"):
        cs.sampled_matmul([[1.0] * 3] * 16, b, like=W)
    with pytest.raises(TypeError, match=r"out must be a BlockSparseMatrix, got ndarray"):
        cs.sampled_matmul(a, b, like=W, out=xp.zeros((16, 16), "float32"))
    with pytest.raises(
        TypeError,
        match=r"out must be a float32 matrix on the .* backend, got float64",
    ):
        cs.sampled_matmul(a, b, like=W, out=W.astype("float64"))


def test_sampled_matmul_out_with_other_layout(backend):
    xp = xp_for(backend)
    W = matrix(backend)
    a, b = xp.ones((16, 3), "float32"), xp.ones((3, 16), "float32")
    other = matrix(backend, layout=((True, True), (True, False)))  # same nnzb, other blocks
    with pytest.raises(ValueError, match=r"out must have like's layout"):
        cs.sampled_matmul(a, b, like=W, out=other)
    with pytest.raises(ValueError, match=r"out must have like's layout"):
        cs.sampled_matmul(a, b, like=W, out=matrix(backend, layout=np.ones((2, 2), bool)))
    with pytest.raises(ValueError, match=r"transposed exactly when like is"):
        cs.sampled_matmul(a, b, like=W, out=W.copy().T)  # W.T has another layout
    sym = matrix(backend, layout=np.ones((2, 2), bool))
    with pytest.raises(ValueError, match=r"transposed exactly when like is"):
        cs.sampled_matmul(a, b, like=sym, out=sym.copy().T)  # same layout, but a view
    # A matrix with like's layout built independently is accepted.
    out = cs.BlockSparseMatrix((xp.zeros_like(W.data), W.indices.copy(), W.indptr.copy()),
                               shape=W.shape)
    assert cs.sampled_matmul(a, b, like=W, out=out) is out


# -- nothing modified in place -------------------------------------------------------------------
def snapshot(*arrays):
    return [array_bytes(a) for a in arrays]


@given(case=cases(), n=st.sampled_from((1, 3, 8)))
def test_inputs_unchanged_by_ops(backend, case, n):
    M, N = case.shape
    W = case.matrix(backend)
    x = to_backend(case.dense((n, M), stream=1), backend)
    dy = to_backend(case.dense((n, N), stream=2), backend)
    d = to_backend(case.dense((N, 3), stream=3), backend)
    e = to_backend(case.dense((M,), stream=4), backend)
    watched = (W.data, W.indices, W.indptr, x, dy, d, e)
    before = snapshot(*watched)
    layout = W.layout.copy()

    results = [
        cs.matmul(x, W), cs.matmul(dy, W.T), cs.matmul(W, d), W @ d,
        cs.matmul(W.T, e), cs.matmul(x, W, alpha=3.0),
        cs.sampled_matmul(x.T, dy, like=W), cs.sampled_matmul(dy.T, x, like=W.T),
        W.toarray(), W.T.toarray(), W.T.data, W.to_scipy(), W.T.to_scipy(),
        W.astype("float64"), W.copy(), W.to("cpu"), W.T.copy(),
    ]
    # out= only writes out
    out = poison((n, N), case.dtype, backend)
    cs.matmul(x, W, out=out, alpha=2.0, beta=0.0)
    acc = to_backend(case.dense((n, N), stream=5), backend)
    cs.matmul(x, W, out=acc, beta=1.0)
    dW = cs.sampled_matmul(x.T, dy, like=W)
    cs.sampled_matmul(x.T, dy, like=W, out=dW, beta=1.0)
    assert snapshot(*watched) == before
    assert np.array_equal(W.layout, layout)
    del results


def test_from_dense_does_not_modify_input(backend):
    xp = xp_for(backend)
    a = xp.asarray(np.random.default_rng(0).standard_normal((32, 48)).astype("float32"))
    a[:8] = 0
    before = array_bytes(a)
    W = cs.BlockSparseMatrix.from_dense(a, 16)
    W.data[...] = 7  # the matrix owns its values: writing them leaves a alone
    assert array_bytes(a) == before


def test_from_scipy_does_not_modify_input(backend):
    # Unsorted BSR input: from_scipy sorts a copy, never the caller's matrix.
    data = np.stack([np.full((B, B), 1.0, np.float32), np.full((B, B), 2.0, np.float32)])
    s = sp.bsr_array((data, np.array([1, 0]), np.array([0, 2, 2])), shape=(16, 16))
    s.has_sorted_indices = False
    before = (s.data.copy(), s.indices.copy(), s.indptr.copy())
    W = cs.BlockSparseMatrix.from_scipy(s, backend=backend)
    assert np.array_equal(s.data, before[0])
    assert np.array_equal(s.indices, before[1])
    assert np.array_equal(s.indptr, before[2])
    assert np.array_equal(W.toarray().get() if backend == "cuda" else W.toarray(), s.toarray())
