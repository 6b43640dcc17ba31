// dsd on Hopper for small blocks: a persistent tile of G adjacent output blocks walks
// the union of their lists (sm90_single.cuh describes the shared parts).
#include "sm90_single.cuh"

// The grouped kernel made persistent and warp-specialized (b = 8-64), for the products
// whose cost is the X slices streamed from L2: a single-block tile reads d * K columns of X
// per b output columns, a group of G adjacent output blocks reads the union of its
// members' lists once (at b = 32, d = 0.25, G = 8: 0.25 -> 0.11 of K per output column).
// The persistent loop, the producer warpgroup and the mbarrier ring are those of
// dsd_wgmma_ws; what differs:
// * Consumer warpgroup c owns members c * GPC .. c * GPC + GPC - 1, over all BM = 64 * MW
//   rows. The members' MMAs run one of two ways:
//   - per present block (PANEL false, b >= 16): one member's MMAs for one entry of a slice
//     form a whole wgmma group (fence, MMAs, commit, wait) inside the branch on its
//     presence bit, since branching between wgmmas of one group makes ptxas serialize
//     every one of them (bench/NOTES.md). The MMAs scale with the blocks, but each group
//     is small and waited for at once.
//   - as one dense panel (PANEL true, K-major B only): the producer zero-fills the B tiles
//     of absent members, and a consumer multiplies its GPC members' tiles, which lie one
//     after another in shared memory, as a single K-major operand of GPC * B columns: one
//     wgmma group per slice, m64n(GPC * B) instructions, the next slice's group issued
//     before this one is waited for (consume_tile). Absent blocks cost MMAs but no copies
//     from L2, so it pays where the members share most of their entries (banded and
//     small-world layouts), and it needs no k16 step within one entry (b = 8 too).
// * The producer copies a slice of X and only the blocks of members present there, and
//   publishes the slice's presence bits beside the data: its thread 0 stores them and adds
//   one ordinary (releasing) arrival to `full`, so a consumer that sees the phase complete
//   sees the bits too.
// * W's blocks are read transposed ([n][k], K-major B tiles) or, with KN, as stored
//   (N-major B tiles, no transposed copy).
template <class Tag, int B, int G, int MW, int CW, int STAGES, bool KN, int MINB,
          bool PANEL = false, int PRODUCERS = 1>
__global__ void __launch_bounds__((CW + PRODUCERS) * 128, MINB)
    dsd_wgmma_union(const u16* __restrict__ x, i64 ldx, int nrows, int nout,
                    const u16* __restrict__ wk, const int4* __restrict__ work, int nwork,
                    const int* __restrict__ blk, const int* __restrict__ gidx, u16* y, i64 ldy,
                    float alpha, float beta, float* ws, i64 ws_stride,
                    const int2* __restrict__ segs, int* counts) {
  grid_dependency();
  constexpr int BK = 64, BM = 64 * MW, CONSUMERS = CW * 128, GPC = G / CW;
  constexpr int EPS = BK / B, EK = B / 16;  // list entries per slice, k16 steps per entry
  constexpr int W_BYTES = B * BK * 2;       // one member's B tile, K- or N-major
  constexpr int A_BYTES = BM * 128, STAGE_BYTES = A_BYTES + G * W_BYTES;
  constexpr int CAP = 256;  // list entries kept in shared memory
  static_assert(G % CW == 0 && G <= 32 && B <= BK, "bad union tile");
  static_assert(PANEL ? !KN && B >= 8 : EPS * G <= 64 && B >= 16, "bad union tile");
  static_assert(W_BYTES % 1024 == 0, "B tiles start on 1 KiB boundaries (swizzle)");
  // PRODUCERS warpgroups copy (more than one for the panel only, whose copies bound it):
  // a thread's rows are RSTEP apart
  constexpr int PT = PRODUCERS * 128, RSTEP = PT / 8;
  static_assert(PRODUCERS == 1 || (PANEL && BM % RSTEP == 0), "bad union tile");
  extern __shared__ unsigned char smem_raw[];
  const unsigned base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  unsigned char* smem = smem_raw + (base - smem_addr(smem_raw));
  __shared__ unsigned long long full[STAGES], empty[STAGES], present[STAGES];
  __shared__ int s_g[CAP], s_p[CAP * G], s_m[CAP];
  const int tid = threadIdx.x;
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], PT + 1);           // the producers' copies and its presence bits
      mbar_init(&empty[s], CONSUMERS / 32);  // one arrival per consumer warp
    }
  }
  __syncthreads();  // the only CTA-wide barrier
  const int ntiles = nwork * ((nrows + BM - 1) / BM);
  unsigned it = 0;  // slices through the pipeline so far

  if (tid >= CONSUMERS) {  // producer
    // With more than one producer warpgroup the threads are more than the launch bound's
    // registers allow the consumers: producers give theirs up, consumers take them.
    if constexpr (PRODUCERS > 1) setmaxnreg_dec<40>();
    const int ptid = tid - CONSUMERS;
    // X and K-major B rows: rows r0, r0 + 16, ... and chunk c, which lies in entry c * 8 / B
    // of every slice; N-major B tiles: chunk kn_c of rows of k kn_r0, kn_r0 + KN_RS, ...
    const int r0 = ptid / 8, c = ptid % 8, ce = c * 8 / B, off = (c * 8) % B;
    const int dst0 = r0 * 128 + ((c ^ (r0 & 7)) << 4);  // swizzle phase shared by its rows
    constexpr int KN_CH = B / 8, KN_RS = 128 / KN_CH, KN_IT = (BK + KN_RS - 1) / KN_RS;
    const int kn_c = ptid % KN_CH, kn_r0 = ptid / KN_CH;
    for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
      const int4 item = work[t % nwork];
      const int q0 = item.y, len = item.z, row0 = (t / nwork) * BM;
      named_barrier_sync(1, PT);  // every producer thread is done with the previous list
      fill_group_list<G, CAP>(s_g, s_p, s_m, gidx, blk, q0, len, ptid, PT);
      named_barrier_sync(1, PT);
      const GroupList<G, CAP> list{s_g, s_p, s_m, gidx, blk, q0};
      const u16* a_row = x + (i64)(row0 + r0) * ldx;
      unsigned a_ok = 0;  // bit i: row r0 + RSTEP i of the tile lies in X
#pragma unroll
      for (int i = 0; i < BM / RSTEP; ++i)
        a_ok |= (unsigned)(row0 + r0 + i * RSTEP < nrows) << i;
      const int ktiles = (len * B + BK - 1) / BK;
      for (int kt = 0; kt < ktiles; ++kt, ++it) {
        const int s = it % STAGES;
        mbar_wait(&empty[s], ((it / STAGES) & 1) ^ 1);  // the first round passes at once
        unsigned char* sA = smem + s * STAGE_BYTES;
        unsigned char* sB = sA + A_BYTES;
        const int e = kt * EPS + ce;  // this thread's entry (X and K-major B)
        const bool live = e < len;
        // X: rows past X are zero-filled. Entries past the list are never multiplied by
        // the per-block form, so it copies nothing for them; the panel writes every chunk
        // of the stage (zeros there), since its MMAs multiply the whole slice.
        if (PANEL || live) {
          const u16* asrc = a_row + (i64)list.input(live ? e : 0) * B + off;
          const unsigned ok = live ? a_ok : 0u;
#pragma unroll
          for (int i = 0; i < BM / RSTEP; ++i) {
            const bool on = (ok >> i) & 1u;
            cp_async16(sA + dst0 + i * RSTEP * 128, on ? asrc + i * RSTEP * ldx : x,
                       on ? 16 : 0);
          }
        }
        if constexpr (PANEL) {
          // The blocks of absent members as zeros, which the panel's MMAs multiply.
          // Member g's block fills rows g * B ... of the panel; this thread copies chunk
          // c of rows r0, r0 + RSTEP, ... of it, which where B < RSTEP are one row of every
          // RSTEP / B-th member's block (the first one r0 / B). Absent blocks are
          // zero-filled. Everything but the block lookups is a compile-time offset from
          // values fixed per thread: with the member index computed per row at run time
          // the b = 32 panel ran 1.4x slower.
          constexpr int RPM = B >= RSTEP ? B / RSTEP : 1, MSTEP = B >= RSTEP ? 1 : RSTEP / B;
          static_assert(G % MSTEP == 0, "a thread's members are every MSTEP-th");
          const int g0 = B >= RSTEP ? 0 : r0 / B, rr = B >= RSTEP ? r0 : r0 % B;
          const unsigned bits = (live ? list.mask(e) : 0u) >> g0;
          const int* blocks = list.blocks(live ? e : 0) + g0;
#pragma unroll
          for (int j = 0; j < G / MSTEP; ++j) {
            // an absent block's zero-fills read nothing: they keep a valid address
            const bool on = (bits >> (j * MSTEP)) & 1u;
            const u16* bsrc = on ? wk + (i64)blocks[j * MSTEP] * (B * B) + rr * B + off : wk;
            const int bytes = on ? 16 : 0;
#pragma unroll
            for (int i = 0; i < RPM; ++i)
              cp_async16(sB + dst0 + j * MSTEP * W_BYTES + i * RSTEP * 128,
                         bsrc + i * RSTEP * B, bytes);
          }
        } else if (live) {
          if constexpr (!KN) {
            // Only the members present (a quarter at d = 0.25): walk the entry's presence
            // bits rather than test every member. Member g's tile is rows g * B ...
            for (unsigned bits = list.mask(e); bits; bits &= bits - 1) {
              const int g = __ffs(bits) - 1;
              const u16* bsrc = wk + (i64)list.block(e, g) * (B * B) + r0 * B + off;
#pragma unroll
              for (int i = 0; i < B / 16; ++i)
                cp_async16(sB + g * W_BYTES + dst0 + i * 16 * 128, bsrc + i * 16 * B, 16);
            }
          }
        }
        if constexpr (KN) {
#pragma unroll
          for (int j = 0; j < KN_IT; ++j) {
            const int k = kn_r0 + j * KN_RS;  // row of k in the slice: entry k / B
            if (KN_RS > BK && k >= BK) break;
            const int ek = kt * EPS + k / B;
            if (ek >= len) continue;
            const unsigned dst = MnTile<B, BK>::offset(k, kn_c);
            for (unsigned bits = list.mask(ek); bits; bits &= bits - 1) {  // present members
              const int g = __ffs(bits) - 1;
              cp_async16(sB + g * W_BYTES + dst,
                         wk + (i64)list.block(ek, g) * (B * B) + (k % B) * B + kn_c * 8, 16);
            }
          }
        }
        cp_async_mbar_arrive(&full[s]);
        if (ptid == 0) {  // presence bit el * G + g: entry el of the slice has member g
          if constexpr (!PANEL) {
            unsigned long long bits = 0;
#pragma unroll
            for (int el = 0; el < EPS; ++el)
              if (kt * EPS + el < len)
                bits |= (unsigned long long)list.mask(kt * EPS + el) << (el * G);
            present[s] = bits;
          }
          mbar_arrive(&full[s]);
        }
      }
    }
    cp_async_wait<0>();
    return;
  }

  // the CTA's registers at launch (the launch bound's per-thread share, in steps of 8),
  // less the producers' 40 each, over the consumers
  constexpr int LAUNCH_REGS = 65536 / (MINB * (CONSUMERS + PT)) / 8 * 8;
  constexpr int CREGS = (LAUNCH_REGS * (CONSUMERS + PT) - PT * 40) / CONSUMERS / 8 * 8;
  static_assert(PRODUCERS == 1 || (LAUNCH_REGS >= 40 && CREGS >= LAUNCH_REGS),
                "the producers' registers must be enough to give some up");
  if constexpr (PRODUCERS > 1)  // the registers the producers gave up, shared out
    setmaxnreg_inc<(CREGS < 256 ? CREGS : 256)>();
  const int wg = tid / 128;  // consumer warpgroup: members wg * GPC ...
  constexpr int NP = GPC * B;  // the panel's columns per consumer
  float acc[GPC][MW][B / 2];   // per present block
  float pacc[MW][PANEL ? NP / 2 : 1];  // as one panel: member g in columns g * B ...
  for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
    const int4 item = work[t % nwork];
    const int grp = item.x, len = item.z, slot = item.w;
    const int ktiles = (len * B + BK - 1) / BK;
    const int row0 = (t / nwork) * BM;
    if constexpr (PANEL) {
      consume_tile<STAGES, 1, true>(ktiles, it, pacc, full, empty, tid, [&](int s) {
        const unsigned sA = base + s * STAGE_BYTES, sB = sA + A_BYTES + wg * GPC * W_BYTES;
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
          const unsigned long long db = wgmma_desc_sw128(sB + kk * 32);
#pragma unroll
          for (int m = 0; m < MW; ++m)
            Wgmma<Tag, NP, 0>::mma(pacc[m], wgmma_desc_sw128(sA + m * 64 * 128 + kk * 32), db);
        }
      });
#pragma unroll
      for (int g = 0; g < GPC; ++g) {
        const int i = wg * GPC + g, j = grp * G + i;  // member, output block
        float part[MW][B / 2];
#pragma unroll
        for (int m = 0; m < MW; ++m)
#pragma unroll
          for (int q = 0; q < B / 2; ++q) part[m][q] = pacc[m][g * (B / 2) + q];
        if (j < nout)  // the last group may be partial; split partials are G * B wide
          single_store<Tag, B, MW, G * B>(part, 0, tid, row0, nrows, j, slot, y, ldy, alpha,
                                          beta, ws + i * B, ws_stride);
      }
    } else {
#pragma unroll
      for (int g = 0; g < GPC; ++g)
#pragma unroll
        for (int m = 0; m < MW; ++m)
#pragma unroll
          for (int i = 0; i < B / 2; ++i) acc[g][m][i] = 0.f;
      for (int kt = 0; kt < ktiles; ++kt, ++it) {
        const int s = it % STAGES;
        mbar_wait(&full[s], (it / STAGES) & 1);
        // Lane 0 reads the slice's presence bits and hands them to its warp, so that the
        // one read of present[s] and the arrival on `empty` that lets the producer write
        // it again are one thread's, in program order.
        unsigned long long bits = 0;
        if ((tid & 31) == 0) bits = present[s];
        bits = __shfl_sync(0xffffffffu, bits, 0) >> (wg * GPC);
        fence_proxy_async();  // the landed cp.async data -> visible to the tensor cores
        const unsigned sA = base + s * STAGE_BYTES, sB = sA + A_BYTES + wg * GPC * W_BYTES;
#pragma unroll
        for (int g = 0; g < GPC; ++g)
#pragma unroll
          for (int el = 0; el < EPS; ++el)
            if ((bits >> (el * G + g)) & 1u) {
              keep_in_registers(acc[g]);
              wgmma_fence();
#pragma unroll
              for (int kk = el * EK; kk < (el + 1) * EK; ++kk) {
                const unsigned sBg = sB + g * W_BYTES;
                const unsigned long long db =
                    KN ? MnTile<B, BK>::desc(sBg, 0, kk) : wgmma_desc_sw128(sBg + kk * 32);
#pragma unroll
                for (int m = 0; m < MW; ++m)
                  Wgmma<Tag, B, KN ? 2 : 0>::mma(
                      acc[g][m], wgmma_desc_sw128(sA + m * 64 * 128 + kk * 32), db);
              }
              wgmma_commit();
              wgmma_wait<0>();
              keep_in_registers(acc[g]);
            }
        // The warp is converged (a warp whose members are absent runs no wgmma, whose
        // .aligned forms would converge it) before lane 0 frees the stage.
        __syncwarp();
        if ((tid & 31) == 0) mbar_arrive(&empty[s]);
      }
#pragma unroll
      for (int g = 0; g < GPC; ++g) {
        const int i = wg * GPC + g, j = grp * G + i;  // member, output block
        if (j < nout)  // the last group may be partial; split partials are G * B wide
          single_store<Tag, B, MW, G * B>(acc[g], 0, tid, row0, nrows, j, slot, y, ldy, alpha,
                                          beta, ws + i * B, ws_stride);
      }
    }
    if (slot >= 0)
      split_finish<G * B>(ws, ws_stride, segs, counts, slot, row0, BM, nrows,
                          min(G, nout - grp * G) * B,  // the last group may be partial
                          tid, CONSUMERS, [] { named_barrier_sync(2, CONSUMERS); },
                          [&](int r, int c, float v0, float v1) {
                            store_pair(Tag(), y + (i64)r * ldy + (i64)grp * G * B + c, v0, v1,
                                       alpha, beta);
                          });
  }
}
