"""Property tests of matmul and sampled_matmul against float64 SciPy/NumPy references.

Errors are measured as the relative Frobenius norm ``||out - ref|| / ||ref||`` against a
float64 reference computed from the values actually stored (half-precision inputs are
upcast exactly, so only the op's own rounding counts), with the per-dtype budget of
``cubsparse._dtypes.TOLERANCE``. Where the reference is exactly zero the output must be
exactly zero too.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import array_bytes, poison, to_backend, to_numpy, xp_for
from hypothesis import given
from hypothesis import strategies as st
from strategies import BATCH_SHAPES, INNER, RIGHT_COLS, Case, cases, layout_cases, tolerance

import cubsparse as cs

FORMS = ("x@W", "dy@W.T", "W@d", "W.T@d")
forms = st.sampled_from(FORMS)
ALPHAS = st.sampled_from((1.0, 2.0, -0.5, 0.0, 3))


# -- helpers ---------------------------------------------------------------------------------
def assert_close(out, ref, dtype, what=""):
    """Relative Frobenius error of ``out`` (any backend) against the float64 ``ref``."""
    got = to_numpy(out).astype(np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != reference {ref.shape}"
    assert np.isfinite(got).all(), f"{what}: non-finite values in the output (poison left?)"
    ref_norm = np.linalg.norm(ref)
    if ref_norm == 0:
        assert (got == 0).all(), f"{what}: reference is exactly 0 but output is not"
        return
    err = np.linalg.norm(got - ref) / ref_norm
    tol = tolerance(dtype)
    assert err <= tol, f"{what}: relative error {err:.3g} > {tol:g} for {np.dtype(dtype).name}"


def matmul_case(case: Case, form: str, lead, cols, backend):
    """``(a, b, ref64, zero_mask, zero_axis)`` for ``matmul(a, b)`` in the given form.

    ``zero_mask`` marks the output positions (along ``zero_axis``) fed only by empty block
    rows/columns of W: they must come out exactly zero.
    """
    M, N = case.shape
    b = case.blocksize
    S = case.scipy64()
    W = case.matrix(backend)
    empty_rows = np.repeat(~case.layout.any(axis=1), b)  # (M,)
    empty_cols = np.repeat(~case.layout.any(axis=0), b)  # (N,)
    if form in ("x@W", "dy@W.T"):
        k_in, k_out = (M, N) if form == "x@W" else (N, M)
        x = case.dense((*tuple(lead), k_in))
        x2 = x.astype(np.float64).reshape(-1, k_in)
        prod = (S.T @ x2.T).T if form == "x@W" else (S @ x2.T).T
        ref = prod.reshape((*tuple(lead), k_out))
        if form == "x@W":
            return to_backend(x, backend), W, ref, empty_cols, -1
        return to_backend(x, backend), W.T, ref, empty_rows, -1
    k_in = N if form == "W@d" else M
    d = case.dense((k_in,) if cols is None else (k_in, cols))
    d64 = d.astype(np.float64)
    if form == "W@d":
        return W, to_backend(d, backend), S @ d64, empty_rows, 0
    return W.T, to_backend(d, backend), S.T @ d64, empty_cols, 0


def assert_zero_region(out, mask, axis, what=""):
    got = np.moveaxis(to_numpy(out), axis, 0)
    assert (got[mask] == 0).all(), f"{what}: outputs of empty block rows/columns are not 0"


def assert_backend_array(arr, backend):
    assert isinstance(arr, xp_for(backend).ndarray), type(arr)


# -- matmul --------------------------------------------------------------------------------
@given(case=cases(), form=forms, lead=BATCH_SHAPES, cols=RIGHT_COLS)
def test_matmul_matches_reference(backend, case, form, lead, cols):
    a, b, ref, zmask, zaxis = matmul_case(case, form, lead, cols, backend)
    out = cs.matmul(a, b)
    assert_backend_array(out, backend)
    assert out.dtype == case.dtype
    assert out.shape == ref.shape
    assert_close(out, ref, case.dtype, form)
    assert_zero_region(out, zmask, zaxis, form)


@given(case=cases(), form=forms, lead=BATCH_SHAPES, cols=RIGHT_COLS)
def test_matmul_operator(backend, case, form, lead, cols):
    """``a @ b`` calls matmul (bitwise the same result), for NumPy and CuPy left operands."""
    a, b, _, _, _ = matmul_case(case, form, lead, cols, backend)
    op = a @ b
    assert_backend_array(op, backend)
    assert array_bytes(op) == array_bytes(cs.matmul(a, b))


@given(case=cases(), form=forms, lead=BATCH_SHAPES, cols=RIGHT_COLS, alpha=ALPHAS)
def test_matmul_out_poisoned_is_overwritten(backend, case, form, lead, cols, alpha):
    a, b, ref, zmask, zaxis = matmul_case(case, form, lead, cols, backend)
    out = poison(ref.shape, case.dtype, backend)
    res = cs.matmul(a, b, out=out, alpha=alpha, beta=0.0)
    assert res is out
    assert_close(out, alpha * ref, case.dtype, f"{form} alpha={alpha}")
    assert_zero_region(out, zmask, zaxis, form)


@given(case=cases(), form=forms, lead=BATCH_SHAPES, cols=RIGHT_COLS)
def test_matmul_beta_accumulates(backend, case, form, lead, cols):
    a, b, ref, _, _ = matmul_case(case, form, lead, cols, backend)
    old = case.dense(ref.shape, stream=7)
    out = to_backend(old.copy(), backend)
    res = cs.matmul(a, b, out=out, alpha=2.0, beta=0.5)
    assert res is out
    assert_close(out, 2.0 * ref + 0.5 * old.astype(np.float64), case.dtype, form)


@given(case=cases(), lead=st.sampled_from(((3,), (2, 3), (1,))))
def test_matmul_noncontiguous_dense_operands(backend, case, lead):
    """Strided / transposed views are read as they are (no copy needed by the caller)."""
    xp = xp_for(backend)
    M, N = case.shape
    S = case.scipy64()
    W = case.matrix(backend)
    # x @ W with x a strided view
    big = case.dense((*tuple(lead), 2 * M))
    x = to_backend(big, backend)[..., ::2]
    assert not x.flags.c_contiguous
    ref = (S.T @ big[..., ::2].astype(np.float64).reshape(-1, M).T).T.reshape((*tuple(lead), N))
    assert_close(cs.matmul(x, W), ref, case.dtype, "strided x @ W")
    # x @ W with x an offset view: rows contiguous, base and row stride misaligned
    big = case.dense((*tuple(lead), M + 3), stream=4)
    x = to_backend(big, backend)[..., 1 : M + 1]
    ref = (S.T @ big[..., 1 : M + 1].astype(np.float64).reshape(-1, M).T).T
    assert_close(cs.matmul(x, W), ref.reshape((*tuple(lead), N)), case.dtype, "offset x @ W")
    # W @ d with d a transposed view (F-ordered)
    dT = case.dense((3, N), stream=2)
    d = to_backend(dT, backend).T
    assert_close(cs.matmul(W, d), S @ dT.T.astype(np.float64), case.dtype, "W @ d.T-view")
    # W.T @ d with d strided along rows
    dbig = case.dense((2 * M, 2), stream=3)
    d = to_backend(dbig, backend)[::2]
    assert_close(cs.matmul(W.T, d), S.T @ dbig[::2].astype(np.float64), case.dtype, "W.T @ d[::2]")
    del xp


@given(case=cases(kinds=st.just("random")), alpha=ALPHAS)
def test_matmul_out_noncontiguous(backend, case, alpha):
    """``out`` may be a view whose rows cannot be flattened without a copy."""
    xp = xp_for(backend)
    M, N = case.shape
    S = case.scipy64()
    W = case.matrix(backend)
    x = case.dense((2, 3, M))
    ref = (S.T @ x.astype(np.float64).reshape(-1, M).T).T.reshape(2, 3, N)
    # (2, 3, N) view of a (3, 2, N) buffer: the batch axes cannot be merged.
    out = xp.full((3, 2, N), np.nan, dtype=case.dtype).transpose(1, 0, 2)
    res = cs.matmul(to_backend(x, backend), W, out=out, alpha=alpha)
    assert res is out
    assert_close(out, alpha * ref, case.dtype, "x @ W into transposed-view out")


@given(case=cases(), beta=st.sampled_from((0.0, 0.5)), n=st.sampled_from((1, 3, 300)))
def test_matmul_out_offset_view(backend, case, beta, n):
    """``out`` a 2-D view with misaligned base and row stride (e.g. a slice of a buffer)."""
    M, N = case.shape
    S = case.scipy64()
    W = case.matrix(backend)
    x = case.dense((n, M))
    ref = (S.T @ x.astype(np.float64).T).T
    old = case.dense((n, N + 3), stream=5)
    buf = to_backend(old.copy(), backend)
    out = buf[:, 1 : N + 1]
    res = cs.matmul(to_backend(x, backend), W, out=out, alpha=2.0, beta=beta)
    assert res is out
    expected = 2.0 * ref + beta * old[:, 1 : N + 1].astype(np.float64)
    assert_close(out, expected, case.dtype, f"x @ W into offset view, beta={beta}")
    # The columns around the view are untouched.
    host = to_numpy(buf)
    assert np.array_equal(host[:, [0, N + 1, N + 2]], old[:, [0, N + 1, N + 2]])
    # Same for W @ d into an offset view of a (M, k + 3) buffer.
    d = case.dense((N, 5), stream=6)
    oldd = case.dense((M, 8), stream=7)
    bufd = to_backend(oldd.copy(), backend)
    outd = bufd[:, 1:6]
    assert cs.matmul(W, to_backend(d, backend), out=outd, beta=beta) is outd
    expected = S @ d.astype(np.float64) + beta * oldd[:, 1:6].astype(np.float64)
    assert_close(outd, expected, case.dtype, f"W @ d into offset view, beta={beta}")
    host = to_numpy(bufd)
    assert np.array_equal(host[:, [0, 6, 7]], oldd[:, [0, 6, 7]])


@given(case=cases(kinds=st.just("random")))
def test_matmul_beta_into_noncontiguous_out(backend, case):
    """beta accumulation into an ``out`` whose batch axes cannot be merged (no copy)."""
    M, N = case.shape
    S = case.scipy64()
    W = case.matrix(backend)
    x = case.dense((2, 3, M))
    ref = (S.T @ x.astype(np.float64).reshape(-1, M).T).T.reshape(2, 3, N)
    old = case.dense((2, 3, N), stream=5)
    out = to_backend(np.ascontiguousarray(old.transpose(1, 0, 2)), backend).transpose(1, 0, 2)
    res = cs.matmul(to_backend(x, backend), W, out=out, alpha=2.0, beta=0.5)
    assert res is out
    assert_close(out, 2.0 * ref + 0.5 * old.astype(np.float64), case.dtype, "beta into view out")


@given(case=layout_cases("empty"), form=forms, lead=BATCH_SHAPES, cols=RIGHT_COLS)
def test_matmul_empty_layout_gives_exact_zeros(backend, case, form, lead, cols):
    a, b, ref, _, _ = matmul_case(case, form, lead, cols, backend)
    assert case.nnzb == 0
    out = cs.matmul(a, b)
    assert (to_numpy(out) == 0).all()
    out = poison(ref.shape, case.dtype, backend)
    cs.matmul(a, b, out=out, alpha=2.0)
    assert (to_numpy(out) == 0).all()


@given(case=layout_cases("full"), form=forms, lead=BATCH_SHAPES, cols=RIGHT_COLS)
def test_matmul_full_layout_equals_dense(backend, case, form, lead, cols):
    a, b, ref, _, _ = matmul_case(case, form, lead, cols, backend)
    W_dense = to_numpy((a if form.startswith("W") else b).toarray()).astype(np.float64)
    dense_operand = to_numpy(b if form.startswith("W") else a).astype(np.float64)
    dense_ref = W_dense @ dense_operand if form.startswith("W") else dense_operand @ W_dense
    np.testing.assert_allclose(dense_ref, ref, rtol=1e-10, atol=1e-10)
    assert_close(cs.matmul(a, b), dense_ref, case.dtype, form)


# -- sampled_matmul --------------------------------------------------------------------------
def sampled_case(case: Case, n: int, transposed: bool, backend):
    """``(a, b, like, ref64_dense, mask)``: a @ b sampled on W (or W.T), a a ``.T`` view."""
    M, N = case.shape
    x = case.dense((n, M), stream=1)
    dy = case.dense((n, N), stream=2)
    W = case.matrix(backend)
    prod = x.astype(np.float64).T @ dy.astype(np.float64)  # (M, N)
    mask = case.mask64()
    if transposed:  # dW.T = dy.T @ x on W.T's blocks
        return (to_backend(dy, backend).T, to_backend(x, backend), W.T, (prod * mask).T)
    return to_backend(x, backend).T, to_backend(dy, backend), W, prod * mask


def check_sampled_result(res, like, backend, dtype):
    assert isinstance(res, cs.BlockSparseMatrix)
    assert res.backend == backend
    assert res.dtype == dtype
    assert res.shape == like.shape
    assert res.blocksize == like.blocksize
    assert res.nnzb == like.nnzb
    assert np.array_equal(res.layout, like.layout)
    assert (res.base is None) == (like.base is None)


@given(case=cases(), n=INNER, transposed=st.booleans())
def test_sampled_matmul_matches_reference(backend, case, n, transposed):
    a, b, like, ref = sampled_case(case, n, transposed, backend)
    assert a.base is not None  # a is x.T (or dy.T): a view, not a copy
    res = cs.sampled_matmul(a, b, like=like)
    check_sampled_result(res, like, backend, case.dtype)
    dense = res.toarray()
    assert_close(dense, ref, case.dtype, f"sampled (like={'W.T' if transposed else 'W'})")
    # Nothing outside the layout.
    outside = (case.mask64() == 0) if not transposed else (case.mask64() == 0).T
    assert (to_numpy(dense)[outside] == 0).all()


@given(case=cases(), n=INNER, transposed=st.booleans(), alpha=ALPHAS)
def test_sampled_matmul_out_poisoned_is_overwritten(backend, case, n, transposed, alpha):
    a, b, like, ref = sampled_case(case, n, transposed, backend)
    W = like.base if transposed else like
    out = cs.BlockSparseMatrix(
        (poison((W.nnzb, W.blocksize, W.blocksize), case.dtype, backend), W.indices, W.indptr),
        shape=W.shape,
    )
    out = out.T if transposed else out
    res = cs.sampled_matmul(a, b, like=like, out=out, alpha=alpha, beta=0.0)
    assert res is out
    assert np.isfinite(to_numpy(out.data).astype(np.float64)).all()
    assert_close(out.toarray(), alpha * ref, case.dtype, "sampled out=poison")


@given(case=cases(), n=INNER, transposed=st.booleans())
def test_sampled_matmul_beta_accumulates(backend, case, n, transposed):
    a, b, like, ref = sampled_case(case, n, transposed, backend)
    W = like.base if transposed else like
    old = case.dense((W.nnzb, W.blocksize, W.blocksize), stream=9)
    out = cs.BlockSparseMatrix(
        (to_backend(old.copy(), backend), W.indices, W.indptr), shape=W.shape
    )
    old_dense = to_numpy(out.toarray()).astype(np.float64)
    out = out.T if transposed else out
    if transposed:
        old_dense = old_dense.T
    res = cs.sampled_matmul(a, b, like=like, out=out, alpha=2.0, beta=0.5)
    assert res is out
    assert_close(out.toarray(), 2.0 * ref + 0.5 * old_dense, case.dtype, "sampled beta")


@given(case=cases(), n=INNER)
def test_sampled_matmul_strided_views(backend, case, n):
    """``a`` may be a transposed view of a strided array, ``b`` a strided view."""
    M, N = case.shape
    xbig = case.dense((n, 2 * M), stream=1)
    dybig = case.dense((2 * n, N), stream=2)
    x = to_backend(xbig, backend)[:, 1::2]
    dy = to_backend(dybig, backend)[::2]
    W = case.matrix(backend)
    ref = (xbig[:, 1::2].astype(np.float64).T @ dybig[::2].astype(np.float64)) * case.mask64()
    res = cs.sampled_matmul(x.T, dy, like=W)
    assert_close(res.toarray(), ref, case.dtype, "sampled strided")


@given(case=layout_cases("empty"), n=INNER, transposed=st.booleans())
def test_sampled_matmul_empty_layout(backend, case, n, transposed):
    a, b, like, _ = sampled_case(case, n, transposed, backend)
    res = cs.sampled_matmul(a, b, like=like)
    assert res.nnzb == 0
    assert (to_numpy(res.toarray()) == 0).all()


@given(case=layout_cases("full"), n=INNER)
def test_sampled_matmul_full_layout_equals_dense(backend, case, n):
    a, b, like, ref = sampled_case(case, n, False, backend)
    dense = to_numpy(a).astype(np.float64) @ to_numpy(b).astype(np.float64)
    np.testing.assert_allclose(dense, ref, rtol=1e-10, atol=1e-10)
    assert_close(cs.sampled_matmul(a, b, like=like).toarray(), dense, case.dtype, "full")


@given(case=cases(), n=INNER)
def test_layer_gradients_are_consistent(backend, case, n):
    """y = x @ W; dx = dy @ W.T; dW = x.T @ dy sampled: the usual training step."""
    M, N = case.shape
    x = case.dense((n, M), stream=1)
    dy = case.dense((n, N), stream=2)
    W = case.matrix(backend)
    S = case.scipy64()
    xb, dyb = to_backend(x, backend), to_backend(dy, backend)
    x64, dy64 = x.astype(np.float64), dy.astype(np.float64)
    assert_close(cs.matmul(xb, W), (S.T @ x64.T).T, case.dtype, "y")
    assert_close(cs.matmul(dyb, W.T), (S @ dy64.T).T, case.dtype, "dx")
    assert_close(cs.sampled_matmul(xb.T, dyb, like=W).toarray(),
                 (x64.T @ dy64) * case.mask64(), case.dtype, "dW")


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dtype", [d.name for d in cs.SUPPORTED_DTYPES])
def test_matmul_out_every_dtype_and_form(backend, dtype, form):
    """Deterministic companion of the property tests: out= (beta 0 and 1) for each dtype."""
    layout = np.array([[True, False, True], [False, False, True]])
    case = Case(16, np.dtype(dtype), layout, seed=7)
    a, b, ref, zmask, zaxis = matmul_case(case, form, (2, 3), 4, backend)
    out = poison(ref.shape, case.dtype, backend)
    assert cs.matmul(a, b, out=out, alpha=2.0) is out
    assert_close(out, 2.0 * ref, case.dtype, f"{form} {dtype} out=")
    assert_zero_region(out, zmask, zaxis, form)
    old = case.dense(ref.shape, stream=7)
    out = to_backend(old.copy(), backend)
    assert cs.matmul(a, b, out=out, alpha=2.0, beta=0.5) is out
    assert_close(out, 2.0 * ref + 0.5 * old.astype(np.float64), case.dtype, f"{form} beta")


@pytest.mark.parametrize("dtype", [d.name for d in cs.SUPPORTED_DTYPES])
def test_half_types_accumulate_in_float32(backend, dtype):
    """A long inner sum of half values stays within tolerance (float32 accumulation)."""
    layout = np.ones((4, 1), dtype=bool)  # K = 4 * 128 = 512 inputs per output
    case = Case(128, np.dtype(dtype), layout, seed=1234)
    x = case.dense((4, 512))
    out = cs.matmul(to_backend(x, backend), case.matrix(backend))
    ref = x.astype(np.float64) @ case.dense64()
    assert_close(out, ref, case.dtype, dtype)


def misaligned(arr: np.ndarray, backend):
    """``arr`` on ``backend`` as a C-contiguous view starting one element into a buffer.

    Its data pointer is not 16-byte aligned although the array is contiguous, as happens
    with a slice such as ``buf[1:]``, or one row ``x[i, 1:]`` of a larger array.
    """
    xp = xp_for(backend)
    buf = xp.empty(arr.size + 1, dtype=arr.dtype)
    view = buf[1:].reshape(arr.shape)
    view[...] = to_backend(arr, backend)
    assert view.flags.c_contiguous
    return view


@pytest.mark.parametrize("n", [1, 4])
@pytest.mark.parametrize("dtype", [d.name for d in cs.SUPPORTED_DTYPES])
def test_contiguous_but_misaligned_operands(backend, dtype, n):
    """Contiguous operands whose data pointer is offset by one element are read correctly."""
    layout = np.array([[True, False, True], [True, True, False]])
    case = Case(16, np.dtype(dtype), layout, seed=11)
    M, N = case.shape
    S = case.scipy64()
    W = case.matrix(backend)
    x = case.dense((n, M), stream=1)
    dy = case.dense((n, N), stream=2)
    d = case.dense((N, n), stream=3)
    x64, dy64 = x.astype(np.float64), dy.astype(np.float64)
    assert_close(cs.matmul(misaligned(x, backend), W), (S.T @ x64.T).T, case.dtype, "x @ W")
    assert_close(cs.matmul(misaligned(dy, backend), W.T), (S @ dy64.T).T, case.dtype, "dy @ W.T")
    assert_close(cs.matmul(W, misaligned(d, backend)), S @ d.astype(np.float64), case.dtype,
                 "W @ d")
    res = cs.sampled_matmul(misaligned(x, backend).T, misaligned(dy, backend), like=W)
    assert_close(res.toarray(), (x64.T @ dy64) * case.mask64(), case.dtype, "sampled")
    old = case.dense((n, N), stream=4)
    out = misaligned(old, backend)
    assert cs.matmul(to_backend(x, backend), W, out=out, beta=0.5) is out
    assert_close(out, (S.T @ x64.T).T + 0.5 * old.astype(np.float64), case.dtype, "out=")


@pytest.mark.parametrize("b", [8, 16, 32, 64])  # pair stores, flipped and unflipped wgmma blocks
@pytest.mark.parametrize("beta", [0.0, 0.5])
@pytest.mark.parametrize("n", [4, 200])  # the short grid, then the regular one
def test_sampled_matmul_into_misaligned_out(backend, b, beta, n):
    """``out``'s values a view one element into a buffer: every sdd kernel stores pairs or
    16-byte vectors, so each writes through an aligned stand-in, and beta reads the old
    values (b = 8 at 4 rows: the short-reduction kernel; at 200: the per-row mma.sync one)."""
    layout = np.array([[True, False, True], [True, True, False]])
    case = Case(b, np.dtype("float16"), layout, seed=12)
    M, N = case.shape
    W = case.matrix(backend)
    x = case.dense((n, M), stream=1)
    dy = case.dense((n, N), stream=2)
    old = case.dense((W.nnzb, b, b), stream=3)
    out = cs.BlockSparseMatrix((misaligned(old, backend), W.indices, W.indptr), shape=W.shape)
    res = cs.sampled_matmul(to_backend(x, backend).T, to_backend(dy, backend), like=W, out=out,
                            beta=beta)
    assert res is out
    olds = cs.BlockSparseMatrix((old, to_numpy(W.indices), to_numpy(W.indptr)),
                                shape=W.shape).toarray().astype(np.float64)
    ref = (x.astype(np.float64).T @ dy.astype(np.float64)) * case.mask64() + beta * olds
    assert_close(out.toarray(), ref, case.dtype, f"sampled into misaligned out, beta={beta}")


@pytest.fixture
def sparse_kernels_only():
    """Neither the dense path nor dense panels: no absent block is multiplied."""
    with cs.options(dense_fallback=False, dense_panels=False):
        yield


@pytest.mark.parametrize("b", [16, 32, 64])
@pytest.mark.parametrize("n", [3, 200])  # 200 rows: the large-tile kernels (wgmma on Hopper)
@pytest.mark.parametrize("dtype", ["float16", "float32"])
# the rule's tiles (short ones for this narrow W at 200 rows), then the regular ones
@pytest.mark.parametrize("short", [None, False], ids=["rule", "regular"])
@pytest.mark.usefixtures("sparse_kernels_only")
def test_nonfinite_input_reaches_only_the_outputs_that_read_it(backend, b, n, dtype, short):
    from cubsparse._cuda import plans

    with plans.override(short=short):
        _nonfinite_input_reaches_only_the_outputs_that_read_it(backend, b, n, dtype)


def _nonfinite_input_reaches_only_the_outputs_that_read_it(backend, b, n, dtype):
    # No sparse kernel may multiply an absent block as zeros: inf * 0 would put NaN into
    # output columns that never read the infinite input (SciPy leaves them finite). The
    # dense path does multiply them, which is why it can be turned off.
    lay = np.eye(4, dtype=bool)
    lay[1, 0] = True  # block column 0 reads X's block columns 0 and 1
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, seed=3, backend=backend)
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, 4 * b)).astype(dtype)
    x[n // 2, b + 1] = np.inf  # X's block column 1: read by output blocks 0 and 1 only
    y = to_numpy(cs.matmul(to_backend(x, backend), w)).astype(np.float64)
    assert not np.isfinite(y[n // 2, :2 * b]).all()
    assert np.isfinite(np.delete(y, n // 2, axis=0)).all()
    assert np.isfinite(y[:, 2 * b:]).all(), "output blocks 2, 3 never read X's block column 1"
    # dY @ W.T: output block k reads dY's block columns j with lay[k, j]; column 0 feeds k = 0, 1.
    dy = rng.standard_normal((n, 4 * b)).astype(dtype)
    dy[n // 2, 2] = -np.inf
    dx = to_numpy(cs.matmul(to_backend(dy, backend), w.T)).astype(np.float64)
    assert np.isfinite(dx[:, 2 * b:]).all(), "output blocks 2, 3 never read dY's block column 0"


@pytest.mark.parametrize("b", [8, 16, 32])
@pytest.mark.usefixtures("sparse_kernels_only")
def test_dense_panels_multiply_absent_blocks_as_zeros(backend, b):
    """The panel kernel (Hopper, b <= 32) multiplies a group's absent blocks as zeros, so
    an infinite input reaches the other output blocks of its group: it runs only where the
    ``dense_panels`` option allows it, which the rule and forced decisions obey."""
    from cubsparse._cuda import device, plans

    if backend != "cuda" or device.arch(0) != 90:
        pytest.skip("the panel kernel runs on Hopper only")
    lay = np.eye(4, dtype=bool)
    lay[1, 0] = True
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype="float16", seed=3, backend=backend)
    x = np.random.default_rng(b).standard_normal((200, 4 * b)).astype(np.float16)
    x[100, b + 1] = np.inf  # read by output blocks 0 and 1 only
    xg = to_backend(x, backend)
    with plans.override(panel=True):
        with cs.options(dense_panels=True):
            # (over the union's entries or whole slices of X, as the rule takes)
            assert cs.matmul_plan(xg, w).kernel.panel
            y = to_numpy(cs.matmul(xg, w)).astype(np.float64)
        assert not np.isfinite(y[100, 2 * b:]).all(), "the panel multiplied inf by zeros"
        assert not cs.matmul_plan(xg, w).kernel.panel  # the fixture's option
        y = to_numpy(cs.matmul(xg, w)).astype(np.float64)
    assert np.isfinite(y[:, 2 * b:]).all()
    assert np.isfinite(np.delete(y, 100, axis=0)).all()


@pytest.mark.parametrize("path", ["planned", "dense"])
def test_out_may_be_the_dense_operand(backend, path):
    """``matmul(x, W, out=x)`` with a square W: the product of the old x, as NumPy gives;
    the CUDA kernels and cuBLAS then write through a temporary."""
    import contextlib

    if path == "dense" and backend == "cpu":
        pytest.skip("the dense path is the CUDA backend's")
    from cubsparse._cuda import plans

    w = cs.BlockSparseMatrix.from_layout(cs.layouts.banded(6, 1), 32, seed=3, backend=backend)
    wd = to_numpy(w.toarray()).astype(np.float64)
    rng = np.random.default_rng(4)
    ctx = plans.override(dense=True) if path == "dense" else contextlib.nullcontext()
    with ctx:
        for op, ref_w in ((w, wd), (w.T, wd.T)):
            for _ in range(2):  # the second call takes the eager route on CUDA
                x = to_backend(rng.standard_normal((40, 192)).astype(np.float32), backend)
                x0 = to_numpy(x).astype(np.float64)
                assert cs.matmul(x, op, out=x) is x
                np.testing.assert_allclose(to_numpy(x), x0 @ ref_w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("path", ["planned", "dense"])
def test_out_may_be_the_weights_own_storage(backend, path):
    """``matmul(x, W, out=...)`` into a view of ``W.data``, after calls that made its plan
    and (on CUDA) its eager and compiled entries: the product of W as it was (the kernels
    then write through a temporary; the dense path has copied W's blocks first)."""
    import contextlib

    if path == "dense" and backend == "cpu":
        pytest.skip("the dense path is the CUDA backend's")
    from cubsparse._cuda import plans

    rng = np.random.default_rng(5)
    ctx = plans.override(dense=path == "dense")
    with ctx if backend == "cuda" else contextlib.nullcontext():
        for op_name in ("W", "W.T"):
            for _ in range(2):
                w = cs.BlockSparseMatrix.from_layout(cs.layouts.banded(6, 2), 32, seed=6,
                                                     backend=backend)
                op = w if op_name == "W" else w.T
                ref = to_numpy(op.toarray()).astype(np.float64)
                x = to_backend(rng.standard_normal((24, 192)).astype(np.float32), backend)
                for _ in range(3):  # on CUDA: planned, then the eager and compiled paths
                    cs.matmul(x, op)
                out = w.data.reshape(-1)[:24 * 192].reshape(24, 192)
                assert cs.matmul(x, op, out=out) is out
                np.testing.assert_allclose(to_numpy(out),
                                           to_numpy(x).astype(np.float64) @ ref,
                                           rtol=1e-4, atol=1e-4)


def test_out_whose_elements_overlap_is_refused(backend):
    """An ``out`` with a zero stride, or rows closer than their length, would have its
    results overwrite each other: refused, naming its strides, before anything runs."""
    w = cs.BlockSparseMatrix.from_layout(cs.layouts.banded(4, 1), 16, seed=1, backend=backend)
    xp = xp_for(backend)
    x = to_backend(np.ones((8, 64), np.float32), backend)
    buf = xp.zeros(64 * 8, np.float32)
    strided = (np.lib.stride_tricks.as_strided if backend == "cpu"
               else __import__("cupy").lib.stride_tricks.as_strided)
    for strides in [(0, 4), (4 * 32, 4), (4, 0)]:
        out = strided(buf, shape=(8, 64), strides=strides)
        for _ in range(2):  # the first call plans; the second would be a repeated one
            with pytest.raises(ValueError, match=r"overlap in memory \(strides"):
                cs.matmul(x, w, out=out)
            cs.matmul(x, w)
    assert not to_numpy(buf).any()
