"""Same-process A/B of the small-N stream kernel's tiles (``dsd_stream``), against the tile
kernels and dense cuBLAS: each variant's eager time per call (queued calls, as
``gpu_probe.bench`` times them) and its CUDA-graph replay (``gpu_probe.graph_ms``), checked
against float32 dense math, and its host µs per call (``gpu_probe.host_overhead``). A
variant is ``auto`` (the plan as it stands, sparse kernels only), ``path`` (the plan as a
user gets it: the dense path allowed where the model picks it), ``dense`` (the dense path
forced), ``off`` (the stream kernel forbidden: the tile kernels), ``second`` (partial
products added by a second launch, not by the group's CTAs), ``run=K`` (runs of K chunks
a CTA) or a set of tiles, ``rows:chunk/group/entries/stages/max_run`` joined by ``+``,
e.g. ``16:16/32/48/3/64+32:8/16/32/3/64`` (the b = ``--b`` entries of ``tiles.DSD_STREAM``
replaced for that variant, and the stream kernel forced). "bw" is the op's bytes over its
graph time over the device's copy rate (measured as the bench measures its ceiling).

    PYTHONPATH=.:tools python3 tools/stream_ab.py --b 32 --n 1,32 --ck 8192,12288 \\
        --d 0.1,0.5 auto off 16:16/8/8/3/64+32:8/8/8/3/64
"""

from __future__ import annotations

import argparse

import cupy as cp
import numpy as np
from gpu_probe import bench, copy_rate, floats, graph_ms, host_overhead, ints

import cubsparse as cs
from cubsparse._cuda import configs, plans, tiles


def _apply(variant: str, b: int) -> dict:
    """The plan overrides of ``variant``; tiles are set in place (restored by the caller)."""
    if variant in ("auto", "path", "dense"):
        return {}
    if variant == "off":
        return {"stream": False}
    if variant == "second":
        return {"stream_share": False}
    if variant.startswith("run="):
        return {"stream_run": int(variant[4:]), "stream": True}
    for spec in variant.split("+"):
        rows, tile = spec.split(":")
        configs.set_tiles(stream={(b, int(rows)): tuple(int(v) for v in tile.split("/"))})
    return {"stream": True}  # the tile runs even where the plan's rule would not take it


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variants", nargs="+",
                    help="auto, path, dense, off, second, run=K or tiles (see above)")
    ap.add_argument("--b", type=int, default=8)
    ap.add_argument("--n", type=ints, default=[1, 32])
    ap.add_argument("--ck", type=ints, default=[8192, 12288])
    ap.add_argument("--d", type=floats, default=[0.1, 0.5])
    ap.add_argument("--dtype", default="float16")
    args = ap.parse_args(argv)
    b, copy = args.b, copy_rate()
    name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"# {name}, copy rate {copy:.2f} TB/s, b = {b}, {args.dtype}", flush=True)
    rng = np.random.default_rng(0)
    for ck in args.ck:
        for d in args.d:
            lay = cs.layouts.random(ck // b, ck // b, d, seed=1)
            w = cs.BlockSparseMatrix.from_layout(lay, b, dtype=args.dtype, seed=2,
                                                 backend="cuda")
            wd = w.toarray()
            for n in args.n:
                x = cp.asarray(rng.standard_normal((n, ck))).astype(args.dtype)
                for prod, op, dop in (("X @ W", w, wd), ("dY @ W.T", w.T, wd.T)):
                    y = cp.empty((n, ck), args.dtype)
                    dense = bench(lambda x=x, dop=dop, y=y: cp.matmul(x, dop, out=y)) * 1e3
                    nbytes = w.data.nbytes + x.nbytes + y.nbytes
                    ref = cp.matmul(x.astype(cp.float32), dop.astype(cp.float32))
                    for variant in args.variants:
                        saved = dict(tiles.DSD_STREAM)
                        try:
                            path = {"path": {}, "dense": {"dense": True, "stream": False}}.get(
                                variant, {"dense": False})
                            with plans.override(**path, **_apply(variant, b)):
                                plan = str(cs.matmul_plan(x, op))
                                f = lambda x=x, op=op, y=y: cs.matmul(x, op, out=y)  # noqa: E731
                                f()
                                err = float(cp.linalg.norm(y.astype(cp.float32) - ref)
                                            / cp.linalg.norm(ref))
                                eager, graph = bench(f) * 1e3, graph_ms(f) * 1e3
                                host = host_overhead(f)
                        finally:  # (a variant's new keys go too)
                            tiles.DSD_STREAM.clear()
                            tiles.DSD_STREAM.update(saved)
                            configs.set_tiles()
                        kernel = plan.split(": ", 1)[1].split("<", 1)[0].split(" (")[0]
                        if "dsd_stream" in plan:
                            kernel += ("+coop" if "cooperative" in plan else
                                       "+2nd" if "second launch" in plan else "")
                        print(f"{prod:8s} N={n:3d} C=K={ck:5d} d={d:4.2f} {variant:36s} "
                              f"{kernel:17s} host {host:6.2f} eager {eager:7.2f} "
                              f"graph {graph:7.2f} "
                              f"dense {dense:7.2f} bw {nbytes / graph / 1e6 / copy:5.2f} "
                              f"err {err:.1e}", flush=True)
                        if not err < 2e-2:
                            raise AssertionError(f"{variant}: relative error {err:.3g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
