"""The scripts in examples/ run end to end at their smallest size on the CPU backend."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load_example(name: str):
    """Import ``examples/<name>.py`` as a module (examples/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"examples_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs: dataclasses look their module up in sys.modules.
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[spec.name]
        raise
    return module


@pytest.fixture(scope="module")
def sparse_vs_dense():
    return load_example("sparse_vs_dense")


def matplotlib_available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def test_sparse_vs_dense_tiny(sparse_vs_dense, tmp_path, capsys):
    plot = tmp_path / "loss.png"
    history = sparse_vs_dense.main(
        ["--size", "tiny", "--backend", "cpu", "--plot", str(plot)]
    )
    out = capsys.readouterr().out

    epochs = history["settings"]["epochs"]
    for name in ("dense", "sparse"):
        h = history[name]
        for kind in ("train", "test"):
            losses = h[kind]
            assert len(losses) == epochs, (name, kind, losses)
            assert all(math.isfinite(v) for v in losses), (name, kind, losses)
            assert losses[0] > losses[-1], (name, kind, losses)

    dense, sparse = history["dense"]["params"], history["sparse"]["params"]
    assert abs(sparse - dense) / dense < 0.02, (dense, sparse)
    # The counts and the settings are printed, so that a run can be judged and repeated.
    assert f"{dense:,} parameters" in out
    assert f"{sparse:,} parameters" in out
    assert "seed 0" in out
    assert "final test loss:" in out
    # One progress line per epoch.
    assert sum(line.lstrip().startswith(f"{e} |") for e in range(1, epochs + 1)
               for line in out.splitlines()) == epochs

    if matplotlib_available():
        assert plot.is_file()
        assert plot.stat().st_size > 0
        assert f"plot saved to {plot}" in out
    else:
        assert not plot.exists()
        assert "matplotlib is not importable" in out


def test_sparse_vs_dense_same_seed_same_losses(sparse_vs_dense, capsys):
    # Everything random comes from --seed: a second run repeats the numbers exactly.
    argv = ["--size", "tiny", "--backend", "cpu", "--epochs", "1"]
    first = sparse_vs_dense.main(argv)
    second = sparse_vs_dense.main(argv)
    capsys.readouterr()
    for name in ("dense", "sparse"):
        assert first[name]["train"] == second[name]["train"]
        assert first[name]["test"] == second[name]["test"]


def test_sparse_vs_dense_matching_width(sparse_vs_dense):
    # The dense width solved for gives the parameter count nearest to the target.
    cfg = sparse_vs_dense.SIZES["tiny"]

    def count(h: int) -> int:
        return sparse_vs_dense.dense_mlp(h, cfg, 0, np).count()

    for target in (5_000, 15_236, 200_000):
        h = sparse_vs_dense.matching_dense_width(target, cfg)
        assert abs(count(h) - target) <= min(abs(count(h - 1) - target),
                                             abs(count(h + 1) - target)), (target, h)
