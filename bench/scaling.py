"""Data-parallel scaling: training throughput of a block-sparse MLP on 1, 2, 4 ... GPUs.

    python -m bench.scaling                      # the default case, every GPU count <= visible
    python -m bench.scaling --gpus 1,2 --device cpu --width 64 --blocksize 16 --steps 4

Each GPU count G runs ``examples/ddp_train.py`` under ``torchrun --nproc-per-node=G``: G
processes, one GPU each, PyTorch DistributedDataParallel over NCCL (gloo on the CPU), a
fixed per-GPU batch (weak scaling). The script times the training steps after
``--warmup`` steps on every rank, and the throughput is taken on the slowest one. The
scaling efficiency of G GPUs is ``throughput(G) / (G * throughput(1))``; 1.0 is perfect.

The default case is a block-sparse MLP of hidden size 12288 with b = 32 blocks at density
0.05 (a Watts-Strogatz layout), float16 autocast and 32768 rows per GPU. With fewer rows
the step is mostly work that does not grow with them (the optimizer, the weights' casts,
the host's launches): on one H200 a step of 4096 rows took 6.3 ms and one of 32768 rows
18.0-18.6 ms, so about 4.5 ms of the smaller step is that part; one process's rate there
moved by a quarter from launch to launch, and the efficiency reported that as scaling
(0.94-1.31 at commit b306765, ``bench/NOTES.md``). Most of that part was the host's: since
commit 621869e the sparse layers hand their tensors to CuPy without DLPack, and a step of
4096 rows of this model, timed without DDP on one H200, takes 4.3-4.6 ms (5.4-5.8 before,
``bench/NOTES.md`` 270), still bound by the host. GPU counts above what is visible are
recorded as skipped. The table names the GPU; ``--out`` keeps the rows as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "ddp_train.py"


def degree_for(density: float, width: int, b: int) -> int:
    """The even Watts-Strogatz degree whose layout (degree + 1 blocks per block row, the
    diagonal included) comes nearest to ``density``."""
    n = width // b
    return max(2, 2 * round((density * n - 1) / 2))


def visible_gpus(device: str) -> int | None:
    """GPUs torch sees (None: no limit, on the CPU)."""
    if device == "cpu":
        return None
    import torch

    return torch.cuda.device_count()


def run_one(g: int, args, out_json: Path) -> dict:
    """One torchrun launch of ``g`` processes; rank 0's result dict."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc-per-node={g}", str(EXAMPLE), "--device", args.device,
           "--dtype", args.dtype, "--width", str(args.width), "--blocksize",
           str(args.blocksize), "--degree", str(degree_for(args.density, args.width,
                                                           args.blocksize)),
           "--per-gpu-batch", str(args.per_gpu_batch), "--steps", str(args.steps),
           "--warmup", str(args.warmup), "--check-every", str(args.steps),
           "--log-every", str(args.steps), "--json", str(out_json)]
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                          timeout=args.timeout)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-12:]
        raise RuntimeError(f"{g} process(es) failed (exit {proc.returncode}):\n"
                           + "\n".join(tail))
    result = json.loads(out_json.read_text())
    result["wall_s"] = time.perf_counter() - t0
    return result


def table(rows: list[dict], device_name: str) -> str:
    lines = [f"data-parallel scaling on {device_name} (weak scaling: fixed batch per GPU)",
             "GPUs  samples/s    efficiency  weights identical",
             "----  -----------  ----------  -----------------"]
    for r in rows:
        if r.get("skipped"):
            lines.append(f"{r['gpus']:>4}  skipped: {r['skipped']}")
        else:
            eff = "-" if r["efficiency"] is None else f"{r['efficiency']:.3f}"  # no 1-GPU row
            lines.append(f"{r['gpus']:>4}  {r['samples_per_s']:>11,.0f}  {eff:>10}  "
                         f"{'yes' if r['identical'] else 'NO'}")
    return "\n".join(lines)


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(prog="python -m bench.scaling",
                                description=__doc__.splitlines()[0])
    p.add_argument("--gpus", default="1,2,4", help="GPU (process) counts, e.g. 1,2,4")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                   help="cpu: gloo processes, for a check of the plumbing")
    p.add_argument("--width", type=int, default=12288)
    p.add_argument("--blocksize", type=int, default=32)
    p.add_argument("--density", type=float, default=0.05)
    p.add_argument("--dtype", default="float16", choices=["float32", "float16", "bfloat16"])
    p.add_argument("--per-gpu-batch", type=int, default=32768,
                   help="rows a GPU and step; with too few, the step is mostly its fixed costs")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--timeout", type=float, default=900, help="seconds per launch")
    p.add_argument("--out", help="directory for scaling_<device>.json")
    args = p.parse_args(argv)
    if args.device == "cpu" and args.dtype != "float32":
        args.dtype = "float32"  # the CPU path has no half autocast
    try:
        counts = sorted({int(g) for g in args.gpus.split(",")})
    except ValueError:
        p.error(f"--gpus takes comma-separated counts, got {args.gpus!r}")
    if not counts or counts[0] < 1:
        p.error(f"--gpus counts must be at least 1, got {args.gpus!r}")
    limit = visible_gpus(args.device)
    rows, one = [], None
    name = "cpu" if args.device == "cpu" else "no GPU run"
    with tempfile.TemporaryDirectory() as tmp:
        for g in counts:
            if limit is not None and g > limit:
                rows.append({"gpus": g, "skipped": f"{limit} GPU(s) visible"})
                continue
            print(f"running {g} process(es) ...", flush=True)
            try:
                r = run_one(g, args, Path(tmp) / f"g{g}.json")
            except (RuntimeError, subprocess.TimeoutExpired, OSError, ValueError) as exc:
                # the rows measured so far stay; this count is reported as failed
                print(exc, file=sys.stderr)
                rows.append({"gpus": g, "skipped": f"failed: {str(exc).splitlines()[0]}"})
                continue
            name = r["device_name"]
            if g == 1:
                one = r["samples_per_s"]
            rows.append({"gpus": g, "samples_per_s": r["samples_per_s"],
                         "efficiency": None if one is None else r["samples_per_s"] / (g * one),
                         "identical": r["identical"], "density": r["density"],
                         "seconds": r["seconds"], "wall_s": r["wall_s"]})
    print(table(rows, name))
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        path = Path(args.out) / f"scaling_{args.device}.json"
        path.write_text(json.dumps({"device": name, "settings": vars(args), "rows": rows},
                                   indent=1))
        print(f"results: {path}")
    return rows


if __name__ == "__main__":
    main()
