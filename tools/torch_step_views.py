"""A training step of examples/ddp_train.py's model on one GPU (no DDP; hidden 12288, b = 32,
Watts-Strogatz d = 0.05, float16 autocast, GradScaler, Adam), two ways alternating in one
process: ms a step synchronized and host ms, by rows, and one sparse layer's forward and
backward. ``--compare views`` (the default): the layer's CUDA views by address
(cubsparse.torch._as_array given the device) against DLPack (without it). ``--compare
compiled``: the compiled call path (cubsparse._cuda.fastcall) on against off.

    PYTHONPATH=. python3 tools/torch_step_views.py [--compare views|compiled]
"""
import argparse
import gc
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import cubsparse as cs
import cubsparse.torch as ct
from cubsparse._cuda import fastcall

sys.path.insert(0, "examples")
import ddp_train as dt

from bench.scaling import degree_for

dev = torch.device("cuda")
width, b, d = 12288, 32, 0.05
model = dt.make_model(width, b, degree_for(d, width, b), 0).to(dev)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler("cuda")
teacher = dt.Teacher(width, 0).to(dev)
AS_ARRAY = ct._as_array


def step(x, y):
    with torch.autocast("cuda", dtype=torch.float16):
        loss = F.mse_loss(model(x).float(), y)
    opt.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()


def timed(fn, reps=30):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    ts, hs = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        hs.append(time.perf_counter() - t0)
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t0)
    return sorted(ts)[reps // 2] * 1e3, sorted(hs)[reps // 2] * 1e3


layer = model[2]
xl = torch.randn(4096, width, device=dev, dtype=torch.float16, requires_grad=True)
gl = torch.randn(4096, width, device=dev, dtype=torch.float16)


def layer_step():
    with torch.autocast("cuda", dtype=torch.float16):
        out = layer(xl)
    out.backward(gl)


def compiled(on: bool) -> None:
    """The compiled call path on or off; off, the matrices' tables of entries dropped."""
    fastcall.ENABLED = on
    if not on:
        for o in gc.get_objects():
            if isinstance(o, cs.BlockSparseMatrix):
                o.__dict__.pop("_fast", None)


ap = argparse.ArgumentParser()
ap.add_argument("--compare", choices=("views", "compiled"), default="views")
ap.add_argument("--rows", default="1024,4096,16384,32768", help="batch rows of the step")
ap.add_argument("--rounds", type=int, default=2, help="times each variant runs, alternating")
args = ap.parse_args()
pair = ("view", "dlpack") if args.compare == "views" else ("compiled", "python")
print(torch.cuda.get_device_name(), "torch", torch.__version__, "fastcall", fastcall.active())
seen = {}
for variant in pair * args.rounds:
    ct._as_array = AS_ARRAY if variant != "dlpack" else (lambda t, dev=None: AS_ARRAY(t))
    compiled(variant != "python")
    for rows in (int(r) for r in args.rows.split(",")):
        x = torch.randn(rows, dt.INPUTS, device=dev)
        y = teacher(x)
        ms, host = timed(lambda x=x, y=y: step(x, y))
        seen.setdefault((f"step rows {rows:6d}", variant), []).append(ms)
        print(f"{variant:8s} step rows {rows:6d}  {ms:7.3f} ms  host {host:7.3f} ms", flush=True)
    ms, host = timed(layer_step)
    seen.setdefault(("one layer fwd+bwd, host", variant), []).append(host)
    print(f"{variant:8s} one layer fwd+bwd 4096 rows  {ms:7.3f} ms  host {host:7.3f} ms",
          flush=True)
print(f"\n== medians over {args.rounds} rounds (ms): {pair[0]} / {pair[1]}")
for what in dict.fromkeys(k[0] for k in seen):
    a, b = (statistics.median(seen[what, v]) for v in pair)
    print(f"{what:26s} {a:7.3f} / {b:7.3f}  ({b / a:.2f}x)")
