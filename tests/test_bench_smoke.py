"""The benchmark suite end to end on the CPU backend (tiny cases): cases, timing, peers
recorded as unavailable, JSON/CSV output and the report all hold together."""

from __future__ import annotations

import bench


def test_bench_smoke(tmp_path):
    bench.smoke(tmp_path)
    written = {p.suffix for p in tmp_path.rglob("*") if p.is_file()}
    assert {".json", ".csv"} <= written
