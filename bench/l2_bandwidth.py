"""L2 -> SM read bandwidth of this GPU, the ceiling of the persistent dsd kernels
(bench/NOTES.md 55): 16-byte ld.global.cg loads, and TMA 2-D boxes shaped like the dsd
kernels' X tiles (scattered columns, several stages, one copying thread per CTA), from a
32 MB matrix that stays in L2; then dense 4096^3 fp16 cupy.matmul for scale.

    python -m bench.l2_bandwidth     # Hopper (sm_90a), about 10 s
"""
import argparse

import cupy as cp
import numpy as np

from bench.timing import CupyClock
from cubsparse._cuda.compile import COMPILE_OPTIONS, source
from cubsparse._cuda.device import tensor_map

SRC = source("dsd_wgmma_tma") + r'''
extern "C" __global__ void ldcg_read(const int4* __restrict__ p, long long n, int reps,
                                     int* out) {
  int acc = 0;
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (int r = 0; r < reps; ++r)
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += 4 * stride) {
      int4 v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) v[u] = __ldcg(p + (i + u * stride) % n);
#pragma unroll
      for (int u = 0; u < 4; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
  if (acc == 0x12345678) out[0] = acc;
}
template <int BOXC, int BOXR, int STAGES>
__global__ void tma_read(const __grid_constant__ TmaMap map, int ncb, int nrb, int ntiles,
                         int* out) {
  extern __shared__ unsigned char smem_raw[];
  const unsigned base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  __shared__ unsigned long long full[STAGES];
  constexpr int BYTES = BOXC * 2 * BOXR;
  if (threadIdx.x != 0) return;
  for (int s = 0; s < STAGES; ++s) mbar_init(&full[s], 1);
  fence_mbarrier_init();
  unsigned it = 0;
  for (int t = blockIdx.x; t < ntiles; t += gridDim.x, ++it) {
    const int s = it % STAGES;
    if (it >= STAGES) mbar_wait(&full[s], ((it / STAGES) - 1) & 1);
    mbar_arrive_expect_tx(&full[s], BYTES);
    // column boxes scattered (as the list entries of different output blocks are)
    const int cb = (int)((t * 2654435761u) % ncb), rb = (t / ncb) % nrb;
    tma_load_2d(base + s * BYTES, &map, cb * BOXC, rb * BOXR, &full[s]);
  }
  for (int s = 0; s < STAGES; ++s) {
    const unsigned uses = it / STAGES + (s < (int)(it % STAGES) ? 1 : 0);
    if (uses) mbar_wait(&full[s], (uses - 1) & 1);
  }
}
'''
# TMA boxes: (columns, rows, stages)
CFGS = [(32, 128, 8), (32, 256, 6), (64, 128, 6), (64, 256, 4), (64, 64, 8)]


def median_ms(f, reps=20):
    """Median of ``reps`` CUDA-event timings of ``f`` after one warm-up call."""
    clock = CupyClock()
    f()
    clock.sync()
    return float(np.median([clock.elapsed(f) for _ in range(reps)]))


def main():
    argparse.ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    names = [f"tma_read<{c},{r},{s}>" for c, r, s in CFGS]
    mod = cp.RawModule(code=SRC, options=(*COMPILE_OPTIONS, "-arch=sm_90a"),
                       name_expressions=names)
    props = cp.cuda.runtime.getDeviceProperties(0)
    nsm = props["multiProcessorCount"]
    print("GPU:", props["name"].decode(), "SMs", nsm)
    out = cp.zeros(4, cp.int32)  # written only if the XOR of all loads hits a magic value

    buf = cp.random.randint(0, 2**31, size=(32 << 20) // 4, dtype=cp.int32)
    k, reps = mod.get_function("ldcg_read"), 20
    for per_sm, thr in [(4, 256), (8, 256), (2, 1024)]:
        grid = (nsm * per_sm,)
        ms = median_ms(lambda grid=grid, thr=thr: k(
            grid, (thr,), (buf, np.int64(buf.size // 4), np.int32(reps), out)))
        print(f"ldcg  {per_sm} x {thr} threads/SM: {buf.nbytes * reps / ms / 1e9:7.2f} TB/s")

    x = cp.random.standard_normal((4096, 4096), dtype=cp.float32).astype(cp.float16)
    for (c, r, s), name in zip(CFGS, names, strict=True):
        f = mod.get_function(name)
        smem = s * c * 2 * r + 1024
        f.max_dynamic_shared_size_bytes = smem
        tmap = tensor_map(x.data.ptr, 4096, 4096, 8192, c, r).scalar()
        ncb, nrb = 4096 // c, 4096 // r
        ntiles = ncb * nrb * 8
        per_sm = max(1, min(8, 220 * 1024 // (smem + 2048)))
        for cps in sorted({1, 2, per_sm}):
            args = (tmap, np.int32(ncb), np.int32(nrb), np.int32(ntiles), out)
            ms = median_ms(lambda f=f, grid=(nsm * cps,), args=args, smem=smem: f(
                grid, (32,), args, shared_mem=smem))
            print(f"tma box {r:3d} rows x {2 * c:3d} B, {s} stages, {cps} CTAs/SM: "
                  f"{ntiles * c * 2 * r / ms / 1e9:7.2f} TB/s")

    y = cp.random.standard_normal((4096, 4096), dtype=cp.float32).astype(cp.float16)
    ms = median_ms(lambda: cp.matmul(x, y), 50)
    print(f"dense 4096^3 fp16 cupy.matmul {ms:.4f} ms = {2 * 4096**3 / ms / 1e9:.0f} TFLOP/s")


if __name__ == "__main__":
    main()
