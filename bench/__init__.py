"""cubsparse benchmark suite.

Run it with ``python -m bench`` (``--help`` lists the options; ``docs/benchmarks.md``
explains what is measured) and render a report with
``python -m bench.report results.json > docs/performance.md``.

Modules: ``cases`` (sweeps, layouts), ``data`` (inputs and references), ``peers`` (what is
timed), ``timing`` (events, graphs, medians), ``device`` (environment and ceilings),
``runner`` (the loop and the files), ``report`` and ``plots`` (output). CuPy and torch are
imported only when a CUDA run needs them, so this package imports anywhere.
"""

from __future__ import annotations

import tempfile
from typing import Any

__all__ = ["run", "smoke"]


def run(argv: list[str] | None = None) -> int:
    """Same as ``python -m bench`` with ``argv`` as its arguments."""
    from .cli import main

    return main(argv)


def smoke(out_dir: str | None = None, backend: str = "cpu", plots: bool = False) -> dict[str, Any]:
    """Run two tiny cases end to end and check the results hang together.

    Meant for the test suite (CPU backend: no GPU, no torch needed)::

        def test_bench_smoke(tmp_path):
            pytest.importorskip("scipy")
            res = bench.smoke(str(tmp_path))
            assert res["rows"]

    Checks that every op produced a row, that cubsparse ran and matched the float64
    reference within tolerance, that the dense baseline ran, that every peer has a time
    or a recorded reason, that cubsparse and every contender that ran have the per-call
    figures (host us, eager, sync: positive and finite; graph: positive where there is
    one, and none on the CPU backend), and that the JSON, CSV and Markdown report were
    written.

    Returns
    -------
    dict
        The results (``meta``, ``rows``, ``skipped``, ``files``).
    """
    from pathlib import Path

    from . import cases, report, timing
    from .runner import TIMINGS as timing_fields
    from .runner import RunConfig
    from .runner import run as _run

    out_dir = out_dir or tempfile.mkdtemp(prefix="bench-smoke-")
    # "auto" graphs: on the CPU backend nothing is captured, and the smoke test checks
    # exactly that (graph_ms is None there).
    policy = timing.Policy(repeats=3, min_samples=2, target_ms=5.0)
    cfg = RunConfig(backend=backend, preset="smoke",
                    cases=cases.build_cases(cases.preset("smoke", backend)), out=out_dir,
                    policy=policy, plots=plots, progress=False, quiet=True)
    res = _run(cfg)
    rows = res["rows"]
    problems = []
    if res["skipped"]:
        problems.append(f"skipped: {res['skipped']}")
    if len(rows) != len(cfg.cases) * len(cases.OPS):
        problems.append(f"expected {len(cfg.cases) * len(cases.OPS)} rows, got {len(rows)}")
    for r in rows:
        tag = f"{r['case']} {r['op']}"
        if r["cubsparse_status"] != "ok":
            problems.append(f"{tag}: cubsparse {r['cubsparse_status']}")
        elif not r["cubsparse_err_ok"]:
            problems.append(f"{tag}: error {r['cubsparse_err']:.2e} over tolerance")
        if r["dense_ms"] is None or r["efficiency"] is None:
            problems.append(f"{tag}: no dense time or efficiency")
        for name, p in r["peers"].items():
            if p["status"] != "ok" and not p["status"]:
                problems.append(f"{tag}: peer {name} has neither a time nor a reason")
        figures = {"cubsparse": {k: r.get(f"cubsparse_{k}") for k in timing_fields}}
        figures.update((n, p) for group in ("dense", "peers")
                       for n, p in r[group].items() if p["status"] == "ok")
        for name, f in figures.items():
            problems += [f"{tag}: {name} {msg}" for msg in _figure_problems(f, backend)]
    for key in ("json", "csv", "latest"):
        if not Path(res["files"][key]).is_file():
            problems.append(f"missing {key} file")
    md = report.render(res, plots_dir=None)
    if "## Targets" not in md:
        problems.append("report has no targets table")
    if problems:
        raise AssertionError("bench.smoke: " + "; ".join(problems))
    return res


def _figure_problems(f: dict[str, Any], backend: str) -> list[str]:
    """What is wrong with one contender's per-call figures (an empty list: nothing)."""
    import math

    out = []
    for key in ("host_us", "eager_ms", "sync_ms"):
        v = f.get(key)
        if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            out.append(f"{key} is {v!r}, not a positive number")
    g = f.get("graph_ms")
    if backend == "cpu" and g is not None:
        out.append(f"graph_ms is {g!r} on the CPU backend, where nothing is captured")
    elif g is not None and not g > 0:
        out.append(f"graph_ms is {g!r}, not a positive number")
    return out
