// The work of one CTA of a persistent kernel that sums groups of blocks over `ktiles`
// slices each: whole groups in turn, or a stream-K run of slices whose cut groups are
// summed in pieces (sdd_wgmma_tma.cu describes when and why).
#pragma once
#include "common.cuh"
#include "sm90.cuh"

// Walks this CTA's work as pieces, slices [k0(), k1()) of group grp():
//   for (WorkRun<STREAM_K> run(n_groups, ktiles, chunks); run.more(); run.next()) ...
// Whole groups (STREAM_K false): groups blockIdx.x, + gridDim.x, ..., each all its
// slices. Stream-K: every group's slices are cut into `chunks` chunks at the same depths
// (chunk j: slices [ktiles j / chunks, ktiles (j + 1) / chunks)), and the U = n_groups *
// chunks chunks, in group order, into gridDim.x runs of equal length (to one chunk): this
// CTA's run is chunks [U c / P, U (c + 1) / P), one piece of each group it meets.
// Why chunks and not single slices: a CTA's run then starts at one of `chunks` depths, so
// at any moment the CTAs read X and dY at about that many depths, whose slices the L2
// holds for all of them; cut at any slice, each CTA reads at a depth of its own and every
// slice comes from memory once per CTA that reads it (measured: 2x slower than whole
// groups at N = C = K = 8192). Every thread of the CTA walks the same pieces. The state
// is three registers (the kernels that use it hold 128 accumulators per thread); the
// rest is recomputed from the kernel's parameters where needed.
template <bool STREAM_K>
struct WorkRun {
  int n_groups, ktiles, chunks;  // the kernel's parameters
  int pos, hi, len;  // chunks [pos, pos + len) now, [pos, hi) left (whole groups: pos = grp)

  // Stream-K needs 1 <= chunks <= ktiles and at least as many chunks as CTAs (the host's
  // plan ensures both): every CTA's run holds at least one chunk of at least one slice.
  __device__ __forceinline__ WorkRun(int n_groups_, int ktiles_, int chunks_)
      : n_groups(n_groups_), ktiles(ktiles_), chunks(chunks_) {
    if (STREAM_K) {
      pos = run_start(blockIdx.x);
      hi = run_start(blockIdx.x + 1);
      cut();
    } else {
      pos = blockIdx.x;
    }
  }
  __device__ __forceinline__ bool more() const { return STREAM_K ? pos < hi : pos < n_groups; }
  __device__ __forceinline__ void next() {
    if (STREAM_K) {
      pos += len;
      cut();
    } else {
      pos += gridDim.x;
    }
  }
  __device__ __forceinline__ int grp() const { return STREAM_K ? pos / chunks : pos; }
  __device__ __forceinline__ int k0() const { return STREAM_K ? depth(pos % chunks) : 0; }
  __device__ __forceinline__ int k1() const {
    return STREAM_K ? depth(pos % chunks + len) : ktiles;
  }
  // The piece is the whole group: no other CTA holds part of it.
  __device__ __forceinline__ bool whole() const { return !STREAM_K || len == chunks; }

  // Sums a cut group: writes this piece's R x C accumulators of each of the CONSUMERS
  // threads to its slot of `partials` and counts it on flags[grp]. The CTA whose piece
  // arrives last reads every piece (its own too) back in piece order into `acc` (the
  // order, and so the sum, is the same whichever CTA does it), resets the flag and
  // returns true: it stores the group. The others return false. `verdict`: one shared
  // int for the consumers.
  template <int CONSUMERS, int CHUNK = 16, int R, int C>
  __device__ __forceinline__ bool add_pieces(float (&acc)[R][C], float* partials, int* flags,
                                             int tid, int* verdict) const {
    constexpr int N = R * C;  // floats per thread; a slot holds N * CONSUMERS
    const int grp_ = grp(), g0 = grp_ * chunks;  // the group's first chunk
    // Slots: 2c for CTA c's first piece, 2c + 1 for its last if that is another.
    const int slot = 2 * blockIdx.x + (pos == run_start(blockIdx.x) ? 0 : 1);
    float* mine = partials + (long long)slot * N * CONSUMERS + tid;
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int c = 0; c < C; ++c) __stcg(mine + (r * C + c) * CONSUMERS, acc[r][c]);
    __threadfence();  // the piece is visible before the count that announces it
    named_barrier_sync(1, CONSUMERS);
    const int c_first = cta_of(g0), c_last = cta_of(g0 + chunks - 1);
    if (tid == 0) {
      const bool fin = atomicAdd(&flags[grp_], 1) == c_last - c_first;
      if (fin) flags[grp_] = 0;  // every piece has counted itself: ready for the next launch
      __threadfence();
      *verdict = fin;
    }
    named_barrier_sync(1, CONSUMERS);
    if (!*verdict) return false;
    // The first CTA's piece is its first or its last (2c + 1) as its run starts at g0 or
    // before; every later CTA's piece is its first. CHUNK accumulators at a time: their
    // loads from every piece are in flight together, without a second copy of all of
    // them in registers.
    const int first_slot = 2 * c_first + (run_start(c_first) == g0 ? 0 : 1);
    static_assert(C % CHUNK == 0, "accumulator rows are summed in whole chunks");
#pragma unroll
    for (int e0 = 0; e0 < N; e0 += CHUNK)
      for (int c = c_first; c <= c_last; ++c) {
        const float* p = partials +
                         ((long long)(c == c_first ? first_slot : 2 * c) * N + e0) * CONSUMERS +
                         tid;
#pragma unroll
        for (int e = 0; e < CHUNK; ++e) {
          const float v = __ldcg(p + e * CONSUMERS);
          float& a = acc[(e0 + e) / C][(e0 + e) % C];
          a = c == c_first ? v : a + v;
        }
      }
    return true;
  }

 private:
  __device__ __forceinline__ int depth(int j) const { return ktiles * j / chunks; }
  __device__ __forceinline__ int run_start(int c) const {
    return (int)((long long)n_groups * chunks * c / gridDim.x);
  }
  // The CTA whose run holds chunk u: the last c with run_start(c) <= u.
  __device__ __forceinline__ int cta_of(int u) const {
    return (int)(((long long)(u + 1) * gridDim.x - 1) / ((long long)n_groups * chunks));
  }
  __device__ __forceinline__ void cut() {
    if (pos < hi) len = min(chunks - pos % chunks, hi - pos);
  }
};
