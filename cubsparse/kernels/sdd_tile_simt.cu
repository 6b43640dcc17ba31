// sdd for small blocks on CUDA cores (IEEE float32): a CTA per tile of the block grid
// (sdd_copies.cuh describes the decomposition).
#include "sdd_copies.cuh"

// Tiled weight gradient for small blocks on CUDA cores (float32 IEEE; a read as A[k][m] and
// bm as B[k][n]: x and dy as rows of the batch). As in sdd_tile_tc a CTA owns a TR x TS
// tile of the block grid and loads plain column ranges of x and dy once for all of its
// blocks. The tile is cut into 8 x 8 units (a b = 8 block, a quarter of a b = 16 one); the
// units of stored blocks are numbered in row-major order and thread t computes unit t, all
// 64 outputs in registers. Absent blocks thus cost no FMAs, and since the numbering packs
// the live units into the first warps, the warps past them only copy: at density d a tile
// runs about d of its FMA instructions (a mask per thread of a fixed mapping would not skip
// a warp's instruction unless all 32 of its units were absent).
//
// Shared memory holds BK rows of each operand with 16 bytes of padding after every 128
// (four units): the 16 units of a tile row then start on 16-byte bank groups that hold
// two of them each (two wavefronts for a read by all 16), where the unpadded 32-byte
// stride put four on each. A step of k
// costs four 16-byte reads and 64 FMAs per thread, the ratio of an 8 x 8 SGEMM thread tile.
template <int B, int TR, int TS, int BK, int STAGES>
__global__ void __launch_bounds__((TR * B / 8) * (TS * B / 8), 2)
    sdd_tile_simt(const float* __restrict__ a, i64 lda, const float* __restrict__ bm, i64 ldb,
                  int inner, int nbr, int nbc, const int4* __restrict__ tiles,
                  const int* __restrict__ map, float* out, float alpha, float beta) {
  grid_dependency();
  constexpr int UM = TR * B / 8, UN = TS * B / 8, THREADS = UM * UN, WARPS = THREADS / 32;
  constexpr int BM = TR * B, BN = TS * B, VEC = 4;
  constexpr int A_LD = BM + BM / 32 * VEC, B_LD = BN + BN / 32 * VEC;
  constexpr int STAGE_ELEMS = BK * (A_LD + B_LD);
  static_assert(B == 8 || B == 16, "units of 8 x 8 tile the block");
  static_assert(THREADS % 32 == 0 && THREADS <= 1024, "one unit per thread");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float* smem = (float*)smem_raw;
  __shared__ int s_map[TR * TS];  // tile-local (block row, block column) -> block, or -1
  __shared__ int s_unit[THREADS];  // live units in row-major order
  __shared__ int s_warp[WARPS];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int4 t = tiles[blockIdx.x];
  const int m_base = t.x * BM, n_base = t.y * BN;  // first row of a.T, column of bm
  for (int i = tid; i < TR * TS; i += THREADS) s_map[i] = map[(i64)t.z + i];
  __syncthreads();

  // Number the live units: thread tid tests unit tid, a ballot and the warps' counts give
  // its place.
  const bool live = s_map[(tid / UN * 8 / B) * TS + tid % UN * 8 / B] >= 0;
  const unsigned votes = __ballot_sync(0xffffffffu, live);
  if (lane == 0) s_warp[warp] = __popc(votes);
  __syncthreads();
  int place = __popc(votes & ((1u << lane) - 1u)), nlive = 0;
  for (int w = 0; w < WARPS; ++w) {
    place += w < warp ? s_warp[w] : 0;
    nlive += s_warp[w];
  }
  if (live) s_unit[place] = tid;
  __syncthreads();
  const bool active = tid < nlive;
  const int unit = active ? s_unit[tid] : 0, ur = unit / UN, uc = unit % UN;
  const int a_off = ur * 8 + ur / 4 * VEC, b_off = uc * 8 + uc / 4 * VEC;

  float acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;

  // Copies: rows k of both slices in 16-byte segments; columns past the matrix and rows
  // past `inner` are zero-filled.
  constexpr int A_SEGS = BK * (BM / VEC), B_SEGS = BK * (BN / VEC);
  const int ktiles = (inner + BK - 1) / BK;
  auto load = [&](int stage, int kt) {
    float* sA = smem + stage * STAGE_ELEMS;
    float* sB = sA + BK * A_LD;
    const int k0 = kt * BK;
    for_each_copy<A_SEGS, THREADS>(tid, [&](int s) {
      const int kk = s / (BM / VEC), m = (s % (BM / VEC)) * VEC;
      const bool ok = k0 + kk < inner && m_base + m < nbr * B;
      cp_async16(sA + kk * A_LD + m + m / 32 * VEC,
                 ok ? a + (i64)(k0 + kk) * lda + m_base + m : a, ok ? 16 : 0);
    });
    for_each_copy<B_SEGS, THREADS>(tid, [&](int s) {
      const int kk = s / (BN / VEC), n = (s % (BN / VEC)) * VEC;
      const bool ok = k0 + kk < inner && n_base + n < nbc * B;
      cp_async16(sB + kk * B_LD + n + n / 32 * VEC,
                 ok ? bm + (i64)(k0 + kk) * ldb + n_base + n : bm, ok ? 16 : 0);
    });
  };
  cp_async_pipeline<STAGES>(ktiles, load, [&](int stage) {
    if (!active) return;
    const float* sA = smem + stage * STAGE_ELEMS + a_off;
    const float* sB = smem + stage * STAGE_ELEMS + BK * A_LD + b_off;
#pragma unroll 1  // unrolled, ptxas spills past the 128 registers of 2 CTAs per SM
    for (int kk = 0; kk < BK; ++kk) {
      float av[8], bv[8];
      *reinterpret_cast<float4*>(av) = *reinterpret_cast<const float4*>(sA + kk * A_LD);
      *reinterpret_cast<float4*>(av + 4) = *reinterpret_cast<const float4*>(sA + kk * A_LD + 4);
      *reinterpret_cast<float4*>(bv) = *reinterpret_cast<const float4*>(sB + kk * B_LD);
      *reinterpret_cast<float4*>(bv + 4) = *reinterpret_cast<const float4*>(sB + kk * B_LD + 4);
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
  });
  if (!active) return;

  // The unit's rows of its block, 8 contiguous outputs each.
  const int p = s_map[(ur * 8 / B) * TS + uc * 8 / B];
  float* dst = out + (i64)p * (B * B) + (ur * 8 % B) * B + uc * 8 % B;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    float v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = alpha * acc[i][j];
    if (beta != 0.f) {
      float old[8];
      *reinterpret_cast<float4*>(old) = *reinterpret_cast<const float4*>(dst + i * B);
      *reinterpret_cast<float4*>(old + 4) = *reinterpret_cast<const float4*>(dst + i * B + 4);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = fmaf(beta, old[j], v[j]);
    }
    *reinterpret_cast<float4*>(dst + i * B) = *reinterpret_cast<float4*>(v);
    *reinterpret_cast<float4*>(dst + i * B + 4) = *reinterpret_cast<float4*>(v + 4);
  }
}
