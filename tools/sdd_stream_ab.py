"""Same-process A/B of the short-reduction weight gradient (``sdd_stream``) against the plan
without it (``before``: the per-row, tiled or wgmma sdd), the dense path (a cuBLAS product,
then the gather; eager µs, since CuPy refuses cuBLAS in a capture) and the stream kernel on
a grid of a warp per 4 block rows (``s_rows32``); with ``--chunks``, also the stream kernel
with chunks of that many block columns (``c16``, ...: its tile's shared memory, hence its
CTAs an SM), and with ``--warps`` that many warps a CTA (``c16w16``, ...). CUDA-graph µs
per call (``gpu_probe.graph_ms``, the best of three), random layouts, float16, each
checked against float32 dense math. "bw" is (W's blocks + X + dY) bytes over the fastest
stream variant's time over the copy rate (measured as the bench measures its ceiling).

    PYTHONPATH=.:tools python3 tools/sdd_stream_ab.py --b 8,16 --ck 4096,8192
    PYTHONPATH=.:tools python3 tools/sdd_stream_ab.py --b 32 --n 1,16,32 --chunks 8,16,32,64 \\
        --variants stream,before
"""

from __future__ import annotations

import argparse

import cupy as cp
import numpy as np
from gpu_probe import bench, copy_rate, floats, graph_ms, ints

import cubsparse as cs
from cubsparse._cuda import configs, plans, sdd_configs

VARIANTS = ("stream", "s_rows32", "before", "dense")


def _variants(ck: int, b: int, names, chunks, warps) -> list:
    """(name, forced decisions, tile fields to replace or None) per variant."""
    stream = {"sdd_stream": True, "dense": False}
    table = {"stream": stream,
             "s_rows32": {**stream, "sdd_stream_grid": max(1, ck // b // 32)},
             "before": {"sdd_stream": False, "dense": False},
             "dense": {"sdd_stream": False, "dense": True}}
    return ([(v, table[v], None) for v in names]
            + [(f"c{c}" + (f"w{w}" if warps else ""), stream, {"chunk": c, "warps": w or 8})
               for c in chunks for w in (warps or [None])])


def _case(x, dy, w, mask, variants) -> list:
    """(variant, µs, relative error, kernel) per variant."""
    ref = (x.T.astype(cp.float32) @ dy.astype(cp.float32)) * mask
    key = sdd_configs.sdd_stream_key(w.blocksize, x.shape[0])
    tile = sdd_configs.sdd_stream_tile(w.blocksize, x.shape[0])
    rows = []
    for name, forced, fields in variants:
        if fields is not None:
            if tile is None:  # no stream tile for this block size and reduction
                continue
            configs.set_tiles(sdd_stream={key: tile._replace(**fields)})
        try:
            with plans.override(**forced):
                def call(x=x, dy=dy, w=w):
                    return cs.sampled_matmul(x.T, dy, like=w)

                got = call().toarray().astype(cp.float32)
                err = float(cp.linalg.norm(got - ref) / cp.linalg.norm(ref))
                t = (bench(call) if name == "dense"
                     else min(graph_ms(call) for _ in range(3))) * 1e3
                plan = str(cs.sampled_matmul_plan(x.T, dy, like=w)).split(": ", 1)[1]
        finally:
            if fields is not None:
                configs.set_tiles(sdd_stream={key: tile})
        rows.append((name, t, err, plan.split(",")[0][:22]))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--b", type=ints, default=[8, 16])
    ap.add_argument("--ck", type=ints, default=[4096, 8192])
    ap.add_argument("--d", type=floats, default=[0.1, 0.25, 0.5])
    ap.add_argument("--n", type=ints, default=[1, 32, 64, 128])
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help=f"a comma-separated subset of {', '.join(VARIANTS)}")
    ap.add_argument("--chunks", type=ints, default=[],
                    help="also the stream kernel with chunks of these block columns")
    ap.add_argument("--warps", type=ints, default=[],
                    help="with --chunks: each chunk width with these warps a CTA (else 8)")
    args = ap.parse_args(argv)
    names = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(names) - set(VARIANTS))
    if unknown:
        ap.error(f"--variants: unknown {', '.join(unknown)}; expected some of "
                 f"{', '.join(VARIANTS)}")
    copy = copy_rate()
    name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"# {name} copy {copy:.2f} TB/s", flush=True)
    rng = np.random.default_rng(0)
    for b in args.b:
        for ck in args.ck:
            for d in args.d:
                lay = cs.layouts.random(ck // b, ck // b, d, seed=1)
                w = cs.BlockSparseMatrix.from_layout(lay, b, dtype="float16", seed=2,
                                                     backend="cuda")
                mask = cp.asarray(np.kron(lay, np.ones((b, b), bool)))
                for n in args.n:
                    x = cp.asarray(rng.standard_normal((n, ck))).astype(cp.float16)
                    dy = cp.asarray(rng.standard_normal((n, ck))).astype(cp.float16)
                    rows = _case(x, dy, w, mask,
                                 _variants(ck, b, names, args.chunks, args.warps))
                    if not rows:
                        continue
                    times = " ".join(f"{v} {t:7.1f}" for v, t, _, _ in rows)
                    nbytes = w.data.nbytes + x.nbytes + dy.nbytes
                    stream = [t for v, t, _, k in rows if k.startswith("sdd_stream")]
                    bw = f"{nbytes / min(stream) / 1e6 / copy:4.2f}" if stream else "   -"
                    err = max(r[2] for r in rows)
                    kernels = " | ".join(dict.fromkeys(k for _, _, _, k in rows))
                    print(f"b={b:2d} CK={ck} d={d:4.2f} N={n:3d} {times}  bw {bw} err "
                          f"{err:.1e} | {kernels}", flush=True)
                    if not err < 2e-2:
                        raise AssertionError(f"relative error {err:.3g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
