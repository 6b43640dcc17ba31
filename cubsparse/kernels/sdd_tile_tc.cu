// sdd for small blocks on tensor cores: a CTA per tile of the block grid
// (sdd_copies.cuh describes the decomposition).
#include "sdd_copies.cuh"

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
  grid_dependency();
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
