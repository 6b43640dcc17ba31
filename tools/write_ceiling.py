"""The write ceiling of a small-N weight gradient: how fast the GPU writes a buffer of the
size of W's blocks, against the copy rate the bench measures.

At a few rows of X and dY the weight gradient reads little and writes W's blocks, so its
fraction of the copy rate (read + write bytes a second) is bounded by how fast a kernel
can only write. Timed under CUDA-graph replay, as the sweep times the ops:

* ``memset``: the driver's fill (``cudaMemsetAsync``);
* ``st.v4``: a kernel of 16-byte stores, each thread a grid-stride loop over the buffer,
  8 CTAs of 256 threads an SM;
* ``blocks``: each CTA stores whole b x b half blocks (32 KB at b = 128) in turn, as the
  weight gradient's epilogue does, 4 CTAs an SM.

    PYTHONPATH=.:tools python3 tools/write_ceiling.py [MB ...]
"""

from __future__ import annotations

import sys

import cupy as cp
from ab_decision import copy_gbps
from gpu_probe import graph_ms

SRC = r"""
extern "C" __global__ void fill_v4(uint4* p, long long n16) {
  const uint4 v = make_uint4(1u, 2u, 3u, 4u);
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n16;
       i += (long long)gridDim.x * blockDim.x)
    p[i] = v;
}
// Block j (CHUNK 16-byte words) is stored by CTA j % gridDim.x, all threads at once.
extern "C" __global__ void fill_blocks(uint4* p, long long n16, int chunk) {
  const uint4 v = make_uint4(5u, 6u, 7u, 8u);
  const long long blocks = n16 / chunk;
  for (long long j = blockIdx.x; j < blocks; j += gridDim.x)
    for (int i = threadIdx.x; i < chunk; i += blockDim.x) p[j * chunk + i] = v;
}
"""


def main(sizes_mb):
    mod = cp.RawModule(code=SRC)
    fill_v4, fill_blocks = mod.get_function("fill_v4"), mod.get_function("fill_blocks")
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    bw = copy_gbps()
    name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"GPU: {name}, {sms} SMs, copy {bw:.0f} GB/s (read + write)")
    print(f"{'MB':>7} {'memset us':>10} {'frac':>5} {'st.v4 us':>9} {'frac':>5} "
          f"{'blocks us':>10} {'frac':>5}")
    for mb in sizes_mb:
        chunk = 128 * 128 * 2 // 16  # a b = 128 half block in 16-byte words
        n16 = int(mb * 1e6) // 16 // chunk * chunk
        buf = cp.empty(n16 * 16, dtype=cp.uint8)
        nbytes = n16 * 16
        t_set = graph_ms(lambda buf=buf: buf.fill(0))
        t_v4 = graph_ms(lambda buf=buf, n16=n16: fill_v4(
            (sms * 8,), (256,), (buf, cp.int64(n16))))
        head = cp.asnumpy(buf[:32].view(cp.uint32))
        assert head.tolist() == [1, 2, 3, 4] * 2, head  # the kernel wrote what it says
        t_blk = graph_ms(lambda buf=buf, n16=n16, chunk=chunk: fill_blocks(
            (sms * 4,), (256,), (buf, cp.int64(n16), cp.int32(chunk))))
        tail = cp.asnumpy(buf[-16:].view(cp.uint32))
        assert tail.tolist() == [5, 6, 7, 8], tail
        cells = [(t, nbytes / (t * 1e-3) / (bw * 1e9)) for t in (t_set, t_v4, t_blk)]
        print(f"{nbytes / 1e6:7.1f} " + " ".join(f"{t * 1e3:10.2f} {f:5.2f}" for t, f in cells),
              flush=True)


if __name__ == "__main__":
    main([float(s) for s in sys.argv[1:]] or [13.4, 31.8, 77.1, 152.6])
