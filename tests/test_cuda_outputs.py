"""The eager path's output cache (:mod:`cubsparse._cuda.outputs`): an array is handed out
again only when nothing outside the cache holds it, its memory pointer or its memory.
A stand-in array type runs the rule on any machine; the CUDA tests check it on CuPy arrays
and the ops' results."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import BACKENDS, to_backend, to_numpy

import cubsparse as cs
from cubsparse._cuda import fastcall, outputs

# The cache in Python, and the compiled one of the eager call path where it is built.
IMPLS = ["python", pytest.param("compiled", marks=pytest.mark.skipif(
    fastcall._fastcall is None, reason="the compiled call path (cubsparse._cuda._fastcall) "
    "is not built"))]


class _Mem:
    pass


class _Ptr:
    def __init__(self):
        self.mem = _Mem()


class _Array:
    """What the cache touches of a cupy.ndarray: ``.data.mem``."""

    made = 0

    def __init__(self, shape, dtype):
        self.shape, self.dtype, self.data = shape, dtype, _Ptr()
        _Array.made += 1


def _cache(impl, shape, monkeypatch):
    _Array.made = 0
    if impl == "python":
        monkeypatch.setattr(outputs, "_ndarray", lambda: _Array)
        return outputs.Outputs(shape, np.dtype(np.float32))
    return fastcall._fastcall.Outputs(shape, np.dtype(np.float32), outputs.KEEP,
                                      outputs.KEEP_BYTES, _Array)


@pytest.fixture(params=IMPLS)
def fake(request, monkeypatch):
    return _cache(request.param, (4, 8), monkeypatch)


def test_a_dropped_output_is_handed_out_again(fake):
    y = fake.take(7)
    first = id(y)
    del y
    assert id(fake.take(7)) == first
    assert _Array.made == 1


@pytest.mark.parametrize("hold", ["array", "view", "pointer", "memory"])
def test_a_held_output_is_never_handed_out(fake, hold):
    y = fake.take(7)
    kept = {"array": y, "view": [y], "pointer": y.data, "memory": y.data.mem}[hold]
    del y
    z = fake.take(7)
    assert z is not kept
    assert getattr(kept, "data", None) is not z.data
    assert _Array.made == 2


def test_an_output_reshaped_in_place_is_not_handed_out_as_is(fake):
    y = fake.take(7)
    y.shape = (8, 4)  # cupy allows this on a contiguous array
    del y
    z = fake.take(7)
    assert z.shape == (4, 8)
    assert fake.take(7) is not z  # z is held: the next call gets another array


def test_reuse_stays_on_its_stream(fake):
    y = fake.take(7)
    del y
    fake.take(8)
    assert _Array.made == 2


def test_every_kept_array_in_use_replaces_one_and_forgets_it(fake):
    held = [fake.take(7) for _ in range(outputs.KEEP + 3)]
    assert _Array.made == outputs.KEEP + 3
    assert len({id(a) for a in held}) == outputs.KEEP + 3
    del held
    fake.take(7)  # a kept array whose holders are gone
    assert _Array.made == outputs.KEEP + 3


@pytest.mark.parametrize("impl", IMPLS)
def test_large_outputs_are_not_kept(impl, monkeypatch):
    big = _cache(impl, (outputs.KEEP_BYTES // 4 + 1, 1), monkeypatch)
    y = big.take(7)
    del y
    big.take(7)
    assert _Array.made == 2
    assert not big.keep


# -- the ops on the CUDA backend -----------------------------------------------------------
cuda_only = pytest.mark.parametrize(
    "backend", [p for p in BACKENDS if p.values == ("cuda",)], indirect=True)


def _layer(backend, b=32, seed=0):
    lay = cs.layouts.random(8, 6, 0.4, seed=seed)
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype="float32", seed=seed + 1,
                                         backend=backend)
    rng = np.random.default_rng(seed + 2)
    return w, lambda *shape: to_backend(rng.standard_normal(shape, dtype=np.float32), backend)


@cuda_only
@pytest.mark.parametrize("product", ["x @ W", "dy @ W.T", "cs.matmul(dy, W.T)"])
def test_eager_results_are_fresh_and_complete(backend, product):
    """A loop of products with fresh inputs: each result matches its own reference, a held
    result (or a view of one) keeps its values while later calls run, and a dropped
    result that comes back is overwritten everywhere (it was poisoned first)."""
    w, rand = _layer(backend)
    wd = to_numpy(w.toarray()).astype(np.float64)
    call = {"x @ W": (lambda a: a @ w, 256, wd),
            "dy @ W.T": (lambda a: a @ w.T, 192, wd.T),
            "cs.matmul(dy, W.T)": (lambda a: cs.matmul(a, w.T), 192, wd.T)}
    fn, k, ref = call[product]
    kept, ids = [], set()
    for i in range(8):
        x = rand(16, k)
        y = fn(x)
        ids.add(id(y))
        assert np.allclose(to_numpy(y), to_numpy(x).astype(np.float64) @ ref, atol=1e-3)
        if i % 3 == 0:
            kept.append((x, y, y[3:5]))
        else:
            y.fill(np.nan)  # a stale value would show, were the next result not complete
        del y
    for x, y, view in kept:
        expect = to_numpy(x).astype(np.float64) @ ref
        assert np.allclose(to_numpy(y), expect, atol=1e-3)
        assert np.allclose(to_numpy(view), expect[3:5], atol=1e-3)
    assert len(ids) < 8  # dropped results were reused


@cuda_only
def test_eager_weight_gradients_are_fresh(backend):
    w, rand = _layer(backend)
    mask = np.kron(to_numpy(w.layout), np.ones((32, 32)))
    grads = []
    for _ in range(4):
        x, dy = rand(24, 256), rand(24, 192)
        g = cs.sampled_matmul(x.T, dy, like=w)
        ref = (to_numpy(x).astype(np.float64).T @ to_numpy(dy)) * mask
        grads.append((g, ref))
        assert np.allclose(to_numpy(g.toarray()), ref, atol=1e-3)
    for g, ref in grads:  # every held gradient kept its own values
        assert np.allclose(to_numpy(g.toarray()), ref, atol=1e-3)


@cuda_only
def test_weight_gradients_of_any_rows_share_their_outputs(backend):
    """The weight gradient's output has W's shape whatever the rows of X: the runners of
    every batch size hand out the same few arrays, each gradient still right and a held
    one keeping its values."""
    w, rand = _layer(backend)
    mask = np.kron(to_numpy(w.layout), np.ones((32, 32)))
    held, ids = [], set()
    for i, n in enumerate([8, 24, 40, 8, 24, 40, 56, 8]):
        x, dy = rand(n, 256), rand(n, 192)
        g = cs.sampled_matmul(x.T, dy, like=w)
        ref = (to_numpy(x).astype(np.float64).T @ to_numpy(dy)) * mask
        assert np.allclose(to_numpy(g.toarray()), ref, atol=1e-3)
        ids.add(g.data.data.ptr)
        if i == 2:
            held.append((g, ref))
        del g
    g, ref = held[0]
    assert np.allclose(to_numpy(g.toarray()), ref, atol=1e-3)
    assert len(ids) <= 3  # one array held, the others taken in turn by four runners
    assert len({id(o) for o in w.__dict__["_sdd_outputs"].values()}) == 1


@cuda_only
def test_eager_path_takes_the_general_path_where_it_must(backend):
    """Misaligned or strided inputs, another stream, out= and alpha: the same values."""
    import cupy

    w, rand = _layer(backend)
    wd = to_numpy(w.toarray()).astype(np.float64)
    x = rand(16, 257)
    ref = to_numpy(x[:, 1:]).astype(np.float64) @ wd
    assert np.allclose(to_numpy(x[:, 1:] @ w), ref, atol=1e-3)  # base not 16-byte aligned
    xs = x[:, 1:]
    y0 = xs @ w
    with cupy.cuda.Stream():
        y1 = xs @ w
        cupy.cuda.get_current_stream().synchronize()
    assert np.allclose(to_numpy(y1), ref, atol=1e-3)
    assert np.allclose(to_numpy(y0), ref, atol=1e-3)
    assert np.allclose(to_numpy(cs.matmul(xs, w, alpha=2.0)), 2 * ref, atol=2e-3)
    xa = cupy.ascontiguousarray(xs)
    for out in (cupy.full((16, 192), np.nan, np.float32),  # the eager path writes it
                cupy.full((16, 193), np.nan, np.float32)[:, 1:],  # misaligned: a temporary
                cupy.full((192, 16), np.nan, np.float32).T):  # columns: a temporary
        assert cs.matmul(xa, w, out=out) is out
        assert np.allclose(to_numpy(out), ref, atol=1e-3)
    with pytest.raises(ValueError, match="out must have shape"):
        cs.matmul(xa, w, out=cupy.empty((16, 191), np.float32))
    with pytest.raises(TypeError, match="dtype"):
        cs.matmul(xa, w, out=cupy.empty((16, 192), np.float64))


@cuda_only
def test_repeated_calls_take_the_eager_path(backend, monkeypatch):
    """After a first call has built the runner, x @ W, dy @ W.T (with and without out=)
    and the weight gradient run without the general path (made to fail here)."""
    import cupy

    import cubsparse._cuda as cuda_backend

    w, rand = _layer(backend)
    x, dy = rand(16, 256), rand(16, 192)
    out = cupy.empty((16, 192), np.float32)
    calls = [lambda: x @ w, lambda: dy @ w.T, lambda: cs.matmul(x, w, out=out),
             lambda: cs.sampled_matmul(x.T, dy, like=w)]
    first = [to_numpy(c().toarray() if i == 3 else c()) for i, c in enumerate(calls)]

    def general(*args, **kwargs):
        raise AssertionError("the general path ran")

    monkeypatch.setattr(cuda_backend, "dsd", general)
    monkeypatch.setattr(cuda_backend, "sdd", general)
    for i, c in enumerate(calls):
        got = c()
        np.testing.assert_array_equal(to_numpy(got.toarray() if i == 3 else got), first[i])


@cuda_only
def test_an_empty_layout_after_a_plan(backend):
    """A plan built for a layout without blocks, then the product: an empty result."""
    w = cs.BlockSparseMatrix.from_layout(np.zeros((4, 3), bool), 32, backend=backend)
    _, rand = _layer(backend)
    x, dy = rand(8, 128), rand(8, 96)
    cs.sampled_matmul_plan(x.T, dy, like=w)
    for _ in range(2):
        g = cs.sampled_matmul(x.T, dy, like=w)
        assert g.nnzb == 0
        assert to_numpy(g.toarray()).shape == (128, 96)
        assert not to_numpy(g.toarray()).any()
    y = x @ w
    assert not to_numpy(y).any()
