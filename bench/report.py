"""Render benchmark results: the fixed-width run summary and the Markdown report.

``python -m bench.report results.json [more.json ...] > docs/performance.md``

The report names the GPU and the commit the results were measured at, then has a header
per results file (GPU, commit, driver, library versions, measured ceilings), one table of
the project's performance targets with the worst and median value reached in each
regime, the same per op, the "faster than every peer" tally, correctness flags,
refusals, skipped cases, a detail table per regime, and the plots (regenerated next to
the results).

The commit cited for a file is the one the file records (``meta["commit"]``), else the
one given with ``--commit``, else the last commit that changed the file if git tracks it
(results committed after their run), else ``git rev-parse --short HEAD`` (fresh results
of this checkout).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .cases import DTYPE_SHORT, LAYOUT_SHORT, OPS

HALF = ("float16", "bfloat16")


# -- the project's performance targets ---------------------------------------------------

class Target:
    """One line of the targets table: which rows it covers, which metric, which bound."""

    def __init__(self, regime: str, dtype: str, block: str, metric: str, bound: float,
                 select: Callable[[dict], bool]):
        self.regime, self.dtype, self.block = regime, dtype, block
        self.metric, self.bound, self.select = metric, bound, select


def _compute(r):
    return r.get("regime") == "compute"


TARGETS = [
    Target("compute-bound", "fp16, bf16", "64, 128", "efficiency", 0.90,
           lambda r: _compute(r) and r["dtype"] in HALF and r["b"] in (64, 128)),
    Target("compute-bound", "fp16, bf16", "32", "efficiency", 0.75,
           lambda r: _compute(r) and r["dtype"] in HALF and r["b"] == 32),
    Target("compute-bound", "fp16, bf16", "16", "efficiency", 0.50,
           lambda r: _compute(r) and r["dtype"] in HALF and r["b"] == 16),
    Target("compute-bound", "fp16, bf16", "8", "efficiency", 0.25,
           lambda r: _compute(r) and r["dtype"] in HALF and r["b"] == 8),
    Target("compute-bound", "fp32 (IEEE)", "32-128", "efficiency", 0.90,
           lambda r: _compute(r) and r["dtype"] == "float32" and r["b"] >= 32),
    Target("compute-bound", "fp32, TF32 opted in", "32-128", "efficiency_tf32", 0.75,
           lambda r: _compute(r) and r["dtype"] == "float32" and r["b"] >= 32),
    Target("memory-bound (N <= 128), d >= 0.1", "any", "32-128", "bw_efficiency", 0.70,
           lambda r: r["n"] <= 128 and r["b"] >= 32 and r["density_target"] >= 0.1),
]

METRIC_NAME = {"efficiency": "efficiency", "efficiency_tf32": "efficiency vs cuBLAS TF32",
               "bw_efficiency": "bandwidth efficiency"}


# -- formatting helpers -----------------------------------------------------------------

def _f(v, fmt="{:.3f}", none="-"):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return none
    return fmt.format(v)


def _ms(v):
    if v is None:
        return "-"
    return f"{v:.4f}" if v < 0.1 else (f"{v:.3f}" if v < 10 else f"{v:.1f}")


def _short_case(r: dict) -> str:
    return (f"{OPS_SHORT.get(r['op'], r['op'])} {DTYPE_SHORT.get(r['dtype'], r['dtype'])} "
            f"N={r['n']} C=K={r['c']} b={r['b']} d={r['density_target']:g} {r['layout']}")


OPS_SHORT = {"xw": "X@W", "dywt": "dY@W.T", "sdd": "X.T@dY"}


def _md_table(headers: list[str], rows: Iterable[list[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        lines.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(lines)


# -- the fixed-width run summary --------------------------------------------------------

def summary_table(rows: list[dict]) -> str:
    """One line per row: op, dtype, N, C=K, b, d, layout, ms, eff, bw, best peer ms.

    Kept narrow and fixed-width so that the end of a truncated log still reads.
    A trailing ``!`` marks a result over its error tolerance; ``x`` a cubsparse failure.
    """
    head = (f"{'op':7} {'dtype':5} {'N':>6} {'C=K':>6} {'b':>4} {'d':>5} {'lay':3} "
            f"{'ms':>9} {'eff':>6} {'bw':>5} {'peer_ms':>9} {'peer':10}")
    out = [head, "-" * len(head)]
    for r in rows:
        ms = r.get("cubsparse_ms")
        flag = ""
        if r.get("cubsparse_status") not in ("ok", None):
            flag = " x"
        elif r.get("cubsparse_err_ok") is False:
            flag = " !"
        out.append(
            f"{OPS_SHORT.get(r['op'], r['op']):7} {DTYPE_SHORT.get(r['dtype'], r['dtype']):5} "
            f"{r['n']:>6} {r['c']:>6} {r['b']:>4} {r['density_target']:>5g} "
            f"{LAYOUT_SHORT.get(r['layout'], r['layout'])[:3]:3} "
            f"{_ms(ms):>9} {_f(r.get('efficiency'), '{:.2f}'):>6} "
            f"{_f(r.get('bw_efficiency'), '{:.2f}'):>5} {_ms(r.get('best_peer_ms')):>9} "
            f"{(r.get('best_peer') or '-')[:10]:10}{flag}")
    return "\n".join(out)


def run_footer(results: dict) -> str:
    """What a run prints last: files, status, skips, then the summary table."""
    meta = results.get("meta", {})
    rows = results.get("rows", [])
    lines = []
    files = results.get("files") or {}
    for k in ("json", "csv", "latest"):
        if files.get(k):
            lines.append(f"{k}: {files[k]}")
    for p in files.get("plots", []) or []:
        lines.append(f"plot: {p}")
    cop = (meta.get("ceilings") or {}).get("copy") or {}
    lines.append(f"device: {meta.get('gpu')} | driver {meta.get('driver')} | "
                 f"cuda {meta.get('cuda')}"
                 f" | cupy {meta.get('cupy')} | torch {meta.get('torch')} | copy "
                 f"{_f(cop.get('GBps'), '{:.0f}')} GB/s"
                 + (f" | eager calls: {meta['eager_path']}" if meta.get("eager_path") else ""))
    skipped = results.get("skipped", [])
    reasons = Counter(s["reason"].split(":")[0] for s in skipped)
    lines.append(f"status: {meta.get('status')} | {len(rows)} rows | {len(skipped)} cases skipped"
                 + (" (" + ", ".join(f"{k}: {v}" for k, v in reasons.items()) + ")"
                    if reasons else "")
                 + f" | {_f(meta.get('elapsed_s'), '{:.0f}')} s")
    bad = [r for r in rows if r.get("cubsparse_err_ok") is False]
    if bad:
        lines.append(f"CORRECTNESS: {len(bad)} cubsparse results over tolerance (marked !)")
    lines.append("")
    lines.append(summary_table(rows))
    return "\n".join(lines)


# -- the Markdown report ----------------------------------------------------------------

def _target_stats(rows: list[dict], t: Target) -> dict[str, Any]:
    sel = [r for r in rows if t.select(r)]
    vals = [(r[t.metric], r) for r in sel if r.get(t.metric) is not None]
    out: dict[str, Any] = {"selected": len(sel), "measured": len(vals)}
    if vals:
        worst_v, worst_r = min(vals, key=lambda vr: vr[0])
        out.update(worst=worst_v, worst_case=_short_case(worst_r),
                   median=statistics.median(v for v, _ in vals),
                   passed=sum(v >= t.bound for v, _ in vals))
    return out


def _verdict(st: dict, bound: float) -> str:
    if not st.get("measured"):
        return "no data"
    return "PASS" if st["worst"] >= bound else "FAIL"


def _targets_table(rows: list[dict], by: str | None = None) -> str:
    """One line per target, or per target and op (``by="op"``) or layout
    (``by="layout"``): reuse of X across output blocks depends on the layout."""
    col = {"op": "op", "layout": "layout"}.get(by)
    headers = (["regime", "dtype", "block"] + ([col] if col else [])
               + ["metric", "target", "rows", "worst", "median", "meeting", "verdict"]
               + ([] if col else ["worst case"]))
    if by == "op":
        keys = [(op, OPS[op]) for op in OPS]
    elif by == "layout":
        keys = [(lay, lay) for lay in dict.fromkeys(r["layout"] for r in rows)]
    else:
        keys = [(None, None)]
    body = []
    for t in TARGETS:
        for key, label in keys:
            rs = rows if by is None else [r for r in rows if r[by] == key]
            st = _target_stats(rs, t)
            if by is not None and not st["selected"]:
                continue
            line = [t.regime, t.dtype, t.block] + ([label] if col else []) + [
                METRIC_NAME[t.metric], f">= {t.bound:.2f}",
                f"{st['measured']}/{st['selected']}", _f(st.get("worst")),
                _f(st.get("median")),
                f"{st.get('passed', 0)}/{st['measured']}" if st["measured"] else "-",
                _verdict(st, t.bound)]
            if not col:
                line.append(st.get("worst_case", "-"))
            body.append(line)
    return _md_table(headers, body)


def _peer_tally(rows: list[dict]) -> str:
    rated = [r for r in rows if r.get("beats_all_peers") is not None]
    wins = [r for r in rated if r["beats_all_peers"]]
    out = [f"cubsparse is faster than every peer that ran in **{len(wins)} of {len(rated)}** "
           f"rows ({len(rows) - len(rated)} rows had no peer time or no cubsparse time)."]
    if len(wins) < len(rated):
        losses = sorted((r for r in rated if not r["beats_all_peers"]),
                        key=lambda r: r["cubsparse_ms"] / r["best_peer_ms"], reverse=True)
        out.append("")
        out.append("Largest losses (cubsparse time / best peer time):")
        out.append("")
        out.append(_md_table(["case", "cubsparse ms", "best peer", "peer ms", "ratio"], [
            [_short_case(r), _ms(r["cubsparse_ms"]), r["best_peer"], _ms(r["best_peer_ms"]),
             f"{r['cubsparse_ms'] / r['best_peer_ms']:.2f}"] for r in losses[:15]]))
    return "\n".join(out)


def _dense_tally(rows: list[dict]) -> str:
    """How many rows ran slower than dense cuBLAS: timed apart, and timed in alternating
    rounds (``paired_ratio``, where the run took it), with the worst paired ratios."""
    apart = [r for r in rows if r.get("speedup") is not None]
    slow_apart = [r for r in apart if r["speedup"] < 1]
    paired = [r for r in rows if r.get("paired_ratio") is not None]
    slow = sorted((r for r in paired if r["paired_ratio"] > 1),
                  key=lambda r: r["paired_ratio"], reverse=True)
    out = [f"Timed apart (each product's own measurement), cubsparse is slower than the dense "
           f"product (cuBLAS; NumPy on the CPU backend) in **{len(slow_apart)} of "
           f"{len(apart)}** rows."]
    if paired:
        out.append(f"Timed in alternating rounds with it (`paired_ratio`), in "
                   f"**{len(slow)} of {len(paired)}** rows.")
    # against densifying W on every call, then the dense product (the `densify` peer,
    # eager only: CuPy cannot capture cuBLAS), eager time against eager time
    dens = [(r.get("cubsparse_eager_ms"), (r.get("peers") or {}).get("densify") or {})
            for r in rows]
    dens = [(ms, p["eager_ms"]) for ms, p in dens if ms and p.get("eager_ms")]
    if dens:
        n_slow = sum(ms > p for ms, p in dens)
        out.append(f"Against densifying W on every call, then the dense product (the "
                   f"`densify` peer, eager times), in **{n_slow} of {len(dens)}** rows.")
    if slow:
        out += ["", "Largest paired ratios (cubsparse time / dense time):", "",
                _md_table(["case", "paired ratio", "apart", "plan"], [
                    [_short_case(r), f"{r['paired_ratio']:.3f}",
                     _f(1 / r["speedup"] if r.get("speedup") else None, "{:.3f}"),
                     (r.get("cubsparse_plan") or "-").split(": ", 1)[-1][:60]]
                    for r in slow[:15]])]
    return "\n".join(out)


def _status_tally(rows: list[dict]) -> str:
    tally: dict[str, Counter] = defaultdict(Counter)
    for r in rows:
        tally["cubsparse"][_status_kind(r.get("cubsparse_status"))] += 1
        if r["dtype"] == "float32":
            tally["cubsparse_tf32"][_status_kind(r.get("cubsparse_tf32_status"))] += 1
        for name, p in (r.get("dense") or {}).items():
            tally[name][_status_kind(p.get("status"))] += 1
        for name, p in (r.get("peers") or {}).items():
            tally[name][_status_kind(p.get("status"))] += 1
    body = []
    for name, c in tally.items():
        body.append([name, ", ".join(f"{k}: {v}" for k, v in c.most_common())])
    return _md_table(["contender", "outcomes over rows"], body)


def _status_kind(s: str | None) -> str:
    if s is None:
        return "absent"
    if s == "ok":
        return "ok"
    return s[:90]


def _detail_table(rows: list[dict]) -> str:
    peer_names = sorted({n for r in rows for n in (r.get("peers") or {})})
    headers = (["op", "dtype", "N", "C=K", "b", "d", "layout", "ms", "dense ms", "eff",
                "speedup", "bw eff", "tf32 eff"] + [f"{n} ms (eff)" for n in peer_names]
               + ["paired", "beats peers", "err"])
    body = []
    for r in rows:
        line = [OPS_SHORT[r["op"]], DTYPE_SHORT[r["dtype"]], r["n"], r["c"], r["b"],
                f"{r['density']:.3f}", r["layout"],
                _ms(r.get("cubsparse_ms")) if r.get("cubsparse_status") == "ok"
                else "x", _ms(r.get("dense_ms")), _f(r.get("efficiency"), "{:.2f}"),
                _f(r.get("speedup"), "{:.2f}"), _f(r.get("bw_efficiency"), "{:.2f}"),
                _f(r.get("efficiency_tf32"), "{:.2f}")]
        for n in peer_names:
            p = (r.get("peers") or {}).get(n) or {}
            line.append(f"{_ms(p.get('ms'))} ({_f(p.get('efficiency'), '{:.2f}')})"
                        if p.get("ms") is not None else "-")
        b = r.get("beats_all_peers")
        line += [_f(r.get("paired_ratio"), "{:.3f}"),
                 "-" if b is None else ("yes" if b else "no"),
                 _f(r.get("cubsparse_err"), "{:.1e}") + ("" if r.get("cubsparse_err_ok")
                                                         is not False else " !")]
        body.append(line)
    return _md_table(headers, body)


def _commit_of(res: dict, default: str | None) -> str | None:
    return res.get("meta", {}).get("commit") or default


def _where(results: list[dict], commit: str | None) -> str:
    """The sentence above the tables: "Measured on <GPU> at commit <hash>."."""
    gpus = list(dict.fromkeys(m.get("gpu") for m in (r.get("meta", {}) for r in results)
                              if m.get("gpu")))
    commits = list(dict.fromkeys(c for c in (_commit_of(r, commit) for r in results) if c))
    text = "Measured on " + (" and ".join(gpus) if gpus else "an unrecorded device")
    if len(commits) == 1:
        text += f" at commit {commits[0]}"
    elif 1 < len(commits) <= 4:
        text += " at commits " + ", ".join(commits[:-1]) + f" and {commits[-1]}"
    elif commits:
        ends = [_commit_of(results[i], commit) or "-" for i in (0, -1)]
        text += f" at {len(commits)} commits, {ends[0]} (first file) to {ends[1]} (last)"
    if len(results) > 1 and (len(gpus) > 1 or len(commits) > 1):
        text += "; each file's GPU and commit are in its table below"
    return text + "."


def _header(results: list[dict], commit: str | None = None) -> str:
    out = []
    for res in results:
        m = res.get("meta", {})
        ceil = m.get("ceilings") or {}
        cop = ceil.get("copy") or {}
        dense = ceil.get("dense") or {}
        peaks = ", ".join(
            f"{k} {_f(dense[k].get('tflops'), '{:.3g}')} ({dense[k].get('lib')})"
            for k in ("float16", "bfloat16", "float32", "tf32") if isinstance(dense.get(k), dict))
        out.append(_md_table(["", ""], [
            ["GPU", m.get("gpu")], ["commit", _commit_of(res, commit) or "-"],
            ["driver", m.get("driver")], ["CUDA", m.get("cuda")],
            ["CuPy", m.get("cupy")], ["torch", m.get("torch")], ["triton", m.get("triton")],
            ["cubsparse", m.get("cubsparse")],
            ["NumPy / SciPy", f"{m.get('numpy')} / {m.get('scipy')}"],
            ["run", f"{m.get('timestamp')}, preset {m.get('preset')}, status {m.get('status')}, "
                    f"{_f(m.get('elapsed_s'), '{:.0f}')} s"],
            ["copy bandwidth (read + write)",
             f"{_f(cop.get('GBps'), '{:.0f}')} GB/s ({cop.get('method')})"],
            [f"dense peak {dense.get('size', '')}^3, TFLOP/s", peaks or "-"],
            ["L2", f"{(m.get('l2_bytes') or 0) / 2**20:.0f} MiB"],
            ["eager calls", m.get("eager_path") or "-"],
        ]))
        out.append("")
    return "\n".join(out)


def render(results: list[dict] | dict, plots_dir: str | None = None,
           md_dir: str | None = None, details: str = "auto",
           commit: str | None = None) -> str:
    """The Markdown report of one or more results dicts (rows are merged).

    ``plots_dir``: where to (re)draw the figures; None skips plots. ``md_dir``: the
    directory the Markdown will live in, so image links are relative to it.
    ``details``: "auto" (detail tables when there are at most 400 rows), "yes", "no".
    ``commit``: the commit cited for results whose ``meta`` records none
    (:func:`resolve_commits` fills it in per file).
    """
    if isinstance(results, dict):
        results = [results]
    results, replaced = supersede(results)
    rows = [r for res in results for r in res.get("rows", [])]
    skipped = [s for res in results for s in res.get("skipped", [])]
    again = (f" {replaced} rows of earlier files were measured again in later ones; the "
             "later measurement is the one shown." if replaced else "")
    parts = ["# cubsparse performance", "",
             f"{_where(results, commit)} Generated by `python -m bench.report` from "
             f"{len(results)} result file(s); definitions in `docs/benchmarks.md`, the "
             "project's targets under Targets. Efficiency = dense cuBLAS time x density / "
             "sparse time (same N, C, K, dtype, same process); bandwidth efficiency = "
             f"minimum bytes / time / measured copy bandwidth.{again}", "",
             _header(results, commit)]
    parts += ["## Targets", "", "Worst and median over every measured row of each regime "
              "(all three ops, all densities and layouts). 'rows' counts rows with a value "
              "out of rows in the regime; a row without a value had no cubsparse (or no "
              "TF32) time.", "", _targets_table(rows), "",
              "### Per op", "", _targets_table(rows, by="op"), ""]
    if len({r["layout"] for r in rows}) > 1:
        parts += ["### Per layout", "", _targets_table(rows, by="layout"), ""]
    parts += ["## Faster than every peer", "", _peer_tally(rows), ""]
    parts += ["## Against the dense product", "", _dense_tally(rows), ""]
    bad = [r for r in rows if r.get("cubsparse_err_ok") is False
           or r.get("cubsparse_tf32_err_ok") is False]
    parts += ["## Correctness", ""]
    if bad:
        parts.append(_md_table(["case", "error", "tf32 error", "tolerance"], [
            [_short_case(r), _f(r.get("cubsparse_err"), "{:.2e}"),
             _f(r.get("cubsparse_tf32_err"), "{:.2e}"), _f(r.get("cubsparse_tol"), "{:.0e}")]
            for r in bad]))
    else:
        n_checked = sum(1 for r in rows if r.get("cubsparse_err") is not None)
        parts.append(f"All {n_checked} checked cubsparse results are within tolerance of the "
                     "float64 reference.")
    parts += ["", "## Outcomes per contender", "", _status_tally(rows), ""]
    if skipped:
        reasons = Counter(s["reason"] for s in skipped)
        parts += ["## Skipped cases", "", _md_table(["reason", "cases"],
                                                   [[k, v] for k, v in reasons.most_common()]), ""]
    show = details == "yes" or (details == "auto" and len(rows) <= 400)
    if show:
        for regime, title in (("compute", "Compute-bound (N, C, K >= 2048)"),
                              ("memory", "Memory-bound (N <= 128)"), ("other", "Other shapes")):
            rs = [r for r in rows if r.get("regime") == regime]
            if rs:
                parts += [f"## {title}", "", _detail_table(rs), ""]
    elif rows:
        parts += ["", f"({len(rows)} rows: detail tables omitted; the CSV has every row.)", ""]
    if plots_dir is not None and rows:
        from . import plots

        try:
            merged = {"meta": results[0].get("meta", {}), "rows": rows}
            pngs = plots.make_plots(merged, plots_dir, prefix="perf")
        except plots.PlottingUnavailable as exc:
            parts += ["## Plots", "", f"(not drawn: {exc})", ""]
        else:
            parts += ["## Plots", ""]
            base = Path(md_dir) if md_dir else Path.cwd()
            for p in pngs:
                rel = os.path.relpath(Path(p).resolve(), base.resolve())
                parts += [f"![{Path(p).stem}]({Path(rel).as_posix()})", ""]
    return "\n".join(parts).rstrip() + "\n"


def supersede(results: list[dict]) -> tuple[list[dict], int]:
    """Results with every (case, op) row kept only from the last file that has it (and a
    skipped case only where no file measured it and no later file skipped it), so that a re-run of
    part of a sweep, listed after it, replaces the old rows. Returns (results, number of
    rows dropped); the dicts given are not modified."""
    last_row, last_skip = {}, {}
    for i, res in enumerate(results):
        for r in res.get("rows", []):
            last_row[(r.get("case"), r.get("op"))] = i
        for sk in res.get("skipped", []):
            last_skip[sk.get("case")] = i
    measured = {case for case, _ in last_row}
    out, dropped = [], 0
    for i, res in enumerate(results):
        rows = [r for r in res.get("rows", []) if last_row[(r.get("case"), r.get("op"))] == i]
        dropped += len(res.get("rows", [])) - len(rows)
        skipped = [sk for sk in res.get("skipped", [])
                   if sk.get("case") not in measured and last_skip[sk.get("case")] == i]
        out.append({**res, "rows": rows, "skipped": skipped})
    return out, dropped


def _git(args: list[str], cwd: str | os.PathLike | None = None) -> str | None:
    """``git ARGS`` run in ``cwd``: its stripped output, or None (no git, not a checkout,
    an error or no output)."""
    try:
        p = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                           timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    out = p.stdout.strip()
    return out if p.returncode == 0 and out else None


def head_commit() -> str | None:
    """``git rev-parse --short HEAD`` of the working directory, or None."""
    return _git(["rev-parse", "--short", "HEAD"])


def file_commit(path: str | os.PathLike) -> str | None:
    """The short hash of the last commit that changed ``path``'s content (a move or rename
    does not count: the results are as old as their content); None if git does not track
    it."""
    p = Path(path).resolve()
    return _git(["log", "-1", "--follow", "--diff-filter=AM", "--format=%h", "--", p.name],
                cwd=p.parent)


def resolve_commits(results: list[dict], paths: list[str], commit: str | None = None) -> None:
    """Record in each results dict's ``meta["commit"]`` the commit to cite: the one the
    file records, else ``commit``, else the last commit that changed the file, else HEAD."""
    head = None
    for res, path in zip(results, paths, strict=True):
        meta = res.setdefault("meta", {})
        if meta.get("commit"):
            continue
        found = commit or file_commit(path)
        if found is None:
            head = head or head_commit()
            found = head
        if found:
            meta["commit"] = found


def borrow_copy_bandwidth(results: list[dict]) -> int:
    """Give rows of a run made with --no-ceilings the copy bandwidth another run measured on
    the same GPU, so that their bandwidth efficiency can be computed; each borrowing run's
    meta records where its figure came from. Returns the number of rows filled in."""
    from .runner import bandwidth_efficiency

    measured = {}
    for res in results:
        copy = (res.get("meta", {}).get("ceilings") or {}).get("copy") or {}
        if copy.get("GBps"):
            measured.setdefault(res["meta"].get("gpu"),
                                (copy["GBps"], res["meta"].get("timestamp")))
    filled = 0
    for res in results:
        meta = res.get("meta", {})
        got = measured.get(meta.get("gpu"))
        if got is None:
            continue
        for r in res.get("rows", []):
            if (r.get("copy_GBps") is None and r.get("regime") == "memory"
                    and r.get("min_bytes") and r.get("cubsparse_ms")):
                r["copy_GBps"] = got[0]
                r["bw_efficiency"] = bandwidth_efficiency(r["min_bytes"], r["cubsparse_ms"], got[0])
                meta["copy_bandwidth_from"] = f"run of {got[1]}"
                filled += 1
    return filled


_OPS = {"xw": "X @ W", "dywt": "dY @ W.T", "sdd": "X.T @ dY"}


def _us(ms):
    return "-" if ms is None else f"{ms * 1e3:.1f}"


def eager_table(rows: list[dict]) -> str:
    """Markdown: per case and op, cubsparse's eager figures (host µs per call, eager µs per
    call back to back, synchronized latency, CUDA-graph replay, eager / graph) beside dense
    torch's (on the densified matrix) and the plan that ran."""
    out = []
    for r in rows:
        dense = r.get("dense") or {}
        dt = dense.get("dense_torch") or {}
        plan = (r.get("cubsparse_plan") or "").split(": ", 1)[-1]
        plan = plan.split("<", 1)[0] if "<" in plan.split(" ", 1)[0] else plan.split(" ", 1)[0]
        ratio = r.get("cubsparse_eager_over_graph")
        out.append([_OPS.get(r["op"], r["op"]), r["dtype"], r["n"], r["c"], r["b"],
                    f"{r['density_target']:g}", f"{r['cubsparse_host_us']:.1f}",
                    _us(r.get("cubsparse_eager_ms")), _us(r.get("cubsparse_sync_ms")),
                    _us(r.get("cubsparse_graph_ms")), "-" if ratio is None else f"{ratio:.2f}",
                    "-" if dt.get("host_us") is None else f"{dt['host_us']:.1f}",
                    _us(dt.get("eager_ms")), f"`{plan}`" if plan else "-"])
    return _md_table(["op", "dtype", "N", "C = K", "b", "d", "host µs", "eager µs", "sync µs",
                      "graph µs", "eager / graph", "torch host µs", "torch eager µs",
                      "kernel"], out)


def small_n_table(rows: list[dict]) -> str:
    """Markdown: the small-N grid, a row per (op, b, N, C = K) and a column per density (a
    dtype column where the rows hold several). A cell is cubsparse's eager µs per call /
    its CUDA-graph µs / the faster dense peer's eager µs on the pre-densified W, then the
    fraction of the copy rate in brackets; ``*`` marks plans other than the small-N stream
    kernel (``dsd_stream``)."""
    densities = sorted({r["density_target"] for r in rows})
    dtypes = sorted({r["dtype"] for r in rows})
    grid: dict[tuple, dict] = {}
    for r in rows:
        order = list(_OPS).index(r["op"]) if r["op"] in _OPS else len(_OPS)
        key = (order, r["op"], r["dtype"], r["b"], r["n"], r["c"])
        grid.setdefault(key, {})[r["density_target"]] = _small_n_cell(r)
    out = []
    for (_, op, dtype, b, n, c), cells in sorted(grid.items()):
        out.append([f"`{_OPS.get(op, op)}`", *([dtype] if len(dtypes) > 1 else []), b, n, c,
                    *(cells.get(d, "-") for d in densities)])
    return _md_table(["op", *(["dtype"] if len(dtypes) > 1 else []), "b", "N", "C = K",
                      *(f"d = {d:g}" for d in densities)], out)


def _small_n_cell(r: dict) -> str:
    peers = [p["eager_ms"] for p in (r.get("dense") or {}).values() if p.get("eager_ms")]
    graph = r.get("cubsparse_graph_ms")
    cell = (f"{_us(r.get('cubsparse_eager_ms'))} / {_us(graph)} / "
            f"{_us(min(peers) if peers else None)}")
    if graph and r.get("min_bytes") and r.get("copy_GBps"):
        cell += f" ({r['min_bytes'] / r['copy_GBps'] / 1e6 / graph:.2f})"
    return cell + ("" if "dsd_stream" in (r.get("cubsparse_plan") or "") else "*")


#: The kernels issue's milestones at N = 8192: the median efficiency over d = 0.05-0.5 of
#: `X @ W` and `dY @ W.T`, and of the weight gradient, by block size.
MILESTONES = {128: (0.90, 0.85), 64: (0.75, 0.75), 32: (0.50, 0.45), 16: (0.25, 0.25),
              8: (0.12, 0.12)}
MILESTONE_N = 8192  #: N = C = K of the milestones' cases
MILESTONE_DENSITIES = (0.05, 0.5)  #: the densities the medians run over
_LAYOUT_NAMES = {"random": "random", "ba": "Barabási-Albert", "ws": "Watts-Strogatz",
                 "banded": "banded"}


def efficiency_alone(r: dict) -> float | None:
    """Efficiency against dense cuBLAS timed on its own: dense eager ms x density / cubsparse
    eager ms, each product measured for seconds, one after the other."""
    dense, ms = r.get("dense_ms"), r.get("cubsparse_eager_ms")
    return dense * r["density"] / ms if dense and ms else None


def efficiency_paired(r: dict) -> float | None:
    """Efficiency against dense cuBLAS timed in alternating rounds with cubsparse
    (``paired_ratio``): density / (cubsparse time / dense time), both products seen in the
    same state of the GPU's clocks."""
    ratio = r.get("paired_ratio")
    return r["density"] / ratio if ratio else None


def milestones_table(rows: list[dict], measure=efficiency_alone) -> str:
    """Markdown: the kernels issue's milestone table. A row per block size and op, a column
    per layout; a cell is the median over the densities of ``measure`` (a row's efficiency,
    or None), a figure per half-precision dtype (float16 / bfloat16), in bold where every
    dtype meets the block size's milestone (:data:`MILESTONES`) as printed, to two places;
    "-" where no row has it. Only the milestones' cases count: N = C = K = 8192, d = 0.05
    to 0.5, cubsparse's result correct."""
    rows = [r for r in rows if r.get("dtype") in HALF and r.get("b") in MILESTONES
            and r.get("n") == r.get("c") == r.get("k") == MILESTONE_N
            and MILESTONE_DENSITIES[0] <= r.get("density_target", 0) <= MILESTONE_DENSITIES[1]
            and r.get("cubsparse_status") == "ok" and r.get("cubsparse_err_ok") is not False]
    layouts = [lay for lay in _LAYOUT_NAMES if any(r["layout"] == lay for r in rows)]
    dtypes = [dt for dt in HALF if any(r["dtype"] == dt for r in rows)]
    values: dict[tuple, list[float]] = {}
    for r in rows:
        v = measure(r)
        if v is not None:
            values.setdefault((r["b"], r["op"], r["layout"], r["dtype"]), []).append(v)
    out = []
    for b in sorted({r["b"] for r in rows}, reverse=True):
        for op in [op for op in _OPS if any(r["b"] == b and r["op"] == op for r in rows)]:
            goal = MILESTONES[b][op == "sdd"]
            cells = []
            for lay in layouts:
                meds = [statistics.median(values[k]) if (k := (b, op, lay, dt)) in values
                        else None for dt in dtypes]
                text = " / ".join("-" if m is None else f"{m:.2f}" for m in meds)
                met = all(m is not None and round(m, 2) >= goal for m in meds)  # as shown
                cells.append(f"**{text}**" if met else text)
            label = "weight gradient" if op == "sdd" else f"`{_OPS[op]}`"
            out.append([b, label, f"{goal:.2f}", *cells])
    return _md_table(["b", "op", "milestone", *(_LAYOUT_NAMES[lay] for lay in layouts)], out)


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.report results.json [...] > docs/performance.md``."""
    ap = argparse.ArgumentParser(prog="python -m bench.report", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", help="results JSON file(s) written by python -m bench")
    ap.add_argument("--plots-dir", default=None,
                    help="where to draw the figures (default: <md-dir>/img, so that the "
                         "report and its images can be committed together)")
    ap.add_argument("--no-plots", action="store_true", help="leave the figures out")
    ap.add_argument("--md-dir", default=None,
                    help="directory the Markdown is written to, for relative image links "
                         "(default: ./docs if it exists, else .)")
    ap.add_argument("--details", choices=("auto", "yes", "no"), default="auto",
                    help="per-row tables (auto: at most 400 rows)")
    ap.add_argument("--summary", action="store_true",
                    help="print the fixed-width run summary instead of Markdown")
    ap.add_argument("--eager", action="store_true",
                    help="print the Markdown table of eager figures (host µs per call, eager, "
                         "synchronized and graph µs) instead of the report")
    ap.add_argument("--small-n", action="store_true",
                    help="print the Markdown grid of small-N figures (eager / graph / dense "
                         "eager µs and the copy-rate fraction, by op, b, N, C = K and "
                         "density) instead of the report")
    ap.add_argument("--milestones", action="store_true",
                    help="print the kernels issue's milestone tables (median efficiency over "
                         "the densities, by block size, op and layout, float16 / bfloat16): "
                         "against dense timed on its own, then in alternating rounds; a "
                         "case in several files counts from the last one")
    ap.add_argument("--commit", default=None,
                    help="commit the results were measured at, cited for files that record "
                         "none (default: per file, the last commit that changed it if git "
                         "tracks it, else git rev-parse --short HEAD)")
    args = ap.parse_args(argv)
    from .runner import load_results

    results = [load_results(p) for p in args.results]
    if not args.summary:
        resolve_commits(results, args.results, args.commit)
    borrow_copy_bandwidth(results)
    if args.summary:
        print(summary_table([r for res in results for r in res.get("rows", [])]))
        return 0
    if args.eager:
        print(eager_table([r for res in results for r in res.get("rows", [])]))
        return 0
    if args.small_n:
        print(small_n_table([r for res in results for r in res.get("rows", [])]))
        return 0
    if args.milestones:  # a case measured again in a later file takes that file's rows
        rows = [r for res in supersede(results)[0] for r in res.get("rows", [])]
        print("Against dense cuBLAS timed on its own (dense ms x d / eager ms):\n")
        print(milestones_table(rows, efficiency_alone))
        print("\nAgainst dense cuBLAS timed in alternating rounds (d / paired ratio):\n")
        print(milestones_table(rows, efficiency_paired))
        return 0
    md_dir = args.md_dir or ("docs" if Path("docs").is_dir() else ".")
    plots_dir = None if args.no_plots else (args.plots_dir or str(Path(md_dir) / "img"))
    sys.stdout.write(render(results, plots_dir=plots_dir, md_dir=md_dir, details=args.details))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
