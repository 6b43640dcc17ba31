"""The block-sparse operations: argument checks, normalisation, dispatch to a backend.

Every product is reduced to one of two backend primitives:

``dsd``
    dense = dense @ op(sparse), with op the identity or the transpose. ``X @ W`` and
    ``dY @ W.T`` map onto it directly; ``W @ D`` is computed as ``(D.T @ W.T).T``.
``sdd``
    sparse = (dense @ dense) sampled on a layout: the weight gradient ``X.T @ dY``.
"""

from __future__ import annotations

import numbers
import os

import numpy as np

from ._arrays import SparseOperand, array_module, backend_of, overlaps_itself

_IMPLS: dict = {}
_CUDA = None  # the CUDA backend module, once loaded
_CUPY_ARRAY = None  # cupy.ndarray, once the CUDA backend is loaded


def _backend_module(backend: str):
    global _CUDA, _CUPY_ARRAY
    impl = _IMPLS.get(backend)
    if impl is None:
        if backend == "cpu":
            from . import _cpu as impl
        else:
            import cupy

            from . import _cuda as impl
            _CUDA, _CUPY_ARRAY = impl, cupy.ndarray
        _IMPLS[backend] = impl
    return impl


def eager_matmul(x, w, tf32=None, out=None):
    """``x @ w`` with ``x`` a 2-D CuPy array of ``w``'s dtype and ``w`` a CUDA matrix or
    its transpose (into ``out``, a CuPy array, where given), the call a training loop makes
    most, through the CUDA backend's eager path: the checks of :func:`matmul` as a few
    comparisons, then a runner already built. None for any other call, and for any call
    :func:`matmul` must check, refuse or plan: the caller then runs :func:`matmul`."""
    if type(x) is not _CUPY_ARRAY or not isinstance(w, SparseOperand) or (
            out is not None and type(out) is not _CUPY_ARRAY):
        return None
    base = w._base
    if tf32 is None:  # a repeated call through the compiled path, where it is built
        owner = w if base is None else base
        fast = owner.__dict__.get("_fast")
        if fast is not None:
            y = fast.dsd(x, owner, base is not None, out)
            if y is not None:
                return y
    data = w._data
    if type(data) is not _CUPY_ARRAY or x.ndim != 2 or x.dtype != data.dtype:
        return None
    rows = w._structure.block_shape[0 if base is None else 1] * w._blocksize
    if x.shape[1] != rows:
        return None
    tf32 = _use_tf32(tf32, data.dtype)
    if base is None:
        return _CUDA.dsd_eager(x, w, False, tf32, out)
    return _CUDA.dsd_eager(x, base, True, tf32, out)


def _eager_sampled(a, b, like, tf32, out=None):
    """:func:`sampled_matmul` of 2-D CuPy operands into a new matrix, or into ``out``
    where it is a matrix of ``like``'s very layout, as :func:`eager_matmul`: the data of
    the result, or None."""
    t = _CUPY_ARRAY
    if type(a) is not t or type(b) is not t or not isinstance(like, SparseOperand):
        return None
    out_data = None
    if out is not None:  # (a transposed `out` goes with a transposed `like`: not here)
        if not isinstance(out, SparseOperand) or out._structure is not like._structure or (
                out._base is not None):
            return None
        out_data = out._data
        if type(out_data) is not t:
            return None
    if tf32 is None:  # a repeated call through the compiled path
        fast = like.__dict__.get("_fast")
        if fast is not None and like._base is None:
            data = fast.sdd(a, b, like, out_data)
            if data is not None:
                return data
    data = like._data
    if type(data) is not t or like._base is not None or (
            out_data is not None and out_data.dtype != data.dtype):
        return None
    dtype, sa, sb = data.dtype, a.shape, b.shape
    if len(sa) != 2 or len(sb) != 2 or a.dtype != dtype or b.dtype != dtype:
        return None
    bs, bsz = like._structure.block_shape, like._blocksize
    if sa[0] != bs[0] * bsz or sb[1] != bs[1] * bsz or sa[1] != sb[0]:
        return None
    return _CUDA.sdd_eager(a, b, like, _use_tf32(tf32, dtype), out_data)


def _check_dense(name: str, array, backend: str, dtype, sparse: str = "the sparse operand"):
    kind = backend_of(array)
    if kind is None:
        raise TypeError(f"{name} must be a NumPy or CuPy array, got {type(array).__name__}")
    if kind != backend:
        raise TypeError(
            f"{name} is a {'NumPy' if kind == 'cpu' else 'CuPy'} array but {sparse} "
            f"lives on the {backend} backend; move one with W.to({kind!r}) or "
            f"{'cupy.asarray' if backend == 'cuda' else '.get()'}"
        )
    if array.dtype != dtype:
        raise TypeError(
            f"{name} has dtype {array.dtype} but {sparse} has dtype {dtype}; "
            "convert one with astype()"
        )


def _check_scalars(alpha, beta, out):
    for name, v in (("alpha", alpha), ("beta", beta)):
        if type(v) is not float and type(v) is not int and (
                not isinstance(v, numbers.Real) or isinstance(v, bool)):
            raise TypeError(f"{name} must be a real number, got {v!r}")
    if beta != 0 and out is None:
        raise ValueError(f"beta = {beta} accumulates into out, so out must be given")


def _tf32_env() -> bool:
    """``CUPY_TF32=1``, read on every call (a script may set it at any time). The
    environment's own mapping with the key encoded once: ``os.environ.get`` costs about a
    microsecond of Python frames, a tenth of an eager call; ``os.environ`` keeps the two
    in step."""
    if _ENV_DATA is None:
        return os.environ.get("CUPY_TF32", "0") == "1"
    return _ENV_DATA.get(_TF32_KEY) == _ONE


_ENV_DATA = getattr(os.environ, "_data", None)
try:
    _TF32_KEY, _ONE = os.environ.encodekey("CUPY_TF32"), os.environ.encodevalue("1")
except AttributeError:  # another Python's os.environ: the public mapping
    _ENV_DATA = None


def _use_tf32(tf32, dtype) -> bool:
    """TF32 applies to float32 only; unset, it follows CuPy's ``CUPY_TF32=1`` convention."""
    if tf32 is None:
        return dtype.char == "f" and _tf32_env()
    if not isinstance(tf32, (bool, np.bool_)):
        raise TypeError(f"tf32 must be True, False or None, got {tf32!r}")
    return bool(tf32) and dtype.char == "f"


def _check_out(out, shape, backend, dtype):
    if out is None:
        return
    _check_dense("out", out, backend, dtype)
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"out must have shape {tuple(shape)}, got {tuple(out.shape)}")
    if overlaps_itself(out):
        raise ValueError(
            f"out's elements overlap in memory (strides {out.strides} for shape "
            f"{tuple(out.shape)}), so its results would overwrite each other; pass an array "
            "with an element of its own for each result, e.g. a new empty array"
        )


def matmul(a, b, out=None, alpha: float = 1.0, beta: float = 0.0, *, tf32: bool | None = None):
    """Product of a dense and a block-sparse matrix: ``alpha * (a @ b) + beta * out``.

    Exactly one operand is a :class:`BlockSparseMatrix` (or its transpose ``W.T``):

    ====================  ======================  ===============================
    call                  dense shape             result shape
    ====================  ======================  ===============================
    ``matmul(x, W)``      ``(..., M)``            ``(..., N)``  (layer forward)
    ``matmul(dy, W.T)``   ``(..., N)``            ``(..., M)``  (gradient of x)
    ``matmul(W, d)``      ``(N, k)`` or ``(N,)``  ``(M, k)`` or ``(M,)``
    ``matmul(W.T, d)``    ``(M, k)`` or ``(M,)``  ``(N, k)`` or ``(N,)``
    ====================  ======================  ===============================

    with ``W`` of shape ``(M, N)``. Leading batch dimensions of a left dense operand
    are kept. The operator ``@`` calls this function.

    Parameters
    ----------
    a, b : array or BlockSparseMatrix
        NumPy arrays with a CPU matrix, CuPy arrays with a CUDA matrix; same dtype.
    out : array, optional
        Written with the result (and read first when ``beta != 0``).
    alpha, beta : float, optional
        Scale of the product and of the old ``out`` (gradient accumulation).
    tf32 : bool, optional
        float32 on the CUDA backend: multiply on the tensor cores in TensorFloat-32
        (10-bit mantissa, float32 accumulation; relative error about 1e-3) instead of IEEE
        float32. Unset, it follows CuPy's convention: on when ``CUPY_TF32=1``. The CPU
        backend always computes IEEE float32; other dtypes ignore it.

    Returns
    -------
    array
        ``out`` when given, else an array that nothing else holds: new, or on the CUDA
        backend possibly the storage of an earlier result of the same call that the
        caller has dropped (no variable, view or DLPack consumer holds it any more),
        which saves the allocation.

    Examples
    --------
    >>> import numpy as np, cubsparse
    >>> W = cubsparse.BlockSparseMatrix.from_layout(
    ...     cubsparse.layouts.random(4, 2, 0.5, seed=0), 16, seed=1)
    >>> x = np.random.default_rng(2).standard_normal((5, 64), dtype=np.float32)
    >>> y = cubsparse.matmul(x, W)
    >>> y.shape, bool(np.allclose(y, x @ W.toarray(), atol=1e-5))
    ((5, 32), True)
    >>> g = np.zeros_like(y)
    >>> _ = cubsparse.matmul(x, W, out=g, beta=1.0)  # accumulate
    >>> bool(np.allclose(g, y))
    True
    """
    if type(alpha) is float and type(beta) is float and alpha == 1.0 and beta == 0.0:
        y = eager_matmul(a, b, tf32, out)
        if y is not None:
            return y
    w, dense, b_sparse, out_shape = _matmul_operands(a, b, out, alpha, beta)
    backend, dtype = backend_of(w._data), w._data.dtype
    base = w if w._base is None else w._base
    tf32 = _use_tf32(tf32, dtype)
    impl = _backend_module(backend)
    m, n = w.shape
    if b_sparse:  # dense (..., m) @ w -> (..., n)
        if dense.ndim == 2 and out is None:  # the common case, without reshapes
            return impl.dsd(dense, base, w._base is not None, None, float(alpha),
                            float(beta), tf32)
        x2 = dense.reshape(-1, m)
        out2 = None if out is None else _as_2d_view(out, n)
        if out2 is None and out is not None and beta != 0:
            out2 = out.reshape(-1, n)  # a copy holding the values to accumulate into
        res = impl.dsd(x2, base, w._base is not None, out2, float(alpha), float(beta), tf32)
        return _finish(res, out, out2, out_shape)

    # w @ dense (n, ...) : computed as (dense.T @ w.T).T
    vector = dense.ndim == 1
    d2 = dense.reshape(n, 1) if vector else dense
    out2 = None if out is None else out.reshape(m, -1).T
    res = impl.dsd(d2.T, base, w._base is None, out2, float(alpha), float(beta), tf32)
    res = res.T
    if out is not None:
        if res.base is not out and not _same_memory(res, out):
            out.reshape(m, -1)[...] = res
        return out
    return res.reshape(out_shape) if vector else array_module(backend).ascontiguousarray(res)


def _matmul_operands(a, b, out, alpha, beta):
    """Check matmul's operands: (the sparse one, the dense one, whether the sparse one is
    on the right, the result's shape)."""
    b_sparse = isinstance(b, SparseOperand)
    if isinstance(a, SparseOperand) == b_sparse:
        raise TypeError(
            "matmul needs exactly one BlockSparseMatrix and one dense array, got "
            f"{type(a).__name__} and {type(b).__name__}"
        )
    _check_scalars(alpha, beta, out)
    w, dense = (b, a) if b_sparse else (a, b)
    backend, dtype = backend_of(w._data), w._data.dtype
    _check_dense("the dense operand", dense, backend, dtype)
    m, n = w.shape
    if b_sparse:
        if dense.ndim < 1 or dense.shape[-1] != m:
            raise ValueError(
                f"matmul: the dense operand's last dimension must equal the sparse operand's "
                f"rows ({m}), got shape {tuple(dense.shape)}"
            )
        out_shape = (*dense.shape[:-1], n)
    else:
        if dense.ndim not in (1, 2) or dense.shape[0] != n:
            raise ValueError(
                f"matmul: the dense operand must have shape ({n},) or ({n}, k) to match the "
                f"sparse operand's {n} columns, got shape {tuple(dense.shape)}"
            )
        out_shape = (m,) if dense.ndim == 1 else (m, dense.shape[1])
    _check_out(out, out_shape, backend, dtype)
    return w, dense, b_sparse, out_shape


def matmul_plan(a, b, *, tf32: bool | None = None):
    """How ``matmul(a, b)`` would run: the kernel, its tiles and grid, or the dense path.

    Takes the operands :func:`matmul` takes (nothing is computed) and returns the plan the
    CUDA backend builds for them, made once per layout, rows of the dense operand and
    dtype and reused by every call. Its ``str()`` is one readable line; its fields
    (``kernel``, ``path``, ``split``, ``grid`` ...) are for tools. The CPU backend has one
    plan, NumPy.

    Examples
    --------
    >>> import numpy as np, cubsparse
    >>> W = cubsparse.BlockSparseMatrix.from_layout(np.eye(4, dtype=bool), 16)
    >>> print(cubsparse.matmul_plan(np.ones((8, 64), np.float32), W))
    X @ W, 8 rows, float32, b = 16: NumPy (CPU backend)
    """
    w, dense, b_sparse, _ = _matmul_operands(a, b, None, 1.0, 0.0)
    base = w if w._base is None else w._base
    trans = (w._base is not None) == b_sparse
    rows = int(np.prod(dense.shape[:-1])) if b_sparse else (
        1 if dense.ndim == 1 else dense.shape[1])
    if w.backend == "cpu":
        return CpuPlan(f"X @ W{'.T' if trans else ''}, {rows} rows, {w.dtype.name}, "
                       f"b = {w.blocksize}")
    return _backend_module("cuda").dsd_plan(rows, base, trans, _use_tf32(tf32, w._data.dtype))


class CpuPlan(str):
    """The CPU backend's plan: NumPy, described in one line."""

    def __new__(cls, what: str):
        return super().__new__(cls, f"{what}: NumPy (CPU backend)")


def _as_2d_view(out, cols):
    """``out`` as ``(rows, cols)`` sharing memory when possible, else None (use a temp)."""
    try:
        v = out.reshape(-1, cols)
    except (ValueError, AttributeError):
        return None
    return v if _same_memory(v, out) else None


def _same_memory(a, b) -> bool:
    """Whether two arrays start at the same address (so a result already sits in ``out``)."""
    if backend_of(a) == "cuda":
        return a.data.ptr == b.data.ptr
    return a.ctypes.data == b.ctypes.data  # works for ml_dtypes types, unlike the buffer API


def _finish(res, out, out2, out_shape):
    if out is None:
        return res.reshape(out_shape)
    if out2 is None or not _same_memory(res, out):
        out[...] = res.reshape(out_shape)
    return out


def sampled_matmul(
    a, b, like, out=None, alpha: float = 1.0, beta: float = 0.0, *, tf32: bool | None = None
):
    """``(a @ b)`` computed only on the non-zero blocks of ``like`` (SDDMM).

    This is the weight gradient of a block-sparse layer: for ``y = x @ W``,
    ``dW = sampled_matmul(x.T, dy, like=W)``. Only ``like.nnzb`` blocks are computed;
    the dense product is never formed.

    Parameters
    ----------
    a : array, shape ``(M, n)`` or ``(..., M, n)``
        Usually a transposed view such as ``x.T``; it is read in place, not copied.
        With leading dimensions (a batch of products, e.g. the time steps of a sequence
        model: ``a = x.swapaxes(-1, -2)`` for ``x`` of shape ``(T, n, M)``) the products
        are summed, ``sum_t a[t] @ b[t]``, as one product over the concatenated inner
        dimension: no loop, and no copy where ``x`` and ``b`` are contiguous (their
        leading dimensions then merge into the inner one as views).
    b : array, shape ``(n, N)`` or ``(..., n, N)``, the same leading dimensions as ``a``
    like : BlockSparseMatrix, shape ``(M, N)``
        Supplies the layout (shared with the result, not copied).
    out : BlockSparseMatrix, optional
        A matrix with ``like``'s layout whose values are overwritten, or accumulated into
        when ``beta != 0``.
    alpha, beta : float, optional
        ``result = alpha * (a @ b)[blocks] + beta * out``.
    tf32 : bool, optional
        As in :func:`matmul`: TF32 tensor cores for float32 on the CUDA backend (the
        kernel then reads ``a`` row-major and ``b`` transposed, copying where needed).

    Returns
    -------
    BlockSparseMatrix
        With ``like``'s layout and the dtype of ``a`` and ``b``.

    Examples
    --------
    >>> import numpy as np, cubsparse
    >>> W = cubsparse.BlockSparseMatrix.from_layout(
    ...     cubsparse.layouts.random(2, 4, 0.5, seed=0), 8, seed=1)
    >>> rng = np.random.default_rng(0)
    >>> x = rng.standard_normal((10, 16), dtype=np.float32)
    >>> dy = rng.standard_normal((10, 32), dtype=np.float32)
    >>> dW = cubsparse.sampled_matmul(x.T, dy, like=W)
    >>> dense = (x.T @ dy) * np.kron(W.layout, np.ones((8, 8)))
    >>> bool(np.allclose(dW.toarray(), dense, atol=1e-4))
    True

    A batch of products, summed (three time steps):

    >>> xs = rng.standard_normal((3, 10, 16), dtype=np.float32)
    >>> dys = rng.standard_normal((3, 10, 32), dtype=np.float32)
    >>> dW = cubsparse.sampled_matmul(xs.swapaxes(-1, -2), dys, like=W)
    >>> ref = sum(xs[t].T @ dys[t] for t in range(3)) * np.kron(W.layout, np.ones((8, 8)))
    >>> bool(np.allclose(dW.toarray(), ref, atol=1e-4))
    True
    """
    if type(alpha) is float and type(beta) is float and alpha == 1.0 and beta == 0.0:
        data = _eager_sampled(a, b, like, tf32, out)
        if data is not None:
            if out is not None:
                return out
            return type(like)._from_parts(data, like._structure, like._blocksize)
    base, a, b = _sampled_operands(a, b, like, out, alpha, beta)
    out_data = None if out is None else out._data
    dtype = like._data.dtype
    data = _backend_module(like.backend).sdd(a, b, base, out_data, float(alpha), float(beta),
                                             _use_tf32(tf32, dtype))
    if out is not None:
        return out
    res = type(base)._from_parts(data, base._structure, base.blocksize)
    return res if like._base is None else res.T


def _sampled_operands(a, b, like, out, alpha, beta):
    """Check sampled_matmul's operands: (the untransposed matrix, a, b), with a and b
    swapped and transposed when ``like`` is a transposed view."""
    if not isinstance(like, SparseOperand):
        raise TypeError(f"like must be a BlockSparseMatrix, got {type(like).__name__}")
    _check_scalars(alpha, beta, out)
    backend, dtype = like.backend, like._data.dtype
    for name, arr in (("a", a), ("b", b)):  # each named: the message says which is off
        _check_dense(name, arr, backend, dtype, "like")
    if a.ndim < 2 or a.ndim != b.ndim or a.shape[:-2] != b.shape[:-2]:
        raise ValueError(
            "a and b must be 2-D, or have the same leading (batch) dimensions, got shapes "
            f"{tuple(a.shape)} and {tuple(b.shape)}"
        )
    if a.ndim > 2:  # sum over the batch: the batch joins the inner dimension
        a = a.swapaxes(-1, -2).reshape(-1, a.shape[-2]).T
        b = b.reshape(-1, b.shape[-1])
    m, n = like.shape
    if a.shape[0] != m or b.shape[1] != n or a.shape[1] != b.shape[0]:
        raise ValueError(
            f"sampled_matmul: a @ b must have like's shape {(m, n)} with matching inner "
            f"dimensions, got a {tuple(a.shape)} and b {tuple(b.shape)}"
        )
    if out is not None:
        if not isinstance(out, SparseOperand):
            raise TypeError(f"out must be a BlockSparseMatrix, got {type(out).__name__}")
        if out.dtype != dtype or out.backend != backend:
            raise TypeError(
                f"out must be a {dtype} matrix on the {backend} backend, got {out.dtype} on "
                f"{out.backend}"
            )
        if (out.base is None) != (like.base is None) or not out._structure.same_as(like._structure):
            raise ValueError("out must have like's layout (and be transposed exactly when like is)")
    if like._base is not None:  # (a @ b)[blocks of W.T] == ((b.T @ a.T)[blocks of W]).T
        return like._base, b.T, a.T
    return like, a, b


def sampled_matmul_plan(a, b, like, *, tf32: bool | None = None):
    """How ``sampled_matmul(a, b, like=like)`` would run (see :func:`matmul_plan`).

    Examples
    --------
    >>> import numpy as np, cubsparse
    >>> W = cubsparse.BlockSparseMatrix.from_layout(np.eye(2, dtype=bool), 8)
    >>> x = np.ones((5, 16), np.float32)
    >>> print(cubsparse.sampled_matmul_plan(x.T, x, like=W))
    sampled A @ B, 5 inner, float32, b = 8: NumPy (CPU backend)
    """
    base, a, b = _sampled_operands(a, b, like, None, 1.0, 0.0)
    if like.backend == "cpu":
        return CpuPlan(f"sampled A @ B, {a.shape[1]} inner, {like.dtype.name}, "
                       f"b = {like.blocksize}")
    return _backend_module("cuda").sdd_plan(a, b, base, _use_tf32(tf32, like._data.dtype))
