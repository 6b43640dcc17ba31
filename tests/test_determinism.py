"""Every op, run twice on the same inputs, gives bitwise-identical outputs."""

from __future__ import annotations

from conftest import array_bytes, poison, to_backend
from hypothesis import given
from strategies import BATCH_SHAPES, INNER, RIGHT_COLS, Case, cases

import cubsparse as cs


def twice(fn, *args, **kwargs):
    return fn(*args, **kwargs), fn(*args, **kwargs)


def operands(case: Case, backend, lead, cols, n):
    M, N = case.shape
    W = case.matrix(backend)
    x = to_backend(case.dense((*tuple(lead), M), stream=1), backend)
    dy = to_backend(case.dense((*tuple(lead), N), stream=2), backend)
    d = to_backend(case.dense((N,) if cols is None else (N, cols), stream=3), backend)
    e = to_backend(case.dense((M,) if cols is None else (M, cols), stream=4), backend)
    xs = to_backend(case.dense((n, M), stream=5), backend)
    dys = to_backend(case.dense((n, N), stream=6), backend)
    return W, x, dy, d, e, xs, dys


@given(case=cases(), lead=BATCH_SHAPES, cols=RIGHT_COLS)
def test_matmul_is_deterministic(backend, case, lead, cols):
    W, x, dy, d, e, _, _ = operands(case, backend, lead, cols, 1)
    for a, b in ((x, W), (dy, W.T), (W, d), (W.T, e)):
        r1, r2 = twice(cs.matmul, a, b, alpha=1.5)
        assert array_bytes(r1) == array_bytes(r2)


@given(case=cases(), lead=BATCH_SHAPES, cols=RIGHT_COLS)
def test_matmul_out_and_beta_are_deterministic(backend, case, lead, cols):
    W, x, dy, d, e, _, _ = operands(case, backend, lead, cols, 1)
    for a, b in ((x, W), (dy, W.T), (W, d), (W.T, e)):
        ref = cs.matmul(a, b)
        o1, o2 = poison(ref.shape, case.dtype, backend), poison(ref.shape, case.dtype, backend)
        cs.matmul(a, b, out=o1, alpha=2.0)
        cs.matmul(a, b, out=o2, alpha=2.0)
        assert array_bytes(o1) == array_bytes(o2)
        old = to_backend(case.dense(ref.shape, stream=8), backend)
        o1, o2 = old.copy(), old.copy()
        cs.matmul(a, b, out=o1, alpha=2.0, beta=0.5)
        cs.matmul(a, b, out=o2, alpha=2.0, beta=0.5)
        assert array_bytes(o1) == array_bytes(o2)


@given(case=cases(), n=INNER)
def test_sampled_matmul_is_deterministic(backend, case, n):
    W, _, _, _, _, xs, dys = operands(case, backend, (), None, n)
    for a, b, like in ((xs.T, dys, W), (dys.T, xs, W.T)):
        r1, r2 = twice(cs.sampled_matmul, a, b, like=like, alpha=0.75)
        assert array_bytes(r1.data) == array_bytes(r2.data)
        assert array_bytes(r1.toarray()) == array_bytes(r2.toarray())
        # into out=, with accumulation
        o1, o2 = r1.copy(), r1.copy()
        cs.sampled_matmul(a, b, like=like, out=o1, alpha=2.0, beta=0.5)
        cs.sampled_matmul(a, b, like=like, out=o2, alpha=2.0, beta=0.5)
        assert array_bytes(o1.data) == array_bytes(o2.data)


@given(case=cases())
def test_conversions_are_deterministic(backend, case):
    W = case.matrix(backend)
    for fn in (W.toarray, W.T.toarray, lambda: W.T.data,
               lambda: cs.BlockSparseMatrix.from_dense(W.toarray(), case.blocksize).data):
        r1, r2 = twice(fn)
        assert array_bytes(r1) == array_bytes(r2)
    s1, s2 = W.to_scipy(), W.T.to_scipy()
    t1, t2 = W.to_scipy(), W.T.to_scipy()
    assert array_bytes(s1.data) == array_bytes(t1.data)
    assert array_bytes(s2.data) == array_bytes(t2.data)
