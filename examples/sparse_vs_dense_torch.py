"""The PyTorch twin of ``sparse_vs_dense.py``: wider and block-sparse against dense, in torch.

``sparse_vs_dense.py`` compares two ReLU MLPs with the same number of parameters on a
teacher-student regression it generates: a dense one of hidden width ``h`` and a wider
one, of width ``H``, whose ``width -> width`` layers are block-sparse. It writes
backpropagation and Adam out in NumPy/CuPy array code. This script trains the same two
students on the same task with PyTorch doing that work instead:

* the dense student is ``torch.nn.Linear`` layers with ReLUs between them;
* the block-sparse student's hidden layers are :class:`cubsparse.torch.BlockSparseLinear`
  (its input and output layers are ``torch.nn.Linear``), so autograd runs cubsparse's
  three products and ``torch.optim.Adam`` updates the stored blocks;
* the loss is ``mse_loss``; the per-epoch table, the final lines and ``--plot`` are
  those of the NumPy example.

"The same" is meant literally. The settings (``SIZES``), the teacher and its data, the
Watts-Strogatz block layouts, the dense width solved for, the initial weights and the
batch order all come from ``sparse_vs_dense.py`` (loaded from this directory), so the two
scripts differ only in who computes the gradients and the Adam steps; their losses
agree to float32 rounding at first (torch's Adam also adds its ``eps`` after the bias
correction, not before) and drift apart slowly after that.

``python examples/sparse_vs_dense_torch.py --help`` lists the options. ``--size tiny
--device cpu`` runs in a few seconds; ``--size small --device cpu`` (the default size) in
about a minute and a half on two CPU cores; ``--size real --device cuda`` is meant for a
GPU (CUDA tensors; cubsparse's CUDA backend needs CuPy). ``--device`` defaults to cuda
where torch sees a GPU. Everything random comes from ``--seed``.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from cubsparse.torch import BlockSparseLinear


def load_numpy_example():
    """Import ``sparse_vs_dense.py`` from this file's directory (examples/ is no package)."""
    name = "sparse_vs_dense"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before it runs: its dataclass looks the module up there
    spec.loader.exec_module(module)
    return module


sd = load_numpy_example()
Settings, SIZES = sd.Settings, sd.SIZES  # the same sizes as the NumPy example


# --------------------------------------------------------------------------- models


def to_torch(model, device: torch.device) -> torch.nn.Sequential:
    """The NumPy example's ``MLP`` as torch modules holding the same initial values."""
    modules = []
    for layer in model.layers:
        if isinstance(layer, sd.BlockSparse):
            w = layer.w  # a BlockSparseMatrix of a Watts-Strogatz block layout
            module = BlockSparseLinear(w.shape[0], w.shape[1], w.layout, w.blocksize,
                                       bias=True, device=device, dtype=torch.float32)
            # Both store the blocks as (nnzb, b, b) in BSR order of the same layout.
            weight = torch.from_numpy(w.data)
        else:
            module = torch.nn.Linear(*layer.w.shape, device=device, dtype=torch.float32)
            weight = torch.from_numpy(layer.w).T  # nn.Linear keeps W as (out, in)
        with torch.no_grad():
            module.weight.copy_(weight)
            module.bias.copy_(torch.from_numpy(layer.b))
        modules += [module, torch.nn.ReLU()]
    return torch.nn.Sequential(*modules[:-1])  # no ReLU after the output layer


def count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def describe(name: str, model: torch.nn.Sequential) -> str:
    """One line, as the NumPy example prints it: the parameter count and the layers."""
    shapes = []
    for m in model:
        if isinstance(m, BlockSparseLinear):
            density = m.nnzb / m.structure.layout.size
            shapes.append(f"[{m.in_features}x{m.out_features} block-sparse, "
                          f"b={m.blocksize}, density {density:.3f}]")
        elif isinstance(m, torch.nn.Linear):
            shapes.append(f"{m.in_features}x{m.out_features}")
    return f"{name:<17}{count(model):>11,} parameters: " + " -> ".join(shapes)


# --------------------------------------------------------------------------- training


def clock(device: torch.device) -> float:
    """``time.perf_counter()`` once the GPU is done: CUDA kernels run asynchronously."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def train_epoch(model, opt, x, y, order, batch: int) -> float:
    """One pass in the order ``order``; the mean of the batches' losses before their steps."""
    total = torch.zeros((), device=x.device)  # a tensor: no device-to-host copy per step
    steps = 0
    for start in range(0, len(order) - batch + 1, batch):
        idx = order[start : start + batch]
        loss = F.mse_loss(model(x[idx]), y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        total += loss.detach()
        steps += 1
    return total.item() / steps


@torch.no_grad()
def mse(model, x, y, batch: int = 4096) -> float:
    """Mean squared error over a whole data set, evaluated in batches."""
    total = sum(F.mse_loss(model(x[s : s + batch]), y[s : s + batch], reduction="sum")
                for s in range(0, len(x), batch))
    return float(total) / y.numel()


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="PyTorch version of sparse_vs_dense.py: train a dense MLP and a wider "
        "block-sparse MLP (BlockSparseLinear) of the same parameter count and compare them."
    )
    p.add_argument("--device", choices=["cpu", "cuda"],
                   default="cuda" if torch.cuda.is_available() else "cpu",
                   help="where the tensors live (default cuda if torch sees a GPU, else cpu)")
    sd.add_run_options(p)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict:
    """Train both students and print their losses per epoch.

    Returns the history in the NumPy example's shape: ``history["dense"]`` and
    ``history["sparse"]`` with ``"params"``, ``"train"``, ``"test"`` and ``"label"``, and
    ``history["settings"]``.
    """
    args = parse_args(argv)
    cfg = sd.run_settings(args)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no GPU")
    device = torch.device(args.device)

    print(f"size {args.size}, device {args.device}, seed {args.seed}, torch {torch.__version__}")
    print("settings: " + ", ".join(f"{k}={v}" for k, v in dataclasses.asdict(cfg).items()))
    start = time.perf_counter()
    # The teacher is evaluated with NumPy on the CPU, CuPy on a GPU (the real size's data
    # is a lot of arithmetic); DLPack hands the arrays to torch without a copy.
    data = sd.make_data(cfg, sd.array_module(args.device), args.seed)
    x_train, y_train, x_test, y_test = (torch.from_dlpack(a) for a in data)
    print(f"data: {cfg.train:,} training and {cfg.test:,} test examples labelled by the "
          f"teacher in {time.perf_counter() - start:.1f} s")

    sparse = to_torch(sd.sparse_mlp(cfg, args.seed, "cpu", np), device)
    h = sd.matching_dense_width(count(sparse), cfg)
    dense = to_torch(sd.dense_mlp(h, cfg, args.seed, np), device)
    models = {"dense": dense, "sparse": sparse}
    history = sd.start_history(cfg, h, describe("dense MLP", dense), count(dense),
                               describe("block-sparse MLP", sparse), count(sparse),
                               size=args.size, device=args.device, seed=args.seed)
    opts = {name: torch.optim.Adam(m.parameters(), lr=cfg.lr) for name, m in models.items()}
    order_rng = np.random.default_rng([args.seed, 5])  # the NumPy example's batch order

    print("\nmean squared error per epoch (train: mean over the epoch's batches; test: "
          "held-out set after the epoch)")
    print("epoch | dense train    test | sparse train    test | seconds dense, sparse")
    for epoch in range(1, cfg.epochs + 1):
        order = torch.from_numpy(order_rng.permutation(cfg.train)).to(device)  # both alike
        row, seconds = [], []
        for name, model in models.items():
            t0 = clock(device)
            losses = history[name]
            losses["train"].append(train_epoch(model, opts[name], x_train, y_train, order,
                                               cfg.batch))
            losses["test"].append(mse(model, x_test, y_test))
            seconds.append(f"{clock(device) - t0:>7.1f}")
            row.append(f"{losses['train'][-1]:>{len(name) + 6}.4f} {losses['test'][-1]:>7.4f}")
        print(f"{epoch:>5} | " + " | ".join(row) + " | " + " ".join(seconds), flush=True)

    sd.finish(history, args.plot, f"PyTorch, size {args.size}, seed {args.seed}")
    return history


if __name__ == "__main__":
    main()
