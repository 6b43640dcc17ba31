"""The machine under test: array module, memory, environment record and ceilings.

CuPy and torch are imported only inside functions, so ``import bench`` works on a
machine that has neither (the CPU smoke test runs there).
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import re
import subprocess
import sys
from typing import Any

import numpy as np

from . import timing


class Backend:
    """What the harness needs from the device: ``xp``, sync, memory, and a description."""

    name = "cpu"

    def __init__(self):
        self.xp = np

    # -- memory ---------------------------------------------------------------------
    def release(self) -> None:
        """Return cached memory to the device so the next case starts from a clean slate."""

    def free_bytes(self) -> int | None:
        """Device memory a new case may use, or None where unknown (CPU)."""
        return None

    def l2_bytes(self) -> int:
        """Last-level cache the input rotation must defeat (CPU: a nominal 32 MiB)."""
        return 32 << 20

    def sync(self) -> None:
        """Wait for all queued device work."""

    def clock_lib(self) -> str:
        return "host"

    # -- description ----------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        return _common_info() | {
            "backend": "cpu",
            "gpu": f"CPU {platform.machine()} ({os.cpu_count()} cores)",
            "driver": None, "cuda": None, "cupy": None,
            "torch": _version("torch"), "triton": None,
            "l2_bytes": self.l2_bytes(),
        }


class CudaBackend(Backend):
    """CuPy on the current CUDA device."""

    name = "cuda"

    def __init__(self):
        import cupy

        self.xp = cupy
        self._cp = cupy
        self.device = cupy.cuda.Device()
        self.props = cupy.cuda.runtime.getDeviceProperties(self.device.id)

    def release(self):
        cp = self._cp
        self.sync()
        cp.get_default_memory_pool().free_all_blocks()
        cp.get_default_pinned_memory_pool().free_all_blocks()
        torch = sys.modules.get("torch")  # only if something already imported it
        if torch is not None and torch.cuda.is_initialized():
            torch.cuda.empty_cache()

    def free_bytes(self):
        free, _total = self._cp.cuda.runtime.memGetInfo()
        return int(free)

    def l2_bytes(self):
        return int(self.props.get("l2CacheSize", 50 << 20))

    def sync(self):
        self.device.synchronize()

    def clock_lib(self):
        return "cupy"

    def info(self):
        cp = self._cp
        name = self.props["name"]
        name = name.decode() if isinstance(name, bytes) else str(name)
        rt = cp.cuda.runtime.runtimeGetVersion()
        drv_api = cp.cuda.runtime.driverGetVersion()
        return _common_info() | {
            "backend": "cuda",
            "gpu": name,
            "driver": _nvidia_smi_driver() or f"CUDA driver API {_cuda_ver(drv_api)}",
            "cuda": _cuda_ver(rt),
            "cuda_driver_api": _cuda_ver(drv_api),
            "cupy": cp.__version__,
            "torch": _version("torch", cuda=True),
            "triton": _version("triton"),
            "compute_capability": f"{self.props['major']}.{self.props['minor']}",
            "sm_count": int(self.props["multiProcessorCount"]),
            "memory_bytes": int(self.props["totalGlobalMem"]),
            "l2_bytes": self.l2_bytes(),
            "eager_path": eager_path(),
            "env": {k: os.environ.get(k) for k in
                    ("CUPY_TF32", "CUPY_CUBLAS_COMPUTE_TYPE", "NVIDIA_TF32_OVERRIDE",
                     "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "CUDA_VISIBLE_DEVICES")
                    if os.environ.get(k) is not None},
        }


def get_backend(name: str) -> Backend:
    """``"cuda"`` (needs CuPy and a GPU) or ``"cpu"``."""
    if name == "cpu":
        return Backend()
    if name == "cuda":
        try:
            return CudaBackend()
        except Exception as exc:
            raise SystemExit(
                f"--backend cuda needs CuPy and a CUDA device ({timing.short_error(exc)}); "
                "use --backend cpu for a smoke test") from None
    raise ValueError(f"unknown backend {name!r}")


# -- environment ----------------------------------------------------------------------

def _cuda_ver(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def _version(module: str, cuda: bool = False) -> str | None:
    try:
        mod = __import__(module)
    except Exception:  # missing or broken: both mean "not available"
        return None
    v = getattr(mod, "__version__", "?")
    if cuda and module == "torch":
        v = f"{v} (CUDA {getattr(mod.version, 'cuda', None)})"
    return str(v)


def _nvidia_smi_driver() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20, check=True).stdout
        return out.strip().splitlines()[0].strip() or None
    except Exception:  # no nvidia-smi: fall back to the API version
        return None


def _common_info() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": _version("scipy"),
        "cubsparse": _version("cubsparse"),
        "host": platform.node(),
        "platform": platform.platform(),
        "timestamp": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def eager_path() -> str:
    """How cubsparse's eager calls run in this process: ``"compiled"`` (the compiled call
    path, :mod:`cubsparse._cuda.fastcall`), ``"compiled, no dependent launch"``
    (``CUBSPARSE_PDL=0``) or ``"python"`` (the extension not built, or
    ``CUBSPARSE_FASTCALL=0``: each call then spends the Python path's host time, which
    shows in eager figures of kernels shorter than it)."""
    from cubsparse._cuda import fastcall

    if not fastcall.active():
        return "python"
    return "compiled" if fastcall.PDL else "compiled, no dependent launch"


def slug(text: str) -> str:
    """File-name-safe form of a GPU name: ``NVIDIA H100 80GB HBM3`` -> ``NVIDIA-H100-80GB-HBM3``."""
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-") or "unknown"


# -- ceilings ---------------------------------------------------------------------------

def copy_bandwidth(backend: Backend, policy: timing.Policy | None = None) -> dict[str, Any]:
    """Device-to-device copy rate, counting bytes read plus bytes written (GB/s).

    The larger of a copy-engine ``cudaMemcpyAsync`` and CuPy's elementwise copy kernel
    is kept: the bandwidth-efficiency target is against what the memory system can do.
    """
    # A ceiling is a device rate: host issue time and sync latency would only cost time.
    policy = policy or timing.Policy(repeats=10, min_samples=5, target_ms=100.0,
                                     graphs="never", latency=False)
    xp = backend.xp
    if backend.name == "cpu":
        n = 16 << 20  # float32 elements: 64 MiB, far beyond the caches
        src = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
        dst = np.empty_like(src)
        t = timing.measure([lambda: np.copyto(dst, src)], "host", policy)
        return {"GBps": 2 * src.nbytes / t["ms"] / 1e6, "bytes": 2 * src.nbytes,
                "method": "numpy.copyto", "ms": t["ms"]}
    free = backend.free_bytes() or (8 << 30)
    nbytes = int(min(1 << 30, free // 8)) // 16 * 16
    res = _gpu_copy_rates(xp, nbytes, policy)
    backend.release()
    best = max((v for k, v in res.items() if isinstance(v, float)), default=None)
    method = next((k for k, v in res.items() if v == best), None)
    return {"GBps": best, "bytes": 2 * nbytes, "method": method, "all": res}


def _gpu_copy_rates(cp, nbytes: int, policy: timing.Policy) -> dict[str, Any]:
    """GB/s of a copy-engine copy and of CuPy's copy kernel over ``nbytes`` random bytes."""
    src = cp.random.standard_normal(nbytes // 4, dtype=cp.float32)
    dst = cp.empty_like(src)
    kind = cp.cuda.runtime.memcpyDeviceToDevice

    def engine():
        cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, nbytes, kind,
                                    cp.cuda.get_current_stream().ptr)

    def kernel():
        cp.copyto(dst, src)

    res: dict[str, Any] = {}
    for name, fn in (("cudaMemcpyAsync", engine), ("cupy.copyto kernel", kernel)):
        try:
            fn()
            t = timing.measure([fn], "cupy", policy)
            res[name] = 2 * nbytes / t["ms"] / 1e6
        except Exception as exc:
            res[name] = None
            res[name + " error"] = timing.short_error(exc)
    return res


def dense_peaks(backend: Backend, dtypes=("float16", "bfloat16", "float32"),
                size: int | None = None, want_tf32: bool = True) -> dict[str, Any]:
    """Dense matrix-product rate (TFLOP/s) of each dtype on random data, best library.

    CuPy (cuBLAS) and torch (cuBLAS/cuBLASLt) are both tried; fp32 is IEEE in both
    (torch with ``allow_tf32 = False``); "tf32" is torch with ``allow_tf32 = True``.
    """
    from . import peers  # the dense contenders live there

    size = size or (8192 if backend.name == "cuda" else 256)
    policy = timing.Policy(repeats=10, min_samples=5, target_ms=100.0, graphs="never",
                           latency=False)
    out: dict[str, Any] = {"size": size}
    names = list(dtypes) + (["tf32"] if want_tf32 and backend.name == "cuda" else [])
    for name in names:
        dtype = "float32" if name == "tf32" else name
        best = None
        tried = {}
        for lib, fn_factory in peers.dense_products(backend, dtype, size, tf32=name == "tf32"):
            try:
                fn = fn_factory()
                fn()
                t = timing.measure([fn], lib if backend.name == "cuda" else "host", policy)
                tflops = 2.0 * size ** 3 / t["ms"] / 1e9
                tried[lib] = float(f"{tflops:.4g}")
                if best is None or tflops > best[0]:
                    best = (tflops, lib)
            except Exception as exc:
                tried[lib] = timing.short_error(exc)
        out[name] = {"tflops": best[0] if best else None, "lib": best[1] if best else None,
                     "tried": tried}
        backend.release()
    return out
