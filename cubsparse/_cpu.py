"""CPU backend: NumPy, vectorised over blocks.

Both primitives gather the operand slices that meet each block, multiply them with one
batched ``matmul``, and sum the partial products with segment sums. Work is cut into
chunks of blocks only to bound the temporary memory; there is no loop over single blocks.
Half types are computed in float32 and rounded once at the end.
"""

from __future__ import annotations

import numpy as np

from . import _dtypes

#: Largest temporary (in float elements) one chunk may allocate: 32 Mi floats = 128 MiB.
_CHUNK_ELEMENTS = 1 << 25


def _combine(acc, out, alpha, beta, dtype):
    """``alpha * acc + beta * out`` in the compute dtype, written to ``out`` (or new)."""
    if alpha != 1.0:
        acc *= alpha
    if beta != 0.0:  # beta == 0 must ignore out entirely: it may hold NaN poison
        acc += beta * out.astype(acc.dtype)
    if out is None:
        return acc.astype(dtype, copy=False)
    out[...] = acc
    return out


def _chunks(nnzb: int, per_block: int):
    step = max(1, _CHUNK_ELEMENTS // max(per_block, 1))
    return range(0, nnzb, step), step


def dsd(x, w, transpose_w: bool, out, alpha: float, beta: float, tf32: bool = False):
    """``alpha * x @ op(w) + beta * out`` for dense ``x`` (n, k) and block-sparse ``w``.

    ``tf32`` is accepted for the common interface; the CPU computes float32 in IEEE.
    """
    cdt = _dtypes.compute_dtype(w.dtype)
    s, b = w._structure, w.blocksize
    n = x.shape[0]
    rows_b, cols_b = s.block_shape
    # Y[:, j] += X[:, gidx[q]] @ op(W_blk[q]) over each output block's list (sorted by j).
    ptr, blk, gather = s.work_lists(transpose_w)
    n_out = ptr.shape[0] - 1
    n_in = cols_b if transpose_w else rows_b
    segment = np.repeat(np.arange(n_out), np.diff(ptr))
    acc = np.zeros((n, n_out, b), dtype=cdt)
    xb = x.reshape(n, n_in, b)
    blocks, step = _chunks(s.nnzb, n * b)
    for start in blocks:
        sl = slice(start, start + step)
        wb = w._data[blk[sl]].astype(cdt, copy=False)
        if transpose_w:
            wb = wb.transpose(0, 2, 1)
        xg = xb[:, gather[sl], :].astype(cdt, copy=False).transpose(1, 0, 2)  # (chunk, n, b)
        part = np.matmul(xg, wb)  # (chunk, n, b)
        seg = segment[sl]
        # Sum runs of equal output block; the runs are contiguous because seg is sorted.
        starts = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
        sums = np.add.reduceat(part, starts, axis=0) if part.shape[0] else part
        acc[:, seg[starts], :] += sums.transpose(1, 0, 2)
    return _combine(acc.reshape(n, n_out * b), out, alpha, beta, w.dtype)


def sdd(a, b_mat, like, out_data, alpha: float, beta: float, tf32: bool = False):
    """``alpha * (a @ b)[like's blocks] + beta * out_data`` as an ``(nnzb, bs, bs)`` array."""
    cdt = _dtypes.compute_dtype(a.dtype)
    s, bs = like._structure, like.blocksize
    inner = a.shape[1]
    rows_b, cols_b = s.block_shape
    a3 = a.reshape(rows_b, bs, inner)  # (block row, bs, inner)
    b3 = b_mat.reshape(inner, cols_b, bs)  # (inner, block col, bs)
    acc = np.empty((s.nnzb, bs, bs), dtype=cdt)
    blocks, step = _chunks(s.nnzb, 2 * inner * bs)
    rows, cols = s.rows, s.host_indices
    for start in blocks:
        sl = slice(start, start + step)
        ag = a3[rows[sl]].astype(cdt, copy=False)  # (chunk, bs, inner)
        bg = b3[:, cols[sl], :].astype(cdt, copy=False).transpose(1, 0, 2)  # (chunk, inner, bs)
        np.matmul(ag, bg, out=acc[sl])
    return _combine(acc, out_data, alpha, beta, a.dtype)


def warmup(**kwargs) -> list:
    """Nothing to compile on the CPU."""
    return []
