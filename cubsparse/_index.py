"""Per-layout index tables, built once and shared by every matrix with the layout.

A :class:`Structure` owns a matrix's ``indices``/``indptr`` and everything derived from
them: the block-row id of each block, the transpose index (the blocks in column order),
and the work lists the CUDA kernels walk. Matrices made from one another (``astype``,
``copy``, ``.T``, the result of ``sampled_matmul(..., like=W)``) hold the same object, so
each table is computed once per layout, on first use.
"""

from __future__ import annotations

import numpy as np


class Structure:
    """The sparsity structure of a block-sparse matrix (immutable).

    The structure takes ownership of the arrays it is given: the caller passes arrays
    nobody else holds (``BlockSparseMatrix`` copies a user's arrays before it gets here).
    Every table below is derived from them once and cached, so a later write to them
    would leave the caches, the kernels' copies and ``toarray`` disagreeing; the NumPy
    arrays are therefore made read-only here, and the CuPy ones are never handed out
    (``BlockSparseMatrix.indices`` returns a copy on the CUDA backend).

    Parameters
    ----------
    indices, indptr : array
        SciPy-BSR block column indices and block row pointers, NumPy or CuPy, int32,
        C-contiguous. For NumPy they are usually the host arrays themselves.
    block_shape : tuple of int
        ``(rows, cols)`` counted in blocks.
    host_indices, host_indptr : numpy.ndarray
        Host copies of the two arrays (int32); ops read them to build index tables
        without synchronising with the device.
    """

    def __init__(self, indices, indptr, block_shape, host_indices, host_indptr):
        for array in (indices, indptr, host_indices, host_indptr):
            _freeze(array)
        self.indices = indices
        self.indptr = indptr
        self.block_shape = (int(block_shape[0]), int(block_shape[1]))
        self.host_indices = host_indices
        self.host_indptr = host_indptr
        self._cache: dict = {}

    @property
    def nnzb(self) -> int:
        return int(self.host_indices.shape[0])

    def cached(self, key, build):
        """Return ``self._cache[key]``, calling ``build()`` to fill it the first time."""
        try:
            return self._cache[key]
        except KeyError:
            value = self._cache[key] = build()
            return value

    # -- host tables -------------------------------------------------------------------
    @property
    def rows(self) -> np.ndarray:
        """Block-row id of every block, shape ``(nnzb,)``."""
        return self.cached("rows", lambda: np.repeat(
            np.arange(self.block_shape[0], dtype=np.int32), np.diff(self.host_indptr)
        ))

    @property
    def transpose(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(perm, t_indptr, t_indices)``: the blocks in column-major order.

        ``perm[q]`` is the position in ``data`` of the q-th block when the blocks are
        ordered by (column, row); ``t_indptr``/``t_indices`` are the BSR index arrays of
        the transpose. The sort is stable, so rows stay ascending within a column.
        """

        def build():
            perm = np.argsort(self.host_indices, kind="stable").astype(np.int32)
            counts = np.bincount(self.host_indices, minlength=self.block_shape[1])
            t_indptr = np.zeros(self.block_shape[1] + 1, dtype=np.int32)
            np.cumsum(counts, out=t_indptr[1:])
            return perm, t_indptr, self.rows[perm]

        return self.cached("transpose", build)

    def work_lists(self, trans: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(ptr, blk, gidx)``: what each output block of ``X @ op(W)`` reduces.

        Output block j reduces entries ``ptr[j]:ptr[j + 1]``; entry q multiplies the block
        ``data[blk[q]]`` with X's block column ``gidx[q]``. For ``X @ W.T`` the lists are
        W's block rows; for ``X @ W`` its block columns, through the transpose index.
        """
        if trans:
            return self.host_indptr, np.arange(self.nnzb, dtype=np.int32), self.host_indices
        perm, t_indptr, t_indices = self.transpose
        return t_indptr, perm, t_indices

    def grouped_lists(self, trans: bool, group: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(ptr, blk, gidx)`` for CTAs that own ``group`` adjacent output blocks each.

        Group g covers output blocks ``g*group .. g*group + group - 1`` and walks the union
        of their lists (:meth:`work_lists`) in ascending input block: entries
        ``ptr[g]:ptr[g + 1]``, entry q reads X's block column ``gidx[q]``, and
        ``blk[q*group + i]`` is the block that multiplies it into member i, or -1.
        """

        def build():
            ptr, blk, gidx = self.work_lists(trans)
            n_out = ptr.shape[0] - 1
            n_groups = -(-n_out // group)
            grp = np.repeat(np.arange(n_out), np.diff(ptr)) // group
            order = np.lexsort((gidx, grp))  # by group, then input block
            g_s, k_s = grp[order], gidx[order]
            new = np.ones(order.shape[0], dtype=bool)
            new[1:] = (g_s[1:] != g_s[:-1]) | (k_s[1:] != k_s[:-1])
            entry = np.cumsum(new) - 1
            table = np.full((int(new.sum()), group), -1, dtype=np.int32)
            # Each (input block, output block) pair occurs once: indices are canonical.
            table[entry, np.repeat(np.arange(n_out), np.diff(ptr))[order] % group] = blk[order]
            gptr = np.zeros(n_groups + 1, dtype=np.int32)
            np.cumsum(np.bincount(g_s[new], minlength=n_groups), out=gptr[1:])
            return gptr, table.ravel(), k_s[new].astype(np.int32)

        return self.cached(("grouped", trans, group), build)

    def layout(self) -> np.ndarray:
        out = np.zeros(self.block_shape, dtype=bool)
        out[self.rows, self.host_indices] = True
        out.setflags(write=False)
        return out

    def same_as(self, other: Structure) -> bool:
        """True when ``other`` describes the same layout (no device synchronisation)."""
        return other is self or (
            other.block_shape == self.block_shape
            and np.array_equal(other.host_indptr, self.host_indptr)
            and np.array_equal(other.host_indices, self.host_indices)
        )

    def transposed(self) -> Structure:
        """The structure of the transpose (cached, and pointing back at this one)."""

        def build():
            _, t_indptr, t_indices = self.transpose
            xp = _module_of(self.indices)
            t = Structure(
                xp.asarray(t_indices), xp.asarray(t_indptr),
                self.block_shape[::-1], t_indices, t_indptr,
            )
            t._cache["transposed"] = self
            return t

        return self.cached("transposed", build)


def _freeze(array) -> None:
    """Make a NumPy array read-only; CuPy arrays have no such flag and are left as they are."""
    if isinstance(array, np.ndarray):
        array.setflags(write=False)


def _module_of(array):
    if type(array).__module__.startswith("cupy"):
        import cupy

        return cupy
    return np
