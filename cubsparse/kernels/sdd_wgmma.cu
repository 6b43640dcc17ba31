// sdd on Hopper (sm_90a): the weight gradient dW = X.T @ dY, sampled on W's blocks, with
// warpgroup MMA (wgmma).
//
// The work decomposition of the sm_80 sdd (sdd_copies.cuh): a CTA owns a group of up to G blocks of one block row
// r (columns c_0 .. c_{cnt-1}) and reduces over all rows of X and dY inside the CTA, in a
// fixed order (bitwise-reproducible, no atomics). Both operands arrive as rows of the
// reduction axis: X[n, r*B : r*B + B] and dY[n, c_g*B : c_g*B + B]. wgmma reads them in
// place from shared memory in its transposed ("MN-major") modes, so neither needs a
// transpose anywhere:
//
//  !FLIP (B >= 64)  D = X_r.T @ [dY_c0 .. dY_c(G-1)]: M = B rows of the block, N = G * B
//                   (up to 256, the wide instruction that keeps shared memory ahead of the
//                   tensor cores); D's columns are the group's blocks side by side.
//   FLIP (B <= 32)  D = [dY_c0 .. dY_c(G-1)].T @ X_r: M = G * B, N = B. A 32-row block
//                   cannot fill wgmma's 64-row M, the stacked group can; D holds the
//                   blocks transposed, and the epilogue transposes pairs through shuffles.
//
// Shared-memory layout: each stage holds the two operands as rows of k (64 per stage). An
// operand E elements wide is kept as panels of 64 elements (128 bytes per row, 128-byte
// swizzle), or, when narrower (FLIP's X_r of B = 32 or 16), one panel of E elements in the
// 64- or 32-byte swizzle: 16-byte chunk c of row k lies at chunk c ^ (address bits 7..).
// Panels start on 1024-byte boundaries, so the hardware's swizzle and ours agree.
// The main loop is `wgmma_pipeline` (sm90.cuh), as in dsd_sm90.cu. Copy plan: each thread
// keeps one 16-byte chunk column of each operand for the whole reduction, so a stage costs
// a pointer add per copy.
#include "common.cuh"
#include "sm90.cuh"
#include "wgmma.cuh"

// This thread's share of one operand's copies: a fixed chunk column and rows k0 + j*RS.
template <int E, int BK, int THREADS>
struct CopyPlan {
  typedef MnTile<E, BK> Tile;
  static constexpr int RS = THREADS / Tile::CH;  // rows between a thread's copies
  static constexpr int IT = (BK + RS - 1) / RS;  // RS > BK: threads past the slice idle
  static_assert(THREADS % Tile::CH == 0 && (BK % RS == 0 || RS % BK == 0), "copies must tile the slice");
  const u16* src;  // row k = row0 of the chunk column
  i64 step;        // RS rows
  int row0;
  unsigned dst[IT];
  __device__ __forceinline__ CopyPlan(const u16* col, i64 ld, int tid) {
    const int c = tid % Tile::CH;
    row0 = tid / Tile::CH;
    src = col + (i64)row0 * ld;
    step = (i64)RS * ld;
#pragma unroll
    for (int j = 0; j < IT; ++j) dst[j] = Tile::offset(row0 + j * RS, c);
  }
  // Copies slice kt (rows kt*BK ..) into the tile at `tile`; rows past `inner` read zeros.
  __device__ __forceinline__ void load(unsigned char* tile, int kt, i64 ld, int inner,
                                       const u16* any) const {
    if (RS > BK && row0 >= BK) return;
    const int k0 = kt * BK;
    const u16* p = src + (i64)k0 * ld;
#pragma unroll
    for (int j = 0; j < IT; ++j) {
      const bool ok = k0 + row0 + j * RS < inner;
      cp_async16(tile + dst[j], ok ? p + j * step : any, ok ? 16 : 0);
    }
  }
};

// WM x WN warpgroups: warpgroup (wm, wn) owns m64 tiles wm*MT .. of D and its NW columns
// starting at wn*NW.
template <class Tag, int B, int G, int WM, int WN, int STAGES, bool FLIP>
__global__ void __launch_bounds__(WM* WN * 128)
    sdd_wgmma(const u16* __restrict__ x, i64 ldx, const u16* __restrict__ dy, i64 ldy,
              int inner, const int* __restrict__ groups, const int* __restrict__ indices,
              u16* out, float alpha, float beta) {
  constexpr int BK = 64, THREADS = WM * WN * 128;
  constexpr int EA = FLIP ? G * B : B, EB = FLIP ? B : G * B;  // wgmma's M and N extents
  typedef MnTile<EA, BK> TA;
  typedef MnTile<EB, BK> TB;
  constexpr int STAGE_BYTES = TA::BYTES + TB::BYTES;
  constexpr int MT = EA / 64 / WM, NW = EB / WN;
  static_assert(EA % (64 * WM) == 0 && NW % 8 == 0 && NW <= 256, "bad warpgroup tiling");
  static_assert(WN == 1 || NW % 64 == 0, "a warpgroup's columns start on an atom");
  static_assert(TA::BYTES % 1024 == 0 && TB::BYTES % 1024 == 0, "tiles stay 1 KiB aligned");
  extern __shared__ unsigned char smem_raw[];
  const unsigned base = (smem_addr(smem_raw) + 1023u) & ~1023u;  // launch adds 1 KiB slack
  unsigned char* smem = smem_raw + (base - smem_addr(smem_raw));

  const int r = groups[3 * blockIdx.x], p0 = groups[3 * blockIdx.x + 1];
  const int cnt = groups[3 * blockIdx.x + 2];
  const int tid = threadIdx.x, wg = tid / 128, lane = tid & 31, wiw = (tid % 128) / 32;
  const int wm = wg / WN, wn = wg % WN;
  const int ktiles = (inner + BK - 1) / BK;

  // Copy plans: X's chunk column inside block column r; dY's inside block c_g of the group
  // (members past cnt re-read the first block: never stored).
  constexpr int XCH = B / 8, DCH = G * B / 8;
  const int xc = tid % XCH, dc = tid % DCH, g = dc / XCH;
  const int col = indices[p0 + (g < cnt ? g : 0)];
  const CopyPlan<B, BK, THREADS> px(x + (i64)r * B + xc * 8, ldx, tid);
  const CopyPlan<G * B, BK, THREADS> pd(dy + (i64)col * B + (dc % XCH) * 8, ldy, tid);
  auto load = [&](int stage, int kt) {
    unsigned char* s = smem + stage * STAGE_BYTES;
    px.load(s + (FLIP ? TA::BYTES : 0), kt, ldx, inner, x);
    pd.load(s + (FLIP ? 0 : TA::BYTES), kt, ldy, inner, dy);
  };

  float acc[MT][NW / 2];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int i = 0; i < NW / 2; ++i) acc[m][i] = 0.f;

  wgmma_pipeline<STAGES>(ktiles, acc, load, [&](int stage, int) {
    const unsigned sA = base + stage * STAGE_BYTES, sB = sA + TA::BYTES;
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      const unsigned long long db = TB::desc(sB, wn * NW / 64, kk);
#pragma unroll
      for (int m = 0; m < MT; ++m)
        Wgmma<Tag, NW, 3>::mma(acc[m], TA::desc(sA, wm * MT + m, kk), db);
    }
  });

  // Accumulator layout of m64nN: warp w of the warpgroup holds rows 16w..16w+15; for each
  // 8-column chunk q, registers 4q, 4q+1 are (row lane/4, columns 2*(lane%4) + {0, 1}) and
  // 4q+2, 4q+3 the same columns 8 rows down.
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int q = 0; q < NW / 8; ++q)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = (wm * MT + m) * 64 + wiw * 16 + (lane >> 2) + h * 8;
        const int cl = wn * NW + q * 8 + (lane & 3) * 2;
        const float v0 = acc[m][4 * q + 2 * h], v1 = acc[m][4 * q + 2 * h + 1];
        if (!FLIP) {  // D[row][cl]: row of the block, column cl of the group
          const int gg = cl / B;
          if (gg < cnt)
            store_pair(Tag(), out + (i64)(p0 + gg) * (B * B) + row * B + cl % B, v0, v1, alpha,
                       beta);
        } else {
          // D[row][cl] is block (row / B) transposed: store pairs along its rows.
          float s0, s1;
          const bool even = transpose_pair(lane, v0, v1, s0, s1);
          const int re = row - (even ? 0 : 1), gg = re / B;
          if (gg < cnt)
            store_pair(Tag(), out + (i64)(p0 + gg) * (B * B) + (cl + (even ? 0 : 1)) * B + re % B,
                       s0, s1, alpha, beta);
        }
      }
}
