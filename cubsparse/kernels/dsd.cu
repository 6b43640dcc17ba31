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

// The copies of one pipeline stage of dsd: a BM x BK slice of X into A[m][k] (rows of A_LD
// elements) and the matching BK x B slice of op(W) into B[k][n], or B[n][k] with TRANS_W
// (rows of B_LD), in 16-byte cp.async segments of VEC elements. Every segment lies inside
// one block, since a block row holds at least 8 elements, so it needs one list lookup.
//
// The plan is fixed for the whole list: a thread's copies of an X slice sit in one column
// (k offset a_kc) of rows a_r, a_r + A_RSTEP, ...: THREADS is a multiple of the segments
// per row, so only the row changes between them. Row pointers and bounds are computed once;
// a stage then costs one list lookup per thread and a pointer add per copy (the per-copy
// index arithmetic was most of the instructions).
template <class T, int B, int BM, int BK, int THREADS, int A_LD, int B_LD, bool TRANS_W>
struct DsdCopies {
  static constexpr int VEC = 16 / sizeof(T);
  static constexpr int A_SPR = BK / VEC, A_SEGS = BM * A_SPR, A_RSTEP = THREADS / A_SPR;
  static constexpr int A_IT = (A_SEGS + THREADS - 1) / THREADS;
  static_assert(THREADS % A_SPR == 0, "a thread's X copies must share a column");
  static_assert(A_IT <= 32, "a copy's bit in a_ok");
  // W: B[k][n] = W_p[off][n] copies B_SPR segments per k row; B[n][k] = W_p[n][off]
  // (TRANS_W) copies BK / VEC per n row. Either way a thread keeps its column.
  static constexpr int B_SPR = TRANS_W ? BK / VEC : B / VEC;
  static constexpr int B_SEGS = (TRANS_W ? B : BK) * B_SPR, B_RSTEP = THREADS / B_SPR;
  static constexpr int B_IT = (B_SEGS + THREADS - 1) / THREADS;
  static_assert(THREADS % B_SPR == 0, "a thread's W copies must share a column");

  const T* x;
  const T* w;
  const T* a_row;
  i64 a_step;
  int tid, a_r, a_kc, b_r, b_c;
  unsigned a_ok;  // bit it: copy it of this thread is a real row of X

  __device__ __forceinline__ DsdCopies(const T* x_, const T* w_, i64 ldx, int nrows, int row0,
                                       int tid_)
      : x(x_), w(w_), tid(tid_) {
    a_r = tid / A_SPR;
    a_kc = (tid % A_SPR) * VEC;
    a_row = x + (i64)(row0 + a_r) * ldx;
    a_step = (i64)A_RSTEP * ldx;
    a_ok = 0;
#pragma unroll
    for (int it = 0; it < A_IT; ++it)
      if ((A_SEGS % THREADS == 0 || tid + it * THREADS < A_SEGS) &&
          row0 + a_r + it * A_RSTEP < nrows)
        a_ok |= 1u << it;
    b_r = tid / B_SPR;
    b_c = (tid % B_SPR) * VEC;
  }

  // Issues the copies of the slice starting at k0 (of the list's concatenated blocks).
  __device__ __forceinline__ void load(T* sA, T* sB, int k0, const WorkList& list,
                                       int len) const {
    {
      // unsigned: B is a power of two, so / and % are a shift and a mask
      const unsigned k = k0 + a_kc, item = k / B, off = k % B;
      const bool live = item < (unsigned)len;
      const T* src = a_row + (i64)list.input(live ? item : 0) * B + off;
#pragma unroll
      for (int it = 0; it < A_IT; ++it) {
        const bool ok = live && ((a_ok >> it) & 1u);
        if (A_SEGS % THREADS == 0 || tid + it * THREADS < A_SEGS)
          cp_async16(sA + (a_r + it * A_RSTEP) * A_LD + a_kc, ok ? src + it * a_step : x,
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
        cp_async16(sB + kr * B_LD + b_c, ok ? src : w, ok ? 16 : 0);
      }
    } else {  // B stored [n][k] = W_p[n][off]: k contiguous in memory too
      const unsigned k = k0 + b_c, item = k / B, off = k % B;
      const bool ok = item < (unsigned)len;
      const T* src = w + (i64)list.block(ok ? item : 0) * (B * B) + off;
#pragma unroll
      for (int it = 0; it < B_IT; ++it) {
        if (B_SEGS % THREADS != 0 && tid + it * THREADS >= B_SEGS) break;
        const int n = b_r + it * B_RSTEP;
        cp_async16(sB + n * B_LD + b_c, ok ? src + n * B : w, ok ? 16 : 0);
      }
    }
  }
};

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

  const DsdCopies<T, B, BM, BK, Tile::THREADS, Tile::A_LD, Tile::B_LD, TRANS_W> copies(
      x, w, ldx, nrows, row0, tid);
  auto load = [&](int stage, int kt) {
    T* sA = smem + stage * Tile::STAGE_ELEMS;
    copies.load(sA, sA + Tile::A_ELEMS, kt * BK, list, len);
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

// Small blocks (b = 8, 16; float16 and bfloat16): one output block per CTA would reload
// every X slice for only b output columns, so X would be read K / b times in all. Here a
// CTA owns BM rows of X by a group of G adjacent output blocks (G * b columns) and walks the
// union of the members' lists (GroupList): each X slice is loaded once and multiplied into
// every member that has a block at that entry - mma.sync m16n8k8 for b = 8, m16n8k16 for
// b = 16. Absent blocks are neither copied nor multiplied (presence bits are uniform over a
// warp, so the branches do not diverge), so no product ever reads an X column its output
// does not use. A stage holds E entries: their X slices (BM x b) and G block slots each.
//   smem rows: b = 8 -> 16 bytes (eight of them fill the banks once); b = 16 -> 32 bytes,
//   the two 16-byte chunks swapped in every other group of four rows, so the eight rows of
//   an ldmatrix land in eight different bank groups.
template <int B>
__device__ __forceinline__ int small_row_offset(int r, int c) {
  return B == 8 ? r * 16 : r * 32 + ((c ^ ((r >> 2) & 1)) << 4);
}

template <class Tag, int B, int G, int BM, int WARPS_M, int WARPS_N, int E, int STAGES,
          bool TRANS_W>
__global__ void __launch_bounds__(WARPS_M* WARPS_N * 32)
    dsd_group_tc(const u16* __restrict__ x, i64 ldx, int nrows, int nout,
                 const u16* __restrict__ w, const int4* __restrict__ work,
                 const int* __restrict__ blk, const int* __restrict__ gidx, u16* y, i64 ldy,
                 float alpha, float beta, float* ws, i64 ws_stride) {
  constexpr int THREADS = WARPS_M * WARPS_N * 32;
  constexpr int WR = BM / WARPS_M, GW = G / WARPS_N;  // a warp's rows and members
  constexpr int MT = WR / 16, NT = B / 8, CH = B / 8;  // m16 tiles, n8 tiles, 16-byte chunks
  constexpr int A_ENTRY = BM * B * 2, BLK = B * B * 2;  // bytes of one X slice, one block
  constexpr int A_BYTES = E * A_ENTRY, STAGE_BYTES = A_BYTES + E * G * BLK;
  constexpr int CAP = 256;
  static_assert(B == 8 || B == 16, "the grouped mma.sync kernel is for b = 8 and 16");
  static_assert(WR % 32 == 0 && GW % 4 == 0 && G <= 32, "warp tiles: 32-row, 4-member steps");
  extern __shared__ __align__(16) unsigned char smem[];
  typedef GroupList<G, CAP> List;

  const int4 item = work[blockIdx.x];
  const int grp = item.x, q0 = item.y, len = item.z, slot = item.w;
  const int row0 = blockIdx.y * BM;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  const int ktiles = (len + E - 1) / E;
  __shared__ int s_g[CAP], s_p[CAP * G], s_m[CAP];
  const List list = load_group_list<G, CAP, true>(s_g, s_p, s_m, gidx, blk, q0, len, tid, THREADS);

  float acc[MT][GW][NT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < GW; ++i)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int v = 0; v < 4; ++v) acc[mt][i][nt][v] = 0.f;

  auto load = [&](int stage, int kt) {
    unsigned char* sA = smem + stage * STAGE_BYTES;
    unsigned char* sB = sA + A_BYTES;
    const int e0 = kt * E;
    // X: chunk c of row r of entry el; rows past X and entries past the list are zeros.
    for_each_copy<E * BM * CH, THREADS>(tid, [&](int s) {
      const int el = s / (BM * CH), r = (s / CH) % BM, c = s % CH, e = e0 + el;
      const bool ok = e < len && row0 + r < nrows;
      const u16* src = ok ? x + (i64)(row0 + r) * ldx + (i64)list.input(e) * B + c * 8 : x;
      cp_async16(sA + el * A_ENTRY + small_row_offset<B>(r, c), src, ok ? 16 : 0);
    });
    // W: 16-byte chunk rc of the block of member i at entry el (rows of B elements, as
    // stored); an absent block leaves its slot unwritten, and it is never read.
    for_each_copy<E * G * B * CH, THREADS>(tid, [&](int s) {
      const int bslot = s / (B * CH), rc = s % (B * CH), e = e0 + bslot / G;
      const int p = e < len ? list.block(e, bslot % G) : -1;
      if (p >= 0)
        cp_async16(sB + bslot * BLK + small_row_offset<B>(rc / CH, rc % CH),
                   w + (i64)p * (B * B) + rc * 8, 16);
    });
  };

  int kt = 0;  // the pipeline hands compute() its stage only; slices come in order
  cp_async_pipeline<STAGES>(ktiles, load, [&](int stage) {
    const unsigned char* sA = smem + stage * STAGE_BYTES;
    const unsigned char* sB = sA + A_BYTES;
    const int e0 = (kt++) * E;
#pragma unroll
    for (int el = 0; el < E; ++el) {
      const int e = e0 + el;
      if (e >= len) break;
      const unsigned bits = (list.mask(e) >> (wn * GW)) & (GW == 32 ? ~0u : (1u << GW) - 1);
      if (bits == 0) continue;  // none of this warp's members has a block here
      const unsigned char* xa = sA + el * A_ENTRY;
      unsigned a[MT][2 * CH];
      if constexpr (B == 8) {  // rows 32 apart: one x4 gives two m16k8 tiles
#pragma unroll
        for (int mp = 0; mp < MT / 2; ++mp) {
          unsigned r[4];
          ldsm_x4(r, xa + small_row_offset<B>(wm * WR + mp * 32 + lane, 0));
          a[2 * mp][0] = r[0], a[2 * mp][1] = r[1], a[2 * mp + 1][0] = r[2], a[2 * mp + 1][1] = r[3];
        }
      } else {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
          ldsm_x4(a[mt], xa + small_row_offset<B>(wm * WR + mt * 16 + (lane & 15), lane >> 4));
      }
      const unsigned char* wb = sB + (el * G + wn * GW) * BLK;
#pragma unroll
      for (int q = 0; q < GW / 4; ++q) {  // four members at a time
        if (((bits >> (4 * q)) & 15u) == 0) continue;
        if constexpr (B == 8) {
          // One x4 reads the four blocks (lanes 8i..8i+7: rows of block i): the B fragment
          // of each, k down the rows (.trans for W as stored, [k][n]). An absent block's
          // register holds whatever its slot held, and is not used.
          unsigned r[4];
          const unsigned char* p = wb + (4 * q + (lane >> 3)) * BLK + (lane & 7) * 16;
          if (TRANS_W) ldsm_x4(r, p); else ldsm_x4_t(r, p);
#pragma unroll
          for (int ii = 0; ii < 4; ++ii)
            if ((bits >> (4 * q + ii)) & 1u)
#pragma unroll
              for (int mt = 0; mt < MT; ++mt) {
                const unsigned af[2] = {a[mt][0], a[mt][1]};
                mma1688(Tag(), acc[mt][4 * q + ii][0], af, r[ii]);
              }
        } else {
#pragma unroll
          for (int ii = 0; ii < 4; ++ii) {
            if (!((bits >> (4 * q + ii)) & 1u)) continue;
            const unsigned char* p = wb + (4 * q + ii) * BLK;
            unsigned r[4];  // {b0, b1} of columns 0-7, then of columns 8-15
            if (TRANS_W)    // [n][k]: matrices (n 0-7 | 8-15) x (k 0-7 | 8-15)
              ldsm_x4(r, p + small_row_offset<B>((lane >> 4) * 8 + (lane & 7), (lane >> 3) & 1));
            else            // [k][n], transposed: (k 0-7 | 8-15) x (n 0-7 | 8-15)
              ldsm_x4_t(r, p + small_row_offset<B>(((lane >> 3) & 1) * 8 + (lane & 7), lane >> 4));
            const unsigned b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              const unsigned af[4] = {a[mt][0], a[mt][1], a[mt][2], a[mt][3]};
              mma16816(Tag(), acc[mt][4 * q + ii][0], af, b0);
              mma16816(Tag(), acc[mt][4 * q + ii][1], af, b1);
            }
          }
        }
      }
    }
  });

  // Epilogue: pairs of adjacent columns (mma accumulator layout: rows lane / 4 and + 8).
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < GW; ++i) {
      const int m = wn * GW + i, j = grp * G + m;  // member, output block
      if (j >= nout) break;                        // the last group may be partial
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = row0 + wm * WR + mt * 16 + (lane >> 2) + h * 8;
          const int col = nt * 8 + (lane & 3) * 2;
          const float v0 = acc[mt][i][nt][2 * h], v1 = acc[mt][i][nt][2 * h + 1];
          if (r >= nrows) continue;
          if (slot < 0)
            store_pair(Tag(), y + (i64)r * ldy + (i64)j * B + col, v0, v1, alpha, beta);
          else  // one segment of a split list: its partial product (G * B wide), unscaled
            *(float2*)(ws + slot * ws_stride + (i64)r * (G * B) + m * B + col) =
                make_float2(v0, v1);
        }
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

// CUDA-core path (float32 in IEEE arithmetic, float64): the tensor-core kernel's copies and
// cp.async pipeline (DsdCopies) feeding SimtTile's FMAs. A CTA computes BM rows of X by one
// output block, TM x TN outputs per thread; the host sizes BM to N (short tiles for few
// rows, so no FMA is spent on rows that do not exist). X rows must be contiguous and
// 16-byte aligned (the host copies X otherwise). float32 lists may be split like the
// tensor-core ones (slot >= 0: float32 partials to the workspace, added by dsd_reduce);
// float64 lists never are.
template <class T, int B, int BM, int TM, int TN, int BK, int STAGES, bool TRANS_W>
__global__ void __launch_bounds__((BM / TM) * (B / TN))
    dsd_simt(const T* __restrict__ x, i64 ldx, int nrows, const T* __restrict__ w,
             const int4* __restrict__ work, const int* __restrict__ blk,
             const int* __restrict__ gidx, T* y, i64 ldy, T alpha, T beta, float* ws,
             i64 ws_stride) {
  typedef SimtTile<T, BM, B, BK, TM, TN, false, TRANS_W> Tile;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* smem = (T*)smem_raw;
  const int4 item = work[blockIdx.x];
  const int j = item.x, q0 = item.y, len = item.z, slot = item.w;
  const int row0 = blockIdx.y * BM, tid = threadIdx.x;
  const int tx = tid % Tile::TX, ty = tid / Tile::TX;
  const int ktiles = (len * B + BK - 1) / BK;
  __shared__ int s_g[LIST_CAP], s_p[LIST_CAP];
  const WorkList list = load_work_list(s_g, s_p, gidx, blk, q0, len, tid, Tile::THREADS);

  T acc[TM][TN];
  Tile::zero(acc);
  const DsdCopies<T, B, BM, BK, Tile::THREADS, Tile::A_LD, Tile::B_LD, TRANS_W> copies(
      x, w, ldx, nrows, row0, tid);
  cp_async_pipeline<STAGES>(
      ktiles,
      [&](int stage, int kt) {
        T* sA = smem + stage * Tile::STAGE_ELEMS;
        copies.load(sA, sA + Tile::A_ELEMS, kt * BK, list, len);
      },
      [&](int stage) {
        const T* sA = smem + stage * Tile::STAGE_ELEMS;
        Tile::compute(sA, sA + Tile::A_ELEMS, acc, tx, ty);
      });

#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = row0 + Tile::row(ty, i);
    if (r >= nrows) continue;
#pragma unroll
    for (int jj = 0; jj < TN; ++jj) {
      const int c = Tile::col(tx, jj);
      if (slot >= 0) {  // one segment of a split list: its partial product, unscaled
        ws[slot * ws_stride + (i64)r * B + c] = (float)acc[i][jj];
        continue;
      }
      T* dst = y + (i64)r * ldy + (i64)j * B + c;
      *dst = beta != T(0) ? alpha * acc[i][jj] + beta * *dst : alpha * acc[i][jj];
    }
  }
}
