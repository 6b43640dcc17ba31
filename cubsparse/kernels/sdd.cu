// sdd: block-sparse = (dense @ dense) sampled on a layout (SDDMM), the weight gradient
//
//   D_p = A[rows of block row r, :] @ Bm[:, columns of block column c]   for each block p = (r, c)
//
// with the inner dimension (the batch, for dW = X.T @ dY) reduced inside the CTA: no
// atomics, bitwise-reproducible results. A CTA owns a "group": up to G blocks of one block
// row, so the A slice (b rows) is loaded once and shared by G blocks; the group table is
// built once per layout.
#include "common.cuh"

// The copies of one pipeline stage of sdd: a BK-deep slice of the BM rows of block row r
// of A (rows m >= B, the padding of an 8-row block, zero-filled) and of the G * B columns
// of the group's blocks of Bm (columns of absent members zero-filled), in 16-byte cp.async
// segments of VEC elements, in the storage orders of A_KM and B_NK:
//   A_KM: A[m][k] = a[k * lda + r*B + m]     (a is X with A = X.T, the usual case)
//  !A_KM: A[m][k] = a[(r*B + m) * lda + k]
//  !B_NK: B[k][n] = bm[k * ldb + col]        (bm is dY, the usual case)
//   B_NK: B[k][n] = bm[col * ldb + k]
// Each copy's source pointer at k = 0, its shared-memory offset and its k offset within a
// slice are computed once; a stage then adds k0 times the operand's k stride. (Computing
// addresses per copy and stage cost more instructions than the MMAs.)
template <class T, int B, int BM, int BN, int BK, int THREADS, int A_LD, int B_LD, bool A_KM,
          bool B_NK>
struct SddCopies {
  static constexpr int VEC = 16 / sizeof(T);
  static constexpr int A_SEGS = BK * (BM / VEC), A_IT = (A_SEGS + THREADS - 1) / THREADS;
  static constexpr int B_SEGS = BK * (BN / VEC), B_IT = (B_SEGS + THREADS - 1) / THREADS;
  static_assert(A_IT <= 32 && B_IT <= 32, "a copy's bit in a_ok / b_ok");
  const T* a;
  const T* bm;
  const T* a_src[A_IT];
  const T* b_src[B_IT];
  int a_dst[A_IT], a_k[A_IT], b_dst[B_IT], b_k[B_IT];
  unsigned a_ok, b_ok;
  i64 a_kstride, b_kstride;
  int tid, inner;

  __device__ __forceinline__ SddCopies(const T* a_, i64 lda, const T* bm_, i64 ldb,
                                       int inner_, int r, const int* cols, int cnt, int tid_)
      : a(a_), bm(bm_), a_ok(0), b_ok(0), a_kstride(A_KM ? lda : 1),
        b_kstride(B_NK ? 1 : ldb), tid(tid_), inner(inner_) {
#pragma unroll
    for (int it = 0; it < A_IT; ++it) {
      const int s = tid + it * THREADS;
      int m, kk;
      if (A_KM) { kk = s / (BM / VEC); m = (s % (BM / VEC)) * VEC; a_dst[it] = kk * A_LD + m; }
      else { m = s / (BK / VEC); kk = (s % (BK / VEC)) * VEC; a_dst[it] = m * A_LD + kk; }
      const bool ok = (A_SEGS % THREADS == 0 || s < A_SEGS) && m < B;
      a_ok |= (unsigned)ok << it;
      a_k[it] = kk;
      a_src[it] = !ok ? a : A_KM ? a + (i64)kk * lda + (i64)r * B + m : a + ((i64)r * B + m) * lda + kk;
    }
#pragma unroll
    for (int it = 0; it < B_IT; ++it) {
      const int s = tid + it * THREADS;
      int n, kk;
      if (!B_NK) { kk = s / (BN / VEC); n = (s % (BN / VEC)) * VEC; b_dst[it] = kk * B_LD + n; }
      else { n = s / (BK / VEC); kk = (s % (BK / VEC)) * VEC; b_dst[it] = n * B_LD + kk; }
      const int g = n / B;
      const bool ok = (B_SEGS % THREADS == 0 || s < B_SEGS) && g < cnt;
      b_ok |= (unsigned)ok << it;
      b_k[it] = kk;
      const i64 col = ok ? (i64)cols[g] * B + n % B : 0;
      b_src[it] = !ok ? bm : !B_NK ? bm + (i64)kk * ldb + col : bm + col * ldb + kk;
    }
  }

  __device__ __forceinline__ void load(T* sA, T* sB, int k0) const {
    const i64 ka = (i64)k0 * a_kstride, kb = (i64)k0 * b_kstride;
#pragma unroll
    for (int it = 0; it < A_IT; ++it) {
      if (A_SEGS % THREADS != 0 && tid + it * THREADS >= A_SEGS) break;
      const bool ok = ((a_ok >> it) & 1u) && k0 + a_k[it] < inner;
      cp_async16(sA + a_dst[it], ok ? a_src[it] + ka : a, ok ? 16 : 0);
    }
#pragma unroll
    for (int it = 0; it < B_IT; ++it) {
      if (B_SEGS % THREADS != 0 && tid + it * THREADS >= B_SEGS) break;
      const bool ok = ((b_ok >> it) & 1u) && k0 + b_k[it] < inner;
      cp_async16(sB + b_dst[it], ok ? b_src[it] + kb : bm, ok ? 16 : 0);
    }
  }
};

// Tensor-core path (float16, bfloat16; float32 as TF32 on opt-in, which reads a as
// A[m][k] and bm as B[n][k]). The tile is BM x (G*B) with BM = max(B, 16): an 8-row block
// is padded to the 16 rows of an mma (the extra rows are zero-filled and never stored).
//   A_KM: A[m][k] = a[k * lda + r*B + m]     (a is X with A = X.T, the usual case)
//  !A_KM: A[m][k] = a[(r*B + m) * lda + k]
//  !B_NK: B[k][n] = bm[k * ldb + col]        (bm is dY, the usual case)
//   B_NK: B[k][n] = bm[col * ldb + k]
template <class Tag, int B, int G, int BK, int WARPS_M, int WARPS_N, int STAGES, bool A_KM,
          bool B_NK>
__global__ void __launch_bounds__(WARPS_M* WARPS_N * 32)
    sdd_tc(const typename Tag::storage* __restrict__ a, i64 lda,
           const typename Tag::storage* __restrict__ bm, i64 ldb, int inner,
           const int* __restrict__ groups, const int* __restrict__ indices,
           typename Tag::storage* out, float alpha, float beta) {
  constexpr int BM = B < 16 ? 16 : B, BN = G * B, VEC = Tag::VEC;
  typedef TcTile<Tag, BM, BN, BK, WARPS_M, WARPS_N, A_KM, B_NK> Tile;
  typedef typename Tag::storage T;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* smem = (T*)smem_raw;
  __shared__ int cols[G];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  const int r = groups[3 * blockIdx.x], p0 = groups[3 * blockIdx.x + 1];
  const int cnt = groups[3 * blockIdx.x + 2];
  if (tid < G) cols[tid] = tid < cnt ? indices[p0 + tid] : 0;
  __syncthreads();
  const int ktiles = (inner + BK - 1) / BK;

  float acc[Tile::MT][Tile::NT][4];
  Tile::zero(acc);

  // Copy plan: as SddCopies (which the CUDA-core kernel uses), written out here because
  // the struct form changed this kernel's code: the TF32 instances ran 14-36 % slower
  // (H200, b = 8-32). Segments past the block (8-row blocks padded to 16) or the group
  // are zero-filled for the whole loop.
  constexpr int THREADS = Tile::THREADS;
  constexpr int A_SEGS = BK * (BM / VEC), A_IT = (A_SEGS + THREADS - 1) / THREADS;
  constexpr int B_SEGS = BK * (BN / VEC), B_IT = (B_SEGS + THREADS - 1) / THREADS;
  const T* a_src[A_IT];
  const T* b_src[B_IT];
  int a_dst[A_IT], a_k[A_IT], b_dst[B_IT], b_k[B_IT];
  unsigned a_ok = 0, b_ok = 0;
#pragma unroll
  for (int it = 0; it < A_IT; ++it) {
    const int s = tid + it * THREADS;
    int m, kk;
    if (A_KM) { kk = s / (BM / VEC); m = (s % (BM / VEC)) * VEC; a_dst[it] = kk * Tile::A_LD + m; }
    else { m = s / (BK / VEC); kk = (s % (BK / VEC)) * VEC; a_dst[it] = m * Tile::A_LD + kk; }
    const bool ok = (A_SEGS % THREADS == 0 || s < A_SEGS) && m < B;
    a_ok |= (unsigned)ok << it;
    a_k[it] = kk;
    a_src[it] = !ok ? a : A_KM ? a + (i64)kk * lda + (i64)r * B + m : a + ((i64)r * B + m) * lda + kk;
  }
#pragma unroll
  for (int it = 0; it < B_IT; ++it) {
    const int s = tid + it * THREADS;
    int n, kk;
    if (!B_NK) { kk = s / (BN / VEC); n = (s % (BN / VEC)) * VEC; b_dst[it] = kk * Tile::B_LD + n; }
    else { n = s / (BK / VEC); kk = (s % (BK / VEC)) * VEC; b_dst[it] = n * Tile::B_LD + kk; }
    const int g = n / B;
    const bool ok = (B_SEGS % THREADS == 0 || s < B_SEGS) && g < cnt;
    b_ok |= (unsigned)ok << it;
    b_k[it] = kk;
    const i64 col = ok ? (i64)cols[g] * B + n % B : 0;
    b_src[it] = !ok ? bm : !B_NK ? bm + (i64)kk * ldb + col : bm + col * ldb + kk;
  }
  const i64 a_kstride = A_KM ? lda : 1, b_kstride = B_NK ? 1 : ldb;

  auto load = [&](int stage, int kt) {
    T* sA = smem + stage * Tile::STAGE_ELEMS;
    T* sB = sA + Tile::A_ELEMS;
    const int k0 = kt * BK;
    const i64 ka = (i64)k0 * a_kstride, kb = (i64)k0 * b_kstride;
#pragma unroll
    for (int it = 0; it < A_IT; ++it) {
      if (A_SEGS % THREADS != 0 && tid + it * THREADS >= A_SEGS) break;
      const bool ok = ((a_ok >> it) & 1u) && k0 + a_k[it] < inner;
      cp_async16(sA + a_dst[it], ok ? a_src[it] + ka : a, ok ? 16 : 0);
    }
#pragma unroll
    for (int it = 0; it < B_IT; ++it) {
      if (B_SEGS % THREADS != 0 && tid + it * THREADS >= B_SEGS) break;
      const bool ok = ((b_ok >> it) & 1u) && k0 + b_k[it] < inner;
      cp_async16(sB + b_dst[it], ok ? b_src[it] + kb : bm, ok ? 16 : 0);
    }
  };
  cp_async_pipeline<STAGES>(ktiles, load, [&](int stage) {
    const T* sA = smem + stage * Tile::STAGE_ELEMS;
    Tile::compute(sA, sA + Tile::A_ELEMS, acc, wm, wn, lane);
  });

#pragma unroll
  for (int mt = 0; mt < Tile::MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < Tile::NT; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = wm * Tile::WM + mt * 16 + (lane >> 2) + h * 8;
        const int n = wn * Tile::WN + nt * 8 + (lane & 3) * 2;
        const int g = n / B;
        if (m < B && g < cnt)
          store_pair(Tag(), out + (i64)(p0 + g) * (B * B) + m * B + n % B,
                     acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1], alpha, beta);
      }
}

// Tiled weight gradient for small blocks (float16, bfloat16; a read as A[k][m] and bm as
// B[k][n]: x and dy as rows of the batch). A CTA owns a TR x TS tile of the block grid,
// a dense (TR * B) x (TS * B) tile of a.T @ bm whose operands are plain column ranges of x
// and dy, loaded once for all of the tile's blocks (sdd_tc loads a slice of dy per block).
// The MMAs of 16 x 8 accumulator tiles that hold no stored block (for b = 8: two block
// rows by one block column) are skipped, so the tile costs about its blocks' work while
// it is full enough; the host picks this kernel per layout by the bytes each would load
// (_cuda.sdd). Output blocks that are not stored are never written.
template <class Tag, int B, int TR, int TS, int BK, int WARPS_M, int WARPS_N, int STAGES>
__global__ void __launch_bounds__(WARPS_M* WARPS_N * 32)
    sdd_tile_tc(const u16* __restrict__ a, i64 lda, const u16* __restrict__ bm, i64 ldb,
                int inner, int nbr, int nbc, const int4* __restrict__ tiles,
                const int* __restrict__ map, u16* out, float alpha, float beta) {
  constexpr int BM = TR * B, BN = TS * B, VEC = 8;
  typedef TcTile<Tag, BM, BN, BK, WARPS_M, WARPS_N, true, false> Tile;
  static_assert(Tile::MT * Tile::NT <= 64, "a warp's live mask is one 64-bit word");
  static_assert(B % 8 == 0, "an n8 accumulator tile lies in one block column");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  u16* smem = (u16*)smem_raw;
  __shared__ int s_map[TR * TS];  // tile-local (block row, block column) -> block, or -1
  constexpr int THREADS = Tile::THREADS;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  const int4 t = tiles[blockIdx.x];
  const int m_base = t.x * BM, n_base = t.y * BN;  // first row of a.T, column of bm
  for (int i = tid; i < TR * TS; i += THREADS) s_map[i] = map[(i64)t.z + i];
  __syncthreads();

  // Which of this warp's 16 x 8 accumulator tiles meet a stored block.
  unsigned long long live = 0;
#pragma unroll
  for (int mt = 0; mt < Tile::MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < Tile::NT; ++nt) {
      const int m0 = wm * Tile::WM + mt * 16, c = (wn * Tile::WN + nt * 8) / B;
      bool any = false;
      for (int r = m0 / B; r <= (m0 + 15) / B; ++r) any |= s_map[r * TS + c] >= 0;
      live |= (unsigned long long)any << (mt * Tile::NT + nt);
    }

  float acc[Tile::MT][Tile::NT][4];
  Tile::zero(acc);

  // Copy plan: rows k of both slices; a thread's copies keep their columns, so sources
  // are set once and a stage adds k0 rows. Columns past the matrix are zero-filled.
  constexpr int A_SEGS = BK * (BM / VEC), A_IT = (A_SEGS + THREADS - 1) / THREADS;
  constexpr int B_SEGS = BK * (BN / VEC), B_IT = (B_SEGS + THREADS - 1) / THREADS;
  const int ktiles = (inner + BK - 1) / BK;
  auto load = [&](int stage, int kt) {
    u16* sA = smem + stage * Tile::STAGE_ELEMS;
    u16* sB = sA + Tile::A_ELEMS;
    const int k0 = kt * BK;
    for_each_copy<A_SEGS, THREADS>(tid, [&](int s) {
      const int kk = s / (BM / VEC), m = (s % (BM / VEC)) * VEC;
      const bool ok = k0 + kk < inner && m_base + m < nbr * B;
      cp_async16(sA + kk * Tile::A_LD + m, ok ? a + (i64)(k0 + kk) * lda + m_base + m : a,
                 ok ? 16 : 0);
    });
    for_each_copy<B_SEGS, THREADS>(tid, [&](int s) {
      const int kk = s / (BN / VEC), n = (s % (BN / VEC)) * VEC;
      const bool ok = k0 + kk < inner && n_base + n < nbc * B;
      cp_async16(sB + kk * Tile::B_LD + n, ok ? bm + (i64)(k0 + kk) * ldb + n_base + n : bm,
                 ok ? 16 : 0);
    });
  };
  cp_async_pipeline<STAGES>(ktiles, load, [&](int stage) {
    const u16* sA = smem + stage * Tile::STAGE_ELEMS;
    Tile::compute(sA, sA + Tile::A_ELEMS, acc, wm, wn, lane, live);
  });

#pragma unroll
  for (int mt = 0; mt < Tile::MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < Tile::NT; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = wm * Tile::WM + mt * 16 + (lane >> 2) + h * 8;
        const int n = wn * Tile::WN + nt * 8 + (lane & 3) * 2;
        const int p = s_map[(m / B) * TS + n / B];
        if (p >= 0)
          store_pair(Tag(), out + (i64)p * (B * B) + (m % B) * B + n % B, acc[mt][nt][2 * h],
                     acc[mt][nt][2 * h + 1], alpha, beta);
      }
}

// CUDA-core path (float32 IEEE, float64): SddCopies' cp.async stages feeding SimtTile's
// FMAs, in the operand layouts of the tensor-core kernel (the host copies an operand whose
// rows cannot be streamed in 16-byte segments). One CTA computes one group of G blocks, a
// B x G*B tile, TM x TN outputs per thread.
template <class T, int B, int G, int TM, int TN, int BK, int STAGES, bool A_KM, bool B_NK>
__global__ void __launch_bounds__((B / TM) * (G * B / TN))
    sdd_simt(const T* __restrict__ a, i64 lda, const T* __restrict__ bm, i64 ldb, int inner,
             const int* __restrict__ groups, const int* __restrict__ indices, T* out, T alpha,
             T beta) {
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

// Tiled weight gradient for small blocks on CUDA cores (float32 IEEE; a read as A[k][m] and
// bm as B[k][n]: x and dy as rows of the batch). As in sdd_tile_tc a CTA owns a TR x TS
// tile of the block grid and loads plain column ranges of x and dy once for all of its
// blocks. The tile is cut into 8 x 8 units (a b = 8 block, a quarter of a b = 16 one); the
// units of stored blocks are numbered in row-major order and thread t computes unit t, all
// 64 outputs in registers. Absent blocks thus cost no FMAs, and since the numbering packs
// the live units into the first warps, the warps past them only copy: at density d a tile
// runs about d of its FMA instructions (a mask per thread of a fixed mapping would not skip
// a warp's instruction unless all 32 of its units were absent).
//
// Shared memory holds BK rows of each operand with 16 bytes of padding after every 128
// (four units): the 16 units of a tile row then start on 16-byte bank groups that hold
// two of them each (two wavefronts for a read by all 16), where the unpadded 32-byte
// stride put four on each. A step of k
// costs four 16-byte reads and 64 FMAs per thread, the ratio of an 8 x 8 SGEMM thread tile.
template <int B, int TR, int TS, int BK, int STAGES>
__global__ void __launch_bounds__((TR * B / 8) * (TS * B / 8), 2)
    sdd_tile_simt(const float* __restrict__ a, i64 lda, const float* __restrict__ bm, i64 ldb,
                  int inner, int nbr, int nbc, const int4* __restrict__ tiles,
                  const int* __restrict__ map, float* out, float alpha, float beta) {
  constexpr int UM = TR * B / 8, UN = TS * B / 8, THREADS = UM * UN, WARPS = THREADS / 32;
  constexpr int BM = TR * B, BN = TS * B, VEC = 4;
  constexpr int A_LD = BM + BM / 32 * VEC, B_LD = BN + BN / 32 * VEC;
  constexpr int STAGE_ELEMS = BK * (A_LD + B_LD);
  static_assert(B == 8 || B == 16, "units of 8 x 8 tile the block");
  static_assert(THREADS % 32 == 0 && THREADS <= 1024, "one unit per thread");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float* smem = (float*)smem_raw;
  __shared__ int s_map[TR * TS];  // tile-local (block row, block column) -> block, or -1
  __shared__ int s_unit[THREADS];  // live units in row-major order
  __shared__ int s_warp[WARPS];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int4 t = tiles[blockIdx.x];
  const int m_base = t.x * BM, n_base = t.y * BN;  // first row of a.T, column of bm
  for (int i = tid; i < TR * TS; i += THREADS) s_map[i] = map[(i64)t.z + i];
  __syncthreads();

  // Number the live units: thread tid tests unit tid, a ballot and the warps' counts give
  // its place.
  const bool live = s_map[(tid / UN * 8 / B) * TS + tid % UN * 8 / B] >= 0;
  const unsigned votes = __ballot_sync(0xffffffffu, live);
  if (lane == 0) s_warp[warp] = __popc(votes);
  __syncthreads();
  int place = __popc(votes & ((1u << lane) - 1u)), nlive = 0;
  for (int w = 0; w < WARPS; ++w) {
    place += w < warp ? s_warp[w] : 0;
    nlive += s_warp[w];
  }
  if (live) s_unit[place] = tid;
  __syncthreads();
  const bool active = tid < nlive;
  const int unit = active ? s_unit[tid] : 0, ur = unit / UN, uc = unit % UN;
  const int a_off = ur * 8 + ur / 4 * VEC, b_off = uc * 8 + uc / 4 * VEC;

  float acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;

  // Copies: rows k of both slices in 16-byte segments; columns past the matrix and rows
  // past `inner` are zero-filled.
  constexpr int A_SEGS = BK * (BM / VEC), B_SEGS = BK * (BN / VEC);
  const int ktiles = (inner + BK - 1) / BK;
  auto load = [&](int stage, int kt) {
    float* sA = smem + stage * STAGE_ELEMS;
    float* sB = sA + BK * A_LD;
    const int k0 = kt * BK;
    for_each_copy<A_SEGS, THREADS>(tid, [&](int s) {
      const int kk = s / (BM / VEC), m = (s % (BM / VEC)) * VEC;
      const bool ok = k0 + kk < inner && m_base + m < nbr * B;
      cp_async16(sA + kk * A_LD + m + m / 32 * VEC,
                 ok ? a + (i64)(k0 + kk) * lda + m_base + m : a, ok ? 16 : 0);
    });
    for_each_copy<B_SEGS, THREADS>(tid, [&](int s) {
      const int kk = s / (BN / VEC), n = (s % (BN / VEC)) * VEC;
      const bool ok = k0 + kk < inner && n_base + n < nbc * B;
      cp_async16(sB + kk * B_LD + n + n / 32 * VEC,
                 ok ? bm + (i64)(k0 + kk) * ldb + n_base + n : bm, ok ? 16 : 0);
    });
  };
  cp_async_pipeline<STAGES>(ktiles, load, [&](int stage) {
    if (!active) return;
    const float* sA = smem + stage * STAGE_ELEMS + a_off;
    const float* sB = smem + stage * STAGE_ELEMS + BK * A_LD + b_off;
#pragma unroll 1  // unrolled, ptxas spills past the 128 registers of 2 CTAs per SM
    for (int kk = 0; kk < BK; ++kk) {
      float av[8], bv[8];
      *reinterpret_cast<float4*>(av) = *reinterpret_cast<const float4*>(sA + kk * A_LD);
      *reinterpret_cast<float4*>(av + 4) = *reinterpret_cast<const float4*>(sA + kk * A_LD + 4);
      *reinterpret_cast<float4*>(bv) = *reinterpret_cast<const float4*>(sB + kk * B_LD);
      *reinterpret_cast<float4*>(bv + 4) = *reinterpret_cast<const float4*>(sB + kk * B_LD + 4);
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
  });
  if (!active) return;

  // The unit's rows of its block, 8 contiguous outputs each.
  const int p = s_map[(ur * 8 / B) * TS + uc * 8 / B];
  float* dst = out + (i64)p * (B * B) + (ur * 8 % B) * B + uc * 8 % B;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    float v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = alpha * acc[i][j];
    if (beta != 0.f) {
      float old[8];
      *reinterpret_cast<float4*>(old) = *reinterpret_cast<const float4*>(dst + i * B);
      *reinterpret_cast<float4*>(old + 4) = *reinterpret_cast<const float4*>(dst + i * B + 4);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = fmaf(beta, old[j], v[j]);
    }
    *reinterpret_cast<float4*>(dst + i * B) = *reinterpret_cast<float4*>(v);
    *reinterpret_cast<float4*>(dst + i * B + 4) = *reinterpret_cast<float4*>(v + 4);
  }
}
