"""BlockSparseMatrix: constructors, conversions, properties, transposed views."""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import array_bytes, to_backend, to_numpy, xp_for
from hypothesis import given
from hypothesis import strategies as st
from strategies import HAS_BFLOAT16, Case, cases

import cubsparse as cs
from cubsparse import _dtypes

SCIPY_DTYPES = st.sampled_from((np.dtype(np.float32), np.dtype(np.float64)))
HALF_NAMES = ["float16"] + (["bfloat16"] if HAS_BFLOAT16 else [])


def dense_in_dtype(case: Case) -> np.ndarray:
    """The case as a dense array in its own dtype (zeros outside the layout)."""
    return case.dense64().astype(case.dtype)


def assert_same_structure(W, case: Case):
    assert np.array_equal(to_numpy(W.indices), case.indices)
    assert np.array_equal(to_numpy(W.indptr), case.indptr)
    assert np.array_equal(W.layout, case.layout)
    assert W.nnzb == case.nnzb


# -- constructors ----------------------------------------------------------------------------
@given(case=cases())
def test_constructor_keeps_arrays(backend, case):
    W = case.matrix(backend)
    assert W.backend == backend
    assert W.dtype == case.dtype
    assert W.shape == case.shape
    assert_same_structure(W, case)
    assert array_bytes(W.data) == array_bytes(case.data)
    assert np.array_equal(to_numpy(W.toarray()), dense_in_dtype(case))
    W.check_format(full=True)


@given(case=cases())
def test_from_dense_toarray_roundtrip(backend, case):
    a = to_backend(dense_in_dtype(case), backend)
    W = cs.BlockSparseMatrix.from_dense(a, case.blocksize)
    assert W.backend == backend
    assert W.dtype == case.dtype
    assert W.shape == case.shape
    assert_same_structure(W, case)  # the values are never 0: every stored block is found
    assert array_bytes(W.data) == array_bytes(case.data)
    back = W.toarray()
    assert isinstance(back, xp_for(backend).ndarray)
    assert array_bytes(back) == array_bytes(a)


@given(case=cases(), keep_seed=st.integers(0, 2**32 - 1))
def test_from_dense_with_layout_keeps_and_drops(backend, case, keep_seed):
    """An explicit layout keeps all-zero blocks it names and drops values outside it."""
    rng = np.random.default_rng(keep_seed)
    layout = rng.random(case.layout.shape) < 0.5
    a = to_backend(dense_in_dtype(case), backend)
    W = cs.BlockSparseMatrix.from_dense(a, case.blocksize, layout=layout)
    assert np.array_equal(W.layout, layout)
    assert W.nnzb == int(layout.sum())
    expected = case.dense64() * np.kron(layout, np.ones((case.blocksize,) * 2))
    assert np.array_equal(to_numpy(W.toarray()).astype(np.float64), expected)


@given(case=cases(dtypes=SCIPY_DTYPES), fmt=st.sampled_from(("csr", "coo", "bsr", "csc")))
def test_from_scipy_to_scipy_roundtrip(backend, case, fmt):
    S = sp.bsr_array((case.data, case.indices, case.indptr), shape=case.shape,
                     blocksize=(case.blocksize,) * 2)
    s = S.asformat(fmt)
    blocksize = None if fmt == "bsr" else case.blocksize
    W = cs.BlockSparseMatrix.from_scipy(s, blocksize=blocksize, backend=backend)
    assert W.backend == backend
    assert W.dtype == case.dtype
    assert_same_structure(W, case)
    assert array_bytes(W.data) == array_bytes(case.data)
    R = W.to_scipy()
    assert isinstance(R, sp.bsr_array)
    assert R.blocksize == (case.blocksize,) * 2
    assert R.dtype == case.dtype
    assert np.array_equal(R.indices, case.indices)
    assert np.array_equal(R.indptr, case.indptr)
    assert np.array_equal(R.data, case.data)
    assert np.array_equal(R.toarray(), s.toarray())


def test_from_scipy_sums_duplicates(backend):
    rows = np.array([0, 0, 9])
    cols = np.array([3, 3, 12])
    vals = np.array([1.0, 2.0, 5.0], dtype=np.float32)
    s = sp.coo_array((vals, (rows, cols)), shape=(16, 16))
    W = cs.BlockSparseMatrix.from_scipy(s, blocksize=8, backend=backend)
    dense = to_numpy(W.toarray())
    assert dense[0, 3] == 3.0
    assert dense[9, 12] == 5.0
    assert W.nnzb == 2
    assert np.array_equal(W.layout, [[True, False], [False, True]])


def test_from_scipy_bsr_with_other_blocksize_is_reblocked(backend):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((32, 64)).astype(np.float32)
    a[:16, :16] = 0
    s = sp.bsr_array(a, blocksize=(8, 8))
    W = cs.BlockSparseMatrix.from_scipy(s, blocksize=16, backend=backend)
    assert W.blocksize == 16
    assert np.array_equal(W.layout, [[False, True, True, True], [True] * 4])
    assert np.array_equal(to_numpy(W.toarray()), a)


def test_from_scipy_keeps_explicit_zero_blocks(backend):
    b = 8
    data = np.zeros((3, b, b), dtype=np.float32)
    data[1] = 1.5  # blocks 0 and 2 are explicit all-zero blocks
    s = sp.bsr_array((data, np.array([0, 1, 1]), np.array([0, 2, 3])), shape=(16, 16))
    W = cs.BlockSparseMatrix.from_scipy(s, backend=backend)
    assert W.nnzb == 3
    assert np.array_equal(W.layout, [[True, True], [False, True]])
    assert np.array_equal(to_numpy(W.data), data)
    R = W.to_scipy()
    assert R.data.shape[0] == 3
    assert np.array_equal(R.data, data)


@pytest.mark.parametrize("init", ["normal", "uniform", "zeros", "ones", "callable"])
@given(case=cases())
def test_from_layout_inits(backend, init, case):
    b = case.blocksize
    seen = {}

    def make(rng, shape):
        seen["rng"], seen["shape"] = rng, shape
        return rng.standard_normal(shape)

    W = cs.BlockSparseMatrix.from_layout(
        case.layout, b, dtype=case.dtype, init=make if init == "callable" else init,
        seed=case.seed, backend=backend,
    )
    assert W.backend == backend
    assert W.dtype == case.dtype
    assert W.shape == case.shape
    assert W.blocksize == b
    assert_same_structure(W, case)
    data = to_numpy(W.data).astype(np.float64)
    assert data.shape == (case.nnzb, b, b)
    assert np.isfinite(data).all()
    if init == "zeros":
        assert (data == 0).all()
    elif init == "ones":
        assert (data == 1).all()
    elif init == "uniform":
        assert ((data >= -1) & (data <= 1)).all()
    elif init == "callable":
        assert seen["shape"] == (case.nnzb, b, b)
        assert isinstance(seen["rng"], np.random.Generator)
        expected = np.random.default_rng(case.seed).standard_normal(seen["shape"])
        assert np.array_equal(to_numpy(W.data), expected.astype(case.dtype))
    elif init == "normal" and data.size >= 4096:
        # N(0, 1/fan_in), fan_in = the average inputs per output column.
        fan_in = max(1.0, case.nnzb * b / case.layout.shape[1])
        assert 0.8 < data.std() * np.sqrt(fan_in) < 1.2


@pytest.mark.parametrize("init", ["normal", "uniform"])
@given(case=cases(kinds=st.sampled_from(("random", "full", "skewed"))))
def test_from_layout_seed_determinism(backend, init, case):
    make = lambda seed, be: cs.BlockSparseMatrix.from_layout(  # noqa: E731
        case.layout, case.blocksize, dtype=case.dtype, init=init, seed=seed, backend=be)
    W1, W2 = make(case.seed, backend), make(case.seed, backend)
    assert array_bytes(W1.data) == array_bytes(W2.data)
    # Same values on every backend for one seed.
    assert array_bytes(W1.data) == array_bytes(make(case.seed, "cpu").data)
    if case.nnzb:
        other = make(case.seed + 1, backend)
        assert array_bytes(W1.data) != array_bytes(other.data)


# -- properties ------------------------------------------------------------------------------
@given(case=cases())
def test_properties(backend, case):
    W = case.matrix(backend)
    M, N = case.shape
    r, c = case.layout.shape
    assert W.shape == (M, N)
    assert W.ndim == 2
    assert len(W) == M
    assert W.blocksize == case.blocksize
    assert W.nnzb == case.nnzb
    assert W.nnz == case.nnzb * case.blocksize**2
    assert W.density == pytest.approx(case.nnzb / (r * c))
    assert W.dtype == case.dtype
    assert W.backend == backend
    assert W.base is None
    layout = W.layout
    assert isinstance(layout, np.ndarray)
    assert layout.dtype == bool
    assert np.array_equal(layout, case.layout)
    with pytest.raises(ValueError, match="read-only"):
        layout[0, 0] = not layout[0, 0]
    with pytest.raises(ValueError, match="read-only"):
        W.T.layout[0, 0] = True
    assert np.array_equal(W.layout, case.layout)  # unchanged


@pytest.mark.parametrize(("density", "expected"), [(0.0, 0.0), (1.0, 1.0)])
def test_density_extremes(backend, density, expected):
    W = cs.BlockSparseMatrix.from_layout(np.full((3, 4), density == 1.0), 8, backend=backend)
    assert W.density == expected
    assert W.nnzb == (12 if density else 0)


# -- transposed views ------------------------------------------------------------------------
@given(case=cases())
def test_transpose_is_a_view(backend, case):
    W = case.matrix(backend)
    T = W.T
    assert T.base is W
    assert T.T is W
    assert T.shape == case.shape[::-1]
    assert T.dtype == W.dtype
    assert T.backend == W.backend
    assert T.nnzb == W.nnzb
    assert T.blocksize == W.blocksize
    assert np.array_equal(T.layout, case.layout.T)
    assert T.density == W.density
    assert T.base.data is W.data
    if backend == "cpu" and case.nnzb:
        assert np.shares_memory(T.base.data, W.data)
    assert np.array_equal(to_numpy(T.toarray()), dense_in_dtype(case).T)
    # Writing through W is seen through the view: the values are shared, not copied.
    if case.nnzb:
        W.data[...] = W.data * 2
        assert np.array_equal(to_numpy(T.toarray()).astype(np.float64),
                              (dense_in_dtype(case) * 2).T.astype(np.float64))


@given(case=cases())
def test_transpose_arrays_match_scipy(backend, case):
    W = case.matrix(backend)
    St = case.scipy64().T.tobsr(blocksize=(case.blocksize,) * 2)
    St.sort_indices()
    T = W.T
    assert np.array_equal(to_numpy(T.indices), St.indices)
    assert np.array_equal(to_numpy(T.indptr), St.indptr)
    data = to_numpy(T.data)
    assert data.dtype == case.dtype
    assert data.shape == (case.nnzb, case.blocksize, case.blocksize)
    assert np.array_equal(data.astype(np.float64), St.data)
    R = T.to_scipy()
    assert R.shape == case.shape[::-1]
    assert np.array_equal(R.toarray(), St.toarray())
    assert np.array_equal(R.indices, St.indices)
    assert np.array_equal(R.indptr, St.indptr)
    # A matrix built from the view's arrays is the transpose.
    U = cs.BlockSparseMatrix((T.data, T.indices, T.indptr), shape=T.shape)
    assert np.array_equal(to_numpy(U.toarray()), to_numpy(W.toarray()).T)


# -- conversions -----------------------------------------------------------------------------
@given(case=cases(), target=st.sampled_from(("float16", "float32", "float64")))
def test_astype(backend, case, target):
    W = case.matrix(backend)
    A = W.astype(target)
    assert A.dtype == np.dtype(target)
    assert A is not W
    assert np.array_equal(to_numpy(A.data), case.data.astype(target))
    assert np.array_equal(A.layout, W.layout)
    assert W.dtype == case.dtype
    if backend == "cpu":
        assert not np.shares_memory(A.data, W.data)
    assert W.astype(W.dtype, copy=False) is W
    AT = W.T.astype(target)
    assert AT.base is not None
    assert AT.shape == W.T.shape
    assert np.array_equal(to_numpy(AT.toarray()), to_numpy(A.toarray()).T)


@given(case=cases(kinds=st.sampled_from(("random", "full", "skewed"))))
def test_copy_is_independent(backend, case):
    W = case.matrix(backend)
    before = array_bytes(W.data)
    C = W.copy()
    assert C is not W
    assert C.dtype == W.dtype
    assert np.array_equal(C.layout, W.layout)
    assert array_bytes(C.data) == before
    C.data[...] = 0
    assert array_bytes(W.data) == before
    A = W.astype(W.dtype)  # copy=True by default
    A.data[...] = 1
    assert array_bytes(W.data) == before
    CT = W.T.copy()
    assert CT.base is not None
    CT.base.data[...] = 0
    assert array_bytes(W.data) == before


@given(case=cases())
def test_to_backend(backend, case):
    W = case.matrix(backend)
    assert W.to(backend) is W
    H = W.to("cpu")
    assert H.backend == "cpu"
    assert isinstance(H.data, np.ndarray)
    assert isinstance(H.indices, np.ndarray)
    assert array_bytes(H.data) == array_bytes(case.data)
    assert_same_structure(H, case)
    HT = W.T.to("cpu")
    assert HT.base is not None
    assert np.array_equal(HT.toarray(), dense_in_dtype(case).T)


def test_to_unknown_backend_raises(backend):
    W = cs.BlockSparseMatrix.from_layout(np.eye(2, dtype=bool), 8, backend=backend)
    with pytest.raises(ValueError, match=r"backend must be one of .*'cpu'.*'cuda'.*got 'tpu'"):
        W.to("tpu")


def test_to_cuda_without_cupy_raises(backend):
    if cs.cuda_available():
        pytest.skip("CUDA is available here: nothing to refuse")
    try:
        import cupy  # noqa: F401

        pytest.skip("cupy imports (but sees no GPU): the error comes from CUDA itself")
    except ImportError:
        pass
    W = cs.BlockSparseMatrix.from_layout(np.eye(2, dtype=bool), 8)
    with pytest.raises(RuntimeError, match="CuPy"):
        W.to("cuda")


def test_asarray_raises(backend):
    W = cs.BlockSparseMatrix.from_layout(np.eye(2, dtype=bool), 8, backend=backend)
    with pytest.raises(TypeError, match="toarray"):
        np.asarray(W)
    with pytest.raises(TypeError, match="toarray"):
        np.array(W)


def test_repr(backend):
    layout = np.array([[True, False, True], [False, False, True]])
    W = cs.BlockSparseMatrix.from_layout(layout, 16, dtype="float64", backend=backend)
    assert repr(W) == (
        f"<BlockSparseMatrix 32x48, blocksize 16, 3 blocks (density 0.500), float64, {backend}>"
    )
    assert repr(W.T) == (
        f"<BlockSparseMatrix 48x32, blocksize 16, 3 blocks (density 0.500), float64, {backend}, "
        "transposed view>"
    )


@pytest.mark.parametrize("dtype", HALF_NAMES)
@given(case=cases(dtypes=st.just(None)))
def test_half_to_scipy_upcasts_to_float32(backend, dtype, case):
    case = Case(case.blocksize, _dtypes.as_dtype(dtype), case.layout, case.seed)
    W = case.matrix(backend)
    R = W.to_scipy()
    assert R.dtype == np.float32
    assert np.array_equal(R.data, case.data.astype(np.float32))  # exact upcast
    assert np.array_equal(R.toarray().astype(np.float64), case.dense64())
    RT = W.T.to_scipy()
    assert RT.dtype == np.float32
    assert np.array_equal(RT.toarray().astype(np.float64), case.dense64().T)


@given(case=cases(kinds=st.just("empty")))
def test_empty_matrix(backend, case):
    W = case.matrix(backend)
    assert W.nnzb == 0
    assert W.density == 0.0
    assert to_numpy(W.data).shape == (0, case.blocksize, case.blocksize)
    assert (to_numpy(W.toarray()) == 0).all()
    assert W.to_scipy().nnz == 0
    assert W.T.nnzb == 0
    assert (to_numpy(W.T.toarray()) == 0).all()


def test_constructor_accepts_int64_indices(backend):
    xp = xp_for(backend)
    data = xp.ones((2, 8, 8), dtype=xp.float32)
    W = cs.BlockSparseMatrix(
        (data, xp.asarray([1, 0], dtype=xp.int64), xp.asarray([0, 1, 2], dtype=xp.int64)),
        shape=(16, 16),
    )
    assert np.array_equal(W.layout, [[False, True], [True, False]])
    assert re.search("float32", repr(W))
    # Stored as int32, the kernels' index type (values beyond it are refused:
    # tests/test_matrix_safety.py).
    assert W.indices.dtype == np.int32
    assert W.indptr.dtype == np.int32
    assert W._structure.host_indices.dtype == np.int32
