"""Data-parallel training of block-sparse layers with PyTorch DistributedDataParallel.

A ReLU MLP ``inputs -> width -> width -> width -> outputs`` whose two ``width -> width``
layers are :class:`cubsparse.torch.BlockSparseLinear` with Watts-Strogatz block layouts
(:func:`cubsparse.layouts.watts_strogatz`; the input and output layers are
``torch.nn.Linear``) is trained by several processes at once under
``torch.nn.parallel.DistributedDataParallel`` (DDP). It shows that the layer needs nothing
special for that: DDP averages the gradient of the stored blocks, ``(nnzb, b, b)``, like any
other parameter, and every rank takes the same Adam step.

* **Data** is generated, nothing is downloaded: standard normal inputs labelled by a fixed
  random tanh *teacher* (targets standardised, so predicting the mean scores about 1.0).
  Every rank draws the same global batch of ``world_size * per_gpu_batch`` examples and
  keeps its own disjoint slice of it, so a run on G ranks sees the same data as one
  process with a G times larger batch.
* **The check.** Every ``--check-every`` steps (and after the last one) each rank hashes
  the raw bytes of every parameter and of the block layouts, the hashes are all-gathered,
  and the run stops with an error if any rank's differs: the weights must stay *bitwise*
  identical across ranks, not merely close.

Launch on G GPUs (NCCL) or as G CPU processes (gloo) with torchrun::

    torchrun --nproc-per-node=G examples/ddp_train.py --device cuda
    torchrun --nproc-per-node=2 examples/ddp_train.py --device cpu

``python examples/ddp_train.py`` without torchrun runs one process (world size 1). Rank 0
prints the global loss every ``--log-every`` steps, the throughput (samples per second
over all ranks) and, at the end, whether the weights were identical on all ranks.
``--help`` lists the options.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import tempfile
import time
from collections.abc import Sequence

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import cubsparse as cs
from cubsparse.torch import BlockSparseLinear

INPUTS, OUTPUTS, REWIRE = 32, 8, 0.1
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Train block-sparse layers with PyTorch DDP.")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--per-gpu-batch", type=int, default=64, help="examples per rank and step")
    p.add_argument("--width", type=int, default=256, help="hidden width (multiple of b)")
    p.add_argument("--blocksize", type=int, default=16)
    p.add_argument("--degree", type=int, default=4, help="Watts-Strogatz ring neighbours (even)")
    p.add_argument("--device", choices=["cpu", "cuda"],
                   default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", choices=list(DTYPES), default="float32",
                   help="float16/bfloat16: torch.autocast over float32 weights (cuda only)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--check-every", type=int, default=1)
    p.add_argument("--warmup", type=int, default=0,
                   help="steps left out of the throughput (first calls build plans, compile)")
    p.add_argument("--log-every", type=int, default=0, help="default: steps // 10")
    p.add_argument("--json", help="rank 0 writes the result dict here")
    p.add_argument("--break-rank", type=int, help="to see the check fail: after step 1 this "
                   "rank nudges one weight by one ulp behind DDP's back")
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda, but torch sees no GPU")
    if min(args.steps, args.per_gpu_batch, args.check_every) < 1:
        p.error("--steps, --per-gpu-batch and --check-every must be at least 1")
    if not 0 <= args.warmup < args.steps:
        p.error(f"--warmup must be in [0, --steps), got {args.warmup}")
    if args.device == "cpu" and args.dtype != "float32":
        p.error("--dtype float16/bfloat16 needs --device cuda")
    args.log_every = args.log_every or max(1, args.steps // 10)
    return args


def make_model(width: int, b: int, degree: int, seed: int) -> torch.nn.Sequential:
    # The same seed on every rank gives the same layouts and initial weights. DDP broadcasts
    # rank 0's weights anyway, but not a layer's `structure`, which the products read: the
    # layouts must agree by construction (and the checksum below covers them).
    torch.manual_seed(seed)
    n = width // b
    sparse = [BlockSparseLinear(width, width, cs.layouts.watts_strogatz(n, degree, REWIRE,
                                                                        seed=seed + i), b)
              for i in (1, 2)]
    return torch.nn.Sequential(torch.nn.Linear(INPUTS, width), torch.nn.ReLU(),
                               sparse[0], torch.nn.ReLU(), sparse[1], torch.nn.ReLU(),
                               torch.nn.Linear(width, OUTPUTS))


class Teacher:
    """A fixed random tanh MLP that labels the inputs; its outputs are standardised."""

    def __init__(self, width: int, seed: int):
        g = torch.Generator().manual_seed(seed + 1000)
        self.w1 = torch.randn(INPUTS, 2 * width, generator=g) / math.sqrt(INPUTS)
        self.w2 = torch.randn(2 * width, OUTPUTS, generator=g) / math.sqrt(2 * width)
        self.scale = 1.0  # measured next, on a sample of its own
        self.scale = 1.0 / self(torch.randn(8192, INPUTS, generator=g)).std().item()

    def to(self, device: torch.device) -> Teacher:
        """The teacher on ``device``, where it labels each step's shard. On one CPU thread
        (the scaling benchmark's processes have one each) labelling the benchmark's 4096
        rows a GPU took longer than the GPUs' training step of a few milliseconds, which
        they then waited out idle."""
        self.w1, self.w2 = self.w1.to(device), self.w2.to(device)
        return self

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x @ self.w1) @ self.w2 * self.scale


def checksum(model: torch.nn.Module) -> int:
    """A 64-bit hash of the raw bytes of every parameter and of every block layout."""
    h = hashlib.blake2b(digest_size=8)
    for name, p in model.named_parameters():
        h.update(name.encode())
        h.update(p.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    for m in model.modules():
        if isinstance(m, BlockSparseLinear):
            h.update(m.structure.layout.tobytes())
    return int.from_bytes(h.digest(), "little", signed=True)


def gather(value: int, device: torch.device) -> list[int]:
    """``value`` from every rank, in rank order (NCCL moves CUDA tensors only)."""
    t = torch.tensor([value], dtype=torch.int64, device=device)
    out = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(out, t)
    return [int(o.item()) for o in out]


def check_identical(checksums: Sequence[int], step: int) -> None:
    """Raise if the ranks' checksums differ; every rank gets the same list, so all stop."""
    bad = [r for r, c in enumerate(checksums) if c != checksums[0]]
    if bad:
        raise RuntimeError(f"weights differ across ranks after step {step}: rank(s) {bad} "
                           f"disagree with rank 0 (checksums {list(checksums)})")


def clock(device: torch.device) -> float:
    if device.type == "cuda":  # kernels run asynchronously: wait before reading the time
        torch.cuda.synchronize(device)
    return time.perf_counter()


def train(args: argparse.Namespace, device: torch.device) -> dict:
    rank, world = dist.get_rank(), dist.get_world_size()
    say = print if rank == 0 else (lambda *a, **k: None)
    model = make_model(args.width, args.blocksize, args.degree, args.seed).to(device)
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.Adam(ddp.parameters(), lr=args.lr)
    dtype = DTYPES[args.dtype]
    # float16 gradients can underflow; bfloat16 has float32's range and needs no scaling.
    scaler = torch.amp.GradScaler("cuda") if dtype == torch.float16 else None
    teacher = Teacher(args.width, args.seed).to(device)
    data = torch.Generator().manual_seed(args.seed + 2000)  # the same stream on every rank
    B, sparse = args.per_gpu_batch, model[2]
    say(f"world size {world}, backend {dist.get_backend()}, device {args.device}, "
        f"dtype {args.dtype}, torch {torch.__version__}")
    say(f"model {sum(p.numel() for p in model.parameters()):,} parameters: {INPUTS}x"
        f"{args.width} -> 2 x [{args.width}x{args.width} block-sparse, b={args.blocksize}, "
        f"density {sparse.nnzb / sparse.structure.layout.size:.3f}] -> {args.width}x{OUTPUTS}")
    say(f"global batch {world} x {B} = {world * B}, {args.steps} steps, lr {args.lr}, "
        f"seed {args.seed}, weights compared every {args.check_every} step(s)")
    say("loss: mean over the steps since the last line; samples/s: so far, rank 0's clock, "
        "after the warm-up steps")

    pending, losses, seconds, checks, sums = [], [], 0.0, 0, []
    for step in range(1, args.steps + 1):
        x = torch.randn(world * B, INPUTS, generator=data)[rank * B:(rank + 1) * B]
        x = x.to(device)  # this rank's disjoint shard
        y = teacher(x)
        if world > 1:
            # The ranks reach this point at slightly different times (each draws the batch
            # on the CPU); without the barrier the first would wait for the others inside
            # its timed step (the gradient all-reduce), timing their lag, not the training.
            dist.barrier(device_ids=[device.index] if device.type == "cuda" else None)
        t0 = clock(device)
        with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
            loss = F.mse_loss(ddp(x).float(), y)  # the loss in float32 whatever the dtype
        opt.zero_grad(set_to_none=True)
        if scaler is None:
            loss.backward()  # DDP all-reduces (averages) the gradients during backward
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        if step > args.warmup:
            seconds += clock(device) - t0
        if step == 1 and rank == args.break_rank:
            with torch.no_grad():  # the smallest change a float32 weight can make
                w = sparse.weight.view(-1)[:1]
                w.copy_(torch.nextafter(w, w + 1))
        pending.append(loss.detach())
        if step % args.check_every == 0 or step == args.steps:
            sums = gather(checksum(model), device)
            check_identical(sums, step)
            checks += 1
        if step % args.log_every == 0 or step == args.steps:
            # Each rank's loss is its shard's mean; their mean is the global batch's loss.
            chunk = torch.stack(pending)
            dist.all_reduce(chunk)
            losses += (chunk / world).tolist()
            pending = []
            timed = step - args.warmup
            rate = f"  {timed * world * B / seconds:,.0f} samples/s" if timed > 0 else ""
            say(f"step {step:5d}/{args.steps}  loss {sum(losses[-len(chunk):]) / len(chunk):.4f}"
                + rate)
    # Throughput over all ranks, timed on the slowest one (checks and logging excluded).
    slowest = torch.tensor([seconds], device=device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    timed = args.steps - args.warmup
    rate = timed * world * B / slowest.item()
    say(f"throughput {rate:,.0f} samples/s ({world} x {B} examples per step, "
        f"{slowest.item():.2f} s in {timed} timed training steps on the slowest rank)")
    say(f"weights identical on all {world} ranks after {args.steps} steps "
        f"({checks} checks, checksum {sums[0] & 0xFFFFFFFFFFFFFFFF:016x})")
    return {"losses": losses, "steps": args.steps, "world_size": world,
            "backend": dist.get_backend(), "checksums": sums,
            "identical": len(set(sums)) == 1, "samples_per_s": rate,
            "seconds": slowest.item(), "timed_steps": timed,
            "density": sparse.nnzb / sparse.structure.layout.size,
            "device_name": (torch.cuda.get_device_name(device) if device.type == "cuda"
                            else "cpu")}


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    device = torch.device("cpu")
    if args.device == "cuda":
        local_rank = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local_rank)  # one GPU per rank, before any CUDA work
        device = torch.device("cuda", local_rank)
    backend = "nccl" if device.type == "cuda" else "gloo"
    with tempfile.TemporaryDirectory() as tmp:
        if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # launched by torchrun
            dist.init_process_group(backend)
        else:  # a plain process: a group of one, rendezvous through a file
            store = dist.FileStore(os.path.join(tmp, "store"), 1)
            dist.init_process_group(backend, store=store, rank=0, world_size=1)
        try:
            result = train(args, device)
        finally:
            dist.destroy_process_group()
    if args.json and int(os.environ.get("RANK", 0)) == 0:
        with open(args.json, "w") as f:
            json.dump(result, f)
    return result


if __name__ == "__main__":
    main()
