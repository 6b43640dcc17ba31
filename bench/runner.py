"""The benchmark loop: ceilings, cases, contenders, rows, and the files they go to."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import datetime as _dt
import json
import math
import os
import sys
import time
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from . import cases as _cases
from . import device, peers, timing
from .cases import Case
from .data import TOLERANCE, CaseData, rel_error

#: 2: rows and contender records gained host_us, sync_ms, graph_ms (also where graph_ms is
#: not the reported time), eager_over_graph and the cubsparse plan. Every field of schema 1
#: is kept with its meaning, so readers of either schema read both.
SCHEMA = 2

#: The per-call figures of every contender, in the order the eager summary shows them.
TIMINGS = ("host_us", "eager_ms", "sync_ms", "graph_ms")

#: Substrings of errors after which the CUDA context is unusable: stop the run, keep rows.
_FATAL = ("illegal memory access", "IllegalAddress", "ILLEGAL_ADDRESS",
          "unspecified launch failure", "LAUNCH_FAILED", "misaligned address", "cudaErrorAssert",
          "device-side assert")


class FatalDeviceError(RuntimeError):
    """A kernel broke the CUDA context; later measurements would all fail."""


@dataclasses.dataclass
class RunConfig:
    """Everything a run needs; built by the command line or by :func:`bench.smoke`."""

    backend: str = "cuda"
    preset: str = "quick"
    cases: list[Case] | None = None       #: None: the preset's cases
    ops: tuple[str, ...] = tuple(_cases.OPS)
    out: str = "bench/results"
    max_seconds: float | None = None
    policy: timing.Policy = dataclasses.field(default_factory=timing.Policy)
    plots: bool = True
    resume: str | None = None
    ceilings: bool = True
    progress: bool = True
    quiet: bool = False
    contenders: tuple[str, ...] | None = None  #: None: every contender of the backend
    #: Time dense cuBLAS once per shape and dtype and reuse it for every case of that shape
    #: (faster sweeps). Off by default: on Hopper a product's speed depends on its operands'
    #: values (a mostly-zero densified W draws less power and runs faster), so each case's
    #: dense time is taken on its own densified W.
    dense_once: bool = False


# -- one contender ----------------------------------------------------------------------


def bandwidth_efficiency(min_bytes: float, ms: float, copy_gbps: float) -> float:
    """Fraction of the measured copy bandwidth that moving ``min_bytes`` in ``ms`` reaches."""
    return min_bytes / (ms * 1e-3) / (copy_gbps * 1e9)

def _check_fatal(exc: BaseException) -> None:
    text = f"{type(exc).__name__}: {exc}"
    if any(s in text for s in _FATAL):
        raise FatalDeviceError(timing.short_error(exc, 300)) from exc


def _refusal(ct: peers.Contender, exc: BaseException) -> str:
    who = {"peer": "peer", "dense": "dense", "dense_tf32": "dense"}.get(ct.role, "cubsparse")
    return f"{who} refused: {timing.short_error(exc)}"


def run_contender(ct: peers.Contender, data: CaseData, op: str, ref,
                  policy: timing.Policy) -> dict[str, Any]:
    """Prepare, check once against ``ref``, then time one contender on one op.

    Warnings raised meanwhile (torch's "BSR is beta", "non-optimal triton kernel
    parameters") are kept in the result rather than printed: they describe the peer, and
    the log's tail is kept for the summary table. ``wall_s`` is the host time it all took.
    """
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = _run_contender(ct, data, op, ref, policy)
    msgs = list(dict.fromkeys(str(w.message).split("\n")[0][:160] for w in caught))
    if msgs:
        res["warnings"] = msgs[:5]
    res["wall_s"] = time.perf_counter() - t0
    return res


def _run_contender(ct, data, op, ref, policy) -> dict[str, Any]:
    res: dict[str, Any] = {"status": None, "label": ct.label}
    try:
        prep = ct.prepare(data, op)
    except peers.NotRun as exc:
        res["status"] = str(exc)
        return res
    except Exception as exc:  # recorded, never dropped
        _check_fatal(exc)
        res["status"] = _refusal(ct, exc)
        return res
    res.update(impl=prep.impl, lib=prep.lib, note=prep.note)
    try:
        out = prep.calls[0]()
        err = rel_error(data.xp, prep.to_dense(out), ref)
        del out
    except Exception as exc:
        _check_fatal(exc)
        res["status"] = _refusal(ct, exc)
        return res
    tol = TOLERANCE["tf32" if ct.role.endswith("tf32") else data.case.dtype]
    res.update(err=err, err_ok=bool(err <= tol), tol=tol)   # NaN <= tol is False
    if prep.no_graph:
        policy = dataclasses.replace(policy, graphs="never")
    try:
        t = timing.measure(prep.calls, prep.lib, policy)
    except Exception as exc:
        _check_fatal(exc)
        res["status"] = f"timing failed: {timing.short_error(exc)}"
        return res
    res["status"] = "ok"
    res.update({k: t.get(k) for k in (
        "ms", "mode", "eager_ms", "graph_ms", "graph_note", "samples", "batch", "sets",
        "spread", "min_ms", "host_us", "host_burst", "host_bursts", "sync_ms", "sync_samples",
        "graph_calls", "graph_samples")})
    res["eager_over_graph"] = _ratio(t.get("eager_ms"), t.get("graph_ms"))
    res["plan"] = prep.plan
    res["_calls"] = prep.calls  # for the paired timing; dropped before the row is made
    if prep.no_graph and data.backend.name == "cuda":
        res["graph_note"] = prep.no_graph
    return res


# -- one case ---------------------------------------------------------------------------

def pair_with_dense(results: dict[str, dict], roles: dict[str, str],
                    policy: timing.Policy) -> dict[str, Any]:
    """cubsparse's result with ``paired_ratio`` added: its time over the fastest dense
    product's timed by the same clock, in alternating rounds (:func:`timing.paired`).

    The two are otherwise timed minutes apart at worst and seconds apart at best, in
    which a GPU's clocks move by more than the few per cent that separate the dense path
    (W scattered, then cuBLAS) from cuBLAS alone. None where either did not run here (a
    cached dense time has no calls), or they use different clocks.
    """
    subj = dict(results.get("cubsparse", {}))
    subj.update(paired_ratio=None, paired_dense=None, paired_rounds=None, paired_spread=None)
    calls = subj.get("_calls")
    dense = [(r["ms"], n, r) for n, role in roles.items() if role == "dense"
             and (r := results.get(n)) and r.get("status") == "ok" and r.get("_calls")
             and r.get("lib") == subj.get("lib")]
    if not calls or not dense or policy.paired_rounds < 1:
        return subj
    _, name, d = min(dense, key=lambda t: t[0])
    if max(subj["eager_ms"], d["eager_ms"]) >= policy.slow_ms:  # rounds would take minutes
        return subj
    try:
        p = timing.paired(calls, d["_calls"], subj["lib"], subj["eager_ms"], d["eager_ms"],
                          policy)
    except Exception as exc:
        _check_fatal(exc)
        subj["paired_note"] = f"paired timing failed: {timing.short_error(exc)}"
        return subj
    subj.update(paired_ratio=p["ratio"], paired_dense=name, paired_rounds=p["rounds"],
                paired_spread=p["spread"])
    return subj


def _ratio(num, den):
    if num is None or den is None or not den or (isinstance(num, float) and math.isnan(num)):
        return None
    return num / den


def _best(results: dict[str, dict], names: Iterable[str]) -> tuple[str | None, float | None]:
    ok = [(r["ms"], n) for n in names if (r := results.get(n)) and r.get("status") == "ok"]
    if not ok:
        return None, None
    ms, name = min(ok)
    return name, ms


def _timings(r: dict[str, Any]) -> dict[str, Any]:
    """The eager-first figures of one contender's result (None where it has no time).

    ``eager_over_graph`` is what launching from Python costs over the device time: 1.0
    means the loop keeps the device busy, 5 means four fifths of an eager loop is overhead.
    """
    if r.get("status") != "ok":
        return dict.fromkeys((*TIMINGS, "eager_over_graph"))
    return {**{k: r.get(k) for k in TIMINGS}, "eager_over_graph": r.get("eager_over_graph")}


def assemble_row(env: dict[str, Any], case: Case, data: CaseData, op: str,
                 results: dict[str, dict], roles: dict[str, str],
                 copy_gbps: float | None) -> dict[str, Any]:
    """One result row: the case, every contender's outcome, and the derived figures."""
    d = data.density
    subj = results.get("cubsparse", {})
    ms = subj.get("ms") if subj.get("status") == "ok" else None
    dense_name, dense_ms = _best(results, [n for n, r in roles.items() if r == "dense"])
    tf32_name, dense_tf32_ms = _best(results, [n for n, r in roles.items() if r == "dense_tf32"])
    sub32 = results.get("cubsparse_tf32", {})
    ms32 = sub32.get("ms") if sub32.get("status") == "ok" else None
    min_bytes = case.min_bytes(data.nnzb)
    memory_bound = case.n <= 128

    def bw(t_ms):
        if not memory_bound or t_ms is None or not copy_gbps:
            return None
        return bandwidth_efficiency(min_bytes, t_ms, copy_gbps)

    peer_names = [n for n, r in roles.items() if r == "peer"]
    peer_rows = {}
    for n in peer_names:
        r = results.get(n, {"status": "not run"})
        p_ms = r.get("ms") if r.get("status") == "ok" else None
        peer_rows[n] = {
            "label": r.get("label"), "status": r.get("status"), "impl": r.get("impl"),
            "ms": p_ms, "mode": r.get("mode"), "eager_ms": r.get("eager_ms"),
            "efficiency": _ratio(dense_ms * d if dense_ms else None, p_ms),
            "bw_efficiency": bw(p_ms), "err": r.get("err"), "err_ok": r.get("err_ok"),
            "note": r.get("note"), "graph_note": r.get("graph_note"),
            "warnings": r.get("warnings"), "wall_s": r.get("wall_s"),
            **_timings(r),
        }
    best_peer, best_peer_ms = _best(results, peer_names)
    dense_rows = {n: {**{k: results.get(n, {}).get(k) for k in
                         ("status", "label", "impl", "lib", "ms", "mode", "eager_ms",
                          "graph_note", "err", "err_ok", "cached", "wall_s")},
                      **_timings(results.get(n, {}))}
                  for n, r in roles.items() if r in ("dense", "dense_tf32")}

    row: dict[str, Any] = {
        "gpu": env.get("gpu"), "driver": env.get("driver"), "cuda": env.get("cuda"),
        "cupy": env.get("cupy"), "torch": env.get("torch"),
        "cubsparse_version": env.get("cubsparse"),
        "backend": env.get("backend"), "timestamp": env.get("timestamp"),
        "case": case.key, "op": op, "op_label": _cases.OPS[op], "dtype": case.dtype,
        "n": case.n, "c": case.c, "k": case.k, "b": case.b,
        "density_target": case.density, "density": d, "nnzb": data.nnzb,
        "layout": case.layout, "layout_gen": data.layout_gen, "regime": case.regime,
        "sets_sparse": data.sets_sparse, "sets_dense": data.sets_dense,
        "flops": case.useful_flops(d), "min_bytes": min_bytes, "copy_GBps": copy_gbps,
        # cubsparse
        "cubsparse_status": subj.get("status"), "cubsparse_ms": ms,
        "cubsparse_mode": subj.get("mode"), "cubsparse_eager_ms": subj.get("eager_ms"),
        "cubsparse_graph_note": subj.get("graph_note"), "cubsparse_spread": subj.get("spread"),
        "cubsparse_err": subj.get("err"), "cubsparse_err_ok": subj.get("err_ok"),
        "cubsparse_tol": subj.get("tol"), "cubsparse_impl": subj.get("impl"),
        "cubsparse_warnings": subj.get("warnings"), "cubsparse_wall_s": subj.get("wall_s"),
        **{f"cubsparse_{k}": v for k, v in _timings(subj).items() if k != "eager_ms"},
        "cubsparse_plan": subj.get("plan"), "cubsparse_note": subj.get("note"),
        "tflops": _ratio(case.useful_flops(d) / 1e9, ms),
        "cubsparse_tf32_status": sub32.get("status"), "cubsparse_tf32_ms": ms32,
        "cubsparse_tf32_err": sub32.get("err"), "cubsparse_tf32_err_ok": sub32.get("err_ok"),
        # dense
        "dense_ms": dense_ms, "dense_lib": dense_name,
        "dense_tf32_ms": dense_tf32_ms, "dense_tf32_lib": tf32_name,
        "dense": dense_rows,
        # derived
        "efficiency": _ratio(dense_ms * d if dense_ms else None, ms),
        "efficiency_tf32": _ratio(dense_tf32_ms * d if dense_tf32_ms else None, ms32),
        "speedup": _ratio(dense_ms, ms),
        "bw_efficiency": bw(ms),
        "peers": peer_rows, "best_peer": best_peer, "best_peer_ms": best_peer_ms,
        "beats_all_peers": (ms < best_peer_ms) if (ms is not None and best_peer_ms) else None,
        "beats_dense": (ms < dense_ms) if (ms is not None and dense_ms) else None,
        # cubsparse over dense timed in alternating rounds (pair_with_dense)
        "paired_ratio": subj.get("paired_ratio"), "paired_dense": subj.get("paired_dense"),
        "paired_rounds": subj.get("paired_rounds"), "paired_spread": subj.get("paired_spread"),
    }
    return row


class Runner:
    """Holds the per-run state: backend, ceilings, the dense cache, rows and skips."""

    def __init__(self, cfg: RunConfig):
        self.cfg = cfg
        self.backend = device.get_backend(cfg.backend)
        self.contenders = list(peers.contenders(cfg.backend))
        self.roles = {c.name: c.role for c in self.contenders}
        self.selected = select_contenders(cfg.contenders, cfg.backend)
        self.dense_cache: dict[tuple, dict] = {}
        self.rows: list[dict] = []
        self.skipped: list[dict] = []
        self.env: dict[str, Any] = {}
        self.meta: dict[str, Any] = {}
        self.max_sets = 32 if cfg.backend == "cuda" else 3

    # -- setup ------------------------------------------------------------------------
    def setup(self, case_list: list[Case]) -> None:
        self.env = self.backend.info()
        if self.cfg.backend == "cuda":
            self._torch_defaults()
        ceilings: dict[str, Any] = {}
        if self.cfg.ceilings:
            self._log("measuring device ceilings (copy bandwidth, dense peaks) ...")
            try:
                ceilings["copy"] = device.copy_bandwidth(self.backend)
            except Exception as exc:
                ceilings["copy"] = {"GBps": None, "error": timing.short_error(exc)}
            dts = [d for d in ("float16", "bfloat16", "float32") if self.cfg.backend == "cuda"
                   or d != "bfloat16" or _has_ml_dtypes()]
            try:
                ceilings["dense"] = device.dense_peaks(self.backend, dtypes=dts)
            except Exception as exc:
                ceilings["dense"] = {"error": timing.short_error(exc)}
        self.copy_gbps = (ceilings.get("copy") or {}).get("GBps")
        self.meta = {
            "schema": SCHEMA, **self.env, "ceilings": ceilings,
            "preset": self.cfg.preset, "ops": list(self.cfg.ops),
            "policy": dataclasses.asdict(self.cfg.policy), "max_seconds": self.cfg.max_seconds,
            "contenders": list(self.selected) if self.selected is not None else None,
            "argv": sys.argv[1:], "cases_planned": len(case_list), "status": "running",
            "warmup": self._warmup(case_list),
        }

    def _torch_defaults(self) -> None:
        """IEEE fp32 for torch unless a contender asks for TF32 (and says so in its row)."""
        try:
            import torch
        except Exception:
            return
        with contextlib.suppress(Exception):
            torch.backends.cuda.matmul.allow_tf32 = False

    def _warmup(self, case_list: list[Case]) -> dict[str, Any]:
        """Compile cubsparse's kernels up front (CUDA), so the first case is not penalised."""
        if self.cfg.backend != "cuda":
            return {"skipped": "cpu backend"}
        try:
            import cubsparse
        except Exception as exc:
            return {"error": timing.short_error(exc)}
        if not hasattr(cubsparse, "warmup"):
            return {"error": "cubsparse has no warmup()"}
        t0 = time.perf_counter()
        try:
            names = cubsparse.warmup(dtypes=sorted({c.dtype for c in case_list}),
                                     blocksizes=sorted({c.b for c in case_list}))
            return {"seconds": time.perf_counter() - t0, "kernels": len(names or [])}
        except Exception as exc:
            return {"seconds": time.perf_counter() - t0, "error": timing.short_error(exc)}

    def _log(self, msg: str) -> None:
        if not self.cfg.quiet:
            print(msg, file=sys.stderr, flush=True)

    # -- the loop ---------------------------------------------------------------------
    def run_case(self, case: Case, ops: list[str]) -> list[dict]:
        data = CaseData(self.backend, case, self.max_sets)
        rows = []
        try:
            for op in ops:
                ref = data.reference(op)
                results: dict[str, dict] = {}
                for ct in self.contenders:
                    if self.selected is not None and ct.name not in self.selected:
                        results[ct.name] = {"status": "not run: not selected (contenders "
                                            + ", ".join(self.selected) + ")",
                                            "label": ct.label}
                        continue
                    if ct.dtypes is not None and case.dtype not in ct.dtypes:
                        results[ct.name] = {"status": "not applicable: "
                                            + "/".join(ct.dtypes) + " only", "label": ct.label}
                        continue
                    key = (op, case.dtype, case.n, case.c, case.k, ct.name)
                    if ct.shared_dense and self.cfg.dense_once and key in self.dense_cache:
                        results[ct.name] = dict(self.dense_cache[key], cached=True)
                        continue
                    r = run_contender(ct, data, op, ref, self.cfg.policy)
                    if ct.shared_dense:
                        r["cached"] = False
                    results[ct.name] = r
                    if ct.shared_dense and self.cfg.dense_once and r.get("status") == "ok":
                        self.dense_cache[key] = {k: v for k, v in r.items() if k != "_calls"}
                del ref
                results["cubsparse"] = pair_with_dense(results, self.roles, self.cfg.policy)
                for r in results.values():
                    r.pop("_calls", None)
                rows.append(assemble_row(self.env, case, data, op, results, self.roles,
                                         self.copy_gbps))
        finally:
            data.release()
            del data
            self.backend.release()
        return rows

    def memory_skip(self, case: Case) -> str | None:
        free = self.backend.free_bytes()
        if free is None:
            return None
        need = case.footprint_bytes()
        if need > 0.9 * free:
            return (f"does not fit in GPU memory: needs ~{need / 2**30:.1f} GiB, "
                    f"{free / 2**30:.1f} GiB free")
        return None


def select_contenders(names: Iterable[str] | None, backend: str) -> tuple[str, ...] | None:
    """The contenders a run times, checked against the backend's; None means all of them.

    cubsparse is always among them: a row without the subject's time has nothing to
    compare. Dense contenders are kept if named, so efficiency needs a dense one named.

    Raises
    ------
    ValueError
        If a name is not a contender of ``backend``.
    """
    if names is None:
        return None
    known = [c.name for c in peers.contenders(backend)]
    wanted = {"cubsparse", *names}
    unknown = sorted(wanted - set(known))
    if unknown:
        raise ValueError(f"unknown contender(s) {', '.join(unknown)} for backend {backend}; "
                         f"choose from {', '.join(known)}")
    return tuple(n for n in known if n in wanted)


def _has_ml_dtypes() -> bool:
    try:
        import ml_dtypes  # noqa: F401
        return True
    except ImportError:
        return False


# -- progress ---------------------------------------------------------------------------

class _Counter:
    """Plain stderr progress for machines without tqdm."""

    def __init__(self, total: int):
        self.total, self.n = total, 0

    def set_postfix_str(self, s: str) -> None:
        self._post = s

    def update(self, k: int = 1) -> None:
        self.n += k
        print(f"[{self.n}/{self.total}] {getattr(self, '_post', '')}", file=sys.stderr,
              flush=True)

    def write(self, s: str) -> None:
        print(s, file=sys.stderr, flush=True)

    def close(self) -> None:
        pass


def _progress(total: int, enabled: bool):
    if not enabled:
        c = _Counter(total)
        c.update = lambda k=1: None  # type: ignore[method-assign]
        return c
    try:
        from tqdm import tqdm

        return tqdm(total=total, unit="case", file=sys.stderr, dynamic_ncols=True)
    except ImportError:
        return _Counter(total)


# -- the eager summary ------------------------------------------------------------------

_OPS_SHORT = {"xw": "X@W", "dywt": "dY@W.T", "sdd": "X.T@dY"}


def _num(v: float | None, width: int) -> str:
    """``v`` in ``width`` characters with about four significant digits; ``-`` for none."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-".rjust(width)
    if v >= 1000:
        return f"{v:{width}.0f}"
    # Fixed decimals below 1, so sub-microsecond differences of ms figures stay visible.
    return f"{v:{width}.4g}" if v >= 1 else f"{v:{width}.5f}"


def _with_old_graph(rec: dict[str, Any]) -> dict[str, Any]:
    """A contender's figures, with the graph time of a schema-1 record filled in.

    Schema 1 kept a graph time only as the reported ``ms`` of a ``mode: graph`` record;
    reading it back as ``graph_ms`` lets old results files show their eager / graph ratio.
    """
    if "graph_ms" in rec or rec.get("mode") != "graph":
        return rec
    return {**rec, "graph_ms": rec.get("ms"),
            "eager_over_graph": _ratio(rec.get("eager_ms"), rec.get("ms"))}


def _summary_entries(row: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``(name, figures)`` of each contender of ``row`` that the eager summary shows.

    cubsparse always (with its status if it failed), then every dense product and peer
    that produced a time: what a user would write instead. The TF32 variants and the
    contenders that did not run are left to the JSON, to keep the table short.
    """
    subject = {k: row[f"cubsparse_{k}"] for k in ("status", "ms", "mode", *TIMINGS,
                                                  "eager_over_graph")
               if f"cubsparse_{k}" in row}
    out = [("cubsparse", _with_old_graph(subject))]
    for group in ("dense", "peers"):
        for name, rec in (row.get(group) or {}).items():
            if name.endswith("_tf32") or rec.get("status") != "ok":
                continue
            out.append((name, _with_old_graph(rec)))
    return out


def eager_table(rows: list[dict[str, Any]]) -> str:
    """The fixed-width eager summary: one line per contender that ran, per case and op.

    Columns: the case (printed once per group), the contender, host microseconds to
    issue one call, then milliseconds per call of an eager back-to-back loop, of one
    synchronized call, and of a CUDA-graph replay, and the ratio eager / graph. Lines
    stay within 100 characters so that a log's tail reads on any terminal. Rows of
    results written before these figures existed show ``-`` for them.
    """
    head = (f"{'op':6} {'dtype':5} {'N':>5} {'C=K':>6} {'b':>3} {'d':>5} {'lay':3}  "
            f"{'contender':12} {'host_us':>8} {'eager_ms':>9} {'sync_ms':>9} {'graph_ms':>9} "
            f"{'e/g':>5}")
    out = ["eager timings per call: host_us = issuing it (burst after a sync), eager_ms = "
           "back-to-back loop,", "sync_ms = one call + stream sync, graph_ms = CUDA-graph "
           "replay, e/g = eager_ms / graph_ms", head, "-" * len(head)]
    for r in rows:
        case = (f"{_OPS_SHORT.get(r['op'], r['op']):6} "
                f"{_cases.DTYPE_SHORT.get(r['dtype'], r['dtype']):5} {r['n']:>5} "
                f"{r['c']:>6} {r['b']:>3} {r['density_target']:>5g} "
                f"{_cases.LAYOUT_SHORT.get(r['layout'], r['layout'])[:3]:3}")
        for i, (name, f) in enumerate(_summary_entries(r)):
            line = (f"{case if i == 0 else ' ' * len(case)}  {name[:12]:12} "
                    f"{_num(f.get('host_us'), 8)} {_num(f.get('eager_ms'), 9)} "
                    f"{_num(f.get('sync_ms'), 9)} {_num(f.get('graph_ms'), 9)} ")
            ratio = f.get("eager_over_graph")
            line += "-".rjust(5) if ratio is None else f"{ratio:5.2f}"
            if name == "cubsparse" and f.get("status") != "ok":
                line += f"  {str(f.get('status'))[:40]}"
            out.append(line.rstrip())
    return "\n".join(out)


# -- files ------------------------------------------------------------------------------

def flatten(row: dict[str, Any]) -> dict[str, Any]:
    """A row with the nested ``peers``/``dense`` dicts spread into ``peer_<name>_<field>``."""
    flat = {k: v for k, v in row.items() if k not in ("peers", "dense")}
    for group, prefix in (("dense", "dense_"), ("peers", "peer_")):
        for name, fields in (row.get(group) or {}).items():
            base = name if group == "dense" else prefix + name
            for f, v in fields.items():
                flat[f"{base}_{f}"] = v
    return flat


def _json_default(o):
    if hasattr(o, "item"):
        return o.item()
    return str(o)


def _clean(o):
    """JSON has no NaN/inf: write them as null."""
    if isinstance(o, float) and (math.isnan(o) or math.isinf(o)):
        return None
    if isinstance(o, dict):
        return {k: _clean(v) for k, v in o.items()}
    if isinstance(o, list):
        return [_clean(v) for v in o]
    return o


def write_results(results: dict[str, Any], out_dir: str | os.PathLike, stem: str,
                  gpu_slug: str) -> dict[str, str]:
    """Write ``<stem>.json``, ``<stem>.csv`` and ``latest_<gpu>.json``; return their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    js = out / f"{stem}.json"
    text = json.dumps(_clean(results), indent=1, default=_json_default)
    tmp = js.with_suffix(".json.tmp")
    tmp.write_text(text)
    tmp.replace(js)  # a run killed mid-write still leaves the previous complete file
    (out / f"latest_{gpu_slug}.json").write_text(text)
    rows = [flatten(r) for r in results.get("rows", [])]
    cs = out / f"{stem}.csv"
    fields: list[str] = []
    for r in rows:
        fields += [k for k in r if k not in fields]
    with open(cs, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if v is None else v) for k, v in r.items()})
    return {"json": str(js), "csv": str(cs), "latest": str(out / f"latest_{gpu_slug}.json")}


def load_results(path: str | os.PathLike) -> dict[str, Any]:
    """A results file as written by :func:`write_results`, or gzip-compressed (``.gz``)."""
    if str(path).endswith(".gz"):
        import gzip

        with gzip.open(path, "rt") as f:
            return json.load(f)
    with open(path) as f:
        return json.load(f)


# -- entry point ------------------------------------------------------------------------

def run(cfg: RunConfig) -> dict[str, Any]:
    """Run the benchmark described by ``cfg``; write files; return the results dict."""
    from . import report

    case_list = cfg.cases if cfg.cases is not None else _cases.build_cases(
        _cases.preset(cfg.preset, cfg.backend))
    ops = [o for o in _cases.OPS if o in cfg.ops]
    t_start = time.monotonic()
    runner = Runner(cfg)

    done_rows: list[dict] = []
    if cfg.resume:
        prev = load_results(cfg.resume)
        # Carry every earlier row (also those outside this selection): chained runs with
        # different filters then accumulate one file that holds the whole sweep.
        done_rows = list(prev.get("rows", []))
        done = {(r["case"], r["op"]) for r in done_rows}
        case_list = [c for c in case_list if not all((c.key, o) in done for o in ops)]

    runner.setup(case_list)
    gpu_slug = device.slug(runner.env["gpu"] if cfg.backend == "cuda"
                           else "cpu-" + runner.env["gpu"].split()[1])
    stem = "results_{}_{}".format(gpu_slug, _dt.datetime.now().strftime("%Y%m%dT%H%M%S"))
    results = {"meta": runner.meta, "rows": runner.rows, "skipped": runner.skipped}
    runner.rows.extend(done_rows)
    if done_rows:
        runner.meta["resumed_from"] = str(cfg.resume)

    bar = _progress(len(case_list), cfg.progress)
    stopped = None
    for idx, case in enumerate(case_list):
        elapsed = time.monotonic() - t_start
        if cfg.max_seconds is not None and elapsed > cfg.max_seconds:
            reason = (f"time budget exhausted: --max-seconds {cfg.max_seconds:g} "
                      f"(elapsed {elapsed:.0f} s)")
            runner.skipped += [{"case": c.key, "reason": reason} for c in case_list[idx:]]
            stopped = reason
            break
        bar.set_postfix_str(case.key)
        reason = case.skip_reason() or runner.memory_skip(case)
        if reason:
            runner.skipped.append({"case": case.key, "reason": reason})
            bar.update(1)
            continue
        try:
            runner.rows.extend(runner.run_case(case, ops))
        except FatalDeviceError as exc:
            runner.skipped.append({"case": case.key, "reason": f"fatal device error: {exc}"})
            runner.skipped += [{"case": c.key, "reason": "not run: an earlier case broke the "
                                "CUDA context"} for c in case_list[idx + 1:]]
            stopped = f"fatal device error in {case.key}: {exc}"
            bar.write(stopped)
            break
        except Exception as exc:  # a broken case must not end the sweep
            runner.skipped.append({"case": case.key,
                                   "reason": f"case failed: {timing.short_error(exc, 200)}"})
            bar.write(f"{case.key}: case failed: {timing.short_error(exc, 200)}")
            runner.backend.release()
        bar.update(1)
        runner.meta["elapsed_s"] = time.monotonic() - t_start
        write_results(results, cfg.out, stem, gpu_slug)
    bar.close()

    runner.meta.update(status="stopped: " + stopped if stopped else "complete",
                       elapsed_s=time.monotonic() - t_start,
                       finished=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    paths = write_results(results, cfg.out, stem, gpu_slug)
    results["files"] = paths
    if cfg.plots:
        from . import plots

        try:
            pngs = plots.make_plots(results, cfg.out, prefix=stem)
            results["files"]["plots"] = pngs
        except plots.PlottingUnavailable as exc:
            runner._log(f"plots skipped: {exc}")
    if not cfg.quiet:
        print(report.run_footer(results))
        # Last, so that the tail of a log shows the figures a Python loop sees.
        print()
        print(eager_table(results["rows"]))
    return results
