"""Figures of a results dict, drawn with matplotlib's Agg backend (no display needed).

Two figures per shape group (N, C, K, layout):

``speedup``     speedup over dense vs density, one line per block size, one panel per
                (op, dtype), log-log, with the ideal ``1/d`` and break-even lines -- the
                layout of the OpenAI block-sparse paper's figure.
``efficiency``  bars of cubsparse's efficiency and each peer's, per (block size, density),
                one panel per (op, dtype); for N <= 128 the bars are bandwidth efficiency,
                the metric that regime is judged by.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from .cases import DTYPE_SHORT, OPS

PEER_COLORS = {"cubsparse": "#1f77b4", "torch_bsr": "#ff7f0e", "cusparse_csr": "#2ca02c",
               "scipy_bsr": "#9467bd", "stk": "#8c564b"}


class PlottingUnavailable(RuntimeError):
    """matplotlib is not installed (plots are optional)."""


def _plt():
    try:
        import matplotlib
    except ImportError as exc:
        raise PlottingUnavailable("matplotlib is not installed (pip install matplotlib)") from exc
    matplotlib.use("Agg")  # files only: works on headless machines
    import matplotlib.pyplot as plt

    return plt


def _groups(rows):
    g = defaultdict(list)
    for r in rows:
        g[(r["n"], r["c"], r["k"], r["layout"])].append(r)
    return g


def _panels(rows):
    keys = sorted({(r["op"], r["dtype"]) for r in rows},
                  key=lambda k: (list(OPS).index(k[0]), k[1]))
    ops = [o for o in OPS if any(k[0] == o for k in keys)]
    dtypes = sorted({k[1] for k in keys})
    return ops, dtypes


def _title(n, c, k, layout):
    lay = "Barabasi-Albert" if layout == "ba" else "uniform random"
    return f"N={n}, C={c}, K={k}, {lay} layout"


def speedup_figure(plt, rows, key):
    """Speedup over dense vs density for one shape group; returns the figure or None."""
    ops, dtypes = _panels(rows)
    fig, axes = plt.subplots(len(ops), len(dtypes), figsize=(4.2 * len(dtypes), 3.4 * len(ops)),
                             squeeze=False, sharex=True)
    drew = False
    for i, op in enumerate(ops):
        for j, dt in enumerate(dtypes):
            ax = axes[i][j]
            rs = [r for r in rows if r["op"] == op and r["dtype"] == dt
                  and r.get("speedup") is not None]
            by_b = defaultdict(list)
            for r in rs:
                by_b[r["b"]].append((r["density"], r["speedup"]))
            for b in sorted(by_b):
                pts = sorted(by_b[b])
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=f"b={b}", ms=4)
                drew = True
            ds = sorted({r["density"] for r in rows})
            if ds:
                ax.plot(ds, [1 / d for d in ds], "k--", lw=0.8, label="ideal 1/d")
            ax.axhline(1.0, color="grey", lw=0.8)
            ax.set_xscale("log")
            ax.set_yscale("log")
            if ds:  # label the measured densities, not the log axis' decades
                ax.set_xticks(ds)
                ax.set_xticklabels([f"{d:.2g}" for d in ds], fontsize=7)
                ax.xaxis.set_minor_formatter(plt.NullFormatter())
            ax.set_title(f"{OPS[op]}, {DTYPE_SHORT.get(dt, dt)}", fontsize=10)
            if i == len(ops) - 1:
                ax.set_xlabel("density")
            if j == 0:
                ax.set_ylabel("speedup over dense")
            ax.grid(True, which="both", alpha=0.3)
            if by_b:
                ax.legend(fontsize=7)
    fig.suptitle("cubsparse speedup over the dense product: " + _title(*key), fontsize=11)
    fig.tight_layout()
    if not drew:
        plt.close(fig)
        return None
    return fig


def efficiency_figure(plt, rows, key):
    """Grouped bars: cubsparse vs each peer, per (b, d), one panel per (op, dtype)."""
    ops, dtypes = _panels(rows)
    memory = key[0] <= 128
    metric = "bw_efficiency" if memory else "efficiency"
    fig, axes = plt.subplots(len(ops), len(dtypes), figsize=(5.0 * len(dtypes), 3.4 * len(ops)),
                             squeeze=False)
    drew = False
    for i, op in enumerate(ops):
        for j, dt in enumerate(dtypes):
            ax = axes[i][j]
            rs = sorted((r for r in rows if r["op"] == op and r["dtype"] == dt),
                        key=lambda r: (r["b"], r["density"]))
            peers = {n for r in rs for n, p in (r.get("peers") or {}).items()
                     if p.get(metric) is not None}
            names = ["cubsparse", *sorted(peers)]
            width = 0.8 / max(len(names), 1)
            for s, name in enumerate(names):
                vals = []
                for r in rs:
                    v = r.get(metric) if name == "cubsparse" else ((r.get("peers") or {}).get(name)
                                                                   or {}).get(metric)
                    vals.append(v if v is not None else 0.0)
                if any(vals):
                    drew = True
                xs = [x + (s - (len(names) - 1) / 2) * width for x in range(len(rs))]
                ax.bar(xs, vals, width=width, label=name, color=PEER_COLORS.get(name))
            ax.set_xticks(range(len(rs)))
            ax.set_xticklabels([f"b{r['b']}\nd{r['density_target']:g}" for r in rs], fontsize=7)
            ax.axhline(1.0, color="grey", lw=0.8)
            if memory:  # the project's target: bandwidth efficiency >= 0.70 (b >= 32, d >= 0.1)
                ax.axhline(0.70, color="red", lw=0.8, ls="--")
            ax.set_title(f"{OPS[op]}, {DTYPE_SHORT.get(dt, dt)}", fontsize=10)
            if j == 0:
                ax.set_ylabel("bandwidth efficiency" if memory else "efficiency vs dense")
            ax.legend(fontsize=7)
            ax.grid(True, axis="y", alpha=0.3)
    what = "bandwidth efficiency (min bytes / time / copy BW)" if memory else \
        "efficiency (dense time x d / sparse time)"
    fig.suptitle(f"{what}: {_title(*key)}", fontsize=11)
    fig.tight_layout()
    if not drew:
        plt.close(fig)
        return None
    return fig


def make_plots(results: dict, out_dir: str, prefix: str = "plot") -> list[str]:
    """Draw both figures for every shape group into ``out_dir``; return the PNG paths."""
    plt = _plt()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for key, rows in sorted(_groups(results.get("rows", [])).items()):
        n, c, k, layout = key
        tag = f"N{n}_C{c}_K{k}_{layout}"
        for kind, fn in (("speedup", speedup_figure), ("efficiency", efficiency_figure)):
            fig = fn(plt, rows, key)
            if fig is None:
                continue
            p = out / f"{prefix}_{kind}_{tag}.png"
            fig.savefig(p, dpi=110)
            plt.close(fig)
            paths.append(str(p))
    return paths
