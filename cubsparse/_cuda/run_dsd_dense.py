"""The dsd's dense path: W's blocks written into a dense buffer kept per stream, then one
cuBLAS product (:mod:`.blas`).
"""

from __future__ import annotations

import numpy as np

from .._arrays import may_share_memory as _overlap
from . import blas, run, worklists
from .compile import get_kernel
from .launch import Launch
from .run import _cupy, _stride_grid


class DensePath:
    """The dense path of a dsd runner (:class:`.run_dsd._DsdRunner`); a CUDA-graph
    capture, in which CuPy refuses cuBLAS, runs the runner's sparse stand-in instead."""

    def _init_dense(self, w, dev):
        s, b = w._structure, w.blocksize
        self.trans = self.plan.product == "X @ W.T"
        dtype = w._data.dtype
        self.structure, self.dense_shape, self.dense_dtype = s, (
            s.block_shape[0] * b, s.block_shape[1] * b), dtype
        ld = self.dense_shape[1]
        kernel = get_kernel(self.plan.kernel)
        # both take W's blocks as parameter 0 and the dense buffer as parameter 3
        if self.plan.kernel.kernel == "fill_dense":  # every element, zeros too
            nvec = self.dense_shape[0] * ld * dtype.itemsize // 16
            sig, args = "ppipll", [worklists.block_map(s, dev), s.block_shape[1]]
        else:  # W's blocks only, into a buffer that keeps its zeros
            nvec = s.nnzb * b * b * dtype.itemsize // 16
            sig, args = "ppppll", list(worklists.block_coordinates(s, dev))
        self.scatter = Launch(kernel, (_stride_grid(nvec),), (256,), 0, sig,
                              [None, *args, None, ld, nvec])

    def _dense_buffer(self, stream):
        """The dense W of this layout, dtype, device and stream: zero but for W's blocks,
        which every call writes again (values may change between calls). One per stream,
        so that calls on two streams (or of two matrices of one layout) never overwrite a
        buffer another stream's product is still reading."""
        return self.structure.cached(
            ("dense_w", self.dev, self.dense_dtype.str, stream),
            lambda: _cupy().zeros(self.dense_shape, self.dense_dtype))

    def dense(self, x, wdata, out, alpha, beta):
        """The dense path: W's blocks into the dense buffer (its other elements stay
        zero), then one cuBLAS product."""
        cupy = _cupy()
        st = run._current_stream()
        if st.is_capturing():
            return self.sparse.run_sparse(x, wdata, out, alpha, beta)
        stream = st.ptr
        dense_w = self._dense_buffer(stream)
        sv = self.scatter.v
        sv[0].value, sv[3].value = wdata.data.ptr, dense_w.data.ptr
        self.scatter(stream)
        plain = alpha == 1 and beta == 0
        y = None
        if plain and out is not None and not _overlap(out, x):
            o = blas.operand(out)
            y = out if o is not None and not o[2] else None
        if y is None:
            y = self.outputs.take(stream) if plain else cupy.ndarray(
                (x.shape[0], self.width), wdata.dtype)
        x, x_ptr, ldx, x_t = blas.operand_or_copy(x)
        k, m = dense_w.shape
        # X @ W reads the buffer as [k][n]; X @ W.T as [n][k], its transpose
        gemm = blas.Gemm.of(self.plan.dtype, x.shape[0], k if self.trans else m,
                            x.shape[1], x_t, self.trans)
        gemm(x_ptr, ldx, dense_w.data.ptr, m, y.data.ptr, y.strides[0] // self.it, stream)
        if plain:
            if out is not None and y is not out:
                out[...] = y
                return out
            return y
        # In float32 (float64 for float64 data); cuBLAS has already rounded the product to
        # the storage dtype, so half types are rounded twice here, unlike the sparse
        # kernels, which apply alpha and beta to the float32 sums.
        acc = np.float64 if y.dtype == np.float64 else np.float32
        prod = alpha * y.astype(acc)
        if beta != 0:
            prod += beta * out.astype(acc)
        prod = prod.astype(wdata.dtype)
        if out is None:
            return prod
        out[...] = prod
        return out
