"""examples/ddp_train.py: DDP training of BlockSparseLinear layers on the CPU (gloo).

Two processes under torchrun must end with bitwise identical weights and see the same
global batches as one process with a twice larger batch; a weight nudged by one ulp on one
rank must stop the run. The same runs over NCCL on two GPUs skip visibly with fewer.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import two_gpus

torch = pytest.importorskip("torch")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch.distributed with the gloo backend is not available",
                allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "examples" / "ddp_train.py"
# Tiny: 64-wide hidden layers of 4 x 4 blocks of 16, 5 steps.
TINY = ["--device", "cpu", "--steps", "5", "--width", "64", "--blocksize", "16",
        "--degree", "2", "--seed", "0", "--log-every", "1"]
PER_RANK = 8


@pytest.fixture(scope="module")
def ddp_train():
    spec = importlib.util.spec_from_file_location("examples_ddp_train", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def torchrun(tmp: Path, *extra: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Two processes under torchrun (--standalone: a free rendezvous port), on the CPU
    unless ``extra`` says ``--device cuda``."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    env["OMP_NUM_THREADS"] = "1"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           "--nproc-per-node=2", str(SCRIPT), *TINY, *extra]
    return subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ddp")
    proc = torchrun(tmp, "--per-gpu-batch", str(PER_RANK), "--json", str(tmp / "result.json"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc, json.loads((tmp / "result.json").read_text())


@pytest.fixture(scope="module")
def one_rank(ddp_train):
    """The same run in this process, world size 1, with the global batch of two ranks."""
    saved = {k: os.environ.pop(k) for k in ("RANK", "WORLD_SIZE") if k in os.environ}
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            result = ddp_train.main([*TINY, "--per-gpu-batch", str(2 * PER_RANK)])
    finally:
        os.environ.update(saved)
    assert not torch.distributed.is_initialized()  # main tears its process group down
    return out.getvalue(), result


def test_two_ranks_end_identical(two_ranks):
    proc, result = two_ranks
    assert "weights identical on all 2 ranks after 5 steps (5 checks" in proc.stdout
    assert "world size 2, backend gloo" in proc.stdout
    assert proc.stdout.count("weights identical") == 1  # only rank 0 prints
    assert result["world_size"] == 2
    assert result["backend"] == "gloo"
    assert result["steps"] == 5
    assert len(result["checksums"]) == 2
    assert result["checksums"][0] == result["checksums"][1]
    assert result["identical"] is True
    assert len(result["losses"]) == 5
    assert all(math.isfinite(v) for v in result["losses"])
    assert result["samples_per_s"] > 0


def test_world_size_one_in_process(one_rank):
    out, result = one_rank
    assert "world size 1, backend gloo" in out
    assert "weights identical on all 1 ranks after 5 steps" in out
    assert result["world_size"] == 1
    assert result["identical"] is True
    assert len(result["checksums"]) == 1
    assert len(result["losses"]) == 5
    assert all(math.isfinite(v) for v in result["losses"])


def test_shards_make_the_global_batch(two_ranks, one_rank):
    # Two ranks of 8 see the same 16 examples per step as one rank of 16, and DDP's mean of
    # the two shards' gradients is the gradient of the 16's mean loss: the same training,
    # up to float32 rounding (the sums are grouped differently).
    two, one = two_ranks[1]["losses"], one_rank[1]["losses"]
    for a, b in zip(two, one, strict=True):
        assert a == pytest.approx(b, rel=1e-5)


@two_gpus
def test_two_gpus_over_nccl_train_like_one_with_the_whole_batch(tmp_path, ddp_train):
    if not torch.distributed.is_nccl_available():
        pytest.skip("this torch has no NCCL backend")
    gpu = ["--device", "cuda", "--check-every", "1"]
    # (the first launch compiles the kernels: a longer limit than on the CPU)
    proc = torchrun(tmp_path, *gpu, "--per-gpu-batch", str(PER_RANK), "--json",
                    str(tmp_path / "result.json"), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "world size 2, backend nccl" in proc.stdout
    assert "weights identical on all 2 ranks after 5 steps (5 checks" in proc.stdout
    two = json.loads((tmp_path / "result.json").read_text())
    assert two["backend"] == "nccl"
    assert two["identical"] is True
    assert two["checksums"][0] == two["checksums"][1]
    saved = {k: os.environ.pop(k) for k in ("RANK", "WORLD_SIZE") if k in os.environ}
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            one = ddp_train.main([*TINY, *gpu, "--per-gpu-batch", str(2 * PER_RANK)])
    finally:
        os.environ.update(saved)
    assert two["losses"] == pytest.approx(one["losses"], rel=1e-4)
    assert one["losses"][-1] != one["losses"][0]  # it trained
    # and a rank whose weights drift by one ulp stops the run on GPUs too
    broken = torchrun(tmp_path, *gpu, "--per-gpu-batch", str(PER_RANK), "--break-rank", "1",
                      timeout=300)
    assert broken.returncode != 0
    assert "weights differ across ranks after step 1: rank(s) [1]" in broken.stderr


def test_check_identical_raises_on_a_difference(ddp_train):
    ddp_train.check_identical([7, 7, 7], step=3)  # equal: no error
    with pytest.raises(RuntimeError, match=r"after step 3: rank\(s\) \[2\] disagree"):
        ddp_train.check_identical([7, 7, 8], step=3)
    with pytest.raises(RuntimeError, match=r"rank\(s\) \[1, 2\]"):
        ddp_train.check_identical([-1, 0, 5], step=3)


def test_checksum_sees_one_ulp(ddp_train):
    model = ddp_train.make_model(64, 16, 2, seed=0)
    before = ddp_train.checksum(model)
    assert ddp_train.checksum(ddp_train.make_model(64, 16, 2, seed=0)) == before  # same seed
    w = model[2].weight.data.view(-1)[5:6]
    old = w.clone()
    w.copy_(torch.nextafter(w, w + 1))
    assert ddp_train.checksum(model) != before
    w.copy_(old)
    assert ddp_train.checksum(model) == before


def test_a_diverged_rank_stops_the_run(tmp_path):
    proc = torchrun(tmp_path, "--per-gpu-batch", str(PER_RANK), "--break-rank", "1")
    assert proc.returncode != 0
    assert "weights differ across ranks after step 1: rank(s) [1]" in proc.stderr
    assert "weights identical" not in proc.stdout


def test_scaling_degree_gives_the_density():
    from bench.scaling import degree_for

    # hidden 12288 in blocks of 32: 384 block rows, 18 neighbours + the diagonal = 0.049
    assert degree_for(0.05, 12288, 32) == 18
    assert degree_for(0.25, 64, 16) == 2  # never below 2 (a ring needs two neighbours)


def test_scaling_benchmark_on_cpu_processes(tmp_path, capsys):
    from bench import scaling

    rows = scaling.main(["--device", "cpu", "--gpus", "2,1", "--width", "64", "--blocksize",
                         "16", "--density", "0.25", "--per-gpu-batch", "8", "--steps", "3",
                         "--warmup", "1", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert [r["gpus"] for r in rows] == [1, 2]
    assert rows[0]["efficiency"] == 1.0
    assert all(r["identical"] and r["samples_per_s"] > 0 for r in rows)
    assert 0 < rows[1]["efficiency"] == rows[1]["samples_per_s"] / (2 * rows[0]["samples_per_s"])
    saved = json.loads((tmp_path / "scaling_cpu.json").read_text())
    assert saved["rows"] == rows
    assert "data-parallel scaling on cpu" in out


def test_scaling_skips_gpu_counts_not_visible(monkeypatch, capsys):
    from bench import scaling

    monkeypatch.setattr(scaling, "visible_gpus", lambda device: 1)
    monkeypatch.setattr(scaling, "run_one", lambda g, args, path: {
        "samples_per_s": 100.0, "identical": True, "density": 0.05, "seconds": 1.0,
        "wall_s": 2.0, "device_name": "a stand-in GPU"})
    rows = scaling.main(["--gpus", "1,2,4"])
    assert rows[0]["efficiency"] == 1.0
    assert [r.get("skipped") for r in rows[1:]] == ["1 GPU(s) visible"] * 2
    assert "4  skipped: 1 GPU(s) visible" in capsys.readouterr().out


def test_scaling_keeps_measured_rows_when_a_launch_fails(monkeypatch, capsys):
    from bench import scaling

    def run_one(g, args, path):
        if g == 2:
            raise RuntimeError("2 process(es) failed (exit 1):\nNCCL error")
        return {"samples_per_s": 100.0, "identical": True, "density": 0.05, "seconds": 1.0,
                "wall_s": 2.0, "device_name": "a stand-in GPU"}

    monkeypatch.setattr(scaling, "visible_gpus", lambda device: 4)
    monkeypatch.setattr(scaling, "run_one", run_one)
    rows = scaling.main(["--gpus", "1,2,4"])
    assert [r["gpus"] for r in rows] == [1, 2, 4]
    assert rows[1]["skipped"] == "failed: 2 process(es) failed (exit 1):"
    assert rows[2]["efficiency"] == 100.0 / (4 * 100.0)
    assert "NCCL error" in capsys.readouterr().err
