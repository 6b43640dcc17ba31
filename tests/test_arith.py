"""Arithmetic on block-sparse matrices: scalar and elementwise operators, in-place updates,
transposed views, reductions, and the errors for operands that do not fit."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import CUDA_SKIP_REASON, to_numpy, xp_for
from hypothesis import given
from hypothesis import strategies as st
from strategies import HAS_BFLOAT16, Case, cases, standard_normal

import cubsparse as cs
from cubsparse import _dtypes

#: Unit roundoff of each dtype (half the distance from 1 to the next value).
UNIT = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": 2.0**-24, "float64": 2.0**-53}
HALF_NAMES = ["float16"] + (["bfloat16"] if HAS_BFLOAT16 else [])
ALL_NAMES = [d.name for d in cs.SUPPORTED_DTYPES]
SCALARS = st.sampled_from((2, -3, 0.5, 0.1, -1.7, 10.0))

needs_cuda = pytest.mark.skipif(not cs.cuda_available(), reason=CUDA_SKIP_REASON)


def values64(W) -> np.ndarray:
    """W's stored blocks (in W.data's order) as float64 host values."""
    return to_numpy(W.data).astype(np.float64)


def dense64(W) -> np.ndarray:
    return to_numpy(W.toarray()).astype(np.float64)


def assert_close(got, want, dtype, ops: int = 1):
    """``got`` within ``ops`` roundings (plus a scalar's rounding) of the float64 ``want``."""
    rtol = 2 * (ops + 1) * UNIT[np.dtype(dtype).name]
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max(initial=0))


def other_values(W, case: Case, stream: int = 7):
    """A matrix with W's structure (shared) and other values."""
    V = W.copy()
    V.data = xp_for(W.backend).asarray(case.dense(case.data.shape, stream=stream))
    return V


def same_layout_matrix(W, case: Case, stream: int = 7):
    """A matrix with W's layout built separately: an equal, distinct Structure."""
    V = case.matrix(W.backend)
    V.data = xp_for(W.backend).asarray(case.dense(case.data.shape, stream=stream))
    return V


def small(backend, dtype="float32", layout=None, blocksize=16, seed=0):
    layout = cs.layouts.banded(4, 1) if layout is None else layout
    return cs.BlockSparseMatrix.from_layout(
        layout, blocksize, dtype=dtype, seed=seed, backend=backend
    )


# -- scalar operators --------------------------------------------------------------------------
@given(case=cases(), s=SCALARS)
def test_scalar_operators(backend, case, s):
    W = case.matrix(backend)
    before = values64(W)
    results = {
        "s * W": (s * W, before * s),
        "W * s": (W * s, before * s),
        "W / s": (W / s, before / s),
        "-W": (-W, -before),
        "+W": (+W, before),
        "abs(W)": (abs(W), np.abs(before)),
    }
    for expr, (R, want) in results.items():
        assert isinstance(R, cs.BlockSparseMatrix), expr
        assert R.dtype == W.dtype, expr
        assert R.backend == backend, expr
        assert R._structure is W._structure, expr  # the index structure is shared
        assert R._data is not W._data, expr
        assert_close(values64(R), want, W.dtype)
    assert np.array_equal(values64(W), before)  # the operands are left alone


@pytest.mark.parametrize("dtype", ALL_NAMES)
@pytest.mark.parametrize(
    "make_scalar",
    [
        pytest.param(lambda xp: np.float32(0.1), id="np.float32"),
        pytest.param(lambda xp: np.float64(0.1), id="np.float64"),
        pytest.param(lambda xp: np.int64(3), id="np.int64"),
        pytest.param(lambda xp: np.float16(0.5), id="np.float16"),
        pytest.param(lambda xp: np.asarray(0.1), id="numpy-0d"),
        pytest.param(lambda xp: xp.asarray(0.1, dtype=xp.float32), id="backend-0d"),
        pytest.param(lambda xp: xp.asarray(3), id="backend-0d-int"),
    ],
)
def test_numpy_and_device_scalars_keep_the_dtype(backend, dtype, make_scalar):
    # NumPy and CuPy arrays opt out for W (__array_ufunc__ = None): `np.float32(2) * W` and
    # `cupy_scalar * W` reach W's reflected operators, and never promote W's dtype.
    W = small(backend, dtype)
    s = make_scalar(xp_for(backend))
    want = values64(W) * float(to_numpy(s))
    for R in (s * W, W * s, W.multiply(s)):
        assert R.dtype == W.dtype
        assert_close(values64(R), want, dtype)
    assert_close(values64(W / s), values64(W) / float(to_numpy(s)), dtype)
    storage = W._data
    W *= s
    assert W._data is storage
    assert_close(values64(W), want, dtype)


@pytest.mark.parametrize("dtype", HALF_NAMES)
def test_half_scalar_products_do_not_promote(backend, dtype):
    W = small(backend, dtype)
    assert (W * 0.1).dtype == W.dtype
    assert (W * np.float64(0.1)).dtype == W.dtype
    assert (W / 3).dtype == W.dtype


@needs_cuda
def test_cupy_scalar_with_a_cpu_matrix_raises():
    import cupy

    W = small("cpu")
    with pytest.raises(TypeError, match="0-d CuPy array but the matrix lives on the cpu"):
        cupy.asarray(2.0) * W


# -- elementwise operators between matrices ----------------------------------------------------
@given(case=cases(), shared=st.booleans())
def test_matrix_operators(backend, case, shared):
    W = case.matrix(backend)
    V = other_values(W, case) if shared else same_layout_matrix(W, case)
    w, v = values64(W), values64(V)
    for expr, R, want, ops in (
        ("W + V", W + V, w + v, 1),
        ("W - V", W - V, w - v, 1),
        ("W - 0.1 * V", W - 0.1 * V, w - 0.1 * v, 2),
        ("W.multiply(V)", W.multiply(V), w * v, 1),
        ("V + W", V + W, w + v, 1),
    ):
        assert R.dtype == W.dtype, expr
        assert R.shape == W.shape, expr
        # No index copy: the result holds the left operand's structure.
        left = V if expr.startswith("V") else W
        assert R._structure is left._structure, expr
        if expr == "W - 0.1 * V":  # two roundings; cancellation makes it relative to |w|+|v|
            tol = 2 * (ops + 1) * UNIT[W.dtype.name] * (np.abs(w) + np.abs(v)).max(initial=0)
            np.testing.assert_allclose(values64(R), want, rtol=0, atol=tol)
        else:
            assert_close(values64(R), want, W.dtype, ops)
    assert np.array_equal(values64(W), w)
    assert np.array_equal(values64(V), v)


@given(case=cases(dtypes=st.sampled_from(["float32", "float64"])))
def test_sum_of_a_list_starts_from_zero(backend, case):
    W = case.matrix(backend)
    V = other_values(W, case)
    total = sum([W, V, W])  # 0 + W + V + W: adding 0 is allowed, as in SciPy
    assert_close(values64(total), 2 * values64(W) + values64(V), W.dtype, 2)
    assert np.array_equal(values64(0 + W), values64(W))
    assert np.array_equal(values64(W - 0), values64(W))
    assert np.array_equal(values64(0 - W), -values64(W))


# -- in place ------------------------------------------------------------------------------------
@given(case=cases(), lr=st.sampled_from((0.1, 0.01, 1.0)))
def test_in_place_updates_keep_object_and_buffer(backend, case, lr):
    W = case.matrix(backend)
    dW = other_values(W, case, stream=3)
    V = same_layout_matrix(W, case, stream=4)
    storage, ptr = W._data, W._data.__array_interface__["data"][0] if backend == "cpu" else None
    ref = values64(W)
    obj = W
    W -= lr * dW
    ref = ref - lr * values64(dW)
    assert W is obj
    assert W._data is storage
    tol = 6 * UNIT[W.dtype.name] * (np.abs(ref).max(initial=0) + 1)
    np.testing.assert_allclose(values64(W), ref, rtol=0, atol=tol)
    W += V
    ref = ref + values64(V)
    W *= 2
    ref = ref * 2
    W /= 4
    ref = ref / 4
    assert W is obj
    assert W._data is storage
    if backend == "cpu":
        assert W._data.__array_interface__["data"][0] == ptr
    tol = 20 * UNIT[W.dtype.name] * (np.abs(ref).max(initial=0) + 2)
    np.testing.assert_allclose(values64(W), ref, rtol=0, atol=tol)
    W += 0  # adding zero is a no-op
    W -= 0
    assert W is obj


def test_in_place_on_itself(backend):
    W = small(backend, "float64")
    before = values64(W)
    W += W
    np.testing.assert_array_equal(values64(W), 2 * before)
    W -= W
    np.testing.assert_array_equal(values64(W), 0 * before)


def test_in_place_updates_the_buffer_a_plan_holds(backend):
    # Anything that kept a reference to W's values (a CUDA plan, a captured graph, a view)
    # sees the update: the values are written into the existing buffer.
    W = small(backend)
    held = W.data
    T = W.T
    W -= 0.5 * W
    assert W.data is held
    np.testing.assert_array_equal(to_numpy(T.toarray()), to_numpy(W.toarray()).T)


# -- transposed views ------------------------------------------------------------------------------
@given(case=cases())
def test_operations_on_views(backend, case):
    W = case.matrix(backend)
    V = other_values(W, case)
    T, U = W.T, V.T
    t, u = dense64(T), dense64(U)
    for expr, R, want in (
        ("2 * W.T", 2 * T, 2 * t),
        ("-W.T", -T, -t),
        ("abs(W.T)", abs(T), np.abs(t)),
        ("W.T / 2", T / 2, t / 2),
        ("W.T + V.T", T + U, t + u),
        ("W.T - V.T", T - U, t - u),
        ("W.T.multiply(V.T)", T.multiply(U), t * u),
    ):
        assert R.base is not None, expr  # a view-shaped result: the transpose of (op on W)
        assert R.shape == T.shape, expr
        assert R._structure is W._structure, expr
        assert np.array_equal(R.layout, T.layout), expr
        assert_close(dense64(R), want, W.dtype)


@given(case=cases())
def test_view_and_matrix_of_the_same_layout(backend, case):
    # A view with a matrix of the same layout (materialised), in both orders.
    W = case.matrix(backend)
    M = other_values(W, case).T._materialized()  # a plain matrix laid out like W.T
    assert M.base is None
    for R, want in ((W.T + M, dense64(W.T) + dense64(M)), (M - W.T, dense64(M) - dense64(W.T)),
                    (W.T.multiply(M), dense64(W.T) * dense64(M))):
        assert R.shape == W.T.shape
        assert_close(dense64(R), want, W.dtype)


@given(case=cases())
def test_in_place_on_a_view_writes_into_the_base(backend, case):
    W = case.matrix(backend)
    G = other_values(W, case)
    storage = W._data
    want = dense64(W) - 0.5 * dense64(G)
    T = W.T
    T -= 0.5 * G.T
    assert T is W.T
    assert W._data is storage
    tol = 6 * UNIT[W.dtype.name] * (np.abs(want).max(initial=0) + 1)
    np.testing.assert_allclose(dense64(W), want, rtol=0, atol=tol)
    # The statement form: Python assigns the updated view back to W.T, which is accepted.
    W.T *= 2
    W.T += G.T._materialized()  # a plain matrix with the view's layout
    W.T /= 2
    want = (2 * want + dense64(G)) / 2
    assert W._data is storage
    np.testing.assert_allclose(dense64(W), want, rtol=0, atol=4 * tol)
    # A view of a view's transpose: W.T.T is W itself.
    W.T.T -= W
    assert W._data is storage
    np.testing.assert_array_equal(dense64(W), 0 * want)


def test_assigning_another_matrix_to_T_raises(backend):
    W = small(backend)
    with pytest.raises(AttributeError, match=r"W\.T is a view and cannot be assigned"):
        W.T = W.copy().T


# -- reductions ------------------------------------------------------------------------------------
@given(case=cases())
def test_sum(backend, case):
    W = case.matrix(backend)
    xp = xp_for(backend)
    got = W.sum()
    assert isinstance(got, xp.ndarray)
    assert got.ndim == 0
    want_dtype = np.float32 if _dtypes.is_half(W.dtype) else W.dtype
    assert got.dtype == want_dtype
    ref = values64(W).sum()
    acc = UNIT["float64" if W.dtype == np.float64 else "float32"]
    tol = 4 * acc * max(case.nnzb, 1) * W.blocksize**2 * np.abs(values64(W)).max(initial=0)
    assert abs(float(got) - ref) <= tol + 1e-12
    assert float(W.T.sum()) == float(got)  # a view sums its base's values


@given(case=cases())
def test_block_norms(backend, case):
    W = case.matrix(backend)
    xp = xp_for(backend)
    norms = W.block_norms()
    assert isinstance(norms, xp.ndarray)
    assert norms.shape == (case.nnzb,)
    assert norms.dtype == (np.float32 if _dtypes.is_half(W.dtype) else W.dtype)
    ref = np.sqrt((values64(W) ** 2).sum(axis=(1, 2)))
    acc = "float64" if W.dtype == np.float64 else "float32"
    np.testing.assert_allclose(to_numpy(norms), ref, rtol=4 * W.blocksize**2 * UNIT[acc])
    # A view lists the norms in its own block order (that of W.T.data).
    T = W.T
    ref_t = np.sqrt((values64(T) ** 2).sum(axis=(1, 2)))
    np.testing.assert_allclose(to_numpy(T.block_norms()), ref_t,
                               rtol=4 * W.blocksize**2 * UNIT[acc])


def test_block_norms_rejects_other_orders(backend):
    W = small(backend)
    for ord in (1, 2, "nuc", np.inf):
        with pytest.raises(ValueError, match="ord must be 'fro'"):
            W.block_norms(ord)


@pytest.mark.parametrize("dtype", HALF_NAMES)
def test_half_sum_does_not_overflow(backend, dtype):
    # 16 blocks of 64x64 values of 100: 6.5e6, far beyond float16's 65504.
    W = cs.BlockSparseMatrix.from_layout(
        np.ones((4, 4), dtype=bool), 64, dtype=dtype, init=lambda rng, s: np.full(s, 100.0),
        backend=backend,
    )
    assert float(W.sum()) == 16 * 64 * 64 * 100.0
    np.testing.assert_allclose(to_numpy(W.block_norms()), 6400.0)


def test_empty_matrix(backend):
    W = small(backend, layout=np.zeros((2, 3), dtype=bool))
    assert float(W.sum()) == 0.0
    assert W.block_norms().shape == (0,)
    for R in (2 * W, W + W, -W, abs(W), W.T - W.T, W.multiply(W)):
        assert R.nnzb == 0
    W -= W
    assert W.nnzb == 0


# -- errors ----------------------------------------------------------------------------------------
def test_different_layouts_raise(backend):
    W = small(backend)  # banded(4, 1): 10 blocks
    V = small(backend, layout=np.ones((4, 4), dtype=bool))  # 16 blocks
    msg = "W + V needs the same layout: W is 64x64 with 10 blocks of 16x16, V is 64x64 with 16"
    with pytest.raises(ValueError, match=re.escape(msg)):
        W + V
    with pytest.raises(ValueError, match=re.escape("W -= V needs the same layout")):
        W -= V
    with pytest.raises(ValueError, match=re.escape("W.multiply(V) needs the same layout")):
        W.multiply(V)
    # Same number of blocks in other positions.
    layout = cs.layouts.banded(4, 1).copy()
    layout[0, 3], layout[0, 1] = True, False
    U = small(backend, layout=layout)
    with pytest.raises(ValueError, match=r"10 blocks of 16x16 \(2 block positions differ\)"):
        W + U
    # A view with its base: a 4x4 layout that is not symmetric.
    A = small(backend, layout=cs.layouts.random(4, 4, 0.5, seed=3))
    assert not np.array_equal(A.layout, A.layout.T)
    with pytest.raises(ValueError, match="a transposed view"):
        A + A.T


def test_different_shapes_blocksizes_dtypes_raise(backend):
    W = small(backend)
    with pytest.raises(ValueError, match=re.escape("W + V needs the same shape: W is 64x64, V "
                                                   "is 64x32")):
        W + small(backend, layout=np.ones((4, 2), dtype=bool))
    with pytest.raises(ValueError, match=r"W - V needs the same layout: .* blocks of 8x8"):
        W - small(backend, layout=np.ones((8, 8), dtype=bool), blocksize=8)
    with pytest.raises(TypeError, match="W is float32, V is float64; convert one with astype"):
        W + W.astype("float64")
    with pytest.raises(TypeError, match="W is float32, V is float16"):
        W += W.astype("float16")


@needs_cuda
def test_different_backends_raise():
    W = small("cpu")
    with pytest.raises(TypeError, match="W is on cpu, V is on cuda"):
        W + W.to("cuda")
    with pytest.raises(TypeError, match="W is on cuda, V is on cpu"):
        W.to("cuda").multiply(W)


def test_dense_operands_raise(backend):
    W = small(backend)
    xp = xp_for(backend)
    dense = xp.ones(W.shape, dtype=W.dtype)
    kind = "numpy" if backend == "cpu" else "cupy"
    with pytest.raises(TypeError, match=f"W \\+ V needs V to be a BlockSparseMatrix with W's "
                                        f"layout .*got a {kind}.ndarray of shape \\(64, 64\\)"):
        W + dense
    with pytest.raises(TypeError, match=r"V - W needs V to be .*V - W.toarray\(\)"):
        dense - W
    with pytest.raises(TypeError, match=r"W \* s takes a real scalar s; got a .* use "
                                        r"W.multiply\(V\)"):
        W * dense
    with pytest.raises(TypeError, match=r"s \* W takes a real scalar s"):
        dense * W
    with pytest.raises(TypeError, match=r"W.multiply\(V\) needs V to be a BlockSparseMatrix"):
        W.multiply(dense)
    with pytest.raises(TypeError, match=r"W \+= V needs V to be"):
        W += dense
    with pytest.raises(TypeError, match=r"W \*= s takes a real scalar"):
        W *= dense
    with pytest.raises(TypeError, match=r"W / s takes a real scalar"):
        W / dense
    with pytest.raises(TypeError, match=r"a scipy\.sparse"):
        W + W.to_scipy()


def test_scalar_sums_raise(backend):
    W = small(backend)
    for expr, fn in (("W + s", lambda: W + 1), ("s + W", lambda: 1.5 + W),
                     ("W - s", lambda: W - 1), ("s - W", lambda: np.float32(2) - W),
                     ("W + s", lambda: W.T + 1)):
        with pytest.raises(TypeError, match=re.escape(expr) + " with a nonzero scalar s would "
                                            "change every entry.* the result would be dense"):
            fn()
    with pytest.raises(TypeError, match=r"W \+= s with a nonzero scalar"):
        W += 1
    with pytest.raises(TypeError, match=r"W \-= s with a nonzero scalar"):
        W -= 0.5


def test_ambiguous_and_undefined_operations_raise(backend):
    W = small(backend)
    with pytest.raises(TypeError, match=r"W \* V between two matrices is ambiguous"):
        W * W
    with pytest.raises(TypeError, match=r"W \*= s takes a real scalar"):
        W *= W
    with pytest.raises(TypeError, match="W / V would divide by the zeros"):
        W / W
    with pytest.raises(TypeError, match="s / W would divide by the zeros"):
        2 / W
    with pytest.raises(TypeError, match="needs a real number, got the complex number"):
        W * 1j
    with pytest.raises(TypeError, match="needs a real number, got the bool"):
        W * True
    with pytest.raises(TypeError, match="needs a real number, got the complex number"):
        W * np.complex64(1)
    with pytest.raises(TypeError, match="unsupported operand"):
        W + "a"
    with pytest.raises(TypeError, match="unsupported operand"):
        W * None


def test_failed_in_place_operations_leave_the_values(backend):
    W = small(backend)
    before = values64(W)
    for fn in (lambda: W.__iadd__(small(backend, layout=np.ones((4, 4), dtype=bool))),
               lambda: W.__isub__(W.astype("float64")), lambda: W.__iadd__(1),
               lambda: W.__imul__(W)):
        with pytest.raises((TypeError, ValueError)):
            fn()
    np.testing.assert_array_equal(values64(W), before)


def test_matmul_with_arrays_still_works(backend):
    # __array_ufunc__ = None hands `x @ W` to W.__rmatmul__ as before.
    W = small(backend)
    x = xp_for(backend).asarray(standard_normal(np.random.default_rng(0), (3, 64), np.float32))
    np.testing.assert_allclose(to_numpy(x @ W), to_numpy(x) @ dense64(W), rtol=1e-4, atol=1e-4)
