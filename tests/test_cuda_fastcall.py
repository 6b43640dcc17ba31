"""The compiled eager call path (``cubsparse._cuda.fastcall``): a repeated call of each kind
of runner gives the float64 reference through it (the matrix's table counts the calls it
made), and a call that changes what a runner keeps (an operand's address under a tensor
map, the stream, the plans) goes back to the Python path and is still right."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import BACKENDS, to_numpy

import cubsparse as cs
from cubsparse._cuda import fastcall, run

pytestmark = [
    pytest.mark.parametrize("backend", [p for p in BACKENDS if p.values == ("cuda",)],
                            indirect=True),
    pytest.mark.skipif(not fastcall.active(), reason="the compiled call path is not built "
                       "(or CUBSPARSE_FASTCALL=0)"),
]

CALLS = 6


def _hopper():
    from cubsparse._cuda import device

    return device.arch(device.current()) == 90


def _matrix(b, rows, cols, dtype, seed=0, density=0.4):
    lay = cs.layouts.random(rows // b, cols // b, density, seed=seed)
    return cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, seed=seed + 1,
                                            backend="cuda")


def _tol(dtype):
    return {"float16": 2e-2, "bfloat16": 1e-1, "float32": 1e-3, "float64": 1e-9}[dtype]


def _spec(w, op):
    """The fast-call spec of the runner ``w``'s last call of ``op`` built."""
    rs = [r for k, r in w.__dict__["_runners"].items() if k[0] == op]
    return rs[-1].fast_spec()


# (b, rows of X, C, K, dtype, forced plan decisions, the spec's feature to check, Hopper only)
DSD_CASES = {
    "tile kernels": (32, 40, 512, 384, "float16", {"dense": False}, None, False),
    "simt float32": (16, 24, 256, 320, "float32", {"dense": False}, None, False),
    "float64": (8, 16, 128, 96, "float64", {"dense": False}, None, False),
    "split lists": (32, 33, 1024, 256, "float16",
                    {"split": 2, "dense": False, "short": False}, "split", False),
    "tma": (64, 300, 512, 512, "float16", {"dense": False}, "tma", True),
    "tma store": (128, 640, 1024, 512, "bfloat16", {"dense": False, "tall": True},
                  "ymap", True),
    "stream": (16, 32, 1024, 1024, "float16",
               {"dense": False, "stream": True, "stream_run": 1000}, None, False),
    "stream, second launch": (16, 32, 1024, 1024, "float16",
                              {"dense": False, "stream": True, "stream_run": 1,
                               "stream_share": False}, "finish", False),
    "stream, in-launch sum": (16, 32, 1024, 1024, "float16",
                              {"dense": False, "stream": True, "stream_run": 2,
                               "stream_share": True}, "split", False),
    # W's blocks copied by a first launch into a buffer the runner keeps per stream
    "panels": (32, 256, 1024, 768, "float16", {"dense": False, "panel": True}, "wcopy", True),
    "blocks transposed": (64, 300, 512, 512, "bfloat16",
                          {"dense": False, "panel": False, "kn": False, "tall": False},
                          "wcopy", True),
}


def _features(spec):
    names, _, tma, ymap, split, wcopy = spec
    return {"tma": tma, "ymap": ymap, "split": split, "finish": "finish" in names,
            "wcopy": wcopy and names[0] == "copy"}


@pytest.mark.parametrize("case", list(DSD_CASES))
@pytest.mark.parametrize("trans", [False, True], ids=["x @ W", "dy @ W.T"])
def test_repeated_products_take_the_compiled_path(backend, case, trans):
    import cupy

    from cubsparse._cuda import plans

    b, n, c, k, dtype, forced, feature, hopper_only = DSD_CASES[case]
    if hopper_only and not _hopper():
        pytest.skip("a Hopper plan")
    w = _matrix(b, c, k, dtype)
    op = w.T if trans else w
    wd = to_numpy(w.toarray()).astype(np.float64)
    ref_w = wd.T if trans else wd
    rng = np.random.default_rng(1)
    x = cupy.empty((n, ref_w.shape[0]), dtype)
    with plans.override(**forced):
        kept = []
        for i in range(CALLS):
            host = rng.standard_normal(x.shape).astype(dtype)
            x[...] = cupy.asarray(host)  # new values at the same address
            y = x @ op
            expect = host.astype(np.float64) @ ref_w
            np.testing.assert_allclose(to_numpy(y).astype(np.float64), expect,
                                       rtol=_tol(dtype), atol=_tol(dtype) * 4)
            if i % 2:
                kept.append((y, expect))  # held results keep their values
            del y
        for y, expect in kept:
            np.testing.assert_allclose(to_numpy(y).astype(np.float64), expect,
                                       rtol=_tol(dtype), atol=_tol(dtype) * 4)
        spec = _spec(w, "dsd")
        assert spec is not None
        if feature is not None:
            if feature == "wcopy" and trans and not forced.get("panel"):
                feature = None  # dy @ W.T reads the blocks as stored
            else:
                assert _features(spec)[feature], f"{case}: the plan has no {feature}"
        table = w.__dict__["_fast"]
        if not _features(spec)["ymap"]:
            # the first call builds the runner, the second arms the entry: the others are C's
            assert table.hits >= CALLS - 2
        # A loop that drops each result gets the same output back: every call is C's, the
        # TMA store's too (its map is for one output, so held results above took the
        # Python path, which maps each new one).
        hits = table.hits
        for _ in range(CALLS):
            y = x @ op
            del y
        assert table.hits - hits >= CALLS - 1


def test_layer_gradient_takes_the_compiled_path(backend):
    import cupy

    for b, n, dtype in [(32, 32, "float16"), (16, 64, "bfloat16"), (8, 16, "float32")]:
        w = _matrix(b, 512, 384, dtype, seed=b)
        mask = np.kron(w.layout, np.ones((b, b)))
        rng = np.random.default_rng(2)
        x = cupy.empty((n, 512), dtype)
        dy = cupy.empty((n, 384), dtype)
        for _ in range(CALLS):
            hx = rng.standard_normal(x.shape).astype(dtype)
            hdy = rng.standard_normal(dy.shape).astype(dtype)
            x[...], dy[...] = cupy.asarray(hx), cupy.asarray(hdy)
            g = cs.sampled_matmul(x.T, dy, like=w)
            expect = (hx.astype(np.float64).T @ hdy.astype(np.float64)) * mask
            np.testing.assert_allclose(to_numpy(g.toarray()).astype(np.float64), expect,
                                       rtol=_tol(dtype), atol=_tol(dtype) * 8)
        if _spec(w, "sdd") is not None:
            assert w.__dict__["_fast"].hits >= CALLS - 2


CHAIN_CASES = {  # (b, rows of X, C = K, dtype, forced plan decisions, Hopper only)
    "tile kernels": (32, 40, 512, "float16", {"dense": False}, False),
    "simt float32": (16, 24, 256, "float32", {"dense": False}, False),
    "tma": (64, 300, 512, "float16", {"dense": False}, True),
    "split lists": (32, 33, 1024, "float16", {"split": 2, "dense": False, "short": False},
                    False),
    "stream": (16, 32, 1024, "float16", {"dense": False, "stream": True, "stream_run": 1000},
               False),
    # each call copies W's blocks into the buffer the call before read
    "panels": (32, 256, 1024, "float16", {"dense": False, "panel": True}, True),
}


@pytest.mark.parametrize("case", list(CHAIN_CASES))
def test_calls_that_read_the_last_ones_output(backend, case):
    """Each call reads the output of the call before it, and writes where a call two back
    wrote (the output cache hands a dropped result out again), with no synchronization
    between them: on Hopper the compiled path launches each kernel with programmatic
    dependent launch, its CTAs started while the kernel before still flushes its writes.
    (Values rarely show a missing wait; tests/test_kernels.py checks the source.)"""
    import cupy

    from cubsparse._cuda import plans

    b, n, c, dtype, forced, hopper_only = CHAIN_CASES[case]
    if hopper_only and not _hopper():
        pytest.skip("a Hopper plan")
    w = _matrix(b, c, c, dtype, seed=5)
    w.data[...] *= 0.5  # a chain of N(0, 1/fan-in) values about doubles a step: keep it level
    wd = to_numpy(w.toarray()).astype(np.float64)
    rng = np.random.default_rng(5)
    x = cupy.asarray(rng.standard_normal((n, c)).astype(dtype))
    steps = 12
    with plans.override(**forced):
        for _ in range(2):  # arm the entries: the first call plans, the second arms
            x @ w, x @ w.T, cs.sampled_matmul(x.T, x, like=w)
        hits = w.__dict__["_fast"].hits
        h = x
        for i in range(steps):
            h = h @ (w.T if i % 2 else w)
        h2 = h @ w
        g = cs.sampled_matmul(h.T, h2, like=w)
        cupy.cuda.get_current_stream().synchronize()
        # (a TMA kernel's map is for one address: a step whose X is new to it is Python's)
        assert w.__dict__["_fast"].hits - hits >= steps - (2 if case in ("tma", "panels")
                                                           else 0)
    ref = to_numpy(x).astype(np.float64)
    for i in range(steps):
        ref = ref @ (wd.T if i % 2 else wd)
    scale = np.abs(ref).max()
    tol = 5e-2 if dtype == "float16" else 1e-3
    np.testing.assert_allclose(to_numpy(h).astype(np.float64), ref, rtol=tol,
                               atol=tol * scale)
    ref2 = ref @ wd
    mask = np.kron(w.layout, np.ones((b, b)))
    np.testing.assert_allclose(to_numpy(h2).astype(np.float64), ref2, rtol=tol,
                               atol=tol * np.abs(ref2).max())
    gref = (ref.T @ ref2) * mask
    np.testing.assert_allclose(to_numpy(g.toarray()).astype(np.float64), gref, rtol=tol,
                               atol=tol * np.abs(gref).max())


def test_a_moved_operand_another_stream_and_new_plans_go_back_to_python(backend):
    """Alternating X buffers (a TMA kernel's map is for one address), a second stream (a
    persistent kernel's tile counter is per stream), and forced plans (a new generation):
    each call right, before and after."""
    import cupy

    from cubsparse._cuda import plans

    dtype = "float16"
    w = _matrix(64, 512, 512, dtype, seed=3)
    wd = to_numpy(w.toarray()).astype(np.float64)
    rng = np.random.default_rng(3)
    xs = [cupy.asarray(rng.standard_normal((300, 512)).astype(dtype)) for _ in range(2)]
    refs = [to_numpy(x).astype(np.float64) @ wd for x in xs]
    s = cupy.cuda.Stream(non_blocking=True)

    def check(i):
        y = xs[i] @ w
        np.testing.assert_allclose(to_numpy(y).astype(np.float64), refs[i], rtol=2e-2,
                                   atol=8e-2)

    with plans.override(dense=False):
        for i in (0, 0, 0, 1, 0, 1, 1, 0):
            check(i)
        with s:
            for i in (0, 0, 1, 1):
                check(i)
            s.synchronize()
        for i in (1, 1, 0):
            check(i)
    with plans.override(dense=False, split=2, short=False):
        for i in (0, 0, 0, 1):
            check(i)


def test_a_graph_captured_through_the_compiled_path_replays(backend):
    """Calls armed on a stream, then captured on it (the compiled path makes them): the
    graph replays the products of X and W's values as they are at replay time."""
    import cupy

    from cubsparse._cuda import plans

    dtype = "float16"
    w = _matrix(32, 512, 384, dtype, seed=4)
    rng = np.random.default_rng(4)
    x = cupy.asarray(rng.standard_normal((32, 512)).astype(dtype))
    dy = cupy.asarray(rng.standard_normal((32, 384)).astype(dtype))
    s = cupy.cuda.Stream(non_blocking=True)
    with plans.override(dense=False), s:
        for _ in range(3):
            x @ w, dy @ w.T, cs.sampled_matmul(x.T, dy, like=w)
        hits = w.__dict__["_fast"].hits
        s.begin_capture()
        y, dx, g = x @ w, dy @ w.T, cs.sampled_matmul(x.T, dy, like=w)
        graph = s.end_capture()
        assert w.__dict__["_fast"].hits > hits
        x[...] = cupy.asarray(rng.standard_normal(x.shape).astype(dtype))
        w.data[...] = cupy.asarray(rng.standard_normal(w.data.shape).astype(dtype))
        graph.launch(s)
        s.synchronize()
    wd = to_numpy(w.toarray()).astype(np.float64)
    hx, hdy = to_numpy(x).astype(np.float64), to_numpy(dy).astype(np.float64)
    np.testing.assert_allclose(to_numpy(y).astype(np.float64), hx @ wd, rtol=2e-2, atol=0.5)
    np.testing.assert_allclose(to_numpy(dx).astype(np.float64), hdy @ wd.T, rtol=2e-2,
                               atol=0.5)
    np.testing.assert_allclose(to_numpy(g.toarray()).astype(np.float64),
                               (hx.T @ hdy) * np.kron(w.layout, np.ones((32, 32))),
                               rtol=2e-2, atol=0.5)


@pytest.mark.parametrize(("b", "n", "forced"),
                         [(32, 40, {}), (64, 300, {}), (16, 32, {}), (32, 256, {"panel": True})],
                         ids=["tile kernels", "tma (Hopper)", "stream", "panels (Hopper)"])
def test_values_rebound_to_other_storage_are_read(backend, b, n, forced):
    """A matrix whose values are rebound to another array (the PyTorch layer reuses one
    matrix per call with that call's values): the compiled path reads the new storage,
    for ``x @ W`` and ``dy @ W.T`` (where the dense panels copy W's blocks first, too)."""
    import cupy

    from cubsparse._cuda import plans

    if forced and not _hopper():
        pytest.skip("a Hopper plan")
    dtype = "float16"
    w = _matrix(b, 512, 512, dtype, seed=5)
    rng = np.random.default_rng(5)
    x = cupy.asarray(rng.standard_normal((n, 512)).astype(dtype))
    hx = to_numpy(x).astype(np.float64)
    with plans.override(dense=False, **forced):
        for _ in range(3):  # built, armed, compiled
            x @ w, x @ w.T
        hits = w.__dict__["_fast"].hits
        for _ in range(2):
            new = cupy.asarray(rng.standard_normal(w.data.shape).astype(dtype))
            w._init(new, w._structure, w._blocksize)
            wd = to_numpy(w.toarray()).astype(np.float64)
            for op, ref in ((w, wd), (w.T, wd.T)):
                for _ in range(2):
                    y = x @ op
                    np.testing.assert_allclose(to_numpy(y).astype(np.float64), hx @ ref,
                                               rtol=2e-2, atol=0.2)
                    del y  # (the panels' TMA store maps one output: the next gets it back)
        made = w.__dict__["_fast"].hits - hits
        if forced:  # the copy reads W where it now is: every call is C's
            for k, r in w.__dict__["_runners"].items():
                assert k[0] != "dsd" or _features(r.fast_spec())["wcopy"]
            assert made == 8
        else:  # each op's second call after a rebind at least (a map of W is remade)
            assert made >= 4


def test_options_set_back_to_equal_values_keep_the_compiled_path(backend):
    """Setting the options (even to equal values) makes a new options key, which a call
    compares by identity: the next Python call makes the entry again, and the calls after
    it are C's once more."""
    import cupy

    w = _matrix(32, 512, 384, "float16", seed=7)
    wd = to_numpy(w.toarray()).astype(np.float64)
    x = cupy.asarray(np.random.default_rng(7).standard_normal((40, 512)).astype("float16"))
    hx = to_numpy(x).astype(np.float64)
    with cs.options(dense_fallback=False):
        for _ in range(3):
            y = x @ w
        with cs.options(dense_fallback=False):  # a new key, equal to the one before
            pass
        table = w.__dict__["_fast"]
        hits = table.hits
        for _ in range(CALLS):
            y = x @ w
            np.testing.assert_allclose(to_numpy(y).astype(np.float64), hx @ wd, rtol=2e-2,
                                       atol=8e-2)
            del y
        assert table.hits - hits >= CALLS - 2


@pytest.mark.parametrize("case", ["tile kernels", "tma store", "stream"])
def test_products_into_out_take_the_compiled_path(backend, case):
    """``matmul(x, W, out=y)`` repeated into one array: every call after the first two is
    C's and returns ``y`` itself; an ``out`` that overlaps X, is misaligned or has another
    dtype takes the Python path (a temporary, or the error), as before."""
    import cupy

    from cubsparse._cuda import plans

    b, n, c, k, dtype, forced, _, hopper_only = DSD_CASES[case]
    if hopper_only and not _hopper():
        pytest.skip("a Hopper plan")
    w = _matrix(b, c, k, dtype, seed=8)
    wd = to_numpy(w.toarray()).astype(np.float64)
    rng = np.random.default_rng(8)
    tol = {"rtol": _tol(dtype), "atol": _tol(dtype) * 8}
    with plans.override(**forced):
        for op, ref in ((w, wd), (w.T, wd.T)):
            x = cupy.asarray(rng.standard_normal((n, ref.shape[0])).astype(dtype))
            hx = to_numpy(x).astype(np.float64)
            y = cupy.full((n, ref.shape[1]), np.nan, dtype)
            table = None
            for i in range(CALLS):
                got = cs.matmul(x, op, out=y)
                assert got is y
                np.testing.assert_allclose(to_numpy(y).astype(np.float64), hx @ ref, **tol)
                y.fill(np.nan)  # poisoned again: the next call must write it all
                if i == 1:
                    table = w.__dict__["_fast"]
                    hits = table.hits
            assert table.hits - hits >= CALLS - 2
            # one buffer holding X's rows and, between them, the output's: they overlap
            both = cupy.zeros((n, ref.shape[0] + ref.shape[1]), dtype)
            xs, ys = both[:, :ref.shape[0]], both[:, ref.shape[0]:]
            xs[...] = x
            cs.matmul(xs, op, out=ys)
            np.testing.assert_allclose(to_numpy(ys).astype(np.float64), hx @ ref, **tol)
            np.testing.assert_array_equal(to_numpy(xs), to_numpy(x))
            # misaligned by one element: a view one column into a wider array
            wide = cupy.full((n, ref.shape[1] + 1), np.nan, dtype)
            cs.matmul(x, op, out=wide[:, 1:])
            np.testing.assert_allclose(to_numpy(wide[:, 1:]).astype(np.float64), hx @ ref,
                                       **tol)
            with pytest.raises(TypeError, match="dtype"):
                cs.matmul(x, op, out=cupy.empty(y.shape, np.float64))


def test_w_copies_kept_per_stream_and_a_graph_of_its_own(backend):
    """A plan that copies W's blocks first (the dense panels) copies into the layout's
    buffer for the call's stream: calls that move between two streams, a CUDA graph
    captured between them (which copies into a buffer of its own, through the Python path)
    and replayed after eager calls on both streams, and W's values changed in place, are
    each right; the calls on one stream are C's once armed there."""
    import cupy

    from cubsparse._cuda import plans

    if not _hopper():
        pytest.skip("a Hopper plan")
    dtype = "float16"
    w = _matrix(32, 1024, 768, dtype, seed=9)
    rng = np.random.default_rng(9)
    x = cupy.asarray(rng.standard_normal((256, 1024)).astype(dtype))
    hx = to_numpy(x).astype(np.float64)
    s = cupy.cuda.Stream(non_blocking=True)

    def check(op, trans):
        wd = to_numpy(w.toarray()).astype(np.float64)
        y = x @ op if not trans else x[:, :768] @ op
        ref = hx @ wd if not trans else hx[:, :768] @ wd.T
        np.testing.assert_allclose(to_numpy(y).astype(np.float64), ref, rtol=2e-2, atol=0.2)

    null = cupy.cuda.Stream.null
    with plans.override(dense=False, panel=True):
        for stream in (null, s, null, s, s):
            with stream:
                for _ in range(3):
                    check(w, False)
                    check(w.T, True)
        assert _features(_spec(w, "dsd"))["wcopy"]
        table = w.__dict__["_fast"]
        runner = next(r for k, r in w.__dict__["_runners"].items()
                      if k[0] == "dsd" and k[2] == 256 and not k[3])
        with s:
            hits = table.hits
            check(w, False)
            assert table.hits == hits + 1  # armed on s: C's
            s.begin_capture()
            y = x @ w
            graph = s.end_capture()
            assert table.hits == hits + 1  # the capture took the Python path,
            assert runner._wt_stream is None  # and a buffer of its own
            kept = run._stream_buffer(w._structure, runner.dev, s.ptr,
                                      (runner.copy_blocks, 32, 32), w.data.dtype)
            assert runner.copy.v[1].value != kept.data.ptr
            check(w, False)  # eager again on the stream the graph was captured on
        for stream in (null, s):
            with stream:
                check(w, False)
                check(w.T, True)
        with s:
            w.data[...] = cupy.asarray(rng.standard_normal(w.data.shape).astype(dtype))
            graph.launch(s)
            s.synchronize()
        np.testing.assert_allclose(to_numpy(y).astype(np.float64),
                                   hx @ to_numpy(w.toarray()).astype(np.float64),
                                   rtol=2e-2, atol=0.2)
        hits = table.hits
        for _ in range(CALLS):
            check(w, False)
        assert table.hits - hits >= CALLS - 1


def _two_part_layout(b):
    """A band of blocks and a few far from it: dense panels over the band, the others left
    to the weight gradient's second part."""
    nbk = 4 * 128 // b
    lay = np.abs(np.subtract.outer(np.arange(nbk), np.arange(nbk))) <= 128 // b
    for i, j in ((0, nbk - 1), (nbk - 1, 0), (2, nbk - 3), (nbk - 2, 1)):
        lay[i, j] = True
    return lay


# (b, rows of X, forced plan decisions, the spec's feature)
SDD_TMA_CASES = {
    "tma": (128, 256, {"sdd_tma": True, "sdd_short": False}, "tma"),
    "tma, last round in pieces": (128, 200, {"sdd_tma": True, "sdd_short": False,
                                             "grid_limit": 2, "sdd_tail_splits": 3}, "split"),
    "two parts": (32, 256, {"sdd_hybrid": True, "sdd_short": False, "sdd_rest_splits": 1,
                            "sdd_rest_beside": False}, "tma"),
    "two parts, second split": (32, 256, {"sdd_hybrid": True, "sdd_short": False,
                                          "sdd_rest_splits": 3, "sdd_rest_beside": False},
                                "split"),
    "two parts beside": (32, 256, {"sdd_hybrid": True, "sdd_short": False,
                                   "sdd_rest_splits": 1, "sdd_rest_beside": True}, "tma"),
}


@pytest.mark.parametrize("into", ["new", "out"])
@pytest.mark.parametrize("case", list(SDD_TMA_CASES))
def test_tma_weight_gradients_take_the_compiled_path(backend, case, into):
    """The persistent TMA weight gradient (its last round in pieces or not) and the one in
    two parts (panels, then the other blocks by pointer, after them or beside them on a
    side stream): repeated, into a new matrix or into ``out`` (poisoned before each call,
    as the PyTorch layer's gradient buffer), on the null stream, another and the null one
    again, with X moved to another buffer: each call is right, and C's but where its stream
    or X's address changed."""
    import cupy

    from cubsparse._cuda import plans

    if not _hopper():
        pytest.skip("a Hopper plan")
    b, n, forced, feature = SDD_TMA_CASES[case]
    dtype = "float16"
    rng = np.random.default_rng(10)
    lay = (_two_part_layout(b) if "two parts" in case
           else cs.layouts.random(4, 6, 0.5, seed=10))
    w = cs.BlockSparseMatrix.from_layout(lay, b, dtype=dtype, seed=11, backend="cuda")
    mask = np.kron(lay, np.ones((b, b)))
    out = w.copy() if into == "out" else None
    s = cupy.cuda.Stream(non_blocking=True)
    null = cupy.cuda.Stream.null
    # two X buffers: the runner's map of X is for one address
    xs = [cupy.empty((n, w.shape[0]), dtype) for _ in range(2)]
    dy = cupy.empty((n, w.shape[1]), dtype)
    calls = 0
    with plans.override(dense=False, **forced):
        # null, then s, then null again; each stream's run ends with the other X buffer
        for stream, xi in ((null, [0] * (CALLS + 2) + [1, 1]), (s, [0] * CALLS),
                           (null, [0] * CALLS)):
            with stream:
                for i in xi:
                    x = xs[i]
                    hx = rng.standard_normal(x.shape).astype(dtype)
                    hdy = rng.standard_normal(dy.shape).astype(dtype)
                    x[...], dy[...] = cupy.asarray(hx), cupy.asarray(hdy)
                    if out is not None:
                        out.data.fill(np.nan)
                    g = cs.sampled_matmul(x.T, dy, like=w, out=out)
                    assert out is None or g is out
                    expect = (hx.astype(np.float64).T @ hdy.astype(np.float64)) * mask
                    np.testing.assert_allclose(to_numpy(g.toarray()).astype(np.float64),
                                               expect, rtol=2e-2, atol=0.2)
                    calls += 1
                    if calls == 2:
                        hits = w.__dict__["_fast"].hits
                stream.synchronize()
        if out is not None:
            with pytest.raises(TypeError, match="float16 matrix"):  # the checks, as before
                cs.sampled_matmul(xs[0].T, dy, like=w, out=w.astype(np.float32))
        runner = [r for k, r in w.__dict__["_runners"].items() if k[0] == "sdd"][-1]
        assert (runner.beside is not None) == forced.get("sdd_rest_beside", False)
        spec = runner.fast_spec()
        assert _features(spec)[feature], f"{case}: the plan has no {feature}"
        assert spec[0] == (("main", "rest") if "two parts" in case else ("main",))
        # the first call plans and the second arms; after them a Python call at most where
        # X moves to the other buffer or the stream changes (three times), C's the others
        assert w.__dict__["_fast"].hits - hits >= calls - 2 - 3
