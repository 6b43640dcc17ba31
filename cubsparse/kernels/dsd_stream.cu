// dsd at a few rows of X (N <= 32) and b = 8, where a product is a stream of W's blocks:
// X resident in shared memory, every stored block read once, in one coalesced load.
//
//   Y[:, block j] = sum over list j of X[:, block g] @ op(W_p)   (the lists of dsd_copies.cuh)
//
// The tile kernels read a block's slice of X again from L2 for every block (N / b times the
// block's own bytes, in 16-byte rows). Here a CTA owns a chunk of KC of X's block columns,
// all rows of it copied into shared memory once, and a group of G output blocks. Each warp
// walks its members' lists where they fall in the chunk (`starts`: per output block, the
// first entry of each chunk): the indices of a window of 32 entries in one load, then each
// block as one 128-byte load (a 4-byte word a lane), U blocks ahead of the MMAs. A lane's
// word is row lane / 4, columns 2 (lane % 4) and up of the block: for X @ W.T that is
// mma m16n8k8's B fragment of op(W_p) = W_p^T as loaded, for X @ W it is the fragment
// after movmatrix transposes the 8 x 8 tile. Each chunk's float32 partial product goes to
// its own slice of the workspace; stream_finish adds the chunks in chunk order, so the
// result does not depend on which CTA ran first.
#include "common.cuh"

template <class Tag, int MT, int KC, int G, int U, bool TRANS>
__global__ void __launch_bounds__(256)
    dsd_stream(const u16* __restrict__ x, i64 ldx, int nrows, int kcols,
               const u16* __restrict__ w, const int* __restrict__ blk,
               const int* __restrict__ gidx, const int* __restrict__ starts, int nout,
               int nchunks, float* __restrict__ ws) {
  constexpr int N = MT * 16, COLS = KC * 8, LD = COLS + 8;  // smem rows padded by 16 bytes:
  extern __shared__ __align__(16) u16 xs[];                 // a fragment's 8 rows, 8 banks
  const int g = blockIdx.x, c = blockIdx.y, tid = threadIdx.x, lane = tid & 31;
  const int k0 = c * COLS;
  for (int v = tid; v < N * (COLS / 8); v += 256) {  // X's chunk, zeros past its edges
    const int r = v / (COLS / 8), k = k0 + (v % (COLS / 8)) * 8;
    int4 val = make_int4(0, 0, 0, 0);
    if (r < nrows && k < kcols) val = *(const int4*)(x + (i64)r * ldx + k);
    *(int4*)(xs + r * LD + (k - k0)) = val;
  }
  __syncthreads();
  const i64 width = (i64)nout * 8;
  for (int m = tid >> 5; m < G; m += 8) {
    const int j = g * G + m;
    if (j >= nout) break;
    const int* st = starts + (i64)j * (nchunks + 1) + c;
    const int q0 = st[0], q1 = st[1];
    float acc[MT][4] = {};
    for (int win = q0; win < q1; win += 32) {
      const int len = min(32, q1 - win);
      const int my_k = lane < len ? gidx[win + lane] - c * KC : 0;  // lanes past the
      const int my_p = lane < len ? blk[win + lane] : 0;            // window: block 0
      unsigned cur[U], nxt[U] = {};
#pragma unroll
      for (int u = 0; u < U; ++u)
        cur[u] = __ldg((const unsigned*)(w + (i64)__shfl_sync(~0u, my_p, u) * 64) + lane);
      for (int base = 0; base < len; base += U) {
        if (base + U < len) {
#pragma unroll
          for (int u = 0; u < U; ++u) {
            const int p = __shfl_sync(~0u, my_p, (base + U + u) & 31);
            nxt[u] = __ldg((const unsigned*)(w + (i64)p * 64) + lane);
          }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int kb = __shfl_sync(~0u, my_k, (base + u) & 31);
          if (base + u < len) {  // uniform over the warp
            unsigned bf = cur[u];
            if (!TRANS)
              asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(bf)
                           : "r"(cur[u]));
            const u16* a = xs + (lane >> 2) * LD + kb * 8 + (lane & 3) * 2;
#pragma unroll
            for (int t = 0; t < MT; ++t) {
              const unsigned af[2] = {*(const unsigned*)(a + t * 16 * LD),
                                      *(const unsigned*)(a + (t * 16 + 8) * LD)};
              mma1688(Tag(), acc[t], af, bf);
            }
          }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) cur[u] = nxt[u];
      }
    }
    float* out = ws + (i64)c * N * width + (i64)j * 8 + (lane & 3) * 2;
#pragma unroll
    for (int t = 0; t < MT; ++t) {
      const int r = t * 16 + (lane >> 2);
      *(float2*)(out + r * width) = make_float2(acc[t][0], acc[t][1]);
      *(float2*)(out + (r + 8) * width) = make_float2(acc[t][2], acc[t][3]);
    }
  }
}

// Y = alpha * (the chunks' partial products, added in chunk order) + beta * Y, a pair of
// adjacent outputs a thread (grid-stride). `rows` is the workspace's rows per chunk.
template <class Tag>
__global__ void __launch_bounds__(256)
    stream_finish(const float* __restrict__ ws, int nchunks, int rows, int nrows, int width,
                  u16* y, i64 ldy, float alpha, float beta) {
  const int half = width / 2;
  const i64 npairs = (i64)nrows * half, chunk = (i64)rows * width;
  for (i64 v = (i64)blockIdx.x * 256 + threadIdx.x; v < npairs; v += (i64)gridDim.x * 256) {
    const int r = (int)(v / half), cc = (int)(v % half) * 2;
    const float* src = ws + (i64)r * width + cc;
    float2 s = *(const float2*)src;
    for (int k = 1; k < nchunks; ++k) {
      const float2 t = *(const float2*)(src + k * chunk);
      s.x += t.x;
      s.y += t.y;
    }
    store_pair(Tag(), y + (i64)r * ldy + cc, s.x, s.y, alpha, beta);
  }
}
