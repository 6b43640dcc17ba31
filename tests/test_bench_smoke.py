"""The benchmark suite end to end on the CPU backend (tiny cases): cases, timing, peers
recorded as unavailable, JSON/CSV output and the report all hold together."""

from __future__ import annotations

import bench


def test_bench_smoke(tmp_path):
    bench.smoke(tmp_path)
    written = {p.suffix for p in tmp_path.rglob("*") if p.is_file()}
    assert {".json", ".csv"} <= written


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
