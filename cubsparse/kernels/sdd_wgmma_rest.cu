// The second part of the weight gradient in two parts (sm_90a): the blocks of W that the
// TMA sdd's dense panels leave, dW = X.T @ dY on each, with warpgroup MMA.
//
// Those blocks lie scattered (on a small-world layout, the tenth of the blocks rewired
// away from the band), a few per block row. The schedule differs from sdd_wgmma's in two
// ways:
//
//  * A group is up to G of one block row's left-over blocks, wherever they lie in W's
//    order: `order` lists the blocks row by row, and a group (r, p0, cnt) takes
//    order[p0 .. p0 + cnt). The group's members share X's slice, and members past cnt
//    copy nothing (their rows of D are never stored).
//  * The reduction over the N rows of X and dY is split `splits` ways: CTA
//    s * n_groups + i reduces group i over the s-th run of slices, so the CTAs resident
//    together read the same rows of X and dY from L2, and a few groups still fill the
//    device. Each CTA stores its float32 partial in the workspace; the group's last CTA
//    to finish (a counter per group, left at zero for the next launch) adds the partials
//    in split order and stores the blocks. The sum's order is fixed, so results are
//    bitwise reproducible. With splits = 1 the CTA stores its blocks directly.
//
// A slice's copies, MMAs and the epilogue are sdd_wgmma's (sdd_wgmma.cuh).
#include "common.cuh"
#include "sm90.cuh"
#include "wgmma.cuh"
#include "sdd_wgmma.cuh"

// The cnt blocks listed from `ids` (W's block numbers).
struct ListedBlocks {
  const int* ids;
  int cnt;
  __device__ __forceinline__ bool ok(int, int g) const { return g < cnt; }
  __device__ __forceinline__ int id(int, int g) const { return ids[g < cnt ? g : 0]; }
};

template <class Tag, int B, int G, int WM, int WN, int STAGES, bool FLIP, int BK>
__global__ void __launch_bounds__(WM* WN * 128)
    sdd_wgmma_rest(const u16* __restrict__ x, i64 ldx, const u16* __restrict__ dy, i64 ldy,
                   int inner, const int* __restrict__ groups, int n_groups,
                   const int* __restrict__ order, const int* __restrict__ indices, int splits,
                   float* ws, int* counts, u16* out, float alpha, float beta) {
  grid_dependency();
  typedef SddCopyTile<B, G, WM, WN, FLIP, BK> Shape;
  typedef typename Shape::TA TA;
  typedef typename Shape::TB TB;
  constexpr int THREADS = Shape::THREADS, STAGE_BYTES = Shape::STAGE_BYTES;
  constexpr int MT = Shape::MT, NW = Shape::NW;
  extern __shared__ unsigned char smem_raw[];
  const unsigned base = (smem_addr(smem_raw) + 1023u) & ~1023u;  // launch adds 1 KiB slack
  unsigned char* smem = smem_raw + (base - smem_addr(smem_raw));
  __shared__ int s_last;

  const int tid = threadIdx.x, wg = tid / 128;
  const int wm = wg / WN, wn = wg % WN;
  const int split = (int)blockIdx.x / n_groups, gi = (int)blockIdx.x - split * n_groups;
  const int ktiles = (inner + BK - 1) / BK, per = (ktiles + splits - 1) / splits;
  const int k0 = split * per, mine = max(0, min(ktiles, k0 + per) - k0);
  const int* grp = groups + 3 * gi;
  const int r = grp[0], p0 = grp[1], cnt = grp[2];

  // Copy plans as sdd_wgmma's: X's chunk column inside block column r; dY's inside member
  // g's block column (a thread of a member past cnt copies nothing).
  constexpr int XCH = B / 8, DCH = G * B / 8;
  const int xc = tid % XCH, dc = tid % DCH, g = dc / XCH;
  const bool member = g < cnt;
  const CopyPlan<B, BK, THREADS> px(tid);
  const CopyPlan<G * B, BK, THREADS> pd(tid);
  const u16* xcol = x + (i64)r * B + xc * 8;
  const u16* dcol = dy + (i64)indices[order[p0 + (member ? g : 0)]] * B + (dc % XCH) * 8;
  auto load = [&](int stage, int t) {
    unsigned char* s = smem + stage * STAGE_BYTES;
    px.load(s + (FLIP ? TA::BYTES : 0), xcol, k0 + t, ldx, inner, x);
    if (member) pd.load(s + (FLIP ? 0 : TA::BYTES), dcol, k0 + t, ldy, inner, dy);
  };

  float acc[MT][NW / 2];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int i = 0; i < NW / 2; ++i) acc[m][i] = 0.f;
  wgmma_pipeline<STAGES>(mine, acc, load, [&](int stage, int) {
    const unsigned sA = base + stage * STAGE_BYTES;
    sdd_wgmma_slice<Tag, TA, TB, MT, NW, BK>(acc, sA, sA + TA::BYTES, wm, wn);
  });

  if (splits > 1 &&
      !split_combine<THREADS>(acc, ws + (i64)gi * splits * MT * (NW / 2) * THREADS, splits,
                              split, counts + gi, tid, &s_last, [] { __syncthreads(); }))
    return;  // another CTA of the group adds the pieces
  sdd_wgmma_store_blocks<Tag, B, FLIP, MT, NW>(acc, wm, wn, tid, ListedBlocks{order + p0, cnt},
                                               out, alpha, beta);
}
