"""Calibrate the dense fallback: where the sweep measured cubsparse slower than cuBLAS.

The library may compute a product through a dense path (scatter W's blocks into a dense
matrix, then one cuBLAS call) where it predicts its own block-sparse kernel to be slower.
This tool turns the committed benchmark sweep into the table that prediction reads,
``cubsparse/_cuda/dense_model.json``.

The model
---------
For every row of the sweep, ``ratio = cubsparse_ms / dense_ms``: cubsparse's time over
the dense cuBLAS time of the same product on the densified matrix, both as the report
uses them (the CUDA-graph replay time where the call was captured, else the eager time;
``dense_ms`` is the faster of CuPy and torch). Rows are grouped into cells keyed
``"<op>|<dtype class>|<b>"``, with

* op: ``matmul`` (``X @ W``, bench op ``xw``), ``matmul_t`` (``dY @ W.T``, ``dywt``),
  ``sampled`` (``X.T @ dY`` on W's blocks, ``sdd``);
* dtype class: ``half`` (float16 and bfloat16 pooled: the same tensor-core kernels; in
  the sweep their ratios agree to within 7% in 85% of the matching cases) or ``float32``;
* b: the block size, 8 to 128;

and each cell holds a grid over N (rows of X) by the target density d. A grid value is
the median of the ratio over C = K (and over float16/bfloat16 for ``half``), computed
per layout, then the maximum over the layouts (uniform random and Barabasi-Albert). The
median keeps one noisy shape from deciding a cell; the maximum over layouts is the
cautious side, since the library does not know which kind of layout it is given, and a
skewed layout (a few dense block rows) is where the sparse kernel loses its balance.
A value above 1 means the dense path was faster in that regime; ``null`` means the sweep
has no row there. C and K are not axes of the model, and the ratio does move with them:
over the sweep's C = K = 4096, 8192, 12288 it spreads by a median factor of 1.3 (up to 7
at N = 32 and d <= 0.05, where cubsparse takes microseconds); the median is the middle
shape, so near a ratio of 1 the smallest and largest shapes can fall on either side.

Results are read as ``python -m bench.report`` reads them (``bench.runner.load_results``,
gzip or not, and ``bench.report.supersede``: a file later on the command line replaces
earlier rows of the same case and op). The default files are those, in that order, that
produced ``docs/performance.md`` (its "Regenerate" line).

Usage, from the repository root::

    python tools/calibrate_dense.py                # the committed sweep -> the JSON
    python tools/calibrate_dense.py a.json b.json.gz --out /tmp/model.json
    python tools/calibrate_dense.py --check        # where the model says dense wins
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "cubsparse" / "_cuda" / "dense_model.json"

# The order of docs/performance.md's "Regenerate" command: later sweeps re-measured
# cases of earlier ones and must come after them to win. Within a folder the shards do
# not overlap in what they keep (checked: either file order gives the same rows).
DEFAULT_GLOBS = tuple(f"docs/results/h200-sweep-{s}/*.json.gz" for s in range(1, 7))

OP_NAMES = {"xw": "matmul", "dywt": "matmul_t", "sdd": "sampled"}
DTYPE_CLASS = {"float16": "half", "bfloat16": "half", "float32": "float32"}
CLASSES = ("half", "float32")
BLOCKSIZES = (8, 16, 32, 64, 128)

DESCRIPTION = (
    "ratio = cubsparse time / dense cuBLAS time on the densified matrix, from the sweep "
    "of python -m bench --full (CUDA-graph time where captured, dense = faster of CuPy "
    "and torch), per '<op>|<dtype class>|<b>' as a grid over n (rows of X) by density: "
    "the max over layouts (random, Barabasi-Albert) of the median over C = K and, for "
    "half, over float16 and bfloat16, so that a value above 1 means dense was faster."
)


def default_sources() -> list[str]:
    """The result files of docs/performance.md, in its order, relative to the repository.

    Returns
    -------
    list of str
        POSIX paths relative to the repository root; sorted within each sweep folder.
    """
    return [p.relative_to(REPO).as_posix() for g in DEFAULT_GLOBS for p in sorted(REPO.glob(g))]


def _display_path(path: str) -> str:
    """``path`` relative to the repository if it lies inside it, for a stable 'sources'."""
    p = Path(path)
    full = (p if p.is_absolute() else Path.cwd() / p).resolve()
    try:
        return full.relative_to(REPO).as_posix()
    except ValueError:
        return p.as_posix()


def load_rows(paths: Iterable[str]) -> tuple[list[dict[str, Any]], list[str], int]:
    """Read result files and merge them as the report does.

    Parameters
    ----------
    paths : iterable of str
        Result files (``.json`` or ``.json.gz``), earliest first; relative paths are
        taken from the current directory, then from the repository root.

    Returns
    -------
    rows : list of dict
        The rows kept after superseding (one per case and op).
    gpus : list of str
        The distinct GPU names of the files' ``meta`` records, in order of appearance.
    dropped : int
        How many rows later files replaced.
    """
    # bench is a source folder, not an installed package: reach it from the repository
    # root however this script is started, and import it only here, when data is read.
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from bench.report import supersede
    from bench.runner import load_results

    results = []
    for p in paths:
        path = Path(p)
        if not path.exists() and (REPO / path).exists():
            path = REPO / path
        results.append(load_results(path))
    merged, dropped = supersede(results)
    gpus = list(dict.fromkeys(r.get("meta", {}).get("gpu") for r in results))
    rows = [row for res in merged for row in res.get("rows", [])]
    return rows, [g for g in gpus if g], dropped


def _usable(row: dict[str, Any]) -> bool:
    """Whether a row has both times and a cubsparse result within tolerance.

    A wrong result's time says nothing about the kernel the library would run, and a
    ratio needs both times.
    """
    return (row.get("op") in OP_NAMES and row.get("dtype") in DTYPE_CLASS
            and row.get("cubsparse_status") == "ok" and row.get("cubsparse_err_ok") is not False
            and (row.get("cubsparse_ms") or 0) > 0 and (row.get("dense_ms") or 0) > 0)


def _round4(x: float) -> float:
    """``x`` rounded to 4 significant digits."""
    return float(f"{x:.4g}")


def build_model(rows: list[dict[str, Any]], sources: list[str], gpu: str) -> dict[str, Any]:
    """The dense-fallback model of the sweep's rows (see the module docstring).

    Parameters
    ----------
    rows : list of dict
        Merged benchmark rows (``bench`` schema: ``op``, ``dtype``, ``n``, ``c``, ``b``,
        ``density_target``, ``layout``, ``cubsparse_ms``, ``dense_ms``, ...).
    sources : list of str
        The files the rows came from, recorded in the model.
    gpu : str
        The GPU the rows were measured on.

    Returns
    -------
    dict
        ``description``, ``gpu``, ``sources``, ``n``, ``density`` and ``ratios``; every
        ``ratios`` value is a list per n of a list per density (None where no row).
    """
    usable = [r for r in rows if _usable(r)]
    # Group by the cell and grid point, then by layout: the median runs within a layout
    # (over C = K and the half types) and the maximum across layouts.
    groups: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in usable:
        key = (OP_NAMES[r["op"]], DTYPE_CLASS[r["dtype"]], r["b"], r["n"],
               r["density_target"])
        groups[key][r["layout"]].append(r["cubsparse_ms"] / r["dense_ms"])
    ns = sorted({r["n"] for r in usable})
    ds = sorted({r["density_target"] for r in usable})

    def value(by_layout: dict[str, list[float]] | None) -> float | None:
        if not by_layout:
            return None
        return _round4(max(statistics.median(v) for v in by_layout.values()))

    ratios = {f"{op}|{cls}|{b}": [[value(groups.get((op, cls, b, n, d))) for d in ds]
                                  for n in ns]
              for op in OP_NAMES.values() for cls in CLASSES for b in BLOCKSIZES}
    return {"description": DESCRIPTION, "gpu": gpu, "sources": list(sources), "n": ns,
            "density": ds, "ratios": ratios}


# Figures of the model that the sweep does not give: the device's peak rates (to estimate
# a dense product's time) and the dense path's fixed cost per call (from
# tools/dense_choice.py), set by hand and kept when the ratios are rebuilt.
KEPT = ("device", "dense_path_fixed_us", "dense_path_fixed_us_source")
PACKAGED = Path(__file__).resolve().parent.parent / "cubsparse" / "_cuda" / "dense_model.json"


def format_model(model: dict[str, Any]) -> str:
    """The model as JSON text: one key per line, each grid on its key's line.

    ``json.dumps(indent=...)`` would put every number on a line of its own (over 900
    lines); this keeps a grid readable as the table it is.
    """
    def dump(v: Any) -> str:
        return json.dumps(v, ensure_ascii=False)

    lines = ["{"]
    for key in ("description", "gpu"):
        lines.append(f"  {dump(key)}: {dump(model[key])},")
    lines.append('  "sources": [')
    lines += [f"    {dump(s)}," for s in model["sources"][:-1]]
    lines += [f"    {dump(s)}" for s in model["sources"][-1:]]
    lines.append("  ],")
    for key in ("n", "density"):
        lines.append(f"  {dump(key)}: {dump(model[key])},")
    lines.append('  "ratios": {')
    items = list(model["ratios"].items())
    for i, (key, grid) in enumerate(items):
        lines.append(f"    {dump(key)}: {dump(grid)}{',' if i < len(items) - 1 else ''}")
    extra = [k for k in model if k not in ("description", "gpu", "sources", "n", "density",
                                             "ratios")]
    lines.append("  }" + ("," if extra else ""))
    for i, key in enumerate(extra):  # hand-set figures (KEPT), one line each
        lines.append(f"  {dump(key)}: {dump(model[key])}{',' if i < len(extra) - 1 else ''}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def validate(model: dict[str, Any]) -> None:
    """Raise ``ValueError`` if ``model`` does not have the documented shape."""
    need = ("description", "gpu", "sources", "n", "density", "ratios", "device")
    missing = [k for k in need if k not in model]
    if missing:
        raise ValueError(f"model lacks {missing}")
    nn, nd = len(model["n"]), len(model["density"])
    for key, grid in model["ratios"].items():
        op, cls, b = key.split("|")
        if op not in OP_NAMES.values() or cls not in CLASSES or int(b) not in BLOCKSIZES:
            raise ValueError(f"unexpected ratios key {key!r}")
        if len(grid) != nn or any(len(line) != nd for line in grid):
            raise ValueError(f"{key}: grid is not {nn} x {nd}")
        for line in grid:
            for v in line:
                if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v)
                                          and v > 0):
                    raise ValueError(f"{key}: bad ratio {v!r}")


def slower_cells(model: dict[str, Any], bound: float = 1.0) -> list[tuple]:
    """The grid points where sparse was slower than dense.

    Returns
    -------
    list of tuple
        ``(op, dtype class, b, n, density, ratio)`` for every ratio above ``bound``, in
        the model's key order, then by n and density.
    """
    out = []
    for key, grid in model["ratios"].items():
        op, cls, b = key.split("|")
        for n, line in zip(model["n"], grid, strict=True):
            for d, v in zip(model["density"], line, strict=True):
                if v is not None and v > bound:
                    out.append((op, cls, int(b), n, d, v))
    return out


def check_report(model: dict[str, Any]) -> str:
    """The ``--check`` text: per (n, density), how many cells have a ratio above 1.

    Each entry is ``slower/with data`` out of the ``(op, dtype class, b)`` cells; the list
    of those cells follows.
    """
    validate(model)
    ns, ds = model["n"], model["density"]
    slower, present = defaultdict(int), defaultdict(int)
    for grid in model["ratios"].values():
        for n, line in zip(ns, grid, strict=True):
            for d, v in zip(ds, line, strict=True):
                if v is not None:
                    present[n, d] += 1
                    slower[n, d] += v > 1.0
    width = 8
    out = [f"dense_model: {model['gpu']}, {len(model['ratios'])} (op, dtype class, b) cells, "
           f"{len(model['sources'])} source file(s)",
           "cells with ratio > 1 (cubsparse slower than dense cuBLAS) / cells with data",
           "",
           f"{'n / d':>7}" + "".join(f"{d:>{width}g}" for d in ds) + f"{'all':>{width}}"]
    for n in ns:
        cells = [f"{slower[n, d]}/{present[n, d]}" for d in ds]
        total = f"{sum(slower[n, d] for d in ds)}/{sum(present[n, d] for d in ds)}"
        out.append(f"{n:>7}" + "".join(f"{c:>{width}}" for c in cells) + f"{total:>{width}}")
    cells = slower_cells(model)
    out += ["", f"{len(cells)} grid point(s) with ratio > 1:"]
    out += [f"  {op:<9} {cls:<8} b={b:<4} n={n:<6} d={d:<5g} ratio={v:.4g}"
            for op, cls, b, n, d, v in cells]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Command line: write the model from result files, or ``--check`` a written one."""
    ap = argparse.ArgumentParser(prog="python tools/calibrate_dense.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="*",
                    help="result files, earliest first (default: those of docs/performance.md)")
    ap.add_argument("--out", default=str(DEFAULT_OUT),
                    help="model file to write, or to read with --check (default: %(default)s)")
    ap.add_argument("--check", action="store_true",
                    help="read the model file and print where sparse was slower than dense")
    args = ap.parse_args(argv)

    if args.check:
        with open(args.out) as f:
            print(check_report(json.load(f)))
        return 0

    paths = args.results or default_sources()
    if not paths:
        ap.error("no result files given and none found under docs/results/")
    rows, gpus, dropped = load_rows(paths)
    # Ratios of different GPUs do not pool into one decision table.
    if len(gpus) != 1:
        ap.error(f"the files must come from one GPU, found {gpus or 'none'}")
    model = build_model(rows, [_display_path(p) for p in paths], gpus[0])
    # Figures set by hand survive a rebuild: from the file being replaced, else from the
    # packaged model.
    source = Path(args.out) if Path(args.out).exists() else PACKAGED
    old = json.loads(source.read_text())
    model.update({k: old[k] for k in KEPT if k in old})
    if old.get("gpu") != model["gpu"]:
        print(f"note: {', '.join(KEPT)} come from {source}, measured for {old.get('gpu')}; "
              f"the ratios are {model['gpu']}'s: check them", file=sys.stderr)
    validate(model)
    text = format_model(model)
    # The text is hand-formatted: make sure it parses back to exactly the model.
    if json.loads(text) != model:
        raise AssertionError("formatted model does not round-trip through json")
    Path(args.out).write_text(text)
    nulls = sum(v is None for g in model["ratios"].values() for line in g for v in line)
    print(f"{args.out}: {len(model['ratios'])} cells x {len(model['n'])} n x "
          f"{len(model['density'])} densities from {len(rows)} rows of {len(paths)} file(s) "
          f"({dropped} superseded), {nulls} null(s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
