// A block-transposed copy of W for the Hopper kernels that read its blocks [n][k].
#include "common.cuh"

// For X @ W the kernels above want W's blocks stored [n][k]: out[p] = in[p].T for every
// 16-bit b x b block p, one CTA per 32 x 32 tile of a block, through shared memory (the
// odd row pitch in words keeps the transposed reads free of bank conflicts).
template <int B>
__global__ void __launch_bounds__(256)
    transpose_blocks(const u16* __restrict__ in, u16* __restrict__ out) {
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
