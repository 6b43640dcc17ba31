"""cubsparse: block-sparse matrices and the three products of block-sparse layers.

Public names: :class:`BlockSparseMatrix`, :func:`matmul`, :func:`sampled_matmul`,
:func:`matmul_plan`, :func:`sampled_matmul_plan`, :func:`warmup`, :func:`get_options`,
:func:`set_options`, :func:`options`, :func:`save_npz`, :func:`load_npz`, :mod:`layouts`,
:class:`DeviceMismatchError`.
"""

from __future__ import annotations

from . import layouts
from ._arrays import DeviceMismatchError
from ._dtypes import BLOCK_SIZES, SUPPORTED_DTYPES
from ._io import load_npz, save_npz
from ._matrix import BlockSparseMatrix
from ._ops import matmul, matmul_plan, sampled_matmul, sampled_matmul_plan
from ._options import get_options, options, set_options
from ._warmup import cuda_available, warmup

__version__ = "0.1.0"

__all__ = [
    "BLOCK_SIZES",
    "SUPPORTED_DTYPES",
    "BlockSparseMatrix",
    "DeviceMismatchError",
    "cuda_available",
    "get_options",
    "layouts",
    "load_npz",
    "matmul",
    "matmul_plan",
    "options",
    "sampled_matmul",
    "sampled_matmul_plan",
    "save_npz",
    "set_options",
    "warmup",
    "__version__",
]
