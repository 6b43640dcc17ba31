"""Data safety of BlockSparseMatrix: no wrapped indices, an immutable layout, ``W.data -= g``.

Each test runs on both backends (the CUDA case skips visibly without a GPU).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import array_bytes, to_backend, to_numpy, xp_for

import cubsparse as cs

B = 8
I32_MAX = 2**31 - 1


def build(backend, indices, indptr, *, index_dtype="int64", shape=(16, 16), check=True):
    """A matrix with ``len(indices)`` blocks of ones from index arrays in ``index_dtype``."""
    xp = xp_for(backend)
    data = xp.ones((len(indices), B, B), dtype="float32")
    return cs.BlockSparseMatrix(
        (data, xp.asarray(np.array(indices, dtype=index_dtype)),
         xp.asarray(np.array(indptr, dtype=index_dtype))),
        shape=shape, check=check,
    )


def matrix(backend, layout=((False, True), (True, True)), seed=0):
    """16 x 16, 3 blocks by default (indices [1, 0, 1], indptr [0, 1, 3])."""
    return cs.BlockSparseMatrix.from_layout(np.array(layout), B, seed=seed, backend=backend)


# -- 1. indices that do not fit int32 are refused, never wrapped ---------------------------------
@pytest.mark.parametrize("dtype", ["int64", "uint64"])
def test_indices_beyond_int32_refused_with_their_real_values(backend, dtype):
    # 2**32 and 2**32 + 1 used to be cast to int32 first and stored as [0, 1].
    with pytest.raises(ValueError, match=re.escape(
        "indices must lie in [0, 2) (N // blocksize), got values in [4294967296, 4294967297] "
        "(first offending entry: indices[0] = 4294967296)"
    )):
        build(backend, [2**32, 2**32 + 1], [0, 1, 2], index_dtype=dtype)
    # 2**31 used to be rejected as -2147483648.
    with pytest.raises(ValueError, match=re.escape(
        "got values in [0, 2147483648] (first offending entry: indices[1] = 2147483648)"
    )):
        build(backend, [0, 2**31], [0, 1, 2], index_dtype=dtype)


@pytest.mark.parametrize(("dtype", "values", "lo", "hi", "pos"), [
    ("int64", [2**32, 2**32 + 1], 2**32, 2**32 + 1, 0),
    ("int64", [0, 2**31], 0, 2**31, 1),
    ("int64", [-1, -(2**32)], -(2**32), -1, 1),  # -1 fits: the first that does not is named
    ("uint64", [1, 2**64 - 1], 1, 2**64 - 1, 1),
    ("uint32", [2**31, 0], 0, 2**31, 0),  # a cast to int32 would make it negative
])
def test_unchecked_construction_still_refuses_values_beyond_int32(
    backend, dtype, values, lo, hi, pos
):
    with pytest.raises(ValueError, match=re.escape(
        f"indices must fit in int32, the index type of the kernels: expected values in "
        f"[-2147483648, 2147483647], got values in [{lo}, {hi}] "
        f"(first offending entry: indices[{pos}] = {values[pos]})"
    )):
        build(backend, values, [0, 1, 2], index_dtype=dtype, check=False)


def test_indptr_beyond_int32_refused_with_its_real_values(backend):
    with pytest.raises(ValueError, match=re.escape(
        "indptr must be non-decreasing, but indptr[2] < indptr[1] (2 < 4294967296)"
    )):
        build(backend, [1, 0], [0, 2**32, 2])
    with pytest.raises(ValueError, match=re.escape(
        "indptr must start at 0 and end at nnzb = 2, got 0 and 4294967298"
    )):
        build(backend, [1, 0], [0, 1, 2**32 + 2])
    with pytest.raises(ValueError, match=re.escape(
        "indptr must fit in int32, the index type of the kernels: expected values in "
        "[-2147483648, 2147483647], got values in [0, 4294967296] "
        "(first offending entry: indptr[1] = 4294967296)"
    )):
        build(backend, [1, 0], [0, 2**32, 2], check=False)


def test_unsigned_indptr_decreasing_is_detected(backend):
    # A difference of unsigned values wraps instead of going negative: the check compares.
    with pytest.raises(ValueError, match=re.escape(
        "indptr must be non-decreasing, but indptr[2] < indptr[1] (1 < 2)"
    )):
        build(backend, [0, 1], [0, 2, 1, 2], index_dtype="uint64", shape=(24, 16))


def test_in_range_index_that_does_not_fit_int32_is_refused(backend):
    # With N // b = 2**32 block columns, 2**32 - 1 passes the range check but not the cast.
    with pytest.raises(ValueError, match=re.escape(
        "indices must fit in int32, the index type of the kernels: expected values in "
        "[-2147483648, 2147483647], got values in [4294967295, 4294967295] "
        "(first offending entry: indices[0] = 4294967295)"
    )):
        build(backend, [2**32 - 1], [0, 1], shape=(B, B * 2**32))


@pytest.mark.parametrize("check", [True, False])
@pytest.mark.parametrize("dtype", ["int64", "uint64", "int16", "uint32"])
def test_wide_indices_that_fit_are_accepted_as_int32(backend, dtype, check):
    W = build(backend, [1, 0], [0, 1, 2], index_dtype=dtype, check=check)
    for arr, expected in ((W.indices, [1, 0]), (W.indptr, [0, 1, 2])):
        assert arr.dtype == np.int32
        assert to_numpy(arr).tolist() == expected
    assert np.array_equal(W.layout, [[False, True], [True, False]])
    W.check_format(full=True)


def test_largest_int32_index_is_kept_exactly(backend):
    W = build(backend, [I32_MAX], [0, 1], shape=(B, B * (I32_MAX + 1)))
    assert to_numpy(W.indices).tolist() == [I32_MAX]
    assert W._structure.host_indices.tolist() == [I32_MAX]


# -- 2. the layout is immutable once built --------------------------------------------------------
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_caller_arrays_are_copied(backend, index_dtype):
    xp = xp_for(backend)
    rng = np.random.default_rng(0)
    data = to_backend(rng.standard_normal((3, B, B)).astype(np.float32), backend)
    indices = xp.asarray(np.array([1, 0, 1], dtype=index_dtype))
    indptr = xp.asarray(np.array([0, 1, 3], dtype=index_dtype))
    W = cs.BlockSparseMatrix((data, indices, indptr), shape=(16, 16))
    x = to_backend(rng.standard_normal((4, 16)).astype(np.float32), backend)
    dense = to_numpy(W.toarray())
    y = to_numpy(x @ W)

    # Rewrite the caller's arrays into another valid layout: W must not notice.
    indices[...] = xp.asarray(np.array([0, 0, 1], dtype=index_dtype))
    indptr[...] = xp.asarray(np.array([0, 2, 3], dtype=index_dtype))
    assert to_numpy(W.indices).tolist() == [1, 0, 1]
    assert to_numpy(W.indptr).tolist() == [0, 1, 3]
    assert np.array_equal(W.layout, [[False, True], [True, True]])
    assert np.array_equal(to_numpy(W.toarray()), dense)
    assert np.array_equal(to_numpy(x @ W), y)
    assert np.allclose(to_numpy(x @ W), to_numpy(x) @ dense, atol=1e-5)
    W.check_format(full=True)

    s = W._structure
    for caller in (indices, indptr):
        for own in (s.indices, s.indptr):
            assert not xp.may_share_memory(own, caller)
        for own in (s.host_indices, s.host_indptr):
            assert not np.may_share_memory(own, to_numpy(caller))


def test_indices_and_indptr_cannot_be_written(backend):
    W = matrix(backend)
    x = to_backend(np.ones((2, 16), dtype=np.float32), backend)
    y, dense = to_numpy(x @ W), to_numpy(W.toarray())
    for M in (W, W.T):
        for name in ("indices", "indptr"):
            arr = getattr(M, name)
            before = to_numpy(arr).copy()
            if backend == "cpu":
                assert not arr.flags.writeable
                with pytest.raises(ValueError, match="read-only"):
                    arr[0] = 1
            else:  # CuPy arrays cannot be read-only: each access hands out a copy
                assert arr is not getattr(M, name)
                arr[...] = 1
            assert np.array_equal(to_numpy(getattr(M, name)), before)
    assert np.array_equal(to_numpy(x @ W), y)
    assert np.array_equal(to_numpy(W.toarray()), dense)
    W.check_format(full=True)


def test_host_copies_are_read_only_for_every_constructor(backend):
    import scipy.sparse as sp

    layout = np.array([[True, False], [True, True]])
    W = matrix(backend, layout)
    made = [
        W,
        cs.BlockSparseMatrix.from_dense(W.toarray(), B),
        cs.BlockSparseMatrix.from_scipy(sp.bsr_array(np.kron(layout, np.ones((B, B)))), B,
                                        backend=backend),
        cs.BlockSparseMatrix((W.data, W.indices, W.indptr), shape=W.shape),
        cs.BlockSparseMatrix(W, shape=None),
        W.to("cpu"),
    ]
    for M in made:
        for s in (M._structure, M._structure.transposed()):
            for arr in (s.host_indices, s.host_indptr):
                assert isinstance(arr, np.ndarray)
                assert arr.dtype == np.int32
                assert not arr.flags.writeable
            if backend == "cpu" or M.backend == "cpu":
                assert not s.indices.flags.writeable
                assert not s.indptr.flags.writeable


def test_check_format_catches_device_corruption(backend):
    """Only private state can be corrupted now; check_format still catches it."""
    W = matrix(backend)  # indices [1, 0, 1]
    s = W._structure
    if backend == "cpu":
        s.host_indices.setflags(write=True)  # deliberately past the read-only guard
        s.host_indices[...] = [1, 1, 1]
        msg = r"sorted and unique.*duplicate entries at positions 1 and 2"
    else:  # the kernels' device copy
        s.indices[...] = xp_for(backend).asarray([1, 1, 1], dtype="int32")
        msg = r"the device copy of indices differs from its host copy"
    with pytest.raises(ValueError, match=msg):
        W.check_format(full=True)


# -- 3. W.data assignment ------------------------------------------------------------------------
def test_augmented_assignment_updates_once(backend):
    W = matrix(backend)
    dW = matrix(backend, seed=1)
    storage = W.data
    before = to_numpy(W.data).copy()
    lr = 0.25  # a power of two: the product is exact on every backend
    W.data -= lr * dW.data  # used to raise AttributeError after updating the values
    assert W.data is storage
    expected = before - np.float32(lr) * to_numpy(dW.data)
    assert np.array_equal(to_numpy(W.data), expected)
    W.data *= 2
    W.data += dW.data
    assert W.data is storage
    expected = expected * 2 + to_numpy(dW.data)
    assert np.array_equal(to_numpy(W.data), expected)
    # The products and views see the new values.
    x = to_backend(np.ones((2, 16), dtype=np.float32), backend)
    assert np.allclose(to_numpy(x @ W), to_numpy(x) @ to_numpy(W.toarray()), atol=1e-5)
    assert np.array_equal(to_numpy(W.T.toarray()), to_numpy(W.toarray()).T)


def test_assignment_copies_into_the_same_storage(backend):
    xp = xp_for(backend)
    W = matrix(backend)
    T = W.T  # made before the assignment: it must see the new values too
    storage = W.data
    new = xp.arange(storage.size, dtype=storage.dtype).reshape(storage.shape)
    W.data = new
    assert W.data is storage
    assert W.data is not new
    assert np.array_equal(to_numpy(W.data), to_numpy(new))
    new[...] = -1  # a copy was taken: the caller's array is not aliased
    assert np.array_equal(to_numpy(W.data), np.arange(storage.size).reshape(storage.shape))
    assert np.array_equal(to_numpy(T.toarray()), to_numpy(W.toarray()).T)
    # A non-contiguous array and an overlapping view of the storage itself.
    W.data = xp.asfortranarray(new * 0 + 3)
    assert (to_numpy(W.data) == 3).all()
    W.data = new * 0 + xp.arange(3, dtype=storage.dtype).reshape(3, 1, 1)
    W.data = W.data[::-1]
    assert to_numpy(W.data)[:, 0, 0].tolist() == [2, 1, 0]
    assert W.data is storage


def test_bad_assignment_is_refused_before_anything_changes(backend):
    xp = xp_for(backend)
    W = matrix(backend)
    before = array_bytes(W.data)
    bad = [
        (ValueError, r"W\.data must be assigned an array of shape \(3, 8, 8\) \(nnzb, b, b\), "
                     r"got shape \(2, 8, 8\)", xp.zeros((2, B, B), "float32")),
        (ValueError, r"shape \(3, 8, 8\) .*got shape \(3, 64\)", xp.zeros((3, B * B), "float32")),
        (TypeError, r"W\.data must be assigned an array of dtype float32, got dtype float64",
         xp.zeros((3, B, B), "float64")),
        (TypeError, r"W\.data must be assigned a (NumPy|CuPy) array \(the matrix is on the "
                    rf"{backend} backend\), got list", [[[0.0] * B] * B] * 3),
        (TypeError, r"assigned a (NumPy|CuPy) array .*got float", 0.0),
    ]
    if backend == "cuda":
        bad.append((TypeError, r"assigned a CuPy array \(the matrix is on the cuda backend\), "
                               r"got ndarray", np.zeros((3, B, B), "float32")))
    for exc, msg, value in bad:
        with pytest.raises(exc, match=msg):
            W.data = value
        assert array_bytes(W.data) == before


def test_transposed_view_data_cannot_be_assigned(backend):
    W = matrix(backend)
    before = array_bytes(W.data)
    msg = r"a transposed view stores no values.*assign to W\.T\.base\.data"
    with pytest.raises(AttributeError, match=msg):
        W.T.data -= 1.0
    with pytest.raises(AttributeError, match=msg):
        W.T.data = W.T.data
    assert array_bytes(W.data) == before
    T = W.T
    T.base.data -= 1.0  # the documented way
    assert np.array_equal(to_numpy(W.data), np.frombuffer(before, np.float32).reshape(3, B, B)
                          - 1)
    assert "W.T.base.data" in type(W).data.__doc__


def test_sgd_step_like_the_readme(backend):
    """The training loop of the README, written with ``W.data -= lr * dW.data``."""
    rng = np.random.default_rng(0)
    W = cs.BlockSparseMatrix.from_layout(cs.layouts.random(4, 2, 0.5, seed=0), 16, seed=0,
                                         backend=backend)
    x = to_backend(rng.standard_normal((8, 64)).astype(np.float32), backend)
    dy = to_backend(rng.standard_normal((8, 32)).astype(np.float32), backend)
    dW = cs.sampled_matmul(x.T, dy, like=W)
    before = to_numpy(W.data).copy()
    W.data -= 0.125 * dW.data  # a power-of-two rate: exact products on every backend
    assert np.array_equal(to_numpy(W.data), before - np.float32(0.125) * to_numpy(dW.data))
    # dW keeps working as out= for the next step (the layout object is shared and intact).
    assert cs.sampled_matmul(x.T, dy, like=W, out=dW) is dW


def test_may_share_memory_is_a_bounds_test_for_device_arrays():
    """Two CuPy arrays over one buffer made by DLPack are two allocations of the same
    memory: the test compares addresses, not allocations (a stand-in array here)."""
    from types import SimpleNamespace

    from cubsparse._arrays import may_share_memory, overlaps_itself

    def arr(ptr, shape, strides, itemsize=4):
        return SimpleNamespace(data=SimpleNamespace(ptr=ptr), shape=shape, strides=strides,
                               itemsize=itemsize)

    rows = arr(1000, (4, 4), (16, 4))  # bytes 1000-1063
    assert may_share_memory(rows, arr(1060, (1, 1), (4, 4)))
    assert not may_share_memory(rows, arr(1064, (2, 2), (8, 4)))
    assert not may_share_memory(rows, arr(992, (2,), (4,)))  # ends at 1000
    assert may_share_memory(arr(1048, (4, 4), (-16, 4)), arr(1000, (1, 1), (4, 4)))
    assert not may_share_memory(rows, arr(1000, (0, 4), (16, 4)))  # empty
    assert not overlaps_itself(rows)
    assert not overlaps_itself(arr(0, (4, 4), (4, 16)))  # columns of rows: transposed
    assert not overlaps_itself(arr(0, (0, 4), (0, 0)))  # empty
    assert overlaps_itself(arr(0, (4, 4), (0, 4)))
    assert overlaps_itself(arr(0, (4, 4), (8, 4)))
    assert not overlaps_itself(arr(0, (1, 4), (0, 4)))  # one row: its stride is never used
