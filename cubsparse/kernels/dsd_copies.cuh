// dsd: dense = dense @ op(block-sparse), op the identity or the transpose.
//
//   Y[:, j-th block of columns] = sum over the work list of output block j of
//                                 X[:, g-th block of columns] @ op(W_p)
//
// For Y = X @ W the list of output block j is block column j of W, walked through the
// transpose index (p = perm[q], g = its block row); for Y = X @ W.T it is block row j of
// W (p = q, g = its block column). Either way the reduction happens inside one CTA, in a
// fixed order: no atomics, bitwise-reproducible results.
//
// A CTA computes BM rows of X times one output block (b columns). The k dimension is the
// concatenation of the list's blocks, consumed BK at a time; every 16-byte segment of a
// BK slice lies inside one block because b >= 8 elements, so its source address needs one
// lookup in the work list.
//
// Load balance: each CTA takes one row of the work table, (output block, first list entry,
// list length, partial slot), sorted longest first, so long lists start first and short
// ones fill in behind them. Where few CTAs run (small N), the host also cuts lists longer
// than the average work per SM into segments: those write float32 partial products to a
// workspace slot (slot >= 0), and the CTA that stores a list's last segment adds them up
// in slot order in the same launch (split_finish, common.cuh), so the result stays
// deterministic.
#pragma once
#include "common.cuh"

// The copies of one pipeline stage of dsd: a BM x BK slice of X into A[m][k] (rows of A_LD
// elements) and the matching BK x B slice of op(W) into B[k][n], or B[n][k] with TRANS_W
// (rows of B_LD), in 16-byte cp.async segments of VEC elements. Every segment lies inside
// one block, since a block row holds at least 8 elements, so it needs one list lookup.
//
// The plan is fixed for the whole list: a thread's copies of an X slice sit in one column
// (k offset a_kc) of rows a_r, a_r + A_RSTEP, ...: THREADS is a multiple of the segments
// per row, so only the row changes between them. Row pointers and bounds are computed once;
// a stage then costs one list lookup per thread and a pointer add per copy (the per-copy
// index arithmetic was most of the instructions).
template <class T, int B, int BM, int BK, int THREADS, int A_LD, int B_LD, bool TRANS_W>
struct DsdCopies {
  static constexpr int VEC = 16 / sizeof(T);
  static constexpr int A_SPR = BK / VEC, A_SEGS = BM * A_SPR, A_RSTEP = THREADS / A_SPR;
  static constexpr int A_IT = (A_SEGS + THREADS - 1) / THREADS;
  static_assert(THREADS % A_SPR == 0, "a thread's X copies must share a column");
  static_assert(A_IT <= 32, "a copy's bit in a_ok");
  // W: B[k][n] = W_p[off][n] copies B_SPR segments per k row; B[n][k] = W_p[n][off]
  // (TRANS_W) copies BK / VEC per n row. Either way a thread keeps its column.
  static constexpr int B_SPR = TRANS_W ? BK / VEC : B / VEC;
  static constexpr int B_SEGS = (TRANS_W ? B : BK) * B_SPR, B_RSTEP = THREADS / B_SPR;
  static constexpr int B_IT = (B_SEGS + THREADS - 1) / THREADS;
  static_assert(THREADS % B_SPR == 0, "a thread's W copies must share a column");

  const T* x;
  const T* w;
  const T* a_row;
  i64 a_step;
  int tid, a_r, a_kc, b_r, b_c;
  unsigned a_ok;  // bit it: copy it of this thread is a real row of X

  __device__ __forceinline__ DsdCopies(const T* x_, const T* w_, i64 ldx, int nrows, int row0,
                                       int tid_)
      : x(x_), w(w_), tid(tid_) {
    a_r = tid / A_SPR;
    a_kc = (tid % A_SPR) * VEC;
    a_row = x + (i64)(row0 + a_r) * ldx;
    a_step = (i64)A_RSTEP * ldx;
    a_ok = 0;
#pragma unroll
    for (int it = 0; it < A_IT; ++it)
      if ((A_SEGS % THREADS == 0 || tid + it * THREADS < A_SEGS) &&
          row0 + a_r + it * A_RSTEP < nrows)
        a_ok |= 1u << it;
    b_r = tid / B_SPR;
    b_c = (tid % B_SPR) * VEC;
  }

  // Issues the copies of the slice starting at k0 (of the list's concatenated blocks).
  __device__ __forceinline__ void load(T* sA, T* sB, int k0, const WorkList& list,
                                       int len) const {
    {
      // unsigned: B is a power of two, so / and % are a shift and a mask
      const unsigned k = k0 + a_kc, item = k / B, off = k % B;
      const bool live = item < (unsigned)len;
      const T* src = a_row + (i64)list.input(live ? item : 0) * B + off;
#pragma unroll
      for (int it = 0; it < A_IT; ++it) {
        const bool ok = live && ((a_ok >> it) & 1u);
        if (A_SEGS % THREADS == 0 || tid + it * THREADS < A_SEGS)
          cp_async16(sA + (a_r + it * A_RSTEP) * A_LD + a_kc, ok ? src + it * a_step : x,
                     ok ? 16 : 0);
      }
    }
    if (!TRANS_W) {  // B[k][n] = W_p[off][n]: rows of the block, n contiguous
#pragma unroll
      for (int it = 0; it < B_IT; ++it) {
        if (B_SEGS % THREADS != 0 && tid + it * THREADS >= B_SEGS) break;
        const int kr = b_r + it * B_RSTEP;
        const unsigned k = k0 + kr, item = k / B, off = k % B;
        const bool ok = item < (unsigned)len;
        const T* src = w + (i64)list.block(ok ? item : 0) * (B * B) + off * B + b_c;
        cp_async16(sB + kr * B_LD + b_c, ok ? src : w, ok ? 16 : 0);
      }
    } else {  // B stored [n][k] = W_p[n][off]: k contiguous in memory too
      const unsigned k = k0 + b_c, item = k / B, off = k % B;
      const bool ok = item < (unsigned)len;
      const T* src = w + (i64)list.block(ok ? item : 0) * (B * B) + off;
#pragma unroll
      for (int it = 0; it < B_IT; ++it) {
        if (B_SEGS % THREADS != 0 && tid + it * THREADS >= B_SEGS) break;
        const int n = b_r + it * B_RSTEP;
        cp_async16(sB + n * B_LD + b_c, ok ? src + n * B : w, ok ? 16 : 0);
      }
    }
  }
};
