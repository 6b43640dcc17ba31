"""Checks of what a caller hands the matrix type: the backend's name, the shape, the index
arrays' kind, values and layout (a valid, canonical BSR structure), and private int32
copies of the index arrays. Each error names what was expected and what was given."""

from __future__ import annotations

import numbers

import numpy as np

from ._arrays import backend_of

_BACKENDS = ("cpu", "cuda")


def check_backend(backend: str) -> str:
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {_BACKENDS}, got {backend!r}")
    if backend == "cuda":
        try:
            import cupy  # noqa: F401
        except ImportError as exc:
            raise RuntimeError(
                "backend 'cuda' needs CuPy: pip install 'cubsparse[cuda13]' (or [cuda12])"
            ) from exc
    return backend


def check_shape(shape, blocksize: int) -> tuple[int, int]:
    try:
        m, n = (int(s) for s in shape)
        if any(not isinstance(s, numbers.Integral) for s in shape):
            raise TypeError
    except (TypeError, ValueError):
        raise ValueError(f"shape must be a pair of ints (M, N), got {shape!r}") from None
    if m < 0 or n < 0 or m % blocksize or n % blocksize:
        raise ValueError(
            f"shape must be non-negative multiples of the block size {blocksize}, got {(m, n)}"
        )
    return m, n


def index_array(name: str, array, backend: str):
    """Check an index array's module, rank and kind; its values are checked later."""
    if backend_of(array) != backend:
        raise TypeError(
            f"{name} must be a {'NumPy' if backend == 'cpu' else 'CuPy'} array like data "
            f"(arrays from two modules cannot be mixed), got {type(array).__name__}"
        )
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {array.shape}")
    if array.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integers, got dtype {array.dtype}")
    return array


_INT32 = np.iinfo(np.int32)


def check_fits_int32(name: str, host) -> None:
    """Refuse values that a cast to int32 (what the kernels index with) would wrap.

    Runs on the host copy in the caller's dtype, before any cast, whatever ``check`` says:
    a wrapped index is silent data corruption, not a validation detail. Costs one min/max
    pass, and nothing for int32 arrays, which cannot wrap.
    """
    if host.dtype == np.int32 or host.size == 0:
        return
    lo, hi = int(host.min()), int(host.max())  # Python ints: exact for uint64 too
    if lo < _INT32.min or hi > _INT32.max:
        wide = host > _INT32.max
        if host.dtype.kind == "i":
            wide |= host < _INT32.min
        p = int(np.argmax(wide))
        raise ValueError(
            f"{name} must fit in int32, the index type of the kernels: expected values in "
            f"[{_INT32.min}, {_INT32.max}], got values in [{lo}, {hi}] "
            f"(first offending entry: {name}[{p}] = {int(host[p])})"
        )


def validate_structure(host_indices, host_indptr, block_shape, nnzb) -> None:
    """Raise ``ValueError`` unless the arrays are a valid, canonical BSR layout.

    Works on the arrays in any integer dtype, so that it sees the caller's real values:
    it only compares them (no subtraction, which would wrap for unsigned dtypes).
    """
    rows, cols = block_shape
    if host_indptr.shape[0] != rows + 1:
        raise ValueError(
            f"indptr must have M//blocksize + 1 = {rows + 1} entries, got {host_indptr.shape[0]}"
        )
    if host_indices.shape[0] != nnzb:
        raise ValueError(
            f"indices must have one entry per block (nnzb = {nnzb}), got {host_indices.shape[0]}"
        )
    if host_indptr[0] != 0 or host_indptr[-1] != nnzb:
        raise ValueError(
            f"indptr must start at 0 and end at nnzb = {nnzb}, "
            f"got {int(host_indptr[0])} and {int(host_indptr[-1])}"
        )
    down = host_indptr[1:] < host_indptr[:-1]
    if down.any():
        r = int(np.argmax(down))
        raise ValueError(
            f"indptr must be non-decreasing, but indptr[{r + 1}] < indptr[{r}] "
            f"({int(host_indptr[r + 1])} < {int(host_indptr[r])})"
        )
    if nnzb:
        lo, hi = int(host_indices.min()), int(host_indices.max())
        if lo < 0 or hi >= cols:
            p = int(np.argmax((host_indices < 0) | (host_indices >= cols)))
            raise ValueError(
                f"indices must lie in [0, {cols}) (N // blocksize), got values in [{lo}, {hi}] "
                f"(first offending entry: indices[{p}] = {int(host_indices[p])})"
            )
        # Within each row the column indices must strictly increase: compare neighbours,
        # ignoring pairs that straddle a row boundary.
        not_up = host_indices[1:] <= host_indices[:-1]
        same_row = np.ones(max(nnzb - 1, 0), dtype=bool)
        starts = host_indptr[1:-1]
        same_row[starts[(starts > 0) & (starts < nnzb)] - 1] = False
        bad = same_row & not_up
        if bad.any():
            p = int(np.argmax(bad))
            what = "duplicate" if host_indices[p] == host_indices[p + 1] else "unsorted"
            raise ValueError(
                f"indices must be sorted and unique within each block row; {what} entries at "
                f"positions {p} and {p + 1} (columns {int(host_indices[p])}, "
                f"{int(host_indices[p + 1])}); call scipy's sum_duplicates()/sort_indices() first"
            )


def private_index_arrays(name: str, array, host, xp):
    """``(device, host)`` int32 copies of a caller's index array that nobody else holds.

    ``host`` is ``to_host(array)``: for NumPy the caller's own array, so it is copied
    (cast and copy in one pass); for CuPy it is already a fresh download, and the device
    array is copied on the device. Either way one copy per array, and a later write to the
    caller's arrays cannot reach the matrix.
    """
    check_fits_int32(name, host)
    if xp is np:
        own = host.astype(np.int32, order="C", copy=True)
        return own, own
    own_host = host.astype(np.int32, order="C", copy=False)
    return array.astype(xp.int32, order="C", copy=True), own_host
