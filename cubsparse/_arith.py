"""Arithmetic on the stored values of block-sparse matrices.

The operators of :class:`~cubsparse.BlockSparseMatrix` (``W + V``, ``2 * W``, ``W -= g``,
``abs(W)``, ...) are thin methods that call the functions here. Every operation works on
the values only (``W._data``, shape ``(nnzb, b, b)``) with the backend's own elementwise
functions (NumPy or CuPy: nothing leaves the device), and the result shares the operand's
index :class:`~cubsparse._index.Structure`, so no index array is copied or rebuilt.

Only operations that map stored values to stored values are offered: a scalar sum
``W + 1`` would fill the blocks W does not store (the result would be dense), and a
division by a matrix would divide by their zeros, so both raise ``TypeError`` saying so.

Rules shared by every function:

* The result has W's dtype. Scalars never promote (as NumPy treats Python scalars): the
  value is computed by the backend and rounded to W's dtype.
* Two matrices must have the same backend, dtype, shape and layout (the same
  ``Structure`` object, or one that :meth:`~cubsparse._index.Structure.same_as` finds
  equal); the error names what each operand has.
* A transposed view stores nothing: an operation on ``W.T`` runs on W's storage (the other
  operand is brought into W's orientation and block order) and returns the transpose of
  that result, and an in-place operation on ``W.T`` writes into W's values.

This module must not import :mod:`cubsparse._matrix` (which imports it): results are made
with ``type(w)._from_parts``.
"""

from __future__ import annotations

import numbers

import numpy as np

from . import _dtypes
from ._arrays import SparseOperand, array_module, backend_of, may_share_memory

# -- helpers ---------------------------------------------------------------------------------


def _is_real_dtype(dtype) -> bool:
    # ml_dtypes' bfloat16 has kind "V", so the supported dtypes are listed as well.
    return dtype.kind in "iuf" or dtype in _dtypes.SUPPORTED_DTYPES


def _scalar(w, s, expr: str):
    """``s`` as a scalar operand for ``w``'s values, or None when ``s`` is no scalar.

    Host scalars (Python and NumPy numbers, 0-d NumPy arrays) become Python ``int`` or
    ``float``, which the backends treat as weak (they take the array's dtype). A 0-d CuPy
    array on a CUDA matrix's backend stays on the device (reading it would synchronise);
    an ``out=`` of W's dtype keeps it from promoting the result.
    """
    t = type(s)
    if t is float or t is int:  # the common case first: this runs in every training step
        return s
    if isinstance(s, (bool, np.bool_)):
        raise TypeError(f"{expr} needs a real number, got the bool {s!r}")
    if isinstance(s, numbers.Integral):
        return int(s)
    if isinstance(s, numbers.Real):
        return float(s)
    if isinstance(s, numbers.Complex):
        raise TypeError(f"{expr} needs a real number, got the complex number {s!r}")
    if isinstance(s, np.generic):  # ml_dtypes' scalars are not registered as numbers.Real
        if _is_real_dtype(s.dtype):
            return float(s)
        raise TypeError(f"{expr} needs a real number, got a {s.dtype} scalar")
    kind = backend_of(s)
    if kind is None or s.ndim != 0:
        return None
    if not _is_real_dtype(s.dtype) or s.dtype.kind == "b":
        raise TypeError(f"{expr} needs a real number, got a 0-d array of dtype {s.dtype}")
    if kind == "cpu":
        return int(s) if s.dtype.kind in "iu" else float(s)
    if kind != w.backend:
        raise TypeError(
            f"{expr}: s is a 0-d CuPy array but the matrix lives on the {w.backend} backend; "
            "pass a Python number (float(s)) or move the matrix with .to('cuda')"
        )
    return s


def _is_zero(s) -> bool:
    """True for a host scalar equal to 0; a device scalar is never read (no sync)."""
    return type(s) in (int, float) and s == 0


def _operand_kind(v) -> str:
    """A short description of an operand for error messages."""
    if isinstance(v, SparseOperand):
        return f"a BlockSparseMatrix of shape {v.shape}"
    kind = backend_of(v)
    if kind is not None:
        module = "numpy" if kind == "cpu" else "cupy"
        return f"a {module}.ndarray of shape {tuple(v.shape)} and dtype {v.dtype}"
    if hasattr(v, "shape"):
        return f"a {type(v).__module__}.{type(v).__name__} of shape {tuple(v.shape)}"
    return f"a {type(v).__name__}"


def _is_array_like(v) -> bool:
    """Operands that get a clear error rather than ``NotImplemented``: arrays, sparse
    matrices of other libraries, anything with a shape."""
    return backend_of(v) is not None or hasattr(v, "shape")


def _describe(m) -> str:
    rows, cols = m.shape
    b = m.blocksize
    view = ", a transposed view" if m._base is not None else ""
    return f"{rows}x{cols} with {m.nnzb} blocks of {b}x{b}{view}"


def _effective_structure(m):
    """The structure of ``m`` as it reads (a view reads its base's transposed)."""
    return m._structure if m._base is None else m._structure.transposed()


def _check_pair(expr: str, w, v):
    """Check that ``v`` is a matrix of ``w``'s backend, dtype, shape and layout.

    Returns ``v``'s values in the order and orientation of ``w``'s storage (``w._data``):
    ``v``'s own storage when it is laid out like w's (no copy), else a gathered copy.
    """
    if v.backend != w.backend:
        raise TypeError(
            f"{expr} needs both matrices on one backend: W is on {w.backend}, V is on "
            f"{v.backend}; move one with .to({w.backend!r})"
        )
    if v.dtype != w.dtype:
        raise TypeError(
            f"{expr} needs both matrices of one dtype: W is {w.dtype.name}, V is "
            f"{v.dtype.name}; convert one with astype()"
        )
    if v.shape != w.shape:
        raise ValueError(
            f"{expr} needs the same shape: W is {w.shape[0]}x{w.shape[1]}, V is "
            f"{v.shape[0]}x{v.shape[1]}"
        )
    # Bring V into the orientation of W's storage: for a view W = B.T, V pairs with B
    # as V.T.
    o = v if w._base is None else v.T
    mine = w._structure
    theirs = _effective_structure(o)
    if theirs is not mine and (v.blocksize != w.blocksize or not mine.same_as(theirs)):
        detail = ""
        if v.blocksize == w.blocksize and v.nnzb == w.nnzb:
            moved = int(np.count_nonzero(w.layout != v.layout))
            detail = f" ({moved} block positions differ)"
        raise ValueError(
            f"{expr} needs the same layout: W is {_describe(w)}, V is {_describe(v)}{detail}"
        )
    # `o.data` is o's storage itself unless o is a view, which gathers its blocks.
    return o.data


def _wrap(w, data):
    """A matrix holding ``data`` (in ``w``'s storage order) with ``w``'s orientation."""
    out = type(w)._from_parts(data, w._structure, w._blocksize)
    return out if w._base is None else out.T


def _apply(w, ufunc: str, *operands):
    """A matrix of ``w``'s layout holding ``ufunc(w's values, *operands)``.

    The result goes to an explicit ``out=`` of W's dtype: NumPy promotes a bfloat16 array
    times a Python float to float32, and a 0-d device scalar may promote under CuPy's rules.
    """
    xp = array_module(w.backend)
    out = xp.empty_like(w._data)
    getattr(xp, ufunc)(w._data, *operands, out=out)
    return _wrap(w, out)


def _no_overlap(w, values):
    """``values`` or a copy of it that does not partially overlap ``w``'s storage.

    NumPy copes with overlapping operands; CuPy's elementwise kernels do not promise to.
    The identical array (``W += W``) is safe: each element is read before it is written.
    """
    if values is w._data or w.backend == "cpu":
        return values
    return values.copy() if may_share_memory(values, w._data) else values


# -- scalar-sum errors ---------------------------------------------------------------------


def _dense_sum_error(expr: str) -> TypeError:
    return TypeError(
        f"{expr} with a nonzero scalar s would change every entry, including those of the "
        "blocks the matrix does not store, so the result would be dense: add to the stored "
        "values with W.data[...] += s (a transposed view: W.base.data), or densify with "
        "W.toarray()"
    )


def _array_operand_error(expr: str, v, hint: str) -> TypeError:
    return TypeError(f"{expr} needs V to be {hint}; got {_operand_kind(v)}")


_MATRIX_HINT = "a BlockSparseMatrix with W's layout"


# -- binary operations ---------------------------------------------------------------------


def add(w, v, *, reflected: bool = False):
    """``W + V`` (or ``V + W``) for a matrix ``V`` of W's layout; ``W + 0`` is a copy.

    Adding 0 is allowed (as SciPy does) so that Python's ``sum(matrices)``, which starts
    from 0, works.
    """
    return _add_or_subtract(w, v, "+", reflected)


def subtract(w, v, *, reflected: bool = False):
    """``W - V`` (or ``V - W`` when ``reflected``); ``W - 0`` and ``0 - W`` are allowed."""
    return _add_or_subtract(w, v, "-", reflected)


def _add_or_subtract(w, v, op: str, reflected: bool):
    if isinstance(v, SparseOperand):
        values = _check_pair(f"W {op} V", w, v)
        return _apply(w, "add" if op == "+" else "subtract", values)
    expr = f"s {op} W" if reflected else f"W {op} s"
    s = _scalar(w, v, expr)
    if s is not None:
        if not _is_zero(s):
            raise _dense_sum_error(expr)
        return negative(w) if reflected and op == "-" else positive(w)
    if _is_array_like(v):
        expr = f"V {op} W" if reflected else f"W {op} V"
        dense = f"V {op} W.toarray()" if reflected else f"W.toarray() {op} V"
        raise _array_operand_error(expr, v, f"{_MATRIX_HINT} (for a dense result: {dense})")
    return NotImplemented


def scale(w, s, *, reflected: bool = False):
    """``W * s`` or ``s * W`` for a real scalar ``s``.

    Two matrices are refused: ``*`` is the elementwise product for NumPy arrays but the
    matrix product for ``scipy.sparse`` matrices, so the product is named explicitly
    (:func:`multiply`, or ``@`` with a dense operand).
    """
    expr = "s * W" if reflected else "W * s"
    value = _scalar(w, s, expr)
    if value is not None:
        return _apply(w, "multiply", value)
    if isinstance(s, SparseOperand):
        raise TypeError(
            "W * V between two matrices is ambiguous (elementwise for NumPy arrays, a matrix "
            "product for scipy.sparse matrices): use W.multiply(V) for the elementwise "
            "product of two matrices of one layout"
        )
    if _is_array_like(s):
        raise TypeError(
            f"{expr} takes a real scalar s; got {_operand_kind(s)}: use W.multiply(V) for "
            "the elementwise product with a matrix of W's layout, or W.toarray() * x for a "
            "dense one"
        )
    return NotImplemented


def multiply(w, v):
    """``W.multiply(V)``: elementwise product with a matrix of W's layout, or a scalar."""
    if isinstance(v, SparseOperand):
        values = _check_pair("W.multiply(V)", w, v)
        return _apply(w, "multiply", values)
    s = _scalar(w, v, "W.multiply(s)")
    if s is not None:
        return scale(w, s)
    raise _array_operand_error(
        "W.multiply(V)", v,
        f"{_MATRIX_HINT} or a real scalar (for a dense operand: W.toarray() * V)",
    )


def divide(w, s, *, reflected: bool = False):
    """``W / s`` for a real scalar ``s``; ``s / W`` and ``W / V`` raise ``TypeError``."""
    if reflected:
        if _scalar(w, s, "s / W") is not None or _is_array_like(s):
            raise TypeError(
                "s / W would divide by the zeros of the blocks the matrix does not store; "
                "divide the stored values explicitly (W.data) or densify with W.toarray()"
            )
        return NotImplemented
    value = _scalar(w, s, "W / s")
    if value is not None:
        return _apply(w, "true_divide", value)
    if isinstance(s, SparseOperand):
        raise TypeError(
            "W / V would divide by the zeros of the blocks V does not store; divide the "
            "values of two matrices of one layout with W.data / V.data"
        )
    if _is_array_like(s):
        raise TypeError(f"W / s takes a real scalar s; got {_operand_kind(s)}")
    return NotImplemented


# -- unary operations ------------------------------------------------------------------------


def negative(w):
    """``-W``."""
    return _apply(w, "negative")


def positive(w):
    """``+W``: a copy, as NumPy's unary plus returns one."""
    return _wrap(w, w._data.copy())


def absolute(w):
    """``abs(W)``."""
    return _apply(w, "absolute")


# -- in-place operations ---------------------------------------------------------------------


def iadd(w, v):
    """``W += V`` (or ``W += 0``): written into W's storage; returns ``w``."""
    return _iadd_or_isub(w, v, "+")


def isub(w, v):
    """``W -= V`` (or ``W -= 0``): written into W's storage; returns ``w``."""
    return _iadd_or_isub(w, v, "-")


def _iadd_or_isub(w, v, op: str):
    xp = array_module(w.backend)
    if isinstance(v, SparseOperand):
        values = _no_overlap(w, _check_pair(f"W {op}= V", w, v))
        (xp.add if op == "+" else xp.subtract)(w._data, values, out=w._data)
        return w
    s = _scalar(w, v, f"W {op}= s")
    if s is not None:
        if not _is_zero(s):
            raise _dense_sum_error(f"W {op}= s")
        return w
    if _is_array_like(v):
        raise _array_operand_error(f"W {op}= V", v, f"{_MATRIX_HINT} (or write to W.data)")
    return NotImplemented


def imul(w, s):
    """``W *= s`` for a real scalar: written into W's storage; returns ``w``."""
    value = _scalar(w, s, "W *= s")
    if value is None:
        if isinstance(s, SparseOperand) or _is_array_like(s):
            raise TypeError(
                f"W *= s takes a real scalar s; got {_operand_kind(s)}: for the elementwise "
                "product with a matrix of W's layout use W.data[...] *= V.data, or "
                "W = W.multiply(V)"
            )
        return NotImplemented
    array_module(w.backend).multiply(w._data, value, out=w._data)
    return w


def itruediv(w, s):
    """``W /= s`` for a real scalar: written into W's storage; returns ``w``."""
    value = _scalar(w, s, "W /= s")
    if value is None:
        if isinstance(s, SparseOperand) or _is_array_like(s):
            raise TypeError(f"W /= s takes a real scalar s; got {_operand_kind(s)}")
        return NotImplemented
    array_module(w.backend).true_divide(w._data, value, out=w._data)
    return w


# -- reductions ------------------------------------------------------------------------------


def total(w):
    """``W.sum()``: the sum of the stored values as a 0-d array of W's backend.

    float16 and bfloat16 accumulate in float32 and return float32 (a float16 sum of a
    large matrix would overflow at 65504); other dtypes return their own dtype.
    """
    xp = array_module(w.backend)
    acc = _dtypes.compute_dtype(w.dtype)
    # NumPy returns a scalar, CuPy a 0-d array: asarray makes both a 0-d array.
    return xp.asarray(xp.sum(w._data, dtype=acc))


def block_norms(w, ord="fro"):
    """``W.block_norms()``: the Frobenius norm of each block, shape ``(nnzb,)``.

    In the order of ``W.data`` (for a view, the view's block order; a block's norm is
    that of its transpose). float32 for half dtypes, else W's dtype.
    """
    if not (isinstance(ord, str) and ord == "fro"):
        raise ValueError(f"ord must be 'fro' (the Frobenius norm of each block), got {ord!r}")
    xp = array_module(w.backend)
    acc = _dtypes.compute_dtype(w.dtype)
    values = w._data
    if values.dtype == acc:
        squares = values * values
    else:  # a copy in the accumulation dtype (half squares overflow), squared in place
        squares = values.astype(acc)
        xp.multiply(squares, squares, out=squares)
    norms = xp.sqrt(squares.sum(axis=(1, 2)))
    if w._base is not None:
        norms = norms[w._perm_device()]
    return norms
