// sdd: block-sparse = (dense @ dense) sampled on a layout (SDDMM), the weight gradient
//
//   D_p = A[rows of block row r, :] @ Bm[:, columns of block column c]   for each block p = (r, c)
//
// with the inner dimension (the batch, for dW = X.T @ dY) reduced inside the CTA: no
// atomics, bitwise-reproducible results. A CTA owns a "group": up to G blocks of one block
// row, so the A slice (b rows) is loaded once and shared by G blocks; the group table is
// built once per layout.
#pragma once
#include "common.cuh"

// The copies of one pipeline stage of sdd: a BK-deep slice of the BM rows of block row r
// of A (rows m >= B, the padding of an 8-row block, zero-filled) and of the G * B columns
// of the group's blocks of Bm (columns of absent members zero-filled), in 16-byte cp.async
// segments of VEC elements, in the storage orders of A_KM and B_NK:
//   A_KM: A[m][k] = a[k * lda + r*B + m]     (a is X with A = X.T, the usual case)
//  !A_KM: A[m][k] = a[(r*B + m) * lda + k]
//  !B_NK: B[k][n] = bm[k * ldb + col]        (bm is dY, the usual case)
//   B_NK: B[k][n] = bm[col * ldb + k]
// Each copy's source pointer at k = 0, its shared-memory offset and its k offset within a
// slice are computed once; a stage then adds k0 times the operand's k stride. (Computing
// addresses per copy and stage cost more instructions than the MMAs.)
template <class T, int B, int BM, int BN, int BK, int THREADS, int A_LD, int B_LD, bool A_KM,
          bool B_NK>
struct SddCopies {
  static constexpr int VEC = 16 / sizeof(T);
  static constexpr int A_SEGS = BK * (BM / VEC), A_IT = (A_SEGS + THREADS - 1) / THREADS;
  static constexpr int B_SEGS = BK * (BN / VEC), B_IT = (B_SEGS + THREADS - 1) / THREADS;
  static_assert(A_IT <= 32 && B_IT <= 32, "a copy's bit in a_ok / b_ok");
  const T* a;
  const T* bm;
  const T* a_src[A_IT];
  const T* b_src[B_IT];
  int a_dst[A_IT], a_k[A_IT], b_dst[B_IT], b_k[B_IT];
  unsigned a_ok, b_ok;
  i64 a_kstride, b_kstride;
  int tid, inner;

  __device__ __forceinline__ SddCopies(const T* a_, i64 lda, const T* bm_, i64 ldb,
                                       int inner_, int r, const int* cols, int cnt, int tid_)
      : a(a_), bm(bm_), a_ok(0), b_ok(0), a_kstride(A_KM ? lda : 1),
        b_kstride(B_NK ? 1 : ldb), tid(tid_), inner(inner_) {
#pragma unroll
    for (int it = 0; it < A_IT; ++it) {
      const int s = tid + it * THREADS;
      int m, kk;
      if (A_KM) { kk = s / (BM / VEC); m = (s % (BM / VEC)) * VEC; a_dst[it] = kk * A_LD + m; }
      else { m = s / (BK / VEC); kk = (s % (BK / VEC)) * VEC; a_dst[it] = m * A_LD + kk; }
      const bool ok = (A_SEGS % THREADS == 0 || s < A_SEGS) && m < B;
      a_ok |= (unsigned)ok << it;
      a_k[it] = kk;
      a_src[it] = !ok ? a : A_KM ? a + (i64)kk * lda + (i64)r * B + m : a + ((i64)r * B + m) * lda + kk;
    }
#pragma unroll
    for (int it = 0; it < B_IT; ++it) {
      const int s = tid + it * THREADS;
      int n, kk;
      if (!B_NK) { kk = s / (BN / VEC); n = (s % (BN / VEC)) * VEC; b_dst[it] = kk * B_LD + n; }
      else { n = s / (BK / VEC); kk = (s % (BK / VEC)) * VEC; b_dst[it] = n * B_LD + kk; }
      const int g = n / B;
      const bool ok = (B_SEGS % THREADS == 0 || s < B_SEGS) && g < cnt;
      b_ok |= (unsigned)ok << it;
      b_k[it] = kk;
      const i64 col = ok ? (i64)cols[g] * B + n % B : 0;
      b_src[it] = !ok ? bm : !B_NK ? bm + (i64)kk * ldb + col : bm + col * ldb + kk;
    }
  }

  __device__ __forceinline__ void load(T* sA, T* sB, int k0) const {
    const i64 ka = (i64)k0 * a_kstride, kb = (i64)k0 * b_kstride;
#pragma unroll
    for (int it = 0; it < A_IT; ++it) {
      if (A_SEGS % THREADS != 0 && tid + it * THREADS >= A_SEGS) break;
      const bool ok = ((a_ok >> it) & 1u) && k0 + a_k[it] < inner;
      cp_async16(sA + a_dst[it], ok ? a_src[it] + ka : a, ok ? 16 : 0);
    }
#pragma unroll
    for (int it = 0; it < B_IT; ++it) {
      if (B_SEGS % THREADS != 0 && tid + it * THREADS >= B_SEGS) break;
      const bool ok = ((b_ok >> it) & 1u) && k0 + b_k[it] < inner;
      cp_async16(sB + b_dst[it], ok ? b_src[it] + kb : bm, ok ? 16 : 0);
    }
  }
};
