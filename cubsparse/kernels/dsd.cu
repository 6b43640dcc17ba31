// dsd: dense = dense @ op(block-sparse), op the identity or the transpose.
//
//   Y[:, j-th block of columns] = sum over the work list of output block j of
//                                 X[:, g-th block of columns] @ op(W_p)
//
// For Y = X @ W the list of output block j is block column j of W, walked through the
// transpose index (p = perm[q], g = its block row); for Y = X @ W.T it is block row j of
// W (p = q, g = its block column). Either way the reduction happens inside one CTA, in a
// fixed order: no atomics, bitwise-reproducible results.
//
// A CTA computes BM rows of X times one output block (b columns). The k dimension is the
// concatenation of the list's blocks, consumed BK at a time; every 16-byte segment of a
// BK slice lies inside one block because b >= 8 elements, so its source address needs one
// lookup in the work list.
//
// Load balance: each CTA takes one row of the work table, (output block, first list entry,
// list length, partial slot), sorted longest first, so long lists start first and short
// ones fill in behind them. Where few CTAs run (small N), the host also cuts lists longer
// than the average work per SM into segments: those write float32 partial products to a
// workspace slot (slot >= 0), and dsd_reduce adds a block's segments in a fixed order, so
// the result stays deterministic without atomics.
#include "common.cuh"

// Tensor-core path: float16 and bfloat16 (mma m16n8k16), and float32 in TF32 when the
// caller opts in (m16n8k8; W's blocks must then be stored [n][k], see _cuda.py), with float32
// accumulators and operands staged through a STAGES-deep cp.async pipeline.
template <class Tag, int B, int BM, int BK, int WARPS_M, int WARPS_N, int STAGES, bool TRANS_W>
__global__ void __launch_bounds__(WARPS_M* WARPS_N * 32)
    dsd_tc(const typename Tag::storage* __restrict__ x, i64 ldx, int nrows,
           const typename Tag::storage* __restrict__ w, const int4* __restrict__ work,
           const int* __restrict__ blk, const int* __restrict__ gidx,
           typename Tag::storage* y, i64 ldy, float alpha, float beta, float* ws,
           i64 ws_stride) {
  typedef TcTile<Tag, BM, B, BK, WARPS_M, WARPS_N, false, TRANS_W> Tile;
  typedef typename Tag::storage T;
  constexpr int VEC = Tag::VEC;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* smem = (T*)smem_raw;
  const int4 item = work[blockIdx.x];
  const int j = item.x, q0 = item.y, len = item.z, slot = item.w;
  const int row0 = blockIdx.y * BM;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  const int ktiles = (len * B + BK - 1) / BK;
  __shared__ int s_g[LIST_CAP], s_p[LIST_CAP];
  const WorkList list = load_work_list(s_g, s_p, gidx, blk, q0, len, tid, Tile::THREADS);

  float acc[Tile::MT][Tile::NT][4];
  Tile::zero(acc);

  // Copy plan, fixed for the whole list. A thread's 16-byte copies of an X slice sit in
  // one column (k offset a_kc) of rows a_r, a_r + A_RSTEP, ...: THREADS is a multiple of
  // the segments per row, so only the row changes between them. The row pointers and
  // bounds are computed here once; a stage then costs one list lookup per thread and a
  // pointer add per copy (the per-copy index arithmetic was most of the instructions).
  // Every segment lies inside one block, since a block row holds at least 8 elements.
  constexpr int THREADS = Tile::THREADS;
  constexpr int A_SPR = BK / VEC, A_SEGS = BM * A_SPR, A_RSTEP = THREADS / A_SPR;
  constexpr int A_IT = (A_SEGS + THREADS - 1) / THREADS;
  static_assert(THREADS % A_SPR == 0, "a thread's X copies must share a column");
  const int a_r = tid / A_SPR, a_kc = (tid % A_SPR) * VEC;
  const T* a_row = x + (i64)(row0 + a_r) * ldx;
  const i64 a_step = (i64)A_RSTEP * ldx;
  unsigned a_ok = 0;  // bit it: copy it of this thread is a real row of X
#pragma unroll
  for (int it = 0; it < A_IT; ++it)
    if ((A_SEGS % THREADS == 0 || tid + it * THREADS < A_SEGS) &&
        row0 + a_r + it * A_RSTEP < nrows)
      a_ok |= 1u << it;
  // W: B[k][n] = W_p[off][n] copies B_SPR segments per k row; B[n][k] = W_p[n][off]
  // (TRANS_W) copies BK / VEC per n row. Either way a thread keeps its column.
  constexpr int B_SPR = TRANS_W ? BK / VEC : B / VEC;
  constexpr int B_SEGS = (TRANS_W ? B : BK) * B_SPR, B_RSTEP = THREADS / B_SPR;
  constexpr int B_IT = (B_SEGS + THREADS - 1) / THREADS;
  static_assert(THREADS % B_SPR == 0, "a thread's W copies must share a column");
  const int b_r = tid / B_SPR, b_c = (tid % B_SPR) * VEC;

  auto load = [&](int stage, int kt) {
    T* sA = smem + stage * Tile::STAGE_ELEMS;
    T* sB = sA + Tile::A_ELEMS;
    const int k0 = kt * BK;
    {
      // unsigned: B is a power of two, so / and % are a shift and a mask
      const unsigned k = k0 + a_kc, item = k / B, off = k % B;
      const bool live = item < (unsigned)len;
      const T* src = a_row + (i64)list.input(live ? item : 0) * B + off;
#pragma unroll
      for (int it = 0; it < A_IT; ++it) {
        const bool ok = live && ((a_ok >> it) & 1u);
        if (A_SEGS % THREADS == 0 || tid + it * THREADS < A_SEGS)
          cp_async16(sA + (a_r + it * A_RSTEP) * Tile::A_LD + a_kc, ok ? src + it * a_step : x,
                     ok ? 16 : 0);
      }
    }
    if (!TRANS_W) {  // B[k][n] = W_p[off][n]: rows of the block, n contiguous
#pragma unroll
      for (int it = 0; it < B_IT; ++it) {
        if (B_SEGS % THREADS != 0 && tid + it * THREADS >= B_SEGS) break;
        const int kr = b_r + it * B_RSTEP;
        const unsigned k = k0 + kr, item = k / B, off = k % B;
        const bool ok = item < (unsigned)len;
        const T* src = w + (i64)list.block(ok ? item : 0) * (B * B) + off * B + b_c;
        cp_async16(sB + kr * Tile::B_LD + b_c, ok ? src : w, ok ? 16 : 0);
      }
    } else {  // B stored [n][k] = W_p[n][off]: k contiguous in memory too
      const unsigned k = k0 + b_c, item = k / B, off = k % B;
      const bool ok = item < (unsigned)len;
      const T* src = w + (i64)list.block(ok ? item : 0) * (B * B) + off;
#pragma unroll
      for (int it = 0; it < B_IT; ++it) {
        if (B_SEGS % THREADS != 0 && tid + it * THREADS >= B_SEGS) break;
        const int n = b_r + it * B_RSTEP;
        cp_async16(sB + n * Tile::B_LD + b_c, ok ? src + n * B : w, ok ? 16 : 0);
      }
    }
  };
  cp_async_pipeline<STAGES>(ktiles, load, [&](int stage) {
    const T* sA = smem + stage * Tile::STAGE_ELEMS;
    Tile::compute(sA, sA + Tile::A_ELEMS, acc, wm, wn, lane);
  });

  // Epilogue: each thread holds pairs of adjacent columns, stored together.
#pragma unroll
  for (int mt = 0; mt < Tile::MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < Tile::NT; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = row0 + wm * Tile::WM + mt * 16 + (lane >> 2) + h * 8;
        const int c = wn * Tile::WN + nt * 8 + (lane & 3) * 2;
        if (r >= nrows) continue;
        if (slot < 0)
          store_pair(Tag(), y + (i64)r * ldy + (i64)j * B + c, acc[mt][nt][2 * h],
                     acc[mt][nt][2 * h + 1], alpha, beta);
        else  // one segment of a split list: its partial product, unscaled
          *(float2*)(ws + slot * ws_stride + (i64)r * B + c) =
              make_float2(acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1]);
      }
}

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

// SIMT path (float32 in IEEE arithmetic, float64). X is read through two strides, so any
// view works without a copy. Each thread owns TM x TN outputs strided across the tile
// (rows ty + i*TY, columns tx + j*TX) so that a warp's shared-memory reads hit
// consecutive banks.
template <class T, int B, int TM, int TN, int BK, bool TRANS_W>
__global__ void __launch_bounds__(256)
    dsd_simt(const T* __restrict__ x, i64 sx0, i64 sx1, int nrows, const T* __restrict__ w,
             const int4* __restrict__ work, const int* __restrict__ blk,
             const int* __restrict__ gidx, T* y, i64 ldy, T alpha, T beta) {
  constexpr int TX = B / TN, TY = 256 / TX, BM = TY * TM;
  static_assert(TX * TN == B && TX * TY == 256, "bad SIMT tile");
  __shared__ T sA[BM][BK + 1];
  __shared__ T sB[BK][B + 1];
  const int4 item = work[blockIdx.x];  // never split for this kernel: item.w < 0
  const int j = item.x, q0 = item.y, len = item.z;
  const int row0 = blockIdx.y * BM, tid = threadIdx.x;
  const int tx = tid % TX, ty = tid / TX;
  const int ktiles = (len * B + BK - 1) / BK;
  T acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int jj = 0; jj < TN; ++jj) acc[i][jj] = T(0);

  for (int kt = 0; kt < ktiles; ++kt) {
    const int k0 = kt * BK;
    for (int e = tid; e < BM * BK; e += 256) {
      const int r = e / BK, c = e % BK, k = k0 + c, item = k / B;
      T v = T(0);
      if (row0 + r < nrows && item < len)
        v = x[(i64)(row0 + r) * sx0 + ((i64)gidx[q0 + item] * B + k % B) * sx1];
      sA[r][c] = v;
    }
    for (int e = tid; e < BK * B; e += 256) {
      // Walk W's memory contiguously: (row, col) of the stored block in either case.
      const int br = e / B, bc = e % B;
      int kr, n;
      if (TRANS_W) { n = e / BK; kr = e % BK; } else { kr = br; n = bc; }
      const int k = k0 + kr, item = k / B, off = k % B;
      T v = T(0);
      if (item < len) {
        const T* wp = w + (i64)blk[q0 + item] * (B * B);
        v = TRANS_W ? wp[n * B + off] : wp[off * B + n];
      }
      sB[kr][n] = v;
    }
    __syncthreads();
#pragma unroll 4
    for (int kk = 0; kk < BK; ++kk) {
      T a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = sA[ty + i * TY][kk];
#pragma unroll
      for (int jj = 0; jj < TN; ++jj) b[jj] = sB[kk][tx + jj * TX];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int jj = 0; jj < TN; ++jj) acc[i][jj] = fma(a[i], b[jj], acc[i][jj]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = row0 + ty + i * TY;
    if (r >= nrows) continue;
#pragma unroll
    for (int jj = 0; jj < TN; ++jj) {
      T* dst = y + (i64)r * ldy + (i64)j * B + tx + jj * TX;
      *dst = beta != T(0) ? alpha * acc[i][jj] + beta * *dst : alpha * acc[i][jj];
    }
  }
}
