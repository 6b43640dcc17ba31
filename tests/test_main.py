"""The ``python -m cubsparse`` demo: runs, checks the three products, reports failures."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from cubsparse import _dtypes
from cubsparse.__main__ import LAYOUTS, main

# Tiny problems: 4 x 4 blocks of 16, a batch of 8, one timed run.
TINY = ["--n", "8", "--c", "64", "--blocksize", "16", "--density", "0.5", "--repeats", "1"]
CALLS = ("matmul(X, W)", "matmul(dY, W.T)", "sampled_matmul(X.T, dY, like=W)")


def result_rows(text: str) -> dict[str, str]:
    """The verdict column of the results table, keyed by the cubsparse call."""
    rows = {}
    for line in text.splitlines():
        m = re.match(r"^(?:Y |dX|dW) = (\S.*?\))\s.*\s(PASS|FAIL)$", line)
        if m:
            rows[m.group(1)] = m.group(2)
    return rows


@pytest.mark.parametrize("layout", LAYOUTS)
def test_demo_passes(backend, layout, capsys):
    status = main(["--backend", backend, "--layout", layout, *TINY])
    out = capsys.readouterr().out
    assert status == 0, out
    assert result_rows(out) == dict.fromkeys(CALLS, "PASS"), out
    assert "PASS: all 3 products match SciPy BSR" in out
    assert "[5/5] timing" in out


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_demo_dtypes(dtype, capsys):
    if dtype == "bfloat16" and _dtypes.bfloat16 is None:
        pytest.skip("bfloat16 needs ml_dtypes")
    status = main(["--backend", "cpu", "--dtype", dtype, "--k", "32", *TINY])
    out = capsys.readouterr().out
    assert status == 0, out
    assert result_rows(out) == dict.fromkeys(CALLS, "PASS"), out


def test_demo_reports_failure(monkeypatch, capsys):
    # No float32 result is exact, so a zero tolerance must fail all three checks.
    monkeypatch.setitem(_dtypes.TOLERANCE, "float32", 0.0)
    status = main(["--backend", "cpu", *TINY])
    out = capsys.readouterr().out
    assert status == 1
    assert result_rows(out) == dict.fromkeys(CALLS, "FAIL"), out
    assert out.splitlines()[-1].startswith("FAIL: ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--layout", "barabasi_albert", "--k", "128"], "C and K must be equal"),
        (["--layout", "watts_strogatz", "--k", "128"], "C and K must be equal"),
        (["--c", "72"], "--c must be a multiple of --blocksize 16"),
        (["--density", "0"], "--density must be in (0, 1]"),
        (["--blocksize", "24"], "invalid choice"),
        (["--seed", "-1"], "--seed must be a non-negative integer, got -1"),
        (["--repeats", "0"], "--repeats must be >= 1, got 0"),
    ],
    ids=["ba-not-square", "ws-not-square", "c-not-multiple", "density-zero", "blocksize-24",
         "seed-negative", "repeats-zero"],
)
def test_demo_usage_errors(args, message, capsys):
    with pytest.raises(SystemExit) as info:
        main(["--backend", "cpu", *TINY, *args])
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_help_shows_real_defaults(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert "None" not in out
    assert "(default: 256 on CPU, 4096 on CUDA)" in out
    assert "(default: float32 on CPU, float16 on CUDA)" in out
    assert "(default: 0.25)" in out


def test_cpu_demo_says_it_is_the_reference(capsys):
    assert main(["--backend", "cpu", *TINY]) == 0
    out = capsys.readouterr().out
    assert "The CPU backend is the reference implementation" in out


def test_python_dash_m():
    proc = subprocess.run(
        [sys.executable, "-m", "cubsparse", "--backend", "cpu", *TINY],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert result_rows(proc.stdout) == dict.fromkeys(CALLS, "PASS"), proc.stdout
