"""cubsparse: block-sparse matrices and the three products of block-sparse layers.

Public names: :class:`BlockSparseMatrix`, :func:`matmul`, :func:`sampled_matmul`,
:func:`warmup`, :mod:`layouts`.
"""

from __future__ import annotations

from . import layouts
from ._dtypes import BLOCK_SIZES, SUPPORTED_DTYPES
from ._matrix import BlockSparseMatrix
from ._ops import matmul, sampled_matmul
from ._warmup import cuda_available, warmup

__version__ = "0.1.0"

__all__ = [
    "BLOCK_SIZES",
    "SUPPORTED_DTYPES",
    "BlockSparseMatrix",
    "cuda_available",
    "layouts",
    "matmul",
    "sampled_matmul",
    "warmup",
    "__version__",
]
