"""Wider and block-sparse against narrower and dense, at the same parameter count.

The 2017 block-sparse claim (Gray, Radford and Kingma, "GPU Kernels for Block-Sparse
Weights") is that, for a fixed number of parameters, a network whose layers are *wider but
block-sparse* learns better than a dense one. This script puts that claim to a small test
on a task it generates itself (nothing is downloaded):

* **Data.** Inputs ``x`` are standard normal vectors; targets are the outputs of a fixed,
  randomly drawn *teacher*, a dense tanh MLP twice as wide as the wider student, so that
  more hidden units can help. Targets are standardised, so predicting zero (the mean)
  scores a loss of about 1.0. There is a fixed training set and a held-out test set.
* **Students.** Two ReLU MLPs with the same layer pattern ``inputs -> width -> width ->
  width -> outputs``, trained with the same Adam settings on the same batches:

  - *dense*: every layer is a plain ``x @ W + b`` (NumPy or CuPy) of width ``h``;
  - *block-sparse*: the ``width -> width`` layers hold a :class:`cubsparse.BlockSparseMatrix`
    with a Watts-Strogatz small-world block layout (:func:`cubsparse.layouts.watts_strogatz`)
    of density ``d``, at a width ``H`` of about ``h / sqrt(d)``. Its input and output
    layers stay dense.

  ``h`` is solved for so that both students have the same number of parameters.

The block-sparse layers use cubsparse's three products: ``x @ W`` (forward),
``dy @ W.T`` (input gradient) and ``cs.sampled_matmul(x.T, dy, like=W)`` (the weight
gradient, computed on W's stored blocks only). Backpropagation and Adam are written out
below in array code.

``python examples/sparse_vs_dense.py --help`` lists the options. ``--size tiny`` runs in
about a second on a CPU, ``--size small`` (the default) in one to two minutes, and
``--size real --backend cuda`` is meant for a GPU (CuPy arrays). Everything random comes
from ``--seed``.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
import time
from collections.abc import Sequence

import numpy as np

import cubsparse as cs

# --------------------------------------------------------------------------- settings


@dataclasses.dataclass(frozen=True)
class Settings:
    """Every setting of a run. They are all printed at the start, so a run can be repeated."""

    inputs: int  # length of an input vector x
    outputs: int  # length of a target vector y
    teacher_width: int  # hidden width of the teacher that makes the targets
    teacher_layers: int  # hidden (tanh) layers of the teacher
    width: int  # H, hidden width of the block-sparse student
    hidden_layers: int  # width -> width layers: block-sparse in one student, dense in the other
    blocksize: int  # b, side of a square block
    degree: int  # k, Watts-Strogatz neighbours of a block row on the ring (even)
    rewire: float  # p, Watts-Strogatz rewiring probability
    train: int  # training examples
    test: int  # held-out examples
    batch: int  # examples per Adam step
    epochs: int  # passes over the training set
    lr: float  # Adam learning rate, the same for both students


SIZES = {
    # About a second on a CPU: for the test suite and a first look.
    "tiny": Settings(
        inputs=16, outputs=4, teacher_width=256, teacher_layers=2, width=128,
        hidden_layers=2, blocksize=16, degree=2, rewire=0.1, train=2048, test=1024,
        batch=64, epochs=5, lr=2e-3,
    ),
    # One to two minutes on a 2-core CPU. The training set holds 5x more target values
    # than either student has parameters (see examples/README.md for a smaller one).
    "small": Settings(
        inputs=32, outputs=8, teacher_width=1024, teacher_layers=2, width=512,
        hidden_layers=2, blocksize=16, degree=4, rewire=0.1, train=65536, test=4096,
        batch=128, epochs=20, lr=1e-3,
    ),
    # A GPU: about 11 M parameters a student, 2 M training examples (6 target values per
    # parameter); about 2.5 minutes on an H100 (see examples/README.md for a run).
    "real": Settings(
        inputs=128, outputs=32, teacher_width=16384, teacher_layers=2, width=8192,
        hidden_layers=2, blocksize=64, degree=8, rewire=0.1, train=2097152, test=16384,
        batch=1024, epochs=8, lr=1e-3,
    ),
}


def array_module(backend: str):
    """NumPy for the CPU backend, CuPy for the CUDA one."""
    if backend == "cuda":
        import cupy

        return cupy
    return np


# --------------------------------------------------------------------------- data


def make_data(cfg: Settings, xp, seed: int):
    """Draw a teacher network, then a training and a test set labelled by it.

    Returns
    -------
    x_train, y_train, x_test, y_test : arrays of ``xp``, float32
        Inputs of shape ``(n, cfg.inputs)`` and standardised targets ``(n, cfg.outputs)``.

    Notes
    -----
    The teacher's weights and the inputs are drawn on the host with NumPy, so both
    backends see the same numbers; the teacher is *evaluated* with ``xp``, since at the
    real size that is a lot of arithmetic.
    """
    rng = np.random.default_rng([seed, 1])
    dims = [cfg.inputs] + [cfg.teacher_width] * cfg.teacher_layers + [cfg.outputs]
    # 1/sqrt(fan_in) gives each tanh inputs of about unit variance: the teacher neither
    # saturates into a step function nor stays nearly linear (too easy for any student).
    teacher = [
        xp.asarray(rng.standard_normal((m, n), dtype=np.float32) / np.float32(math.sqrt(m)))
        for m, n in itertools.pairwise(dims)
    ]
    x = xp.asarray(rng.standard_normal((cfg.train + cfg.test, cfg.inputs), dtype=np.float32))
    y = []
    for start in range(0, x.shape[0], 16384):  # in chunks: bounded temporary memory
        a = x[start : start + 16384]
        for w in teacher[:-1]:
            a = xp.tanh(a @ w)
        y.append(a @ teacher[-1])
    y = xp.concatenate(y)
    # Standardise each target with the training set's statistics.
    y = (y - y[: cfg.train].mean(axis=0)) / y[: cfg.train].std(axis=0)
    return x[: cfg.train], y[: cfg.train], x[cfg.train :], y[cfg.train :]


# --------------------------------------------------------------------------- models
#
# A layer has forward(x) -> y, backward(dy) -> dx (which also stores the gradients of its
# parameters), params() and grads() (matching lists of arrays, for the optimiser) and
# count() (its number of parameters).


class Dense:
    """``y = x @ W + b`` with plain NumPy or CuPy arrays."""

    def __init__(self, fan_in: int, fan_out: int, rng: np.random.Generator, xp):
        # He initialisation: keeps the activations' scale through the ReLUs.
        w = rng.standard_normal((fan_in, fan_out), dtype=np.float32)
        self.w = xp.asarray(w * np.float32(math.sqrt(2.0 / fan_in)))
        self.b = xp.zeros(fan_out, dtype=np.float32)

    def forward(self, x):
        self.x = x  # kept for the weight gradient
        return x @ self.w + self.b

    def backward(self, dy):
        self.dw = self.x.T @ dy
        self.db = dy.sum(axis=0)
        return dy @ self.w.T

    def params(self):
        return [self.w, self.b]

    def grads(self):
        return [self.dw, self.db]

    def count(self) -> int:
        return int(self.w.size + self.b.size)


class BlockSparse:
    """``y = x @ W + b`` with a square block-sparse ``W`` of small-world block layout."""

    def __init__(self, cfg: Settings, seed, backend: str, xp):
        layout = cs.layouts.watts_strogatz(
            cfg.width // cfg.blocksize, cfg.degree, cfg.rewire, seed=seed
        )
        # from_layout draws N(0, 1/fan_in), fan_in counting only the inputs that feed an
        # output through stored blocks; sqrt(2) more makes it He initialisation, as in Dense.
        self.w = cs.BlockSparseMatrix.from_layout(layout, cfg.blocksize, seed=seed,
                                                  backend=backend)
        self.w *= math.sqrt(2.0)
        self.b = xp.zeros(cfg.width, dtype=np.float32)

    def forward(self, x):
        self.x = x
        return x @ self.w + self.b  # cubsparse: dense @ block-sparse

    def backward(self, dy):
        # x.T @ dy on W's stored blocks only: the dense (width x width) product is never formed.
        self.dw = cs.sampled_matmul(self.x.T, dy, like=self.w)
        self.db = dy.sum(axis=0)
        return dy @ self.w.T  # cubsparse: dense @ transposed block-sparse

    def params(self):
        # W.data is the (nnzb, b, b) array of the stored blocks; the optimiser updates it
        # in place, so the layout never changes.
        return [self.w.data, self.b]

    def grads(self):
        return [self.dw.data, self.db]

    def count(self) -> int:
        return int(self.w.nnz + self.b.size)


class MLP:
    """A stack of layers with a ReLU after each but the last."""

    def __init__(self, layers):
        self.layers = layers

    def forward(self, x):
        self.masks = []  # where each ReLU let its input through, for the backward pass
        for layer in self.layers[:-1]:
            x = layer.forward(x)
            mask = x > 0
            self.masks.append(mask)
            x = x * mask
        return self.layers[-1].forward(x)

    def backward(self, dout):
        """Backpropagate ``dout = dloss/doutput``; every layer stores its gradients."""
        d = self.layers[-1].backward(dout)
        for layer, mask in zip(self.layers[-2::-1], self.masks[::-1], strict=True):
            d = layer.backward(d * mask)

    def params(self):
        return [p for layer in self.layers for p in layer.params()]

    def grads(self):
        return [g for layer in self.layers for g in layer.grads()]

    def count(self) -> int:
        return sum(layer.count() for layer in self.layers)


def dense_mlp(width: int, cfg: Settings, seed: int, xp) -> MLP:
    """``inputs -> width -> ... -> width -> outputs``, all dense."""
    rng = np.random.default_rng([seed, 2])
    dims = [cfg.inputs] + [width] * (cfg.hidden_layers + 1) + [cfg.outputs]
    return MLP([Dense(m, n, rng, xp) for m, n in itertools.pairwise(dims)])


def sparse_mlp(cfg: Settings, seed: int, backend: str, xp) -> MLP:
    """The same pattern at ``cfg.width``, with block-sparse ``width -> width`` layers."""
    rng = np.random.default_rng([seed, 3])
    # Each hidden layer gets its own layout (its own seed) and its own values.
    hidden = [BlockSparse(cfg, [seed, 4, i], backend, xp) for i in range(cfg.hidden_layers)]
    return MLP([Dense(cfg.inputs, cfg.width, rng, xp), *hidden,
                Dense(cfg.width, cfg.outputs, rng, xp)])


def matching_dense_width(params: int, cfg: Settings) -> int:
    """The width ``h`` whose dense MLP has the nearest number of parameters to ``params``.

    With ``L = cfg.hidden_layers`` the dense MLP has ``L h^2 + (inputs + outputs + L + 1) h
    + outputs`` weights and biases; this solves that quadratic for ``h``.
    """
    a = cfg.hidden_layers
    b = cfg.inputs + cfg.outputs + cfg.hidden_layers + 1
    c = cfg.outputs - params
    return round((-b + math.sqrt(b * b - 4 * a * c)) / (2 * a))


# --------------------------------------------------------------------------- training


class Adam:
    """Adam (Kingma and Ba, 2015) that updates a list of arrays in place."""

    def __init__(self, params, lr: float, xp, beta1=0.9, beta2=0.999, eps=1e-8):
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
        self.m = [xp.zeros_like(p) for p in params]
        self.v = [xp.zeros_like(p) for p in params]
        self.t = 0

    def step(self, params, grads):
        self.t += 1
        # The bias corrections folded into the step size (the paper's Algorithm 1, end).
        lr = self.lr * math.sqrt(1 - self.beta2**self.t) / (1 - self.beta1**self.t)
        for p, g, m, v in zip(params, grads, self.m, self.v, strict=True):
            m *= self.beta1
            m += (1 - self.beta1) * g
            v *= self.beta2
            v += (1 - self.beta2) * (g * g)
            p -= lr * m / (v**0.5 + self.eps)  # in place: W.data keeps its layout


def train_epoch(model: MLP, opt: Adam, x, y, order, batch: int) -> float:
    """One pass over the training set, in the order ``order``.

    Returns the mean of the batches' losses, each taken before its step: the usual
    per-epoch training loss, which costs no extra pass over the data.
    """
    total, steps = 0.0, 0
    for start in range(0, len(order) - batch + 1, batch):
        idx = order[start : start + batch]
        xb, yb = x[idx], y[idx]
        err = model.forward(xb) - yb
        # The gradient of the mean squared error (over the batch and the outputs).
        model.backward(err * (2.0 / yb.size))
        opt.step(model.params(), model.grads())
        total += (err * err).mean()  # stays an array: no device-to-host copy per step
        steps += 1
    return float(total) / steps


def mse(model: MLP, x, y, batch: int = 4096) -> float:
    """Mean squared error over a whole data set, evaluated in batches."""
    total = 0.0
    for start in range(0, x.shape[0], batch):
        err = model.forward(x[start : start + batch]) - y[start : start + batch]
        total += float((err * err).sum())
    return total / y.size


# --------------------------------------------------------------------------- reporting


def describe(name: str, model: MLP) -> str:
    """One line: the parameter count and the layers' shapes."""
    shapes = []
    for layer in model.layers:
        if isinstance(layer, BlockSparse):
            w = layer.w
            shapes.append(f"[{w.shape[0]}x{w.shape[1]} block-sparse, b={w.blocksize}, "
                          f"density {w.density:.3f}]")
        else:
            shapes.append(f"{layer.w.shape[0]}x{layer.w.shape[1]}")
    return f"{name:<17}{model.count():>11,} parameters: " + " -> ".join(shapes)


def save_plot(path: str, history: dict, title: str) -> bool:
    """Save both students' loss curves to ``path``; return False if matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # a file, no display
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for name, color in (("dense", "tab:blue"), ("sparse", "tab:orange")):
        h = history[name]
        epochs = range(1, len(h["test"]) + 1)
        ax.plot(epochs, h["test"], color=color, marker="o", label=f"{h['label']}: test")
        ax.plot(epochs, h["train"], color=color, linestyle="--", label=f"{h['label']}: train")
    ax.set_xlabel("epoch")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("mean squared error (1.0 = predicting the mean)")
    ax.set_yscale("log")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def compare(a: float, b: float) -> str:
    """``"block-sparse 9.1% lower"`` style verdict for dense loss ``a``, sparse loss ``b``."""
    if b < a:
        return f"block-sparse {(a - b) / a:.1%} lower"
    if a < b:
        return f"dense {(b - a) / b:.1%} lower"
    return "equal"


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Train a dense MLP and a wider block-sparse MLP with the same number of "
        "parameters on a teacher-student regression, and compare their losses."
    )
    p.add_argument("--backend", choices=["cpu", "cuda"], default="cpu",
                   help="cpu: NumPy arrays; cuda: CuPy arrays on the GPU (default cpu)")
    add_run_options(p)
    return p.parse_args(argv)


def add_run_options(p: argparse.ArgumentParser) -> None:
    """The options this script shares with its PyTorch twin (sparse_vs_dense_torch.py)."""
    p.add_argument("--size", choices=SIZES, default="small", help="problem size (default small)")
    p.add_argument("--seed", type=int, default=0, help="seed of everything random (default 0)")
    p.add_argument("--epochs", type=int, help="override the size's number of epochs")
    p.add_argument("--train", type=int, help="override the size's number of training examples")
    p.add_argument("--plot", metavar="PATH", help="save the loss curves there (needs matplotlib)")


def main(argv: Sequence[str] | None = None) -> dict:
    """Train both students and print their losses per epoch.

    Returns
    -------
    dict
        ``history["dense"]`` and ``history["sparse"]``, each with ``"params"`` (the
        parameter count), ``"train"`` and ``"test"`` (the losses per epoch) and ``"label"``;
        ``history["settings"]``, every setting of the run.
    """
    args = parse_args(argv)
    cfg = run_settings(args)
    xp = array_module(args.backend)

    print(f"size {args.size}, backend {args.backend}, seed {args.seed}")
    print("settings: " + ", ".join(f"{k}={v}" for k, v in dataclasses.asdict(cfg).items()))
    start = time.perf_counter()
    x_train, y_train, x_test, y_test = make_data(cfg, xp, args.seed)
    print(f"data: {cfg.train:,} training and {cfg.test:,} test examples labelled by the "
          f"teacher in {time.perf_counter() - start:.1f} s")

    sparse = sparse_mlp(cfg, args.seed, args.backend, xp)
    h = matching_dense_width(sparse.count(), cfg)
    dense = dense_mlp(h, cfg, args.seed, xp)
    models = {"dense": dense, "sparse": sparse}
    history = start_history(cfg, h, describe("dense MLP", dense), dense.count(),
                            describe("block-sparse MLP", sparse), sparse.count(),
                            size=args.size, backend=args.backend, seed=args.seed)
    opts = {name: Adam(model.params(), cfg.lr, xp) for name, model in models.items()}
    order_rng = np.random.default_rng([args.seed, 5])

    print("\nmean squared error per epoch (train: mean over the epoch's batches; test: "
          "held-out set after the epoch)")
    print(f"{'epoch':>5} | {'dense train':>11} {'test':>7} | {'sparse train':>12} {'test':>7}"
          f" | seconds dense, sparse")
    for epoch in range(1, cfg.epochs + 1):
        order = xp.asarray(order_rng.permutation(cfg.train))  # the same batches for both
        seconds = []
        for name, model in models.items():
            start = time.perf_counter()
            history[name]["train"].append(
                train_epoch(model, opts[name], x_train, y_train, order, cfg.batch)
            )
            history[name]["test"].append(mse(model, x_test, y_test))
            seconds.append(time.perf_counter() - start)
        d, s = history["dense"], history["sparse"]
        print(f"{epoch:>5} | {d['train'][-1]:>11.4f} {d['test'][-1]:>7.4f} | "
              f"{s['train'][-1]:>12.4f} {s['test'][-1]:>7.4f} | "
              f"{seconds[0]:>7.1f} {seconds[1]:>7.1f}", flush=True)

    finish(history, args.plot, f"size {args.size}, seed {args.seed}")
    return history


def run_settings(args: argparse.Namespace) -> Settings:
    """The size's settings with the --epochs / --train overrides (shared with the PyTorch
    twin)."""
    overrides = {k: v for k, v in (("epochs", args.epochs), ("train", args.train))
                 if v is not None}
    cfg = dataclasses.replace(SIZES[args.size], **overrides)
    if cfg.epochs < 1 or cfg.train < cfg.batch:
        raise SystemExit(f"need at least 1 epoch and {cfg.batch} training examples (a batch)")
    return cfg


def start_history(cfg: Settings, h: int, dense_line: str, dense_params: int, sparse_line: str,
                  sparse_params: int, **settings) -> dict:
    """Print the two students (shared with the PyTorch twin) and return an empty history."""
    print(dense_line)
    print(sparse_line)
    print(f"  hidden layouts: Watts-Strogatz, {cfg.degree} ring neighbours per block row plus "
          f"the diagonal block, rewiring probability {cfg.rewire}")
    print(f"parameters sparse / dense: {sparse_params / dense_params:.4f}; hidden width "
          f"{cfg.width} against {h} ({cfg.width / h:.2f}x wider)")
    return {
        "dense": {"label": f"dense, width {h}", "params": dense_params, "train": [],
                  "test": []},
        "sparse": {"label": f"block-sparse, width {cfg.width}", "params": sparse_params,
                   "train": [], "test": []},
        "settings": {**settings, **dataclasses.asdict(cfg)},
    }


def finish(history: dict, plot: str | None, title: str) -> None:
    """Print the final losses and save the plot (shared with the PyTorch twin)."""
    d, s = history["dense"], history["sparse"]
    print(f"\nfinal training loss: dense {d['train'][-1]:.4f}, block-sparse "
          f"{s['train'][-1]:.4f} ({compare(d['train'][-1], s['train'][-1])})")
    print(f"final test loss:     dense {d['test'][-1]:.4f}, block-sparse "
          f"{s['test'][-1]:.4f} ({compare(d['test'][-1], s['test'][-1])})")
    if plot:
        title = (f"{title}, {d['params']:,} vs {s['params']:,} parameters\nfinal test MSE: "
                 f"dense {d['test'][-1]:.4f}, block-sparse {s['test'][-1]:.4f}; train: "
                 f"{d['train'][-1]:.4f}, {s['train'][-1]:.4f}")
        if save_plot(plot, history, title):
            print(f"plot saved to {plot}")
        else:
            print("matplotlib is not importable: no plot saved")


if __name__ == "__main__":
    main()
