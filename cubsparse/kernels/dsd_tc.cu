// dsd on tensor cores (mma.sync): a CTA per row tile of X and output block
// (dsd_copies.cuh describes the decomposition and the copies).
#include "dsd_copies.cuh"

// Tensor-core path: float16 and bfloat16 (mma m16n8k16), and float32 in TF32 when the
// caller opts in (m16n8k8; W's blocks must then be stored [n][k], see _cuda.py), with float32
// accumulators and operands staged through a STAGES-deep cp.async pipeline.
template <class Tag, int B, int BM, int BK, int WARPS_M, int WARPS_N, int STAGES, bool TRANS_W>
__global__ void __launch_bounds__(WARPS_M* WARPS_N * 32)
    dsd_tc(const typename Tag::storage* __restrict__ x, i64 ldx, int nrows,
           const typename Tag::storage* __restrict__ w, const int4* __restrict__ work,
           const int* __restrict__ blk, const int* __restrict__ gidx,
           typename Tag::storage* y, i64 ldy, float alpha, float beta, float* ws,
           i64 ws_stride, const int2* __restrict__ segs, int* counts) {
  grid_dependency();
  typedef TcTile<Tag, BM, B, BK, WARPS_M, WARPS_N, false, TRANS_W> Tile;
  typedef typename Tag::storage T;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* smem = (T*)smem_raw;
  const int4 item = work[blockIdx.x];
  const int j = item.x, q0 = item.y, len = item.z, slot = item.w;
  const int row0 = blockIdx.y * BM;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  const int ktiles = (len * B + BK - 1) / BK;
  __shared__ int s_g[LIST_CAP], s_p[LIST_CAP];
  const WorkList list = load_work_list(s_g, s_p, gidx, blk, q0, len, tid, Tile::THREADS);

  float acc[Tile::MT][Tile::NT][4];
  Tile::zero(acc);

  const DsdCopies<T, B, BM, BK, Tile::THREADS, Tile::A_LD, Tile::B_LD, TRANS_W> copies(
      x, w, ldx, nrows, row0, tid);
  auto load = [&](int stage, int kt) {
    T* sA = smem + stage * Tile::STAGE_ELEMS;
    copies.load(sA, sA + Tile::A_ELEMS, kt * BK, list, len);
  };
  cp_async_pipeline<STAGES>(ktiles, load, [&](int stage) {
    const T* sA = smem + stage * Tile::STAGE_ELEMS;
    Tile::compute(sA, sA + Tile::A_ELEMS, acc, wm, wn, lane);
  });

  // Epilogue: each thread holds pairs of adjacent columns, stored together.
#pragma unroll
  for (int mt = 0; mt < Tile::MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < Tile::NT; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = row0 + wm * Tile::WM + mt * 16 + (lane >> 2) + h * 8;
        const int c = wn * Tile::WN + nt * 8 + (lane & 3) * 2;
        if (r >= nrows) continue;
        if (slot < 0)
          store_pair(Tag(), y + (i64)r * ldy + (i64)j * B + c, acc[mt][nt][2 * h],
                     acc[mt][nt][2 * h + 1], alpha, beta);
        else  // one segment of a split list: its partial product, unscaled
          *(float2*)(ws + slot * ws_stride + (i64)r * B + c) =
              make_float2(acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1]);
      }
  if (slot >= 0)
    split_finish_block<B>(Tag(), ws, ws_stride, segs, counts, slot, row0, BM, nrows, tid,
                          Tile::THREADS, [] { __syncthreads(); }, y, ldy, j, alpha, beta);
}
