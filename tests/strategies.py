"""Hypothesis strategies for block-sparse test cases.

A :class:`Case` is drawn from small ingredients (block size, dtype, block grid, layout
kind, density, seed); the values themselves come from ``numpy.random.default_rng(seed)``
(standard normal, never exactly zero), so every failure replays from the drawn seed and
shrinks over the ingredients rather than over thousands of floats.

Layouts are built here with NumPy directly (not with ``cubsparse.layouts``) so that the op
tests do not depend on the generators under test elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from hypothesis import strategies as st

import cubsparse
from cubsparse import _dtypes

# Small block sizes are cheap on the CPU and exercise the most blocks; b=128 only ever gets
# a tiny grid.
BLOCK_SIZES = st.sampled_from((8, 8, 8, 16, 16, 16, 32, 32, 64, 128))
DTYPES = st.sampled_from(tuple(cubsparse.SUPPORTED_DTYPES))
HAS_BFLOAT16 = _dtypes.bfloat16 is not None

#: Largest number of block rows/columns per block size: keeps C, K <= 512 and b=128 tiny.
MAX_GRID = {8: 6, 16: 6, 32: 6, 64: 4, 128: 2}

LAYOUT_KINDS = ("random", "empty", "full", "empty_row", "empty_col", "skewed", "diagonal")

SEEDS = st.integers(min_value=0, max_value=2**32 - 1)

#: Leading batch shapes of a left dense operand: () is a vector, (1,) is N = 1, (0,) empty.
#: (300,) and (2, 150) span several row tiles of the CUDA kernels (256 rows per CTA).
BATCH_SHAPES = st.sampled_from(
    ((), (1,), (2, 3), (3,), (5,), (1, 1), (7,), (0,), (300,), (2, 150))
)

#: Columns of a right dense operand (W @ d): None means a vector d of shape (N,).
RIGHT_COLS = st.sampled_from((None, 1, 2, 5, 9, 0, 257))

#: Inner dimension of sampled_matmul (the batch of a layer's weight gradient); 300 spans
#: several k tiles of the CUDA kernels with a remainder.
INNER = st.sampled_from((1, 2, 3, 16, 33, 0, 300))


def tolerance(dtype) -> float:
    return _dtypes.TOLERANCE[np.dtype(dtype).name]


def standard_normal(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    """Standard-normal values in ``dtype``, never exactly zero (even after rounding)."""
    v = rng.standard_normal(shape).astype(dtype)
    v[v == 0] = 1
    return v


def make_layout(kind: str, rows: int, cols: int, density: float, rng: np.random.Generator):
    """A ``(rows, cols)`` bool layout of the given kind (NumPy only)."""
    if kind == "empty":
        return np.zeros((rows, cols), dtype=bool)
    if kind == "full":
        return np.ones((rows, cols), dtype=bool)
    if kind == "diagonal":
        return np.eye(rows, cols, dtype=bool)
    layout = rng.random((rows, cols)) < density
    if density == 1.0:
        layout[...] = True
    if kind == "empty_row":
        layout[rng.integers(rows)] = False
    elif kind == "empty_col":
        layout[:, rng.integers(cols)] = False
    elif kind == "skewed":
        # Like a Barabási-Albert hub: one block column (and row) full, the rest sparse.
        hub = rng.integers(cols)
        layout[:, hub] = True
        layout[min(hub, rows - 1)] = True
    return layout


@dataclass
class Case:
    """One block-sparse matrix, held as NumPy arrays (values in ``dtype``)."""

    blocksize: int
    dtype: np.dtype
    layout: np.ndarray  # bool (rows, cols)
    seed: int
    kind: str = "random"
    data: np.ndarray = field(init=False, repr=False)
    indices: np.ndarray = field(init=False, repr=False)
    indptr: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        rows, cols = np.nonzero(self.layout)
        self.indices = cols.astype(np.int32)
        self.indptr = np.zeros(self.layout.shape[0] + 1, dtype=np.int32)
        np.cumsum(self.layout.sum(axis=1), out=self.indptr[1:])
        b = self.blocksize
        self.data = standard_normal(self.rng(), (rows.size, b, b), self.dtype)

    # A fresh generator per purpose, so that drawing the matrix does not shift the
    # values of the dense operands (and vice versa).
    def rng(self, stream: int = 0) -> np.random.Generator:
        return np.random.default_rng([self.seed, stream])

    @property
    def shape(self) -> tuple[int, int]:
        r, c = self.layout.shape
        return (r * self.blocksize, c * self.blocksize)

    @property
    def nnzb(self) -> int:
        return int(self.layout.sum())

    def matrix(self, backend: str):
        """The case as a :class:`cubsparse.BlockSparseMatrix` on ``backend`` (own copies)."""
        from conftest import to_backend

        return cubsparse.BlockSparseMatrix(
            (to_backend(self.data.copy(), backend), to_backend(self.indices.copy(), backend),
             to_backend(self.indptr.copy(), backend)),
            shape=self.shape,
        )

    def scipy64(self) -> sp.bsr_array:
        """Float64 SciPy BSR reference built from the stored (rounded) values."""
        b = self.blocksize
        return sp.bsr_array(
            (self.data.astype(np.float64), self.indices, self.indptr),
            shape=self.shape, blocksize=(b, b),
        )

    def dense64(self) -> np.ndarray:
        return self.scipy64().toarray()

    def dense(self, shape, stream: int = 1, dtype=None) -> np.ndarray:
        """Standard-normal NumPy values of ``shape`` (the case's dtype by default)."""
        return standard_normal(self.rng(stream), shape, self.dtype if dtype is None else dtype)

    def mask64(self) -> np.ndarray:
        """The layout expanded to a float64 0/1 element mask."""
        b = self.blocksize
        return np.kron(self.layout, np.ones((b, b))).astype(np.float64)


@st.composite
def grids(draw, blocksize: int, min_size: int = 1):
    top = MAX_GRID[blocksize]
    rows = draw(st.integers(min_size, top))
    cols = draw(st.integers(min_size, top))
    return rows, cols


DENSITIES = st.one_of(st.sampled_from((0.0, 1.0)), st.floats(0.05, 0.95))


KINDS = st.sampled_from(LAYOUT_KINDS)


@st.composite
def cases(draw, dtypes=DTYPES, blocksizes=BLOCK_SIZES, kinds=KINDS):
    """A :class:`Case`: block size, dtype, grid 1..6 x 1..6, layout kind, density, seed."""
    b = draw(blocksizes)
    dtype = np.dtype(draw(dtypes))
    rows, cols = draw(grids(b))
    kind = draw(kinds)
    density = draw(DENSITIES)
    seed = draw(SEEDS)
    layout = make_layout(kind, rows, cols, density, np.random.default_rng([seed, 99]))
    return Case(b, dtype, layout, seed, kind)


def layout_cases(kind: str, **kw):
    return cases(kinds=st.just(kind), **kw)
