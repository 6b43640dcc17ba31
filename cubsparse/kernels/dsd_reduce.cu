// The fixed-order sum of split lists' float32 partial tiles (dsd_copies.cuh describes
// the split).
#include "dsd_copies.cuh"

// Sums the segments of split lists (workspace slots s0 .. s0+ns-1 of output tile j, in
// that order) and applies alpha and beta. A tile is W columns wide: one output block, or a
// group of them (the wgmma kernel), of which only the columns below ncols exist. One
// thread per pair of adjacent outputs.
template <class Tag, int W>
__global__ void __launch_bounds__(256)
    dsd_reduce(const float* __restrict__ ws, i64 ws_stride, const int* __restrict__ red,
               int nrows, typename Tag::storage* y, i64 ldy, float alpha, float beta,
               i64 ncols) {
  const int j = red[3 * blockIdx.y], s0 = red[3 * blockIdx.y + 1], ns = red[3 * blockIdx.y + 2];
  const i64 e = ((i64)blockIdx.x * blockDim.x + threadIdx.x) * 2;  // in the nrows x W tile
  if (e >= (i64)nrows * W) return;
  const int r = (int)(e / W), c = (int)(e % W);
  if ((i64)j * W + c >= ncols) return;
  float v0 = 0.f, v1 = 0.f;
  for (int s = 0; s < ns; ++s) {
    const float2 p = *(const float2*)(ws + (s0 + s) * ws_stride + e);
    v0 += p.x;
    v1 += p.y;
  }
  store_pair(Tag(), y + (i64)r * ldy + (i64)j * W + c, v0, v1, alpha, beta);
}
