"""A training step of examples/ddp_train.py's model on one GPU (no DDP; hidden 12288, b = 32,
Watts-Strogatz d = 0.05, float16 autocast, GradScaler, Adam), with the layer's CUDA views by
address (cubsparse.torch._as_array given the device) against DLPack (without it), alternating
in one process: ms a step synchronized and host ms, by rows, and one sparse layer's forward
and backward.

    PYTHONPATH=. python3 tools/torch_step_views.py
"""
import sys
import time

import torch
import torch.nn.functional as F

import cubsparse.torch as ct

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


print(torch.cuda.get_device_name(), "torch", torch.__version__)
for variant in ("view", "dlpack", "view", "dlpack"):
    ct._as_array = AS_ARRAY if variant == "view" else (lambda t, dev=None: AS_ARRAY(t))
    for rows in (1024, 4096, 16384, 32768):
        x = torch.randn(rows, dt.INPUTS, device=dev)
        y = teacher(x)
        ms, host = timed(lambda x=x, y=y: step(x, y))
        print(f"{variant:6s} step rows {rows:6d}  {ms:7.3f} ms  host {host:7.3f} ms", flush=True)
    ms, host = timed(layer_step)
    print(f"{variant:6s} one layer fwd+bwd 4096 rows  {ms:7.3f} ms  host {host:7.3f} ms",
          flush=True)
