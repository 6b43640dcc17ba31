// sdd on Hopper for large blocks (b = 64, 128), and as dense panels for small ones (b <= 32):
// the weight gradient dW = X.T @ dY on W's blocks, persistent and warp-specialized, its
// operands copied by the TMA engine.
//
// The tile is sdd_wgmma's unflipped one (sdd_wgmma.cu describes it): a CTA owns a group of
// G blocks of block row r, D = X_r.T @ [dY_c0 .. dY_c(G-1)] with M = B and N = G * B (up
// to 256), reduced over every row of X and dY in order inside the CTA (deterministic, no
// atomics). Or, paired (ROWS = 2, b = 64), two block rows at once: M = 2B over the union
// of their columns, twice the MMAs for each dY slice copied, the products of absent
// blocks discarded. What differs from sdd_wgmma is who moves the bytes:
// * In sdd_wgmma every thread issues 16-byte cp.async copies, 12 per slice at b = 128,
//   then waits at a CTA-wide barrier before the slice's MMAs. Here one lane of a producer
//   warp issues a tensor copy per 64-column panel (B / 64 of X, G * B / 64 of dY per
//   slice) onto the stage's `full` mbarrier, and the consumer warpgroups only wait for
//   it: no copy instructions in their issue slots and no barrier across warpgroups.
// * The CTAs are persistent (a grid of about one per SM): CTA i takes work items i,
//   i + grid, ..., and the producer copies the next item's first slices while the
//   consumers store an item's blocks.
// * Items are whole groups, all the CTAs of a round at the same depth of neighbouring
//   groups, so each slice of X and dY comes from memory about once for all of them. Only
//   where the groups leave the last round partly idle (`whole` < n_groups; a group's
//   reduction is long, 0.1 ms at b = 128 and N = 8192) is each of the groups past `whole`
//   cut into `splits` runs of slices (SddItems): the tail then takes a fraction of a round.
//   A piece's float32 partial goes to the workspace and the group's last piece to finish
//   adds them in piece order (split_combine), so results repeat bit for bit.
// Or, for small blocks (PANEL, b = 8-32), a dense tile of ROWS = 128 / b adjacent block
// rows by G adjacent block columns (M = 128, N = G * b <= 256), reduced as one dense
// product of X's 128 columns and dY's G * b columns (each a contiguous range, so a slice
// is 2 + N / 64 boxes), its blocks stored where W has them: per-block tiles would read an
// X and a dY slice for every b x b block. The tiles are those of the block grid that hold
// a block; what the tile computes for absent blocks is dropped.
// The maps: `xmap` over X (inner rows of the C = xcols columns), `dmap` over dY (inner rows
// of its columns), both in boxes of 64 columns by BK rows, 128-byte swizzle: one box is
// one panel of the MN-major stage tiles (MnTile), so the layouts agree. Rows past `inner`
// land as zeros. A group's members past its count load a box wholly out of bounds (zeros,
// no memory traffic) and are never stored.
#include "common.cuh"
#include "sm90.cuh"
#include "wgmma.cuh"
#include "sdd_wgmma.cuh"

// The group table. ROWS = 1: rows (block row r, first block p0, count), the blocks
// p0.. of one block row. ROWS = 2 (paired): rows (block row r0, block row r1 or -1,
// count, G block columns, G blocks of row r0, G blocks of row r1), -1 for a block not
// stored; the tile stacks X's columns of block rows r0 and r1 as D's 2B rows, so each dY
// panel copied serves two blocks where both rows hold that column
// (worklists.sdd_pair_groups_host pairs the rows that share the most columns).
template <int G, int ROWS>
struct SddGroups {
  static constexpr int WIDTH = ROWS == 1 ? 3 : 3 + 3 * G;
  const int* row;
  __device__ __forceinline__ SddGroups(const int* groups, int grp) : row(groups + WIDTH * grp) {}
  // The h-th block row (h < ROWS), -1 for none.
  __device__ __forceinline__ int block_row(int h) const { return row[h]; }
  // Member g's first column in dY, for B-wide blocks; past the count, `none`.
  __device__ __forceinline__ int column(int g, const int* indices, int B, int none) const {
    if (ROWS == 1) return g < row[2] ? indices[row[1] + g] * B : none;
    return g < row[2] ? row[3 + g] * B : none;
  }
  // The block of D's rows h * B.. and member g's columns, and whether it is stored (the
  // blocks of sdd_wgmma_store_blocks).
  __device__ __forceinline__ bool ok(int h, int g) const {
    return ROWS == 1 ? g < row[2] : row[3 + (1 + h) * G + g] >= 0;  // -1 past the count
  }
  __device__ __forceinline__ int id(int h, int g) const {
    return ROWS == 1 ? row[1] + g : row[3 + (1 + h) * G + g];
  }
};

// The panel tiles' table: rows (first block row, first block column, then the block of
// each of the ROWS x G positions, row-major, -1 for none).
template <int G, int ROWS>
struct SddPanels {
  static constexpr int WIDTH = 2 + ROWS * G;
  const int* row;
  __device__ __forceinline__ SddPanels(const int* tiles, int t) : row(tiles + (i64)WIDTH * t) {}
  __device__ __forceinline__ bool ok(int h, int g) const { return row[2 + h * G + g] >= 0; }
  __device__ __forceinline__ int id(int h, int g) const { return row[2 + h * G + g]; }
};

// The type P ? A : B (no standard headers under NVRTC).
template <bool P, class A, class B>
struct Pick {
  typedef A type;
};
template <class A, class B>
struct Pick<false, A, B> {
  typedef B type;
};

// The work items: groups [0, whole) whole, then `splits` pieces of each later group,
// piece-major (item whole + s * tail + i is piece s of group whole + i: the pieces running
// together read the same rows of X and dY), piece s reducing slices
// [s * ktiles / splits, (s + 1) * ktiles / splits).
struct SddItems {
  int whole, tail, splits, ktiles;
  __device__ __forceinline__ int count() const { return whole + tail * splits; }
  // Item t's group, its first and end slice, and its piece (-1 for a whole group).
  __device__ __forceinline__ int group(int t, int& k0, int& k1, int& piece) const {
    if (t < whole) {
      k0 = 0;
      k1 = ktiles;
      piece = -1;
      return t;
    }
    const int u = t - whole, s = u / tail;
    k0 = s * ktiles / splits;
    k1 = (s + 1) * ktiles / splits;
    piece = splits > 1 ? s : -1;  // (one piece is the whole group)
    return whole + (u - s * tail);
  }
};

// WM x WN consumer warpgroups, warpgroup (wm, wn) owning D's m64 tiles wm * MT .. and its
// NW columns from wn * NW (as in sdd_wgmma); then one producer warp. D has M = ROWS * B
// rows and G * B columns.
template <class Tag, int B, int G, int WM, int WN, int STAGES, int ROWS, bool PANEL = false>
__global__ void __launch_bounds__(WM * WN * 128 + 32, 1)
    sdd_wgmma_tma(const __grid_constant__ TmaMap xmap, const __grid_constant__ TmaMap dmap,
                  int inner, int xcols, int dcols, const int* __restrict__ groups, int n_groups,
                  const int* __restrict__ indices, int whole, int splits, float* ws,
                  int* counts, u16* out, float alpha, float beta) {
  grid_dependency();
  constexpr int BK = 64, M = ROWS * B, EB = G * B, MT = M / 64 / WM, NW = EB / WN;
  constexpr int CONSUMERS = WM * WN * 128;
  typedef MnTile<M, BK> TA;
  typedef MnTile<EB, BK> TB;
  typedef typename Pick<PANEL, SddPanels<G, ROWS>, SddGroups<G, ROWS>>::type Groups;
  constexpr int STAGE_BYTES = TA::BYTES + TB::BYTES;
  static_assert(PANEL ? M == 128 && B <= 32 : ROWS == 1 || ROWS == 2,
                "one block row or a pair; panels: 128 rows of blocks up to 32");
  static_assert(M % (64 * WM) == 0 && EB % (64 * WN) == 0 && EB <= 256, "bad sdd tile");
  static_assert(TA::PANEL == 64 * 2 * BK && STAGE_BYTES % 1024 == 0,
                "a TMA box is one 128-byte-swizzled panel");
  extern __shared__ unsigned char smem_raw[];
  const unsigned base = (smem_addr(smem_raw) + 1023u) & ~1023u;  // launch adds 1 KiB slack
  __shared__ unsigned long long full[STAGES], empty[STAGES];
  __shared__ int s_last;  // split_combine's flag
  const int tid = threadIdx.x;
  if (tid == 0) tma_ring_init<STAGES>(full, empty, CONSUMERS / 32);
  __syncthreads();  // the only CTA-wide barrier
  const SddItems items{whole, n_groups - whole, splits, (inner + BK - 1) / BK};
  unsigned it = 0;  // slices through the ring so far

  if (tid >= CONSUMERS) {  // the producer: lane 0 of the last warp
    if (tid != CONSUMERS) return;
    for (int t = blockIdx.x; t < items.count(); t += gridDim.x) {
      int k0, k1, piece;
      const int grp = items.group(t, k0, k1, piece);
      // The first column in X of each 64 of D's rows and in dY of each 64 of its columns;
      // a box wholly past X's or dY's columns (a missing row or member) lands as zeros
      int xcol[M / 64], col[EB / 64];
      if constexpr (PANEL) {  // contiguous, from the tile's first block row and column
        const int* row = groups + (i64)SddPanels<G, ROWS>::WIDTH * grp;
#pragma unroll
        for (int p = 0; p < M / 64; ++p) xcol[p] = row[0] * B + p * 64;
#pragma unroll
        for (int p = 0; p < EB / 64; ++p) col[p] = row[1] * B + p * 64;
      } else {  // B / 64 panels of each block row and member
        const SddGroups<G, ROWS> gr(groups, grp);
#pragma unroll
        for (int h = 0; h < ROWS; ++h)
#pragma unroll
          for (int p = 0; p < B / 64; ++p)
            xcol[h * (B / 64) + p] = (gr.block_row(h) >= 0 ? gr.block_row(h) * B : xcols) + p * 64;
#pragma unroll
        for (int g = 0; g < G; ++g)
#pragma unroll
          for (int p = 0; p < B / 64; ++p)
            col[g * (B / 64) + p] = gr.column(g, indices, B, dcols) + p * 64;
      }
      for (int kt = k0; kt < k1; ++kt, ++it) {
        const int s = it % STAGES;
        mbar_wait(&empty[s], ((it / STAGES) & 1) ^ 1);  // the first round passes at once
        mbar_arrive_expect_tx(&full[s], STAGE_BYTES);
        const unsigned sA = base + s * STAGE_BYTES, sB = sA + TA::BYTES;
#pragma unroll
        for (int p = 0; p < M / 64; ++p)
          tma_load_2d(sA + p * TA::PANEL, &xmap, xcol[p], kt * BK, &full[s]);
#pragma unroll
        for (int p = 0; p < EB / 64; ++p)
          tma_load_2d(sB + p * TB::PANEL, &dmap, col[p], kt * BK, &full[s]);
      }
    }
    return;
  }

  const int wm = tid / 128 / WN, wn = tid / 128 % WN;  // consumer warpgroup
  float acc[MT][NW / 2];
  for (int t = blockIdx.x; t < items.count(); t += gridDim.x) {
    int k0, k1, piece;
    const int grp = items.group(t, k0, k1, piece);
    consume_tile<STAGES, 1, false>(k1 - k0, it, acc, full, empty, tid, [&](int s) {
      const unsigned sA = base + s * STAGE_BYTES;
      sdd_wgmma_slice<Tag, TA, TB, MT, NW, BK>(acc, sA, sA + TA::BYTES, wm, wn);
    });
    if (piece >= 0 &&
        !split_combine<CONSUMERS>(acc, ws + (i64)(grp - whole) * splits * MT * (NW / 2) * CONSUMERS,
                                  splits, piece, counts + (grp - whole), tid, &s_last,
                                  [] { named_barrier_sync<2>(CONSUMERS); }))
      continue;  // another piece's CTA adds the group's pieces
    sdd_wgmma_store_blocks<Tag, B, false, MT, NW, ROWS>(acc, wm, wn, tid, Groups(groups, grp),
                                                        out, alpha, beta);
  }
}
