// sdd on tensor cores (mma.sync): a CTA per group of blocks of one block row
// (sdd_copies.cuh describes the decomposition and the copies).
#include "sdd_copies.cuh"

// Tensor-core path (float16, bfloat16; float32 as TF32 on opt-in, which reads a as
// A[m][k] and bm as B[n][k]). The tile is BM x (G*B) with BM = max(B, 16): an 8-row block
// is padded to the 16 rows of an mma (the extra rows are zero-filled and never stored).
//   A_KM: A[m][k] = a[k * lda + r*B + m]     (a is X with A = X.T, the usual case)
//  !A_KM: A[m][k] = a[(r*B + m) * lda + k]
//  !B_NK: B[k][n] = bm[k * ldb + col]        (bm is dY, the usual case)
//   B_NK: B[k][n] = bm[col * ldb + k]
template <class Tag, int B, int G, int BK, int WARPS_M, int WARPS_N, int STAGES, bool A_KM,
          bool B_NK>
__global__ void __launch_bounds__(WARPS_M* WARPS_N * 32)
    sdd_tc(const typename Tag::storage* __restrict__ a, i64 lda,
           const typename Tag::storage* __restrict__ bm, i64 ldb, int inner,
           const int* __restrict__ groups, const int* __restrict__ indices,
           typename Tag::storage* out, float alpha, float beta) {
  grid_dependency();
  constexpr int BM = B < 16 ? 16 : B, BN = G * B, VEC = Tag::VEC;
  typedef TcTile<Tag, BM, BN, BK, WARPS_M, WARPS_N, A_KM, B_NK> Tile;
  typedef typename Tag::storage T;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* smem = (T*)smem_raw;
  __shared__ int cols[G];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  const int r = groups[3 * blockIdx.x], p0 = groups[3 * blockIdx.x + 1];
  const int cnt = groups[3 * blockIdx.x + 2];
  if (tid < G) cols[tid] = tid < cnt ? indices[p0 + tid] : 0;
  __syncthreads();
  const int ktiles = (inner + BK - 1) / BK;

  float acc[Tile::MT][Tile::NT][4];
  Tile::zero(acc);

  // Copy plan: as SddCopies (which the CUDA-core kernel uses), written out here because
  // the struct form changed this kernel's code: the TF32 instances ran 14-36 % slower
  // (H200, b = 8-32). Segments past the block (8-row blocks padded to 16) or the group
  // are zero-filled for the whole loop.
  constexpr int THREADS = Tile::THREADS;
  constexpr int A_SEGS = BK * (BM / VEC), A_IT = (A_SEGS + THREADS - 1) / THREADS;
  constexpr int B_SEGS = BK * (BN / VEC), B_IT = (B_SEGS + THREADS - 1) / THREADS;
  const T* a_src[A_IT];
  const T* b_src[B_IT];
  int a_dst[A_IT], a_k[A_IT], b_dst[B_IT], b_k[B_IT];
  unsigned a_ok = 0, b_ok = 0;
#pragma unroll
  for (int it = 0; it < A_IT; ++it) {
    const int s = tid + it * THREADS;
    int m, kk;
    if (A_KM) { kk = s / (BM / VEC); m = (s % (BM / VEC)) * VEC; a_dst[it] = kk * Tile::A_LD + m; }
    else { m = s / (BK / VEC); kk = (s % (BK / VEC)) * VEC; a_dst[it] = m * Tile::A_LD + kk; }
    const bool ok = (A_SEGS % THREADS == 0 || s < A_SEGS) && m < B;
    a_ok |= (unsigned)ok << it;
    a_k[it] = kk;
    a_src[it] = !ok ? a : A_KM ? a + (i64)kk * lda + (i64)r * B + m : a + ((i64)r * B + m) * lda + kk;
  }
#pragma unroll
  for (int it = 0; it < B_IT; ++it) {
    const int s = tid + it * THREADS;
    int n, kk;
    if (!B_NK) { kk = s / (BN / VEC); n = (s % (BN / VEC)) * VEC; b_dst[it] = kk * Tile::B_LD + n; }
    else { n = s / (BK / VEC); kk = (s % (BK / VEC)) * VEC; b_dst[it] = n * Tile::B_LD + kk; }
    const int g = n / B;
    const bool ok = (B_SEGS % THREADS == 0 || s < B_SEGS) && g < cnt;
    b_ok |= (unsigned)ok << it;
    b_k[it] = kk;
    const i64 col = ok ? (i64)cols[g] * B + n % B : 0;
    b_src[it] = !ok ? bm : !B_NK ? bm + (i64)kk * ldb + col : bm + col * ldb + kk;
  }
  const i64 a_kstride = A_KM ? lda : 1, b_kstride = B_NK ? 1 : ldb;

  auto load = [&](int stage, int kt) {
    T* sA = smem + stage * Tile::STAGE_ELEMS;
    T* sB = sA + Tile::A_ELEMS;
    const int k0 = kt * BK;
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
  };
  cp_async_pipeline<STAGES>(ktiles, load, [&](int stage) {
    const T* sA = smem + stage * Tile::STAGE_ELEMS;
    Tile::compute(sA, sA + Tile::A_ELEMS, acc, wm, wn, lane);
  });

#pragma unroll
  for (int mt = 0; mt < Tile::MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < Tile::NT; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = wm * Tile::WM + mt * 16 + (lane >> 2) + h * 8;
        const int n = wn * Tile::WN + nt * 8 + (lane & 3) * 2;
        const int g = n / B;
        if (m < B && g < cnt)
          store_pair(Tag(), out + (i64)(p0 + g) * (B * B) + m * B + n % B,
                     acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1], alpha, beta);
      }
}
