// Copies of W's blocks rearranged for the Hopper kernels that read them [n][k] (K-major).
#include "common.cuh"

// Copies the b x b block `src` into `dst` (rows PITCH elements apart), transposed or not,
// one CTA per 32 x 32 tile of a block (blockIdx.y), through shared memory (the odd row
// pitch in words keeps the transposed reads free of bank conflicts). A null `src` writes
// zeros.
template <int B, bool TRANSPOSE, int PITCH = B>
__device__ __forceinline__ void copy_block(const u16* __restrict__ src, u16* __restrict__ dst) {
  constexpr int T = B < 32 ? B : 32, TILES = B / T;
  __shared__ u16 tile[T][T + 2];
  const int r0 = (blockIdx.y / TILES) * T, c0 = (blockIdx.y % TILES) * T;
  if (src == nullptr) {
    for (int e = threadIdx.x; e < T * T; e += 256) dst[(r0 + e / T) * PITCH + c0 + e % T] = 0;
    return;
  }
  if constexpr (!TRANSPOSE) {
    for (int e = threadIdx.x; e < T * T; e += 256) {
      const int r = r0 + e / T, c = c0 + e % T;
      dst[r * PITCH + c] = src[r * B + c];
    }
  } else {
    for (int e = threadIdx.x; e < T * T; e += 256) {
      const int r = e / T, c = e % T;
      tile[r][c] = src[(r0 + r) * B + c0 + c];
    }
    __syncthreads();
    for (int e = threadIdx.x; e < T * T; e += 256) {
      const int r = e / T, c = e % T;
      dst[(c0 + r) * PITCH + r0 + c] = tile[c][r];
    }
  }
}

// For X @ W the kernels above want W's blocks stored [n][k]: out[p] = in[p].T for every
// 16-bit b x b block p (grid: blocks x tiles of a block).
template <int B>
__global__ void __launch_bounds__(256)
    transpose_blocks(const u16* __restrict__ in, u16* __restrict__ out) {
  const i64 p = blockIdx.x;
  copy_block<B, true>(in + p * (B * B), out + p * (B * B));
}

// The dense panels of the TMA dsd kernel, K-major ([n][k]) in slices of 64 k: block p =
// q * G + h of the grouped table (entry q of a union list padded to whole slices, member h)
// is in[blk[p]], transposed for X @ W (dY @ W.T reads the blocks as stored), or zeros
// where blk[p] < 0 (a member absent from that entry, or a padding entry). It lands in
// slice q / EPS (EPS = 64 / b entries each) at rows h * b.. (of G * b) and columns
// (q % EPS) * b.. (of 64).
template <int B, bool TRANSPOSE>
__global__ void __launch_bounds__(256)
    panel_blocks(const u16* __restrict__ in, u16* __restrict__ out, const int* __restrict__ blk,
                 int group) {
  constexpr int EPS = 64 / B;
  const i64 p = blockIdx.x;
  const i64 q = p / group, h = p % group;
  const int src = blk[p];
  copy_block<B, TRANSPOSE, 64>(src < 0 ? nullptr : in + (i64)src * (B * B),
                               out + ((q / EPS) * group + h) * B * 64 + (q % EPS) * B);
}
