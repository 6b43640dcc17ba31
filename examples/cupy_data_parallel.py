"""Data-parallel training of a block-sparse MLP in array code: CuPy and NCCL, one GPU a process.

The array-code twin of ``ddp_train.py``: no PyTorch. The model, its backpropagation and
Adam are those of ``sparse_vs_dense.py`` (loaded from this directory): a ReLU MLP
``32 -> width -> width -> width -> 8`` whose two ``width -> width`` layers hold
:class:`cubsparse.BlockSparseMatrix` weights with Watts-Strogatz block layouts, trained on
a mean squared error against a fixed random tanh teacher (targets standardised, so
predicting the mean scores about 1.0).

Every process (rank) drives one GPU and holds the whole model. Each step:

1. every rank draws the same global batch of ``world_size * per_gpu_batch`` examples and
   keeps its own disjoint slice of it, so G ranks see the data that one process would see
   with a G times larger batch;
2. it computes the gradients of its slice's mean loss (forward and backward, with
   cubsparse's three products for the block-sparse layers);
3. every gradient, block-sparse (``dW``, a BlockSparseMatrix) or dense, is replaced by its
   mean over the ranks with :func:`cubsparse.distributed.allreduce_` (NCCL on GPUs), which
   makes it the gradient of the global batch's mean loss;
4. every rank takes the same Adam step.

Every ``--check-every`` steps and after the last one, each rank hashes the raw bytes of
its weights and layouts; the hashes are exchanged through the communicator and the run
stops with an error naming the ranks whose weights differ from rank 0's: they must stay
*bitwise* identical, not merely close.

Launch on G GPUs with torchrun (only its environment variables are used: RANK,
WORLD_SIZE, LOCAL_RANK; rank 0 hands NCCL's id to the others through a file)::

    torchrun --nproc-per-node=G examples/cupy_data_parallel.py --backend cuda

or as one process, on a GPU or on the CPU (NumPy arrays; the CPU backend runs one process
only)::

    python examples/cupy_data_parallel.py --backend cpu

Rank 0 prints the global loss every ``--log-every`` steps, the throughput in samples per
second over all ranks and, at the end, whether the weights were identical on all ranks.
``--help`` lists the options.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib
import json
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

import cubsparse as cs
from cubsparse.distributed import LocalComm, allreduce_, launch_env, nccl_communicator


def load_numpy_example():
    """``sparse_vs_dense.py``, imported from this file's directory (examples/ is no package)."""
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    return importlib.import_module("sparse_vs_dense")


sd = load_numpy_example()  # Settings, sparse_mlp, MLP, Adam, make_data, describe


#: The integer options: name, default, help. Each must be at least 1, except --log-every
#: (0: a tenth of the steps).
INT_OPTIONS = (
    ("steps", 100, "training steps (default 100)"),
    ("per-gpu-batch", 64, "examples per rank and step (default 64)"),
    ("width", 256, "hidden width, a multiple of the block size (default 256)"),
    ("blocksize", 16, "side of a square block (default 16)"),
    ("degree", 4, "Watts-Strogatz ring neighbours of a block row, even (default 4)"),
    ("seed", 0, "seed of the layouts, weights, data and batch order (default 0)"),
    ("train", 16384, "training examples the batches are drawn from (default 16384)"),
    ("check-every", 1, "compare the ranks' weights every this many steps (default 1)"),
    ("log-every", 0, "print the loss every this many steps (default: a tenth of the steps)"),
)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Data-parallel training of block-sparse layers in array code "
        "(CuPy + NCCL on GPUs, one process per GPU; NumPy on the CPU, one process)."
    )
    for name, default, text in INT_OPTIONS:
        p.add_argument(f"--{name}", type=int, default=default, help=text)
    p.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate (default 1e-3)")
    p.add_argument("--backend", choices=["cpu", "cuda"],
                   default="cuda" if cs.cuda_available() else "cpu",
                   help="cuda: CuPy arrays, one GPU per process; cpu: NumPy, one process "
                   "(default cuda where CuPy sees a GPU)")
    p.add_argument("--init-file", help="file through which rank 0 hands NCCL's id to the "
                   "other ranks (default: one in the temporary directory, named after the "
                   "launch; across machines give a path on a shared file system)")
    p.add_argument("--json", help="rank 0 writes the result dict (see main) to this file")
    args = p.parse_args(argv)
    if args.backend == "cuda" and not cs.cuda_available():
        p.error("--backend cuda needs CuPy and a GPU it can see (pip install "
                "'cubsparse[cuda13]' or [cuda12])")
    too_small = [f"--{name}" for name, _, _ in INT_OPTIONS
                 if name not in ("seed", "log-every")
                 and getattr(args, name.replace("-", "_")) < 1]
    if too_small:
        p.error(f"{', '.join(too_small)} must be at least 1")
    if args.log_every < 0:
        p.error("--log-every must be at least 0 (0: a tenth of the steps)")
    args.log_every = args.log_every or max(1, args.steps // 10)
    return args


def settings(args: argparse.Namespace, world: int):
    """The NumPy example's settings for this run; ``batch`` is the global batch."""
    batch = world * args.per_gpu_batch
    if args.train < batch:
        raise SystemExit(f"--train {args.train} is smaller than one global batch ({world} x "
                         f"{args.per_gpu_batch} = {batch} examples)")
    return sd.Settings(
        inputs=32, outputs=8, teacher_width=2 * args.width, teacher_layers=1,
        width=args.width, hidden_layers=2, blocksize=args.blocksize, degree=args.degree,
        rewire=0.1, train=args.train, test=0, batch=batch,
        epochs=-(-args.steps * batch // args.train), lr=args.lr,
    )


# --------------------------------------------------------------------------- one rank


@dataclasses.dataclass
class Replica:
    """One rank's copy of the model and optimiser, and its place among the ranks."""

    model: object  # sparse_vs_dense.MLP
    opt: object  # sparse_vs_dense.Adam
    comm: object  # an NCCL communicator, LocalComm, or one rank of a SimulatedComm
    xp: object  # numpy or cupy

    @property
    def rank(self) -> int:
        return self.comm.rank_id()

    @property
    def world(self) -> int:
        return self.comm.size()


def make_replica(cfg, seed: int, backend: str, comm) -> Replica:
    # The same seed on every rank gives the same layouts and initial weights; nothing is
    # broadcast, and the checksums below would catch a rank that differs.
    xp = sd.array_module(backend)
    model = sd.sparse_mlp(cfg, seed, backend, xp)
    return Replica(model, sd.Adam(model.params(), cfg.lr, xp), comm, xp)


def global_batches(n: int, batch: int, seed: int) -> Iterator[np.ndarray]:
    """Index arrays of ``batch`` examples out of ``n``, a fresh permutation each epoch.

    They depend on the global batch size only, not on the number of ranks: that is what
    makes G ranks train like one process with the whole batch.
    """
    rng = np.random.default_rng([seed, 5])
    while True:
        order = rng.permutation(n)
        for start in range(0, n - batch + 1, batch):
            yield order[start : start + batch]


def shard(idx, rank: int, world: int):
    """Rank ``rank``'s disjoint slice of a global batch (all slices of one size)."""
    per = len(idx) // world
    return idx[rank * per : (rank + 1) * per]


def gradients(model) -> list:
    """What to all-reduce: ``dW`` as a BlockSparseMatrix for the block-sparse layers (its
    ``.data`` is what Adam reads) and plain arrays for the rest."""
    return [g for layer in model.layers for g in (layer.dw, layer.db)]


def local_gradients(rep: Replica, x, y):
    """Forward and backward on this rank's slice; returns its mean loss (a 0-d array)."""
    err = rep.model.forward(x) - y
    # The gradient of the slice's mean; the mean of that over the ranks (all slices have
    # one size) is the gradient of the global batch's mean.
    rep.model.backward(err * (2.0 / y.size))
    return (err * err).mean()


def reduce_gradients(rep: Replica) -> None:
    for g in gradients(rep.model):
        allreduce_(g, rep.comm, op="mean")


def apply_update(rep: Replica) -> None:
    rep.opt.step(rep.model.params(), rep.model.grads())


def train_step(rep: Replica, x, y):
    """One data-parallel step; the three phases are separate functions so that a
    simulated communicator (all ranks in one process) can run each phase on every rank
    before the next one."""
    loss = local_gradients(rep, x, y)
    reduce_gradients(rep)
    apply_update(rep)
    return loss


# --------------------------------------------------------------------------- the check


def to_host(a) -> np.ndarray:
    return a.get() if hasattr(a, "get") else np.asarray(a)


def checksum(model) -> int:
    """A signed 64-bit hash of the raw bytes of every weight and of every block layout."""
    h = hashlib.blake2b(digest_size=8)
    for layer in model.layers:
        for p in layer.params():
            h.update(to_host(p).tobytes())
        if isinstance(layer, sd.BlockSparse):
            h.update(layer.w.layout.tobytes())
    return int.from_bytes(h.digest(), "little", signed=True)


def gather(rep: Replica, value, dtype):
    """``value`` from every rank, in rank order, as an array of ``rep.xp``.

    An all-gather made of an all-reduce: every rank writes its value into its own slot
    of zeros and the slots are summed, which is exact (each slot has one non-zero term).
    """
    slots = rep.xp.zeros(rep.world, dtype=dtype)
    slots[rep.rank] = value
    return allreduce_(slots, rep.comm, op="sum")


def verify_identical(checksums: Sequence[int], step: int) -> None:
    """Raise unless all ranks' checksums agree; every rank sees the same list, so all stop."""
    differing = [r for r, c in enumerate(checksums) if c != checksums[0]]
    if differing:
        raise RuntimeError(
            f"after step {step} the weights of rank(s) {differing} differ from rank 0's "
            f"(checksums by rank: {list(checksums)})"
        )


# --------------------------------------------------------------------------- training


def clock(xp) -> float:
    if xp is not np:  # GPU work is asynchronous: wait for it before reading the time
        xp.cuda.get_current_stream().synchronize()
    return time.perf_counter()


def train(args: argparse.Namespace, rep: Replica, cfg, x, y, header: str) -> dict:
    rank, world, xp = rep.rank, rep.world, rep.xp
    say = print if rank == 0 else (lambda *a, **k: None)
    B = args.per_gpu_batch
    say(header)
    say(sd.describe("block-sparse MLP", rep.model))
    say(f"data: {cfg.train:,} training examples labelled by a random tanh teacher; global "
        f"batch {world} x {B} = {world * B}, {args.steps} steps, lr {args.lr}, seed "
        f"{args.seed}, weights compared every {args.check_every} step(s)")
    say("loss: mean over the steps since the last line; samples/s: so far, rank 0's clock")

    batches = global_batches(cfg.train, world * B, args.seed)
    pending, losses, seconds, checks, sums = [], [], 0.0, 0, []
    for step in range(1, args.steps + 1):
        idx = xp.asarray(shard(next(batches), rank, world))
        xb, yb = x[idx], y[idx]
        t0 = clock(xp)
        pending.append(train_step(rep, xb, yb))
        seconds += clock(xp) - t0
        if step % args.check_every == 0 or step == args.steps:
            sums = to_host(gather(rep, checksum(rep.model), np.int64)).tolist()
            verify_identical(sums, step)
            checks += 1
        if step % args.log_every == 0 or step == args.steps:
            # Each rank's loss is its slice's mean; their mean is the global batch's loss.
            chunk = xp.stack(pending).astype(np.float32)
            recent = to_host(allreduce_(chunk, rep.comm, op="mean")).tolist()
            losses += recent
            say(f"step {step:5d}/{args.steps}  loss {sum(recent) / len(recent):.4f}  "
                f"{step * world * B / seconds:,.0f} samples/s")
            pending = []
    # Throughput over all ranks, timed on the slowest (the checks and logging left out).
    slowest = float(to_host(gather(rep, seconds, np.float64)).max())
    rate = args.steps * world * B / slowest
    say(f"throughput {rate:,.0f} samples/s ({world} x {B} examples per step, {slowest:.2f} s "
        f"in training steps on the slowest rank)")
    say(f"weights identical on all {world} ranks after {args.steps} steps ({checks} checks, "
        f"checksum {sums[0] & 0xFFFFFFFFFFFFFFFF:016x})")
    return {"losses": losses, "steps": args.steps, "world_size": world,
            "backend": args.backend, "checksums": sums, "checks": checks,
            "identical": len(set(sums)) == 1, "samples_per_s": rate}


def main(argv: Sequence[str] | None = None) -> dict:
    """Train, print the progress on rank 0, and return the run's results (every rank).

    Returns
    -------
    dict
        ``losses`` (the global batch's loss after each step), ``steps``, ``world_size``,
        ``backend``, ``checksums`` (by rank, from the last check), ``checks``,
        ``identical`` and ``samples_per_s``.
    """
    args = parse_args(argv)
    rank, world, local_rank = launch_env()
    if args.backend == "cpu" and world > 1:
        raise SystemExit(
            f"--backend cpu runs as one process only (world size 1), but WORLD_SIZE={world}: "
            "NumPy arrays have no NCCL to all-reduce them between processes. Run it without "
            "torchrun on a CPU, use --backend cuda with one GPU per process, or see "
            "examples/ddp_train.py --device cpu for several CPU processes (PyTorch, gloo)."
        )
    cfg = settings(args, world)
    if args.backend == "cuda":
        import cupy
        from cupy.cuda import nccl

        cupy.cuda.Device(local_rank).use()  # before any array or communicator is made
        comm = nccl_communicator(rank, world, init_file=args.init_file)
        v = nccl.get_version()
        header = (f"world size {world}, backend cuda (CuPy {cupy.__version__}, NCCL "
                  f"{v // 10000}.{v // 100 % 100}.{v % 100}), rank 0 on GPU {local_rank}")
    else:
        comm = LocalComm()
        header = f"world size 1, backend cpu (NumPy {np.__version__}), communicator LocalComm"
    header += f", cubsparse {cs.__version__}"
    try:
        rep = make_replica(cfg, args.seed, args.backend, comm)
        x, y, _, _ = sd.make_data(cfg, rep.xp, args.seed)  # the same data on every rank
        result = train(args, rep, cfg, x, y, header)
    except BaseException:
        if args.backend == "cuda":
            comm.abort()  # do not wait in NCCL for ranks that have stopped
        raise
    if args.backend == "cuda":
        clock(rep.xp)  # nothing may still be queued on the communicator
        comm.destroy()
    if args.json and rank == 0:
        with open(args.json, "w") as f:
            json.dump(result, f)
    return result


if __name__ == "__main__":
    main()
