"""Where the tall TMA dsd tile's time goes (b = 64 and 128, X's rows as wgmma's N): the same
launch with its stores removed, its MMAs removed, or both, timed as eager calls back to back
beside dense cuBLAS. The kernel source is patched in this process only; the patched
launches' results are wrong by design (this is a probe, not a test).

    PYTHONPATH=.:tools python3 tools/dsd_time_split.py [--layout random] [--cases 128:0.1,64:0.25]

"none" is the kernel as shipped; "store" drops Y's stores (a never-true guard keeps the
accumulators live); "mma" replaces each k16 step's wgmma with one register add, so the
ring still turns at the copies' pace; "store+mma" leaves the copies alone; "loads" drops
the copies (the producer only arrives on each stage's `full` barrier) and leaves the MMAs,
their ring and the stores.
"""

from __future__ import annotations

import argparse
import functools

from cubsparse._cuda import compile as cc

STORE = """        if (EPI > 0 && ytma && slot < 0)
          rows_n_store_tma<Tag, XN, EPI ? EPI : 16>(acc[0], wg, tid, row0, nrows, j * B + wg * 64,
                                                   base + STAGES * STAGE_BYTES + wg * EPI * 128,
                                                   ymap, alpha);
        else
          rows_n_store<Tag, B, XN>(acc[0], wg, tid, row0, nrows, j, slot, y, ldy, alpha, beta,
                                   ws, ws_stride);"""
NO_STORE = """        if (acc[0][0] == 1.2345e-30f)
          rows_n_store<Tag, B, XN>(acc[0], wg, tid, row0, nrows, j, slot, y, ldy, alpha, beta,
                                   ws, ws_stride);"""
MMA = """            Wgmma<Tag, XN, KN ? 1 : 0>::mma(
                acc[0],
                KN ? MnTile<BT, BK>::desc(sW, wg, kk)
                   : wgmma_desc_k<128>(sW + wg * 64 * 128 + kk * 32),
                wgmma_desc_k<128>(sA + kk * 32));"""
NO_MMA = """            acc[0][kk] += 1.0f;"""
EXPECT = """        mbar_arrive_expect_tx(&full[s], STAGE_BYTES);
        const unsigned sA = base + s * STAGE_BYTES, sW = sA + A_BYTES;"""
NO_LOADS = """        mbar_arrive(&full[s]);
        if (kt >= 0) continue;
        const unsigned sA = base + s * STAGE_BYTES, sW = sA + A_BYTES;"""
MODES = ("none", "store", "mma", "store+mma", "loads")
_SOURCE = cc.source.__wrapped__


def patch_parts(family: str, parts):
    """``mode -> compile.source``: ``family``'s source with each ``(name, old, new)`` of
    ``parts`` whose name ``mode`` contains replaced (``old`` must occur once)."""

    def patched(mode: str):
        def source(fam: str) -> str:
            text = _SOURCE(fam)
            if fam == family:
                for part, old, new in parts:
                    if part in mode:
                        if text.count(old) != 1:
                            raise RuntimeError(f"{family}.cu changed: no {part} to patch")
                        text = text.replace(old, new)
            return text

        return source

    return patched


#: ``compile.source`` with the parts a mode names removed from dsd_wgmma_tma.cu
patched_source = patch_parts("dsd_wgmma_tma", (("store", STORE, NO_STORE), ("mma", MMA, NO_MMA),
                                               ("loads", EXPECT, NO_LOADS)))


def use_source(source) -> None:
    """Compile the kernels from here on from ``source(family)`` (new plans, new kernels)."""
    from cubsparse._cuda import configs

    cc.source = functools.cache(source)
    cc._kernel.cache_clear()
    configs.set_tiles()  # clears the plans' caches


def case_operands(cases: str, n: int, layout: str):
    """For each ``b:d`` of ``cases`` (comma-separated): ``(b, W, X, dense ms)``, W a float16
    matrix of that layout on the GPU, X fresh N x N data, dense cuBLAS timed on W densified."""
    import cupy as cp
    from gpu_probe import bench

    import cubsparse as cs
    from bench.cases import Case, make_layout

    for case in cases.split(","):
        b, d = int(case.split(":")[0]), float(case.split(":")[1])
        lay, _ = make_layout(Case(n, n, n, b, d, "float16", layout=layout))
        w = cs.BlockSparseMatrix.from_layout(lay, b, dtype="float16", seed=2, backend="cuda")
        x = cp.random.standard_normal((n, n), dtype=cp.float32).astype("float16")
        wd = w.toarray()
        dense = bench(functools.partial(cp.matmul, x, wd), reps=10)
        del wd
        yield b, w, x, dense


def _weight_gradient(x, w):
    """The weight gradient X.T @ dY on W's blocks (their values), X standing in for dY."""
    import cubsparse as cs

    return cs.sampled_matmul(x.T, x, like=w).data


def probe_parser(doc: str, cases: str, ops: str) -> argparse.ArgumentParser:
    """The probes' common options: --layout, --n, --cases (``b:d`` pairs) and --ops."""
    parser = argparse.ArgumentParser(description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layout", default="random")
    parser.add_argument("--n", type=int, default=8192)
    parser.add_argument("--cases", default=cases, help="b:d pairs")
    parser.add_argument("--ops", default=ops, help="fwd (X @ W), bwd (dY @ W.T) and sdd (the "
                        "weight gradient), comma-separated")
    return parser


def time_variants(args, names, source_of, exact, note: str = "", width: int = 10) -> None:
    """For each case and op of ``args`` (:func:`probe_parser`), eager ms back to back of
    the product compiled from ``source_of(name)`` for each of ``names`` in turn, beside
    dense cuBLAS, one printed row a case. The result of each name for which ``exact(name)``
    holds must equal the first name's bit for bit. The tree's source is restored at the end."""
    import cupy as cp
    from gpu_probe import bench

    import cubsparse as cs
    from cubsparse._cuda import plans

    print(cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "- eager ms back to back,",
          args.layout, "layouts, N = C = K =", args.n, "float16" + note)
    print(f"{'b':>4} {'d':>5} {'op':>4}  " + "  ".join(f"{m:>{width}}" for m in names)
          + "   dense")
    for b, w, x, dense in case_operands(args.cases, args.n, args.layout):
        for op in args.ops.split(","):
            call = {"fwd": functools.partial(cs.matmul, x, w),
                    "bwd": functools.partial(cs.matmul, x, w.T),
                    "sdd": functools.partial(_weight_gradient, x, w)}[op]
            ms, want = [], None
            for name in names:
                use_source(source_of(name))
                with plans.override(dense=False):
                    got = call()
                    if want is None:
                        want = got
                    elif exact(name) and not bool((got == want).all()):
                        raise AssertionError(f"b={b} d={w.density:.3f} {op} {name}: "
                                             "not the first variant's result")
                    ms.append(bench(call, reps=10))
            print(f"{b:4d} {w.density:5.3f} {op:>4}  "
                  + "  ".join(f"{t:{width}.4f}" for t in ms) + f"   {dense:.3f}", flush=True)
    use_source(_SOURCE)


def main():
    args = probe_parser(__doc__, "128:0.05,128:0.1,128:0.25,64:0.1,64:0.25", "fwd,bwd").parse_args()
    # (the patched launches' results are wrong by design: none is compared)
    time_variants(args, MODES, patched_source, lambda mode: False)


if __name__ == "__main__":
    main()
