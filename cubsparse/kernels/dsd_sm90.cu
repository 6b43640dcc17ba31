// dsd on Hopper (sm_90a): dense = dense @ op(block-sparse) with warpgroup MMA (wgmma).
//
// Same work decomposition as dsd.cu (a CTA owns BM rows of X times one output block and
// reduces the block's work list in a fixed order: deterministic, no atomics), but the
// products run on wgmma: each warpgroup issues m64 x b x k16 MMAs that read both operands
// straight from shared memory, so no ldmatrix, no operand registers, and the tensor cores
// run asynchronously while the next stages stream in through cp.async.
//
// Operands are staged K-major in wgmma's canonical layout without swizzle: "core matrices"
// of 8 rows x 8 elements stored as 128 contiguous bytes; core matrix (rg, kg) of an
// R x BK tile sits at byte (rg * BK/8 + kg) * 128. A descriptor then names the tile with
// LBO = 128 (next core matrix along k) and SBO = BK/8 * 128 (next along m or n).
// The B operand is read from `wk`, blocks stored [n][k]: W itself for X @ W.T, and a
// block-transposed copy of W (made by the caller, one pass over the non-zeros) for X @ W.
#include "common.cuh"
#include "wgmma.cuh"

__device__ __forceinline__ unsigned long long wgmma_desc(const void* p, int lbo, int sbo) {
  const unsigned long long a = smem_addr(p);
  return ((a & 0x3FFFF) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |
         ((unsigned long long)(sbo >> 4) << 32);  // bits 62-63 = 0: no swizzle
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_wait0() {
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
template <int R>
__device__ __forceinline__ void keep_in_registers(float (&d)[R]) {
  // Stops the compiler from moving accumulator reads/writes across the asynchronous MMA.
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Copy an R x BK slice (rows `row(r)`, columns k0..k0+BK of a virtual k axis made of the
// work list's blocks) into the core-matrix layout. Eight consecutive threads take eight
// rows of one 16-byte column, so a warp reads 64 contiguous bytes from each of 8 rows and
// writes 512 contiguous bytes of shared memory.
template <int R, int BK, int THREADS, class Src>
__device__ __forceinline__ void load_core_tile(unsigned char* dst, int tid, Src src) {
  constexpr int KS = BK / 8, SEGS = R * KS;
#pragma unroll
  for (int it = 0; it < (SEGS + THREADS - 1) / THREADS; ++it) {
    const int s = tid + it * THREADS;
    if (SEGS % THREADS != 0 && s >= SEGS) break;
    const int rl = s % 8, c = (s / 8) % KS, rg = s / (8 * KS);
    const int r = rg * 8 + rl;
    int bytes;
    const void* g = src(r, c * 8, bytes);
    cp_async16(dst + (rg * KS + c) * 128 + rl * 16, g, bytes);
  }
}

template <class Tag, int B, int MW, int WG, int BK, int STAGES>
__global__ void __launch_bounds__(WG * 128)
    dsd_wgmma(const u16* __restrict__ x, i64 ldx, int nrows, const u16* __restrict__ wk,
              const int* __restrict__ ptr, const int* __restrict__ blk,
              const int* __restrict__ gidx, const int* __restrict__ order, u16* y, i64 ldy,
              float alpha, float beta) {
  constexpr int THREADS = WG * 128, BM = 64 * MW * WG, KS = BK / 8;
  constexpr int A_BYTES = BM * BK * 2, STAGE_BYTES = A_BYTES + B * BK * 2;
  constexpr int NACC = B / 2;
  extern __shared__ __align__(128) unsigned char smem[];
  const int j = order[blockIdx.x];
  const int row0 = blockIdx.y * BM;
  const int tid = threadIdx.x, wg = tid / 128, lane = tid & 31, wiw = (tid % 128) / 32;
  const int q0 = ptr[j], len = ptr[j + 1] - q0;
  const int ktiles = (len * B + BK - 1) / BK;
  __shared__ int s_g[LIST_CAP], s_p[LIST_CAP];
  const WorkList list = load_work_list(s_g, s_p, gidx, blk, q0, len, tid, THREADS);

  float acc[MW][NACC];
#pragma unroll
  for (int m = 0; m < MW; ++m)
#pragma unroll
    for (int i = 0; i < NACC; ++i) acc[m][i] = 0.f;

  auto load = [&](int stage, int kt) {
    unsigned char* sA = smem + stage * STAGE_BYTES;
    const int k0 = kt * BK;
    load_core_tile<BM, BK, THREADS>(sA, tid, [&](int r, int kc, int& bytes) -> const void* {
      const int k = k0 + kc, item = k / B;
      const bool ok = (row0 + r < nrows) && (item < len);
      bytes = ok ? 16 : 0;
      return ok ? x + (i64)(row0 + r) * ldx + (i64)list.input(item) * B + k % B : x;
    });
    load_core_tile<B, BK, THREADS>(sA + A_BYTES, tid, [&](int n, int kc, int& bytes) -> const void* {
      const int k = k0 + kc, item = k / B;
      const bool ok = item < len;
      bytes = ok ? 16 : 0;
      return ok ? wk + (i64)list.block(item) * (B * B) + n * B + k % B : wk;
    });
  };

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < ktiles) load(s, s);
    cp_async_commit();
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<STAGES - 2>();
    fence_proxy_async();  // make this thread's cp.async data visible to the tensor cores
    __syncthreads();
    const unsigned char* sA = smem + (kt % STAGES) * STAGE_BYTES;
    const unsigned char* sB = sA + A_BYTES;
#pragma unroll
    for (int m = 0; m < MW; ++m) keep_in_registers(acc[m]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      const unsigned long long db = wgmma_desc(sB + kk * 2 * 128, 128, KS * 128);
#pragma unroll
      for (int m = 0; m < MW; ++m) {
        const unsigned long long da =
            wgmma_desc(sA + ((wg * MW + m) * 8 * KS + kk * 2) * 128, 128, KS * 128);
        Wgmma<Tag, B>::mma(acc[m], da, db);
      }
    }
    wgmma_commit();
    // While the tensor cores work, queue the copies for a later stage. Its buffer was
    // read by the previous iteration's MMAs, which completed before the barrier above.
    const int nk = kt + STAGES - 1;
    if (nk < ktiles) load(nk % STAGES, nk);
    cp_async_commit();
    wgmma_wait0();  // the stage is refilled after the next barrier: all reads must be done
#pragma unroll
    for (int m = 0; m < MW; ++m) keep_in_registers(acc[m]);
  }
  cp_async_wait<0>();

  // Accumulator layout of m64nN: warp w of the warpgroup holds rows 16w..16w+15; for each
  // 8-column chunk c, registers 4c..4c+1 are (row lane/4, cols 2*(lane%4)+{0,1}) and
  // 4c+2..4c+3 the same columns 8 rows down.
#pragma unroll
  for (int m = 0; m < MW; ++m)
#pragma unroll
    for (int c = 0; c < B / 8; ++c)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = row0 + (wg * MW + m) * 64 + wiw * 16 + (lane >> 2) + h * 8;
        const int col = c * 8 + (lane & 3) * 2;
        if (r < nrows) {
          unsigned* dst = (unsigned*)(y + (i64)r * ldy + (i64)j * B + col);
          float o0 = 0.f, o1 = 0.f;
          if (beta != 0.f) {
            const unsigned old = *dst;
            o0 = to_f32(Tag(), (u16)(old & 0xffff));
            o1 = to_f32(Tag(), (u16)(old >> 16));
          }
          const u16 v0 = from_f32(Tag(), axpby(acc[m][4 * c + 2 * h], alpha, beta, o0));
          const u16 v1 = from_f32(Tag(), axpby(acc[m][4 * c + 2 * h + 1], alpha, beta, o1));
          *dst = (unsigned)v0 | ((unsigned)v1 << 16);
        }
      }
}
