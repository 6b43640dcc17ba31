// Hopper (sm_90a) helpers shared by the wgmma kernels: shared-memory matrix descriptors,
// the wgmma fences and groups, the async-proxy fence that publishes cp.async data to the
// tensor cores, mbarriers, and TMA copies into shared memory and stores out of it.
#pragma once

// Matrix descriptor for a K-major operand stored as rows of SW bytes (128, 64 or 32) in the
// matching swizzle: start address, stride between 8-row groups (8 * SW bytes), swizzle
// mode in bits 62-63; the leading offset is unused in these modes (1 by convention).
template <int SW>
__device__ __forceinline__ unsigned long long wgmma_desc_k(unsigned addr) {
  constexpr unsigned long long mode = SW == 128 ? 1 : SW == 64 ? 2 : 3;
  static_assert(SW == 128 || SW == 64 || SW == 32, "swizzle spans 32, 64 or 128 bytes");
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) |
         ((unsigned long long)((8 * SW) >> 4) << 32) | (mode << 62);
}
// The same without swizzle: 8 x 16-byte core matrices (128 contiguous bytes), `lead` bytes
// apart along K and `stride` bytes apart along M / N.
__device__ __forceinline__ unsigned long long wgmma_desc_none(unsigned addr, unsigned lead,
                                                               unsigned stride) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) |
         ((unsigned long long)((lead >> 4) & 0x3FFF) << 16) |
         ((unsigned long long)((stride >> 4) & 0x3FFF) << 32);
}
__device__ __forceinline__ unsigned long long wgmma_desc_sw128(unsigned addr) {
  return wgmma_desc_k<128>(addr);
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// A warpgroup's registers per thread, lowered or raised to N (a multiple of 8 in 24-256)
// within the CTA's allocation: warp-specialized kernels move the copying warps' registers
// to the MMA warps.
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg takes 24-256, multiples of 8");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
// Barrier among `count` threads (whole warps) of the CTA on hardware barrier `id` (0 is
// __syncthreads'): lets one warpgroup synchronize without the others.
__device__ __forceinline__ void named_barrier_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
// The same with the barrier an immediate: ptxas reserves the barriers it can tell apart at
// compile time, and all 16 where an id is computed at run time (3 + wg was).
template <int ID>
__device__ __forceinline__ void named_barrier_sync(int count) {
  asm volatile("bar.sync %0, %1;\n" ::"n"(ID), "r"(count) : "memory");
}

// Shared-memory mbarriers (the producer/consumer handshakes of warp-specialized kernels):
// a phase completes when `count` arrivals have been made; waiters name the parity of the
// phase they wait for.
__device__ __forceinline__ void mbar_init(unsigned long long* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned long long* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
// One try_wait on the phase of parity `parity`, its semantics `sem` ("" or, from other
// CTAs of a cluster, ".acquire.cluster"), setting `done`.
#define CUBSPARSE_MBAR_TRY_WAIT(sem, done, bar, parity)                                 \
  asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity" sem                        \
               ".shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"            \
               : "=r"(done)                                                            \
               : "r"(smem_addr(bar)), "r"(parity)                                      \
               : "memory")
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity) {
  unsigned done;
  do CUBSPARSE_MBAR_TRY_WAIT("", done, bar, parity);
  while (!done);
}
// One arrival on `bar` once all of this thread's earlier cp.async copies have landed (the
// arrival is counted in the barrier's expected count: .noinc).
__device__ __forceinline__ void cp_async_mbar_arrive(unsigned long long* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar))
               : "memory");
}

// Makes initialized mbarriers visible to the TMA engine (the async proxy) before use.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// An arrival that also expects `bytes` more of TMA copies to land in the current phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}

// The stage ring of a kernel fed by TMA copies, set up by one thread: each stage's `full`
// barrier completes on the producer's one arrival with the stage's bytes, its `empty`
// barrier on one arrival per consumer warp; then every mbarrier initialized so far is made
// visible to the TMA engine.
template <int STAGES>
__device__ __forceinline__ void tma_ring_init(unsigned long long* full, unsigned long long* empty,
                                              unsigned consumer_warps) {
#pragma unroll
  for (int s = 0; s < STAGES; ++s) {
    mbar_init(&full[s], 1);
    mbar_init(&empty[s], consumer_warps);
  }
  fence_mbarrier_init();
}

// A TMA tensor map (CUtensorMap, 128 opaque bytes) encoded by the host with
// cuTensorMapEncodeTiled and passed by value as a __grid_constant__ kernel parameter.
struct alignas(64) TmaMap {
  unsigned long long v[16];
};
// The TMA copy of `map`'s box at element coordinates (c0 innermost, c1) into shared memory
// at `dst`, in the map's swizzle; it completes the whole box's bytes on `bar`, elements
// out of bounds (a box may lie wholly outside) landing as zeros.
__device__ __forceinline__ void tma_load_2d(unsigned dst, const TmaMap* map, int c0, int c1,
                                            unsigned long long* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, "
      "{%2, %3}], [%4];\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(smem_addr(bar))
      : "memory");
}

// Thread-block clusters (kernels declared with __cluster_dims__): the CTA's rank in its
// cluster, the cluster's index and count along x, a barrier over every thread of the
// cluster (release / acquire at cluster scope), and a peer CTA's copy of a shared-memory
// address.
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ unsigned cluster_id_x() {
  unsigned r;
  asm volatile("mov.u32 %0, %%clusterid.x;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ unsigned clusters_x() {
  unsigned r;
  asm volatile("mov.u32 %0, %%nclusterid.x;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync() {  // (not .aligned: callers may come diverged)
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
__device__ __forceinline__ unsigned peer_smem(const void* p, unsigned rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(smem_addr(p)), "r"(rank));
  return r;
}
// An arrival on the mbarrier at `bar`'s offset in CTA `rank` of the cluster (this CTA's
// own included). As a stage's release it needs no ordering at cluster scope: what it
// orders are this CTA's wgmma reads before a copy into the same stage, which the copy
// engine makes only after the barrier's phase completes. The release at cluster scope
// (mbar_arrive_cluster_release) orders this thread's shared-memory writes in other CTAs
// before the arrival, for a waiter that acquires at cluster scope (mbar_wait_cluster);
// it costs: with it on every stage's release (and the refill's wait acquiring at cluster
// scope), the clustered dsd ran at half speed (bench/NOTES.md).
__device__ __forceinline__ void mbar_arrive_cluster(unsigned long long* bar, unsigned rank) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(peer_smem(bar, rank))
               : "memory");
}
__device__ __forceinline__ void mbar_arrive_cluster_release(unsigned long long* bar,
                                                            unsigned rank) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(
                   peer_smem(bar, rank))
               : "memory");
}
// mbar_wait that also acquires what other CTAs of the cluster released into the phase.
__device__ __forceinline__ void mbar_wait_cluster(unsigned long long* bar, unsigned parity) {
  unsigned done;
  do CUBSPARSE_MBAR_TRY_WAIT(".acquire.cluster", done, bar, parity);
  while (!done);
}
// tma_load_2d into the same shared-memory offset of every CTA in `mask` (bit r: rank r),
// each completing the box's bytes on its own mbarrier at `bar`'s offset.
__device__ __forceinline__ void tma_load_2d_multicast(unsigned dst, const TmaMap* map, int c0,
                                                      int c1, unsigned long long* bar,
                                                      unsigned short mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(smem_addr(bar)), "h"(mask)
      : "memory");
}

// The TMA store of shared memory at `src` (the map's box, in its swizzle) to `map`'s box at
// element coordinates (c0 innermost, c1); elements out of bounds are not written. Stores
// are committed as bulk groups; the issuing thread waits for the groups' reads of shared
// memory (bulk_wait_read) before the buffer is written again, and for the whole groups
// (bulk_wait) before the CTA exits. The writers publish the buffer to the copy engine
// first (fence_proxy_async, then a barrier).
__device__ __forceinline__ void tma_store_2d(const TmaMap* map, unsigned src, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(map),
      "r"(c0), "r"(c1), "r"(src)
      : "memory");
}
__device__ __forceinline__ void bulk_commit() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
template <int N>
__device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void st_shared_u32(unsigned addr, unsigned v) {
  asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
// Four 8 x 8 matrices of 16-bit values stored transposed (stmatrix .trans): lane l holds,
// in r[i], the two values of row l / 4, columns 2 (l % 4) and + 1, of matrix i, as an MMA
// accumulator fragment holds them; lanes 8i..8i + 7 give the addresses of the 16-byte rows
// of memory that take columns 0..7 of matrix i.
__device__ __forceinline__ void stmatrix_x4_trans(unsigned addr, unsigned r0, unsigned r1,
                                                  unsigned r2, unsigned r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(
                   addr),
               "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

// The same, untransposed: lanes 8i..8i + 7 give the addresses of the 16-byte rows of memory
// that take rows 0..7 of matrix i.
__device__ __forceinline__ void stmatrix_x4(unsigned addr, unsigned r0, unsigned r1, unsigned r2,
                                            unsigned r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
               "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}
__device__ __forceinline__ uint4 ld_shared_v4(unsigned addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

// Stops the compiler from moving accumulator reads or writes across an asynchronous MMA.
template <int R>
__device__ __forceinline__ void keep_in_registers(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int R, int C>
__device__ __forceinline__ void keep_in_registers(float (&d)[R][C]) {
#pragma unroll
  for (int r = 0; r < R; ++r) keep_in_registers(d[r]);
}

// Matrix descriptor for an MN-major operand (M-major A or N-major B, wgmma's transposed
// modes) stored as rows of k, each ROW bytes (128, 64 or 32) of the M/N axis in the
// matching swizzle. Two strides: between 8-row groups along k (8 * ROW, SBO) and between
// ROW-byte atoms along M/N (`panel`, LBO), where an operand wider than one atom is kept.
template <int ROW>
__device__ __forceinline__ unsigned long long wgmma_desc_mn(unsigned addr, unsigned panel) {
  constexpr unsigned long long mode = ROW == 128 ? 1 : ROW == 64 ? 2 : 3;
  static_assert(ROW == 128 || ROW == 64 || ROW == 32, "swizzle spans 32, 64 or 128 bytes");
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)(panel >> 4) << 16) |
         ((unsigned long long)((8 * ROW) >> 4) << 32) | (mode << 62);
}

// An MN-major operand tile of a pipeline stage: BK rows of k by E 16-bit elements of M or
// N, as panels of 64 elements (128-byte rows, 128-byte swizzle) or, when narrower, one
// panel of E elements in the 64- or 32-byte swizzle. Panels start on 1 KiB boundaries.
template <int E, int BK>
struct MnTile {
  static constexpr int ROW = (E < 64 ? E : 64) * 2;  // bytes per row of a panel
  static constexpr int PANEL = BK * ROW;             // bytes per panel
  static constexpr int BYTES = BK * E * 2;
  static constexpr int CH = E / 8;                   // 16-byte chunks per row of k
  static_assert(E % 16 == 0 && (E <= 64 || E % 64 == 0), "whole swizzle atoms");
  // Byte offset of chunk c of row k, swizzled.
  static __device__ __forceinline__ unsigned offset(int k, int c) {
    const unsigned o = (c / (ROW / 16)) * PANEL + k * ROW + (c % (ROW / 16)) * 16;
    return o ^ (((o >> 7) & (ROW / 16 - 1)) << 4);
  }
  // Descriptor of the k16 step kk for the 64-element (or narrower) atom column `panel`.
  static __device__ __forceinline__ unsigned long long desc(unsigned base, int panel, int kk) {
    return wgmma_desc_mn<ROW>(base + panel * PANEL + kk * 16 * ROW, PANEL);
  }
};

// How many slices after its MMAs were issued wgmma_pipeline refills a stage: one MMA group
// in flight past the slice, then the barrier after every warp's wait for it. Each of those
// slices passes a __syncthreads, so done(tile) may use the stage of the tile's last slice as
// scratch once every warp is done with that slice's MMAs (a barrier after their waits).
constexpr int WGMMA_PIPELINE_REFILL_LAG = 2;

// The cp.async + wgmma main loop of the Hopper kernels. STAGES buffers; copies run
// STAGES - 2 slices ahead and one MMA group stays in flight across iterations (wait_group
// 1). A buffer is refilled two slices after its MMAs were issued, once every warpgroup has
// waited for them before the barrier, so the next copies go out before this slice's wait.
// load(stage, slice) issues one slice's copies; mma(stage, slice) issues its wgmmas
// between the fence and the commit. The accumulators `acc` are pinned around every
// asynchronous group.
//
// The slices may belong to several tiles of `ktiles` slices each (`total` in all): after
// a tile's last slice every MMA is waited for and done(tile) runs (the epilogue, which
// clears `acc` for the next tile) while the next tile's copies are in flight.
template <int STAGES, int R, int C, class Load, class Mma, class Done>
__device__ __forceinline__ void wgmma_pipeline(int total, int ktiles, float (&acc)[R][C],
                                               Load load, Mma mma, Done done) {
  constexpr int AHEAD = STAGES - WGMMA_PIPELINE_REFILL_LAG;  // slices of copies in flight
  static_assert(AHEAD >= 1, "copies run STAGES - 2 slices ahead");
#pragma unroll
  for (int s = 0; s < AHEAD; ++s) {
    if (s < total) load(s, s);
    cp_async_commit();
  }
  for (int t = 0, kt = 0, tile = 0; t < total; ++t) {
    cp_async_wait<AHEAD - 1>();
    fence_proxy_async();  // this thread's copies -> visible to the tensor cores
    __syncthreads();
    keep_in_registers(acc);
    wgmma_fence();
    mma(t % STAGES, t);
    wgmma_commit();
    const int nt = t + AHEAD;  // into the stage of slice t - 2
    if (nt < total) load(nt % STAGES, nt);
    cp_async_commit();
    if (++kt == ktiles) {
      wgmma_wait<0>();
      keep_in_registers(acc);
      done(tile++);
      kt = 0;
    } else {
      wgmma_wait<1>();  // the previous slice's MMAs are done; this one keeps running
      keep_in_registers(acc);
    }
  }
  // Nothing is in flight here (the last slice ends a tile), but without this wait ptxas
  // cannot prove it and waits for every group at each iteration's end instead.
  wgmma_wait<0>();
  cp_async_wait<0>();
  keep_in_registers(acc);
}
// The same over the slices of one tile.
template <int STAGES, int R, int C, class Load, class Mma>
__device__ __forceinline__ void wgmma_pipeline(int ktiles, float (&acc)[R][C], Load load, Mma mma) {
  wgmma_pipeline<STAGES>(ktiles, ktiles, acc, load, mma, [](int) {});
}

// One consumer warpgroup's pass over a tile of a persistent kernel: ktiles slices of the
// STAGES-deep ring, `it` counting the slices this thread has taken. Each slice: wait for
// its stage (`full`), issue its wgmmas (mma(stage)) as one group, and release the stage on
// `empty` (one arrival per warp) once the group of INFLIGHT slices earlier is done. The
// accumulators start at zero. CP_ASYNC: the stages were filled by cp.async, whose data
// needs the async-proxy fence before the tensor cores read it (TMA copies write through
// that proxy already). CLUSTER > 1: every CTA of the cluster writes into this CTA's
// stages (multicast copies), so a stage is released on the `empty` barrier of each.
template <int STAGES, int INFLIGHT, bool CP_ASYNC, int CLUSTER = 1, int R, int C, class Mma>
__device__ __forceinline__ void consume_tile(int ktiles, unsigned& it, float (&acc)[R][C],
                                             unsigned long long* full,
                                             unsigned long long* empty, int tid, Mma mma) {
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int i = 0; i < C; ++i) acc[r][i] = 0.f;
  auto release = [&](int s) {
    if constexpr (CLUSTER == 1)
      mbar_arrive(&empty[s]);
    else
#pragma unroll
      for (int r = 0; r < CLUSTER; ++r) mbar_arrive_cluster(&empty[s], r);
  };
  for (int kt = 0; kt < ktiles; ++kt, ++it) {
    const int s = it % STAGES;
    mbar_wait(&full[s], (it / STAGES) & 1);
    if constexpr (CP_ASYNC) fence_proxy_async();
    keep_in_registers(acc);
    wgmma_fence();
    mma(s);
    wgmma_commit();
    wgmma_wait<INFLIGHT>();  // slice it - INFLIGHT is done: release its stage
    keep_in_registers(acc);
    if (kt >= INFLIGHT && (tid & 31) == 0) release((it - INFLIGHT) % STAGES);
  }
  if constexpr (INFLIGHT > 0) {
    wgmma_wait<0>();
    keep_in_registers(acc);
    if (ktiles > 0 && (tid & 31) == 0) release((it - 1) % STAGES);
  }
}

// Transposes an m64nN accumulator pair for a store along the rows: the pair (v0, v1) is
// (row r, columns c, c + 1), and rows r, r + 1 sit in lanes l, l ^ 4. Trading one value
// gives the lane of the even row (s0, s1) = (column c, rows r..r + 1) and the other lane
// (column c + 1, rows r - 1..r). Returns whether this lane holds the even row.
__device__ __forceinline__ bool transpose_pair(int lane, float v0, float v1, float& s0, float& s1) {
  const bool even = ((lane >> 2) & 1) == 0;
  const float other = __shfl_xor_sync(0xffffffffu, even ? v1 : v0, 4);
  s0 = even ? v0 : other;
  s1 = even ? other : v1;
  return even;
}

// Transposes an 8 x 8 matrix of 16-bit elements held as an MMA fragment (lane l: row l / 4,
// columns 2 (l % 4) and 2 (l % 4) + 1, packed low first) into the same layout.
__device__ __forceinline__ unsigned movmatrix_trans(unsigned a) {
  unsigned d;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(d) : "r"(a));
  return d;
}

// Transposes 4 x 4 words within each quad of lanes: lane q holds w[c] for c = 0..3 (in an
// MMA accumulator, its pair of columns 2q, 2q + 1 of 8-column chunk c) and gets back word
// q of every lane of its quad, in lane order (all eight columns of chunk q), for one
// 16-byte store where there were four 4-byte ones. Two butterfly steps, one per bit of q:
// lanes q and q ^ bit trade the words whose index differs from their own q in that bit,
// each keeping what it gets where it sent from. Four shuffles and twelve selects on
// fixed registers, where gathering each word by its index took twice the instructions.
__device__ __forceinline__ uint4 quad_transpose(int lane, const unsigned (&w)[4]) {
  unsigned o[4] = {w[0], w[1], w[2], w[3]};
#pragma unroll
  for (int bit = 1; bit <= 2; bit <<= 1) {
    const bool hi = (lane & bit) != 0;
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      if (c & bit) continue;
      // the lane with the bit set trades its word c, the other its word c | bit
      const unsigned v = __shfl_xor_sync(0xffffffffu, hi ? o[c] : o[c | bit], bit);
      o[c] = hi ? v : o[c];
      o[c | bit] = hi ? o[c | bit] : v;
    }
  }
  return make_uint4(o[0], o[1], o[2], o[3]);
}

// quad_transpose through 512 bytes of this warp's own shared memory at `buf`: the four
// words of every lane as four 8 x 8 matrices of 16-bit values by one stmatrix, each lane's
// 16 bytes back by one load; three instructions where the shuffles take sixteen. Row r's
// 16-byte piece of matrix c lies at slot c ^ (r / 2) of the row's 64 bytes, so neither a
// matrix's eight rows nor a quarter-warp's loads (two rows) meet in a bank. A caller taking
// two buffers in turn needs no barrier but this one's __syncwarp: a lane's load from a
// buffer precedes, in its program order, the __syncwarp before that buffer's next stores.
__device__ __forceinline__ uint4 quad_transpose_smem(int lane, const unsigned (&w)[4],
                                                     unsigned buf) {
  const int r = lane & 7, c = lane >> 3;  // the row of matrix c this lane gives the address of
  stmatrix_x4(buf + r * 64 + ((c ^ (r >> 1)) & 3) * 16, w[0], w[1], w[2], w[3]);
  __syncwarp();
  const int rr = lane >> 2, cc = lane & 3;  // the row and matrix this lane stores
  return ld_shared_v4(buf + rr * 64 + ((cc ^ (rr >> 1)) & 3) * 16);
}
