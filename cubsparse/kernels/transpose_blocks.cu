// Copies of W's blocks rearranged for the Hopper kernels that read them [n][k] (K-major).
#include "common.cuh"

// For X @ W the kernels above want W's blocks stored [n][k]: out[p] = in[p].T for every
// 16-bit b x b block p, one CTA per 32 x 32 tile of a block, through shared memory (the
// odd row pitch in words keeps the transposed reads free of bank conflicts).
template <int B>
__global__ void __launch_bounds__(256)
    transpose_blocks(const u16* __restrict__ in, u16* __restrict__ out) {
  grid_dependency();
  constexpr int T = B < 32 ? B : 32, TILES = B / T;
  __shared__ u16 tile[T][T + 2];
  const i64 p = blockIdx.x;
  const int r0 = (blockIdx.y / TILES) * T, c0 = (blockIdx.y % TILES) * T;
  const u16* src = in + p * (B * B);
  u16* dst = out + p * (B * B);
  for (int e = threadIdx.x; e < T * T; e += 256) {
    const int r = e / T, c = e % T;
    tile[r][c] = src[(r0 + r) * B + c0 + c];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < T * T; e += 256) {
    const int r = e / T, c = e % T;
    dst[(c0 + r) * B + r0 + c] = tile[c][r];
  }
}

// The dense panels of the TMA dsd kernel, K-major ([n][k]) in slices of 64 k: block p =
// q * G + h of the grouped table (entry q of a union list padded to whole slices, member h)
// is in[blk[p]], transposed for X @ W (dY @ W.T reads the blocks as stored), or zeros
// where blk[p] < 0 (a member absent from that entry, or a padding entry). It lands in
// slice q / EPS (EPS = 64 / b entries each) at rows h * b.. (of G * b) and columns
// (q % EPS) * b.. (of 64). A thread writes 16 bytes at a time (8 k of one row), over a
// grid-stride loop: `nvec` vectors in all.
template <int B, bool TRANSPOSE>
__global__ void __launch_bounds__(256)
    panel_blocks(const u16* __restrict__ in, u16* __restrict__ out, const int* __restrict__ blk,
                 int group, i64 nvec) {
  grid_dependency();
  constexpr int EPS = 64 / B;
  const int bt = group * B;  // rows of a slice
  for (i64 v = blockIdx.x * (i64)blockDim.x + threadIdx.x; v < nvec;
       v += (i64)gridDim.x * blockDim.x) {
    const i64 row = v / 8;  // 8 vectors of 8 k per row of 64
    const int c0 = (int)(v % 8) * 8, n = (int)(row % bt);
    const i64 q = row / bt * EPS + c0 / B;  // the entry
    const int src = blk[q * group + n / B], nn = n % B, k0 = c0 % B;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (src >= 0) {
      const u16* blkp = in + (i64)src * (B * B);
      if constexpr (TRANSPOSE) {  // element (n, k) is the block's (k, n)
        unsigned w[4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
          w[i] = (unsigned)blkp[(k0 + 2 * i) * B + nn] |
                 ((unsigned)blkp[(k0 + 2 * i + 1) * B + nn] << 16);
        val = make_uint4(w[0], w[1], w[2], w[3]);
      } else {
        val = *(const uint4*)(blkp + nn * B + k0);
      }
    }
    *(uint4*)(out + v * 8) = val;
  }
}
