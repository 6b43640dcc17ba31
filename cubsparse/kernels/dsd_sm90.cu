// dsd on Hopper (sm_90a): dense = dense @ op(block-sparse) with warpgroup MMA (wgmma).
//
// The work decomposition of dsd.cu (a CTA owns output blocks and reduces their lists in a
// fixed order; split lists write float32 partials), with two changes: a CTA may own a
// group of adjacent output blocks, and the products run on wgmma, which reads both
// operands from shared memory and runs asynchronously:
//
// * Layout: each stage holds A (BM rows of X) and B (b rows of the block, k contiguous) as
//   rows of 64 elements = 128 bytes in wgmma's 128-byte swizzle: 16-byte chunk c of row r
//   is stored at chunk c ^ (r % 8). Tiles start on 1024-byte boundaries, so the hardware's
//   swizzle and ours agree, and neither the copies nor the MMA reads conflict.
// * Pipeline: `wgmma_pipeline` (sm90.cuh): STAGES buffers, copies STAGES - 2 slices ahead,
//   one MMA group in flight across iterations.
// * Copy plan: eight threads cover one 128-byte row and a thread keeps its chunk for the
//   whole list, so its row pointers and swizzled offsets are computed once; a stage costs
//   one work-list lookup per operand and a pointer add per copy.
// * B is read from `wk`, blocks stored [n][k]: W itself for X @ W.T, and for X @ W a copy
//   of W with each block transposed (made by the caller, one pass over the non-zeros),
//   except where the single-block kernel reads W as stored (KN, an N-major B tile).
#include "common.cuh"
#include "sm90.cuh"
#include "wgmma.cuh"

// A CTA computes BM rows of X by a group of G adjacent output blocks (G * B columns of Y)
// and walks the union of the members' lists, so a slice of X is loaded once for every
// member that uses it (G > 1; one block per CTA runs dsd_wgmma_single below):
//   !SWAP  Y tile = X tile @ block, one m64nB wgmma per present block and m64 row tile
//          (MW per warpgroup, WG warpgroups: BM = 64 * MW * WG); absent blocks are neither
//          copied nor multiplied.
//    SWAP  the transposed product, Y tile^T = W blocks^T @ X tile^T, for small blocks:
//          warpgroup w owns the 64 / B members that fill an m64 tile of W.T's rows and
//          multiplies them with all BM = 64 * MW rows of X in one m64nBM wgmma per k16 step
//          (N up to 256, where wgmma runs at full rate). Absent blocks are zero-filled and
//          multiplied (a branch on the warpgroup would serialize the wgmmas), so a
//          non-finite X value can reach outputs that do not read it: opt-in only.
// The shared-memory tiles are the same in both (X rows and W blocks, K-major): in SWAP the
// X tile is the wgmma's B operand and the W tile its A operand.
template <class Tag, int B, int G, int MW, int WG, int STAGES, bool SWAP>
__global__ void __launch_bounds__(WG * 128)
    dsd_wgmma(const u16* __restrict__ x, i64 ldx, int nrows, int nout,
              const u16* __restrict__ wk, const int4* __restrict__ work,
              const int* __restrict__ blk, const int* __restrict__ gidx, u16* y, i64 ldy,
              float alpha, float beta, float* ws, i64 ws_stride) {
  constexpr int BK = 64, THREADS = WG * 128, BN = G * B;
  constexpr int BM = SWAP ? 64 * MW : 64 * MW * WG;  // rows of X
  constexpr int A_BYTES = BM * 128, STAGE_BYTES = (BM + BN) * 128;
  constexpr int P = SWAP ? 64 / B : 1;  // members per warpgroup (SWAP)
  // Accumulators: AR tiles of AN float32 registers per thread.
  constexpr int AR = SWAP ? 1 : MW * G, AN = SWAP ? BM / 2 : B / 2;
  constexpr int RSTEP = THREADS / 8;  // rows between a thread's successive copies
  constexpr int A_IT = BM / RSTEP, B_IT = (BN + RSTEP - 1) / RSTEP;
  constexpr int CAP = 256;
  constexpr int EK = B / 16;  // k16 steps of one entry in a slice
  static_assert(RSTEP % 8 == 0, "a thread's swizzle phase must not change between its rows");
  static_assert(G > 1 && B >= 16 && B <= BK, "groups of blocks spanning whole k16 steps");
  static_assert(SWAP || (BK / 16) * G <= 32, "a stage's presence bits fit in a word");
  static_assert(!SWAP || (B <= 64 && G == WG * P && BM <= 256), "bad SWAP tile");
  extern __shared__ unsigned char smem_raw[];
  // 1024-byte alignment for the swizzle (the launch adds 1 KiB of slack).
  const unsigned base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  unsigned char* smem = smem_raw + (base - smem_addr(smem_raw));

  const int4 item = work[blockIdx.x];
  const int grp = item.x, q0 = item.y, len = item.z, slot = item.w;
  const int row0 = blockIdx.y * BM;
  const int tid = threadIdx.x, wg = tid / 128, lane = tid & 31, wiw = (tid % 128) / 32;
  const int ktiles = (len * B + BK - 1) / BK;
  __shared__ int s_g[CAP], s_p[CAP * G], s_m[SWAP ? 1 : CAP];
  // SWAP multiplies every slot and reads no presence masks
  const GroupList<G, CAP> list =
      load_group_list<G, CAP, !SWAP>(s_g, s_p, s_m, gidx, blk, q0, len, tid, THREADS);

  float acc[AR][AN];  // !SWAP: acc[m * G + i] is m64 tile m of member i
#pragma unroll
  for (int a = 0; a < AR; ++a)
#pragma unroll
    for (int r = 0; r < AN; ++r) acc[a][r] = 0.f;

  // Copy plan: this thread's rows r0, r0 + RSTEP, ... and chunk c of every slice; the
  // chunk's list entry within a slice and, for B, the member of each row are fixed too.
  const int r0 = tid / 8, c = tid % 8;
  const int dst0 = r0 * 128 + ((c ^ (r0 & 7)) << 4);  // swizzle phase shared by its rows
  const u16* a_row = x + (i64)(row0 + r0) * ldx;
  const i64 a_step = (i64)RSTEP * ldx;
  unsigned a_ok = 0;
#pragma unroll
  for (int it = 0; it < A_IT; ++it)
    if (row0 + r0 + it * RSTEP < nrows) a_ok |= 1u << it;

  auto load = [&](int stage, int kt) {
    unsigned char* sA = smem + stage * STAGE_BYTES;
    const unsigned k = kt * BK + c * 8, e = k / B, off = k % B;
    const bool live = e < (unsigned)len;
    if (!SWAP && !live) return;  // past the list: never multiplied
    const u16* asrc = a_row + (i64)list.input(live ? e : 0) * B + off;
#pragma unroll
    for (int it = 0; it < A_IT; ++it) {
      const bool ok = live && ((a_ok >> it) & 1u);  // rows past X are zero-filled
      cp_async16(sA + dst0 + it * RSTEP * 128, ok ? asrc + it * a_step : x, ok ? 16 : 0);
    }
#pragma unroll
    for (int it = 0; it < B_IT; ++it) {
      const int r = r0 + it * RSTEP;  // row of the B tile: member r / B, column r % B
      if (BN % RSTEP != 0 && r >= BN) break;
      const int p = live ? list.block(e, r / B) : -1;
      unsigned char* dst = sA + A_BYTES + dst0 + it * RSTEP * 128;
      if (SWAP)  // a dead entry or an absent block is zero-filled
        cp_async16(dst, p >= 0 ? wk + (i64)p * (B * B) + (r % B) * B + off : wk, p >= 0 ? 16 : 0);
      else if (p >= 0)  // an absent block is neither copied nor multiplied
        cp_async16(dst, wk + (i64)p * (B * B) + (r % B) * B + off, 16);
    }
  };

  wgmma_pipeline<STAGES>(ktiles, acc, load, [&](int stage, int kt) {
    const unsigned sA = base + stage * STAGE_BYTES, sB = sA + A_BYTES;
    if constexpr (SWAP) {
#pragma unroll
      for (int kk = 0; kk < BK / 16; ++kk)  // k16 steps: 32 bytes each
        Wgmma<Tag, BM>::mma(acc[0], wgmma_desc_sw128(sB + wg * 64 * 128 + kk * 32),
                            wgmma_desc_sw128(sA + kk * 32));
    } else {
      // Presence bit el * G + i: entry el of this slice has a block for member i.
      unsigned present = 0;
#pragma unroll
      for (int el = 0; el < BK / 16 / EK; ++el) {
        const int e = (kt * BK + el * EK * 16) / B;
        if (e < len) present |= list.mask(e) << (el * G);
      }
#pragma unroll
      for (int el = 0; el < BK / 16 / EK; ++el)
#pragma unroll
        for (int i = 0; i < G; ++i)
          if ((present >> (el * G + i)) & 1u) {
#pragma unroll
            for (int kk = el * EK; kk < (el + 1) * EK; ++kk) {
              const unsigned long long db = wgmma_desc_sw128(sB + i * B * 128 + kk * 32);
#pragma unroll
              for (int m = 0; m < MW; ++m)
                Wgmma<Tag, B>::mma(acc[m * G + i],
                                   wgmma_desc_sw128(sA + (wg * MW + m) * 64 * 128 + kk * 32), db);
            }
          }
    }
  });

  // Accumulator layout of m64nN: warp w of the warpgroup holds rows 16w..16w+15; for each
  // 8-column chunk q, registers 4q, 4q+1 are (row lane/4, columns 2*(lane%4) + {0, 1}) and
  // 4q+2, 4q+3 the same columns 8 rows down.
  if constexpr (SWAP) {
    // Rows of the tile are Y's columns and columns its rows: transpose_pair turns a
    // thread's register pair (two rows of Y) into two adjacent columns of one row.
#pragma unroll
    for (int q = 0; q < BM / 8; ++q)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float s0, s1;
        const bool even =
            transpose_pair(lane, acc[0][4 * q + 2 * h], acc[0][4 * q + 2 * h + 1], s0, s1);
        const int m = wiw * 16 + (lane >> 2) + h * 8 - (even ? 0 : 1);  // even column
        const int r = row0 + q * 8 + (lane & 3) * 2 + (even ? 0 : 1);
        const int i = wg * P + m / B, col = m % B, j = grp * G + i;
        if (r >= nrows || j >= nout) continue;
        if (slot < 0)
          store_pair(Tag(), y + (i64)r * ldy + (i64)j * B + col, s0, s1, alpha, beta);
        else
          *(float2*)(ws + slot * ws_stride + (i64)r * BN + i * B + col) = make_float2(s0, s1);
      }
  } else {
#pragma unroll
    for (int i = 0; i < G; ++i) {
      const int j = grp * G + i;  // output block; the last group may be partial
      if (G > 1 && j >= nout) break;
#pragma unroll
      for (int m = 0; m < MW; ++m)
#pragma unroll
        for (int q = 0; q < B / 8; ++q)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int r = row0 + (wg * MW + m) * 64 + wiw * 16 + (lane >> 2) + h * 8;
            const int col = q * 8 + (lane & 3) * 2;
            const float v0 = acc[m * G + i][4 * q + 2 * h], v1 = acc[m * G + i][4 * q + 2 * h + 1];
            if (r >= nrows) continue;
            if (slot < 0)
              store_pair(Tag(), y + (i64)r * ldy + (i64)j * B + col, v0, v1, alpha, beta);
            else  // one segment of a split list: its partial product (G * B wide), unscaled
              *(float2*)(ws + slot * ws_stride + (i64)r * BN + i * B + col) = make_float2(v0, v1);
          }
    }
  }
}

// One output block per CTA (the common case, b >= 32): the kernel above without groups,
// kept separate because its leaner copy loop is 6-9 % faster (b = 64/128, H200). Its three
// parts (copy plan, MMAs of a slice, epilogue) are shared with the persistent kernel below.
// MW m64 tiles per warpgroup, WG warpgroups: BM = 64 * MW * WG rows of X per tile.
// KN: `wk` holds the blocks as W stores them, [k][n] (X @ W), and the B tile is kept
// N-major (rows of k, wgmma's transposed B), so no transposed copy of W is needed.

// Copy plan of THREADS copying threads: rows r0, r0 + RSTEP, ... and chunk c of each
// slice's X rows (and of the B tile's rows unless KN); with KN, chunk kn_c of the slice's
// rows of k kn_r0, kn_r0 + KN_RS, ... The tile-independent part is set once per thread,
// the row part once per tile (`start`).
template <int B, int BM, int THREADS, bool KN>
struct SingleCopy {
  static constexpr int BK = 64, A_BYTES = BM * 128;
  static constexpr int RSTEP = THREADS / 8;  // rows between a thread's successive copies
  static constexpr int A_IT = BM / RSTEP, B_IT = (B + RSTEP - 1) / RSTEP;
  static constexpr int KN_CH = B / 8, KN_RS = THREADS / KN_CH, KN_IT = (BK + KN_RS - 1) / KN_RS;
  static_assert(RSTEP % 8 == 0, "a thread's swizzle phase must not change between its rows");
  int r0, c, dst0, kn_c, kn_r0;
  unsigned kn_dst[KN ? KN_IT : 1];
  const u16* a_row;
  i64 a_step;
  unsigned a_ok;

  __device__ __forceinline__ explicit SingleCopy(int tid) {
    r0 = tid / 8;
    c = tid % 8;
    dst0 = r0 * 128 + ((c ^ (r0 & 7)) << 4);  // swizzle phase shared by its rows
    kn_c = tid % KN_CH;
    kn_r0 = tid / KN_CH;
#pragma unroll
    for (int it = 0; it < (KN ? KN_IT : 1); ++it)
      kn_dst[it] = MnTile<B, BK>::offset(kn_r0 + it * KN_RS, kn_c);
  }
  __device__ __forceinline__ void start(const u16* x, i64 ldx, int row0, int nrows) {
    a_row = x + (i64)(row0 + r0) * ldx;
    a_step = (i64)RSTEP * ldx;
    a_ok = 0;
#pragma unroll
    for (int it = 0; it < A_IT; ++it)
      if (row0 + r0 + it * RSTEP < nrows) a_ok |= 1u << it;
  }
  // Issues slice kt's copies into the stage at sA; rows past X and entries past the list
  // are zero-filled.
  template <class List>
  __device__ __forceinline__ void load(unsigned char* sA, int kt, const List& list, int len,
                                       const u16* x, const u16* wk) const {
    const unsigned k = kt * BK + c * 8, it_k = k / B, off = k % B;
    const bool live = it_k < (unsigned)len;
    const u16* asrc = a_row + (i64)list.input(live ? it_k : 0) * B + off;
#pragma unroll
    for (int it = 0; it < A_IT; ++it) {
      const bool ok = live && ((a_ok >> it) & 1u);
      cp_async16(sA + dst0 + it * RSTEP * 128, ok ? asrc + it * a_step : x, ok ? 16 : 0);
    }
    if constexpr (KN) {  // rows k of the slice, each B wide; a slice spans 64 / B entries
      const int k0 = kt * BK;
#pragma unroll
      for (int it = 0; it < KN_IT; ++it) {
        const int r = kn_r0 + it * KN_RS;
        if (KN_RS > BK && r >= BK) break;
        const unsigned e = (k0 + r) / B;
        const bool ok = e < (unsigned)len;
        const u16* src = wk + (i64)list.block(ok ? e : 0) * (B * B) + ((k0 + r) % B) * B + kn_c * 8;
        cp_async16(sA + A_BYTES + kn_dst[it], ok ? src : wk, ok ? 16 : 0);
      }
    } else {
      const u16* bsrc = wk + (i64)list.block(live ? it_k : 0) * (B * B) + r0 * B + off;
#pragma unroll
      for (int it = 0; it < B_IT; ++it) {
        if (B % RSTEP != 0 && r0 + it * RSTEP >= B) break;
        cp_async16(sA + A_BYTES + dst0 + it * RSTEP * 128, live ? bsrc + it * RSTEP * B : wk,
                   live ? 16 : 0);
      }
    }
  }
};

// The wgmmas of one 64-deep slice for warpgroup wg: MW m64nB tiles, A at sA, B at sB.
template <class Tag, int B, int MW, bool KN>
__device__ __forceinline__ void single_mma(float (&acc)[MW][B / 2], unsigned sA, unsigned sB,
                                           int wg) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {  // k16 steps advance 32 bytes inside the row
    const unsigned long long db = KN ? MnTile<B, 64>::desc(sB, 0, kk) : wgmma_desc_sw128(sB + kk * 32);
#pragma unroll
    for (int m = 0; m < MW; ++m)
      Wgmma<Tag, B, KN ? 2 : 0>::mma(
          acc[m], wgmma_desc_sw128(sA + (wg * MW + m) * 64 * 128 + kk * 32), db);
  }
}

// Stores warpgroup wg's accumulators: Y block j (slot < 0) or the float32 partial of one
// segment of a split list, unscaled, in rows of WS_LD floats. Accumulator layout of m64nN:
// warp w of the warpgroup holds rows 16w..16w+15; for each 8-column chunk q, registers 4q,
// 4q+1 are (row lane/4, columns 2*(lane%4) + {0, 1}) and 4q+2, 4q+3 the same columns 8
// rows down.
template <class Tag, int B, int MW, int WS_LD = B>
__device__ __forceinline__ void single_store(const float (&acc)[MW][B / 2], int wg, int tid,
                                             int row0, int nrows, int j, int slot, u16* y,
                                             i64 ldy, float alpha, float beta, float* ws,
                                             i64 ws_stride) {
  const int lane = tid & 31, wiw = (tid % 128) / 32;
#pragma unroll
  for (int m = 0; m < MW; ++m)
#pragma unroll
    for (int q = 0; q < B / 8; ++q)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = row0 + (wg * MW + m) * 64 + wiw * 16 + (lane >> 2) + h * 8;
        const int col = q * 8 + (lane & 3) * 2;
        if (r >= nrows) continue;
        if (slot < 0)
          store_pair(Tag(), y + (i64)r * ldy + (i64)j * B + col, acc[m][4 * q + 2 * h],
                     acc[m][4 * q + 2 * h + 1], alpha, beta);
        else
          *(float2*)(ws + slot * ws_stride + (i64)r * WS_LD + col) =
              make_float2(acc[m][4 * q + 2 * h], acc[m][4 * q + 2 * h + 1]);
      }
}

template <class Tag, int B, int MW, int WG, int STAGES, bool KN>
__global__ void __launch_bounds__(WG * 128)
    dsd_wgmma_single(const u16* __restrict__ x, i64 ldx, int nrows, const u16* __restrict__ wk,
              const int4* __restrict__ work, const int* __restrict__ blk,
              const int* __restrict__ gidx, u16* y, i64 ldy, float alpha, float beta,
              float* ws, i64 ws_stride) {
  constexpr int THREADS = WG * 128, BM = 64 * MW * WG;
  constexpr int A_BYTES = BM * 128, STAGE_BYTES = (BM + B) * 128;
  extern __shared__ unsigned char smem_raw[];
  // 1024-byte alignment for the swizzle (the launch adds 1 KiB of slack).
  const unsigned base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  unsigned char* smem = smem_raw + (base - smem_addr(smem_raw));

  const int4 item = work[blockIdx.x];
  const int j = item.x, q0 = item.y, len = item.z, slot = item.w;
  const int row0 = blockIdx.y * BM;
  const int tid = threadIdx.x, wg = tid / 128;
  const int ktiles = (len * B + 63) / 64;
  __shared__ int s_g[LIST_CAP], s_p[LIST_CAP];
  const WorkList list = load_work_list(s_g, s_p, gidx, blk, q0, len, tid, THREADS);

  float acc[MW][B / 2];
#pragma unroll
  for (int m = 0; m < MW; ++m)
#pragma unroll
    for (int i = 0; i < B / 2; ++i) acc[m][i] = 0.f;

  SingleCopy<B, BM, THREADS, KN> copy(tid);
  copy.start(x, ldx, row0, nrows);
  wgmma_pipeline<STAGES>(
      ktiles, acc,
      [&](int stage, int kt) { copy.load(smem + stage * STAGE_BYTES, kt, list, len, x, wk); },
      [&](int stage, int) {
        const unsigned sA = base + stage * STAGE_BYTES;
        single_mma<Tag, B, MW, KN>(acc, sA, sA + A_BYTES, wg);
      });
  single_store<Tag, B, MW>(acc, wg, tid, row0, nrows, j, slot, y, ldy, alpha, beta, ws, ws_stride);
}

// The single-block kernel made persistent and warp-specialized, so that a tile's pipeline
// fill and epilogue overlap other work instead of leaving the tensor cores idle:
// * gridDim.x CTAs (a few per SM) walk the tiles t = blockIdx.x, + gridDim.x, ...; tile t
//   is work item t % nwork of row tile t / nwork, so the CTAs running at one time share
//   rows of X in L2. Each tile is still reduced by one CTA in list order: deterministic.
// * A producer warpgroup (the last 128 threads) issues every copy: it waits for a stage to
//   be released (`empty`), fills it with cp.async and has the copies arrive on `full` as
//   they land. It runs up to STAGES slices ahead, across tile boundaries, so the next
//   tile's first slices load while the consumers store the last one.
// * WG consumer warpgroups wait on `full`, issue the wgmmas and release a stage once the
//   wgmmas reading it are done. INFLIGHT = 1 keeps one slice's wgmmas running while the
//   next slice is awaited (a consumer then holds two stages); INFLIGHT = 0 waits for them
//   and releases the stage at once, leaving one more stage to the producer (the other CTAs
//   on the SM keep the tensor cores busy meanwhile).
template <class Tag, int B, int MW, int WG, int STAGES, bool KN, int MINB, int INFLIGHT>
__global__ void __launch_bounds__((WG + 1) * 128, MINB)
    dsd_wgmma_ws(const u16* __restrict__ x, i64 ldx, int nrows, const u16* __restrict__ wk,
                 const int4* __restrict__ work, int nwork, const int* __restrict__ blk,
                 const int* __restrict__ gidx, u16* y, i64 ldy, float alpha, float beta,
                 float* ws, i64 ws_stride) {
  constexpr int BM = 64 * MW * WG, CONSUMERS = WG * 128;
  constexpr int A_BYTES = BM * 128, STAGE_BYTES = (BM + B) * 128;
  extern __shared__ unsigned char smem_raw[];
  const unsigned base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  unsigned char* smem = smem_raw + (base - smem_addr(smem_raw));
  __shared__ unsigned long long full[STAGES], empty[STAGES];
  __shared__ int s_g[LIST_CAP], s_p[LIST_CAP];
  const int tid = threadIdx.x;
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 128);             // one cp.async arrival per producer thread
      mbar_init(&empty[s], CONSUMERS / 32);  // one arrival per consumer warp
    }
  }
  __syncthreads();  // the only CTA-wide barrier: the roles never meet again
  const int ntiles = nwork * ((nrows + BM - 1) / BM);
  unsigned it = 0;  // slices through the pipeline so far (this thread's count)

  if (tid >= CONSUMERS) {  // producer
    const int ptid = tid - CONSUMERS;
    SingleCopy<B, BM, 128, KN> copy(ptid);
    for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
      const int4 item = work[t % nwork];
      const int q0 = item.y, len = item.z;
      named_barrier_sync(1, 128);  // every producer thread is done with the previous list
      fill_work_list(s_g, s_p, gidx, blk, q0, len, ptid, 128);
      named_barrier_sync(1, 128);
      const WorkList list{s_g, s_p, gidx, blk, q0};
      copy.start(x, ldx, (t / nwork) * BM, nrows);
      const int ktiles = (len * B + 63) / 64;
      for (int kt = 0; kt < ktiles; ++kt, ++it) {
        const int s = it % STAGES;
        mbar_wait(&empty[s], ((it / STAGES) & 1) ^ 1);  // the first round passes at once
        copy.load(smem + s * STAGE_BYTES, kt, list, len, x, wk);
        cp_async_mbar_arrive(&full[s]);
      }
    }
    cp_async_wait<0>();
    return;
  }

  const int wg = tid / 128;  // consumer warpgroup
  float acc[MW][B / 2];
  for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
    const int4 item = work[t % nwork];
    const int j = item.x, len = item.z, slot = item.w;
    const int ktiles = (len * B + 63) / 64;
    consume_tile<STAGES, INFLIGHT, true>(ktiles, it, acc, full, empty, tid, [&](int s) {
      const unsigned sA = base + s * STAGE_BYTES;
      single_mma<Tag, B, MW, KN>(acc, sA, sA + A_BYTES, wg);
    });
    single_store<Tag, B, MW>(acc, wg, tid, (t / nwork) * BM, nrows, j, slot, y, ldy, alpha,
                             beta, ws, ws_stride);
  }
}

// Stores warpgroup wg's m64nXN accumulator of the transposed product (rows: the block's
// columns 64 wg.., columns: XN rows of X) as single_store does. Register pair (4q + 2h,
// + 1) holds column c = 64 wg + 16 w + lane / 4 + 8 h at X rows 8 q + 2 (lane % 4) + {0, 1},
// and lanes l, l ^ 4 hold adjacent columns: trading one value (transpose_pair) gives each
// lane one X row at two adjacent columns, a 4-byte store.
template <class Tag, int B, int XN>
__device__ __forceinline__ void rows_n_store(const float (&acc)[XN / 2], int wg, int tid,
                                             int row0, int nrows, int j, int slot, u16* y,
                                             i64 ldy, float alpha, float beta, float* ws,
                                             i64 ws_stride) {
  const int lane = tid & 31, wiw = (tid % 128) / 32;
#pragma unroll
  for (int q = 0; q < XN / 8; ++q)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float s0, s1;
      const bool even = transpose_pair(lane, acc[4 * q + 2 * h], acc[4 * q + 2 * h + 1], s0, s1);
      const int r = row0 + q * 8 + (lane & 3) * 2 + (even ? 0 : 1);
      const int col = wg * 64 + wiw * 16 + (lane >> 2) + h * 8 - (even ? 0 : 1);
      if (r >= nrows) continue;
      if (slot < 0)
        store_pair(Tag(), y + (i64)r * ldy + (i64)j * B + col, s0, s1, alpha, beta);
      else
        *(float2*)(ws + slot * ws_stride + (i64)r * B + col) = make_float2(s0, s1);
    }
}

// Tiles handed out at run time: a persistent CTA takes its first tile by blockIdx.x and
// each next one from a global counter (`next_tile`, zero at launch), so CTAs that
// drew short lists take more tiles instead of the kernel waiting on the unluckiest one: at
// b = 128, d = 0.25 (lists of 8 +- 2.4 blocks) the fixed stride gave the busiest CTA 1.27x
// the mean work. Tiles are still taken in order, so the CTAs running at one time share
// rows of X, and each tile is reduced by one CTA in list order: the results do not depend
// on which CTA takes which tile. The producer's lane 0 takes the tiles and passes each to
// the consumers through a ring of DEPTH slots in shared memory (a tile of an empty list
// has no slice to pace the producer, so the ring itself does); `n` counts the tiles the
// calling thread has passed through it. The barriers order each slot's write before its
// reads and the reads before the next write; the slot is still accessed atomically,
// since compute-sanitizer's racecheck flagged plain stores and loads handed over by
// mbarrier alone.
struct TileQueue {
  static constexpr int DEPTH = 4;
  unsigned long long full[DEPTH], empty[DEPTH];
  int tile[DEPTH];

  __device__ __forceinline__ void init(int consumer_warps) {
#pragma unroll
    for (int q = 0; q < DEPTH; ++q) {
      mbar_init(&full[q], 1);
      mbar_init(&empty[q], consumer_warps);
    }
  }
  // The producer warp's next tile (every lane gets it). Tiles past the first are handed
  // out once each and every CTA makes one last request that finds none left, so a launch
  // makes exactly `ntiles` requests: the one that reads ntiles - 1 is the last and puts
  // the counter back to zero for the next launch on the stream (no memset per call).
  __device__ __forceinline__ int next(int* counter, int ntiles, int lane) const {
    int t = 0;
    if (lane == 0) {
      const int c = atomicAdd(counter, 1);
      if (c == ntiles - 1) atomicExch(counter, 0);
      t = gridDim.x + c;
    }
    return __shfl_sync(0xffffffffu, t, 0);
  }
  __device__ __forceinline__ void publish(int t, unsigned& n) {
    const int q = n % DEPTH;
    mbar_wait(&empty[q], ((n / DEPTH) & 1) ^ 1);  // the first round passes at once
    atomicExch(&tile[q], t);
    mbar_arrive(&full[q]);  // releases the write
    ++n;
  }
  __device__ __forceinline__ int take(int tid, unsigned& n) {
    const int q = n % DEPTH;
    mbar_wait(&full[q], (n / DEPTH) & 1);
    const int t = atomicAdd(&tile[q], 0);
    __syncwarp();  // every lane has read the slot
    if ((tid & 31) == 0) mbar_arrive(&empty[q]);
    ++n;
    return t;
  }
};

// dsd_wgmma_ws with its copies made by the TMA engine. The cp.async producer warpgroup
// spends its issue slots on 16-byte copies, and its stages arrived about 1,400 cycles
// apart at b = 128 against about 500 cycles of MMAs each (NOTES 47); here one thread of a
// producer warp issues a tensor copy per operand tile, and the copy engine moves the
// bytes. Each list entry contributes a tile of X (BM rows, EK = min(B, 64) columns) and a
// tile of its block (EK deep) per 64-deep slice, as rows of SW = 2 * EK bytes in the
// SW-byte swizzle (the tensor maps ask for it): b = 64/128 fill one 128-byte tile per
// slice, b = 32 two 64-byte ones (X's in boxes of at most 256 rows, the TMA limit, so a
// 512-row tile takes two). A slice's entries past the list read out-of-bounds
// boxes, which land as zeros, so the consumers never branch around a wgmma.
// The tensor maps: `xmap` over X (nrows x xcols), `wmap` over the blocks as rows, [n][k]
// (K-major) or, with KN, as W stores them, [k][n], read N-major in 64-column panels.
// XN > 0 (b = 64, 128): the transposed product, Y tile^T = block^T @ X tile^T, with the
// tile's XN rows of X as wgmma's N and each of the WG = b / 64 consumer warpgroups owning
// 64 of the block's columns as M (MW = 1). One m64nXN wgmma per k16 step reads 2 KB of
// the block and XN * 32 bytes of X from shared memory, where the m64nB form rereads the
// block for every m64 tile of rows: at b = 128 two m64n128 read 12 KB per 128 tensor
// cycles, two m64n256 20 KB per 256. The epilogue trades values between lane pairs
// (transpose_pair) to store pairs of adjacent columns.
template <class Tag, int B, int MW, int WG, int STAGES, bool KN, int MINB, int INFLIGHT,
          int XN = 0>
__global__ void __launch_bounds__(WG * 128 + 32, MINB)
    dsd_wgmma_tma(const __grid_constant__ TmaMap xmap, const __grid_constant__ TmaMap wmap,
                  int nrows, int xcols, int wrows, const int4* __restrict__ work, int nwork,
                  const int* __restrict__ blk, const int* __restrict__ gidx, u16* y, i64 ldy,
                  float alpha, float beta, float* ws, i64 ws_stride, int* next_tile) {
  constexpr int BK = 64, BM = XN ? XN : 64 * MW * WG, CONSUMERS = WG * 128;
  constexpr int EK = B < BK ? B : BK, EPS = BK / EK, SPE = B / EK;  // per entry / slice
  constexpr int SW = 2 * EK, A_TILE = BM * SW, W_TILE = B * SW, XBOX = BM < 256 ? BM : 256;
  constexpr int A_BYTES = EPS * A_TILE, STAGE_BYTES = A_BYTES + EPS * W_TILE;
  constexpr int PANELS = KN ? (B > 64 ? B / 64 : 1) : 1, PANEL_N = B / PANELS;
  static_assert(B >= 32 && STAGE_BYTES % 1024 == 0, "stages keep the swizzle atoms aligned");
  static_assert(!XN || (WG == B / 64 && MW == 1 && XN % 64 == 0 && XN <= 256),
                "XN: one m64 warpgroup per 64 columns of the block, up to 256 rows");
  extern __shared__ unsigned char smem_raw[];
  const unsigned base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  __shared__ unsigned long long full[STAGES], empty[STAGES];
  __shared__ int s_g[LIST_CAP], s_p[LIST_CAP];
  __shared__ TileQueue tiles;
  unsigned ntaken = 0;  // tiles through the queue (this thread's count)
  const int tid = threadIdx.x;
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);                // the producer's arrival, with the bytes
      mbar_init(&empty[s], CONSUMERS / 32);  // one arrival per consumer warp
    }
    tiles.init(CONSUMERS / 32);
    fence_mbarrier_init();
  }
  __syncthreads();  // the only CTA-wide barrier
  const int ntiles = nwork * ((nrows + BM - 1) / BM);
  unsigned it = 0;

  if (tid >= CONSUMERS) {  // the producer warp: the list by the warp, copies by lane 0
    const int lane = tid - CONSUMERS;
    for (int t = blockIdx.x;; t = tiles.next(next_tile, ntiles, lane)) {
      if (lane == 0) tiles.publish(t, ntaken);
      if (t >= ntiles) break;
      const int4 item = work[t % nwork];
      const int q0 = item.y, len = item.z, row0 = (t / nwork) * BM;
      __syncwarp();  // lane 0 is done with the previous list
      fill_work_list(s_g, s_p, gidx, blk, q0, len, lane, 32);
      __syncwarp();
      if (lane != 0) continue;
      const WorkList list{s_g, s_p, gidx, blk, q0};
      const int ktiles = (len * B + BK - 1) / BK;
      for (int kt = 0; kt < ktiles; ++kt, ++it) {
        const int s = it % STAGES;
        mbar_wait(&empty[s], ((it / STAGES) & 1) ^ 1);  // the first round passes at once
        mbar_arrive_expect_tx(&full[s], STAGE_BYTES);
        const unsigned sA = base + s * STAGE_BYTES, sW = sA + A_BYTES;
        const int off = (kt % SPE) * EK;  // k offset inside the entry
#pragma unroll
        for (int el = 0; el < EPS; ++el) {
          const int e = kt / SPE * EPS + el;
          const bool live = e < len;
#pragma unroll
          for (int h = 0; h < BM / XBOX; ++h)  // a box spans at most 256 rows
            tma_load_2d(sA + el * A_TILE + h * XBOX * SW, &xmap,
                        live ? list.input(e) * B + off : xcols, row0 + h * XBOX, &full[s]);
          const int wrow = live ? list.block(e) * B : wrows;
#pragma unroll
          for (int p = 0; p < PANELS; ++p) {
            if constexpr (KN)  // rows of k, PANEL_N columns of n per panel
              tma_load_2d(sW + el * W_TILE + p * (W_TILE / PANELS), &wmap, p * PANEL_N,
                          wrow + off, &full[s]);
            else  // rows of n, EK columns of k
              tma_load_2d(sW + el * W_TILE, &wmap, off, wrow, &full[s]);
          }
        }
      }
    }
    return;
  }

  const int wg = tid / 128;  // consumer warpgroup
  constexpr int AM = XN ? 1 : MW, AN = XN ? XN / 2 : B / 2;  // accumulator tiles, registers
  float acc[AM][AN];
  for (int t = tiles.take(tid, ntaken); t < ntiles; t = tiles.take(tid, ntaken)) {
    const int4 item = work[t % nwork];
    const int j = item.x, len = item.z, slot = item.w;
    const int ktiles = (len * B + BK - 1) / BK;
    consume_tile<STAGES, INFLIGHT, false>(ktiles, it, acc, full, empty, tid, [&](int s) {
      const unsigned sA = base + s * STAGE_BYTES, sW = sA + A_BYTES;
      if constexpr (XN > 0) {  // A: columns 64 wg.. of the block (M-major as stored if KN)
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk)
          Wgmma<Tag, XN, KN ? 1 : 0>::mma(
              acc[0],
              KN ? MnTile<B, BK>::desc(sW, wg, kk) : wgmma_desc_k<128>(sW + wg * 64 * 128 + kk * 32),
              wgmma_desc_k<128>(sA + kk * 32));
      } else {
#pragma unroll
        for (int el = 0; el < EPS; ++el)
#pragma unroll
          for (int kk = 0; kk < EK / 16; ++kk) {  // k16 steps advance 32 bytes inside a row
            // KN: entry el's rows of k follow entry el - 1's in the one N-major panel set
            const unsigned long long db = KN ? MnTile<B, BK>::desc(sW, 0, el * (EK / 16) + kk)
                                             : wgmma_desc_k<SW>(sW + el * W_TILE + kk * 32);
#pragma unroll
            for (int m = 0; m < AM; ++m)
              Wgmma<Tag, B, KN ? 2 : 0>::mma(
                  acc[m], wgmma_desc_k<SW>(sA + el * A_TILE + (wg * MW + m) * 64 * SW + kk * 32),
                  db);
          }
      }
    });
    if constexpr (XN > 0)
      rows_n_store<Tag, B, XN>(acc[0], wg, tid, (t / nwork) * BM, nrows, j, slot, y, ldy,
                               alpha, beta, ws, ws_stride);
    else
      single_store<Tag, B, MW>(acc, wg, tid, (t / nwork) * BM, nrows, j, slot, y, ldy, alpha,
                               beta, ws, ws_stride);
  }
}

// The grouped kernel made persistent and warp-specialized (b = 16-64), for the products
// whose cost is the X slices streamed from L2: a single-block tile reads d * K columns of X
// per b output columns, a group of G adjacent output blocks reads the union of its
// members' lists once (at b = 32, d = 0.25, G = 8: 0.25 -> 0.11 of K per output column).
// The persistent loop, the producer warpgroup and the mbarrier ring are those of
// dsd_wgmma_ws; what differs:
// * Consumer warpgroup c owns members c * GPC .. c * GPC + GPC - 1, over all BM = 64 * MW
//   rows. One member's MMAs for one entry of a slice form a whole wgmma group (fence,
//   MMAs, commit, wait) inside the branch on its presence bit: branching between wgmmas of
//   one group (dsd_wgmma) makes ptxas serialize every one of them.
// * The producer copies a slice of X and only the blocks of members present there, and
//   publishes the slice's presence bits beside the data: its thread 0 stores them and adds
//   one ordinary (releasing) arrival to `full`, so a consumer that sees the phase complete
//   sees the bits too.
// * W's blocks are read transposed ([n][k], K-major B tiles) or, with KN, as stored
//   (N-major B tiles, no transposed copy).
template <class Tag, int B, int G, int MW, int CW, int STAGES, bool KN, int MINB>
__global__ void __launch_bounds__((CW + 1) * 128, MINB)
    dsd_wgmma_union(const u16* __restrict__ x, i64 ldx, int nrows, int nout,
                    const u16* __restrict__ wk, const int4* __restrict__ work, int nwork,
                    const int* __restrict__ blk, const int* __restrict__ gidx, u16* y, i64 ldy,
                    float alpha, float beta, float* ws, i64 ws_stride) {
  constexpr int BK = 64, BM = 64 * MW, CONSUMERS = CW * 128, GPC = G / CW;
  constexpr int EPS = BK / B, EK = B / 16;  // list entries per slice, k16 steps per entry
  constexpr int W_BYTES = B * BK * 2;       // one member's B tile, K- or N-major
  constexpr int A_BYTES = BM * 128, STAGE_BYTES = A_BYTES + G * W_BYTES;
  constexpr int CAP = 256;  // list entries kept in shared memory
  static_assert(G % CW == 0 && EPS * G <= 64 && B >= 16 && B <= BK, "bad union tile");
  static_assert(W_BYTES % 1024 == 0, "B tiles start on 1 KiB boundaries (swizzle)");
  extern __shared__ unsigned char smem_raw[];
  const unsigned base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  unsigned char* smem = smem_raw + (base - smem_addr(smem_raw));
  __shared__ unsigned long long full[STAGES], empty[STAGES], present[STAGES];
  __shared__ int s_g[CAP], s_p[CAP * G], s_m[CAP];
  const int tid = threadIdx.x;
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 128 + 1);          // the producer's copies and its presence bits
      mbar_init(&empty[s], CONSUMERS / 32);  // one arrival per consumer warp
    }
  }
  __syncthreads();  // the only CTA-wide barrier
  const int ntiles = nwork * ((nrows + BM - 1) / BM);
  unsigned it = 0;  // slices through the pipeline so far

  if (tid >= CONSUMERS) {  // producer
    const int ptid = tid - CONSUMERS;
    // X and K-major B rows: rows r0, r0 + 16, ... and chunk c, which lies in entry c * 8 / B
    // of every slice; N-major B tiles: chunk kn_c of rows of k kn_r0, kn_r0 + KN_RS, ...
    const int r0 = ptid / 8, c = ptid % 8, ce = c * 8 / B, off = (c * 8) % B;
    const int dst0 = r0 * 128 + ((c ^ (r0 & 7)) << 4);  // swizzle phase shared by its rows
    constexpr int KN_CH = B / 8, KN_RS = 128 / KN_CH, KN_IT = (BK + KN_RS - 1) / KN_RS;
    const int kn_c = ptid % KN_CH, kn_r0 = ptid / KN_CH;
    for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
      const int4 item = work[t % nwork];
      const int q0 = item.y, len = item.z, row0 = (t / nwork) * BM;
      named_barrier_sync(1, 128);  // every producer thread is done with the previous list
      fill_group_list<G, CAP>(s_g, s_p, s_m, gidx, blk, q0, len, ptid, 128);
      named_barrier_sync(1, 128);
      const GroupList<G, CAP> list{s_g, s_p, s_m, gidx, blk, q0};
      const u16* a_row = x + (i64)(row0 + r0) * ldx;
      const int ktiles = (len * B + BK - 1) / BK;
      for (int kt = 0; kt < ktiles; ++kt, ++it) {
        const int s = it % STAGES;
        mbar_wait(&empty[s], ((it / STAGES) & 1) ^ 1);  // the first round passes at once
        unsigned char* sA = smem + s * STAGE_BYTES;
        unsigned char* sB = sA + A_BYTES;
        const int e = kt * EPS + ce;  // this thread's entry (X and K-major B)
        if (e < len) {  // entries past the list are never multiplied: nothing to copy
          const u16* asrc = a_row + (i64)list.input(e) * B + off;
#pragma unroll
          for (int i = 0; i < BM / 16; ++i) {  // rows past X are zero-filled
            const bool ok = row0 + r0 + i * 16 < nrows;
            cp_async16(sA + dst0 + i * 16 * 128, ok ? asrc + i * 16 * ldx : x, ok ? 16 : 0);
          }
          if constexpr (!KN) {
            // Only the members present (a quarter at d = 0.25): walk the entry's presence
            // bits rather than test every member. Member g's tile is rows g * B ...
            for (unsigned bits = list.mask(e); bits; bits &= bits - 1) {
              const int g = __ffs(bits) - 1;
              const u16* bsrc = wk + (i64)list.block(e, g) * (B * B) + r0 * B + off;
#pragma unroll
              for (int i = 0; i < B / 16; ++i)
                cp_async16(sB + g * W_BYTES + dst0 + i * 16 * 128, bsrc + i * 16 * B, 16);
            }
          }
        }
        if constexpr (KN) {
#pragma unroll
          for (int j = 0; j < KN_IT; ++j) {
            const int k = kn_r0 + j * KN_RS;  // row of k in the slice: entry k / B
            if (KN_RS > BK && k >= BK) break;
            const int ek = kt * EPS + k / B;
            if (ek >= len) continue;
            const unsigned dst = MnTile<B, BK>::offset(k, kn_c);
            for (unsigned bits = list.mask(ek); bits; bits &= bits - 1) {  // present members
              const int g = __ffs(bits) - 1;
              cp_async16(sB + g * W_BYTES + dst,
                         wk + (i64)list.block(ek, g) * (B * B) + (k % B) * B + kn_c * 8, 16);
            }
          }
        }
        cp_async_mbar_arrive(&full[s]);
        if (ptid == 0) {  // presence bit el * G + g: entry el of the slice has member g
          unsigned long long bits = 0;
#pragma unroll
          for (int el = 0; el < EPS; ++el)
            if (kt * EPS + el < len) bits |= (unsigned long long)list.mask(kt * EPS + el) << (el * G);
          present[s] = bits;
          mbar_arrive(&full[s]);
        }
      }
    }
    cp_async_wait<0>();
    return;
  }

  const int wg = tid / 128;  // consumer warpgroup: members wg * GPC ...
  float acc[GPC][MW][B / 2];
  for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
    const int4 item = work[t % nwork];
    const int grp = item.x, len = item.z, slot = item.w;
    const int ktiles = (len * B + BK - 1) / BK;
#pragma unroll
    for (int g = 0; g < GPC; ++g)
#pragma unroll
      for (int m = 0; m < MW; ++m)
#pragma unroll
        for (int i = 0; i < B / 2; ++i) acc[g][m][i] = 0.f;
    for (int kt = 0; kt < ktiles; ++kt, ++it) {
      const int s = it % STAGES;
      mbar_wait(&full[s], (it / STAGES) & 1);
      const unsigned long long bits = present[s] >> (wg * GPC);
      fence_proxy_async();  // the landed cp.async data -> visible to the tensor cores
      const unsigned sA = base + s * STAGE_BYTES, sB = sA + A_BYTES + wg * GPC * W_BYTES;
#pragma unroll
      for (int g = 0; g < GPC; ++g)
#pragma unroll
        for (int el = 0; el < EPS; ++el)
          if ((bits >> (el * G + g)) & 1u) {
            keep_in_registers(acc[g]);
            wgmma_fence();
#pragma unroll
            for (int kk = el * EK; kk < (el + 1) * EK; ++kk) {
              const unsigned sBg = sB + g * W_BYTES;
              const unsigned long long db =
                  KN ? MnTile<B, BK>::desc(sBg, 0, kk) : wgmma_desc_sw128(sBg + kk * 32);
#pragma unroll
              for (int m = 0; m < MW; ++m)
                Wgmma<Tag, B, KN ? 2 : 0>::mma(acc[g][m], wgmma_desc_sw128(sA + m * 64 * 128 + kk * 32), db);
            }
            wgmma_commit();
            wgmma_wait<0>();
            keep_in_registers(acc[g]);
          }
      if ((tid & 31) == 0) mbar_arrive(&empty[s]);
    }
    const int row0 = (t / nwork) * BM;
#pragma unroll
    for (int g = 0; g < GPC; ++g) {
      const int i = wg * GPC + g, j = grp * G + i;  // member, output block
      if (j < nout)  // the last group may be partial; split partials are G * B wide
        single_store<Tag, B, MW, G * B>(acc[g], 0, tid, row0, nrows, j, slot, y, ldy, alpha,
                                        beta, ws + i * B, ws_stride);
    }
  }
}

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
