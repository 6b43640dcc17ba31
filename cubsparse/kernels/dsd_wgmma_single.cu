// dsd on Hopper, one output block per CTA, not persistent (b = 16; sm90_single.cuh
// describes the tile).
#include "sm90_single.cuh"

template <class Tag, int B, int MW, int WG, int STAGES, bool KN>
__global__ void __launch_bounds__(WG * 128)
    dsd_wgmma_single(const u16* __restrict__ x, i64 ldx, int nrows, const u16* __restrict__ wk,
              const int4* __restrict__ work, const int* __restrict__ blk,
              const int* __restrict__ gidx, u16* y, i64 ldy, float alpha, float beta,
              float* ws, i64 ws_stride, const int2* __restrict__ segs, int* counts) {
  grid_dependency();
  constexpr int THREADS = WG * 128, BM = 64 * MW * WG;
  constexpr int A_BYTES = BM * 128, STAGE_BYTES = (BM + B) * 128;
  extern __shared__ unsigned char smem_raw[];
  // 1024-byte alignment for the swizzle (the launch adds 1 KiB of slack).
  const unsigned base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  unsigned char* smem = smem_raw + (base - smem_addr(smem_raw));

  const int4 item = work[blockIdx.x];
  const int j = item.x, q0 = item.y, len = item.z, slot = item.w;
  const int row0 = blockIdx.y * BM;
  const int tid = threadIdx.x, wg = tid / 128;
  const int ktiles = (len * B + 63) / 64;
  __shared__ int s_g[LIST_CAP], s_p[LIST_CAP];
  const WorkList list = load_work_list(s_g, s_p, gidx, blk, q0, len, tid, THREADS);

  float acc[MW][B / 2];
#pragma unroll
  for (int m = 0; m < MW; ++m)
#pragma unroll
    for (int i = 0; i < B / 2; ++i) acc[m][i] = 0.f;

  SingleCopy<B, BM, THREADS, KN> copy(tid);
  copy.start(x, ldx, row0, nrows);
  wgmma_pipeline<STAGES>(
      ktiles, acc,
      [&](int stage, int kt) { copy.load(smem + stage * STAGE_BYTES, kt, list, len, x, wk); },
      [&](int stage, int) {
        const unsigned sA = base + stage * STAGE_BYTES;
        single_mma<Tag, B, MW, KN>(acc, sA, sA + A_BYTES, wg);
      });
  single_store<Tag, B, MW>(acc, wg, tid, row0, nrows, j, slot, y, ldy, alpha, beta, ws, ws_stride);
  if (slot >= 0)
    split_finish_block<B>(Tag(), ws, ws_stride, segs, counts, slot, row0, BM, nrows, tid,
                          THREADS, [] { __syncthreads(); }, y, ldy, j, alpha, beta);
}
