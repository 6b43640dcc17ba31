// dsd for small blocks on tensor cores: a CTA per group of adjacent output blocks walks
// the union of their lists (dsd_copies.cuh describes the decomposition).
#include "dsd_copies.cuh"

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
                 float alpha, float beta, float* ws, i64 ws_stride,
                 const int2* __restrict__ segs, int* counts) {
  grid_dependency();
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
  if (slot >= 0)
    split_finish<G * B>(ws, ws_stride, segs, counts, slot, row0, BM, nrows,
                        min(G, nout - grp * G) * B,  // the last group may be partial
                        tid, THREADS, [] { __syncthreads(); },
                        [&](int r, int c, float v0, float v1) {
                          store_pair(Tag(), y + (i64)r * ldy + (i64)grp * G * B + c, v0, v1,
                                     alpha, beta);
                        });
}
