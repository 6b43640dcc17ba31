// Device helpers shared by the cubsparse kernel families.
//
// Half types travel as raw 16-bit words and are converted with PTX, so the kernels need
// no CUDA headers: NVRTC compiles them with no include path, and CI can compile them on a
// machine with no CUDA toolkit.
#pragma once

typedef unsigned short u16;
typedef long long i64;

// dtype tags for the tensor-core kernels: `storage` is the element in memory, VEC the
// elements per 16-byte copy, KSTEP the depth of one MMA. TF32 is float32 data multiplied
// on the tensor cores in TensorFloat-32 (10-bit mantissa), an explicit opt-in.
struct F16 { typedef u16 storage; static constexpr int VEC = 8, KSTEP = 16; };
struct BF16 { typedef u16 storage; static constexpr int VEC = 8, KSTEP = 16; };
struct TF32 { typedef float storage; static constexpr int VEC = 4, KSTEP = 8; };

__device__ __forceinline__ float to_f32(F16, u16 v) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v));
  return f;
}
__device__ __forceinline__ float to_f32(BF16, u16 v) {
  return __uint_as_float(((unsigned)v) << 16);
}
__device__ __forceinline__ u16 from_f32(F16, float f) {
  u16 v;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(v) : "f"(f));
  return v;
}
__device__ __forceinline__ u16 from_f32(BF16, float f) {
  u16 v;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(v) : "f"(f));
  return v;
}

// The first statement of every kernel (tests/test_kernels.py checks it). The compiled call
// path launches kernels with programmatic dependent launch on Hopper and newer: the GPU
// takes in the launch while the kernel before it on the stream runs, and starts this
// kernel's CTAs once that kernel has no CTA left, while its writes are still being
// flushed, instead of after. The wait holds each CTA until the kernel before has
// completed and its writes are visible, before it reads or writes memory. No kernel
// triggers its dependents early, so a dependent never holds an SM's resources beside a
// running kernel. Without such a launch the wait is a no-op.
__device__ __forceinline__ void grid_dependency() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return (unsigned)__cvta_generic_to_shared(p);
}

// 16-byte asynchronous global->shared copy; `bytes` < 16 zero-fills the rest (0: all zero).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)),
               "l"(gmem), "r"(bytes));
}
// One 16-byte store of four words: ptxas, left to itself, splits some uint4 stores into
// four 4-byte ones where the words sit in scattered registers, and a warp's 4-byte stores
// 16 bytes apart each fill a quarter of every sector they touch, four times over.
__device__ __forceinline__ void st_global_v4(void* p, uint4 v) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}
// 4-byte asynchronous global->shared copy (an index, say), through L1.
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_addr(smem)), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldsm_x4(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldsm_x4_t(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
// ldmatrix x4, transposing where T.
template <bool T>
__device__ __forceinline__ void ldsm_x4_as(unsigned (&r)[4], const void* p) {
  if (T)
    ldsm_x4_t(r, p);
  else
    ldsm_x4(r, p);
}
__device__ __forceinline__ unsigned ldsm_x1(const void* p) {
  unsigned r;
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r) : "r"(smem_addr(p)));
  return r;
}
__device__ __forceinline__ unsigned ldsm_x1_t(const void* p) {
  unsigned r;
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
               : "=r"(r)
               : "r"(smem_addr(p)));
  return r;
}
__device__ __forceinline__ void ldsm_x2(unsigned (&r)[2], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldsm_x2_t(unsigned (&r)[2], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr(p)));
}

// D = A * B + D on a 16x8x16 tile, float32 accumulators.
__device__ __forceinline__ void mma16816(F16, float (&d)[4], const unsigned (&a)[4],
                                         const unsigned (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma16816(BF16, float (&d)[4], const unsigned (&a)[4],
                                         const unsigned (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// D = A * B + D on a 16x8x8 tile of 16-bit inputs (one b = 8 block deep), float32 accumulators.
__device__ __forceinline__ void mma1688(F16, float (&d)[4], const unsigned (&a)[2], unsigned b) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(b));
}
__device__ __forceinline__ void mma1688(BF16, float (&d)[4], const unsigned (&a)[2], unsigned b) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(b));
}

// D = A * B + D on a 16x8x8 tile in TF32. ldmatrix hands over raw float32 bits; round them
// to TF32 (nearest, ties away) rather than letting the unit truncate.
__device__ __forceinline__ unsigned to_tf32(unsigned v) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(__uint_as_float(v)));
  return r;
}
__device__ __forceinline__ void mma16816(TF32, float (&d)[4], const unsigned (&a)[4],
                                         const unsigned (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(to_tf32(a[0])), "r"(to_tf32(a[1])), "r"(to_tf32(a[2])), "r"(to_tf32(a[3])),
        "r"(to_tf32(b[0])), "r"(to_tf32(b[1])));
}

// Epilogue store of two adjacent outputs: alpha * acc + beta * old, one 4- or 8-byte store
// (pair_value: the two 16-bit results packed, for a store the caller makes).
template <class Tag>
__device__ __forceinline__ unsigned pair_value(Tag tag, const u16* dst, float v0, float v1,
                                               float alpha, float beta) {
  float o0 = 0.f, o1 = 0.f;
  if (beta != 0.f) {
    const unsigned old = *(const unsigned*)dst;
    o0 = to_f32(tag, (u16)(old & 0xffff));
    o1 = to_f32(tag, (u16)(old >> 16));
  }
  const u16 r0 = from_f32(tag, beta != 0.f ? alpha * v0 + beta * o0 : alpha * v0);
  const u16 r1 = from_f32(tag, beta != 0.f ? alpha * v1 + beta * o1 : alpha * v1);
  return (unsigned)r0 | ((unsigned)r1 << 16);
}
template <class Tag>
__device__ __forceinline__ void store_pair(Tag tag, u16* dst, float v0, float v1, float alpha,
                                           float beta) {
  *(unsigned*)dst = pair_value(tag, dst, v0, v1, alpha, beta);
}
__device__ __forceinline__ void store_pair(TF32, float* dst, float v0, float v1, float alpha,
                                           float beta) {
  float2* d = (float2*)dst;
  float2 r = make_float2(alpha * v0, alpha * v1);
  if (beta != 0.f) {  // beta == 0 must not read: the output may hold NaN poison
    const float2 old = *d;
    r.x += beta * old.x;
    r.y += beta * old.y;
  }
  *d = r;
}

// Calls f(s) for this thread's share of SEGS 16-byte copies: s = tid, tid + THREADS, ...
template <int SEGS, int THREADS, class F>
__device__ __forceinline__ void for_each_copy(int tid, F f) {
#pragma unroll
  for (int it = 0; it < (SEGS + THREADS - 1) / THREADS; ++it) {
    const int s = tid + it * THREADS;
    if (SEGS % THREADS != 0 && s >= SEGS) break;
    f(s);
  }
}

// The multistage cp.async main loop of the tensor-core kernels. Slices 0..STAGES-2 are
// requested up front; each step waits for its slice, refills the buffer the previous step
// computed on (after the barrier every thread is past it), then computes on its own.
// load(stage, k_slice) issues one slice's copies, compute(stage) consumes a buffer.
template <int STAGES, class Load, class Compute>
__device__ __forceinline__ void cp_async_pipeline(int ktiles, Load load, Compute compute) {
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < ktiles) load(s, s);
    cp_async_commit();
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    const int nk = kt + STAGES - 1;
    if (nk < ktiles) load(nk % STAGES, nk);
    cp_async_commit();
    compute(kt % STAGES);
  }
  cp_async_wait<0>();
}

// ---------------------------------------------------------------------------------------
// Tensor-core tile machinery shared by both kernel families.
//
// A CTA owns a BM x BN float32 accumulator tile split over WARPS_M x WARPS_N warps. Each
// pipeline stage holds a BK-deep slice of A and B in shared memory. Storage orders:
//   A_KM = false: A[m][k] (k contiguous)      A_KM = true: A[k][m] (m contiguous)
//   B_NK = false: B[k][n] (n contiguous)      B_NK = true: B[n][k] (k contiguous)
// ldmatrix (with .trans where the contiguous axis is the wrong one) turns any of them into
// mma fragments. Rows are padded by 16 bytes: with an odd number of 16-byte units per row,
// the eight row addresses of an ldmatrix hit eight different bank groups.
template <class Tag, int BM, int BN, int BK, int WARPS_M, int WARPS_N, bool A_KM, bool B_NK>
struct TcTile {
  typedef typename Tag::storage T;
  static constexpr int VEC = Tag::VEC, KSTEP = Tag::KSTEP;
  static constexpr int THREADS = WARPS_M * WARPS_N * 32;
  static constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
  static constexpr int MT = WM / 16, NT = WN / 8;
  static constexpr int A_LD = A_KM ? BM + VEC : BK + VEC;  // rows padded by 16 bytes
  static constexpr int B_LD = B_NK ? BK + VEC : BN + VEC;
  static constexpr int A_ELEMS = (A_KM ? BK : BM) * A_LD;
  static constexpr int B_ELEMS = (B_NK ? BN : BK) * B_LD;
  static constexpr int STAGE_ELEMS = A_ELEMS + B_ELEMS;
  static_assert(WM % 16 == 0 && WN % 8 == 0 && BK % 16 == 0, "bad tile");
  static_assert(NT == 1 || NT % 2 == 0, "warp n-tile must be 8 or a multiple of 16");
  // ldmatrix moves 16-bit elements: a 32-bit operand works only with k contiguous.
  static_assert(VEC == 8 || (!A_KM && B_NK), "TF32 needs A[m][k] and B[n][k] in shared memory");

  static __device__ __forceinline__ void zero(float (&acc)[MT][NT][4]) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.f;
  }

  // `live` bit mt * NT + nt: that 16 x 8 accumulator tile is wanted (the tiled sdd skips
  // the MMAs of output tiles it will not store); all by default.
  static __device__ __forceinline__ void compute(const T* sA, const T* sB,
                                                 float (&acc)[MT][NT][4], int wm, int wn,
                                                 int lane, unsigned long long live = ~0ull) {
    const int mi = lane >> 3, r8 = lane & 7;
#pragma unroll
    for (int kk = 0; kk < BK; kk += KSTEP) {
      unsigned af[MT][4];
      unsigned bf[NT][2];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const int m0 = wm * WM + mt * 16;
        if (!A_KM) {
          ldsm_x4(af[mt], sA + (m0 + (lane & 15)) * A_LD + kk + (lane >> 4) * VEC);
        } else {
          ldsm_x4_t(af[mt], sA + (kk + (mi >> 1) * 8 + r8) * A_LD + m0 + (mi & 1) * 8);
        }
      }
      if (NT == 1) {
        const int n0 = wn * WN;
        const int h = (lane >> 3) & 1;
        if (!B_NK) {
          ldsm_x2_t(bf[0], sB + (kk + h * 8 + r8) * B_LD + n0);
        } else {
          ldsm_x2(bf[0], sB + (n0 + r8) * B_LD + kk + h * VEC);
        }
      } else {
#pragma unroll
        for (int nt = 0; nt < NT; nt += 2) {
          const int n0 = wn * WN + nt * 8;
          unsigned r[4];
          if (!B_NK) {
            ldsm_x4_t(r, sB + (kk + (mi & 1) * 8 + r8) * B_LD + n0 + (mi >> 1) * 8);
          } else {
            ldsm_x4(r, sB + (n0 + (mi >> 1) * 8 + r8) * B_LD + kk + (mi & 1) * VEC);
          }
          bf[nt][0] = r[0];
          bf[nt][1] = r[1];
          bf[nt + 1][0] = r[2];
          bf[nt + 1][1] = r[3];
        }
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
          if ((live >> (mt * NT + nt)) & 1ull) mma16816(Tag(), acc[mt][nt], af[mt], bf[nt]);
    }
  }
};

// ---------------------------------------------------------------------------------------
// CUDA-core tile for float32 (IEEE) and float64, fed by the same cp.async stages as TcTile
// and in the same storage orders: A[m][k] (or A[k][m] with A_KM) and B[k][n] (or B[n][k]
// with B_NK), rows padded by 16 bytes.
//
// Each of the (BM / TM) x (BN / TN) threads owns TM x TN outputs. Along an axis that is
// contiguous in shared memory at a fixed k (m of A[k][m], n of B[k][n]) a thread's indices
// come in runs of VEC, ty * VEC + (i / VEC) * VEC * TY + i % VEC; along the other they are
// strided, ty + i * TY. Every shared-memory read is then a 16-byte vector: VEC values of k
// of an A[m][k] (or B[n][k]) row, or VEC adjacent m (n) of an A[k][m] (B[k][n]) row. A
// padded row is an odd number of 16-byte units long (BK / VEC is even), so eight
// consecutive rows start in eight different bank groups: a warp's reads of A[m][k] (and of
// B[n][k]) are conflict-free whenever they span at most eight rows. A slice of VEC k steps
// costs TM + TN vector reads for TM * TN * VEC FMAs.
template <class T> struct Vec16;
template <> struct Vec16<float> { typedef float4 type; };
template <> struct Vec16<double> { typedef double2 type; };

template <class T, int BM, int BN, int BK, int TM, int TN, bool A_KM, bool B_NK>
struct SimtTile {
  static constexpr int VEC = 16 / sizeof(T);
  static constexpr int TX = BN / TN, TY = BM / TM, THREADS = TX * TY;
  static constexpr int A_LD = A_KM ? BM + VEC : BK + VEC;
  static constexpr int B_LD = B_NK ? BK + VEC : BN + VEC;
  static constexpr int A_ELEMS = (A_KM ? BK : BM) * A_LD, B_ELEMS = (B_NK ? BN : BK) * B_LD;
  static constexpr int STAGE_ELEMS = A_ELEMS + B_ELEMS;
  static_assert(TX * TN == BN && TY * TM == BM && BK % (2 * VEC) == 0, "bad SIMT tile");
  static_assert((!A_KM || TM % VEC == 0) && (B_NK || TN % VEC == 0),
                "indices along a contiguous axis come in runs of VEC");
  typedef typename Vec16<T>::type V;

  static __device__ __forceinline__ int row(int ty, int i) {
    return A_KM ? ty * VEC + (i / VEC) * VEC * TY + i % VEC : ty + i * TY;
  }
  static __device__ __forceinline__ int col(int tx, int j) {
    return B_NK ? tx + j * TX : tx * VEC + (j / VEC) * VEC * TX + j % VEC;
  }
  static __device__ __forceinline__ void load_vec(T* v, const T* p) {
    *reinterpret_cast<V*>(v) = *reinterpret_cast<const V*>(p);
  }

  static __device__ __forceinline__ void zero(T (&acc)[TM][TN]) {
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) acc[i][j] = T(0);
  }

  static __device__ __forceinline__ void compute(const T* sA, const T* sB, T (&acc)[TM][TN],
                                                 int tx, int ty) {
#pragma unroll
    for (int kk = 0; kk < BK; kk += VEC) {
      // a[i][v], b[j][v]: operands at k = kk + v. Rows along k are read whole up front;
      // rows along m (n) one k at a time, just before their FMAs, to keep registers low.
      T a[TM][VEC], b[TN][VEC];
      if (!A_KM) {
#pragma unroll
        for (int i = 0; i < TM; ++i) load_vec(a[i], sA + row(ty, i) * A_LD + kk);
      }
      if (B_NK) {
#pragma unroll
        for (int j = 0; j < TN; ++j) load_vec(b[j], sB + col(tx, j) * B_LD + kk);
      }
#pragma unroll
      for (int v = 0; v < VEC; ++v) {
        if (A_KM) {
#pragma unroll
          for (int iv = 0; iv < TM / VEC; ++iv) {
            T t[VEC];
            load_vec(t, sA + (kk + v) * A_LD + row(ty, iv * VEC));
#pragma unroll
            for (int e = 0; e < VEC; ++e) a[iv * VEC + e][v] = t[e];
          }
        }
        if (!B_NK) {
#pragma unroll
          for (int jv = 0; jv < TN / VEC; ++jv) {
            T t[VEC];
            load_vec(t, sB + (kk + v) * B_LD + col(tx, jv * VEC));
#pragma unroll
            for (int e = 0; e < VEC; ++e) b[jv * VEC + e][v] = t[e];
          }
        }
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
          for (int j = 0; j < TN; ++j) acc[i][j] = fma(a[i][v], b[j][v], acc[i][j]);
      }
    }
  }
};

// A CTA's work list (input block and W block of each item) copied to shared memory once, so
// that address generation in the copy loops never waits on a global load. Items past
// LIST_CAP (lists longer than 512 blocks) are read from global memory instead.
constexpr int LIST_CAP = 512;
struct WorkList {
  int* g;
  int* p;
  const int* gidx;
  const int* blk;
  int q0;
  __device__ __forceinline__ int input(int item) const {
    return item < LIST_CAP ? g[item] : __ldg(gidx + q0 + item);
  }
  __device__ __forceinline__ int block(int item) const {
    return item < LIST_CAP ? p[item] : __ldg(blk + q0 + item);
  }
};
// Copies the head of a list (up to LIST_CAP entries) to shared memory, nthreads threads.
__device__ __forceinline__ void fill_work_list(int* s_g, int* s_p, const int* gidx,
                                               const int* blk, int q0, int len, int tid,
                                               int nthreads) {
  for (int i = tid; i < len && i < LIST_CAP; i += nthreads) {
    s_g[i] = gidx[q0 + i];
    s_p[i] = blk[q0 + i];
  }
}
// The same for the whole CTA, ending on its barrier.
__device__ __forceinline__ WorkList load_work_list(int* s_g, int* s_p, const int* gidx,
                                                   const int* blk, int q0, int len, int tid,
                                                   int nthreads) {
  fill_work_list(s_g, s_p, gidx, blk, q0, len, tid, nthreads);
  __syncthreads();
  return WorkList{s_g, s_p, gidx, blk, q0};
}

// A CTA's lists in shared memory: input block and, for each of the G output blocks of the
// group, the W block that multiplies it (-1: absent), plus a G-bit presence mask per entry.
// Entries past CAP are read from global memory instead.
template <int G, int CAP>
struct GroupList {
  int* g;
  int* p;
  int* m;
  const int* gidx;
  const int* blk;
  int q0;
  __device__ __forceinline__ int input(int e) const {
    return e < CAP ? g[e] : __ldg(gidx + q0 + e);
  }
  __device__ __forceinline__ int block(int e, int i) const {
    return e < CAP ? p[e * G + i] : __ldg(blk + (i64)(q0 + e) * G + i);
  }
  // Entry e's G blocks (-1 where absent), in shared or global memory.
  __device__ __forceinline__ const int* blocks(int e) const {
    return e < CAP ? p + e * G : blk + (i64)(q0 + e) * G;
  }
  __device__ __forceinline__ unsigned mask(int e) const {
    if (e < CAP) return m[e];
    unsigned bits = 0;
#pragma unroll
    for (int i = 0; i < G; ++i) bits |= (unsigned)(__ldg(blk + (i64)(q0 + e) * G + i) >= 0) << i;
    return bits;
  }
};
// Copies the head of a group's lists (up to CAP entries) to shared memory, with each
// entry's presence bits, nthreads threads; no barrier (warp-specialized kernels sync the
// threads that copy).
template <int G, int CAP>
__device__ __forceinline__ void fill_group_list(int* s_g, int* s_p, int* s_m, const int* gidx,
                                                const int* blk, int q0, int len, int tid,
                                                int nthreads) {
  for (int e = tid; e < len && e < CAP; e += nthreads) {
    s_g[e] = gidx[q0 + e];
    unsigned bits = 0;
#pragma unroll
    for (int i = 0; i < G; ++i) {
      const int p = blk[(i64)(q0 + e) * G + i];
      s_p[e * G + i] = p;
      bits |= (unsigned)(p >= 0) << i;
    }
    s_m[e] = bits;
  }
}
// Fills a CTA's GroupList: each entry's input block and the group's W blocks and, with
// MASKS, each entry's presence bits (its members that have a block there). Ends on a
// barrier, like load_work_list.
template <int G, int CAP, bool MASKS>
__device__ __forceinline__ GroupList<G, CAP> load_group_list(int* s_g, int* s_p, int* s_m,
                                                             const int* gidx, const int* blk,
                                                             int q0, int len, int tid,
                                                             int nthreads) {
  for (int i = tid; i < len && i < CAP; i += nthreads) s_g[i] = gidx[q0 + i];
  for (int i = tid; i < len * G && i < CAP * G; i += nthreads) s_p[i] = blk[(i64)q0 * G + i];
  __syncthreads();
  if (MASKS) {
    for (int e = tid; e < len && e < CAP; e += nthreads) {
      unsigned bits = 0;
#pragma unroll
      for (int i = 0; i < G; ++i) bits |= (unsigned)(s_p[e * G + i] >= 0) << i;
      s_m[e] = bits;
    }
    __syncthreads();
  }
  return GroupList<G, CAP>{s_g, s_p, s_m, gidx, blk, q0};
}

// ---------------------------------------------------------------------------------------
// Split lists, added up in the launch that computes them. Where few CTAs run (small N), the
// host cuts long lists into segments (dsd_copies.cuh). The CTA of a segment stores its
// float32 partial tile, unscaled, in the segment's workspace slot (slot s, row r, column c
// of a tile W columns wide at ws[s * ws_stride + r * W + c]), then counts itself in on a
// counter of its list and row tile. The CTA that arrives last adds the list's partials in
// slot order and stores the outputs: the order of the sum does not depend on which CTA is
// last, so the result is bitwise reproducible. That CTA also takes its list's count back
// off the counter (to zero, so the host zeroes the counters once, not per launch; by
// subtraction, so that a launch overlapping another on the same counters, which launches
// on one stream never do, spoils that call but leaves the counters right for the next).
//
// Called by every storing thread of the CTA (nthreads of them, tid 0 among them) after its
// partial stores, with sync() a barrier of exactly those threads. segs[slot] is (first
// slot of the list, segments of the list); counts holds one counter per (first slot, row
// tile of BM rows). Only the first `width` columns of the tile exist (a group's last
// members may not); store(r, c, v0, v1) stores the sums of row r, columns c and c + 1.
template <int W, class Sync, class Store>
__device__ __forceinline__ void split_finish(const float* ws, i64 ws_stride, const int2* segs,
                                             int* counts, int slot, int row0, int bm,
                                             int nrows, int width, int tid, int nthreads,
                                             Sync sync, Store store) {
  __shared__ int s_last;
  const int2 sg = segs[slot];
  __threadfence();  // this thread's partial, before the count that publishes it
  sync();
  if (tid == 0) {
    int* count = counts + (i64)sg.x * ((nrows + bm - 1) / bm) + row0 / bm;
    const int last = atomicAdd(count, 1) == sg.y - 1;
    if (last) {
      __threadfence();         // the other segments' partials, stored before their counts
      atomicSub(count, sg.y);  // every segment is in: zero for the next launch
    }
    s_last = last;
  }
  sync();
  if (!s_last) return;
  // The tile's rows are contiguous in every slot (rows of W floats): thread tid adds
  // columns 4 tid.. of the flattened tile, U groups of four at a time, with the loads of
  // S segments in flight together (this CTA's tail is the launch's: one L2 round trip per
  // S segments and U vectors, not per element); the sum's order stays slot order.
  constexpr int U = W >= 32 ? 2 : 1, S = 4;  // small tiles: fewer registers
  const int total = min(bm, nrows - row0) * W, step = 4 * nthreads;
  const float* tile = ws + (i64)sg.x * ws_stride + (i64)row0 * W;
  for (int e0 = 4 * tid; e0 < total; e0 += step * U) {
    float4 acc[U];
#pragma unroll
    for (int u = 0; u < U; ++u) acc[u] = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int s0 = 0; s0 < sg.y; s0 += S) {
      float4 v[S][U];  // columns past `width` (never stored) read as zeros, then dropped
#pragma unroll
      for (int s = 0; s < S; ++s)
#pragma unroll
        for (int u = 0; u < U; ++u)  // L2 reads (.cg): other CTAs stored them
          v[s][u] = s0 + s < sg.y && e0 + u * step < total && (e0 + u * step) % W < width
                        ? __ldcg((const float4*)(tile + (i64)(s0 + s) * ws_stride + e0 + u * step))
                        : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int s = 0; s < S; ++s)
        if (s0 + s < sg.y)
#pragma unroll
          for (int u = 0; u < U; ++u) {
            acc[u].x += v[s][u].x;
            acc[u].y += v[s][u].y;
            acc[u].z += v[s][u].z;
            acc[u].w += v[s][u].w;
          }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int e = e0 + u * step;
      if (e >= total) break;
      const int r = row0 + e / W, c = e % W;  // W % 4 == 0: the four share a row
      if (c >= width) continue;
      store(r, c, acc[u].x, acc[u].y);
      store(r, c + 2, acc[u].z, acc[u].w);
    }
  }
}

// split_finish for a tile of one output block j (columns j * B ..), stored as pairs.
template <int B, class Tag, class Sync>
__device__ __forceinline__ void split_finish_block(Tag, const float* ws, i64 ws_stride,
                                                   const int2* segs, int* counts, int slot,
                                                   int row0, int bm, int nrows, int tid,
                                                   int nthreads, Sync sync,
                                                   typename Tag::storage* y, i64 ldy, int j,
                                                   float alpha, float beta) {
  split_finish<B>(ws, ws_stride, segs, counts, slot, row0, bm, nrows, B, tid, nthreads, sync,
                  [&](int r, int c, float v0, float v1) {
                    store_pair(Tag(), y + (i64)r * ldy + (i64)j * B + c, v0, v1, alpha, beta);
                  });
}
