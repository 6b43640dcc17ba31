"""How well the dense-path decision does on one GPU: from a ``--sparse-only`` and a
``--dense-path-only`` run of the same cases, the op-cases where the plan's choice (the
cost model in ``cubsparse/_cuda/dense_model.json``) is more than 5 % slower than the better
of the two, and those where even the better one is slower than plain dense cuBLAS.

    python -m bench --full --sparse-only ... --out A
    python -m bench --full --dense-path-only ... --out B
    python tools/dense_choice.py A/latest_<gpu>.json B/latest_<gpu>.json

All times are eager (``--graphs never``): the dense path only runs eagerly.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.runner import load_results
from cubsparse._cuda import dense_model

_OPS = {"xw": "matmul", "dywt": "matmul_t", "sdd": "sampled"}


def _key(r):
    return r["op"], r["dtype"], r["n"], r["c"], r["b"], r["density_target"], r["layout"]


def _dense_ms(r):
    return min(v["eager_ms"] for v in r["dense"].values() if v.get("eager_ms"))


def _model_choice(r) -> str:
    op, dtype, n, c, b = r["op"], r["dtype"], r["n"], r["c"], r["b"]
    ratio = dense_model.ratio(_OPS[op], dtype, b, n, r["density"])
    if ratio is None:
        return "sparse"
    overhead = dense_model.overhead(dtype, c, r["k"], n, r["nnzb"] * b * b)
    return "dense" if ratio > 1 + overhead else "sparse"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sparse_only")
    ap.add_argument("dense_path_only")
    args = ap.parse_args(argv)
    dense_path = {_key(r): r for r in load_results(args.dense_path_only)["rows"]}
    rows = []
    for r in load_results(args.sparse_only)["rows"]:
        q = dense_path.get(_key(r))
        if q is None or not r.get("cubsparse_eager_ms") or not q.get("cubsparse_eager_ms"):
            continue
        rows.append((r, r["cubsparse_eager_ms"], q["cubsparse_eager_ms"],
                     min(_dense_ms(r), _dense_ms(q))))
    gpu = rows[0][0]["gpu"] if rows else "?"
    print(f"{gpu}: {len(rows)} op-cases in both files (eager ms per call)")
    off = [x for x in rows if (x[1] if _model_choice(x[0]) == "sparse" else x[2])
           > 1.05 * min(x[1], x[2])]
    slower = [x for x in rows if (x[1] if _model_choice(x[0]) == "sparse" else x[2]) > x[3]]
    best_slower = [x for x in rows if min(x[1], x[2]) > x[3]]
    print(f"the model's choice: > 5 % slower than the better path in {len(off)}, slower "
          f"than plain dense in {len(slower)}")
    print(f"the better path: slower than plain dense in {len(best_slower)}")
    groups = defaultdict(list)
    for r, s, p, d in rows:
        groups[(r["dtype"], r["n"])].append(min(s, p) / d)
    print("better path / plain dense, by dtype and N: op-cases above 1, median, max")
    for (dtype, n), v in sorted(groups.items()):
        print(f"  {dtype:9s} N = {n:6d}: {sum(x > 1 for x in v):3d} of {len(v):3d}, "
              f"median {statistics.median(v):.2f}, max {max(v):.2f}")
    for r, s, p, _d in off:
        print(f"  off: {r['op']:5s} {r['dtype']:9s} N = {r['n']:5d} b = {r['b']:3d} "
              f"d = {r['density_target']}: sparse {s * 1e3:.1f} us, dense path {p * 1e3:.1f} us, "
              f"model chose {_model_choice(r)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
