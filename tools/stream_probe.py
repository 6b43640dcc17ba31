"""Probe of a memory-bound small-N path for X @ W at b = 8 (float16): X resident in shared
memory, each stored block of W read once. Not a cubsparse kernel: it measures how close
such a schedule gets to the copy rate before one is built into the package.

A CTA owns a chunk of KC block rows of W (X's columns k0 .. k0 + 8 KC, all N rows of them
copied once into shared memory) and a group of G output block columns. Each warp walks
its members' lists (W's block columns, the part that falls in the chunk): a block is one
coalesced 128-byte load (4 bytes a lane), transposed in registers by movmatrix into the B
fragment of mma m16n8k8, and multiplied by the X rows of its block row from shared memory.
Each chunk's partial product goes to a float32 workspace; a second kernel adds the chunks
in order (deterministic).

    PYTHONPATH=. python3 tools/stream_probe.py [--n 32,128] [--ck 8192] [--d 0.1,0.25,0.5]
"""

from __future__ import annotations

import argparse

import numpy as np

SOURCE = r"""
#include <cuda_fp16.h>
typedef unsigned short u16;
typedef long long i64;

template <int MT, int KC, int G, int U, bool PF>
__global__ void __launch_bounds__(256)
stream_dsd8(const u16* __restrict__ x, int ldx, const u16* __restrict__ w,
            const int* __restrict__ rowblk, const int* __restrict__ blkid,
            const int* __restrict__ starts, int nchunks, float* __restrict__ ws, int ldws) {
  constexpr int N = MT * 16, COLS = KC * 8, LD = COLS + 8;  // halfs per smem row (padded)
  extern __shared__ __align__(16) u16 xs[];
  const int g = blockIdx.x, c = blockIdx.y, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int k0 = c * COLS;
  // X's chunk into shared memory, 16 bytes a thread
  for (int v = tid; v < N * (COLS / 8); v += 256) {
    const int r = v / (COLS / 8), cv = v % (COLS / 8);
    *(int4*)(xs + r * LD + cv * 8) = *(const int4*)(x + (i64)r * ldx + k0 + cv * 8);
  }
  __syncthreads();
  for (int m = warp; m < G; m += 8) {
    const int j = g * G + m;
    const int q0 = starts[j * (nchunks + 1) + c], q1 = starts[j * (nchunks + 1) + c + 1];
    float acc[MT][4];
#pragma unroll
    for (int t = 0; t < MT; ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.f;
    auto mma_block = [&](unsigned wv, int rr) {
      unsigned bf;
      asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(bf) : "r"(wv));
      const u16* a = xs + (lane >> 2) * LD + rr * 8 + (lane & 3) * 2;
#pragma unroll
      for (int t = 0; t < MT; ++t) {
        const unsigned a0 = *(const unsigned*)(a + t * 16 * LD);
        const unsigned a1 = *(const unsigned*)(a + (t * 16 + 8) * LD);
        asm volatile(
            "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
            "{%0,%1,%2,%3};"
            : "+f"(acc[t][0]), "+f"(acc[t][1]), "+f"(acc[t][2]), "+f"(acc[t][3])
            : "r"(a0), "r"(a1), "r"(bf));
      }
    };
    if (!PF) {  // each batch: U index loads, then U dependent block loads
      for (int q = q0; q < q1; q += U) {
        unsigned wv[U];
        int rr[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int qq = q + u < q1 ? q + u : q1 - 1;
          rr[u] = rowblk[qq] - c * KC;
          wv[u] = __ldg((const unsigned*)(w + (i64)blkid[qq] * 64) + lane);
        }
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (q + u < q1) mma_block(wv[u], rr[u]);
      }
    } else {  // a window of 32 entries' indices in one load, the next batch's blocks
              // loaded while this batch multiplies
      for (int win = q0; win < q1; win += 32) {
        const int L = min(32, q1 - win);
        const int myrow = lane < L ? rowblk[win + lane] - c * KC : 0;
        const int myblk = lane < L ? blkid[win + lane] : 0;
        unsigned cur[U], nxt[U];
#pragma unroll
        for (int u = 0; u < U; ++u)
          cur[u] = __ldg((const unsigned*)(w + (i64)__shfl_sync(~0u, myblk, u) * 64) + lane);
        for (int base = 0; base < L; base += U) {
          if (base + U < L) {
#pragma unroll
            for (int u = 0; u < U; ++u)
              nxt[u] = __ldg((const unsigned*)(w + (i64)__shfl_sync(~0u, myblk,
                                                                    (base + U + u) & 31) * 64) +
                             lane);
          }
#pragma unroll
          for (int u = 0; u < U; ++u) {
            const int rr = __shfl_sync(~0u, myrow, (base + u) & 31);
            if (base + u < L) mma_block(cur[u], rr);
          }
#pragma unroll
          for (int u = 0; u < U; ++u) cur[u] = nxt[u];
        }
      }
    }
    float* out = ws + (i64)c * N * ldws + j * 8 + (lane & 3) * 2;
#pragma unroll
    for (int t = 0; t < MT; ++t) {
      const int r = t * 16 + (lane >> 2);
      *(float2*)(out + (i64)r * ldws) = make_float2(acc[t][0], acc[t][1]);
      *(float2*)(out + (i64)(r + 8) * ldws) = make_float2(acc[t][2], acc[t][3]);
    }
  }
}

// y = the chunks' partial products added in chunk order, 4 elements a thread
__global__ void __launch_bounds__(256)
combine(const float* __restrict__ ws, int nchunks, i64 chunk_elems, __half* __restrict__ y,
        i64 n4) {
  for (i64 v = (i64)blockIdx.x * 256 + threadIdx.x; v < n4; v += (i64)gridDim.x * 256) {
    float4 s = ((const float4*)ws)[v];
    for (int c = 1; c < nchunks; ++c) {
      const float4 t = ((const float4*)(ws + c * chunk_elems))[v];
      s.x += t.x; s.y += t.y; s.z += t.z; s.w += t.w;
    }
    __half2* o = (__half2*)(y + v * 4);
    o[0] = __floats2half2_rn(s.x, s.y);
    o[1] = __floats2half2_rn(s.z, s.w);
  }
}
"""


def _timeit(fn, reps=20, rounds=5) -> float:
    """Median µs per call of ``fn`` over ``rounds`` event-timed loops of ``reps`` calls."""
    import cupy as cp

    fn()
    cp.cuda.Device().synchronize()
    s, e = cp.cuda.Event(), cp.cuda.Event()
    ts = []
    for _ in range(rounds):
        s.record()
        for _ in range(reps):
            fn()
        e.record()
        e.synchronize()
        ts.append(cp.cuda.get_elapsed_time(s, e) / reps * 1e3)
    return float(np.median(ts))


def _copy_rate() -> float:
    """Device-to-device copy, read and write bytes counted, GB/s."""
    import cupy as cp

    a = cp.empty(1 << 30, np.uint8)
    c = cp.empty_like(a)
    return 2 * a.nbytes / _timeit(lambda: cp.copyto(c, a), reps=5) / 1e3


def _columns(w, b: int, K: int):
    """W's blocks by block column, then block row: (colptr, rows, block ids) on the host."""
    import cupy as cp

    indptr, indices = cp.asnumpy(w.indptr), cp.asnumpy(w.indices)
    rows = np.repeat(np.arange(K // b), np.diff(indptr))
    perm = np.lexsort((rows, indices))
    colptr = np.zeros(K // b + 1, np.int64)
    np.cumsum(np.bincount(indices, minlength=K // b), out=colptr[1:])
    return colptr, rows[perm], perm


def _probe(mod, x, w, cols, ref, K: int, kc: int, g: int, u: int, pf: bool):
    """(µs of the main kernel, µs with the combine, max relative error) of one variant."""
    import cupy as cp

    n, b = x.shape[0], 8
    colptr, rsorted, perm = cols
    nchunks = (K // b) // kc
    bounds = np.arange(nchunks + 1) * kc
    starts = np.empty((K // b, nchunks + 1), np.int32)
    for j in range(K // b):
        starts[j] = colptr[j] + np.searchsorted(rsorted[colptr[j]:colptr[j + 1]], bounds)
    rowblk, blkid = cp.asarray(rsorted.astype(np.int32)), cp.asarray(perm.astype(np.int32))
    starts_d = cp.asarray(starts.ravel())
    ws = cp.full((nchunks, n, K), np.nan, np.float32)
    y = cp.empty((n, K), np.float16)
    f = mod.get_function(f"stream_dsd8<{n // 16},{kc},{g},{u},{'true' if pf else 'false'}>")
    comb = mod.get_function("combine")
    smem = n * (kc * 8 + 8) * 2
    f.max_dynamic_shared_size_bytes = smem
    grid, n4 = ((K // b) // g, nchunks), n * K // 4
    args = (x, np.int32(K), w.data, rowblk, blkid, starts_d, np.int32(nchunks), ws,
            np.int32(K))

    def probe():
        f(grid, (256,), args, shared_mem=smem)

    def both():
        probe()
        comb((min(-(-n4 // 256), 4096),), (256,),
             (ws, np.int32(nchunks), np.int64(n * K), y, np.int64(n4)))

    both()
    err = float(cp.abs(y.astype(np.float32) - ref).max() / cp.abs(ref).max())
    return _timeit(probe), _timeit(both), err


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="32,128")
    ap.add_argument("--ck", type=int, default=8192)
    ap.add_argument("--d", default="0.1,0.25,0.5")
    ap.add_argument("--variants", default="64.32.8,64.32.8.p,64.16.8.p,64.32.4.p,128.32.8.p",
                    help="KC.G.U[.p]: block rows per chunk, output blocks per CTA, blocks "
                    "in flight per warp; .p: indices a window at a time, the next batch "
                    "prefetched")
    args = ap.parse_args(argv)
    import cupy as cp

    import cubsparse as cs
    from cubsparse._cuda import plans

    b, K = 8, args.ck
    ns = [int(v) for v in args.n.split(",")]
    variants = [(*(int(t) for t in v.split(".")[:3]), v.endswith(".p"))
                for v in args.variants.split(",")]
    names = [f"stream_dsd8<{n // 16},{kc},{g},{u},{'true' if pf else 'false'}>"
             for n in ns for kc, g, u, pf in variants]
    mod = cp.RawModule(code=SOURCE, options=("--std=c++17",),
                       name_expressions=[*names, "combine"])
    rate = _copy_rate()
    print(f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, copy {rate:.0f} "
          f"GB/s (read + write), fp16, b = 8, C = K = {K}, random; µs per call, CUDA events; "
          "bw: W's, X's and Y's bytes over the time, over the copy rate")
    print(f"{'N':>4} {'d':>5} {'variant':>12} {'probe':>8} {'+comb':>8} {'bw':>5} "
          f"{'cubsparse':>9} {'bw':>5} {'dense':>7}")
    for n in ns:
        x = cp.random.default_rng(1).standard_normal((n, K), dtype=np.float32).astype(np.float16)
        for d in (float(v) for v in args.d.split(",")):
            lay = cs.layouts.random(K // b, K // b, d, seed=2)
            w = cs.BlockSparseMatrix.from_layout(lay, b, dtype="float16", seed=3, backend="cuda")
            wd = w.toarray()
            ref = cp.matmul(x.astype(np.float32), wd.astype(np.float32))
            cols = _columns(w, b, K)
            nbytes = w.data.nbytes + x.nbytes + n * K * 2
            with plans.override(dense=False):
                t_cs = _timeit(lambda w=w, x=x: cs.matmul(x, w))
            t_dense = _timeit(lambda wd=wd, x=x: cp.matmul(x, wd))
            for kc, g, u, pf in variants:
                if n * (kc * 8 + 8) * 2 > 227 * 1024:
                    continue
                t_p, t_b, err = _probe(mod, x, w, cols, ref, K, kc, g, u, pf)
                ok = "" if err < 1e-2 else f"  WRONG (max err {err:.1e})"
                tag = f"{kc}.{g}.{u}" + (".p" if pf else "")
                print(f"{n:>4} {d:>5} {tag:>12} {t_p:8.1f} {t_b:8.1f} "
                      f"{nbytes / t_b / rate / 1e3:5.2f} {t_cs:9.1f} "
                      f"{nbytes / t_cs / rate / 1e3:5.2f} {t_dense:7.1f}{ok}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
