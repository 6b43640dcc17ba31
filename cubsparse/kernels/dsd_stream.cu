// dsd at a few rows of X (N <= 64) and b = 8, 16 or 32, where a product is a stream of W's
// blocks: X resident in shared memory, every stored block of W read once, many reads in
// flight.
//
//   Y[:, block j] = sum over list j of X[:, block k] @ op(W_p)   (the lists of dsd_copies.cuh)
//
// The tile kernels read a block's slice of X again from L2 for every block (N / b times the
// block's own bytes, in 16-byte rows), one dependent wait after another. Here a CTA owns a
// group of G output blocks and a run of chunks of KC of X's block columns. Its entries
// (stream_tables: sorted by group, chunk, member, then X's block column) form one
// contiguous range, which the whole CTA copies into shared memory E blocks at a time by
// cp.async, STAGES - 1 stages ahead of the MMAs, each stage issued before the warps
// consume the oldest. A chunk's X, all N rows of it, is copied with the chunk's first stage
// into one of STAGES buffers: when a stage is issued, the STAGES - 1 before it may still be
// in use, and they span at most STAGES - 1 other chunks.
//
// Each warp owns G / 8 members and keeps their accumulators over the whole run. At b = 8 a
// lane's word of a block is row lane / 4, columns 2 (lane % 4) and up: for X @ W.T that is
// mma m16n8k8's B fragment of op(W_p) = W_p^T, for X @ W the fragment after movmatrix
// transposes the 8 x 8 tile (or one ldmatrix reads four blocks' fragments). From b = 16 on
// ldmatrix reads m16n8k16's B fragments from swizzled copies of the blocks. A grid of one
// CTA along the runs (gridDim.y == 1) writes Y with alpha and beta; otherwise each CTA
// writes its float32 partial product to its own slice of the workspace, and the slices are
// added in run order, so the result does not depend on which CTA ran first: by
// stream_finish, a second launch, or (given `counts`) by the group's own CTAs, each adding
// a share of the group's outputs once all of them have stored their partials. Those CTAs
// wait for each other, so the host passes `counts` only to a cooperative launch, which
// the driver makes only if every CTA of the grid can be resident at once.
#include "common.cuh"

struct StreamStage {
  int chunk, lo, hi, buf;  // X's chunk, the entries [lo, hi), the X buffer
};

// Where a block's 16-byte piece q lies in shared memory, so that ldmatrix's eight rows of
// one piece column fall in distinct banks: with P = B / 8 pieces a row, piece c of row r
// goes to column c ^ ((r P / 8) % P). b = 32 rows 2 r and 2 r + 1 share a 128-byte line,
// column c ^ (r % 4); b = 16 rows 4-7 of each 8-row half swap their two pieces; a b = 8
// block is stored as it is, 128 contiguous bytes.
template <int B>
__device__ __forceinline__ int swizzle(int q) {
  return q ^ ((q >> 3) & (B / 8 - 1));
}

// Four b = 8 blocks' contributions, entries e.. e + 3 of a member's list (those below z),
// acc[mt] += X rows 16 mt.. (xb: the lane's A position in the chunk) times op(block). One
// ldmatrix reads the four blocks, lanes 8 q to 8 q + 7 giving block e + q's rows: a lane
// then holds row lane / 4, columns 2 (lane % 4) and up of each, mma m16n8k8's B fragment
// of W_p^T (X @ W.T), or of W_p (X @ W) when ldmatrix transposes.
template <class Tag, int MT, int LD, bool TRANS>
__device__ __forceinline__ void stream_mma4(float (&acc)[MT][1][4], const u16* wb,
                                            const int* kb, const u16* xb, int e, int z,
                                            int lane) {
  const u16* row = wb + min(e + (lane >> 3), z - 1) * 64 + (lane & 7) * 8;
  unsigned bf[4];
  ldsm_x4_as<!TRANS>(bf, row);
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    if (e + q < z) {  // uniform over the warp
      const u16* const ap = xb + kb[e + q] * 8;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const unsigned af[2] = {*(const unsigned*)(ap + mt * 16 * LD),
                                *(const unsigned*)(ap + (mt * 16 + 8) * LD)};
        mma1688(Tag(), acc[mt][0], af, bf[q]);
      }
    }
  }
}

// One b = 8 block's contribution, acc[mt] += X rows 16 mt.. (ap: the lane's A position in
// the block's X columns) times op(block): a lane's word of the block, row lane / 4,
// columns 2 (lane % 4) and up, is mma m16n8k8's B fragment of W_p^T (X @ W.T) as loaded
// and of W_p (X @ W) after movmatrix transposes the 8 x 8 tile.
template <class Tag, int MT, int LD, bool TRANS>
__device__ __forceinline__ void stream_mma8(float (&acc)[MT][1][4], const u16* blk,
                                            const u16* ap, int lane) {
  unsigned bf = ((const unsigned*)blk)[lane];
  if (!TRANS) asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %0;" : "+r"(bf));
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    const unsigned af[2] = {*(const unsigned*)(ap + mt * 16 * LD),
                            *(const unsigned*)(ap + (mt * 16 + 8) * LD)};
    mma1688(Tag(), acc[mt][0], af, bf);
  }
}

// One block's contribution at b = 16 or 32, acc[mt][nt] += X rows 16 mt.. (ap: the
// lane's A position in the block's X columns) times op(block) columns 8 nt..: B / 16 k16
// steps of mma m16n8k16, each taking its B fragments, two n8 tiles an ldmatrix, from the
// swizzled copy of the block (transposing for X @ W).
template <class Tag, int B, int MT, int LD, bool TRANS>
__device__ __forceinline__ void stream_mma16(float (&acc)[MT][B / 8][4], const u16* blk,
                                             const u16* ap, int lane) {
  constexpr int K16 = B / 16;
  // Matrix lane / 8 of an ldmatrix: X @ W.T takes (rows, columns) halves (0,0) (0,1) (1,0)
  // (1,1) of a 16 x 16 quarter of W_p, X @ W (0,0) (1,0) (0,1) (1,1) transposed; either way
  // registers 0-1 are the first n8 tile's k halves and 2-3 the second's.
  const int q = lane >> 3, half_r = TRANS ? q >> 1 : q & 1, half_c = TRANS ? q & 1 : q >> 1;
#pragma unroll
  for (int ks = 0; ks < K16; ++ks) {
    unsigned bf[K16][4];
#pragma unroll
    for (int np = 0; np < K16; ++np) {  // W's rows are op(W)'s n for X @ W.T, its k for X @ W
      const int row = (TRANS ? np : ks) * 16 + half_r * 8 + (lane & 7);
      const int piece = (TRANS ? ks : np) * 2 + half_c;
      ldsm_x4_as<!TRANS>(bf[np], blk + swizzle<B>(row * (B / 8) + piece) * 8);
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const u16* a = ap + mt * 16 * LD + ks * 16;
      const unsigned af[4] = {*(const unsigned*)a, *(const unsigned*)(a + 8 * LD),
                              *(const unsigned*)(a + 8), *(const unsigned*)(a + 8 * LD + 8)};
#pragma unroll
      for (int nt = 0; nt < B / 8; ++nt) {
        const unsigned bb[2] = {bf[nt >> 1][2 * (nt & 1)], bf[nt >> 1][2 * (nt & 1) + 1]};
        mma16816(Tag(), acc[mt][nt], af, bb);
      }
    }
  }
}

// The partial products of group blockIdx.x added up by the group's gridDim.y CTAs, CTA y
// taking the y-th share of the group's (row, column pair) outputs: each sums its outputs
// over the runs in run order and stores them with alpha and beta. Every CTA first counts
// itself in on counts[group] and waits until the whole group has (its partials are then
// in the workspace); afterwards each counts itself out on counts[groups + group], and the
// last one out sets both counters back to zero for the next launch (every CTA of the group
// has by then stopped reading them). Needs the group's CTAs resident together.
template <class Tag, int B, int G, int N>
__device__ __forceinline__ void stream_share(const float* ws, int* counts, int nrows,
                                             int nout, u16* y, i64 ldy, float alpha,
                                             float beta) {
  const int g = blockIdx.x, tid = threadIdx.x, runs = gridDim.y;
  int* const in = counts + g;
  int* const out = counts + gridDim.x + g;
  __threadfence();  // this thread's partials, before the count that publishes them
  __syncthreads();
  if (tid == 0) {
    atomicAdd(in, 1);
    while (*(volatile int*)in < runs) __nanosleep(64);
    __threadfence();  // the other runs' partials, stored before their counts
  }
  __syncthreads();
  const i64 width = (i64)nout * B;
  const int half = min(G, nout - g * G) * B / 2;  // the group's column pairs a row
  const int total = nrows * half, share = (total + runs - 1) / runs;
  const int lo = blockIdx.y * share, hi = min(total, lo + share);
  for (int v = lo + tid; v < hi; v += 256) {
    const int r = v / half, c = g * G * B + (v % half) * 2;
    const float* src = ws + (i64)r * width + c;
    float2 s = __ldcg((const float2*)src);  // L2 reads: other CTAs stored them
#pragma unroll 4
    for (int k = 1; k < runs; ++k) {
      const float2 t = __ldcg((const float2*)(src + (i64)k * N * width));
      s.x += t.x;
      s.y += t.y;
    }
    store_pair(Tag(), y + (i64)r * ldy + c, s.x, s.y, alpha, beta);
  }
  if (tid == 0 && atomicAdd(out, 1) == runs - 1) {
    *in = 0;
    *out = 0;
  }
}

template <class Tag, int B, int MT, int KC, int G, int E, int STAGES, int RUN, bool TRANS>
__global__ void __launch_bounds__(256, 2)
    dsd_stream(const u16* __restrict__ x, i64 ldx, int nrows, int kcols,
               const u16* __restrict__ w, const int* __restrict__ blk,
               const int* __restrict__ kin, const int* __restrict__ starts, int nout,
               int nchunks, int run, float* __restrict__ ws, int* __restrict__ counts,
               u16* __restrict__ y, i64 ldy, float alpha, float beta) {
  grid_dependency();
  static_assert(STAGES >= 2, "a stage in use and one in flight at least");
  constexpr int BB = B * B, PIECES = BB / 8;  // a block's elements, its 16-byte pieces
  static_assert(B == 8 || B == 16 || B == 32, "m16n8k8, else B / 16 k16 steps");
  static_assert(G % 8 == 0 && E * PIECES % 256 == 0, "whole members a warp, whole copies");
  constexpr int N = MT * 16, COLS = KC * B, LD = COLS + 8;  // X rows padded by 16 bytes:
  constexpr int MEMBERS = G / 8, PER = E * PIECES / 256;    // a fragment's 8 rows, 8 banks
  constexpr int NT = B / 8;                                 // n8 tiles of an output block
  extern __shared__ __align__(16) u16 smem[];
  u16* const xs = smem;                              // [STAGES][N][LD]: chunks of X
  u16* const wsm = xs + STAGES * N * LD;             // [STAGES][E][B * B]: the stages' blocks
  int* const ks = (int*)(wsm + STAGES * E * BB);     // [STAGES][E]: their block columns of X
  int* const ms = ks + STAGES * E;                   // [STAGES][G + 1]: members' first entries
  __shared__ StreamStage desc[STAGES];
  __shared__ int bounds[RUN + 1];  // the run's chunks' first entries, then its end
  const int g = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int first = blockIdx.y * run, nrun = min(nchunks - first, run);  // run <= RUN
  const int* const gst = starts + (i64)g * nchunks * G;  // [chunk][member]: first entry
  for (int r = tid; r <= nrun; r += 256) bounds[r] = gst[(first + r) * G];
  const int rows = min(nrows, N);  // X's rows, then zeros up to N, written once
  for (int v = tid; v < STAGES * (N - rows) * LD / 8; v += 256) {
    const int s = v / ((N - rows) * LD / 8), o = v % ((N - rows) * LD / 8);
    *(int4*)(xs + (s * N + rows) * LD + o * 8) = make_int4(0, 0, 0, 0);
  }
  __syncthreads();

  // The run's stages, walked alike by every thread (a chunk without entries is skipped).
  // The indices of the next stage's blocks are loaded one issue ahead, so a stage's copies
  // never wait for them.
  int rc = -1, pos = 0, end = 0, nbuf = -1;
  int next_lo = 0, next_n = 0, p[PER];
  bool next_fresh = false, more = false;
  auto plan = [&]() {
    next_fresh = false;
    while (pos == end) {
      if (++rc >= nrun) {
        more = false;
        return;
      }
      pos = bounds[rc];
      end = bounds[rc + 1];
      next_fresh = true;
    }
    more = true;
    next_lo = pos;
    next_n = min(end - pos, E);
    pos += next_n;
#pragma unroll
    for (int u = 0; u < PER; ++u) {
      const int e = (tid + u * 256) / PIECES;
      p[u] = e < next_n ? blk[next_lo + e] : 0;
    }
  };
  auto issue = [&](int slot) -> int {
    if (!more) {
      cp_async_commit();  // an empty group keeps the wait counts
      return 0;
    }
    const int c = first + rc, lo = next_lo, n = next_n;
    if (next_fresh) {
      nbuf = nbuf + 1 == STAGES ? 0 : nbuf + 1;
      u16* xb = xs + nbuf * N * LD;
      const int k0 = c * COLS;
      for (int v = tid; v < rows * (COLS / 8); v += 256) {  // zeros past X's last column
        const int r = v / (COLS / 8), k = k0 + (v % (COLS / 8)) * 8;
        const bool in = k < kcols;
        cp_async16(xb + r * LD + (k - k0), in ? x + (i64)r * ldx + k : x, in ? 16 : 0);
      }
    }
    u16* const wb = wsm + slot * E * BB;
#pragma unroll
    for (int u = 0; u < PER; ++u) {
      const int v = tid + u * 256, e = v / PIECES, q = v % PIECES;  // block e, its piece q
      if (e < n) cp_async16(wb + e * BB + swizzle<B>(q) * 8, w + (i64)p[u] * BB + q * 8, 16);
    }
    for (int v = tid; v < n; v += 256) cp_async4(ks + slot * E + v, kin + lo + v);
    if (tid <= G) cp_async4(ms + slot * (G + 1) + tid, gst + c * G + tid);
    if (tid == 0) desc[slot] = {c, lo, lo + n, nbuf};
    cp_async_commit();
    plan();
    return 1;
  };

  plan();
  float acc[MEMBERS][MT][NT][4] = {};
  int staged = 0;
  for (int s = 0; s < STAGES - 1; ++s) staged += issue(staged % STAGES);
  for (int i = 0; i < staged; ++i) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();  // stage i is in; every warp is done with stage i - 1, whose slot the
    staged += issue(staged % STAGES);  // stage STAGES - 1 ahead takes now
    const int slot = i % STAGES;
    const StreamStage d = desc[slot];
    const u16* const xb = xs + d.buf * N * LD + (lane >> 2) * LD + (lane & 3) * 2;
    const u16* const wb = wsm + slot * E * BB;
    const int* const kb = ks + slot * E;
    const int* const mb = ms + slot * (G + 1);
#pragma unroll
    for (int t = 0; t < MEMBERS; ++t) {
      const int m = warp + 8 * t;
      const int a = max(mb[m], d.lo) - d.lo, z = min(mb[m + 1], d.hi) - d.lo;
      // b = 8: up to 16 rows four blocks a ldmatrix issue fewer instructions; with more
      // rows a block at a time schedules its MMAs better.
      if constexpr (B == 8 && MT == 1) {
        for (int e = a; e < z; e += 4)
          stream_mma4<Tag, MT, LD, TRANS>(acc[t], wb, kb, xb, e, z, lane);
      } else if constexpr (B == 8) {
#pragma unroll 2
        for (int e = a; e < z; ++e)
          stream_mma8<Tag, MT, LD, TRANS>(acc[t], wb + e * BB, xb + kb[e] * B, lane);
      } else if constexpr (B == 16) {
#pragma unroll 2
        for (int e = a; e < z; ++e)
          stream_mma16<Tag, B, MT, LD, TRANS>(acc[t], wb + e * BB, xb + kb[e] * B, lane);
      } else {  // a block is already 8 MMAs per 16 rows: not unrolled
        for (int e = a; e < z; ++e)
          stream_mma16<Tag, B, MT, LD, TRANS>(acc[t], wb + e * BB, xb + kb[e] * B, lane);
      }
    }
  }

  const i64 width = (i64)nout * B;
  const bool whole = gridDim.y == 1;
#pragma unroll
  for (int t = 0; t < MEMBERS; ++t) {
    const int j = g * G + warp + 8 * t;
    if (j >= nout) continue;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int col = j * B + nt * 8 + (lane & 3) * 2;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = mt * 16 + h * 8 + (lane >> 2);
          const float v0 = acc[t][mt][nt][2 * h], v1 = acc[t][mt][nt][2 * h + 1];
          if (!whole)
            *(float2*)(ws + ((i64)blockIdx.y * N + r) * width + col) = make_float2(v0, v1);
          else if (r < nrows)
            store_pair(Tag(), y + r * ldy + col, v0, v1, alpha, beta);
        }
      }
    }
  }
  if (!whole && counts != nullptr) stream_share<Tag, B, G, N>(ws, counts, nrows, nout, y, ldy,
                                                              alpha, beta);
}

// Y = alpha * (the runs' partial products, added in order) + beta * Y, a pair of adjacent
// outputs a thread (grid-stride). `rows` is the workspace's rows per run.
template <class Tag>
__global__ void __launch_bounds__(256)
    stream_finish(const float* __restrict__ ws, int nruns, int rows, int nrows, int width,
                  u16* y, i64 ldy, float alpha, float beta) {
  grid_dependency();
  const int half = width / 2;
  const i64 npairs = (i64)nrows * half, chunk = (i64)rows * width;
  for (i64 v = (i64)blockIdx.x * 256 + threadIdx.x; v < npairs; v += (i64)gridDim.x * 256) {
    const int r = (int)(v / half), cc = (int)(v % half) * 2;
    const float* src = ws + (i64)r * width + cc;
    float2 s = *(const float2*)src;
    for (int k = 1; k < nruns; ++k) {
      const float2 t = *(const float2*)(src + k * chunk);
      s.x += t.x;
      s.y += t.y;
    }
    store_pair(Tag(), y + (i64)r * ldy + cc, s.x, s.y, alpha, beta);
  }
}
