"""The benchmark suite end to end on the CPU backend (tiny cases): cases, timing, peers
recorded as unavailable, JSON/CSV output and the report all hold together, and every
contender has the four per-call figures (host us, eager, sync, graph)."""

from __future__ import annotations

import csv
import math
import time

import pytest

import bench
import cubsparse
from bench import cases, report, timing
from bench.runner import eager_table, select_contenders

FIGURES = ("host_us", "eager_ms", "sync_ms")


def _positive(v) -> bool:
    return isinstance(v, float) and math.isfinite(v) and v > 0


def test_bench_smoke(tmp_path):
    res = bench.smoke(tmp_path)
    written = {p.suffix for p in tmp_path.rglob("*") if p.is_file()}
    assert {".json", ".csv"} <= written
    assert res["meta"]["schema"] == 2
    for r in res["rows"]:
        for k in FIGURES:
            assert _positive(r[f"cubsparse_{k}"]), (r["case"], r["op"], k)
        assert r["cubsparse_graph_ms"] is None  # nothing is captured on the CPU backend
        assert r["cubsparse_eager_over_graph"] is None
        # cubsparse describes the plan of every call it is timed on, where it can
        if hasattr(cubsparse, "matmul_plan"):
            assert isinstance(r["cubsparse_plan"], str)
            assert r["cubsparse_plan"]
            assert "\n" not in r["cubsparse_plan"]
        else:
            assert r["cubsparse_plan"] is None
        ran = [p for group in ("dense", "peers") for p in r[group].values()
               if p["status"] == "ok"]
        assert ran  # at least the dense NumPy product
        for p in ran:
            assert all(_positive(p[k]) for k in FIGURES), p
            assert p["graph_ms"] is None
        # the per-call densify peer gives the dense product's result, with W densified
        densify = r["peers"]["densify"]
        assert densify["status"] == "ok", densify
        assert densify["err_ok"], densify
        assert r["paired_ratio"] > 0, r["paired_ratio"]
        assert r["paired_dense"] == "dense_numpy"
        # A host-clocked call is synchronous: its eager and synchronized times measure the
        # same work, so they agree to well within a factor of ten (they are separate runs).
        ratio = r["cubsparse_sync_ms"] / r["cubsparse_eager_ms"]
        assert 0.1 < ratio < 10, ratio
    with open(res["files"]["csv"], newline="") as f:
        header = next(csv.reader(f))
    for col in ("cubsparse_host_us", "cubsparse_eager_ms", "cubsparse_sync_ms",
                "cubsparse_graph_ms", "dense_numpy_host_us", "peer_scipy_bsr_sync_ms"):
        assert col in header


class _QueueClock(timing.Clock):
    """A pretend device: calls only queue work, and waiting runs the queue (sleeps).

    Issuing is nearly free while each call costs ``device_ms`` of "device" time, so the
    four figures must come apart exactly as they do on a GPU with fast launches.
    """

    lib = "queue"

    def __init__(self, device_ms: float):
        self.device_ms = device_ms
        self.pending = 0
        self.longest_burst = 0

    def call(self) -> None:
        self.pending += 1

    def sync(self) -> None:
        self.longest_burst = max(self.longest_burst, self.pending)
        time.sleep(self.pending * self.device_ms / 1e3)
        self.pending = 0

    def stream_sync(self) -> None:
        self.sync()

    def elapsed(self, run) -> float:
        t0 = time.perf_counter()
        run()
        self.sync()
        return (time.perf_counter() - t0) * 1e3


class _DriftClock(timing.Clock):
    """A pretend device that slows as it works, as a GPU does as it heats: each call costs
    its base time times 1 + 0.1 % per call made before it. Time is counted, not slept."""

    def __init__(self):
        self.made, self.now = 0, 0.0

    def call(self, ms: float) -> None:
        self.now += ms * (1 + 1e-3 * self.made)
        self.made += 1

    def elapsed(self, run) -> float:
        t0 = self.now
        run()
        return self.now - t0


@pytest.mark.parametrize("a_ms", [1.0, 1.2])
def test_paired_timing_cancels_drift(a_ms):
    clock = _DriftClock()
    a, b = [lambda: clock.call(a_ms)], [lambda: clock.call(1.0)]
    policy = timing.Policy(repeats=20, min_samples=20, target_ms=1.0, latency=False,
                           graphs="never", eager_batch_ms=2.0)
    apart = (timing.measure(a, "drift", policy, clock=clock)["eager_ms"]
             / timing.measure(b, "drift", policy, clock=clock)["eager_ms"])
    p = timing.paired(a, b, "drift", a_ms, 1.0, policy, clock=clock)
    # timed one after the other, the second product pays for the first one's heat
    assert apart < 0.98 * a_ms
    assert p["ratio"] == pytest.approx(a_ms, rel=0.005)
    assert p["rounds"] == policy.paired_rounds
    assert (p["a_batch"], p["b_batch"]) == (2, 2)


def test_report_counts_rows_slower_than_dense_every_way():
    """The report's dense section: rows slower apart, in alternating rounds (with the
    worst listed) and against the densify peer, from the rows' own figures."""
    from bench.report import _dense_tally

    def row(case, speedup, paired, eager, densify):
        return {"case": case, "op": "xw", "dtype": "float16", "n": 8, "c": 64, "k": 64,
                "b": 8, "density": 0.5, "density_target": 0.5, "layout": "random",
                "speedup": speedup, "paired_ratio": paired, "cubsparse_ms": eager,
                "cubsparse_eager_ms": eager, "cubsparse_plan": "X @ W: dense (scatter)",
                "peers": {"densify": {"eager_ms": densify}}}

    section = _dense_tally([row("a", 0.9, 1.05, 1.0, 2.0), row("b", 1.2, 0.8, 1.0, 0.5),
                            row("c", 1.1, None, 1.0, None)])
    assert "slower than the dense product (cuBLAS; NumPy on the CPU backend) in **1 of 3**" \
        in section
    assert "alternating rounds with it (`paired_ratio`), in **1 of 2** rows" in section
    assert "`densify` peer, eager times), in **1 of 2** rows" in section
    assert "| 1.050 |" in section  # the worst paired ratio is listed


def test_measure_separates_issue_time_from_device_time():
    clock = _QueueClock(device_ms=1.0)
    policy = timing.Policy(repeats=5, min_samples=3, target_ms=10.0, host_burst=4)
    t = timing.measure([clock.call], "queue", policy, clock=clock)
    # Issuing a call costs microseconds; the device's millisecond shows only where the
    # host waits for it: in the eager loop (events wait at its end) and the synced call.
    assert t["host_us"] < 200, t
    assert t["eager_ms"] >= 1.0, t
    assert t["sync_ms"] >= 1.0, t
    assert t["graph_ms"] is None  # no CUDA library, no graph
    assert t["mode"] == "eager"
    assert 1 <= t["host_burst"] <= 4
    assert t["host_bursts"] >= policy.min_samples
    assert t["sync_samples"] >= policy.min_samples


def test_measure_host_bursts_stay_short_for_fast_calls():
    clock = _QueueClock(device_ms=0.0)
    # (a budget of 10 s: the pretend call's estimate is wall time, and on a host busy with
    # other test workers it once took more than 10 ms / 3 bursts, which shortens the burst)
    policy = timing.Policy(repeats=5, min_samples=3, target_ms=10_000.0, host_burst=7)
    t = timing.measure([clock.call], "queue", policy, clock=clock)
    # A free call fits any number in the budget: the burst is capped, never the queue's
    # length, and the queue never held more than the longest burst or eager batch.
    assert t["host_burst"] == 7
    assert clock.longest_burst <= max(7, t["batch"])


def test_measure_without_latency_figures():
    policy = timing.Policy(repeats=3, min_samples=2, target_ms=1.0, latency=False)
    t = timing.measure([lambda: sum(range(100))], "host", policy)
    assert t["host_us"] is None
    assert t["sync_ms"] is None
    assert _positive(t["eager_ms"])
    assert t["ms"] == t["eager_ms"]


def test_eager_preset_shape():
    p = cases.preset("eager", "cuda")
    got = cases.build_cases(p)
    assert {c.n for c in got} == {1, 32, 128}
    assert {c.c for c in got} == {1024, 4096, 12288}
    assert all(c.c == c.k for c in got)
    assert {c.b for c in got} == {32, 64}
    assert {c.dtype for c in got} == {"float16", "float32"}
    assert {c.layout for c in got} == {"random"}
    assert {c.density for c in got if c.c != 12288} == {0.1}
    assert {c.density for c in got if c.c == 12288} == {0.02, 0.1}
    assert len(got) == 3 * 3 * 2 * 2 + 3 * 2 * 2
    assert not any(c.skip_reason() for c in got)
    assert set(p.contenders) == {"cubsparse", "dense_cupy", "dense_torch", "torch_bsr"}
    assert select_contenders(p.contenders, "cuda") == p.contenders


def test_select_contenders():
    assert select_contenders(None, "cpu") is None
    assert select_contenders(["scipy_bsr"], "cpu") == ("cubsparse", "scipy_bsr")
    with pytest.raises(ValueError, match="nope"):
        select_contenders(["nope"], "cpu")


def test_eager_cli_prints_eager_table_last(tmp_path, capsys):
    rc = bench.run(["--backend", "cpu", "--eager", "--n", "1", "--ck", "128",
                    "--contenders", "dense_numpy", "--no-plots", "--no-ceilings",
                    "--no-progress", "--repeats", "3", "--target-ms", "2",
                    "--out", str(tmp_path)])
    assert rc == 0
    out = capsys.readouterr().out.rstrip().splitlines()
    start = max(i for i, line in enumerate(out) if line.startswith("eager timings"))
    table = out[start + 4:]  # two lines of legend, the header and its rule
    # 2 cases (fp32, fp16) x 3 ops, each a cubsparse line and a dense NumPy line; the
    # SciPy peer was not selected
    assert len(table) == 12
    assert all(len(line) <= 100 for line in out[start:])
    subj = [line for line in table if " cubsparse " in line]
    assert len(subj) == 6
    for line in subj:
        host, eager, sync, graph, ratio = line.split()[-5:]
        assert min(float(host), float(eager), float(sync)) > 0
        assert (graph, ratio) == ("-", "-")
    assert not any("scipy_bsr" in line for line in table)


def test_eager_table_reads_results_without_the_new_figures():
    # A row as schema 1 wrote it: the graph time only as the reported ms of mode "graph".
    row = {"op": "xw", "dtype": "float16", "n": 32, "c": 4096, "k": 4096, "b": 32,
           "density_target": 0.1, "layout": "random", "cubsparse_status": "ok",
           "cubsparse_ms": 0.01, "cubsparse_mode": "graph", "cubsparse_eager_ms": 0.03,
           "dense": {"dense_cupy": {"status": "ok", "ms": 0.05, "mode": "eager",
                                    "eager_ms": 0.05}},
           "peers": {"torch_bsr": {"status": "peer refused: x", "ms": None}}}
    lines = eager_table([row]).splitlines()[4:]
    assert len(lines) == 2  # the refused peer has no line
    assert lines[0].split()[-5:] == ["-", "0.03000", "-", "0.01000", "3.00"]
    assert lines[1].split()[-5:] == ["-", "0.05000", "-", "-", "-"]


@pytest.mark.parametrize("fails", [False, True])
def test_cubsparse_plan_is_recorded(tmp_path, monkeypatch, fails):
    seen = []

    class Plan:
        def __init__(self, what):
            self.what = what

        def __str__(self):
            return f"plan of {self.what}\n(second line)"

    def matmul_plan(a, b):
        seen.append(("matmul", type(b).__name__))
        if fails:
            raise RuntimeError("no plan today")
        return Plan("matmul")

    def sampled_matmul_plan(a, b, like):
        seen.append(("sampled", type(like).__name__))
        if fails:
            raise RuntimeError("no plan today")
        return Plan("sampled")

    monkeypatch.setattr(cubsparse, "matmul_plan", matmul_plan, raising=False)
    monkeypatch.setattr(cubsparse, "sampled_matmul_plan", sampled_matmul_plan, raising=False)
    res = bench.smoke(tmp_path)
    assert seen  # the plan functions were called
    for r in res["rows"]:
        if fails:
            assert r["cubsparse_plan"] is None
            assert "no plan today" in r["cubsparse_note"]
            assert r["cubsparse_status"] == "ok"  # a failing plan never stops the timing
        else:
            want = "sampled" if r["op"] == "sdd" else "matmul"
            assert r["cubsparse_plan"] == f"plan of {want} (second line)"


def test_report_small_n_grid_reads_eager_graph_dense_and_copy_fraction():
    """`--small-n`: a row per (op, b, N, C = K), a column per density; a cell is eager /
    graph / the faster dense peer's eager µs and the copy-rate fraction, `*` where the plan
    is not the stream kernel; a dtype column only where the rows hold several dtypes."""
    from bench.report import small_n_table

    def row(op, d, plan, graph_ms, dtype="float16"):
        return {"op": op, "dtype": dtype, "b": 16, "n": 32, "c": 8192, "density_target": d,
                "cubsparse_eager_ms": graph_ms + 0.002, "cubsparse_graph_ms": graph_ms,
                "cubsparse_plan": plan, "min_bytes": 4.0e7, "copy_GBps": 4000.0,
                "dense": {"dense_cupy": {"eager_ms": 0.040}, "dense_torch": {"eager_ms": 0.036},
                          "densify": {"eager_ms": None}}}

    stream = "X @ W, 32 rows, float16, b = 16: dsd_stream<F16,16,2,16,16,32,3,64,false>"
    rows = [row("dywt", 0.1, "dY @ W.T ...: dsd_tc<F16,16,64>", 0.020),
            row("xw", 0.5, stream, 0.025), row("xw", 0.1, stream, 0.010)]
    lines = small_n_table(rows).splitlines()
    assert lines[0] == "| op | b | N | C = K | d = 0.1 | d = 0.5 |"
    # 4e7 bytes at 4000 GB/s take 10 µs: fractions 1.00, 0.40 and 0.50
    assert lines[2] == ("| `X @ W` | 16 | 32 | 8192 | 12.0 / 10.0 / 36.0 (1.00) | "
                        "27.0 / 25.0 / 36.0 (0.40) |")
    assert lines[3] == "| `dY @ W.T` | 16 | 32 | 8192 | 22.0 / 20.0 / 36.0 (0.50)* | - |"
    two = small_n_table([*rows, row("xw", 0.1, stream, 0.010, dtype="bfloat16")])
    assert two.splitlines()[0] == "| op | dtype | b | N | C = K | d = 0.1 | d = 0.5 |"


def test_report_borrows_copy_bandwidth_for_runs_without_ceilings():
    from bench.report import borrow_copy_bandwidth

    measured = {"meta": {"gpu": "G", "timestamp": "t0",
                         "ceilings": {"copy": {"GBps": 4000.0}}}, "rows": []}
    row = {"regime": "memory", "min_bytes": 4e6, "cubsparse_ms": 0.002, "copy_GBps": None,
           "bw_efficiency": None}
    compute_row = dict(row, regime="compute")
    chunk = {"meta": {"gpu": "G", "timestamp": "t1"}, "rows": [row, compute_row]}
    other_gpu = {"meta": {"gpu": "H"}, "rows": [dict(row)]}
    assert borrow_copy_bandwidth([measured, chunk, other_gpu]) == 1
    # 4 MB in 2 us is 2000 GB/s: half of the borrowed 4000 GB/s
    assert abs(row["bw_efficiency"] - 0.5) < 1e-12
    assert chunk["meta"]["copy_bandwidth_from"] == "run of t0"
    assert compute_row["bw_efficiency"] is None  # only memory-bound rows have one
    assert other_gpu["rows"][0]["bw_efficiency"] is None  # never across GPUs


def test_results_load_plain_and_gzip_compressed(tmp_path):
    import gzip
    import json

    from bench.runner import load_results

    results = {"meta": {"gpu": "G", "status": "complete"}, "rows": [{"case": "c", "op": "xw"}]}
    plain = tmp_path / "r.json"
    plain.write_text(json.dumps(results))
    packed = tmp_path / "r.json.gz"
    with gzip.open(packed, "wt") as f:
        json.dump(results, f)
    assert load_results(plain) == results
    assert load_results(packed) == results


def test_report_later_files_replace_rows_measured_again():
    from bench.report import supersede

    old = {"meta": {"gpu": "G"}, "rows": [{"case": "a", "op": "xw", "ms": 2.0},
                                          {"case": "a", "op": "sdd", "ms": 3.0},
                                          {"case": "b", "op": "xw", "ms": 4.0}],
           "skipped": [{"case": "c", "reason": "budget"}, {"case": "d", "reason": "budget"}]}
    new = {"meta": {"gpu": "G"}, "rows": [{"case": "a", "op": "xw", "ms": 1.0},
                                          {"case": "c", "op": "xw", "ms": 5.0}],
           "skipped": [{"case": "b", "reason": "budget"}]}
    merged, dropped = supersede([old, new])
    assert dropped == 1
    rows = sorted((r["case"], r["op"], r["ms"]) for res in merged for r in res["rows"])
    # a/xw from the later file; a/sdd and b/xw only measured in the first one stay
    assert rows == [("a", "sdd", 3.0), ("a", "xw", 1.0), ("b", "xw", 4.0), ("c", "xw", 5.0)]
    # c was measured later; b was measured earlier (a later skip does not hide it); d stays
    assert [s["case"] for res in merged for s in res["skipped"]] == ["d"]
    assert len(old["rows"]) == 3  # the inputs are left as they were


def test_sparse_only_turns_the_dense_path_off(capsys):
    import cubsparse as cs

    saved = cs.get_options()
    try:
        assert bench.run(["--backend", "cpu", "--eager", "--sparse-only", "--list"]) == 0
        assert cs.get_options()["dense_fallback"] is False
    finally:
        cs.set_options(**saved)
    assert "cases" in capsys.readouterr().out


@pytest.mark.parametrize("layout", ["ws", "banded", "ba"])
@pytest.mark.parametrize("density", [0.02, 0.1, 0.25, 0.5])
def test_structured_layouts_come_near_their_density(layout, density):
    from bench import cases as C

    case = C.Case(n=32, c=2048, k=2048, b=16, density=density, dtype="float16", layout=layout)
    lay, gen = C.make_layout(case)
    assert lay.shape == (128, 128)
    assert (lay == lay.T).all()  # all three are symmetric
    assert abs(lay.mean() - density) < 0.02, gen
    assert C.Case(n=32, c=2048, k=1024, b=16, density=density, dtype="float16",
                  layout=layout).skip_reason().endswith("needs C == K")
    assert "full layout" in C.Case(n=32, c=2048, k=2048, b=16, density=1.0,
                                   dtype="float16", layout=layout).skip_reason()


def test_report_has_targets_per_layout_for_several_layouts():
    from bench import report

    row = {"op": "xw", "dtype": "float16", "n": 4096, "c": 4096, "k": 4096, "b": 64,
           "density_target": 0.25, "density": 0.25, "regime": "compute", "efficiency": 0.5,
           "cubsparse_ms": 1.0, "case": "c", "layout": "random"}
    rows = [row, {**row, "layout": "ws", "case": "c2", "efficiency": 0.7}]
    text = report._targets_table(rows, by="layout")
    assert "| random |" in text
    assert "| ws |" in text


@pytest.mark.parametrize("dense_once", [False, True])
def test_dense_timed_per_case_unless_asked_once_per_shape(tmp_path, dense_once):
    """Dense cuBLAS is timed on each case's own densified W (its speed depends on the
    values on Hopper); with dense_once, later cases of the same shape reuse the first's."""
    from bench import cases, timing
    from bench.runner import RunConfig
    from bench.runner import run as run_cfg

    case_list = [cases.Case(16, 64, 64, 8, d, "float32") for d in (0.25, 0.5)]
    cfg = RunConfig(backend="cpu", preset="smoke", cases=case_list, ops=("xw",),
                    out=str(tmp_path), policy=timing.Policy(repeats=2, min_samples=1,
                                                            target_ms=1.0),
                    plots=False, progress=False, quiet=True, ceilings=False,
                    contenders=("cubsparse", "dense_numpy"), dense_once=dense_once)
    rows = run_cfg(cfg)["rows"]
    assert len(rows) == 2
    cached = [r["dense"]["dense_numpy"]["cached"] for r in rows]
    assert cached == [False, dense_once]
    # a cached dense time has no calls to alternate with
    assert [r["paired_ratio"] is not None for r in rows] == [True, not dense_once]
    assert all(r["dense_ms"] > 0 for r in rows)


def test_summary_tables_name_every_layout():
    """The fixed-width tables label each layout by its own three letters (banded and
    Watts-Strogatz rows read "rnd" before)."""
    from bench.report import summary_table

    base = {"op": "sdd", "dtype": "float16", "n": 8192, "c": 8192, "b": 32,
            "density_target": 0.1, "cubsparse_ms": 0.2, "efficiency": 0.5}
    lines = summary_table([{**base, "layout": lay} for lay in cases.LAYOUTS]).splitlines()[2:]
    assert [line.split()[6] for line in lines] == ["rnd", "ba", "ws", "bnd"]
    eager = eager_table([{**base, "layout": "banded"}])
    assert " bnd" in eager


def test_report_milestones_take_medians_by_layout_in_both_measures():
    """`--milestones`: a row per block size and op, a column per layout (in the issue's
    order), float16 / bfloat16 medians over the densities; bold only where every dtype meets
    the block size's milestone as printed (the weight gradient's own milestone); other
    shapes, densities and failed results left out. Against dense alone: dense ms x d /
    eager ms; in alternating rounds: d / paired ratio."""
    from bench.report import efficiency_alone, efficiency_paired, milestones_table

    def row(op, layout, dtype, d, eager_ms, dense_ms, paired, b=128, n=8192, **kw):
        return {"op": op, "layout": layout, "dtype": dtype, "b": b, "n": n, "c": 8192,
                "k": 8192, "density_target": d, "density": d, "cubsparse_eager_ms": eager_ms,
                "dense_ms": dense_ms, "paired_ratio": paired, "cubsparse_status": "ok",
                "cubsparse_err_ok": True, **kw}

    rows = [  # fp16 medians 0.92 alone (mean 0.78) / 0.80 paired (mean 0.87); bf16 0.88 / 0.84
        row("xw", "ws", "float16", 0.1, 0.10, 1.0, 0.125),    # 1.00, 0.80
        row("xw", "ws", "float16", 0.2, 0.20, 0.92, 0.25),    # 0.92, 0.80
        row("xw", "ws", "float16", 0.5, 0.50, 0.42, 0.5),     # 0.42, 1.00
        row("xw", "ws", "bfloat16", 0.1, 0.10, 0.88, 0.119),  # 0.88, 0.84
        row("xw", "random", "float16", 0.1, 0.10, 0.8954, 0.11),  # 0.8954: prints 0.90
        row("xw", "random", "bfloat16", 0.1, 0.10, 0.95, None),   # no paired figure
        row("sdd", "random", "float16", 0.1, 0.10, 0.87, 0.12),   # 0.87 >= 0.85, 0.83
        row("sdd", "random", "bfloat16", 0.1, 0.10, 0.86, 0.10),  # 0.86, 1.00
        row("xw", "random", "float32", 0.1, 0.10, 0.5, 0.5),     # not a milestone's dtype
        row("xw", "random", "float16", 0.1, 0.10, 0.1, 5.0, n=4096),       # another shape
        row("xw", "random", "float16", 0.02, 0.10, 0.1, 5.0),              # below 0.05
        row("xw", "random", "float16", 0.25, 0.10, 0.1, 5.0, cubsparse_err_ok=False),
        row("sdd", "ws", "float16", 0.25, 0.10, 0.1, 5.0, cubsparse_status="error: x"),
    ]
    alone = milestones_table(rows, efficiency_alone).splitlines()
    assert alone[0] == "| b | op | milestone | random | Watts-Strogatz |"
    assert alone[2] == "| 128 | `X @ W` | 0.90 | **0.90 / 0.95** | 0.92 / 0.88 |"
    assert alone[3] == "| 128 | weight gradient | 0.85 | **0.87 / 0.86** | - / - |"
    assert len(alone) == 4
    paired = milestones_table(rows, efficiency_paired).splitlines()
    assert paired[2] == "| 128 | `X @ W` | 0.90 | 0.91 / - | 0.80 / 0.84 |"
    assert paired[3] == "| 128 | weight gradient | 0.85 | 0.83 / 1.00 | - / - |"


def test_report_milestones_cli_takes_a_case_from_the_last_file(tmp_path, capsys):
    """`python -m bench.report --milestones A B`: both tables, and a case measured in both
    files counts from B only."""
    import gzip
    import json

    from bench.report import main

    def results(eager_ms, paired):
        r = {"case": "fp16-N8192-C8192-K8192-b64-d0.1-random", "op": "xw", "layout": "random",
             "dtype": "float16", "b": 64, "n": 8192, "c": 8192, "k": 8192,
             "density_target": 0.1, "density": 0.1, "cubsparse_eager_ms": eager_ms,
             "dense_ms": 1.0, "paired_ratio": paired, "cubsparse_status": "ok",
             "cubsparse_err_ok": True}
        return {"meta": {"gpu": "G"}, "rows": [r], "skipped": []}

    paths = []
    for i, res in enumerate([results(0.2, 0.25), results(0.125, 0.125)]):
        path = tmp_path / f"r{i}.json.gz"
        with gzip.open(path, "wt") as f:
            json.dump(res, f)
        paths.append(str(path))
    assert main(["--milestones", *paths, "--commit", "abc1234"]) == 0
    out = capsys.readouterr().out
    alone, rounds = out.split("in alternating rounds")
    assert "| 64 | `X @ W` | 0.75 | **0.80** |" in alone  # 1.0 x 0.1 / 0.125, not / 0.2
    assert "| 64 | `X @ W` | 0.75 | **0.80** |" in rounds  # 0.1 / 0.125, not / 0.25


def test_results_name_the_path_eager_calls_take(monkeypatch):
    # Without the compiled call path an eager loop of a short kernel times the Python
    # path's host time: the run's device line and header say which path ran.
    from bench.device import eager_path
    from cubsparse._cuda import fastcall

    monkeypatch.setattr(fastcall, "ENABLED", False)
    assert eager_path() == "python"
    monkeypatch.setattr(fastcall, "ENABLED", True)
    monkeypatch.setattr(fastcall, "PDL", False)
    assert eager_path() == "compiled, no dependent launch"
    monkeypatch.setattr(fastcall, "PDL", True)
    assert eager_path() == "compiled"
    res = {"meta": {"gpu": "NVIDIA H200", "eager_path": "python"}, "rows": [], "files": {}}
    device_line = [ln for ln in report.run_footer(res).splitlines()
                   if ln.startswith("device:")]
    assert len(device_line) == 1
    assert device_line[0].endswith("| eager calls: python")
    assert "| eager calls | python |" in report.render(res)
