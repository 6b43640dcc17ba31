"""The dense path's products, by one ``cublasGemmEx`` call on CuPy's cuBLAS handle.

``cupy.matmul`` spends about 25-30 µs of host time per call on an H100 host (checks,
output allocation, stride analysis), more than the dense product itself takes at small N;
the dense path knows its operands' layouts when its plan is made, so it calls cuBLAS
directly: set the handle's stream, one ``gemmEx``. Accumulation is in float32 for the half
types and float32 (IEEE, as ``cupy.matmul`` does unless ``CUPY_TF32=1``), float64 for
float64.

cuBLAS is column-major: a row-major ``C = op(A) @ op(B)`` is the column-major
``C.T = op(B).T @ op(A).T``, so B goes first and the operands keep their storage.
"""

from __future__ import annotations

import ctypes
import functools

_CUDA_R = {"float16": 2, "bfloat16": 14, "float32": 0, "float64": 1}  # cudaDataType
_COMPUTE_32F, _COMPUTE_64F = 68, 70  # cublasComputeType_t
_OP_N, _OP_T = 0, 1
_GEMM_DEFAULT = -1
_ONE_F, _ZERO_F = ctypes.c_float(1.0), ctypes.c_float(0.0)
_ONE_D, _ZERO_D = ctypes.c_double(1.0), ctypes.c_double(0.0)


@functools.cache
def _libs():
    import cupy
    from cupy_backends.cuda.libs import cublas

    return cublas, cupy.cuda.device.get_cublas_handle


class Gemm:
    """Row-major ``C[m][n] = op(A) @ op(B)`` of one shape and dtype: ``A`` is stored
    ``[m][k]`` (or ``[k][m]`` where ``trans_a``), ``B`` ``[k][n]`` (or ``[n][k]``), C
    ``[m][n]``, each with rows ``ld`` elements apart."""

    @classmethod
    @functools.lru_cache(maxsize=256)
    def of(cls, dtype: str, m: int, n: int, k: int, trans_a: bool, trans_b: bool) -> Gemm:
        """The (shared) product of this shape, dtype and operand order."""
        return cls(dtype, m, n, k, trans_a, trans_b)

    __slots__ = ("_args", "_dtype", "_scalars")

    def __init__(self, dtype: str, m: int, n: int, k: int, trans_a: bool, trans_b: bool):
        t = _CUDA_R[dtype]
        double = dtype == "float64"
        one, zero = (_ONE_D, _ZERO_D) if double else (_ONE_F, _ZERO_F)
        self._scalars = (ctypes.addressof(one), ctypes.addressof(zero))
        self._args = (_OP_T if trans_b else _OP_N, _OP_T if trans_a else _OP_N, n, m, k, t,
                      _COMPUTE_64F if double else _COMPUTE_32F)
        self._dtype = dtype

    def __call__(self, a_ptr: int, lda: int, b_ptr: int, ldb: int, c_ptr: int, ldc: int,
                 stream: int) -> None:
        cublas, handle_of = _libs()
        handle = handle_of()
        cublas.setStream(handle, stream)
        cublas.setPointerMode(handle, 0)  # CUBLAS_POINTER_MODE_HOST: alpha, beta on the host
        op_b, op_a, n, m, k, t, compute = self._args
        one, zero = self._scalars
        cublas.gemmEx(handle, op_b, op_a, n, m, k, one, b_ptr, t, ldb, a_ptr, t, lda, zero,
                      c_ptr, t, ldc, compute, _GEMM_DEFAULT)


def operand_or_copy(arr):
    """``(arr, address, ld, transposed)`` with :func:`operand`'s layout, for ``arr`` or,
    where it has neither contiguous rows nor columns, a row-major copy (returned, to live
    through the call)."""
    o = operand(arr)
    if o is None:
        arr = arr.copy(order="C")
        o = operand(arr)
    return (arr, *o)


def operand(arr) -> tuple[int, int, bool] | None:
    """``(address, ld, transposed)`` of a 2-D array as a GEMM operand: rows contiguous
    (``[rows][cols]``, ld its row stride) or columns contiguous (stored as the transpose),
    in elements; None where neither holds and the caller must copy it."""
    it = arr.dtype.itemsize
    rows, cols = arr.shape
    s0, s1 = arr.strides
    if (s1 == it or cols <= 1) and s0 % it == 0 and s0 // it >= max(1, cols):
        return arr.data.ptr, max(1, s0 // it), False
    if (s0 == it or rows <= 1) and s1 % it == 0 and s1 // it >= max(1, rows):
        return arr.data.ptr, max(1, s1 // it), True
    return None
