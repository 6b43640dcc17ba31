// Shared parts of the Hopper (sm_90a) dsd kernels: dense = dense @ op(block-sparse) with
// warpgroup MMA (wgmma), one kernel schedule per file (dsd_wgmma_*.cu).
//
// The work decomposition of the sm_80 dsd (dsd_copies.cuh) (a CTA owns output blocks and reduces their lists in a
// fixed order; split lists write float32 partials), with the products on wgmma, which
// reads both operands from shared memory and runs asynchronously:
//
// * Layout: each stage holds A (BM rows of X) and B (b rows of the block, k contiguous) as
//   rows of 64 elements = 128 bytes in wgmma's 128-byte swizzle: 16-byte chunk c of row r
//   is stored at chunk c ^ (r % 8). Tiles start on 1024-byte boundaries, so the hardware's
//   swizzle and ours agree, and neither the copies nor the MMA reads conflict.
// * Pipeline: `wgmma_pipeline` (sm90.cuh): STAGES buffers, copies STAGES - 2 slices ahead,
//   one MMA group in flight across iterations.
// * Copy plan: eight threads cover one 128-byte row and a thread keeps its chunk for the
//   whole list, so its row pointers and swizzled offsets are computed once; a stage costs
//   one work-list lookup per operand and a pointer add per copy.
// * B is read from `wk`, blocks stored [n][k]: W itself for X @ W.T, and for X @ W a copy
//   of W with each block transposed (transpose_blocks.cu, one pass over the non-zeros),
//   except where a kernel reads W as stored (KN, an N-major B tile).
//
// This header: the single-block tile's copy plan (SingleCopy), the MMAs of one slice
// (single_mma) and the epilogue (single_store), shared by the single-block, persistent
// and union kernels.
#pragma once
#include "common.cuh"
#include "sm90.cuh"
#include "wgmma.cuh"

// One output block per tile. Its three parts (copy plan, MMAs of a slice, epilogue) are
// shared by the single-block, persistent and union kernels. MW m64 tiles per warpgroup, WG warpgroups: BM = 64 * MW * WG rows of X per tile.
// KN: `wk` holds the blocks as W stores them, [k][n] (X @ W), and the B tile is kept
// N-major (rows of k, wgmma's transposed B), so no transposed copy of W is needed.

// Copy plan of THREADS copying threads: rows r0, r0 + RSTEP, ... and chunk c of each
// slice's X rows (and of the B tile's rows unless KN); with KN, chunk kn_c of the slice's
// rows of k kn_r0, kn_r0 + KN_RS, ... The tile-independent part is set once per thread,
// the row part once per tile (`start`).
template <int B, int BM, int THREADS, bool KN>
struct SingleCopy {
  static constexpr int BK = 64, A_BYTES = BM * 128;
  static constexpr int RSTEP = THREADS / 8;  // rows between a thread's successive copies
  static constexpr int A_IT = BM / RSTEP, B_IT = (B + RSTEP - 1) / RSTEP;
  static constexpr int KN_CH = B / 8, KN_RS = THREADS / KN_CH, KN_IT = (BK + KN_RS - 1) / KN_RS;
  static_assert(RSTEP % 8 == 0, "a thread's swizzle phase must not change between its rows");
  int r0, c, dst0, kn_c, kn_r0;
  unsigned kn_dst[KN ? KN_IT : 1];
  const u16* a_row;
  i64 a_step;
  unsigned a_ok;

  __device__ __forceinline__ explicit SingleCopy(int tid) {
    r0 = tid / 8;
    c = tid % 8;
    dst0 = r0 * 128 + ((c ^ (r0 & 7)) << 4);  // swizzle phase shared by its rows
    kn_c = tid % KN_CH;
    kn_r0 = tid / KN_CH;
#pragma unroll
    for (int it = 0; it < (KN ? KN_IT : 1); ++it)
      kn_dst[it] = MnTile<B, BK>::offset(kn_r0 + it * KN_RS, kn_c);
  }
  __device__ __forceinline__ void start(const u16* x, i64 ldx, int row0, int nrows) {
    a_row = x + (i64)(row0 + r0) * ldx;
    a_step = (i64)RSTEP * ldx;
    a_ok = 0;
#pragma unroll
    for (int it = 0; it < A_IT; ++it)
      if (row0 + r0 + it * RSTEP < nrows) a_ok |= 1u << it;
  }
  // Issues slice kt's copies into the stage at sA; rows past X and entries past the list
  // are zero-filled.
  template <class List>
  __device__ __forceinline__ void load(unsigned char* sA, int kt, const List& list, int len,
                                       const u16* x, const u16* wk) const {
    const unsigned k = kt * BK + c * 8, it_k = k / B, off = k % B;
    const bool live = it_k < (unsigned)len;
    const u16* asrc = a_row + (i64)list.input(live ? it_k : 0) * B + off;
#pragma unroll
    for (int it = 0; it < A_IT; ++it) {
      const bool ok = live && ((a_ok >> it) & 1u);
      cp_async16(sA + dst0 + it * RSTEP * 128, ok ? asrc + it * a_step : x, ok ? 16 : 0);
    }
    if constexpr (KN) {  // rows k of the slice, each B wide; a slice spans 64 / B entries
      const int k0 = kt * BK;
#pragma unroll
      for (int it = 0; it < KN_IT; ++it) {
        const int r = kn_r0 + it * KN_RS;
        if (KN_RS > BK && r >= BK) break;
        const unsigned e = (k0 + r) / B;
        const bool ok = e < (unsigned)len;
        const u16* src = wk + (i64)list.block(ok ? e : 0) * (B * B) + ((k0 + r) % B) * B + kn_c * 8;
        cp_async16(sA + A_BYTES + kn_dst[it], ok ? src : wk, ok ? 16 : 0);
      }
    } else {
      const u16* bsrc = wk + (i64)list.block(live ? it_k : 0) * (B * B) + r0 * B + off;
#pragma unroll
      for (int it = 0; it < B_IT; ++it) {
        if (B % RSTEP != 0 && r0 + it * RSTEP >= B) break;
        cp_async16(sA + A_BYTES + dst0 + it * RSTEP * 128, live ? bsrc + it * RSTEP * B : wk,
                   live ? 16 : 0);
      }
    }
  }
};

// The wgmmas of one 64-deep slice for warpgroup wg: MW m64nB tiles, A at sA, B at sB.
template <class Tag, int B, int MW, bool KN>
__device__ __forceinline__ void single_mma(float (&acc)[MW][B / 2], unsigned sA, unsigned sB,
                                           int wg) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {  // k16 steps advance 32 bytes inside the row
    const unsigned long long db = KN ? MnTile<B, 64>::desc(sB, 0, kk) : wgmma_desc_sw128(sB + kk * 32);
#pragma unroll
    for (int m = 0; m < MW; ++m)
      Wgmma<Tag, B, KN ? 2 : 0>::mma(
          acc[m], wgmma_desc_sw128(sA + (wg * MW + m) * 64 * 128 + kk * 32), db);
  }
}

// Stores warpgroup wg's accumulators: Y block j (slot < 0) or the float32 partial of one
// segment of a split list, unscaled, in rows of WS_LD floats. Accumulator layout of m64nN:
// warp w of the warpgroup holds rows 16w..16w+15; for each 8-column chunk q, registers 4q,
// 4q+1 are (row lane/4, columns 2*(lane%4) + {0, 1}) and 4q+2, 4q+3 the same columns 8
// rows down.
template <class Tag, int B, int MW, int WS_LD = B>
__device__ __forceinline__ void single_store(const float (&acc)[MW][B / 2], int wg, int tid,
                                             int row0, int nrows, int j, int slot, u16* y,
                                             i64 ldy, float alpha, float beta, float* ws,
                                             i64 ws_stride) {
  const int lane = tid & 31, wiw = (tid % 128) / 32;
#pragma unroll
  for (int m = 0; m < MW; ++m)
#pragma unroll
    for (int q = 0; q < B / 8; ++q)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = row0 + (wg * MW + m) * 64 + wiw * 16 + (lane >> 2) + h * 8;
        const int col = q * 8 + (lane & 3) * 2;
        if (r >= nrows) continue;
        if (slot < 0)
          store_pair(Tag(), y + (i64)r * ldy + (i64)j * B + col, acc[m][4 * q + 2 * h],
                     acc[m][4 * q + 2 * h + 1], alpha, beta);
        else
          *(float2*)(ws + slot * ws_stride + (i64)r * WS_LD + col) =
              make_float2(acc[m][4 * q + 2 * h], acc[m][4 * q + 2 * h + 1]);
      }
}

// split_finish_block by the consumer warpgroups of a warp-specialized kernel, which
// synchronize among themselves on named barrier 2 (the producers may use 1).
template <int B, int CONSUMERS, class Tag>
__device__ __forceinline__ void consumers_split_finish(Tag tag, const float* ws, i64 ws_stride,
                                                       const int2* segs, int* counts, int slot,
                                                       int row0, int bm, int nrows, int tid,
                                                       u16* y, i64 ldy, int j, float alpha,
                                                       float beta) {
  split_finish_block<B>(tag, ws, ws_stride, segs, counts, slot, row0, bm, nrows, tid, CONSUMERS,
                        [] { named_barrier_sync(2, CONSUMERS); }, y, ldy, j, alpha, beta);
}
