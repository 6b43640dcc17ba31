"""Saving and loading block-sparse matrices as SciPy-compatible BSR ``.npz`` files.

The file is what :func:`scipy.sparse.save_npz` writes for a ``bsr_array``: the keys
``format`` (``b"bsr"``), ``shape``, ``data`` (``(nnzb, b, b)``), ``indices``, ``indptr``
and ``_is_array``, so :func:`scipy.sparse.load_npz` reads it, and :func:`load_npz` reads
the BSR files SciPy writes.

SciPy's sparse matrices hold no half-precision values (``scipy.sparse.load_npz`` refuses
a float16 file), and bfloat16 is no NumPy dtype at all. float16 and bfloat16 values are
therefore stored as float32, which holds each of them exactly, with one extra key,
``cubsparse_dtype`` (``"float16"`` or ``"bfloat16"``), that SciPy ignores: SciPy reads a
float32 ``bsr_array`` with exactly the matrix's values (what ``W.to_scipy()`` returns), and
:func:`load_npz` gives back the half dtype bit for bit. The values take twice their
in-memory size; raw 16-bit patterns would not, but SciPy would refuse them (float16) or
read meaningless integers (bfloat16 as uint16). float32 and float64 files are exactly
what SciPy writes.
"""

from __future__ import annotations

import os

import numpy as np
from numpy.lib.npyio import NpzFile

from . import _dtypes
from ._arrays import SparseOperand, to_host
from ._validate import check_backend

#: The extra key naming a dtype that the stored array does not carry itself.
DTYPE_KEY = "cubsparse_dtype"


def save_npz(file, matrix, compressed: bool = True) -> None:
    """Save a :class:`BlockSparseMatrix` as a BSR ``.npz`` file that SciPy also reads.

    Parameters
    ----------
    file : str, os.PathLike or file-like
        Where to write. A path without the ``.npz`` extension gets it appended (as by
        :func:`numpy.savez`).
    matrix : BlockSparseMatrix
        Any backend (CUDA values are copied to the host) and any supported dtype. A
        transposed view is saved as the matrix it reads as (materialised).
    compressed : bool, optional
        Write with :func:`numpy.savez_compressed` (default, as SciPy does) or
        :func:`numpy.savez`.

    Notes
    -----
    The keys are those :func:`scipy.sparse.save_npz` writes for a ``bsr_array``, so
    ``scipy.sparse.load_npz(file)`` returns a ``bsr_array`` equal to
    ``matrix.to_scipy()``. float32 and float64 values are stored in their dtype. SciPy
    cannot hold float16 or bfloat16 values, so those are stored as float32 (which holds
    each of them exactly) with the extra key ``cubsparse_dtype`` naming the dtype: SciPy
    reads a float32 matrix with the same values, and :func:`load_npz` gives back the half
    dtype, bit for bit.

    Examples
    --------
    >>> import io, numpy as np, scipy.sparse, cubsparse
    >>> W = cubsparse.BlockSparseMatrix.from_layout(np.eye(2, dtype=bool), 8, seed=0)
    >>> f = io.BytesIO()
    >>> cubsparse.save_npz(f, W)
    >>> _ = f.seek(0)
    >>> V = cubsparse.load_npz(f)
    >>> V, bool((V.data == W.data).all())
    (<BlockSparseMatrix 16x16, blocksize 8, 2 blocks (density 0.500), float32, cpu>, True)
    >>> _ = f.seek(0)
    >>> S = scipy.sparse.load_npz(f)                 # SciPy reads the same file
    >>> S.format, S.blocksize, bool((S != W.to_scipy()).nnz == 0)
    ('bsr', (8, 8), True)
    """
    if not isinstance(matrix, SparseOperand):
        raise TypeError(
            f"save_npz saves a BlockSparseMatrix, got {type(matrix).__name__}; for a "
            "scipy.sparse matrix use scipy.sparse.save_npz"
        )
    src = matrix._materialized()  # the matrix itself unless it is a transposed view
    data = to_host(src._data)
    arrays = {}
    if _dtypes.is_half(data.dtype):
        # Exact: every float16 and bfloat16 value (NaN payloads too) is a float32 value.
        arrays[DTYPE_KEY] = np.array(data.dtype.name)
        data = data.astype(np.float32)
    s = src._structure
    arrays.update(
        indices=s.host_indices, indptr=s.host_indptr, format=b"bsr", shape=src.shape,
        data=np.ascontiguousarray(data), _is_array=True,
    )
    (np.savez_compressed if compressed else np.savez)(file, **arrays)


def load_npz(file, backend: str = "cpu"):
    """Load a :class:`BlockSparseMatrix` from a BSR ``.npz`` file.

    Reads the files :func:`save_npz` writes, and the BSR files
    :func:`scipy.sparse.save_npz` writes (``bsr_array`` or ``bsr_matrix``).

    Parameters
    ----------
    file : str, os.PathLike or file-like
        The ``.npz`` file. It is read with ``allow_pickle=False``.
    backend : {"cpu", "cuda"}, optional
        Where the matrix lives (``"cuda"`` copies the arrays to the device).

    Returns
    -------
    BlockSparseMatrix
        With the stored dtype: float16, float32, float64, or bfloat16 where the file names
        it (see :func:`save_npz`).

    Raises
    ------
    ValueError
        If the file holds no sparse matrix, one of another format (CSR, COO, ...; load
        those with :func:`scipy.sparse.load_npz` and
        :meth:`BlockSparseMatrix.from_scipy`), non-square blocks, an unsupported block
        size, or an invalid layout.
    TypeError
        If the values have an unsupported dtype.

    Examples
    --------
    >>> import io, numpy as np, scipy.sparse as sp, cubsparse
    >>> S = sp.bsr_array(np.kron(np.eye(2), np.ones((16, 16))), blocksize=(16, 16))
    >>> f = io.BytesIO()
    >>> sp.save_npz(f, S)                            # written by SciPy
    >>> _ = f.seek(0)
    >>> cubsparse.load_npz(f)
    <BlockSparseMatrix 32x32, blocksize 16, 2 blocks (density 0.500), float64, cpu>
    """
    from ._matrix import BlockSparseMatrix

    backend = check_backend(backend)
    where = repr(os.fspath(file)) if isinstance(file, (str, os.PathLike)) else "the file"
    loaded = np.load(file, allow_pickle=False)
    if not isinstance(loaded, NpzFile):
        raise ValueError(
            f"{where} is a .npy array, not an .npz archive: save_npz and "
            "scipy.sparse.save_npz write .npz archives"
        )
    with loaded:
        keys = set(loaded.files)
        if "format" not in keys:
            raise ValueError(
                f"{where} holds no sparse matrix (no 'format' key; keys: "
                f"{', '.join(sorted(keys)) or 'none'}); save_npz and scipy.sparse.save_npz "
                "write one"
            )
        fmt = loaded["format"].item()
        fmt = fmt.decode("ascii") if isinstance(fmt, bytes) else str(fmt)
        if fmt != "bsr":
            raise ValueError(
                f"load_npz reads BSR matrices, but {where} holds a {fmt!r} matrix: load it "
                "with scipy.sparse.load_npz and convert it with "
                "BlockSparseMatrix.from_scipy(s, blocksize=b)"
            )
        missing = {"shape", "data", "indices", "indptr"} - keys
        if missing:
            raise ValueError(f"{where} is missing the BSR keys {sorted(missing)}")
        shape = tuple(int(n) for n in loaded["shape"])
        data = loaded["data"]
        indices, indptr = loaded["indices"], loaded["indptr"]
        stored = loaded[DTYPE_KEY].item() if DTYPE_KEY in keys else None
    if data.ndim != 3:
        raise ValueError(f"{where}: BSR data must have shape (nnzb, R, C), got {data.shape}")
    if data.shape[1] != data.shape[2]:
        raise ValueError(
            f"{where} holds blocks of {data.shape[1]}x{data.shape[2]}, but a "
            "BlockSparseMatrix has square blocks: load it with scipy.sparse.load_npz and "
            "convert it with BlockSparseMatrix.from_scipy(s, blocksize=b)"
        )
    b = data.shape[1]
    if b not in _dtypes.BLOCK_SIZES:
        raise ValueError(
            f"{where} holds blocks of {b}x{b}, but the block size must be one of "
            f"{_dtypes.BLOCK_SIZES}: load it with scipy.sparse.load_npz and re-block it with "
            "BlockSparseMatrix.from_scipy(s, blocksize=b)"
        )
    if stored is not None:
        data = _restore(data, str(stored), where)
    else:
        try:
            _dtypes.as_dtype(data.dtype)
        except TypeError as exc:
            raise TypeError(f"{where} holds values that cannot be loaded: {exc}") from None
    try:
        # Built and validated on the host, then copied to the device once (the constructor
        # would download CuPy index arrays again to validate them).
        matrix = BlockSparseMatrix((data, indices, indptr), shape=shape)
    except ValueError as exc:
        raise ValueError(f"{where} holds an invalid BSR matrix: {exc}") from None
    return matrix.to(backend)


def _restore(data: np.ndarray, dtype_name: str, where: str) -> np.ndarray:
    """The half-precision values that the file stores as float32 (see :func:`save_npz`)."""
    if dtype_name not in ("float16", "bfloat16"):
        raise ValueError(
            f"{where} names an unknown stored dtype {dtype_name!r} (key {DTYPE_KEY!r}); "
            "expected 'float16' or 'bfloat16'"
        )
    dtype = _dtypes.as_dtype(dtype_name)  # TypeError if bfloat16 lacks ml_dtypes
    if data.dtype != np.float32:
        raise ValueError(
            f"{where} stores {dtype_name} values as {data.dtype}, expected float32"
        )
    if dtype_name == "bfloat16":
        bits = np.ascontiguousarray(data).view(np.uint32)
        if not np.any(bits & 0xFFFF):
            # The high half of each float32 is the bfloat16 value (NaN payloads included).
            return (bits >> 16).astype(np.uint16).view(dtype)
    # float16 (exact for values written from float16), or float32 values that were not
    # written from bfloat16 (edited since?), which are rounded as astype rounds.
    return data.astype(dtype)
