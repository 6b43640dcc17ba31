"""Same-process A/B of the tall TMA tile's epilogue (``rows_n_store_tma``): the tree's
against the one in another copy of dsd_wgmma_tma.cu, e.g. the lane-pair trades before the
stmatrix form:

    git show 3966113:cubsparse/kernels/dsd_wgmma_tma.cu > old_dsd_wgmma_tma.cu
    PYTHONPATH=.:tools python3 tools/epilogue_ab.py old_dsd_wgmma_tma.cu

Eager ms back to back, old and new alternating twice; each case's two results must be the
same bit for bit (the epilogue only moves values). The kernel source is patched in this
process only.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

from dsd_time_split import case_operands, use_source

from cubsparse._cuda import compile as cc

START = "// rows_n_store through shared memory and the TMA engine"
END = "// The panels' epilogue through shared memory and the TMA engine"
CASES = (("random", 128, 0.05, "fwd,bwd"), ("random", 128, 0.1, "fwd,bwd"),
         ("random", 128, 0.25, "fwd"), ("random", 128, 0.5, "fwd"), ("ba", 128, 0.1, "fwd"),
         ("random", 64, 0.1, "fwd"), ("random", 64, 0.25, "fwd"), ("ws", 64, 0.1, "fwd"),
         ("banded", 64, 0.25, "fwd"))
_SOURCE = cc.source.__wrapped__


def with_epilogue(old_fn: str | None):
    """``compile.source`` with ``old_fn`` as the tall tile's epilogue (None: the tree's)."""

    def source(family: str) -> str:
        text = _SOURCE(family)
        if family == "dsd_wgmma_tma" and old_fn is not None:
            text = text[:text.index(START)] + old_fn + text[text.index(END):]
        return text

    return source


def main():
    import cupy as cp
    from gpu_probe import bench

    import cubsparse as cs
    from cubsparse._cuda import plans

    old_text = Path(sys.argv[1]).read_text()
    old_fn = old_text[old_text.index(START):old_text.index(END)]
    print(cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
          "- eager ms back to back, N = C = K = 8192, float16")
    print(f"{'layout':>7} {'b':>4} {'d':>6} {'op':>4} {'old':>8} {'new':>8} {'old':>8} "
          f"{'new':>8}  new/old  dense")
    for lay_name, b, d, ops in CASES:
        for _, w, x, dense in case_operands(f"{b}:{d}", 8192, lay_name):
            for op in ops.split(","):
                call = functools.partial(cs.matmul, x, w if op == "fwd" else w.T)
                res, ms = {}, []
                for which in ("old", "new", "old", "new"):
                    use_source(with_epilogue(old_fn if which == "old" else None))
                    with plans.override(dense=False):
                        res.setdefault(which, call())
                        ms.append(bench(call, reps=10))
                same = bool((res["old"] == res["new"]).all())
                speed = (ms[0] + ms[2]) / (ms[1] + ms[3])
                print(f"{lay_name:>7} {b:4d} {w.density:6.3f} {op:>4} "
                      + " ".join(f"{t:8.4f}" for t in ms)
                      + f"  {speed:6.3f}x  {dense:.3f}  "
                      + ("bitwise same" if same else "DIFFERENT"), flush=True)
                if not same:
                    raise SystemExit("the two epilogues' results differ")
    use_source(_SOURCE)


if __name__ == "__main__":
    main()
