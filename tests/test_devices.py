"""Matrices and operands on any CUDA device: a call runs on the current device, its plans
and tables are kept per device, and an operand on another device is refused with an
error that names both devices. The tests that need two GPUs skip visibly with fewer."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from conftest import CUDA_SKIP_REASON, GPUS, poison, to_numpy, two_gpus

import cubsparse as cs
from cubsparse import DeviceMismatchError
from cubsparse._cuda.run import _check_devices

one_gpu = pytest.mark.skipif(GPUS < 1, reason=CUDA_SKIP_REASON)


def _on(device_id: int):
    """A stand-in for a CuPy array on ``device_id`` (only its ``data.device_id`` is read)."""
    return SimpleNamespace(data=SimpleNamespace(device_id=device_id))


def test_device_check_names_both_devices():
    _check_devices(0, "matmul", x=_on(0), out=None)  # all on the current device: no error
    with pytest.raises(DeviceMismatchError, match=r"matmul: out is on CUDA device 1 but the "
                       r"current device is 0.*cupy\.cuda\.Device\(1\)"):
        _check_devices(0, "matmul", x=_on(0), out=_on(1))
    assert issubclass(DeviceMismatchError, ValueError)


def _operands(cupy, b=16, n=40, seed=0):
    w = cs.BlockSparseMatrix.from_layout(cs.layouts.random(6, 4, 0.5, seed=seed), b,
                                         dtype="float32", seed=seed + 1, backend="cuda")
    rng = np.random.default_rng(seed + 2)
    x = cupy.asarray(rng.standard_normal((n, 6 * b)).astype(np.float32))
    dy = cupy.asarray(rng.standard_normal((n, 4 * b)).astype(np.float32))
    return w, x, dy


def _check_ops(cupy, w, x, dy):
    wd = to_numpy(w.toarray()).astype(np.float64)
    xh, dyh = to_numpy(x).astype(np.float64), to_numpy(dy).astype(np.float64)
    y = cs.matmul(x, w, out=poison((x.shape[0], w.shape[1]), "float32", "cuda"))
    np.testing.assert_allclose(to_numpy(y), xh @ wd, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(to_numpy(dy @ w.T), dyh @ wd.T, rtol=1e-4, atol=1e-4)
    g = cs.sampled_matmul(x.T, dy, like=w)
    np.testing.assert_allclose(to_numpy(g.toarray()), (xh.T @ dyh) * (wd != 0),
                               rtol=1e-4, atol=1e-4)


@one_gpu
def test_runners_are_keyed_by_the_current_device():
    import cupy

    dev = cupy.cuda.runtime.getDevice()
    w, x, dy = _operands(cupy)
    _check_ops(cupy, w, x, dy)
    assert w._runners
    assert all(key[1] == dev for key in w._runners)


@two_gpus
def test_matrix_on_a_second_device():
    import cupy

    with cupy.cuda.Device(1):
        w, x, dy = _operands(cupy, seed=5)
        assert w.data.device.id == 1
        _check_ops(cupy, w, x, dy)
        assert all(key[1] == 1 for key in w._runners)
    # the same layout's matrix on device 0 builds its own plans and tables
    with cupy.cuda.Device(0):
        w0, x0, dy0 = _operands(cupy, seed=5)
        _check_ops(cupy, w0, x0, dy0)
        assert all(key[1] == 0 for key in w0._runners)


@two_gpus
def test_mixed_devices_are_refused():
    import cupy

    with cupy.cuda.Device(1):
        w, x1, dy1 = _operands(cupy, seed=7)
    with cupy.cuda.Device(0):
        x0 = cupy.asarray(x1)
        with pytest.raises(DeviceMismatchError, match="W is on CUDA device 1"):
            cs.matmul(x0, w)
        with pytest.raises(DeviceMismatchError, match="is on CUDA device 1"):
            cs.sampled_matmul(x0.T, cupy.asarray(dy1), like=w)
    with cupy.cuda.Device(1), pytest.raises(DeviceMismatchError,
                                            match="the dense operand is on CUDA device 0"):
        cs.matmul(x0, w)


# Runs in a fresh process that makes GPU 1 current before any CUDA work and never leaves it
# (a `with Device(1)` block would make device 0 current again on exit, which opens it);
# prints whether GPU 0's primary context exists at the end (the driver's own record).
ONLY_DEVICE_1 = """
import ctypes, sys
import cupy

def active(ordinal):
    cuda = ctypes.CDLL("libcuda.so.1")
    dev, flags, on = ctypes.c_int(), ctypes.c_uint(), ctypes.c_int()
    assert cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(dev), ordinal) == 0
    assert cuda.cuDevicePrimaryCtxGetState(dev, ctypes.byref(flags), ctypes.byref(on)) == 0
    return bool(on.value)

cupy.cuda.Device(1).use()
x = cupy.ones((64, 64), dtype=cupy.float32)
float((x @ x).sum())
if sys.argv[1] == "cubsparse":
    import cubsparse as cs
    for dtype in ("float32", "float16"):
        w = cs.BlockSparseMatrix.from_layout(cs.layouts.random(6, 4, density=0.5, seed=0),
                                             32, dtype=dtype, seed=1, backend="cuda")
        x = cupy.ones((128, w.shape[0]), dtype=dtype)
        dy = cupy.ones((128, w.shape[1]), dtype=dtype)
        y, dx = cs.matmul(x, w), cs.matmul(dy, w.T)
        g = cs.sampled_matmul(x.T, dy, like=w)
        assert float(abs(y).sum()) > 0 and float(abs(dx).sum()) > 0
        assert float(abs(g.data).sum()) > 0
        assert {y.device.id, dx.device.id, g.data.device.id} == {1}
print(active(0), active(1))
"""


@two_gpus
def test_work_on_device_1_never_opens_device_0():
    import subprocess
    import sys

    def run(mode):
        out = subprocess.run([sys.executable, "-c", ONLY_DEVICE_1, mode], capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout.split()[-2:]

    if run("cupy")[0] != "False":
        pytest.skip("CuPy alone opens device 0 here; nothing left for cubsparse to show")
    assert run("cubsparse") == ["False", "True"]
