// dsd on Hopper: the persistent, warp-specialized single-block kernel with its copies by
// the TMA engine and its tiles handed out at run time (sm90_single.cuh describes the
// tile).
#include "sm90_single.cuh"

// Stores warpgroup wg's m64nXN accumulator of the transposed product (rows: the block's
// columns 64 wg.., columns: XN rows of X) as single_store does. Register pair (4q + 2h,
// + 1) holds column c = 64 wg + 16 w + lane / 4 + 8 h at X rows 8 q + 2 (lane % 4) + {0, 1},
// and lanes l, l ^ 4 hold adjacent columns: trading one value (transpose_pair) gives each
// lane one X row at two adjacent columns, a 4-byte store.
template <class Tag, int B, int XN>
__device__ __forceinline__ void rows_n_store(const float (&acc)[XN / 2], int wg, int tid,
                                             int row0, int nrows, int j, int slot, u16* y,
                                             i64 ldy, float alpha, float beta, float* ws,
                                             i64 ws_stride) {
  const int lane = tid & 31, wiw = (tid % 128) / 32;
#pragma unroll
  for (int q = 0; q < XN / 8; ++q)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float s0, s1;
      const bool even = transpose_pair(lane, acc[4 * q + 2 * h], acc[4 * q + 2 * h + 1], s0, s1);
      const int r = row0 + q * 8 + (lane & 3) * 2 + (even ? 0 : 1);
      const int col = wg * 64 + wiw * 16 + (lane >> 2) + h * 8 - (even ? 0 : 1);
      if (r >= nrows) continue;
      if (slot < 0)
        store_pair(Tag(), y + (i64)r * ldy + (i64)j * B + col, s0, s1, alpha, beta);
      else
        *(float2*)(ws + slot * ws_stride + (i64)r * B + col) = make_float2(s0, s1);
    }
}

// The barrier of consumer warpgroup wg (0 or 1) alone in the TMA-store epilogues: hardware
// barrier 3 + wg, each an immediate (ptxas reserves every barrier for an id it cannot
// tell at compile time).
__device__ __forceinline__ void epilogue_sync(int wg) {
  if (wg == 0)
    named_barrier_sync<3>(128);
  else
    named_barrier_sync<4>(128);
}

// rows_n_store through shared memory and the TMA engine (alpha applied, beta 0): warpgroup
// wg's 64 columns of Y (col0..) over the tile's XN rows go out in rounds of EPI rows, each
// staged in `buf` (EPI rows of 128 bytes, the 128-byte swizzle of `ymap`'s 64 x EPI box)
// and stored by one TMA copy that the warpgroup does not wait for: the copy engine writes
// whole lines of Y while the warpgroup goes on to its next tile, where register stores (4
// bytes a thread; a warp's store fills half of each 32-byte sector it writes) kept the
// warpgroup and the SM's store path busy for the whole epilogue. The round's leader
// waits for the buffer's previous copy to have read it before anyone writes it again.
// Rows past Y's end are not written (the map's bounds), and rounds wholly past it are
// skipped. The accumulator's 8 x 8 pieces (columns 16 w + 8 h.. of the block, X rows
// 8 q..) are written transposed by stmatrix, four a warp instruction (q, q + 1; h = 0, 1):
// lane l addresses X row 8 (q + (l / 8) / 2) + l % 8, 16-byte chunk 2 w + (l / 8) % 2 of the
// row, where trading values between lane pairs and 4-byte writes took eight times the
// instructions while both warpgroups' tensor cores idled (bench/NOTES.md). One instruction's
// eight rows of a piece fall in distinct chunks of the swizzle (no bank conflicts).
// Warpgroup wg (0 or 1) synchronizes on barrier 3 + wg.
template <class Tag, int XN, int EPI>
__device__ __forceinline__ void rows_n_store_tma(const float (&acc)[XN / 2], int wg, int tid,
                                                 int row0, int nrows, int col0, unsigned buf,
                                                 const TmaMap* ymap, float alpha) {
  static_assert(EPI % 16 == 0 && XN % EPI == 0 && EPI <= 256, "rounds of whole 16-row groups");
  const int lane = tid & 31, wiw = (tid % 128) / 32;
  const bool leader = tid % 128 == 0;
  const int piece = lane >> 3, r = lane & 7;  // the piece (q + piece / 2, h = piece % 2), row
  const unsigned at = buf + ((piece >> 1) * 8 + r) * 128 + (((2 * wiw + (piece & 1)) ^ r) << 4);
#pragma unroll
  for (int part = 0; part < XN / EPI; ++part) {
    if (row0 + part * EPI >= nrows) break;  // (the same for the whole warpgroup)
    if (leader) bulk_wait_read<0>();
    epilogue_sync(wg);  // the buffer is free
#pragma unroll
    for (int qq = 0; qq < EPI / 8; qq += 2) {
      const float* a = acc + 4 * (part * (EPI / 8) + qq);  // pieces q, q + 1: 8 values
      stmatrix_x4_trans(at + qq * 1024, pair_value(Tag(), nullptr, a[0], a[1], alpha, 0.f),
                        pair_value(Tag(), nullptr, a[2], a[3], alpha, 0.f),
                        pair_value(Tag(), nullptr, a[4], a[5], alpha, 0.f),
                        pair_value(Tag(), nullptr, a[6], a[7], alpha, 0.f));
    }
    fence_proxy_async();  // this thread's writes, to the copy engine
    epilogue_sync(wg);
    if (leader) {
      tma_store_2d(ymap, buf, col0, row0 + part * EPI);
      bulk_commit();
    }
  }
}

// The panels' epilogue through shared memory and the TMA engine (alpha applied, beta 0):
// warpgroup wg's 64 rows of the tile (row0 + 64 wg..) over the panel's BT columns of Y
// (col0..) go out 64 columns at a time, each staged in `buf` (64 rows of 128 bytes, the
// 128-byte swizzle of `ymap`'s 64 x 64 box) and stored by one TMA copy the warpgroup does
// not wait for; the leader waits for the buffer's previous copy to have read it before
// anyone writes it again. Register pair (4q + 2h, + 1) holds row 16 w + lane / 4 + 8 h,
// columns 8 q + 2 (lane % 4) + {0, 1} (the m64nBT accumulator): a 4-byte store per pair, a
// warp's eight rows each in their own 16-byte chunk of the swizzle (no bank conflicts).
// The map's bounds clip rows past Y and columns past the last group's blocks. The
// register stores it replaces wrote 16 bytes of a row per block and warp instruction,
// (b = 8) half of each sector. Warpgroup wg (0 or 1) synchronizes on barrier 3 + wg.
template <class Tag, int BT>
__device__ __forceinline__ void panel_store_tma(const float (&acc)[BT / 2], int wg, int tid,
                                                int row0, int col0, unsigned buf,
                                                const TmaMap* ymap, float alpha) {
  static_assert(BT % 64 == 0, "whole 64-column boxes");
  const int lane = tid & 31, wiw = (tid % 128) / 32;
  const bool leader = tid % 128 == 0;
  const int r = wiw * 16 + (lane >> 2);  // the lane's first row (+ 8 h), phase r % 8
#pragma unroll
  for (int c = 0; c < BT / 64; ++c) {
    if (leader) bulk_wait_read<0>();
    epilogue_sync(wg);  // the buffer is free
#pragma unroll
    for (int qq = 0; qq < 8; ++qq)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int q = 8 * c + qq, rr = r + 8 * h;
        st_shared_u32(buf + rr * 128 + ((qq ^ (rr & 7)) << 4) + (lane & 3) * 4,
                      pair_value(Tag(), nullptr, acc[4 * q + 2 * h], acc[4 * q + 2 * h + 1],
                                 alpha, 0.f));
      }
    fence_proxy_async();  // this thread's writes, to the copy engine
    epilogue_sync(wg);
    if (leader) {
      tma_store_2d(ymap, buf, col0 + 64 * c, row0 + 64 * wg);
      bulk_commit();
    }
  }
}

// Tiles handed out at run time: a persistent CTA takes its first tile by blockIdx.x and
// each next one from a global counter (`next_tile`, zero at launch), so CTAs that
// drew short lists take more tiles instead of the kernel waiting on the unluckiest one: at
// b = 128, d = 0.25 (lists of 8 +- 2.4 blocks) the fixed stride gave the busiest CTA 1.27x
// the mean work. Tiles are still taken in an order (row tile by row tile, in bands, or the
// plan's table), so the CTAs running at one time share rows of X, and each tile is reduced
// by one CTA in list order: the results do not depend on which CTA takes which tile, nor
// on the order. The producer's lane 0 takes the tiles and passes each to
// the consumers through a ring of DEPTH slots in shared memory (a tile of an empty list
// has no slice to pace the producer, so the ring itself does); `n` counts the tiles the
// calling thread has passed through it. The barriers order each slot's write before its
// reads and the reads before the next write; the slot is still accessed atomically,
// since compute-sanitizer's racecheck flagged plain stores and loads handed over by
// mbarrier alone.
// CLUSTER > 1: the CTAs of a cluster work on one tile together, so rank 0's producer
// alone takes tiles and writes each into the slot of every CTA; the readers (consumer
// warps of every CTA, producer warps of the other ranks) all release rank 0's slot.
template <int CLUSTER>
struct TileQueue {
  static constexpr int DEPTH = 4;
  unsigned long long full[DEPTH], empty[DEPTH];
  int tile[DEPTH];

  __device__ __forceinline__ void init(int consumer_warps) {
#pragma unroll
    for (int q = 0; q < DEPTH; ++q) {
      mbar_init(&full[q], 1);
      mbar_init(&empty[q], consumer_warps * CLUSTER + CLUSTER - 1);
    }
  }
  // The producer warp's next tile (every lane gets it). Tiles past the first are handed
  // out once each and every taker makes one last request that finds none left, so a launch
  // makes exactly `ntiles` requests: the one that reads ntiles - 1 is the last and puts
  // the counter back to zero for the next launch on the stream (no memset per call).
  __device__ __forceinline__ int next(int* counter, int ntiles, int lane) const {
    int t = 0;
    if (lane == 0) {
      const int c = atomicAdd(counter, 1);
      if (c == ntiles - 1) atomicExch(counter, 0);
      t = gridDim.x / CLUSTER + c;
    }
    return __shfl_sync(0xffffffffu, t, 0);
  }
  __device__ __forceinline__ void publish(int t, unsigned& n) {
    const int q = n % DEPTH;
    const unsigned phase = ((n / DEPTH) & 1) ^ 1;  // the first round passes at once
    if constexpr (CLUSTER == 1) {
      mbar_wait(&empty[q], phase);
      atomicExch(&tile[q], t);
      mbar_arrive(&full[q]);  // releases the write
    } else {  // every CTA's readers are done with the slot before it is written again
      mbar_wait_cluster(&empty[q], phase);
#pragma unroll
      for (int r = 0; r < CLUSTER; ++r) {
        int old;  // atomically, as the CTA's own slot (racecheck)
        asm volatile("atom.relaxed.cluster.shared::cluster.exch.b32 %0, [%1], %2;\n"
                     : "=r"(old)
                     : "r"(peer_smem(&tile[q], r)), "r"(t)
                     : "memory");
        mbar_arrive_cluster_release(&full[q], r);
      }
    }
    ++n;
  }
  __device__ __forceinline__ int take(int tid, unsigned& n) {
    const int q = n % DEPTH;
    if constexpr (CLUSTER == 1)
      mbar_wait(&full[q], (n / DEPTH) & 1);
    else
      mbar_wait_cluster(&full[q], (n / DEPTH) & 1);
    const int t = atomicAdd(&tile[q], 0);
    __syncwarp();  // every lane has read the slot
    if ((tid & 31) == 0) {
      if constexpr (CLUSTER == 1)
        mbar_arrive(&empty[q]);
      else
        mbar_arrive_cluster_release(&empty[q], 0);
    }
    ++n;
    return t;
  }
};

// consume_tile for a stage that may hold no block for this warpgroup (bit wg of
// present[stage] clear): its wgmma group (fence, MMAs, commit, wait) is issued whole inside
// the branch on the bit, since ptxas serializes every wgmma of a group that a branch cuts
// across (bench/NOTES.md), so each slice's MMAs are waited for before the next (no slice
// in flight; the other warpgroup's MMAs fill the tensor cores meanwhile).
template <int STAGES, int C, class Mma>
__device__ __forceinline__ void consume_present(int ktiles, unsigned& it, float (&acc)[1][C],
                                                unsigned long long* full,
                                                unsigned long long* empty, int* present, int wg,
                                                int tid, Mma mma) {
#pragma unroll
  for (int i = 0; i < C; ++i) acc[0][i] = 0.f;
  for (int kt = 0; kt < ktiles; ++kt, ++it) {
    const int s = it % STAGES;
    mbar_wait(&full[s], (it / STAGES) & 1);
    int bits = 0;
    if ((tid & 31) == 0) bits = atomicAdd(&present[s], 0);
    if ((__shfl_sync(0xffffffffu, bits, 0) >> wg) & 1) {
      keep_in_registers(acc);
      wgmma_fence();
      mma(s);
      wgmma_commit();
      wgmma_wait<0>();
      keep_in_registers(acc);
    }
    __syncwarp();
    if ((tid & 31) == 0) mbar_arrive(&empty[s]);
  }
}

// dsd_wgmma_ws with its copies made by the TMA engine. The cp.async producer warpgroup
// spends its issue slots on 16-byte copies, and its stages arrived about 1,400 cycles
// apart at b = 128 against about 500 cycles of MMAs each (bench/NOTES.md); here one thread of a
// producer warp issues a tensor copy per operand tile, and the copy engine moves the
// bytes. Each list entry contributes a tile of X (BM rows, EK = min(B, 64) columns) and a
// tile of its block (EK deep) per 64-deep slice, as rows of SW = 2 * EK bytes in the
// SW-byte swizzle (the tensor maps ask for it): b = 64/128 fill one 128-byte tile per
// slice, b = 32 two 64-byte ones (X's in boxes of at most 256 rows, the TMA limit, so a
// 512-row tile takes two). A slice's entries past the list read out-of-bounds
// boxes, which land as zeros, so the consumers never branch around a wgmma.
// The tensor maps: `xmap` over X (nrows x xcols), `wmap` over the blocks as rows, [n][k]
// (K-major) or, with KN, as W stores them, [k][n], read N-major in 64-column panels.
// XN > 0 (b = 64, 128): the transposed product, Y tile^T = block^T @ X tile^T, with the
// tile's XN rows of X as wgmma's N and each of the WG = b / 64 consumer warpgroups owning
// 64 of the block's columns as M (MW = 1). One m64nXN wgmma per k16 step reads 2 KB of
// the block and XN * 32 bytes of X from shared memory, where the m64nB form rereads the
// block for every m64 tile of rows: at b = 128 two m64n128 read 12 KB per 128 tensor
// cycles, two m64n256 20 KB per 256. The epilogue stores the accumulators transposed
// (stmatrix .trans into the TMA store's staging, else lane-pair trades, transpose_pair).
//
// CLUSTER = 2 (dsd_wgmma_tma_mc, XN > 0): the two CTAs of a cluster take the same list
// for two neighbouring row tiles, so each slice's block is the same for both: each CTA
// copies half of its rows and multicasts them to both, halving the bytes of W read from
// L2 (ncu put these kernels at 85 % of L2 throughput at b = 128, bench/NOTES.md). A stage is
// refilled only once the consumers of both CTAs have released it. With an odd count of
// row tiles, the last cluster's second CTA reads X out of bounds (zeros) and stores
// nothing, but still copies its half of every block.
//
// COLS = 2 (b = 64, XN > 0): a tile of two output blocks (group g: blocks 2g, 2g + 1)
// walks the union of their lists, consumer warpgroup h owning block 2g + h: each slice
// of X (one entry, 32 KB) feeds both blocks where both hold the entry's block row, where a
// single-block tile reads it once per block. The stage holds the two blocks side by side,
// as b = 128's tile holds its block's two halves; an absent one lands as zeros from an
// out-of-bounds box (no bytes read), and the producer publishes which blocks a stage
// holds (a bit each, written before its arrival on `full`), so the warpgroup of an
// absent block skips its MMAs. That warpgroup then idles for the slice, which is why the
// tile pays only where the two blocks share most entries: on random layouts it ran
// 0.77-0.92x the single-block tile (bench/NOTES.md). `nout` bounds the blocks stored.
//
// PANEL (COLS > 1 with X's rows as M: b = 8, 16, 32): a tile of COLS adjacent output blocks
// multiplies each entry of their union list as one dense K-major panel of BT = COLS * b
// columns (wgmma's N, at most 256): one X slice feeds every member, and absent blocks
// cost MMAs on zeros. The group's lists are padded to whole slices (EPS entries), and the
// panels gathered before the launch (panel_blocks in transpose_blocks.cu) a slice at a
// time: `wmap` maps rows of 64 k (128 bytes, 128-byte swizzle), slice s's BT rows of n at
// rows s * BT.., absent members' blocks zero. A slice costs EPS boxes of X and one of
// panels; a box per member and entry (an absent one out of bounds) ran slower than the
// union kernel, and so did a box per entry (64-byte rows), bench/NOTES.md. Each consumer
// warpgroup owns 64 rows of the tile and all of the panel's columns. With CLUSTER = 2 the
// two CTAs take neighbouring row tiles of one group, each copying half of every slice's
// rows into both.
// WHOLE (panels only): the lists walk whole 64-column slices of X (worklists.lists with
// `whole`: every block row of a slice the group's union touches, blocks absent from W
// multiplied as zeros), so a slice of X is one box of 128-byte rows in the 128-byte
// swizzle, as at b >= 64, where the per-entry boxes of 16- or 32-byte rows cost the copy
// engine about as much time per box whatever its size (bench/NOTES.md 121).
template <class Tag, int B, int MW, int WG, int STAGES, bool KN, int INFLIGHT, int XN,
          int CLUSTER, int COLS, int EPI, bool WHOLE>
__device__ __forceinline__ void dsd_tma_body(
    const TmaMap* xmap, const TmaMap* wmap, int nrows, int xcols, int wrows,
    const int4* __restrict__ work, int nwork, const int* __restrict__ blk,
    const int* __restrict__ gidx, u16* y, i64 ldy, float alpha, float beta, float* ws,
    i64 ws_stride, const int2* __restrict__ segs, int* counts, int nout, int* next_tile,
    int band, const TmaMap* ymap, int ytma, const int* __restrict__ order,
    const int* __restrict__ ranges) {
  constexpr int BK = 64, BM = XN ? XN : 64 * MW * WG, CONSUMERS = WG * 128;
  constexpr int EK = B < BK ? B : BK, EPS = BK / EK, SPE = B / EK;  // per entry / slice
  constexpr int BT = B * COLS;  // columns of W per stage: the tile's blocks side by side
  constexpr int SW = 2 * EK, A_TILE = BM * SW, W_TILE = BT * SW, XBOX = BM < 256 ? BM : 256;
  constexpr int A_BYTES = EPS * A_TILE, STAGE_BYTES = A_BYTES + EPS * W_TILE;
  constexpr int PANELS = KN ? (B > 64 ? B / 64 : 1) : 1, PANEL_N = B / PANELS;
  // a block's box per panel: WROWS rows (of k with KN, else of n) of WROW_BYTES, of which
  // each CTA of a cluster copies WROWS / CLUSTER
  constexpr int WROWS = KN ? EK : B, WROW_BYTES = KN ? 2 * PANEL_N : SW;
  constexpr int WPART = WROWS / CLUSTER;
  constexpr bool PANEL = XN == 0 && COLS > 1;
  static_assert((B >= 32 || PANEL) && STAGE_BYTES % 1024 == 0,
                "stages keep the swizzle atoms aligned");
  static_assert(!PANEL || (B <= 32 && !KN && MW == 1 && BT <= 256 &&
                           (BT / CLUSTER * 128) % 1024 == 0),
                "panels: b <= 32, K-major blocks, one m64 tile per warpgroup, N <= 256");
  static_assert(!XN || (WG == BT / 64 && MW == 1 &&
                        (XN == 32 || XN == 64 || XN == 128 || XN == 256)),
                "XN: one m64 warpgroup per 64 columns of the tile, 32, 64, 128 or 256 rows");
  static_assert(COLS == 1 || PANEL || (COLS == 2 && B == 64 && XN > 0 && CLUSTER == 1),
                "two-block tiles: b = 64, X's rows as N, no cluster");
  static_assert(EPI == 0 || ((XN > 0 || (PANEL && EPI == 64)) && WG <= 2),
                "the TMA store: X's rows as N, or panels in boxes of 64 rows; barriers 3-4");
  static_assert(!WHOLE || PANEL, "whole slices of X: panels only");
  static_assert(CLUSTER == 1 || (CLUSTER == 2 && (PANEL || (XN > 0 &&
                                                            (WPART * WROW_BYTES) % 1024 == 0))),
                "clusters of two, over whole swizzle atoms of the block");
  extern __shared__ unsigned char smem_raw[];
  const unsigned base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  __shared__ unsigned long long full[STAGES], empty[STAGES];
  // (panels read their lists from global memory)
  __shared__ int s_g[PANEL ? 1 : LIST_CAP], s_p[PANEL ? 1 : LIST_CAP * COLS];
  __shared__ int present[COLS > 1 && !PANEL ? STAGES : 1];  // a stage's blocks, a bit each
  __shared__ TileQueue<CLUSTER> tiles;
  unsigned ntaken = 0;  // tiles through the queue (this thread's count)
  const int tid = threadIdx.x;
  const int rank = CLUSTER > 1 ? (int)cluster_rank() : 0;
  if (tid == 0) {
    tiles.init(CONSUMERS / 32);
    tma_ring_init<STAGES>(full, empty, CONSUMERS / 32 * CLUSTER);
  }
  if constexpr (CLUSTER > 1)
    cluster_sync();  // the peer's barriers are ready before any copy or arrival reaches them
  else
    __syncthreads();  // the only CTA-wide barrier
  const int row_tiles = (nrows + BM * CLUSTER - 1) / (BM * CLUSTER);  // (of a cluster)
  const int ntiles = nwork * row_tiles;
  // Tile t's work item and row tile: bands of `band` row tiles, each band's tiles item by
  // item and, for one item, row tile by row tile; band 1 walks every item of a row tile
  // before the next row tile.
  auto coords = [&](int t, int& w, int& rt) {
    const int b0 = t / (band * nwork) * band, rb = min(band, row_tiles - b0);
    const int tin = t - b0 * nwork;
    w = tin / rb;
    rt = b0 + tin % rb;
  };
  // The launch's t-th tile: t itself, or order[t] where the plan gives an order
  // (worklists.tile_order: a long list's tiles taken ahead of their row tile, so that none
  // starts near the end). Rank 0's producer maps each tile it takes; the queue carries the
  // mapped tile, and past the last one, t itself (>= ntiles, the end).
  auto placed = [&](int t) { return order != nullptr && t < ntiles ? __ldg(order + t) : t; };
  // Fixed runs (`ranges`, the small-N plan's stream-K cut, one CTA a run): CTA c takes
  // tiles ranges[c] .. ranges[c + 1] - 1 in order and no counter, so each CTA streams the
  // count of W's blocks the plan gave it; then ntiles, the end.
  const int run_end = ranges != nullptr ? __ldg(ranges + blockIdx.x + 1) : 0;
  auto in_run = [&](int t) { return t < run_end ? t : ntiles; };
  unsigned it = 0;

  // the producer warp: the list by the warp, copies by lane 0 (panels: by lanes 0..EPS)
  if (tid >= CONSUMERS) {
    const int lane = tid - CONSUMERS;
    // rank 0 takes the cluster's tiles (its first by cluster index); the others read them
    const int first = ranges != nullptr ? in_run(__ldg(ranges + blockIdx.x))
                      : CLUSTER == 1 ? placed((int)blockIdx.x)
                      : rank == 0    ? placed((int)cluster_id_x())
                                     : tiles.take(tid, ntaken);
    for (int t = first;; t = ranges != nullptr ? in_run(t + 1)
                         : rank == 0           ? placed(tiles.next(next_tile, ntiles, lane))
                                               : tiles.take(tid, ntaken)) {
      if (rank == 0 && lane == 0) tiles.publish(t, ntaken);
      if (t >= ntiles) break;
      int w, rt;
      coords(t, w, rt);
      const int4 item = work[w];
      const int q0 = item.y, len = item.z, row0 = (rt * CLUSTER + rank) * BM;
      if constexpr (PANEL) {
        // Per slice, one X box per entry (lanes 0..; WHOLE: one box, lane 0) and one box
        // of the slice's panels (lane EPS, WHOLE: 1; with clusters, this CTA's part of its
        // rows, copied into both CTAs);
        // lane 0 takes the stage and announces its bytes first. The padded list's
        // entries past the group's read X's block column -1: zeros.
        const int ktiles = len / EPS;
        for (int kt = 0; kt < ktiles; ++kt, ++it) {
          const int s = it % STAGES;
          if (lane == 0) {
            mbar_wait(&empty[s], ((it / STAGES) & 1) ^ 1);  // the first round passes at once
            mbar_arrive_expect_tx(&full[s], STAGE_BYTES);
          }
          __syncwarp();
          const unsigned sA = base + s * STAGE_BYTES, sW = sA + A_BYTES;
          if (WHOLE ? lane == 0 : lane < EPS) {  // (WHOLE: the slice's first block row)
            tma_load_2d(sA + lane * A_TILE, xmap, __ldg(gidx + q0 + kt * EPS + lane) * B, row0,
                        &full[s]);
          } else if (lane == (WHOLE ? 1 : EPS)) {
            constexpr int PART = BT / CLUSTER;  // rows of the panels each CTA copies
            const int wrow = (q0 / EPS + kt) * BT + rank * PART;
            if constexpr (CLUSTER == 1)
              tma_load_2d(sW, wmap, 0, wrow, &full[s]);
            else
              tma_load_2d_multicast(sW + rank * PART * 128, wmap, 0, wrow, &full[s],
                                    (1u << CLUSTER) - 1);
          }
        }
        continue;
      }
      __syncwarp();  // lane 0 is done with the previous list
      if constexpr (COLS == 1) {
        fill_work_list(s_g, s_p, gidx, blk, q0, len, lane, 32);
      } else {  // entry e's blocks at COLS e..
        for (int i = lane; i < len && i < LIST_CAP; i += 32) {
          s_g[i] = gidx[q0 + i];
#pragma unroll
          for (int h = 0; h < COLS; ++h) s_p[i * COLS + h] = blk[(q0 + i) * COLS + h];
        }
      }
      __syncwarp();
      if (lane != 0) continue;
      const WorkList list{s_g, s_p, gidx, blk, q0};
      auto member_block = [&](int e, int h) {  // COLS > 1: block of member h, or -1
        return e < LIST_CAP ? s_p[e * COLS + h] : __ldg(blk + (i64)(q0 + e) * COLS + h);
      };
      const int ktiles = (len * B + BK - 1) / BK;
      for (int kt = 0; kt < ktiles; ++kt, ++it) {
        const int s = it % STAGES;
        mbar_wait(&empty[s], ((it / STAGES) & 1) ^ 1);  // the first round passes at once
        if constexpr (COLS > 1) {  // one entry per slice (b = 64)
          unsigned bits = 0;
#pragma unroll
          for (int h = 0; h < COLS; ++h)
            if (kt < len && member_block(kt, h) >= 0) bits |= 1u << h;
          atomicExch(&present[s], (int)bits);  // released by the arrival below
        }
        mbar_arrive_expect_tx(&full[s], STAGE_BYTES);
        const unsigned sA = base + s * STAGE_BYTES, sW = sA + A_BYTES;
        const int off = (kt % SPE) * EK;  // k offset inside the entry
#pragma unroll
        for (int el = 0; el < EPS; ++el) {
          const int e = kt / SPE * EPS + el;
          const bool live = e < len;
#pragma unroll
          for (int h = 0; h < BM / XBOX; ++h)  // a box spans at most 256 rows
            tma_load_2d(sA + el * A_TILE + h * XBOX * SW, xmap,
                        live ? list.input(e) * B + off : xcols, row0 + h * XBOX, &full[s]);
          if constexpr (COLS > 1) {  // member h's block into columns B h.. of the tile
#pragma unroll
            for (int h = 0; h < COLS; ++h) {
              const int bh = live ? member_block(e, h) : -1;
              const int wrow = bh >= 0 ? bh * B : wrows;
              tma_load_2d(sW + el * W_TILE + h * B * SW, wmap, KN ? 0 : off,
                          KN ? wrow + off : wrow, &full[s]);
            }
            continue;
          }
          const int wrow = live ? list.block(e) * B : wrows;
#pragma unroll
          for (int p = 0; p < PANELS; ++p) {
            // KN: rows of k, PANEL_N columns of n per panel; else rows of n, EK columns of k
            const unsigned dst = sW + el * W_TILE + p * (W_TILE / PANELS);
            const int c0 = KN ? p * PANEL_N : off, c1 = KN ? wrow + off : wrow;
            if constexpr (CLUSTER == 1)
              tma_load_2d(dst, wmap, c0, c1, &full[s]);
            else  // this CTA's part of the rows, into every CTA of the cluster
              tma_load_2d_multicast(dst + rank * WPART * WROW_BYTES, wmap, c0,
                                    c1 + rank * WPART, &full[s], (1u << CLUSTER) - 1);
          }
        }
      }
    }
  } else {
    const int wg = tid / 128;  // consumer warpgroup
    constexpr int AM = XN ? 1 : MW, AN = XN ? XN / 2 : BT / 2;  // accumulator tiles, registers
    float acc[AM][AN];
    for (int t = tiles.take(tid, ntaken); t < ntiles; t = tiles.take(tid, ntaken)) {
      int w, rt;
      coords(t, w, rt);
      const int4 item = work[w];
      const int j = item.x, len = item.z, slot = item.w;
      const int ktiles = (len * B + BK - 1) / BK;
      auto mma = [&](int s) {
        const unsigned sA = base + s * STAGE_BYTES, sW = sA + A_BYTES;
        if constexpr (XN > 0) {  // A: columns 64 wg.. of the block (M-major as stored if KN)
#pragma unroll
          for (int kk = 0; kk < BK / 16; ++kk)
            Wgmma<Tag, XN, KN ? 1 : 0>::mma(
                acc[0],
                KN ? MnTile<BT, BK>::desc(sW, wg, kk)
                   : wgmma_desc_k<128>(sW + wg * 64 * 128 + kk * 32),
                wgmma_desc_k<128>(sA + kk * 32));
        } else if constexpr (PANEL) {  // the slice's panels: rows of 64 k, 128-byte swizzle
#pragma unroll
          for (int ks = 0; ks < BK / 16; ++ks) {
            // A: X's tile of the step's entry (b = 16, 32); at b = 8 the step spans two
            // entries' tiles of 16-byte rows (no swizzle), A_TILE apart
            unsigned long long da;
            if constexpr (WHOLE)  // one tile of 64 k, as the panels'
              da = wgmma_desc_k<128>(sA + wg * 64 * 128 + ks * 32);
            else if constexpr (B == 8)
              da = wgmma_desc_none(sA + 2 * ks * A_TILE + wg * 64 * 16, A_TILE, 128);
            else
              da = wgmma_desc_k<SW>(sA + (ks * 16 / EK) * A_TILE + wg * 64 * SW +
                                    (ks * 16 % EK) * 2);
            Wgmma<Tag, BT, 0>::mma(acc[0], da, wgmma_desc_k<128>(sW + ks * 32));
          }
        } else {
#pragma unroll
          for (int el = 0; el < EPS; ++el)
#pragma unroll
            for (int kk = 0; kk < EK / 16; ++kk) {  // k16 steps advance 32 bytes in a row
              // KN: entry el's rows of k follow entry el - 1's in the one N-major panel set
              const unsigned long long db =
                  KN ? MnTile<B, BK>::desc(sW, 0, el * (EK / 16) + kk)
                     : wgmma_desc_k<SW>(sW + el * W_TILE + kk * 32);
#pragma unroll
              for (int m = 0; m < AM; ++m)
                Wgmma<Tag, BT, KN ? 2 : 0>::mma(
                    acc[m],
                    wgmma_desc_k<SW>(sA + el * A_TILE + (wg * MW + m) * 64 * SW + kk * 32), db);
            }
        }
      };
      if constexpr (COLS > 1 && !PANEL)
        consume_present<STAGES>(ktiles, it, acc, full, empty, present, wg, tid, mma);
      else
        consume_tile<STAGES, INFLIGHT, false, CLUSTER>(ktiles, it, acc, full, empty, tid, mma);
      const int row0 = (rt * CLUSTER + rank) * BM;
      if constexpr (PANEL) {
        bool stored = false;
        if constexpr (EPI > 0) {  // (panels are never split)
          if (ytma) {
            panel_store_tma<Tag, BT>(acc[0], wg, tid, row0, j * BT,
                                     base + STAGES * STAGE_BYTES + wg * 64 * 128, ymap, alpha);
            stored = true;
          }
        }
        if (!stored) {  // member h: the panel's columns h * B.. (a last group may be partial)
#pragma unroll
          for (int h = 0; h < COLS; ++h) {
            float part[1][B / 2];
#pragma unroll
            for (int q = 0; q < B / 2; ++q) part[0][q] = acc[0][h * (B / 2) + q];
            if (j * COLS + h < nout)
              single_store<Tag, B, 1>(part, wg, tid, row0, nrows, j * COLS + h, -1, y, ldy,
                                      alpha, beta, ws, ws_stride);
          }
        }
      } else if constexpr (COLS > 1) {  // warpgroup wg's block, if the layout has it
        if (j * COLS + wg < nout) {
          if (EPI > 0 && ytma)  // (two-block tiles are never split)
            rows_n_store_tma<Tag, XN, EPI ? EPI : 16>(acc[0], wg, tid, row0, nrows,
                                                     (j * COLS + wg) * B,
                                                     base + STAGES * STAGE_BYTES + wg * EPI * 128,
                                                     ymap, alpha);
          else
            rows_n_store<Tag, B, XN>(acc[0], 0, tid, row0, nrows, j * COLS + wg, -1, y, ldy,
                                     alpha, beta, ws, ws_stride);
        }
      } else if constexpr (XN > 0) {
        // (ytma: beta is 0 and Y is mapped; the staging buffers follow the stages)
        if (EPI > 0 && ytma && slot < 0)
          rows_n_store_tma<Tag, XN, EPI ? EPI : 16>(acc[0], wg, tid, row0, nrows, j * B + wg * 64,
                                                   base + STAGES * STAGE_BYTES + wg * EPI * 128,
                                                   ymap, alpha);
        else
          rows_n_store<Tag, B, XN>(acc[0], wg, tid, row0, nrows, j, slot, y, ldy, alpha, beta,
                                   ws, ws_stride);
      } else
        single_store<Tag, B, MW>(acc, wg, tid, row0, nrows, j, slot, y, ldy, alpha, beta, ws,
                                 ws_stride);
      // (two-block tiles are never split; a cluster's row tile past X has no segment count)
      if (COLS == 1 && slot >= 0 && row0 < nrows)
        consumers_split_finish<B, CONSUMERS>(Tag(), ws, ws_stride, segs, counts, slot, row0,
                                             BM, nrows, tid, y, ldy, j, alpha, beta);
    }
    if (EPI > 0 && tid % 128 == 0) bulk_wait<0>();  // the last stores have read their buffer
  }
  if constexpr (CLUSTER > 1)
    cluster_sync();  // no CTA leaves while its peer may still copy or arrive into it
}

#define DSD_TMA_PARAMS                                                                     \
  const __grid_constant__ TmaMap xmap, const __grid_constant__ TmaMap wmap, int nrows,    \
      int xcols, int wrows, const int4 *__restrict__ work, int nwork,                      \
      const int *__restrict__ blk, const int *__restrict__ gidx, u16 *y, i64 ldy,          \
      float alpha, float beta, float *ws, i64 ws_stride, const int2 *__restrict__ segs,    \
      int *counts, int nout, int *next_tile, int band, const __grid_constant__ TmaMap ymap, \
      int ytma, const int *__restrict__ order, const int *__restrict__ ranges
#define DSD_TMA_ARGS                                                                       \
  &xmap, &wmap, nrows, xcols, wrows, work, nwork, blk, gidx, y, ldy, alpha, beta, ws,      \
      ws_stride, segs, counts, nout, next_tile, band, &ymap, ytma, order, ranges

template <class Tag, int B, int MW, int WG, int STAGES, bool KN, int MINB, int INFLIGHT,
          int XN = 0, int COLS = 1, int EPI = 0, bool WHOLE = false>
__global__ void __launch_bounds__(WG * 128 + 32, MINB) dsd_wgmma_tma(DSD_TMA_PARAMS) {
  grid_dependency();
  dsd_tma_body<Tag, B, MW, WG, STAGES, KN, INFLIGHT, XN, 1, COLS, EPI, WHOLE>(DSD_TMA_ARGS);
}

// The same in clusters of two CTAs sharing each block by multicast (grid: an even count).
template <class Tag, int B, int MW, int WG, int STAGES, bool KN, int MINB, int INFLIGHT,
          int XN, int COLS = 1, int EPI = 0, bool WHOLE = false>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(WG * 128 + 32, MINB)
    dsd_wgmma_tma_mc(DSD_TMA_PARAMS) {
  grid_dependency();
  dsd_tma_body<Tag, B, MW, WG, STAGES, KN, INFLIGHT, XN, 2, COLS, EPI, WHOLE>(DSD_TMA_ARGS);
}
