// dsd on CUDA cores (IEEE float32, float64; dsd_copies.cuh describes the decomposition
// and the copies).
#include "dsd_copies.cuh"

// CUDA-core path (float32 in IEEE arithmetic, float64): the tensor-core kernel's copies and
// cp.async pipeline (DsdCopies) feeding SimtTile's FMAs. A CTA computes BM rows of X by one
// output block, TM x TN outputs per thread; the host sizes BM to N (short tiles for few
// rows, so no FMA is spent on rows that do not exist). X rows must be contiguous and
// 16-byte aligned (the host copies X otherwise). float32 lists may be split like the
// tensor-core ones (slot >= 0: float32 partials to the workspace, added up by the last
// segment's CTA, common.cuh); float64 lists never are.
template <class T, int B, int BM, int TM, int TN, int BK, int STAGES, bool TRANS_W>
__global__ void __launch_bounds__((BM / TM) * (B / TN))
    dsd_simt(const T* __restrict__ x, i64 ldx, int nrows, const T* __restrict__ w,
             const int4* __restrict__ work, const int* __restrict__ blk,
             const int* __restrict__ gidx, T* y, i64 ldy, T alpha, T beta, float* ws,
             i64 ws_stride, const int2* __restrict__ segs, int* counts) {
  grid_dependency();
  typedef SimtTile<T, BM, B, BK, TM, TN, false, TRANS_W> Tile;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* smem = (T*)smem_raw;
  const int4 item = work[blockIdx.x];
  const int j = item.x, q0 = item.y, len = item.z, slot = item.w;
  const int row0 = blockIdx.y * BM, tid = threadIdx.x;
  const int tx = tid % Tile::TX, ty = tid / Tile::TX;
  const int ktiles = (len * B + BK - 1) / BK;
  __shared__ int s_g[LIST_CAP], s_p[LIST_CAP];
  const WorkList list = load_work_list(s_g, s_p, gidx, blk, q0, len, tid, Tile::THREADS);

  T acc[TM][TN];
  Tile::zero(acc);
  const DsdCopies<T, B, BM, BK, Tile::THREADS, Tile::A_LD, Tile::B_LD, TRANS_W> copies(
      x, w, ldx, nrows, row0, tid);
  cp_async_pipeline<STAGES>(
      ktiles,
      [&](int stage, int kt) {
        T* sA = smem + stage * Tile::STAGE_ELEMS;
        copies.load(sA, sA + Tile::A_ELEMS, kt * BK, list, len);
      },
      [&](int stage) {
        const T* sA = smem + stage * Tile::STAGE_ELEMS;
        Tile::compute(sA, sA + Tile::A_ELEMS, acc, tx, ty);
      });

#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = row0 + Tile::row(ty, i);
    if (r >= nrows) continue;
#pragma unroll
    for (int jj = 0; jj < TN; ++jj) {
      const int c = Tile::col(tx, jj);
      if (slot >= 0) {  // one segment of a split list: its partial product, unscaled
        ws[slot * ws_stride + (i64)r * B + c] = (float)acc[i][jj];
        continue;
      }
      T* dst = y + (i64)r * ldy + (i64)j * B + c;
      *dst = beta != T(0) ? alpha * acc[i][jj] + beta * *dst : alpha * acc[i][jj];
    }
  }
  if (sizeof(T) == 4 && slot >= 0)  // float64 lists are never split
    split_finish<B>(ws, ws_stride, segs, counts, slot, row0, BM, nrows, B, tid, Tile::THREADS,
                    [] { __syncthreads(); }, [&](int r, int c, float v0, float v1) {
                      T* dst = y + (i64)r * ldy + (i64)j * B + c;
                      const T s0 = v0, s1 = v1;
                      dst[0] = beta != T(0) ? alpha * s0 + beta * dst[0] : alpha * s0;
                      dst[1] = beta != T(0) ? alpha * s1 + beta * dst[1] : alpha * s1;
                    });
}
