"""The dense path's cost model: where dense cuBLAS on the densified matrix beats the
sparse kernels.

Its data, ``dense_model.json`` (written by ``tools/calibrate_dense.py`` from the benchmark
sweep), holds the measured ratio of cubsparse's time to dense cuBLAS's for each product,
dtype class and block size on a grid of rows of X and densities; a ratio above one means
the sparse kernel was slower. The model interpolates that table (in log rows and log
density, clamped to its range) and charges the dense path for moving the blocks (a
scatter of W, or a gather of the weight gradient) at the device's bandwidth, against the
dense product's own time from its flops and bytes.
"""

from __future__ import annotations

import functools
import importlib.resources
import json
import math

import numpy as np

from .decisions import forced

_HALF = ("float16", "bfloat16")


@functools.cache
def model() -> dict:
    text = (importlib.resources.files("cubsparse") / "_cuda" / "dense_model.json").read_text()
    return json.loads(text)


def ratio(op: str, dtype: str, b: int, n: int, density: float, tf32: bool = False):
    """Predicted sparse time / dense time for ``op`` ("matmul", "matmul_t", "sampled"),
    or None where the model has no data (TF32, float64, a missing cell)."""
    if tf32 or dtype not in (*_HALF, "float32") or density <= 0 or n <= 0:
        return None
    m = model()
    table = m["ratios"].get(f"{op}|{'half' if dtype in _HALF else 'float32'}|{b}")
    if table is None:
        return None
    ns, ds = m["n"], m["density"]
    (i0, i1, wi), (j0, j1, wj) = _bracket(ns, n), _bracket(ds, density)
    cells = [table[i][j] for i in (i0, i1) for j in (j0, j1)]
    if any(c is None for c in cells):
        return None
    r00, r01, r10, r11 = (math.log(c) for c in cells)
    low = r00 + (r01 - r00) * wj
    high = r10 + (r11 - r10) * wj
    return math.exp(low + (high - low) * wi)


def _bracket(grid, value):
    """(i0, i1, weight of i1) for ``value`` on the ascending ``grid``, in log space."""
    if value <= grid[0]:
        return 0, 0, 0.0
    if value >= grid[-1]:
        return len(grid) - 1, len(grid) - 1, 0.0
    i1 = next(i for i, g in enumerate(grid) if g >= value)
    i0 = i1 - 1
    w = (math.log(value) - math.log(grid[i0])) / (math.log(grid[i1]) - math.log(grid[i0]))
    return i0, i1, w


def overhead(dtype: str, m: int, k: int, n: int, nnz: int) -> float:
    """What the dense path costs beyond the dense product of ``n`` rows by an ``m x k``
    matrix, relative to that product: its block moves (``2 * nnz`` elements) and its fixed
    cost per call (``dense_path_fixed_us``: a second launch and a cuBLAS call, measured in
    eager loops), with the product's time estimated from the device figures in the
    model's data. The fixed cost is what keeps short products sparse: at N <= 128 the
    sparse kernels' ratios, measured on kernel time alone, favour dense cuBLAS more than
    an eager call does."""
    m_data = model()
    dev = m_data["device"]
    size = itemsize(dtype)
    flops = 2.0 * n * m * k / (dev["half_tflops" if dtype in _HALF else "float32_tflops"] * 1e12)
    moved = (n * m + m * k + n * k) * size / (dev["tbps"] * 1e12)
    product = max(flops, moved)
    if not product:
        return math.inf
    fixed = m_data.get("dense_path_fixed_us", 0.0) * 1e-6
    return (2.0 * nnz * size / (dev["tbps"] * 1e12) + fixed) / product


def itemsize(name: str) -> int:
    """Bytes of an element of dtype ``name`` as the kernels store it."""
    return 2 if name in _HALF else np.dtype(name).itemsize


def choice(op: str, structure, name: str, b: int, n: int, tf32: bool,
           limit: int | None, given: float | None = None) -> tuple[bool, float | None]:
    """(take the dense path, the model's sparse / dense time ratio) for ``op`` with ``n``
    rows (inner dimension for "sampled"). Dense where the ratio exceeds one plus the dense
    path's own overhead (moving the blocks) and its buffer fits ``limit`` (None: never).
    A ratio ``given`` replaces the model's; a forced ``dense`` decision, the rule."""
    rows, cols = structure.block_shape
    nnzb = structure.nnzb
    r = given if given is not None else ratio(
        op, name, b, n, nnzb / (rows * cols) if rows * cols else 0.0, tf32)
    if limit is None or nnzb == 0:
        return False, r
    force = forced("dense")
    if force is not None:
        return bool(force), r
    if r is None or rows * cols * b * b * itemsize(name) > limit:
        return False, r
    return r > 1.0 + overhead(name, rows * b, cols * b, n, nnzb * b * b), r
