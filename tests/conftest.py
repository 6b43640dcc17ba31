"""Shared fixtures and helpers: every test body runs on both backends.

The ``backend`` fixture is parametrized over ``"cpu"`` and ``"cuda"``; the CUDA case is
skipped *visibly* on machines without CuPy or a GPU: the summary ends with one line per
skip reason and its count (``-rs`` lists every skipped test), so a green CPU-only run never
pretends to have exercised the kernels.

On a machine of several GPUs, ``CUBSPARSE_TEST_DEVICES=0,1`` (with ``-n``) gives each
xdist worker one of them.

Hypothesis profiles: ``fast`` (default, CI), ``thorough`` and ``gpu``; pick one with the
environment variable ``CUBSPARSE_HYPOTHESIS_PROFILE``. The chosen profile is printed in
the pytest header.
"""

from __future__ import annotations

import os
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

import cubsparse

# `CUBSPARSE_TEST_DEVICES=0,1 pytest -n 28` spreads the xdist workers over those GPUs, one
# GPU a worker (worker k gets the k-th modulo their count). It is set before anything opens
# a CUDA context (importing cubsparse does not). A worker then sees one GPU, so the two-GPU
# tests need a run without it. The numbers are the machine's (they replace any
# CUDA_VISIBLE_DEVICES set before).
_DEVICES = [d.strip() for d in os.environ.get("CUBSPARSE_TEST_DEVICES", "").split(",")
            if d.strip()]
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1", ...
if _DEVICES and _WORKER.startswith("gw"):
    os.environ["CUDA_VISIBLE_DEVICES"] = _DEVICES[int(_WORKER[2:]) % len(_DEVICES)]

# -- hypothesis profiles -------------------------------------------------------------------
_COMMON = {
    "deadline": None,  # first calls compile kernels (CUDA) or warm caches: timing is meaningless
    "print_blob": True,  # failures print @reproduce_failure(...) for exact replay
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}
settings.register_profile("fast", max_examples=25, derandomize=False, **_COMMON)
settings.register_profile("thorough", max_examples=400, derandomize=False, **_COMMON)
settings.register_profile("gpu", max_examples=60, derandomize=False, **_COMMON)

PROFILE_ENV = "CUBSPARSE_HYPOTHESIS_PROFILE"
PROFILE = os.environ.get(PROFILE_ENV, "fast") or "fast"
settings.load_profile(PROFILE)  # raises InvalidArgument naming the profiles on a typo

CUDA_SKIP_REASON = "no CUDA device (cupy not importable or no GPU)"


def _gpu_count() -> int:
    if not cubsparse.cuda_available():
        return 0
    import cupy

    return cupy.cuda.runtime.getDeviceCount()


GPUS = _gpu_count()
# For the tests that spread one job over two GPUs; they skip visibly on fewer.
two_gpus = pytest.mark.skipif(GPUS < 2, reason=f"needs 2 CUDA devices, {GPUS} visible")


def pytest_report_header(config):
    return (
        f"cubsparse {cubsparse.__version__}: hypothesis profile {PROFILE!r} "
        f"(set {PROFILE_ENV}=fast|thorough|gpu); "
        f"cuda backend: {'available' if cubsparse.cuda_available() else CUDA_SKIP_REASON}"
    )


def pytest_terminal_summary(terminalreporter):
    """One line per skip reason with how many tests it skipped (about 700 CUDA cases on a
    machine without a GPU), instead of a line per test location."""
    reasons = Counter()
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reasons[reason.removeprefix("Skipped: ")] += 1
    if reasons:
        terminalreporter.section("skipped, by reason")
        for reason, count in reasons.most_common():
            terminalreporter.line(f"{count:5d}  {reason}")


def pytest_configure(config):
    # No custom marks are used by these tests today; register the one the backend
    # parameter carries so that `-m cuda` / `-m "not cuda"` select it under --strict-markers.
    config.addinivalue_line("markers", "cuda: the test runs on the CUDA backend (CuPy arrays)")


# -- backend fixture -----------------------------------------------------------------------
BACKENDS = [
    pytest.param("cpu", id="cpu"),
    pytest.param(
        "cuda",
        id="cuda",
        marks=[
            pytest.mark.cuda,
            pytest.mark.skipif(not cubsparse.cuda_available(), reason=CUDA_SKIP_REASON),
        ],
    ),
]


@pytest.fixture(params=BACKENDS, scope="session")
def backend(request) -> str:
    """``"cpu"`` or ``"cuda"``. Session scoped so that hypothesis tests may use it."""
    return request.param


# -- helpers -------------------------------------------------------------------------------
def xp_for(backend: str):
    """The array module of ``backend``: NumPy for ``"cpu"``, CuPy for ``"cuda"``."""
    if backend == "cpu":
        return np
    if backend == "cuda":
        import cupy

        return cupy
    raise ValueError(f"unknown backend {backend!r}")


def to_numpy(arr) -> np.ndarray:
    """A host NumPy copy/view of a NumPy or CuPy array (or a NumPy scalar)."""
    if isinstance(arr, np.ndarray):
        return arr
    if hasattr(arr, "get") and type(arr).__module__.startswith("cupy"):
        return arr.get()
    return np.asarray(arr)


def to_backend(arr: np.ndarray, backend: str):
    """``arr`` (a NumPy array) on ``backend`` (a copy for CUDA, the same array on CPU)."""
    return arr if backend == "cpu" else xp_for(backend).asarray(arr)


def poison(shape, dtype, backend: str):
    """A NaN-filled array for ``out=``: anything not overwritten shows up as NaN."""
    return xp_for(backend).full(shape, np.nan, dtype=np.dtype(dtype))


def array_bytes(arr) -> bytes:
    """The raw bytes of an array (host copy), for bitwise comparisons."""
    return np.ascontiguousarray(to_numpy(arr)).tobytes()
