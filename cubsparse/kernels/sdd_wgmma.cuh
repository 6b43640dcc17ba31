// The parts of the Hopper wgmma sdd kernels (sdd_wgmma.cu, sdd_wgmma_rest.cu,
// sdd_wgmma_tma.cu) share: the cp.async copy plan, a slice's MMAs and the epilogue.
#pragma once
#include "common.cuh"
#include "sm90.cuh"
#include "wgmma.cuh"

// This thread's share of one operand's copies: a fixed chunk column and rows row0 + j*RS
// of each slice. The shared-memory offsets are fixed; the source column moves with the
// work item.
template <int E, int BK, int THREADS>
struct CopyPlan {
  typedef MnTile<E, BK> Tile;
  static constexpr int RS = THREADS / Tile::CH;  // rows between a thread's copies
  static constexpr int IT = (BK + RS - 1) / RS;  // RS > BK: threads past the slice idle
  static_assert(THREADS % Tile::CH == 0 && (BK % RS == 0 || RS % BK == 0), "copies must tile the slice");
  int row0;
  unsigned dst[IT];
  __device__ __forceinline__ explicit CopyPlan(int tid) {
    row0 = tid / Tile::CH;
#pragma unroll
    for (int j = 0; j < IT; ++j) dst[j] = Tile::offset(row0 + j * RS, tid % Tile::CH);
  }
  // Copies slice kt (rows kt*BK ..) of the chunk column starting at `col` into the tile at
  // `tile`; rows past `inner` read zeros.
  __device__ __forceinline__ void load(unsigned char* tile, const u16* col, int kt, i64 ld,
                                       int inner, const u16* any) const {
    if (RS > BK && row0 >= BK) return;
    const int k0 = kt * BK + row0;
    const u16* p = col + (i64)k0 * ld;
#pragma unroll
    for (int j = 0; j < IT; ++j) {
      const bool ok = k0 + j * RS < inner;
      cp_async16(tile + dst[j], ok ? p + (i64)j * RS * ld : any, ok ? 16 : 0);
    }
  }
};

// The tile of the cp.async wgmma sdd kernels (sdd_wgmma, sdd_wgmma_rest): a group of G
// blocks of B, stacked along wgmma's M when FLIP (else side by side along N), BK-deep
// slices, WM x WN warpgroups; warpgroup (wm, wn) owns MT m64 tiles of D and NW columns.
template <int B, int G, int WM, int WN, bool FLIP, int BK>
struct SddCopyTile {
  static constexpr int THREADS = WM * WN * 128;
  static constexpr int EA = FLIP ? G * B : B, EB = FLIP ? B : G * B;  // wgmma's M and N extents
  typedef MnTile<EA, BK> TA;
  typedef MnTile<EB, BK> TB;
  static constexpr int STAGE_BYTES = TA::BYTES + TB::BYTES;
  static constexpr int MT = EA / 64 / WM, NW = EB / WN;
  static_assert(BK % 16 == 0, "whole k16 MMA steps per slice");
  static_assert(EA % (64 * WM) == 0 && NW % 8 == 0 && NW <= 256, "bad warpgroup tiling");
  static_assert(WN == 1 || NW % 64 == 0, "a warpgroup's columns start on an atom");
  static_assert(TA::BYTES % 1024 == 0 && TB::BYTES % 1024 == 0, "tiles stay 1 KiB aligned");
};

// One BK-deep slice's MMAs of warpgroup (wm, wn): its MT m64 tiles of the stage's A tile
// (TA at sA, MN-major) against its NW columns of the B tile (TB at sB, MN-major).
template <class Tag, class TA, class TB, int MT, int NW, int BK>
__device__ __forceinline__ void sdd_wgmma_slice(float (&acc)[MT][NW / 2], unsigned sA,
                                                unsigned sB, int wm, int wn) {
#pragma unroll
  for (int kk = 0; kk < BK / 16; ++kk) {
    const unsigned long long db = TB::desc(sB, wn * NW / 64, kk);
#pragma unroll
    for (int m = 0; m < MT; ++m)
      Wgmma<Tag, NW, 3>::mma(acc[m], TA::desc(sA, wm * MT + m, kk), db);
  }
}

// Whether the epilogue below stores 16 bytes a lane on unflipped tiles: four 8-column chunks
// of a warpgroup's columns at a time, never straddling two blocks.
__host__ __device__ constexpr bool sdd_wgmma_vec_store(int b, bool flip, int nw) {
  return !flip && nw % 32 == 0 && b % 32 == 0;
}

// The wgmma sdd's epilogue: warpgroup (wm, wn)'s accumulators (MT m64 tiles of NW
// columns, columns wn * NW..) stored as the tile's blocks, with alpha and beta. Shared by
// the cp.async kernel (sdd_wgmma) and the TMA one (sdd_wgmma_tma). `blocks.id(h, g)` is
// the block that D's rows h * B.. and columns g * B.. hold (unflipped; flipped, D's rows
// g * B..), stored where `blocks.ok(h, g)`: h is 0 but for the paired tile, whose D stacks
// two block rows (ROWS = 2).
// BETA false: beta is 0, known at compile time, so no pair reads or tests the old value;
// ALPHA false as well: alpha is 1, so no pair multiplies.
// STAGED: the 16-byte stores' words trade through this warp's 1 KB of shared memory at
// `scratch` (quad_transpose_smem, two 512-byte buffers in turn), not by shuffles.
template <class Tag, int B, bool FLIP, int MT, int NW, int ROWS, bool BETA, bool ALPHA,
          bool STAGED, class Blocks>
__device__ __forceinline__ void sdd_wgmma_store_as(const float (&acc)[MT][NW / 2], int wm,
                                                   int wn, int tid, const Blocks& blocks,
                                                   u16* out, float alpha_in, float beta_in,
                                                   unsigned scratch) {
  static_assert(!FLIP || ROWS == 1, "the flipped epilogue stores one block row");
  static_assert(ALPHA || !BETA, "alpha 1 is a form of beta 0 only");
  const float alpha = ALPHA ? alpha_in : 1.f, beta = BETA ? beta_in : 0.f;
  const int lane = tid & 31, wiw = (tid % 128) / 32;
  // Accumulator layout of m64nN: warp w of the warpgroup holds rows 16w..16w+15; for each
  // 8-column chunk q, registers 4q, 4q+1 are (row lane/4, columns 2*(lane%4) + {0, 1}) and
  // 4q+2, 4q+3 the same columns 8 rows down.
  // Unflipped (B >= 64): lanes trade words so that each stores 16 bytes (quad_transpose);
  // four 8-column chunks never straddle two blocks.
  // Flipped: see below; beta != 0 keeps the pair stores, which read the old values.
  constexpr bool VEC_STORE = sdd_wgmma_vec_store(B, FLIP, NW);
  static_assert(!FLIP || NW % 16 == 0, "flipped stores gather four 8 x 8 tiles");
  static_assert(!STAGED || VEC_STORE, "only the 16-byte stores trade words");
  constexpr bool flip_vec = FLIP && !BETA;  // (flipped tiles store one block row: no BETA)
  unsigned words[2][4];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int q = 0; q < NW / 8; ++q)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = (wm * MT + m) * 64 + wiw * 16 + (lane >> 2) + h * 8;
        const int cl = wn * NW + q * 8 + (lane & 3) * 2;
        const float v0 = acc[m][4 * q + 2 * h], v1 = acc[m][4 * q + 2 * h + 1];
        if (!FLIP) {
          // D[row][cl]: row of block row h = row / B, column cl of the group; four chunks
          // of 8 columns at a time, one 16-byte store per lane (below)
          const int rb = ROWS == 1 ? row : row % B;  // the row within its block
          const int hb = ROWS == 1 ? 0 : row / B, gg = cl / B;
          const bool ok = blocks.ok(hb, gg);
          const int p = blocks.id(hb, gg);
          const u16* dst = out + (i64)p * (B * B) + rb * B + cl % B;
          if (!VEC_STORE) {
            if (ok) store_pair(Tag(), (u16*)dst, v0, v1, alpha, beta);
          } else {
            words[h][q % 4] = ok ? pair_value(Tag(), dst, v0, v1, alpha, beta) : 0u;
            if (q % 4 == 3) {
              // lane l of the quad stores chunk q - 3 + l % 4 of this row: whole 64-byte
              // runs of the block's rows instead of 16-byte pieces (the four chunks lie in
              // one block: p is theirs)
              uint4 v;  // (STAGED: the calls take h = 0, 1 in turn, so the buffer is h's)
              if constexpr (STAGED)
                v = quad_transpose_smem(lane, words[h], scratch + h * 512);
              else
                v = quad_transpose(lane, words[h]);
              const int c0 = wn * NW + (q - 3 + (lane & 3)) * 8;
              if (ok) st_global_v4(out + (i64)p * (B * B) + rb * B + c0 % B, v);
            }
          }
        } else if (flip_vec) {
          // D[row][cl] is block (row / B) transposed. Each 8 x 8 tile of D is transposed
          // in registers (movmatrix), which leaves every quad holding 16 bytes of one
          // block row; four tiles (chunks q, halves h) are gathered, and lane l of the
          // quad stores tile l's (quad_transpose).
          const int t = (2 * q + h) % 4;
          words[0][t] = movmatrix_trans(pair_value(Tag(), out, v0, v1, alpha, 0.f));
          if (t == 3) {
            const uint4 v = quad_transpose(lane, words[0]);
            const int f = 2 * q + h - 3 + (lane & 3);  // this lane's tile
            const int rb = (wm * MT + m) * 64 + wiw * 16 + (f % 2) * 8, gg = rb / B;
            const int orow = wn * NW + (f / 2) * 8 + (lane >> 2);
            if (blocks.ok(0, gg))
              st_global_v4(out + (i64)blocks.id(0, gg) * (B * B) + orow * B + rb % B, v);
          }
        } else {
          // D[row][cl] is block (row / B) transposed: store pairs along its rows (beta
          // reads the old pairs).
          float s0, s1;
          const bool even = transpose_pair(lane, v0, v1, s0, s1);
          const int re = row - (even ? 0 : 1), gg = re / B;
          if (blocks.ok(0, gg))
            store_pair(Tag(),
                       out + (i64)blocks.id(0, gg) * (B * B) + (cl + (even ? 0 : 1)) * B +
                           re % B,
                       s0, s1, alpha, beta);
        }
      }
}

// The epilogue, compiled for beta 0 with alpha 1 (a fresh gradient, the default), for
// beta 0 with any alpha, and for any beta; a call takes one. Without the split each pair
// tested beta and kept the old value's address live, about a tenth of a small-N weight
// gradient's instructions, and multiplied by alpha, another tenth (ptxas predicates a
// multiply by alpha taken only where alpha is not 1 in place of branching around it, so
// the multiplies issue all the same: the split has to be at compile time).
// STAGED (one block row, unflipped): the 16-byte stores trade words through `scratch`.
template <class Tag, int B, bool FLIP, int MT, int NW, int ROWS = 1, bool STAGED = false,
          class Blocks>
__device__ __forceinline__ void sdd_wgmma_store_blocks(const float (&acc)[MT][NW / 2], int wm,
                                                       int wn, int tid, const Blocks& blocks,
                                                       u16* out, float alpha, float beta,
                                                       unsigned scratch = 0) {
  // (tiles of more than one block row, the paired and panel tiles, keep one form: at the
  // paired tile's register cap a second spills)
  static_assert(!STAGED || (ROWS == 1 && sdd_wgmma_vec_store(B, FLIP, NW)),
                "staged trades: the 16-byte stores of one block row");
  if constexpr (ROWS == 1) {
    if (beta == 0.f && alpha == 1.f)
      return sdd_wgmma_store_as<Tag, B, FLIP, MT, NW, 1, false, false, STAGED>(
          acc, wm, wn, tid, blocks, out, alpha, beta, scratch);
    if (beta == 0.f)
      return sdd_wgmma_store_as<Tag, B, FLIP, MT, NW, 1, false, true, STAGED>(
          acc, wm, wn, tid, blocks, out, alpha, beta, scratch);
  }
  sdd_wgmma_store_as<Tag, B, FLIP, MT, NW, ROWS, true, true, STAGED>(
      acc, wm, wn, tid, blocks, out, alpha, beta, scratch);
}

// One CTA's share of a group whose reduction is split across `splits` CTAs (the second
// part's groups in sdd_wgmma_rest, the last round's in sdd_wgmma_tma). The CTA stores its
// float32 partial as piece `own` of the group's workspace `ws` (splits x MT N2 x THREADS
// floats, thread tid's MT N2 accumulators at stride THREADS, so a warp's stores and loads
// are 512 contiguous bytes), and the group's last CTA to finish, found by the counter `count`
// (left at zero for the next launch), adds every piece in piece order: the same sum every
// launch, whichever CTA comes last. Returns whether this CTA is that one; acc then holds
// the sum. `sync` is a barrier of the THREADS threads holding accumulators, and `last` a
// flag in shared memory.
template <int THREADS, int MT, int N2, class Sync>
__device__ __forceinline__ bool split_combine(float (&acc)[MT][N2], float* ws, int splits,
                                              int own, int* count, int tid, int* last,
                                              Sync sync) {
  constexpr int Q = MT * N2 / 4;  // float4s per thread
  static_assert(N2 % 4 == 0, "partials move as float4");
  float4* part = (float4*)ws;
  float4* mine = part + (i64)own * Q * THREADS;
#pragma unroll
  for (int j = 0; j < Q; ++j) {
    const int m = (4 * j) / N2, i = (4 * j) % N2;
    mine[j * THREADS + tid] = make_float4(acc[m][i], acc[m][i + 1], acc[m][i + 2], acc[m][i + 3]);
  }
  __threadfence();  // the partial, before the count that publishes it
  sync();
  if (tid == 0) {
    const int is_last = atomicAdd(count, 1) == splits - 1;
    if (is_last) {
      __threadfence();           // the other partials, stored before their counts
      atomicSub(count, splits);  // every piece is in: zero for the next launch
    }
    *last = is_last;
  }
  sync();  // (the flag is written again only after the next call's first barrier)
  if (!*last) return false;
  // Piece by piece, in batches of BATCH float4 loads in flight: a load at a time per
  // thread (the pieces' loop inside each float4's) waited out an L2 latency per load, about
  // 11 us for each 128 KB piece at b = 128.
  constexpr int BATCH = Q % 4 == 0 ? 4 : 1;  // (8 spilled at b = 64 and 128)
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int i = 0; i < N2; ++i) acc[m][i] = 0.f;
  for (int s = 0; s < splits; ++s) {  // piece order: the same sum every launch
    const float4* src = part + (i64)s * Q * THREADS + tid;
#pragma unroll
    for (int j0 = 0; j0 < Q; j0 += BATCH) {
      float4 v[BATCH];
#pragma unroll
      for (int b = 0; b < BATCH; ++b) v[b] = __ldcg(src + (j0 + b) * THREADS);  // other CTAs'
#pragma unroll
      for (int b = 0; b < BATCH; ++b) {
        const int m = (4 * (j0 + b)) / N2, i = (4 * (j0 + b)) % N2;
        acc[m][i] += v[b].x;
        acc[m][i + 1] += v[b].y;
        acc[m][i + 2] += v[b].z;
        acc[m][i + 3] += v[b].w;
      }
    }
  }
  return true;
}

// A group of `cnt` consecutive blocks from p0 of one block row.
struct RunOfBlocks {
  int p0, cnt;
  __device__ __forceinline__ bool ok(int, int g) const { return g < cnt; }
  __device__ __forceinline__ int id(int, int g) const { return p0 + g; }
};

// The epilogue for such a group.
template <class Tag, int B, bool FLIP, int MT, int NW, bool STAGED = false>
__device__ __forceinline__ void sdd_wgmma_store(const float (&acc)[MT][NW / 2], int wm, int wn,
                                                int tid, int p0, int cnt, u16* out,
                                                float alpha, float beta, unsigned scratch = 0) {
  sdd_wgmma_store_blocks<Tag, B, FLIP, MT, NW, 1, STAGED>(acc, wm, wn, tid, RunOfBlocks{p0, cnt},
                                                          out, alpha, beta, scratch);
}
