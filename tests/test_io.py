"""save_npz / load_npz: round trips for every dtype, SciPy interoperability both ways, and
the errors for files that hold no loadable block-sparse matrix."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import array_bytes, to_numpy
from hypothesis import given
from hypothesis import strategies as st
from strategies import HAS_BFLOAT16, cases

import cubsparse as cs
from cubsparse import _dtypes

HALF_NAMES = ["float16"] + (["bfloat16"] if HAS_BFLOAT16 else [])


def saved(W, tmp_dir=None, **kw):
    """W saved to a BytesIO (rewound), or to a file under tmp_dir (its path)."""
    if tmp_dir is None:
        f = io.BytesIO()
        cs.save_npz(f, W, **kw)
        f.seek(0)
        return f
    path = tmp_dir / "w.npz"
    cs.save_npz(path, W, **kw)
    return path


def assert_identical(A, B):
    """Same shape, block size, dtype, layout and bit-identical values."""
    assert A.shape == B.shape
    assert A.blocksize == B.blocksize
    assert A.dtype == B.dtype
    assert np.array_equal(to_numpy(A.indices), to_numpy(B.indices))
    assert np.array_equal(to_numpy(A.indptr), to_numpy(B.indptr))
    assert array_bytes(A.data) == array_bytes(B.data)


# -- round trips -------------------------------------------------------------------------------
@given(case=cases(), compressed=st.booleans(), to_path=st.booleans())
def test_round_trip_every_dtype(backend, case, compressed, to_path, tmp_path_factory):
    W = case.matrix(backend)
    f = saved(W, tmp_path_factory.getbasetemp() if to_path else None, compressed=compressed)
    V = cs.load_npz(f, backend=backend)
    assert V.backend == backend
    assert V.base is None
    assert_identical(V, W)


@given(case=cases())
def test_round_trip_across_backends(backend, case):
    W = case.matrix(backend)
    assert_identical(cs.load_npz(saved(W)), W.to("cpu"))


@given(case=cases())
def test_transposed_view_is_saved_materialised(backend, case):
    W = case.matrix(backend)
    V = cs.load_npz(saved(W.T), backend=backend)
    assert V.base is None
    assert V.shape == W.T.shape
    assert_identical(V, W.T._materialized())
    np.testing.assert_array_equal(to_numpy(V.toarray()), to_numpy(W.toarray()).T)


@pytest.mark.parametrize("dtype", HALF_NAMES)
def test_half_dtypes_round_trip_bit_for_bit(backend, dtype):
    # Special values and every NaN payload kind survive the float32 storage exactly.
    bits = np.array([0x0000, 0x8000, 0x0001, 0x8001, 0x3C00, 0x7C00, 0xFC00,  # float16 view
                     0x7C01, 0x7E05, 0xFE00, 0x7BFF, 0x03FF, 0x7F81, 0x7FC5, 0xFF80, 0x0080],
                    dtype=np.uint16)
    data = np.resize(bits, 2 * 8 * 8).reshape(2, 8, 8).view(_dtypes.as_dtype(dtype))
    W = cs.BlockSparseMatrix.from_layout(np.eye(2, dtype=bool), 8, dtype=dtype, backend=backend)
    W.data = data if backend == "cpu" else _to_cuda(data)
    V = cs.load_npz(saved(W), backend=backend)
    assert V.dtype == W.dtype
    assert array_bytes(V.data) == array_bytes(W.data)


def _to_cuda(a):
    import cupy

    return cupy.asarray(a)


@pytest.mark.parametrize("dtype", HALF_NAMES)
def test_half_file_layout(dtype):
    # What the file holds for a half dtype: float32 values and the key naming the dtype.
    W = cs.BlockSparseMatrix.from_layout(np.eye(2, dtype=bool), 8, dtype=dtype, seed=0)
    with np.load(saved(W)) as f:
        assert f["data"].dtype == np.float32
        assert f["cubsparse_dtype"].item() == dtype
        np.testing.assert_array_equal(f["data"], W.data.astype(np.float32))


def test_float_file_layout_is_scipys():
    # float32 and float64 files hold exactly SciPy's keys (no extra key).
    W = cs.BlockSparseMatrix.from_layout(np.eye(2, dtype=bool), 8, seed=0)
    ours, theirs = io.BytesIO(), io.BytesIO()
    cs.save_npz(ours, W)
    sp.save_npz(theirs, W.to_scipy())
    ours.seek(0)
    theirs.seek(0)
    with np.load(ours) as a, np.load(theirs) as b:
        assert sorted(a.files) == sorted(b.files)
        for key in b.files:
            np.testing.assert_array_equal(a[key], b[key])
            assert a[key].dtype == b[key].dtype or key == "shape"


# -- SciPy interoperability ----------------------------------------------------------------------
@given(case=cases())
def test_scipy_reads_our_files(backend, case):
    W = case.matrix(backend)
    S = sp.load_npz(saved(W))
    R = W.to_scipy()  # float32 for the half dtypes, like the file
    assert isinstance(S, sp.bsr_array)
    assert S.format == "bsr"
    assert S.blocksize == (case.blocksize, case.blocksize)
    assert S.shape == W.shape
    assert S.dtype == R.dtype
    assert np.array_equal(S.indices, R.indices)
    assert np.array_equal(S.indptr, R.indptr)
    assert np.array_equal(S.data, R.data)


@given(case=cases(dtypes=st.sampled_from(["float32", "float64"])), as_array=st.booleans())
def test_we_read_scipys_files(backend, case, as_array):
    S = case.scipy64().astype(case.dtype)
    if not as_array:
        S = sp.bsr_matrix(S)
    f = io.BytesIO()
    sp.save_npz(f, S)
    f.seek(0)
    W = cs.load_npz(f, backend=backend)
    assert W.backend == backend
    assert W.dtype == case.dtype
    assert W.blocksize == case.blocksize
    assert np.array_equal(to_numpy(W.indices), S.indices)
    assert np.array_equal(to_numpy(W.indptr), S.indptr)
    assert np.array_equal(to_numpy(W.data), S.data)


def test_uncompressed_scipy_file_on_disk(tmp_path):
    S = sp.bsr_array(np.kron(np.eye(3), np.ones((16, 16))), blocksize=(16, 16))
    sp.save_npz(tmp_path / "s.npz", S, compressed=False)
    W = cs.load_npz(tmp_path / "s.npz")
    assert W.nnzb == 3
    np.testing.assert_array_equal(W.toarray(), S.toarray())
    W = cs.load_npz(str(tmp_path / "s.npz"))
    assert W.nnzb == 3


# -- errors --------------------------------------------------------------------------------------
def test_non_bsr_file_raises(tmp_path):
    path = tmp_path / "csr.npz"
    sp.save_npz(path, sp.random(32, 32, density=0.1, format="csr", random_state=0))
    with pytest.raises(ValueError, match=re.escape("load_npz reads BSR matrices, but ") + ".*"
                       + re.escape("holds a 'csr' matrix: load it with scipy.sparse.load_npz "
                                   "and convert it with BlockSparseMatrix.from_scipy")):
        cs.load_npz(path)


def test_file_without_a_matrix_raises(tmp_path):
    np.savez(tmp_path / "plain.npz", a=np.ones(3))
    with pytest.raises(ValueError, match=r"holds no sparse matrix \(no 'format' key; keys: a\)"):
        cs.load_npz(tmp_path / "plain.npz")
    np.save(tmp_path / "array.npy", np.ones(3))
    with pytest.raises(ValueError, match=r"is a \.npy array, not an \.npz archive"):
        cs.load_npz(tmp_path / "array.npy")


def test_non_square_blocks_raise():
    S = sp.bsr_array(np.ones((32, 32)), blocksize=(8, 16))
    f = io.BytesIO()
    sp.save_npz(f, S)
    f.seek(0)
    with pytest.raises(ValueError, match=r"the file holds blocks of 8x16, but a "
                                         r"BlockSparseMatrix has square blocks"):
        cs.load_npz(f)


def test_unsupported_block_size_raises():
    S = sp.bsr_array(np.ones((12, 12)), blocksize=(4, 4))
    f = io.BytesIO()
    sp.save_npz(f, S)
    f.seek(0)
    with pytest.raises(ValueError, match=re.escape(
            "the file holds blocks of 4x4, but the block size must be one of (8, 16, 32, 64, "
            "128)")):
        cs.load_npz(f)


def test_unsupported_dtype_raises():
    S = sp.bsr_array(np.ones((16, 16), dtype=np.int32), blocksize=(8, 8))
    f = io.BytesIO()
    sp.save_npz(f, S)
    f.seek(0)
    with pytest.raises(TypeError, match="the file holds values that cannot be loaded: dtype "
                                        "must be one of"):
        cs.load_npz(f)


def test_invalid_layout_raises():
    f = io.BytesIO()
    np.savez(f, format=b"bsr", shape=(16, 16), data=np.ones((2, 8, 8)), _is_array=True,
             indices=np.array([1, 0]), indptr=np.array([0, 2, 2]))  # unsorted in row 0
    f.seek(0)
    with pytest.raises(ValueError, match="the file holds an invalid BSR matrix: indices must "
                                         "be sorted and unique"):
        cs.load_npz(f)


def test_unknown_stored_dtype_raises():
    f = io.BytesIO()
    np.savez(f, format=b"bsr", shape=(8, 8), data=np.ones((1, 8, 8), np.float32),
             indices=np.array([0]), indptr=np.array([0, 1]), cubsparse_dtype=np.array("int4"))
    f.seek(0)
    with pytest.raises(ValueError, match="unknown stored dtype 'int4'"):
        cs.load_npz(f)


def test_save_non_matrix_raises():
    with pytest.raises(TypeError, match=re.escape(
            "save_npz saves a BlockSparseMatrix, got bsr_array; for a scipy.sparse matrix use "
            "scipy.sparse.save_npz")):
        cs.save_npz(io.BytesIO(), sp.bsr_array(np.ones((8, 8)), blocksize=(8, 8)))


def test_unknown_backend_raises():
    W = cs.BlockSparseMatrix.from_layout(np.eye(2, dtype=bool), 8)
    with pytest.raises(ValueError, match="backend must be one of"):
        cs.load_npz(saved(W), backend="tpu")
