"""Supported dtypes and block sizes, and the rules that relate them."""

from __future__ import annotations

import numpy as np

try:  # bfloat16 is not a NumPy dtype; ml_dtypes supplies one that CuPy also understands.
    import ml_dtypes

    bfloat16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - exercised only where ml_dtypes is missing
    bfloat16 = None

#: The block sizes ``b`` (blocks of ``b x b``) that both backends support.
BLOCK_SIZES = (8, 16, 32, 64, 128)

#: The dtypes this installation supports: float16, bfloat16 (where ``ml_dtypes`` is
#: installed), float32 and float64.
SUPPORTED_DTYPES = tuple(
    d for d in (np.dtype(np.float16), bfloat16, np.dtype(np.float32), np.dtype(np.float64))
    if d is not None
)

#: Relative Frobenius-norm error a result may show against a float64 reference. The half
#: types are rounded on input and output (8 and 11 significant bits); the sums run in float32.
TOLERANCE = {"float16": 4e-3, "bfloat16": 2.5e-2, "float32": 1e-5, "float64": 1e-12}


def _names(items) -> str:
    return ", ".join(str(i) for i in items)


def as_dtype(dtype) -> np.dtype:
    """Return ``dtype`` as a supported :class:`numpy.dtype` or raise ``TypeError``."""
    if isinstance(dtype, str) and dtype == "bfloat16":
        if bfloat16 is None:
            raise TypeError("dtype bfloat16 needs the package ml_dtypes (pip install ml_dtypes)")
        return bfloat16
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(
            f"dtype must be one of {_names(d.name for d in SUPPORTED_DTYPES)}; got {dtype!r}"
        ) from exc
    if dt not in SUPPORTED_DTYPES:
        raise TypeError(
            f"dtype must be one of {_names(d.name for d in SUPPORTED_DTYPES)}; got {dt.name}"
        )
    return dt


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype arithmetic runs in: half types accumulate in float32."""
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def is_half(dtype: np.dtype) -> bool:
    return dtype.itemsize == 2


def check_blocksize(blocksize) -> int:
    """Return ``blocksize`` as an int or raise ``ValueError`` naming the supported set."""
    if isinstance(blocksize, (tuple, list)):
        if len(blocksize) != 2 or blocksize[0] != blocksize[1]:
            raise ValueError(f"blocks must be square, got blocksize {tuple(blocksize)}")
        blocksize = blocksize[0]
    if isinstance(blocksize, (bool, np.bool_)) or not isinstance(blocksize, (int, np.integer)):
        raise TypeError(f"blocksize must be an int in {BLOCK_SIZES}, got {blocksize!r}")
    if int(blocksize) not in BLOCK_SIZES:
        raise ValueError(f"blocksize must be one of {BLOCK_SIZES}, got {blocksize}")
    return int(blocksize)


def result_dtype(a: np.dtype, b: np.dtype) -> np.dtype:
    """Both operands of an op must share one dtype: mixed precision is the caller's choice."""
    if a != b:
        raise TypeError(
            f"operands must have the same dtype, got {a.name} and {b.name}; "
            "convert one with astype()"
        )
    return a
