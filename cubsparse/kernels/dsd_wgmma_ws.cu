// dsd on Hopper: the single-block kernel made persistent and warp-specialized, copies by
// a cp.async producer warpgroup (sm90_single.cuh describes the tile).
#include "sm90_single.cuh"

// The single-block kernel made persistent and warp-specialized, so that a tile's pipeline
// fill and epilogue overlap other work instead of leaving the tensor cores idle:
// * gridDim.x CTAs (a few per SM) walk the tiles t = blockIdx.x, + gridDim.x, ...; tile t
//   is work item t % nwork of row tile t / nwork, so the CTAs running at one time share
//   rows of X in L2. Each tile is still reduced by one CTA in list order: deterministic.
// * A producer warpgroup (the last 128 threads) issues every copy: it waits for a stage to
//   be released (`empty`), fills it with cp.async and has the copies arrive on `full` as
//   they land. It runs up to STAGES slices ahead, across tile boundaries, so the next
//   tile's first slices load while the consumers store the last one.
// * WG consumer warpgroups wait on `full`, issue the wgmmas and release a stage once the
//   wgmmas reading it are done. INFLIGHT = 1 keeps one slice's wgmmas running while the
//   next slice is awaited (a consumer then holds two stages); INFLIGHT = 0 waits for them
//   and releases the stage at once, leaving one more stage to the producer (the other CTAs
//   on the SM keep the tensor cores busy meanwhile).
template <class Tag, int B, int MW, int WG, int STAGES, bool KN, int MINB, int INFLIGHT>
__global__ void __launch_bounds__((WG + 1) * 128, MINB)
    dsd_wgmma_ws(const u16* __restrict__ x, i64 ldx, int nrows, const u16* __restrict__ wk,
                 const int4* __restrict__ work, int nwork, const int* __restrict__ blk,
                 const int* __restrict__ gidx, u16* y, i64 ldy, float alpha, float beta,
                 float* ws, i64 ws_stride, const int2* __restrict__ segs, int* counts) {
  grid_dependency();
  constexpr int BM = 64 * MW * WG, CONSUMERS = WG * 128;
  constexpr int A_BYTES = BM * 128, STAGE_BYTES = (BM + B) * 128;
  extern __shared__ unsigned char smem_raw[];
  const unsigned base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  unsigned char* smem = smem_raw + (base - smem_addr(smem_raw));
  __shared__ unsigned long long full[STAGES], empty[STAGES];
  __shared__ int s_g[LIST_CAP], s_p[LIST_CAP];
  const int tid = threadIdx.x;
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 128);             // one cp.async arrival per producer thread
      mbar_init(&empty[s], CONSUMERS / 32);  // one arrival per consumer warp
    }
  }
  __syncthreads();  // the only CTA-wide barrier: the roles never meet again
  const int ntiles = nwork * ((nrows + BM - 1) / BM);
  unsigned it = 0;  // slices through the pipeline so far (this thread's count)

  if (tid >= CONSUMERS) {  // producer
    const int ptid = tid - CONSUMERS;
    SingleCopy<B, BM, 128, KN> copy(ptid);
    for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
      const int4 item = work[t % nwork];
      const int q0 = item.y, len = item.z;
      named_barrier_sync(1, 128);  // every producer thread is done with the previous list
      fill_work_list(s_g, s_p, gidx, blk, q0, len, ptid, 128);
      named_barrier_sync(1, 128);
      const WorkList list{s_g, s_p, gidx, blk, q0};
      copy.start(x, ldx, (t / nwork) * BM, nrows);
      const int ktiles = (len * B + 63) / 64;
      for (int kt = 0; kt < ktiles; ++kt, ++it) {
        const int s = it % STAGES;
        mbar_wait(&empty[s], ((it / STAGES) & 1) ^ 1);  // the first round passes at once
        copy.load(smem + s * STAGE_BYTES, kt, list, len, x, wk);
        cp_async_mbar_arrive(&full[s]);
      }
    }
    cp_async_wait<0>();
    return;
  }

  const int wg = tid / 128;  // consumer warpgroup
  float acc[MW][B / 2];
  for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
    const int4 item = work[t % nwork];
    const int j = item.x, len = item.z, slot = item.w;
    const int ktiles = (len * B + 63) / 64;
    consume_tile<STAGES, INFLIGHT, true>(ktiles, it, acc, full, empty, tid, [&](int s) {
      const unsigned sA = base + s * STAGE_BYTES;
      single_mma<Tag, B, MW, KN>(acc, sA, sA + A_BYTES, wg);
    });
    const int row0 = (t / nwork) * BM;
    single_store<Tag, B, MW>(acc, wg, tid, row0, nrows, j, slot, y, ldy, alpha, beta, ws,
                             ws_stride);
    if (slot >= 0)
      consumers_split_finish<B, CONSUMERS>(Tag(), ws, ws_stride, segs, counts, slot, row0, BM,
                                           nrows, tid, y, ldy, j, alpha, beta);
  }
}
