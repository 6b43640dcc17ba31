"""Backend discovery and ahead-of-time compilation."""

from __future__ import annotations

import functools


@functools.cache
def cuda_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # ImportError, or CUDA driver errors on a machine without a GPU
        return False


def warmup(dtypes=None, blocksizes=None, ops=None, verbose: bool = False) -> list[str]:
    """Compile the CUDA kernels now rather than on first use.

    Parameters
    ----------
    dtypes : sequence of dtype, optional
        Default: every supported dtype.
    blocksizes : sequence of int, optional
        Default: 8, 16, 32, 64, 128.
    ops : sequence of {"dsd", "sdd"}, optional
        Default: both kernel families.
    verbose : bool
        Print each kernel as it is compiled.

    Returns
    -------
    list of str
        The kernel names compiled (empty where no GPU is present).

    Examples
    --------
    >>> import cubsparse
    >>> names = cubsparse.warmup(dtypes=["float32"], blocksizes=[32])
    """
    if not cuda_available():
        return []
    from . import _cuda

    return _cuda.warmup(dtypes=dtypes, blocksizes=blocksizes, ops=ops, verbose=verbose)
