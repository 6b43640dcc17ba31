"""Command line of ``python -m bench``."""

from __future__ import annotations

import argparse
import contextlib
import sys

from . import cases as C
from . import timing

EPILOG = """\
examples:
  python -m bench --eager                         # per-call figures of small-N calls
  python -m bench --quick                         # the default preset
  python -m bench --full --max-seconds 540        # the sweep, stopping cleanly in time
  python -m bench --full --n 32,128 --dtypes fp16 --resume bench/results/latest_X.json
  python -m bench --backend cpu --quick --out /tmp/benchcpu   # smoke test, NumPy timings
  python -m bench --full --list                   # print the cases, run nothing
  python -m bench --summary bench/results/latest_X.json   # print the eager table again
  python -m bench.report bench/results/latest_X.json > docs/performance.md
"""


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmark cubsparse's X @ W, dY @ W.T and sampled X.T @ dY against "
                    "dense cuBLAS and the block-sparse peers, in one process.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_const", dest="preset", const="quick",
                      help="the quick subset (default): " + C.QUICK_CUDA.note)
    size.add_argument("--full", action="store_const", dest="preset", const="full",
                      help="the full sweep: " + C.FULL_CUDA.note)
    size.add_argument("--eager", action="store_const", dest="preset", const="eager",
                      help="per-call figures of calls from a Python loop: "
                           + C.EAGER_CUDA.note)
    ap.set_defaults(preset="quick")
    sel = ap.add_argument_group("case selection (each replaces that axis of the preset)")
    sel.add_argument("--ops", help="xw, dywt, sdd (aliases fwd, dx, dw); default: all three")
    sel.add_argument("--dtypes", help="fp16, bf16, fp32, fp64")
    sel.add_argument("--blocksizes", help="8, 16, 32, 64, 128")
    sel.add_argument("--densities", help="fractions of non-zero blocks, e.g. 0.05,0.25")
    sel.add_argument("--n", help="rows of X (batch x sequence), e.g. 32,4096")
    sel.add_argument("--ck", help="C = K, the square weight's size, e.g. 4096,12288")
    sel.add_argument("--layouts", help="random, ba (Barabasi-Albert), ws (Watts-Strogatz, "
                     "rewiring 0.1), banded")
    sel.add_argument("--contenders",
                     help="time only these contenders (cubsparse always), e.g. "
                          "dense_cupy,torch_bsr; the others are recorded as not selected. "
                          "Default: the preset's (--eager: "
                          + ",".join(C.EAGER_CONTENDERS) + "), else all")
    run = ap.add_argument_group("run")
    run.add_argument("--backend", choices=("cuda", "cpu"), default="cuda",
                     help="cuda (default) or cpu: tiny sizes, NumPy timings, a smoke test")
    run.add_argument("--max-seconds", type=float, default=None,
                     help="start no new case after this many seconds; the rest are recorded "
                          "as skipped")
    run.add_argument("--out", default="bench/results", help="output directory")
    run.add_argument("--repeats", type=int, default=30,
                     help="most timed samples per measurement (adaptive, at least 5)")
    run.add_argument("--target-ms", type=float, default=None,
                     help="device time one measurement aims for (default 50; --eager: 20)")
    run.add_argument("--graphs", choices=("auto", "always", "never"), default="auto",
                     help="CUDA-graph timing: auto (default) times a graph of every call "
                          "that can be captured and reports it as ms for calls under 1 ms; "
                          "always reports it for every call; never: no capture")
    run.add_argument("--host-burst", type=int, default=32,
                     help="most calls issued per burst when timing host us per call "
                          "(default 32: short enough that the launch queue never fills)")
    run.add_argument("--slow-ms", type=float, default=1000.0,
                     help="a call slower than this is timed from a single pass")
    run.add_argument("--resume", metavar="JSON",
                     help="carry over the rows of an earlier results file and skip its cases")
    run.add_argument("--sparse-only", action="store_true",
                     help="cubsparse's sparse kernels only: its dense path off "
                          "(cubsparse.set_options(dense_fallback=False)), to time the kernels "
                          "themselves")
    run.add_argument("--dense-path-only", action="store_true",
                     help="cubsparse's dense path wherever it can run (the plans forced "
                          "dense), to time it against the sparse kernels and calibrate the "
                          "cost model that chooses between them")
    run.add_argument("--dense-once", action="store_true",
                     help="time dense cuBLAS once per shape and dtype (faster sweeps). By "
                          "default each case times it on its own densified W: on Hopper a "
                          "mostly-zero W draws less power and multiplies faster")
    run.add_argument("--no-plots", action="store_true", help="do not draw PNGs")
    run.add_argument("--no-ceilings", action="store_true",
                     help="skip the copy-bandwidth and dense-peak measurements "
                          "(no bandwidth efficiency then)")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument("--list", action="store_true", help="print the cases and exit")
    run.add_argument("--summary", nargs="+", metavar="JSON",
                     help="print the eager table of earlier results files and exit")
    return ap


def selected_cases(args) -> list[C.Case]:
    """The cases the arguments select (preset, then axis replacements)."""
    try:
        return C.build_cases(
            C.preset(args.preset, args.backend),
            n=C.parse_list(args.n, int), ck=C.parse_list(args.ck, int),
            b=C.parse_list(args.blocksizes, int, allowed=C.BLOCK_SIZES),
            density=C.parse_list(args.densities, float),
            dtype=C.parse_list(args.dtypes, str, C.DTYPE_ALIASES, allowed=C.DTYPES),
            layout=C.parse_list(args.layouts, str, C.LAYOUT_ALIASES, allowed=C.LAYOUTS))
    except ValueError as exc:
        raise SystemExit(f"python -m bench: {exc}") from None


def list_cases(case_list: list[C.Case], ops: list[str]) -> str:
    lines = [f"{'case':44} {'regime':8} {'GiB/set':>8}  note"]
    for c in case_list:
        lines.append(f"{c.key:44} {c.regime:8} {c.footprint_bytes() / 2**30:8.2f}  "
                     f"{c.skip_reason() or ''}")
    runnable = sum(1 for c in case_list if not c.skip_reason())
    lines.append(f"{len(case_list)} cases ({runnable} runnable) x {len(ops)} ops "
                 f"({', '.join(ops)})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run ``python -m bench`` with ``argv`` (default: ``sys.argv[1:]``); the exit status.

    0 when the run completed or stopped at its time budget, 1 when it stopped otherwise
    (a fatal device error).
    """
    args = build_parser().parse_args(argv)
    if args.summary:
        from .runner import eager_table, load_results

        print(eager_table([r for path in args.summary for r in load_results(path)["rows"]]))
        return 0
    try:
        ops = C.parse_list(args.ops, str, C.OP_ALIASES, allowed=tuple(C.OPS)) or list(C.OPS)
    except ValueError as exc:
        raise SystemExit(f"python -m bench: --ops: {exc}") from None
    case_list = selected_cases(args)
    base = C.preset(args.preset, args.backend)
    from .runner import RunConfig, run, select_contenders

    names = (C.parse_list(args.contenders, str) if args.contenders is not None
             else base.contenders)
    try:
        contenders = select_contenders(names, args.backend)
    except ValueError as exc:
        raise SystemExit(f"python -m bench: --contenders: {exc}") from None
    if args.sparse_only:
        import cubsparse

        cubsparse.set_options(dense_fallback=False)
    if args.list:
        print(list_cases(case_list, ops))
        if contenders is not None:
            print("contenders: " + ", ".join(contenders))
        return 0
    if args.host_burst < 1:
        raise SystemExit("python -m bench: --host-burst must be at least 1")
    target_ms = args.target_ms or base.target_ms or timing.Policy.target_ms
    policy = timing.Policy(repeats=max(args.repeats, 1), min_samples=min(5, max(args.repeats, 1)),
                           target_ms=target_ms, graphs=args.graphs, slow_ms=args.slow_ms,
                           host_burst=args.host_burst)
    cfg = RunConfig(backend=args.backend, preset=args.preset, cases=case_list, ops=tuple(ops),
                    out=args.out, max_seconds=args.max_seconds, policy=policy,
                    plots=not args.no_plots, resume=args.resume, ceilings=not args.no_ceilings,
                    progress=not args.no_progress, contenders=contenders,
                    dense_once=args.dense_once)
    if args.sparse_only and args.dense_path_only:
        raise SystemExit("python -m bench: --sparse-only and --dense-path-only exclude each other")
    with contextlib.ExitStack() as stack:
        if args.dense_path_only:
            from cubsparse._cuda import plans

            stack.enter_context(plans.override(dense=True))
        results = run(cfg)
    status = results["meta"].get("status", "")
    return 0 if status == "complete" or status.startswith("stopped: time budget") else 1


if __name__ == "__main__":
    sys.exit(main())
