"""cubsparse.torch: BlockSparseLinear and linear against a dense masked torch linear.

The reference scatters the weight's blocks into a dense ``W`` with plain torch indexing
(not through cubsparse), multiplies it by the layout's mask and lets torch's autograd
differentiate ``x @ W + bias``. Skipped as a whole where torch is not installed; the CUDA
cases skip, visibly, without a GPU that both torch and CuPy see.
"""

from __future__ import annotations

import copy
import io
import os
import pickle
import shutil
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="cubsparse.torch needs torch ([torch] extra)")

import cubsparse as cs  # noqa: E402
from cubsparse.torch import BlockSparseLinear, BlockStructure, linear  # noqa: E402

CUDA = torch.cuda.is_available() and cs.cuda_available()
DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param("cuda", id="cuda", marks=pytest.mark.skipif(
        not CUDA, reason="no CUDA device that torch and CuPy both see")),
]
TOL = {torch.float64: 1e-10, torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 1e-1}


def dense_weight(weight, structure):
    """``W`` (in_features, out_features): the blocks scattered by torch indexing, times the
    layout's mask (differentiable in ``weight``)."""
    b = structure.blocksize
    m, n = structure.shape
    rows = np.repeat(np.arange(structure.indptr.shape[0] - 1), np.diff(structure.indptr))
    w = torch.zeros(m, n, dtype=weight.dtype, device=weight.device)
    for p, (i, j) in enumerate(zip(rows.tolist(), structure.indices.tolist(), strict=True)):
        w[i * b:(i + 1) * b, j * b:(j + 1) * b] = weight[p]
    mask = np.kron(structure.layout, np.ones((b, b)))
    return w * torch.as_tensor(mask, dtype=weight.dtype, device=weight.device)


def dense_linear(x, weight, structure, bias=None):
    y = x @ dense_weight(weight, structure)
    return y if bias is None else y + bias


def layer_and_input(device, dtype, shape=(6, 3 * 16), seed=0, bias=True):
    torch.manual_seed(seed)
    layout = cs.layouts.random(3, 5, density=0.4, seed=seed)
    layer = BlockSparseLinear(48, 80, layout, 16, bias=bias, device=device, dtype=dtype)
    x = torch.randn(shape, device=device, dtype=dtype, requires_grad=True)
    return layer, x


def close(got, want, dtype):
    tol = TOL[dtype]
    torch.testing.assert_close(got.double(), want.double(), rtol=tol, atol=tol)


def reference_grads(layer, x, dy):
    """Forward and gradients of the dense reference, on copies of the leaves."""
    xr = x.detach().clone().requires_grad_(True)
    wr = layer.weight.detach().clone().requires_grad_(True)
    br = None if layer.bias is None else layer.bias.detach().clone().requires_grad_(True)
    y = dense_linear(xr, wr, layer.structure, br)
    y.backward(dy)
    return y, xr.grad, wr.grad, None if br is None else br.grad


# -- results against the dense reference ---------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("device", DEVICES)
def test_forward_and_gradients_match_dense(device, dtype):
    layer, x = layer_and_input(device, dtype)
    y = layer(x)
    dy = torch.randn_like(y)
    y.backward(dy)
    y_ref, dx_ref, dw_ref, db_ref = reference_grads(layer, x, dy)
    assert y.shape == (6, 80)
    assert y.dtype == dtype
    assert y.device == x.device
    close(y, y_ref, dtype)
    close(x.grad, dx_ref, dtype)
    assert layer.weight.grad.shape == layer.weight.shape
    close(layer.weight.grad, dw_ref, dtype)
    close(layer.bias.grad, db_ref, dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("device", DEVICES)
def test_half_dtypes_match_dense(device, dtype):
    layer, x = layer_and_input(device, dtype)
    y = layer(x)
    dy = torch.randn_like(y)
    y.backward(dy)
    # the reference in float64 from the same (rounded) values
    xr = x.detach().double().requires_grad_(True)
    wr = layer.weight.detach().double().requires_grad_(True)
    br = layer.bias.detach().double().requires_grad_(True)
    y_ref = dense_linear(xr, wr, layer.structure, br)
    y_ref.backward(dy.double())
    assert y.dtype == dtype
    assert layer.weight.grad.dtype == dtype
    for got, want in ((y, y_ref), (x.grad, xr.grad), (layer.weight.grad, wr.grad),
                      (layer.bias.grad, br.grad)):
        rel = (got.double() - want).norm() / want.norm()
        assert rel < TOL[dtype], rel


def test_gradcheck_float64():
    torch.manual_seed(0)
    s = BlockStructure(cs.layouts.random(2, 3, density=0.5, seed=1), 8)
    x = torch.randn(3, 16, dtype=torch.float64, requires_grad=True)
    w = torch.randn(s.weight_shape, dtype=torch.float64, requires_grad=True)
    b = torch.randn(24, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w, b: linear(x, w, s, b), (x, w, b))
    assert torch.autograd.gradcheck(lambda x, w: linear(x, w, s), (x, w))


@pytest.mark.parametrize("device", DEVICES)
def test_leading_dimensions(device):
    layer, x = layer_and_input(device, torch.float64, shape=(2, 3, 4, 48))
    y = layer(x)
    assert y.shape == (2, 3, 4, 80)
    y.sum().backward()  # an expanded (stride 0) gradient
    y_ref, dx_ref, dw_ref, db_ref = reference_grads(layer, x, torch.ones_like(y))
    close(y, y_ref, torch.float64)
    close(x.grad, dx_ref, torch.float64)
    close(layer.weight.grad, dw_ref, torch.float64)
    close(layer.bias.grad, db_ref, torch.float64)
    # a single vector, and a non-contiguous input
    v = torch.randn(48, dtype=torch.float64, device=device)
    close(layer(v), dense_linear(v, layer.weight, layer.structure, layer.bias), torch.float64)
    xt = torch.randn(48, 5, dtype=torch.float64, device=device).T
    close(layer(xt), dense_linear(xt, layer.weight, layer.structure, layer.bias),
          torch.float64)


@pytest.mark.parametrize("device", DEVICES)
def test_only_the_gradients_asked_for(device):
    layer, x = layer_and_input(device, torch.float32, bias=False)
    layer.weight.requires_grad_(False)
    layer(x).sum().backward()
    assert x.grad is not None
    assert layer.weight.grad is None
    assert layer.bias is None
    x2 = x.detach()  # the weight's gradient alone
    layer.weight.requires_grad_(True)
    layer(x2).sum().backward()
    assert layer.weight.grad is not None
    close(layer.weight.grad, reference_grads(layer, x2, torch.ones(6, 80, device=device))[2],
          torch.float32)


@pytest.mark.parametrize("device", DEVICES)
def test_empty_batch_and_empty_layout(device):
    layer, x = layer_and_input(device, torch.float32, shape=(0, 48))
    y = layer(x)
    assert y.shape == (0, 80)
    y.sum().backward()
    assert x.grad.shape == (0, 48)
    assert float(layer.weight.grad.abs().sum()) == 0.0
    empty = BlockSparseLinear(32, 16, np.zeros((2, 1), bool), 16, device=device)
    assert empty.weight.shape == (0, 16, 16)
    xe = torch.randn(4, 32, device=device, requires_grad=True)
    ye = empty(xe)
    torch.testing.assert_close(ye, empty.bias.detach().expand(4, 16))
    ye.sum().backward()
    assert float(xe.grad.abs().sum()) == 0.0


# -- autocast --------------------------------------------------------------------------------
def autocast_dtypes(device):
    # CPU autocast: bfloat16 (float16 on the CPU depends on the torch version)
    return [torch.bfloat16] if device == "cpu" else [torch.float16, torch.bfloat16]


@pytest.mark.parametrize("device", DEVICES)
def test_autocast_runs_in_the_autocast_dtype(device):
    for dtype in autocast_dtypes(device):
        layer, x = layer_and_input(device, torch.float32)
        with torch.autocast(device, dtype=dtype):
            y = layer(x)
        assert y.dtype == dtype
        y.float().sum().backward()
        # the gradients reach the float32 leaves in float32
        assert layer.weight.grad.dtype == torch.float32
        assert x.grad.dtype == torch.float32
        y_ref, dx_ref, dw_ref, _ = reference_grads(layer, x, torch.ones(6, 80, device=device))
        for got, want in ((y, y_ref), (x.grad, dx_ref), (layer.weight.grad, dw_ref)):
            assert (got.double() - want.double()).norm() / want.double().norm() < 5e-2


def test_autocast_leaves_float64_alone():
    layer, x = layer_and_input("cpu", torch.float64)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert layer(x).dtype == torch.float64


# -- training --------------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
def test_optimizer_step_changes_the_output(device):
    layer, x = layer_and_input(device, torch.float32)
    x = x.detach()
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    storage = layer.weight.data_ptr()
    before = layer(x).detach()
    loss = layer(x).square().mean()
    loss.backward()
    opt.step()
    after = layer(x)
    assert layer.weight.data_ptr() == storage  # updated in place, read by the next call
    assert not torch.allclose(before, after)
    close(after, dense_linear(x, layer.weight, layer.structure, layer.bias), torch.float32)
    # and a few steps of Adam reduce the loss
    opt = torch.optim.Adam(layer.parameters(), lr=1e-2)
    target = torch.zeros(6, 80, device=device)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = (layer(x) - target).square().mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


def test_initialisation_matches_from_layout_scale():
    torch.manual_seed(0)
    layout = np.ones((8, 4), bool)
    layer = BlockSparseLinear(128, 64, layout, 16)
    fan_in = 32 * 16 / 4  # nnzb * b / block columns = 128 inputs per output
    assert abs(layer.weight.detach().std().item() * np.sqrt(fan_in) - 1.0) < 0.05
    assert layer.bias.detach().abs().max().item() <= 1.0 / np.sqrt(fan_in)
    w = cs.BlockSparseMatrix.from_layout(layout, 16, seed=0)
    assert abs(float(w.data.std()) * np.sqrt(fan_in) - 1.0) < 0.05
    torch.manual_seed(0)
    again = BlockSparseLinear(128, 64, layout, 16)
    assert torch.equal(again.weight, layer.weight)  # torch's RNG


# -- state dict, copies, pickling --------------------------------------------------------------
def test_state_dict_round_trip():
    layer, x = layer_and_input("cpu", torch.float32)
    sd = layer.state_dict()
    assert set(sd) == {"weight", "bias", "layout", "indices", "indptr"}
    assert sd["layout"].dtype == torch.bool
    assert sd["indices"].dtype == torch.int32
    buf = io.BytesIO()
    torch.save(sd, buf)
    buf.seek(0)
    loaded = torch.load(buf)
    other = BlockSparseLinear(48, 80, loaded["layout"], 16)
    assert not torch.equal(other(x), layer(x))
    other.load_state_dict(loaded)
    torch.testing.assert_close(other(x), layer(x), rtol=0, atol=0)


def test_load_state_dict_of_another_layout_raises():
    layer, _ = layer_and_input("cpu", torch.float32)
    sd = layer.state_dict()
    layout = np.array(layer.structure.layout)
    layout[0] = ~layout[0]
    other = BlockSparseLinear(48, 80, layout, 16)
    with pytest.raises(RuntimeError, match="block layout differs from this layer's"):
        other.load_state_dict(sd)
    # the same number of blocks elsewhere: the weight's shape matches, the layout does not
    moved = np.roll(layer.structure.layout, 1, axis=1)
    same_count = BlockSparseLinear(48, 80, moved, 16)
    assert same_count.weight.shape == layer.weight.shape
    with pytest.raises(RuntimeError, match="block layout differs"):
        same_count.load_state_dict(sd)
    with pytest.raises(RuntimeError, match="block layout differs"):
        same_count.load_state_dict(sd, strict=False)
    bad = dict(sd, indices=sd["indices"].flip(0))  # the layout matches, the indices do not
    with pytest.raises(RuntimeError, match="indices: the state dict's index arrays do not"):
        BlockSparseLinear(48, 80, sd["layout"], 16).load_state_dict(bad)


def test_deepcopy_pickle_and_device_copies_share_the_layout():
    layer, x = layer_and_input("cpu", torch.float64)
    twin = copy.deepcopy(layer)
    assert twin.structure is layer.structure  # immutable, shared
    assert twin.weight.data_ptr() != layer.weight.data_ptr()
    torch.testing.assert_close(twin(x), layer(x))
    s = pickle.loads(pickle.dumps(layer.structure))
    assert np.array_equal(s.layout, layer.structure.layout)
    assert s.blocksize == 16
    buf = io.BytesIO()
    torch.save(layer, buf)
    buf.seek(0)
    whole = torch.load(buf, weights_only=False)
    torch.testing.assert_close(whole(x), layer(x))
    half = copy.deepcopy(layer).to(torch.float32)
    assert half.weight.dtype == torch.float32
    assert half.indices.dtype == torch.int32


def test_functional_form_and_matrix_view():
    layout = cs.layouts.banded(4, 1)
    s = BlockStructure(torch.as_tensor(layout), 8)  # a tensor layout is accepted too
    assert s.shape == (32, 32)
    assert s.nnzb == 10
    assert s.weight_shape == (10, 8, 8)
    assert "10 blocks" in repr(s)
    w = torch.randn(s.weight_shape, dtype=torch.float64)
    x = torch.randn(5, 32, dtype=torch.float64)
    m = s.matrix(w)  # shares memory
    torch.testing.assert_close(linear(x, w, s), x @ torch.from_numpy(m.toarray()))
    w.mul_(2)
    assert np.array_equal(m.data, w.numpy())
    np.testing.assert_allclose(m.toarray(), dense_weight(w, s).numpy())


# -- errors --------------------------------------------------------------------------------
def test_errors_name_expected_and_got():
    layer, x = layer_and_input("cpu", torch.float32)
    with pytest.raises(ValueError, match=r"last dimension must be in_features = 48, got x of "
                                         r"shape \(6, 47\)"):
        layer(torch.randn(6, 47))
    with pytest.raises(TypeError, match=r"x has dtype torch\.float64 but weight has dtype "
                                        r"torch\.float32"):
        layer(x.double())
    with pytest.raises(ValueError, match="x is on meta but weight is on cpu"):
        layer(torch.empty(6, 48, device="meta"))
    s = layer.structure
    with pytest.raises(ValueError, match=r"weight must have shape \(nnzb, b, b\) = \(6, 16, 16\)"):
        linear(x, torch.randn(5, 16, 16), s)
    with pytest.raises(ValueError, match=r"bias must have shape \(out_features,\) = \(80,\)"):
        linear(x, layer.weight, s, torch.randn(79))
    with pytest.raises(TypeError, match=r"bias has dtype torch\.float64"):
        linear(x, layer.weight, s, torch.randn(80, dtype=torch.float64))
    with pytest.raises(TypeError, match=r"structure must be a cubsparse\.torch\.BlockStructure"):
        linear(x, layer.weight, layer.structure.layout)
    with pytest.raises(TypeError, match=r"supports torch\.float16"):
        linear(x.int(), layer.weight.int(), s)
    with pytest.raises(ValueError, match=r"layout must have shape .* = \(3, 5\), got \(3, 4\)"):
        BlockSparseLinear(48, 80, np.ones((3, 4), bool), 16)
    with pytest.raises(ValueError, match="in_features must be a non-negative multiple of "
                                         "blocksize 16"):
        BlockSparseLinear(40, 80, np.ones((3, 5), bool), 16)
    with pytest.raises(ValueError, match="blocksize must be one of"):
        BlockSparseLinear(48, 80, np.ones((3, 5), bool), 12)
    with pytest.raises(TypeError, match=r"supports torch\.float16"):
        BlockSparseLinear(48, 80, np.ones((3, 5), bool), 16, dtype=torch.int32)


@pytest.mark.skipif(not CUDA, reason="no CUDA device that torch and CuPy both see")
def test_wrong_device_cuda():
    layer, x = layer_and_input("cuda", torch.float32)
    with pytest.raises(ValueError, match="x is on cpu but weight is on cuda:0"):
        layer(x.detach().cpu())
    with pytest.raises(ValueError, match="bias is on cpu but weight is on cuda:0"):
        linear(x, layer.weight, layer.structure, layer.bias.detach().cpu())


@pytest.mark.skipif(not CUDA, reason="no CUDA device that torch and CuPy both see")
def test_cuda_side_stream_and_repeated_calls():
    """On a side stream the products are ordered with torch's work on that stream; the
    reused per-thread matrix sees each call's weight."""
    layer, x = layer_and_input("cuda", torch.float32)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = layer(x * 2)
        y.sum().backward()
    torch.cuda.current_stream().wait_stream(side)
    close(y, dense_linear(x * 2, layer.weight, layer.structure, layer.bias), torch.float32)
    for _ in range(3):
        with torch.no_grad():
            layer.weight.mul_(0.5)
        close(layer(x), dense_linear(x, layer.weight, layer.structure, layer.bias),
              torch.float32)


@pytest.mark.skipif(not CUDA, reason="no CUDA device that torch and CuPy both see")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_cuda_views_share_the_tensors_memory(dtype):
    """The layer's CuPy views of CUDA tensors, made from their address (CuPy unowned memory,
    not a DLPack import): the same elements at the same addresses for contiguous,
    transposed, sliced (an offset into the storage), one-element and expanded tensors
    (expanded ones given real rows, but for a size-1 dimension's stride, which is never
    stepped); writes reach the tensor; the view holds its tensor."""
    import weakref

    import cupy

    from cubsparse.torch import _as_array, _on_device

    base = torch.randn(6, 40, device="cuda").to(dtype)
    row = torch.randn(8, device="cuda").to(dtype)
    cases = [base, base.t(), base[1:5, 3:29:2], base[2], base[3:4, 7:8], row.expand(1, 8),
             torch.ones(1, 8, device="cuda", dtype=dtype).expand(5, 8)]
    with _on_device(base.device) as dev:
        for t in cases:
            a = _as_array(t, dev)
            assert isinstance(a.data.mem, cupy.cuda.UnownedMemory)
            assert a.shape == tuple(t.shape)
            got = torch.from_dlpack(a.view("int16") if dtype == torch.bfloat16 else a)
            want = t.view(torch.int16) if dtype == torch.bfloat16 else t
            assert torch.equal(got.cpu(), want.cpu())
            if t.numel() == 1 or 0 not in t.stride():  # (else a contiguous copy)
                assert a.data.ptr == t.data_ptr()
                assert a.strides == tuple(st * t.element_size() for st in t.stride())
        a = _as_array(base[1:5], dev)
        a[...] = 0
        assert (base[1:5] == 0).all()
        assert not (base[0] == 0).any()
        assert not (base[5] == 0).any()
        kept = torch.randn(3, 7, device="cuda").to(dtype)
        alive = weakref.ref(kept)
        a = _as_array(kept, dev)
        del kept
        assert alive() is not None  # held by the view
        del a
        assert alive() is None


# -- torch.compile ---------------------------------------------------------------------------
def _cxx_compiler() -> bool:
    return any(shutil.which(c) for c in (os.environ.get("CXX", ""), "g++", "c++", "clang++") if c)


@pytest.mark.parametrize("backend", [
    "aot_eager",
    pytest.param("inductor", marks=pytest.mark.skipif(
        not _cxx_compiler(), reason="torch.compile's inductor needs a C++ compiler")),
])
def test_torch_compile_gives_the_eager_result(backend):
    """The layer is a graph break: the code around it is compiled, the layer runs eagerly,
    and the results and gradients are the eager ones."""
    torch.manual_seed(0)
    first = BlockSparseLinear(32, 32, cs.layouts.banded(4, 1), 8, dtype=torch.float64)
    second = BlockSparseLinear(32, 16, cs.layouts.random(4, 2, 0.5, seed=0), 8,
                               dtype=torch.float64)
    params = [*first.parameters(), *second.parameters()]

    def model(x):
        h = torch.tanh(first(x * 2 + 1))
        return (second(h) ** 2).sum(-1)

    x = torch.randn(2, 5, 32, dtype=torch.float64, requires_grad=True)
    results = []
    for fn in (torch.compile(model, backend=backend), model):
        for p in params:
            p.grad = None
        x.grad = None
        y = fn(x)
        y.sum().backward()
        results.append([y, x.grad, *(p.grad for p in params)])
    for got, want in zip(*results, strict=True):
        torch.testing.assert_close(got, want)


# -- import ----------------------------------------------------------------------------------
def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)


def test_import_cubsparse_does_not_import_torch():
    r = _python("import sys, cubsparse; print('torch' in sys.modules)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_missing_torch_names_the_extra():
    r = _python("import sys; sys.modules['torch'] = None; import cubsparse.torch")
    assert r.returncode != 0
    assert "pip install 'cubsparse[torch]'" in r.stderr
