"""The small-N TMA tiles in stream-K runs (``tiles.WGMMA_DSD_SMALL``) on the device: each
tile variant forced into the table for one (block size, rows) key, against the plan with
the runs off (``streamk=False``: the tile or stream kernels), both products, CUDA-graph
replays (µs, best of two) with the fraction of the copy bandwidth, every result checked
against float32 dense math first. The dense path is off.

    PYTHONPATH=.:tools python3 tools/small_n_ab.py --b 128 --key 32 --n 32 \\
        --variants 1.2.5.2.0.32,1.2.10.1.0.32 --ck 8192,12288 --d 0.1,0.25,0.5
    PYTHONPATH=.:tools python3 tools/small_n_ab.py --ceiling

A variant is ``m_tiles.warpgroups.stages.ctas_per_sm.inflight.rows`` (TMA copies).
``--ceiling`` times a bare read of 13-151 MB and an empty kernel instead: what a kernel
that only streams W reaches under the same timing.
"""

from __future__ import annotations

import argparse
import itertools

import cupy as cp
from ab_decision import gpu_banner
from gpu_probe import OPS, graph_ms, verify

import cubsparse as cs
from bench.cases import Case, ba_m_for_density
from bench.runner import bandwidth_efficiency
from cubsparse._cuda import configs, plans
from cubsparse._cuda.tiles import WGMMA_DSD_SMALL, PersistentTile

_READ = r'''
extern "C" __global__ void readsum(const uint4* __restrict__ p, long long n, unsigned* out) {
  unsigned acc = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const uint4 v = __ldcs(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) out[0] = acc;  // (keeps the loads)
}
extern "C" __global__ void empty(unsigned* out) { if (threadIdx.x == 1024) out[0] = 1; }
'''


def ceiling(bw: float) -> None:
    m = cp.RawModule(code=_READ)
    read, empty = m.get_function("readsum"), m.get_function("empty")
    out = cp.zeros(1, cp.uint32)
    print(f"empty kernel: {graph_ms(lambda: empty((132,), (128,), (out,))) * 1e3:.2f} us")
    for mb in (13.4, 30.2, 75.5, 151):
        n = int(mb * 1e6) // 16
        buf = cp.random.randint(0, 2**31, 4 * n, dtype=cp.int32)
        for grid in (132 * 4, 132 * 8, 132 * 16):
            t = graph_ms(lambda buf=buf, n=n, grid=grid: read((grid,), (512,), (buf, n, out)))
            gbps = 16 * n / t / 1e6
            print(f"read {mb:6.1f} MB, grid {grid:5d}: {t * 1e3:7.2f} us {gbps:7.0f} GB/s "
                  f"({gbps / bw:.2f} of the copy rate)")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ceiling", action="store_true")
    ap.add_argument("--b", type=int, default=128)
    ap.add_argument("--key", type=int, default=32, help="rows of the table's key")
    ap.add_argument("--variants", default="", help="comma-separated; empty: the table's tile")
    ap.add_argument("--n", default="32")
    ap.add_argument("--ck", default="8192,12288")
    ap.add_argument("--d", default="0.1,0.25,0.5")
    ap.add_argument("--layout", choices=("random", "ba"), default="random")
    args = ap.parse_args()
    bw = gpu_banner()
    if args.ceiling:
        ceiling(bw)
        return
    key = (args.b, args.key)
    variants = [tuple(int(v) for v in s.split(".")) for s in args.variants.split(",") if s]
    tiles = [PersistentTile(m, w, s, c, i, True, r) for m, w, s, c, i, r in variants] or [None]
    print("variants:", [str(t) if t else "the table's" for t in tiles], "then the runs off")
    table_tile = WGMMA_DSD_SMALL.get(key)
    for ck, d, n in itertools.product([int(v) for v in args.ck.split(",")],
                                      [float(v) for v in args.d.split(",")],
                                      [int(v) for v in args.n.split(",")]):
        rows = ck // args.b
        lay = (cs.layouts.random(rows, rows, d, seed=1) if args.layout == "random" else
               cs.layouts.barabasi_albert(rows, ba_m_for_density(rows, d), seed=1))
        w = cs.BlockSparseMatrix.from_layout(lay, args.b, dtype="float16", seed=2,
                                             backend="cuda")
        x = cp.random.standard_normal((n, ck), dtype=cp.float32).astype(cp.float16)
        mb = Case(n, ck, ck, args.b, d, "float16").min_bytes(w.nnzb)
        cells = []
        for op in ("fwd", "bwd"):
            for tile, on in [(t, True) for t in tiles] + [(None, False)]:
                if tile is not None:
                    configs.set_tiles(wgmma_small={key: tile})
                with plans.override(dense=False, streamk=on):
                    err = verify(op, w, x, x)
                    if not err < 2e-2:
                        raise AssertionError(f"{op} {tile}: error {err:.3g}")
                    t = min(graph_ms(lambda op=op, w=w, x=x: OPS[op](w, x, x))
                            for _ in range(2)) * 1e3
                cells.append(f"{t:6.1f} {bandwidth_efficiency(mb, t * 1e-3, bw):4.2f}")
            configs.set_tiles(wgmma_small={key: table_tile})  # the table's own again
        print(f"C=K={ck:5d} d={d:4.2f} N={n:3d} {args.layout}: fwd " + " | ".join(
            cells[:len(cells) // 2]) + "  bwd " + " | ".join(cells[len(cells) // 2:]), flush=True)


if __name__ == "__main__":
    main()
