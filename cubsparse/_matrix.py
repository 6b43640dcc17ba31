"""The public block-sparse matrix type."""

from __future__ import annotations

import weakref

import numpy as np

from . import _arith, _dtypes, _ops
from ._arrays import SparseOperand, array_module, backend_of, to_host
from ._arrays import may_share_memory as _may_share_memory
from ._index import Structure
from ._validate import (
    check_backend,
    check_shape,
    index_array,
    private_index_arrays,
    validate_structure,
)


class BlockSparseMatrix(SparseOperand):
    """A matrix of square non-zero blocks, stored like SciPy's BSR format.

    Parameters
    ----------
    arg : tuple ``(data, indices, indptr)``
        ``data`` has shape ``(nnzb, b, b)``: the non-zero blocks in row-major block
        order. ``indices[p]`` is the block column of block ``p``; the blocks of block row
        ``i`` are ``data[indptr[i]:indptr[i + 1]]``, with columns sorted and unique.
        NumPy arrays select the CPU backend, CuPy arrays the CUDA backend.
    shape : tuple of int
        ``(M, N)``, both multiples of ``b``.
    check : bool, optional
        Validate the index arrays (default), on the caller's values before they are cast
        to int32. With ``check=False`` (trusted input) the O(nnzb) validation is skipped,
        but values that do not fit in int32 are still refused, since the cast would wrap
        them silently; :meth:`check_format` validates later.

    Notes
    -----
    ``indices`` and ``indptr`` are copied (to int32, and to the host once, which for CuPy
    arrays is one synchronisation): the layout is immutable once built, and a later write
    to the caller's arrays does not reach the matrix. ``data`` is used as given when it is
    C-contiguous and has a supported dtype (no copy), so writing to it changes the
    matrix's values, as writing to ``W.data`` does.

    Block sizes 8, 16, 32, 64 and 128 and dtypes float16, bfloat16 (through
    ``ml_dtypes``), float32 and float64 are supported. Metadata is read-only; ops return
    new matrices unless ``out=`` is given. ``W.T`` is a view sharing ``W``'s values.

    A matrix does arithmetic on its stored values, keeping its dtype: ``2 * W``,
    ``W / s``, ``-W``, ``abs(W)``, ``W + V``, ``W - 0.1 * V`` and :meth:`multiply` for a
    matrix ``V`` of the same layout (the result shares the index structure), and in place
    ``W -= lr * dW``, ``W += V``, ``W *= s``, ``W /= s``, which write into the existing
    values buffer (buffers that CUDA plans or graphs hold stay valid). Adding a nonzero
    scalar (it would fill the absent blocks) or a dense array raises ``TypeError``.
    :meth:`sum` and :meth:`block_norms` reduce the values.

    Examples
    --------
    >>> import numpy as np, cubsparse
    >>> data = np.arange(2 * 8 * 8, dtype=np.float32).reshape(2, 8, 8)
    >>> W = cubsparse.BlockSparseMatrix((data, np.array([1, 0]), np.array([0, 1, 2])),
    ...                                 shape=(16, 16))
    >>> W
    <BlockSparseMatrix 16x16, blocksize 8, 2 blocks (density 0.500), float32, cpu>
    >>> W.layout
    array([[False,  True],
           [ True, False]])
    >>> x = np.ones((3, 16), dtype=np.float32)
    >>> bool(np.allclose(x @ W, x @ W.toarray()))
    True
    >>> storage = W.data
    >>> W -= 0.5 * W                                  # in place: the same values buffer
    >>> W.data is storage, float(W.data[0, 0, 1])
    (True, 0.5)
    >>> W + 1
    Traceback (most recent call last):
        ...
    TypeError: W + s with a nonzero scalar s would change every entry, including those ...
    """

    # NumPy and CuPy arrays must hand `array @ W` to W.__rmatmul__: opting out of ufuncs
    # makes their binary operators return NotImplemented (CuPy's ndarray has priority 100,
    # so a priority alone does not win against it).
    __array_ufunc__ = None
    __array_priority__ = 1000

    def __init__(self, arg, shape, *, check: bool = True):
        if isinstance(arg, BlockSparseMatrix):
            arg, shape = (arg.data, arg.indices, arg.indptr), arg.shape if shape is None else shape
        if not (isinstance(arg, tuple) and len(arg) == 3):
            raise TypeError(
                "BlockSparseMatrix expects a tuple (data, indices, indptr), "
                f"got {type(arg).__name__}; see from_dense, from_scipy and from_layout"
            )
        data, indices, indptr = arg
        backend = backend_of(data)
        if backend is None:
            raise TypeError(f"data must be a NumPy or CuPy array, got {type(data).__name__}")
        xp = array_module(backend)
        if data.ndim != 3 or data.shape[1] != data.shape[2]:
            raise ValueError(
                f"data must have shape (nnzb, b, b) with square blocks, got {data.shape}"
            )
        b = _dtypes.check_blocksize(data.shape[1])
        dtype = _dtypes.as_dtype(data.dtype)
        m, n = check_shape(shape, b)
        indices = index_array("indices", indices, backend)
        indptr = index_array("indptr", indptr, backend)
        # Validate the caller's values in their own dtype, before the cast to int32 could
        # wrap them (2**32 would become 0); then take private copies (see Structure).
        host_indices, host_indptr = to_host(indices), to_host(indptr)
        if check:
            validate_structure(host_indices, host_indptr, (m // b, n // b), data.shape[0])
        indices, host_indices = private_index_arrays("indices", indices, host_indices, xp)
        indptr, host_indptr = private_index_arrays("indptr", indptr, host_indptr, xp)
        structure = Structure(indices, indptr, (m // b, n // b), host_indices, host_indptr)
        self._init(xp.ascontiguousarray(data, dtype=dtype), structure, b)

    # -- construction without checks ---------------------------------------------------
    def _init(self, data, structure: Structure, blocksize: int, base=None):
        self._data = data
        self._structure = structure
        self._blocksize = blocksize
        self._base = base  # the matrix this one is the transpose of, or None

    @classmethod
    def _from_parts(cls, data, structure: Structure, blocksize: int) -> BlockSparseMatrix:
        """Wrap trusted parts: no validation, no copy."""
        self = cls.__new__(cls)
        self._init(data, structure, blocksize)
        return self

    @classmethod
    def from_layout(
        cls, layout, blocksize: int, dtype="float32", init="normal", seed=None,
        backend: str = "cpu",
    ) -> BlockSparseMatrix:
        """Make a matrix whose non-zero blocks are the True entries of ``layout``.

        Parameters
        ----------
        layout : array_like of bool, shape ``(M // b, N // b)``
            The block layout; see :mod:`cubsparse.layouts` for generators.
        blocksize : int
            ``b``, one of 8, 16, 32, 64, 128.
        dtype : dtype, optional
            float16, bfloat16, float32 (default) or float64.
        init : {"normal", "uniform", "zeros", "ones"} or callable, optional
            Initial values. ``"normal"`` draws N(0, 1/fan_in) with fan_in the average
            number of inputs feeding an output column, so that ``x @ W`` keeps the scale
            of ``x``; ``"uniform"`` draws U(-1, 1). A callable gets a
            ``numpy.random.Generator`` and the shape ``(nnzb, b, b)`` and returns values.
        seed : int, optional
            Seed for the values; the same seed gives the same values on every backend.
        backend : {"cpu", "cuda"}, optional

        Examples
        --------
        >>> import cubsparse
        >>> W = cubsparse.BlockSparseMatrix.from_layout(
        ...     cubsparse.layouts.banded(4, 1), 16, seed=0)
        >>> W.shape, W.nnzb
        ((64, 64), 10)
        """
        backend = check_backend(backend)
        layout = _as_layout(layout)
        b = _dtypes.check_blocksize(blocksize)
        dtype = _dtypes.as_dtype(dtype)
        rows, cols = np.nonzero(layout)
        nnzb = rows.shape[0]
        indptr = np.zeros(layout.shape[0] + 1, dtype=np.int32)
        np.cumsum(np.count_nonzero(layout, axis=1), out=indptr[1:])
        rng = np.random.default_rng(seed)
        shape3 = (nnzb, b, b)
        if callable(init):
            values = np.asarray(init(rng, shape3))
            if values.shape != shape3:
                raise ValueError(f"init returned shape {values.shape}, expected {shape3}")
        elif init == "normal":
            fan_in = max(1.0, nnzb * b / max(layout.shape[1], 1))
            values = rng.standard_normal(shape3, dtype=np.float32) / np.float32(np.sqrt(fan_in))
        elif init == "uniform":
            values = rng.uniform(-1.0, 1.0, size=shape3).astype(np.float32)
        elif init == "zeros":
            values = np.zeros(shape3, dtype=np.float32)
        elif init == "ones":
            values = np.ones(shape3, dtype=np.float32)
        else:
            raise ValueError(
                f"init must be 'normal', 'uniform', 'zeros', 'ones' or a callable, got {init!r}"
            )
        xp = array_module(backend)
        values = xp.asarray(values.astype(dtype, copy=False))
        indices = cols.astype(np.int32)
        structure = Structure(
            xp.asarray(indices), xp.asarray(indptr), layout.shape, indices, indptr
        )
        return cls._from_parts(values, structure, b)

    @classmethod
    def from_dense(cls, a, blocksize: int, layout=None) -> BlockSparseMatrix:
        """Cut a dense 2-D NumPy or CuPy array into blocks.

        Parameters
        ----------
        a : numpy.ndarray or cupy.ndarray, shape ``(M, N)``
        blocksize : int
        layout : array_like of bool, optional
            Blocks to keep. By default every block holding a non-zero is kept (for a CuPy
            array, finding them costs one synchronisation). Values outside ``layout`` are
            dropped: pass it only when that is what you want.

        Examples
        --------
        >>> import numpy as np, cubsparse
        >>> a = np.zeros((32, 32), dtype=np.float32); a[:16, 16:] = 1
        >>> W = cubsparse.BlockSparseMatrix.from_dense(a, 16)
        >>> W.nnzb, bool((W.toarray() == a).all())
        (1, True)
        """
        backend = backend_of(a)
        if backend is None:
            raise TypeError(f"a must be a NumPy or CuPy array, got {type(a).__name__}")
        if a.ndim != 2:
            raise ValueError(f"a must be 2-D, got {a.ndim}-D with shape {a.shape}")
        b = _dtypes.check_blocksize(blocksize)
        dtype = _dtypes.as_dtype(a.dtype)
        m, n = a.shape
        if m % b or n % b:
            raise ValueError(f"the shape of a must be a multiple of blocksize {b}, got {a.shape}")
        blocks = a.reshape(m // b, b, n // b, b).transpose(0, 2, 1, 3)
        if layout is None:
            layout = to_host((blocks != 0).any(axis=(2, 3)))
        else:
            layout = _as_layout(layout)
            if layout.shape != (m // b, n // b):
                raise ValueError(
                    f"layout must have shape {(m // b, n // b)} for a of shape {a.shape} and "
                    f"blocksize {b}, got {layout.shape}"
                )
        xp = array_module(backend)
        rows, cols = np.nonzero(layout)
        indptr = np.zeros(layout.shape[0] + 1, dtype=np.int32)
        np.cumsum(np.count_nonzero(layout, axis=1), out=indptr[1:])
        indices = cols.astype(np.int32)
        data = xp.ascontiguousarray(blocks[xp.asarray(rows), xp.asarray(indices)], dtype=dtype)
        structure = Structure(
            xp.asarray(indices), xp.asarray(indptr), layout.shape, indices, indptr
        )
        return cls._from_parts(data, structure, b)

    @classmethod
    def from_scipy(
        cls, s, blocksize: int | None = None, backend: str = "cpu"
    ) -> BlockSparseMatrix:
        """Convert a SciPy sparse matrix or array.

        Parameters
        ----------
        s : scipy.sparse matrix or array
            Any format; a BSR input with square blocks keeps its blocks (explicit zero
            blocks included, so nothing is dropped). Duplicates are summed.
        blocksize : int, optional
            Required unless ``s`` is BSR with square blocks.
        backend : {"cpu", "cuda"}, optional

        Examples
        --------
        >>> import scipy.sparse as sp, cubsparse
        >>> s = sp.random(64, 32, density=0.1, format="csr", random_state=0, dtype="float32")
        >>> W = cubsparse.BlockSparseMatrix.from_scipy(s, blocksize=16)
        >>> bool(abs(W.to_scipy() - s).max() == 0)
        True
        """
        import scipy.sparse as sp

        if not sp.issparse(s):
            raise TypeError(f"s must be a scipy.sparse matrix or array, got {type(s).__name__}")
        backend = check_backend(backend)
        if blocksize is None:
            if s.format != "bsr" or s.blocksize[0] != s.blocksize[1]:
                raise ValueError(
                    f"blocksize is required for a {s.format} input (or BSR with non-square "
                    "blocks)"
                )
            blocksize = s.blocksize[0]
        b = _dtypes.check_blocksize(blocksize)
        dtype = _dtypes.as_dtype(s.dtype)
        m, n = s.shape
        if m % b or n % b:
            raise ValueError(f"the shape of s must be a multiple of blocksize {b}, got {s.shape}")
        if s.format == "bsr" and s.blocksize == (b, b):
            s = s.copy()
        else:
            s = sp.bsr_array(s.tocsr(), blocksize=(b, b))
        s.sum_duplicates()  # also sorts the indices
        xp = array_module(backend)
        indices = s.indices.astype(np.int32)
        indptr = s.indptr.astype(np.int32)
        structure = Structure(
            xp.asarray(indices), xp.asarray(indptr), (m // b, n // b), indices, indptr
        )
        return cls._from_parts(xp.asarray(np.ascontiguousarray(s.data, dtype=dtype)), structure, b)

    # -- read-only metadata -------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        """``(M, N)``, the dense shape."""
        r, c = self._blocks_shape()
        return (r * self._blocksize, c * self._blocksize)

    @property
    def ndim(self) -> int:
        """Always 2."""
        return 2

    @property
    def blocksize(self) -> int:
        """``b``: blocks are ``b x b``."""
        return self._blocksize

    @property
    def nnzb(self) -> int:
        """Number of stored blocks."""
        return self._structure.nnzb

    @property
    def nnz(self) -> int:
        """Stored values, ``nnzb * b * b`` (explicit zeros inside blocks count)."""
        return self.nnzb * self._blocksize**2

    @property
    def density(self) -> float:
        """Fraction of blocks that are stored."""
        r, c = self._structure.block_shape
        return self.nnzb / (r * c) if r * c else 0.0

    @property
    def dtype(self) -> np.dtype:
        """The values' dtype."""
        return self._data.dtype

    @property
    def backend(self) -> str:
        """``"cpu"`` (NumPy values) or ``"cuda"`` (CuPy values)."""
        return backend_of(self._data)

    @property
    def layout(self) -> np.ndarray:
        """Read-only NumPy bool array of shape ``(M // b, N // b)``."""
        layout = self._structure.cached("layout", self._structure.layout)
        return layout if self._base is None else layout.T

    @property
    def data(self):
        """The blocks, shape ``(nnzb, b, b)``; assignable, the storage is kept.

        ``W.data`` is the matrix's own storage: writing into it (``W.data[...] = v``,
        ``W.data -= lr * g``) changes ``W``. Assigning ``W.data = v`` requires an array of
        exactly ``W.data``'s shape, dtype and backend (else ``ValueError``/``TypeError``,
        raised before anything changes) and copies ``v`` into the existing storage, so that
        buffers that kernels or captured CUDA graphs hold stay valid; assigning the storage
        itself, as the augmented assignment ``W.data -= ...`` does after updating it in
        place, is a no-op.

        For a transposed view this is a new array holding the transposed blocks in the
        transpose's order (the view itself stores nothing), so it cannot be assigned
        (``AttributeError``): use ``W.T.base.data`` or the base matrix for the shared
        values.

        Examples
        --------
        >>> import numpy as np, cubsparse
        >>> W = cubsparse.BlockSparseMatrix.from_layout(np.eye(2, dtype=bool), 8, init="ones")
        >>> storage = W.data
        >>> W.data -= 0.1 * W.data                     # an SGD-style step, in place
        >>> W.data[0, 0, 0], W.data is storage
        (np.float32(0.9), True)
        >>> W.data = np.zeros_like(storage)            # copied into the same storage
        >>> float(storage.sum()), W.data is storage
        (0.0, True)
        >>> W.T.data -= 1.0
        Traceback (most recent call last):
            ...
        AttributeError: a transposed view stores no values: ... assign to W.T.base.data ...
        """
        if self._base is None:
            return self._data
        return self._data[self._perm_device()].transpose(0, 2, 1)

    @data.setter
    def data(self, value):
        if self._base is not None:
            raise AttributeError(
                "a transposed view stores no values: W.T.data is a new array, so assigning "
                "to it would change nothing; assign to W.T.base.data (the base matrix's "
                "values, in their own order and orientation) instead"
            )
        storage = self._data
        if value is storage:
            # `W.data -= g` already updated the storage in place; Python then assigns the
            # result back to the attribute.
            return
        kind = "NumPy" if self.backend == "cpu" else "CuPy"
        if backend_of(value) != self.backend:
            raise TypeError(
                f"W.data must be assigned a {kind} array (the matrix is on the {self.backend} "
                f"backend), got {type(value).__name__}"
            )
        if tuple(value.shape) != storage.shape:
            raise ValueError(
                f"W.data must be assigned an array of shape {storage.shape} (nnzb, b, b), "
                f"got shape {tuple(value.shape)}"
            )
        if value.dtype != storage.dtype:
            raise TypeError(
                f"W.data must be assigned an array of dtype {storage.dtype}, got dtype "
                f"{value.dtype}; cast it first, or use astype() for a matrix of another dtype"
            )
        if self.backend == "cuda":
            if value.device.id != storage.device.id:
                raise ValueError(
                    f"W.data must be assigned an array on the matrix's device "
                    f"{storage.device.id}, got one on device {value.device.id}"
                )
            # NumPy copes with a source that overlaps the destination (W.data = W.data[::-1]);
            # CuPy's element-wise copy does not promise to, so such a source is copied first.
            if _may_share_memory(value, storage):
                value = value.copy()
        storage[...] = value

    @property
    def indices(self):
        """Block column index of each block, int32, shape ``(nnzb,)``; never writable.

        The layout is immutable once built. On the CPU backend this is a read-only NumPy
        array; on the CUDA backend a new CuPy array on every access (CuPy arrays cannot
        be made read-only), so writing to it cannot change the matrix either.
        """
        s = self._structure if self._base is None else self._structure.transposed()
        return s.indices if self.backend == "cpu" else s.indices.copy()

    @property
    def indptr(self):
        """Block row pointers, int32, shape ``(M // b + 1,)``; never writable.

        Read-only NumPy array on the CPU backend, a new CuPy array on every access on the
        CUDA backend, as for :attr:`indices`.
        """
        s = self._structure if self._base is None else self._structure.transposed()
        return s.indptr if self.backend == "cpu" else s.indptr.copy()

    @property
    def base(self) -> BlockSparseMatrix | None:
        """For a transposed view, the matrix it is the transpose of; otherwise None."""
        return self._base

    @property
    def T(self) -> BlockSparseMatrix:
        """The transpose, a view sharing this matrix's values (no copy).

        In-place arithmetic on the view (``W.T -= G.T``) writes into this matrix's values.
        """
        if self._base is not None:
            return self._base
        ref = self.__dict__.get("_transposed")
        view = ref() if ref is not None else None
        if view is None:
            view = BlockSparseMatrix.__new__(BlockSparseMatrix)
            # The view keeps the untransposed storage; ops read it through the transpose
            # index. It is cached by weak reference: while a script holds it, `W.T` returns
            # the same object, and W and its view never keep each other alive.
            view._init(self._data, self._structure, self._blocksize, base=self)
            self._transposed = weakref.ref(view)
        return view

    @T.setter
    def T(self, value):
        # `W.T -= g` updates the view in place (into W's values), then Python assigns the
        # result back to the attribute: accept that, refuse anything else.
        if value is not self.T:
            raise AttributeError(
                "W.T is a view and cannot be assigned; update it in place (W.T -= G.T) or "
                "assign to W.data"
            )

    def _perm_device(self):
        """For a view: the storage position of each of its blocks, on the backend."""
        return self._structure.transposed().cached(
            "perm_device", lambda: array_module(self.backend).asarray(self._structure.transpose[0])
        )

    def _blocks_shape(self):
        r, c = self._structure.block_shape
        return (c, r) if self._base is not None else (r, c)

    # -- conversions ----------------------------------------------------------------------
    def toarray(self):
        """Dense copy, in the same array module (NumPy or CuPy).

        Examples
        --------
        >>> import numpy as np, cubsparse
        >>> W = cubsparse.BlockSparseMatrix.from_layout(np.eye(2, dtype=bool), 8, init="ones")
        >>> W.toarray().sum()
        np.float32(128.0)
        """
        xp = array_module(self.backend)
        s = self._structure
        r, c = s.block_shape
        b = self._blocksize
        dense = xp.zeros((r, c, b, b), dtype=self.dtype)
        rows = s.cached("rows_device", lambda: xp.asarray(s.rows))
        dense[rows, s.indices] = self._data
        dense = dense.transpose(0, 2, 1, 3).reshape(r * b, c * b)
        return dense.T.copy() if self._base is not None else dense

    def to_scipy(self):
        """A ``scipy.sparse.bsr_array`` on the host.

        float16 and bfloat16 values are upcast to float32 (exactly), since SciPy's sparse
        routines do not compute in half precision. A transposed view is materialised.
        """
        import scipy.sparse as sp

        src = self if self._base is None else self._materialized()
        data = to_host(src._data)
        if _dtypes.is_half(data.dtype):
            data = data.astype(np.float32)
        s = src._structure
        return sp.bsr_array(
            (data, s.host_indices.copy(), s.host_indptr.copy()), shape=src.shape,
            blocksize=(self._blocksize, self._blocksize),
        )

    def _materialized(self) -> BlockSparseMatrix:
        """A transposed view as a matrix of its own (copies the values)."""
        if self._base is None:
            return self
        return BlockSparseMatrix._from_parts(
            array_module(self.backend).ascontiguousarray(self.data),
            self._structure.transposed(), self._blocksize,
        )

    def astype(self, dtype, copy: bool = True) -> BlockSparseMatrix:
        """The same matrix with values cast to ``dtype`` (layout shared, not copied)."""
        dtype = _dtypes.as_dtype(dtype)
        if dtype == self.dtype and not copy:
            return self
        out = BlockSparseMatrix._from_parts(
            self._data.astype(dtype), self._structure, self._blocksize
        )
        return out if self._base is None else out.T

    def copy(self) -> BlockSparseMatrix:
        """A copy of the values; the (immutable) layout is shared."""
        return self.astype(self.dtype, copy=True)

    def to(self, backend: str) -> BlockSparseMatrix:
        """A copy on ``backend`` (``"cpu"`` or ``"cuda"``); ``self`` if already there."""
        backend = check_backend(backend)
        if backend == self.backend:
            return self
        src = self if self._base is None else self._base
        s = src._structure
        xp = array_module(backend)
        host_data = to_host(src._data)
        structure = Structure(
            xp.asarray(s.host_indices), xp.asarray(s.host_indptr), s.block_shape,
            s.host_indices, s.host_indptr,
        )
        out = BlockSparseMatrix._from_parts(xp.asarray(host_data), structure, self._blocksize)
        return out if self._base is None else out.T

    def check_format(self, full: bool = True) -> None:
        """Re-validate the index arrays (O(nnzb) when ``full``); raises ``ValueError``.

        Validates the host copies the index tables are built from and, on the CUDA
        backend, checks that the device copies the kernels read still equal them (one
        synchronisation). Useful after ``check=False`` construction: the layout cannot be
        changed through the public API afterwards.
        """
        s = self._structure
        if full:
            validate_structure(s.host_indices, s.host_indptr, s.block_shape, self._data.shape[0])
            for name, dev, host in (("indices", s.indices, s.host_indices),
                                    ("indptr", s.indptr, s.host_indptr)):
                if dev is not host and not np.array_equal(to_host(dev), host):
                    raise ValueError(
                        f"the device copy of {name} differs from its host copy: the layout "
                        "was overwritten in device memory (it is immutable once built)"
                    )

    # -- arithmetic on the stored values (implemented in _arith) ------------------------
    # Scalars: Python and NumPy real numbers (and 0-d arrays of the matrix's backend); the
    # result keeps W's dtype. Matrices: the same backend, dtype, shape and layout. The
    # results share W's index structure; the in-place forms write into W's storage.
    def __add__(self, other):
        return _arith.add(self, other)

    def __radd__(self, other):
        return _arith.add(self, other, reflected=True)

    def __sub__(self, other):
        return _arith.subtract(self, other)

    def __rsub__(self, other):
        return _arith.subtract(self, other, reflected=True)

    def __mul__(self, other):
        return _arith.scale(self, other)

    def __rmul__(self, other):
        return _arith.scale(self, other, reflected=True)

    def __truediv__(self, other):
        return _arith.divide(self, other)

    def __rtruediv__(self, other):
        return _arith.divide(self, other, reflected=True)

    def __neg__(self):
        return _arith.negative(self)

    def __pos__(self):
        return _arith.positive(self)

    def __abs__(self):
        return _arith.absolute(self)

    def __iadd__(self, other):
        return _arith.iadd(self, other)

    def __isub__(self, other):
        return _arith.isub(self, other)

    def __imul__(self, other):
        return _arith.imul(self, other)

    def __itruediv__(self, other):
        return _arith.itruediv(self, other)

    def multiply(self, other) -> BlockSparseMatrix:
        """Elementwise product with a matrix of the same layout, or with a scalar.

        Parameters
        ----------
        other : BlockSparseMatrix or real scalar
            A matrix of the same backend, dtype, shape and layout (the same structure,
            or an equal one), or a real number (then the same as ``self * other``).

        Returns
        -------
        BlockSparseMatrix
            A new matrix sharing this one's index structure, with this one's dtype.

        Raises
        ------
        TypeError
            For a dense array (``W.toarray() * x`` is the dense product), another backend
            or another dtype.
        ValueError
            For another shape or layout.

        Notes
        -----
        ``W * V`` between two matrices is refused (it is elementwise for NumPy arrays but
        a matrix product for ``scipy.sparse`` matrices); this method names the product.

        Examples
        --------
        >>> import numpy as np, cubsparse
        >>> W = cubsparse.BlockSparseMatrix.from_layout(np.eye(2, dtype=bool), 8, init="ones")
        >>> V = 3 * W
        >>> P = W.multiply(V - W)                  # same layout: elementwise
        >>> float(P.data[0, 0, 0]), P.layout is W.layout
        (2.0, True)
        >>> W.multiply(np.ones((16, 16), dtype=np.float32))
        Traceback (most recent call last):
            ...
        TypeError: W.multiply(V) needs V to be a BlockSparseMatrix with W's layout ...
        """
        return _arith.multiply(self, other)

    def sum(self):
        """The sum of the stored values, as a 0-d array of the matrix's backend.

        float16 and bfloat16 values are accumulated in float32 and the result is float32
        (a float16 sum overflows at 65504); float32 and float64 return their own dtype.
        A transposed view sums to the same value as its base. On the CUDA backend the
        result stays on the device (a 0-d CuPy array; ``float()`` reads it).

        Examples
        --------
        >>> import numpy as np, cubsparse
        >>> W = cubsparse.BlockSparseMatrix.from_layout(np.eye(2, dtype=bool), 8, init="ones",
        ...                                             dtype="float16")
        >>> W.sum()
        array(128., dtype=float32)
        >>> float((2 * W.T).sum())
        256.0
        """
        return _arith.total(self)

    def block_norms(self, ord="fro"):
        """The norm of each stored block, shape ``(nnzb,)``: for pruning and regrowth.

        Parameters
        ----------
        ord : {"fro"}, optional
            The Frobenius norm, ``sqrt(sum(block ** 2))`` (the only one supported).

        Returns
        -------
        array
            A NumPy or CuPy array (the matrix's backend), in the block order of
            :attr:`data` (for a transposed view, the view's order); float32 for float16
            and bfloat16 matrices (the squares are summed in float32), else the matrix's
            dtype.

        Examples
        --------
        >>> import numpy as np, cubsparse
        >>> W = cubsparse.BlockSparseMatrix.from_layout(np.eye(2, dtype=bool), 8, init="ones")
        >>> W.data[1] *= 2
        >>> W.block_norms()
        array([ 8., 16.], dtype=float32)
        >>> np.flatnonzero(W.block_norms() < 10)     # the blocks a pruning step would drop
        array([0])
        """
        return _arith.block_norms(self, ord)

    # -- protocols --------------------------------------------------------------------------
    def __array__(self, dtype=None, copy=None):
        raise TypeError(
            "a BlockSparseMatrix is not densified implicitly; call .toarray() for a dense copy"
        )

    def __matmul__(self, other):
        if isinstance(other, SparseOperand) or backend_of(other) is None:
            return NotImplemented
        return _ops.matmul(self, other)

    def __rmatmul__(self, other):
        y = _ops.eager_matmul(other, self)
        if y is not None:
            return y
        if backend_of(other) is None:
            return NotImplemented
        return _ops.matmul(other, self)

    def __len__(self):
        return self.shape[0]

    def __repr__(self) -> str:
        m, n = self.shape
        t = ", transposed view" if self._base is not None else ""
        return (
            f"<BlockSparseMatrix {m}x{n}, blocksize {self._blocksize}, {self.nnzb} blocks "
            f"(density {self.density:.3f}), {self.dtype.name}, {self.backend}{t}>"
        )


def _as_layout(layout) -> np.ndarray:
    if backend_of(layout) == "cuda":
        layout = layout.get()
    layout = np.asarray(layout)
    if layout.ndim != 2:
        raise ValueError(
            f"layout must be a 2-D array of bools, got {layout.ndim}-D shape {layout.shape}"
        )
    if layout.dtype != bool:
        if layout.dtype.kind not in "iu" or not np.isin(layout, (0, 1)).all():
            raise TypeError(f"layout must hold bools (or 0/1 integers), got dtype {layout.dtype}")
        layout = layout.astype(bool)
    return layout
