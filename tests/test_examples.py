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


def assert_plot(plot, out: str) -> None:
    """The plot is saved and said so, or, without matplotlib, the script says why not."""
    if matplotlib_available():
        assert plot.is_file()
        assert plot.stat().st_size > 0
        assert f"plot saved to {plot}" in out
    else:
        assert not plot.exists()
        assert "matplotlib is not importable" in out


def epoch_lines(out: str, epochs: int) -> int:
    """How many lines of ``out`` are progress lines ``<epoch> | ...``."""
    return sum(line.lstrip().startswith(f"{e} |") for e in range(1, epochs + 1)
               for line in out.splitlines())


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
    assert epoch_lines(out, epochs) == epochs

    assert_plot(plot, out)


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


# ------------------------------------------------------------------ the PyTorch twin


@pytest.fixture(scope="module")
def sparse_vs_dense_torch():
    pytest.importorskip("torch")
    return load_example("sparse_vs_dense_torch")


def numpy_counts(sparse_vs_dense, size: str) -> tuple[int, int]:
    """(dense, sparse) parameter counts of the NumPy example's two students."""
    cfg = sparse_vs_dense.SIZES[size]
    sparse = sparse_vs_dense.sparse_mlp(cfg, 0, "cpu", np).count()
    h = sparse_vs_dense.matching_dense_width(sparse, cfg)
    return sparse_vs_dense.dense_mlp(h, cfg, 0, np).count(), sparse


def test_sparse_vs_dense_torch_tiny(sparse_vs_dense_torch, sparse_vs_dense, tmp_path, capsys):
    plot = tmp_path / "loss.png"
    history = sparse_vs_dense_torch.main(
        ["--size", "tiny", "--device", "cpu", "--plot", str(plot)]
    )
    out = capsys.readouterr().out

    epochs = history["settings"]["epochs"]
    assert epochs == sparse_vs_dense.SIZES["tiny"].epochs
    assert history["settings"]["device"] == "cpu"
    for name in ("dense", "sparse"):
        for kind in ("train", "test"):
            losses = history[name][kind]
            assert len(losses) == epochs, (name, kind, losses)
            assert all(math.isfinite(v) for v in losses), (name, kind, losses)
            assert losses[0] > losses[-1], (name, kind, losses)

    dense, sparse = history["dense"]["params"], history["sparse"]["params"]
    assert abs(sparse - dense) / dense < 0.02, (dense, sparse)
    # The same students as the NumPy example's: the same widths, so the same counts.
    assert (dense, sparse) == numpy_counts(sparse_vs_dense, "tiny")

    assert "size tiny, device cpu, seed 0" in out
    assert "settings: inputs=16," in out
    # The NumPy example's layout of these lines, with the torch modules' counts.
    assert f"{'dense MLP':<17}{dense:>11,} parameters: 16x" in out
    assert (f"{'block-sparse MLP':<17}{sparse:>11,} parameters: 16x128 -> "
            "[128x128 block-sparse, b=16") in out
    assert "final training loss: dense " in out
    assert "final test loss:     dense " in out
    assert epoch_lines(out, epochs) == epochs

    assert_plot(plot, out)


def test_sparse_vs_dense_torch_same_seed_same_losses(sparse_vs_dense_torch, capsys):
    argv = ["--size", "tiny", "--device", "cpu", "--epochs", "1"]
    first = sparse_vs_dense_torch.main(argv)
    second = sparse_vs_dense_torch.main(argv)
    other_seed = sparse_vs_dense_torch.main([*argv, "--seed", "1"])
    capsys.readouterr()
    for name in ("dense", "sparse"):
        assert first[name]["train"] == second[name]["train"]
        assert first[name]["test"] == second[name]["test"]
        # The seed does reach the run: another one gives other numbers.
        assert first[name]["test"] != other_seed[name]["test"]


def test_sparse_vs_dense_torch_matches_numpy(sparse_vs_dense_torch, sparse_vs_dense, capsys):
    # The same data, initial weights and batches as the NumPy example: after one epoch the
    # losses differ only by float32 rounding (and where torch's Adam adds its eps).
    argv = ["--size", "tiny", "--epochs", "1"]
    torch_run = sparse_vs_dense_torch.main([*argv, "--device", "cpu"])
    numpy_run = sparse_vs_dense.main([*argv, "--backend", "cpu"])
    capsys.readouterr()
    for name in ("dense", "sparse"):
        for kind in ("train", "test"):
            assert torch_run[name][kind] == pytest.approx(numpy_run[name][kind], rel=1e-3)
