// dsd on Hopper (sm_90a): dense = dense @ op(block-sparse) with warpgroup MMA (wgmma).
//
// Same work decomposition as dsd.cu: a CTA owns BM rows of X times one output block and
// reduces the block's work list in a fixed order (deterministic, no atomics). The products
// run on wgmma, which reads both operands from shared memory and runs asynchronously:
//
// * Layout: each stage holds A (BM rows of X) and B (b rows of the block, k contiguous) as
//   rows of 64 elements = 128 bytes, in wgmma's 128-byte swizzle: the 16-byte chunk c of
//   row r is stored at chunk c ^ (r % 8). Tiles start on 1024-byte boundaries, so the
//   hardware's address swizzle and ours agree, and neither copies nor MMA reads conflict.
// * Pipeline: STAGES buffers; copies run STAGES - 2 k-slices ahead and one MMA group stays
//   in flight across iterations (wait_group 1). A buffer is refilled two iterations after
//   its MMAs were issued, when every warpgroup has waited for them before the barrier.
// * B is read from `wk`, blocks stored [n][k]: W itself for X @ W.T, and a copy of W with
//   each block transposed (made by the caller, one pass over the non-zeros) for X @ W.
#include "common.cuh"
#include "wgmma.cuh"

// Matrix descriptor for a K-major operand in the 128-byte swizzle: start address, stride
// between 8-row groups (1024 bytes), swizzle mode 1 in bits 62-63; the leading offset is
// unused in this mode (set to 1 by convention).
__device__ __forceinline__ unsigned long long wgmma_desc_sw128(unsigned addr) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) |
         ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
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

template <class Tag, int B, int MW, int WG, int STAGES>
__global__ void __launch_bounds__(WG * 128)
    dsd_wgmma(const u16* __restrict__ x, i64 ldx, int nrows, const u16* __restrict__ wk,
              const int* __restrict__ ptr, const int* __restrict__ blk,
              const int* __restrict__ gidx, const int* __restrict__ order, u16* y, i64 ldy,
              float alpha, float beta) {
  constexpr int BK = 64, THREADS = WG * 128, BM = 64 * MW * WG;
  constexpr int A_BYTES = BM * 128, STAGE_BYTES = (BM + B) * 128, NACC = B / 2;
  static_assert(STAGES >= 3, "copies run STAGES - 2 slices ahead");
  extern __shared__ unsigned char smem_raw[];
  // 1024-byte alignment for the swizzle (the launch adds 1 KiB of slack).
  const unsigned base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  unsigned char* smem = smem_raw + (base - smem_addr(smem_raw));

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

  // Row r, 16-byte chunk c (k = k0 + 8c) of a tile -> swizzled byte offset.
  auto swz = [](int r, int c) { return r * 128 + ((c ^ (r & 7)) << 4); };
  auto load = [&](int stage, int kt) {
    unsigned char* sA = smem + stage * STAGE_BYTES;
    const int k0 = kt * BK;
    // Eight threads cover one 128-byte row: a warp reads 4 rows and writes 512 bytes.
    constexpr int A_SEGS = BM * 8, B_SEGS = B * 8;
#pragma unroll
    for (int it = 0; it < (A_SEGS + THREADS - 1) / THREADS; ++it) {
      const int s = tid + it * THREADS;
      if (A_SEGS % THREADS != 0 && s >= A_SEGS) break;
      const int r = s / 8, c = s % 8, k = k0 + c * 8, item = k / B;
      const bool ok = (row0 + r < nrows) && (item < len);
      const u16* src = ok ? x + (i64)(row0 + r) * ldx + (i64)list.input(item) * B + k % B : x;
      cp_async16(sA + swz(r, c), src, ok ? 16 : 0);
    }
#pragma unroll
    for (int it = 0; it < (B_SEGS + THREADS - 1) / THREADS; ++it) {
      const int s = tid + it * THREADS;
      if (B_SEGS % THREADS != 0 && s >= B_SEGS) break;
      const int n = s / 8, c = s % 8, k = k0 + c * 8, item = k / B;
      const bool ok = item < len;
      const u16* src = ok ? wk + (i64)list.block(item) * (B * B) + n * B + k % B : wk;
      cp_async16(sA + A_BYTES + swz(n, c), src, ok ? 16 : 0);
    }
  };

#pragma unroll
  for (int s = 0; s < STAGES - 2; ++s) {
    if (s < ktiles) load(s, s);
    cp_async_commit();
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<STAGES - 3>();
    fence_proxy_async();  // this thread's copies -> visible to the tensor cores
    __syncthreads();
    const unsigned sA = base + (kt % STAGES) * STAGE_BYTES, sB = sA + A_BYTES;
#pragma unroll
    for (int m = 0; m < MW; ++m) keep_in_registers(acc[m]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {  // k16 steps advance 32 bytes inside the row
      const unsigned long long db = wgmma_desc_sw128(sB + kk * 32);
#pragma unroll
      for (int m = 0; m < MW; ++m)
        Wgmma<Tag, B>::mma(acc[m], wgmma_desc_sw128(sA + (wg * MW + m) * 64 * 128 + kk * 32), db);
    }
    wgmma_commit();
    wgmma_wait<1>();  // the previous slice's MMAs are done; this one keeps running
#pragma unroll
    for (int m = 0; m < MW; ++m) keep_in_registers(acc[m]);
    const int nk = kt + STAGES - 2;
    if (nk < ktiles) load(nk % STAGES, nk);
    cp_async_commit();
  }
  wgmma_wait<0>();
  cp_async_wait<0>();
#pragma unroll
  for (int m = 0; m < MW; ++m) keep_in_registers(acc[m]);

  // Accumulator layout of m64nN: warp w of the warpgroup holds rows 16w..16w+15; for each
  // 8-column chunk c, registers 4c, 4c+1 are (row lane/4, cols 2*(lane%4) + {0, 1}) and
  // 4c+2, 4c+3 the same columns 8 rows down.
#pragma unroll
  for (int m = 0; m < MW; ++m)
#pragma unroll
    for (int c = 0; c < B / 8; ++c)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = row0 + (wg * MW + m) * 64 + wiw * 16 + (lane >> 2) + h * 8;
        if (r < nrows)
          store_pair(Tag(), y + (i64)r * ldy + (i64)j * B + c * 8 + (lane & 3) * 2,
                     acc[m][4 * c + 2 * h], acc[m][4 * c + 2 * h + 1], alpha, beta);
      }
}
