"""The data of one case: layout, input sets, per-library copies, and references.

All libraries see the *same values*. Each input set is drawn once in float32 (float64 for
float64 cases) and rounded to the case dtype ("masters"); every library's operand is a
cast of a master, which is exact, and the float64 reference is computed from the masters.
So a difference between contenders is their arithmetic, never their inputs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .cases import Case, csr_of_layout, make_layout

#: Relative Frobenius error above which a result is flagged. The half types round their
#: inputs and output (11 and 8 significant bits) and sum in float32; fp32 allows the
#: reordering of long sums (K up to 16384); tf32 rounds products' inputs to 11 bits.
TOLERANCE = {"float16": 4e-3, "bfloat16": 2.5e-2, "float32": 1e-4, "float64": 1e-10,
             "tf32": 5e-3}


def numpy_dtype(name: str) -> np.dtype:
    """The NumPy (and CuPy) dtype for ``name``; bfloat16 comes from ml_dtypes."""
    if name == "bfloat16":
        import ml_dtypes  # raises ImportError with a clear message if missing

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def quantize(xp, a, dtype: str):
    """``a`` (float32) rounded to the values ``dtype`` can hold, still as float32.

    bfloat16 is rounded with integer arithmetic (round to nearest even on the top 16
    bits) so that no bfloat16 support is needed in the array library to make masters.
    """
    if dtype == "float16":
        return a.astype(xp.float16).astype(xp.float32)
    if dtype == "bfloat16":
        u = a.view(xp.uint32)
        u = (u + xp.uint32(0x7FFF) + ((u >> xp.uint32(16)) & xp.uint32(1))) & xp.uint32(
            0xFFFF0000)
        return u.view(xp.float32)
    return a


def n_sets(bytes_per_set: int, l2_bytes: int, max_sets: int) -> int:
    """Input sets to rotate so that the sets together exceed twice the L2 cache.

    One set when a single set already is that large; otherwise at least two, and enough
    that a set is evicted before it comes round again, up to ``max_sets``.
    """
    if bytes_per_set >= 2 * l2_bytes:
        return 1
    return int(min(max_sets, max(2, math.ceil(2 * l2_bytes / max(bytes_per_set, 1)) + 1)))


class CaseData:
    """Masters and lazily built per-library operands for one case."""

    def __init__(self, backend, case: Case, max_sets: int):
        self.backend = backend
        self.xp = xp = backend.xp
        self.case = case
        self.layout, self.layout_gen = make_layout(case)
        self.indptr, self.indices, self.rows = csr_of_layout(self.layout)
        self.nnzb = int(self.indices.size)
        self.density = self.nnzb / self.layout.size
        s = case.itemsize
        sparse_set = s * (case.n * case.c + case.n * case.k + self.nnzb * case.b ** 2)
        dense_set = s * (case.n * case.c + case.n * case.k + case.c * case.k)
        l2 = backend.l2_bytes()
        self.sets_sparse = n_sets(sparse_set, l2, max_sets)
        self.sets_dense = n_sets(dense_set, l2, max_sets)
        self.master_dtype = xp.float64 if case.dtype == "float64" else xp.float32
        # W's values scaled by 1/sqrt(fan-in) keep outputs O(1): no fp16 overflow.
        self.w_scale = 1.0 / math.sqrt(max(1.0, self.density * case.c))
        self._masters: list[dict[str, Any]] = []
        self.cache: dict[Any, Any] = {}

    # -- masters ----------------------------------------------------------------------
    def master(self, i: int) -> dict[str, Any]:
        """Input set ``i``: ``x`` (N, C), ``dy`` (N, K), ``w`` (nnzb, b, b), all rounded."""
        c = self.case
        while len(self._masters) <= i:
            rng = self.xp.random.default_rng(c.seed * 64 + len(self._masters))
            self._masters.append({
                "x": self._draw(rng, (c.n, c.c)),
                "dy": self._draw(rng, (c.n, c.k)),
                "w": self._draw(rng, (self.nnzb, c.b, c.b), self.w_scale),
            })
        return self._masters[i]

    def _draw(self, rng, shape, scale: float = 1.0):
        """Standard normal values times ``scale``, rounded to the case dtype."""
        a = rng.standard_normal(shape, dtype=self.master_dtype)
        if scale != 1.0:
            a *= self.master_dtype(scale)
        return quantize(self.xp, a, self.case.dtype)

    def get(self, key, factory: Callable[[], Any]):
        """Memoise a derived operand (a cast, a dense W, a torch tensor) under ``key``."""
        if key not in self.cache:
            self.cache[key] = factory()
        return self.cache[key]

    def device_index(self, name: str, dtype=np.int32):
        """``indptr``/``indices``/``rows``/``cols`` as device arrays of ``dtype``."""
        src = {"indptr": self.indptr, "indices": self.indices, "rows": self.rows,
               "cols": self.indices}[name]
        return self.get(("index", name, np.dtype(dtype).str),
                        lambda: self.xp.asarray(src.astype(dtype)))

    def cast(self, i: int, name: str, dtype: str | None = None):
        """Master array ``name`` of set ``i`` cast to ``dtype`` (default: the case dtype)."""
        dtype = dtype or self.case.dtype
        return self.get(("cast", i, name, dtype),
                        lambda: self.master(i)[name].astype(numpy_dtype(dtype)))

    def dense_w(self, i: int, dtype: str | None = None, cache: bool = True):
        """Dense (C, K) W of set ``i`` in ``dtype`` (default: the case dtype)."""
        dtype = dtype or self.case.dtype
        make = lambda: self._scatter(self.master(i)["w"]).astype(numpy_dtype(dtype))  # noqa: E731
        return self.get(("dense_w", i, dtype), make) if cache else make()

    def _scatter(self, blocks):
        xp, c = self.xp, self.case
        cb, kb = c.c // c.b, c.k // c.b
        out = xp.zeros((cb, kb, c.b, c.b), dtype=blocks.dtype)
        out[self.device_index("rows", np.int64), self.device_index("cols", np.int64)] = blocks
        return out.transpose(0, 2, 1, 3).reshape(c.c, c.k)

    def mask(self):
        """Element mask (C, K) of W's non-zero blocks, on the device."""
        b = self.case.b
        return self.get("mask", lambda: self.xp.asarray(self.layout)
                        .repeat(b, axis=0).repeat(b, axis=1))

    # -- references ---------------------------------------------------------------------
    def reference(self, op: str):
        """float64 result of ``op`` on set 0 (for ``sdd``: dense, zero off W's blocks)."""
        xp = self.xp
        m = self.master(0)
        f64 = xp.float64
        if op == "xw":
            return xp.matmul(m["x"].astype(f64), self._scatter(m["w"].astype(f64)))
        if op == "dywt":
            return xp.matmul(m["dy"].astype(f64), self._scatter(m["w"].astype(f64)).T)
        if op == "sdd":
            ref = xp.matmul(m["x"].astype(f64).T, m["dy"].astype(f64))
            ref *= self.mask()
            return ref
        raise ValueError(op)

    def release(self) -> None:
        """Drop every array so the device memory can be returned."""
        self._masters.clear()
        self.cache.clear()


def rel_error(xp, out, ref) -> float:
    """``||out - ref|| / ||ref||`` in float64; NaN anywhere gives NaN (never passes)."""
    diff = out.astype(xp.float64) - ref
    den = float(xp.linalg.norm(ref))
    num = float(xp.linalg.norm(diff))
    if den == 0.0:
        return float("nan") if num != 0.0 else 0.0
    return num / den
