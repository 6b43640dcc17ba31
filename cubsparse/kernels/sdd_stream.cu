// sdd (the weight gradient dW = X.T @ dY on W's blocks) for a short reduction, N <= 128
// rows of X and dY, at b = 8, 16 or 32: a product bound by storing the blocks, which the
// kernel streams out in W's own order.
//
//   dW_p = X[:, r*B .. r*B + B].T @ dY[:, c*B .. c*B + B]   for block p at (r, c)
//
// The per-row kernels read a block's slice of dY from L2 for every block (N / B times the
// block's own bytes), and the tiled one keeps a CTA per tile of the block grid waiting on
// its loads, then its MMAs, then its stores. Here a CTA owns a chunk of `cw` (at most CB)
// of dY's block columns, which it copies into shared memory once (all KP rows of the
// reduction, zeros past N), and its WARPS warps walk block rows r = blockIdx.y * WARPS +
// warp, then every gridDim.y * WARPS: warp by warp, each row's blocks in that chunk
// (starts: the row's first entry in each chunk, from the host) are a contiguous run of W's
// blocks, stored as the warp makes them.
//
// A warp copies its row's slice of X (KP x B) into its own buffer, takes it into
// registers as mma m16n8k16 fragments, and starts copying the next row's slice while it
// multiplies. As A fragments (ldmatrix.trans of the [k][m] slice: B / 16 m16 tiles, or at
// B = 8 one whose rows 8-15 are zeros): per block, ldmatrix.trans of the block's [k][n]
// columns of the chunk gives the B fragments, KP / 16 MMAs per m16 and n8 tile give the
// block, and each lane stores its pairs (a warp's store: one 128-byte block at B = 8, 8
// rows of 16 bytes of one n8 tile from B = 16).
//
// At B = 8 from KP = 64 (PAIRS), where the zero half's MMAs would double the tensor work
// of a block (shorter reductions gain nothing by pairing), a warp computes transposed
// blocks two at a time instead: dW_p.T = dY[:, c*B ..].T @ X[:, r*B ..], the slice as the
// B fragment (n8: the block's rows), the row's next two blocks' columns of the chunk
// stacked as the A fragment's m16 (one ldmatrix.trans x4 per k16 step), and each lane
// storing its four values one by one into their transposed places. Every block is reduced
// whole by one warp in a fixed order, so the result is deterministic.
#include "common.cuh"

// alpha * v + beta * the old value, into one 16-bit output
template <class Tag>
__device__ __forceinline__ void store_one(Tag tag, u16* dst, float v, float alpha, float beta) {
  *dst = from_f32(tag, beta != 0.f ? alpha * v + beta * to_f32(tag, *dst) : alpha * v);
}

template <class Tag, int B, int KP, int CB, int WARPS>
__global__ void __launch_bounds__(WARPS * 32)
    sdd_stream(const u16* __restrict__ x, i64 ldx, const u16* __restrict__ dy, i64 ldy,
               int inner, int nbr, int nbc, const int* __restrict__ indices,
               const int* __restrict__ starts, int nchunks, int cw, u16* out, float alpha,
               float beta) {
  grid_dependency();
  static_assert(B == 8 || B == 16 || B == 32, "one or two m16 A tiles per block row");
  static_assert(KP % 16 == 0 && (B > 8 || KP == 16 || KP % 32 == 0), "whole ldmatrix");
  constexpr int KS = KP / 16, MT = (B + 15) / 16, NT = B / 8;
  constexpr bool PAIRS = B == 8 && KP >= 64;  // two transposed blocks an MMA (above)
  // the chunk's rows padded by 16 bytes so that ldmatrix's 8 rows fall in distinct banks
  constexpr int LDD = CB * B + 8;
  const int w = cw * B;  // the chunk's columns
  extern __shared__ __align__(16) u16 smem[];
  u16* const ds = smem;  // [KP][LDD]: dY's chunk
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  u16* const xs = smem + KP * LDD + warp * KP * B;  // [KP][B]: this warp's slice of X
  const int chunk = blockIdx.x, c0 = chunk * w;     // the chunk's first column of dY
  const int ncols = nbc * B;
  for (int s = tid; s < KP * (w / 8); s += WARPS * 32) {  // zeros past N and dY's columns
    const int k = s / (w / 8), c = (s % (w / 8)) * 8;
    const bool ok = k < inner && c0 + c < ncols;
    cp_async16(ds + k * LDD + c, ok ? dy + (i64)k * ldy + c0 + c : dy, ok ? 16 : 0);
  }
  cp_async_commit();
  auto load_x = [&](int r) {  // rows k of X's columns r * B .., zeros past N
    for (int s = lane; s < KP * (B / 8); s += 32) {
      const int k = s / (B / 8), c = (s % (B / 8)) * 8;
      const bool ok = k < inner;
      cp_async16(xs + k * B + c, ok ? x + (i64)k * ldx + (i64)r * B + c : x, ok ? 16 : 0);
    }
    cp_async_commit();
  };
  const int step = gridDim.y * WARPS;
  int r = blockIdx.y * WARPS + warp;
  if (r < nbr) load_x(r);
  cp_async_wait<0>();
  __syncthreads();  // the chunk is in (and this warp's first slice)

  for (; r < nbr; r += step) {
    cp_async_wait<0>();
    __syncwarp();
    unsigned a[PAIRS ? 1 : KS][MT][4];  // X's slice as A fragments
    unsigned xb[PAIRS ? KS : 1][2];     // as B fragments, per k16 step: k 0-7, k 8-15
    if constexpr (B >= 16) {
      // per m16 tile, matrix lane / 8: (k 0-7, m 0-7), (k 0-7, m 8-15), (k 8-15, m 0-7),
      // (k 8-15, m 8-15), transposed: a0 .. a3 of m16n8k16
#pragma unroll
      for (int ks = 0; ks < KS; ++ks)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
          ldsm_x4_t(a[ks][mt], xs + (ks * 16 + (lane & 7) + (lane >> 4) * 8) * B + mt * 16 +
                                   ((lane >> 3) & 1) * 8);
    } else if constexpr (KP == 16) {
      unsigned t[2];
      ldsm_x2_t(t, xs + (lane & 15) * B);  // k 0-7, k 8-15 (lanes 16-31: ignored)
      a[0][0][0] = t[0], a[0][0][2] = t[1], a[0][0][1] = a[0][0][3] = 0u;
    } else {
      // four 8-deep pieces a load, two k16 steps: B fragments (PAIRS), else the A
      // fragments' rows 0-7 (rows 8-15 zeros)
#pragma unroll
      for (int kk = 0; kk < KS / 2; ++kk) {
        unsigned t[4];
        ldsm_x4_t(t, xs + (kk * 32 + lane) * B);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if constexpr (PAIRS) {
            xb[2 * kk + h][0] = t[2 * h], xb[2 * kk + h][1] = t[2 * h + 1];
          } else {
            unsigned* const q = a[2 * kk + h][0];
            q[0] = t[2 * h], q[2] = t[2 * h + 1], q[1] = q[3] = 0u;
          }
        }
      }
    }
    __syncwarp();  // every lane has its fragments: the buffer takes the next slice
    if (r + step < nbr) load_x(r + step);
    const int* const st = starts + (i64)r * (nchunks + 1) + chunk;
    const int lo = st[0], hi = st[1];
    if constexpr (PAIRS) {
      // the A fragment's matrices, lane / 8: (k 0-7, block p's columns), (k 0-7, p + 1's),
      // (k 8-15, p's), (k 8-15, p + 1's); a lone last block pairs with itself
      for (int p = lo; p < hi; p += 2) {
        const int c1 = indices[p] * B - c0, c2 = p + 1 < hi ? indices[p + 1] * B - c0 : c1;
        const u16* const col = ds + (lane & 7) * LDD + ((lane >> 3) & 1 ? c2 : c1);
        float acc[4] = {};
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) {
          unsigned aq[4];
          ldsm_x4_t(aq, col + (ks * 16 + (lane >> 4) * 8) * LDD);
          mma16816(Tag(), acc, aq, xb[ks]);
        }
        // lane: m = lane / 4 (block p's column; block p + 1's in acc[2 ..]), n = 2 (lane %
        // 4) + {0, 1} (the blocks' rows), stored at [n][m]
        u16* const blk = out + (i64)p * (B * B) + (lane & 3) * 2 * B + (lane >> 2);
        store_one(Tag(), blk, acc[0], alpha, beta);
        store_one(Tag(), blk + B, acc[1], alpha, beta);
        if (p + 1 < hi) {
          store_one(Tag(), blk + B * B, acc[2], alpha, beta);
          store_one(Tag(), blk + B * B + B, acc[3], alpha, beta);
        }
      }
    } else {
      for (int p = lo; p < hi; ++p) {
        const u16* const col = ds + indices[p] * B - c0;  // the block's columns of the chunk
        float acc[MT][NT][4] = {};
        if constexpr (B >= 16) {
#pragma unroll
          for (int ks = 0; ks < KS; ++ks)
#pragma unroll
            for (int np = 0; np < NT / 2; ++np) {  // n 16 np..: (k 0-7, n 0-7), (k 8-15, n
              unsigned bq[4];                      // 0-7), then n 8-15
              ldsm_x4_t(bq, col + (ks * 16 + (lane & 15)) * LDD + np * 16 + (lane >> 4) * 8);
              const unsigned b0[2] = {bq[0], bq[1]}, b1[2] = {bq[2], bq[3]};
#pragma unroll
              for (int mt = 0; mt < MT; ++mt) {
                mma16816(Tag(), acc[mt][2 * np], a[ks][mt], b0);
                mma16816(Tag(), acc[mt][2 * np + 1], a[ks][mt], b1);
              }
            }
        } else if constexpr (KP == 16) {
          unsigned bq[2];
          ldsm_x2_t(bq, col + (lane & 15) * LDD);
          mma16816(Tag(), acc[0][0], a[0][0], bq);
        } else {
#pragma unroll
          for (int kk = 0; kk < KS / 2; ++kk) {
            unsigned bq[4];
            ldsm_x4_t(bq, col + (kk * 32 + lane) * LDD);
            const unsigned b0[2] = {bq[0], bq[1]}, b1[2] = {bq[2], bq[3]};
            mma16816(Tag(), acc[0][0], a[2 * kk][0], b0);
            mma16816(Tag(), acc[0][0], a[2 * kk + 1][0], b1);
          }
        }
        // lane: rows lane / 4 (and 8 below, from B = 16) of each m16 tile, columns
        // 2 (lane % 4) + {0, 1} of each n8 tile
        u16* const blk = out + (i64)p * (B * B) + (lane >> 2) * B + (lane & 3) * 2;
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            u16* const dst = blk + mt * 16 * B + nt * 8;
            store_pair(Tag(), dst, acc[mt][nt][0], acc[mt][nt][1], alpha, beta);
            if constexpr (B >= 16)
              store_pair(Tag(), dst + 8 * B, acc[mt][nt][2], acc[mt][nt][3], alpha, beta);
          }
      }
    }
  }
}
