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
// Shared-memory layout: each stage holds the two operands as rows of k (BK per stage). An
// operand E elements wide is kept as panels of 64 elements (128 bytes per row, 128-byte
// swizzle), or, when narrower (FLIP's X_r of B = 32 or 16), one panel of E elements in the
// 64- or 32-byte swizzle: 16-byte chunk c of row k lies at chunk c ^ (address bits 7..).
// Panels start on 1024-byte boundaries, so the hardware's swizzle and ours agree (BK = 32
// or 64).
// Copy plan: each thread keeps one 16-byte chunk column of each operand for the whole
// reduction, so a stage costs a pointer add per copy.
#include "common.cuh"
#include "sm90.cuh"
#include "wgmma.cuh"
#include "sdd_wgmma.cuh"

// The CTAs an SM's shared memory holds of a tile: 228 KB an SM on Hopper, each CTA taking
// its stages, the launch's 1 KB of alignment slack and the 1 KB the driver reserves (the
// count the plan makes by configs.ctas_per_sm from sdd_configs.sdd_wgmma_config's smem).
template <int B, int G, int WM, int WN, int STAGES, bool FLIP, int BK>
__host__ __device__ constexpr int sdd_wgmma_smem_ctas() {
  return (228 * 1024) / (STAGES * SddCopyTile<B, G, WM, WN, FLIP, BK>::STAGE_BYTES + 2048);
}

// WM x WN warpgroups: warpgroup (wm, wn) owns m64 tiles wm*MT .. of D and its NW columns
// starting at wn*NW.
//
// A CTA takes every grid-th group from its own: one group when the grid covers the table,
// several when the plan sizes the grid to the device (persistent). The pipeline then runs
// over its groups' slices end to end, so the next group's copies are in flight while a
// group's MMAs finish and its blocks are stored. That
// is what a short reduction needs (the batch of a small-N weight gradient: one or two
// slices per group), where a CTA per group would wait for its copies, then its stores.
//
// b = 128's tiles of one warpgroup ask for as many CTAs an SM as their shared memory holds
// (sdd_wgmma_smem_ctas): without the bound the short tile's staged epilogue takes 172
// registers, which hold two CTAs where its shared memory holds three. (A bound of 0 CTAs is
// no bound: every other tile compiles as it would without one, where a bound of 1 lets
// ptxas take more registers.)
template <class Tag, int B, int G, int WM, int WN, int STAGES, bool FLIP, int BK>
__global__ void __launch_bounds__(WM* WN * 128,
                                  B == 128 && WM * WN == 1
                                      ? sdd_wgmma_smem_ctas<B, G, WM, WN, STAGES, FLIP, BK>()
                                      : 0)
    sdd_wgmma(const u16* __restrict__ x, i64 ldx, const u16* __restrict__ dy, i64 ldy,
              int inner, const int* __restrict__ groups, int n_groups,
              const int* __restrict__ indices, u16* out, float alpha, float beta) {
  grid_dependency();
  typedef SddCopyTile<B, G, WM, WN, FLIP, BK> Shape;
  typedef typename Shape::TA TA;
  typedef typename Shape::TB TB;
  constexpr int THREADS = Shape::THREADS, STAGE_BYTES = Shape::STAGE_BYTES;
  constexpr int MT = Shape::MT, NW = Shape::NW;
  extern __shared__ unsigned char smem_raw[];
  const unsigned base = (smem_addr(smem_raw) + 1023u) & ~1023u;  // launch adds 1 KiB slack
  unsigned char* smem = smem_raw + (base - smem_addr(smem_raw));

  const int tid = threadIdx.x, wg = tid / 128;
  const int wm = wg / WN, wn = wg % WN;
  const int ktiles = (inner + BK - 1) / BK;
  // groups blockIdx.x, blockIdx.x + gridDim.x, ...: the CTAs running at any moment hold
  // neighbouring groups, whose blocks are neighbours in the output
  const int total = (n_groups - (int)blockIdx.x + (int)gridDim.x - 1) / (int)gridDim.x * ktiles;
  auto group_of = [&](int i) { return (int)blockIdx.x + i * (int)gridDim.x; };

  // Copy plans: X's chunk column inside block column r; dY's inside block c_g of the group
  // (members past cnt re-read the first block: never stored). The columns are looked up
  // when a group's first slice is loaded (slices load in order).
  constexpr int XCH = B / 8, DCH = G * B / 8;
  const int xc = tid % XCH, dc = tid % DCH, g = dc / XCH;
  const CopyPlan<B, BK, THREADS> px(tid);
  const CopyPlan<G * B, BK, THREADS> pd(tid);
  const u16* xcol = x;
  const u16* dcol = dy;
  int loaded = -1;  // the group whose columns xcol, dcol hold
  auto load = [&](int stage, int t) {
    const int i = t / ktiles, kt = t - i * ktiles;
    if (i != loaded) {
      const int* grp = groups + 3 * group_of(i);
      const int r = grp[0], p0 = grp[1], cnt = grp[2];
      xcol = x + (i64)r * B + xc * 8;
      dcol = dy + (i64)indices[p0 + (g < cnt ? g : 0)] * B + (dc % XCH) * 8;
      loaded = i;
    }
    unsigned char* s = smem + stage * STAGE_BYTES;
    px.load(s + (FLIP ? TA::BYTES : 0), xcol, kt, ldx, inner, x);
    pd.load(s + (FLIP ? 0 : TA::BYTES), dcol, kt, ldy, inner, dy);
  };

  float acc[MT][NW / 2];
  auto zero = [&] {
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int i = 0; i < NW / 2; ++i) acc[m][i] = 0.f;
  };

  // STAGED: the epilogue trades its words through the stage of the group's last slice (the
  // 1 KB of warp tid / 32), not by shuffles: stmatrix and one 16-byte load where a shuffled
  // trade takes sixteen instructions. The barrier first: a warp's wgmma wait covers its own
  // share of the MMAs, and the other warps' may still read the stage. The pipeline refills
  // that stage two slices later, past two more barriers, by which time every warp's loads
  // from it are done. Taken where it ran faster on an H200 (bench/NOTES.md 299-301): b = 64
  // 1.02-1.08x, b = 128's long tile 1.02x, its short one 1.06-1.09x at C = K = 8192 and
  // d = 0.1 (0.98-1.01x elsewhere). b = 128's wide tile (two blocks a group) ran 0.98x at
  // d = 0.1, and the flipped tiles (b <= 32, the trade by stmatrix .trans) 0.87-1.02x: they
  // keep the shuffles.
  constexpr bool STAGED = sdd_wgmma_vec_store(B, FLIP, NW) &&
                          (B == 64 || (B == 128 && G == 1));
  static_assert(!STAGED || THREADS / 32 * 1024 <= STAGE_BYTES, "1 KB a warp in a stage");
  static_assert(WGMMA_PIPELINE_REFILL_LAG >= 1, "the last slice's stage outlives done()");
  auto store = [&](int i) {
    const int item = group_of(i);
    const int stage = ((i + 1) * ktiles - 1) % STAGES;  // the group's last slice's
    if (STAGED) __syncthreads();
    sdd_wgmma_store<Tag, B, FLIP, MT, NW, STAGED>(
        acc, wm, wn, tid, groups[3 * item + 1], groups[3 * item + 2], out, alpha, beta,
        base + stage * STAGE_BYTES + (tid / 32) * 1024);
  };

  zero();
  wgmma_pipeline<STAGES>(
      total, ktiles, acc, load,
      [&](int stage, int) {
        const unsigned sA = base + stage * STAGE_BYTES;
        sdd_wgmma_slice<Tag, TA, TB, MT, NW, BK>(acc, sA, sA + TA::BYTES, wm, wn);
      },
      [&](int i) {
        store(i);
        zero();
      });
}
