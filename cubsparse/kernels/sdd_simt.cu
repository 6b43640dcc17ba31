// sdd on CUDA cores (IEEE float32, float64): a CTA per group of blocks of one block row
// (sdd_copies.cuh describes the decomposition and the copies).
#include "sdd_copies.cuh"

// CUDA-core path (float32 IEEE, float64): SddCopies' cp.async stages feeding SimtTile's
// FMAs, in the operand layouts of the tensor-core kernel (the host copies an operand whose
// rows cannot be streamed in 16-byte segments). One CTA computes one group of G blocks, a
// B x G*B tile, TM x TN outputs per thread.
template <class T, int B, int G, int TM, int TN, int BK, int STAGES, bool A_KM, bool B_NK>
__global__ void __launch_bounds__((B / TM) * (G * B / TN))
    sdd_simt(const T* __restrict__ a, i64 lda, const T* __restrict__ bm, i64 ldb, int inner,
             const int* __restrict__ groups, const int* __restrict__ indices, T* out, T alpha,
             T beta) {
  grid_dependency();
  typedef SimtTile<T, B, G * B, BK, TM, TN, A_KM, B_NK> Tile;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* smem = (T*)smem_raw;
  __shared__ int cols[G];
  const int tid = threadIdx.x, tx = tid % Tile::TX, ty = tid / Tile::TX;
  const int r = groups[3 * blockIdx.x], p0 = groups[3 * blockIdx.x + 1];
  const int cnt = groups[3 * blockIdx.x + 2];
  for (int g = tid; g < G; g += Tile::THREADS) cols[g] = g < cnt ? indices[p0 + g] : 0;
  __syncthreads();

  T acc[TM][TN];
  Tile::zero(acc);
  const SddCopies<T, B, B, G * B, BK, Tile::THREADS, Tile::A_LD, Tile::B_LD, A_KM, B_NK> copies(
      a, lda, bm, ldb, inner, r, cols, cnt, tid);
  cp_async_pipeline<STAGES>(
      (inner + BK - 1) / BK,
      [&](int stage, int kt) {
        T* sA = smem + stage * Tile::STAGE_ELEMS;
        copies.load(sA, sA + Tile::A_ELEMS, kt * BK);
      },
      [&](int stage) {
        const T* sA = smem + stage * Tile::STAGE_ELEMS;
        Tile::compute(sA, sA + Tile::A_ELEMS, acc, tx, ty);
      });

#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int jj = 0; jj < TN; ++jj) {
      const int m = Tile::row(ty, i), n = Tile::col(tx, jj), g = n / B;
      if (g < cnt) {
        T* dst = out + (i64)(p0 + g) * (B * B) + m * B + n % B;
        *dst = beta != T(0) ? alpha * acc[i][jj] + beta * *dst : alpha * acc[i][jj];
      }
    }
}
