// sdd: block-sparse = (dense @ dense) sampled on a layout (SDDMM), the weight gradient
//
//   D_p = A[rows of block row r, :] @ Bm[:, columns of block column c]   for each block p = (r, c)
//
// with the inner dimension (the batch, for dW = X.T @ dY) reduced inside the CTA: no
// atomics, bitwise-reproducible results. A CTA owns a "group": up to G blocks of one block
// row, so the A slice (b rows) is loaded once and shared by G blocks; the group table is
// built once per layout.
#include "common.cuh"

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

  auto load = [&](int stage, int kt) {
    T* sA = smem + stage * Tile::STAGE_ELEMS;
    T* sB = sA + Tile::A_ELEMS;
    const int k0 = kt * BK;
    if (A_KM) {
      for_each_copy<BK * (BM / VEC), Tile::THREADS>(tid, [&](int s) {
        const int kr = s / (BM / VEC), m = (s % (BM / VEC)) * VEC;
        const bool ok = (k0 + kr < inner) && (m < B);
        const T* src = ok ? a + (i64)(k0 + kr) * lda + (i64)r * B + m : a;
        cp_async16(sA + kr * Tile::A_LD + m, src, ok ? 16 : 0);
      });
    } else {
      for_each_copy<BM * (BK / VEC), Tile::THREADS>(tid, [&](int s) {
        const int m = s / (BK / VEC), c = (s % (BK / VEC)) * VEC;
        const bool ok = (k0 + c < inner) && (m < B);
        const T* src = ok ? a + ((i64)r * B + m) * lda + k0 + c : a;
        cp_async16(sA + m * Tile::A_LD + c, src, ok ? 16 : 0);
      });
    }
    if (!B_NK) {
      for_each_copy<BK * (BN / VEC), Tile::THREADS>(tid, [&](int s) {
        const int kr = s / (BN / VEC), n = (s % (BN / VEC)) * VEC, g = n / B;
        const bool ok = (k0 + kr < inner) && (g < cnt);
        const T* src = ok ? bm + (i64)(k0 + kr) * ldb + (i64)cols[g] * B + n % B : bm;
        cp_async16(sB + kr * Tile::B_LD + n, src, ok ? 16 : 0);
      });
    } else {
      for_each_copy<BN * (BK / VEC), Tile::THREADS>(tid, [&](int s) {
        const int n = s / (BK / VEC), c = (s % (BK / VEC)) * VEC, g = n / B;
        const bool ok = (k0 + c < inner) && (g < cnt);
        const T* src = ok ? bm + ((i64)cols[g] * B + n % B) * ldb + k0 + c : bm;
        cp_async16(sB + n * Tile::B_LD + c, src, ok ? 16 : 0);
      });
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

// SIMT path (float32 IEEE, float64): operands read through two strides each, so views
// such as x.T need no copy. One CTA computes one group of G blocks (a B x G*B tile); each
// thread owns TM x TN outputs strided across the tile.
template <class T, int B, int G, int TM, int TN, int BK>
__global__ void __launch_bounds__(256)
    sdd_simt(const T* __restrict__ a, i64 sa0, i64 sa1, const T* __restrict__ bm, i64 sb0,
             i64 sb1, int inner, const int* __restrict__ groups,
             const int* __restrict__ indices, T* out, T alpha, T beta) {
  constexpr int BN = G * B, TX = BN / TN, TY = 256 / TX;
  static_assert(TX * TN == BN && TX * TY == 256 && TY * TM == B, "bad SIMT tile");
  __shared__ T sA[BK][B + 1];
  __shared__ T sB[BK][BN + 1];
  __shared__ int cols[G];
  const int tid = threadIdx.x, tx = tid % TX, ty = tid / TX;
  const int r = groups[3 * blockIdx.x], p0 = groups[3 * blockIdx.x + 1];
  const int cnt = groups[3 * blockIdx.x + 2];
  if (tid < G) cols[tid] = tid < cnt ? indices[p0 + tid] : 0;
  __syncthreads();
  T acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int jj = 0; jj < TN; ++jj) acc[i][jj] = T(0);

  for (int k0 = 0; k0 < inner; k0 += BK) {
    for (int e = tid; e < BK * B; e += 256) {
      // Consecutive threads take consecutive m when a's rows are contiguous (a = x.T).
      const int kr = sa0 == 1 ? e / B : e % BK, m = sa0 == 1 ? e % B : e / BK;
      sA[kr][m] = k0 + kr < inner ? a[((i64)r * B + m) * sa0 + (i64)(k0 + kr) * sa1] : T(0);
    }
    for (int e = tid; e < BK * BN; e += 256) {
      const int kr = sb1 == 1 ? e / BN : e % BK, n = sb1 == 1 ? e % BN : e / BK;
      const int g = n / B;
      T v = T(0);
      if (k0 + kr < inner && g < cnt)
        v = bm[(i64)(k0 + kr) * sb0 + ((i64)cols[g] * B + n % B) * sb1];
      sB[kr][n] = v;
    }
    __syncthreads();
#pragma unroll 4
    for (int kk = 0; kk < BK; ++kk) {
      T av[TM], bv[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) av[i] = sA[kk][ty + i * TY];
#pragma unroll
      for (int jj = 0; jj < TN; ++jj) bv[jj] = sB[kk][tx + jj * TX];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int jj = 0; jj < TN; ++jj) acc[i][jj] = fma(av[i], bv[jj], acc[i][jj]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int jj = 0; jj < TN; ++jj) {
      const int m = ty + i * TY, n = tx + jj * TX, g = n / B;
      if (g < cnt) {
        T* dst = out + (i64)(p0 + g) * (B * B) + m * B + n % B;
        *dst = beta != T(0) ? alpha * acc[i][jj] + beta * *dst : alpha * acc[i][jj];
      }
    }
}
