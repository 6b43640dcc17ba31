"""cubsparse.distributed and examples/cupy_data_parallel.py on the CPU.

The all-reduce is checked over SimulatedComm (several ranks in one process): exact sums and
means, in place, for arrays and block-sparse matrices, and the errors for what it cannot
reduce. The example runs at world size 1, and its step function, driven over three
simulated ranks, must train like one process with the whole batch. The NCCL cases need a
GPU and skip visibly without one; those of two processes on two GPUs (exact all-reduces,
and the example under torchrun) skip visibly with fewer.
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

import numpy as np
import pytest
from conftest import CUDA_SKIP_REASON, two_gpus
from strategies import HAS_BFLOAT16

import cubsparse as cs
from cubsparse.distributed import (
    LocalComm,
    SimulatedComm,
    allreduce_,
    launch_env,
    share_unique_id,
)

ROOT = Path(__file__).resolve().parent.parent
needs_cuda = pytest.mark.skipif(not cs.cuda_available(), reason=CUDA_SKIP_REASON)
FLOATS = ["float16", "float32", "float64"] + (["bfloat16"] if HAS_BFLOAT16 else [])
TINY = ["--steps", "4", "--per-gpu-batch", "8", "--width", "64", "--blocksize", "16",
        "--degree", "2", "--train", "1024", "--seed", "0"]


def rank_values(world: int, shape, dtype, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(cs._dtypes.as_dtype(dtype)) for _ in range(world)]


def reference(values: list[np.ndarray], op: str) -> np.ndarray:
    """Sum in rank order in the arrays' dtype, then one division: SimulatedComm's rule."""
    total = values[0].copy()
    for v in values[1:]:
        total += v
    if op == "mean":
        np.true_divide(total, len(values), out=total)
    return total


# -- allreduce_ over simulated ranks -----------------------------------------------------------


@pytest.mark.parametrize("op", ["mean", "sum"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_array_in_place_over_three_ranks(dtype, op):
    arrays = rank_values(3, (5, 7), dtype)
    inputs = [a.copy() for a in arrays]
    want = reference(inputs, op)
    world = SimulatedComm(3)
    for rank, a in enumerate(arrays):
        assert allreduce_(a, world[rank], op=op) is a  # the same object comes back
    assert world.pending == 0
    for a in arrays:
        assert a.dtype == want.dtype
        assert a.tobytes() == want.tobytes()  # every rank the same bits
    # Not a no-op: the values changed (the three inputs differ).
    assert arrays[0].tobytes() != inputs[0].tobytes()


@pytest.mark.parametrize("dtype", FLOATS)
def test_exact_values(dtype):
    # Small integers are exact in every dtype: the mean of 1, 2, 6 is 3, their sum 9.
    world = SimulatedComm(3)
    arrays = [np.full(4, v, dtype=cs._dtypes.as_dtype(dtype)) for v in (1, 2, 6)]
    for rank, a in enumerate(arrays):
        allreduce_(a, world[rank])
    assert all(float(v) == 3.0 for a in arrays for v in a)
    sums = [np.full(4, v, dtype=cs._dtypes.as_dtype(dtype)) for v in (1, 2, 6)]
    for rank, a in enumerate(sums):
        allreduce_(a, world[rank], op="sum")
    assert all(float(v) == 9.0 for a in sums for v in a)


@pytest.mark.parametrize("dtype", FLOATS)
def test_block_sparse_matrix_in_place(dtype):
    layout = cs.layouts.random(4, 3, density=0.5, seed=1)
    mats = [cs.BlockSparseMatrix.from_layout(layout, 8, dtype=dtype, seed=r) for r in range(3)]
    storage = [m.data for m in mats]
    indices = [m.indices.copy() for m in mats]
    want = reference([m.data.copy() for m in mats], "mean")
    world = SimulatedComm(3)
    for rank, m in enumerate(mats):
        assert allreduce_(m, world[rank]) is m
    for m, s, ix in zip(mats, storage, indices, strict=True):
        assert m.data is s  # written into the matrix's own storage
        assert m.data.tobytes() == want.tobytes()
        np.testing.assert_array_equal(m.indices, ix)  # the layout is untouched


def test_collective_completes_when_the_last_rank_calls():
    world = SimulatedComm(3)
    a, b, c = (np.array([float(v)]) for v in (3, 6, 9))
    allreduce_(a, world[0])
    allreduce_(b, world[1])
    assert world.pending == 1
    assert (a[0], b[0]) == (3.0, 6.0)  # nothing written before every rank has called
    allreduce_(c, world[2])
    assert world.pending == 0
    assert (a[0], b[0], c[0]) == (6.0, 6.0, 6.0)
    assert [r.rank_id() for r in world] == [0, 1, 2]
    assert {r.size() for r in world} == {3}


def test_integer_sum_and_the_checksum_gather():
    # The example gathers one int64 per rank by summing one-hot slots: exact.
    world = SimulatedComm(3)
    values = [-(2**62), 7, 2**62 + 5]
    slots = []
    for rank, v in enumerate(values):
        s = np.zeros(3, dtype=np.int64)
        s[rank] = v
        slots.append(allreduce_(s, world[rank], op="sum"))
    for s in slots:
        assert s.tolist() == values


def test_local_comm_is_the_identity():
    comm = LocalComm()
    assert (comm.rank_id(), comm.size()) == (0, 1)
    a = np.array([1.5, -2.0], dtype=np.float32)
    for op in ("mean", "sum"):
        assert allreduce_(a, comm, op=op) is a
        assert a.tolist() == [1.5, -2.0]
    W = cs.BlockSparseMatrix.from_layout(np.eye(2, dtype=bool), 8, seed=0)
    before = W.data.copy()
    allreduce_(W, comm)
    np.testing.assert_array_equal(W.data, before)
    allreduce_(np.empty((0, 3), dtype=np.float32), comm)  # empty: nothing to do


def test_world_of_one_simulated():
    world = SimulatedComm(1)
    a = np.array([1.0, 2.0])
    allreduce_(a, world[0])
    assert world.pending == 0
    assert a.tolist() == [1.0, 2.0]


# -- errors ---------------------------------------------------------------------------------


def test_errors_name_what_was_expected_and_given():
    comm = LocalComm()
    with pytest.raises(TypeError, match=r"BlockSparseMatrix, a NumPy array or a CuPy array, "
                       r"got builtins\.list"):
        allreduce_([1.0, 2.0], comm)
    with pytest.raises(ValueError, match=r"C-contiguous.*shape \(4, 2\)"):
        allreduce_(np.zeros((4, 4))[:, ::2], comm)
    with pytest.raises(ValueError, match="C-contiguous"):
        allreduce_(np.zeros((3, 4)).T, comm)  # Fortran order is no C order either
    ro = np.zeros(3)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        allreduce_(ro, comm)
    for dtype in (np.complex64, np.bool_, np.int16, np.float128 if hasattr(np, "float128")
                  else np.longdouble):
        with pytest.raises(TypeError, match=rf"NCCL cannot reduce dtype {np.dtype(dtype).name}"
                           r"; allreduce_ takes int8, .*float64"):
            allreduce_(np.zeros(3, dtype=dtype), comm, op="sum")
    with pytest.raises(TypeError, match=r"op='mean' needs a floating dtype.*got int64"):
        allreduce_(np.zeros(3, dtype=np.int64), comm)
    with pytest.raises(ValueError, match=r"op must be one of \('sum', 'mean'\), got 'max'"):
        allreduce_(np.zeros(3), comm, op="max")
    with pytest.raises(TypeError, match=r"NcclCommunicator or an object with the methods "
                       r"rank_id\(\), size\(\) and allreduce\(array, op\).*got "
                       r"builtins\.object, which lacks rank_id, size, allreduce"):
        allreduce_(np.zeros(3), object())
    W = cs.BlockSparseMatrix.from_layout(np.eye(2, dtype=bool), 8, seed=0)
    with pytest.raises(ValueError, match=r"transposed view.*W\.T\.base"):
        allreduce_(W.T, comm)


def test_simulated_mismatch_and_bad_world():
    world = SimulatedComm(2)
    allreduce_(np.zeros(3), world[0])
    with pytest.raises(ValueError, match=r"collective 0: rank 1 all-reduces shape \(4,\).*"
                       r"but rank 0 shape \(3,\)"):
        allreduce_(np.zeros(4), world[1])
    with pytest.raises(ValueError, match=r"op 'sum' but rank 0 .* op 'mean'"):
        allreduce_(np.zeros(3), world[1], op="sum")
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="world_size must be an int >= 1"):
            SimulatedComm(bad)


# -- launching ------------------------------------------------------------------------------


def test_launch_env():
    assert launch_env({}) == (0, 1, 0)
    assert launch_env({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"}) == (3, 4, 1)
    assert launch_env({"RANK": "1", "WORLD_SIZE": "2"}) == (1, 2, 1)  # LOCAL_RANK = RANK
    with pytest.raises(ValueError, match="both RANK and WORLD_SIZE"):
        launch_env({"RANK": "0"})
    with pytest.raises(ValueError, match="RANK=2, WORLD_SIZE=2"):
        launch_env({"RANK": "2", "WORLD_SIZE": "2"})
    with pytest.raises(ValueError, match="WORLD_SIZE must be an integer, got 'two'"):
        launch_env({"RANK": "0", "WORLD_SIZE": "two"})


def test_share_unique_id_through_a_file(tmp_path):
    path = tmp_path / "sub" / "id.json"
    uid = tuple(range(-64, 64))  # NCCL's ids are 128 signed chars
    assert share_unique_id(0, 3, path, make=lambda: uid) == uid
    assert share_unique_id(1, 3, path) == uid
    assert share_unique_id(2, 3, str(path)) == uid
    assert [p.name for p in path.parent.iterdir()] == ["id.json"]  # no temporary left over
    # A file written for another world size is someone else's: wait, then say so.
    with pytest.raises(TimeoutError, match=r"rank 1: no NCCL id for 2 ranks appeared at "):
        share_unique_id(1, 2, path, timeout=0.1, poll=0.02)
    with pytest.raises(TimeoutError, match="every rank must be given the same file"):
        share_unique_id(1, 3, tmp_path / "missing.json", timeout=0.1, poll=0.02)
    # A file left by an earlier launch (rank 0 killed before it could delete it) is stale:
    # taking its id would hang in NCCL's init, so the wait times out instead.
    content = json.loads(path.read_text())
    content["written"] -= 3600
    path.write_text(json.dumps(content))
    with pytest.raises(TimeoutError, match="older than 120 s"):
        share_unique_id(1, 3, path, timeout=0.1, poll=0.02)
    assert share_unique_id(1, 3, path, max_age=7200) == uid


def test_rank_0_deletes_the_id_file_when_nccl_fails(tmp_path, monkeypatch):
    # A failed communicator leaves no id behind for a later launch to pick up.
    import types

    from cubsparse import distributed

    def fail(*args):
        raise RuntimeError("NCCL init failed")

    nccl = types.SimpleNamespace(get_unique_id=lambda: bytes(range(8)))
    cuda = types.SimpleNamespace(nccl=nccl)  # `from cupy.cuda import nccl` finds it here
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda))
    monkeypatch.setitem(sys.modules, "cupy.cuda", cuda)
    monkeypatch.setattr(distributed, "_communicator", fail)
    path = tmp_path / "id.json"
    with pytest.raises(RuntimeError, match="NCCL init failed"):
        distributed.nccl_communicator(0, 2, init_file=path)
    assert not path.exists()


def test_import_cubsparse_stays_light():
    code = ("import sys, cubsparse; a = 'cubsparse.distributed' in sys.modules; "
            "import cubsparse.distributed; print(a, 'cupy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT, timeout=60).stdout.split()
    assert out == ["False", "False"]


# -- the example ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def example():
    name = "examples_cupy_data_parallel"
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" /
                                                  "cupy_data_parallel.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(name, None)


@pytest.fixture
def no_launcher(monkeypatch):
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(k, raising=False)


def test_example_world_size_one_on_cpu(example, no_launcher):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = example.main([*TINY, "--backend", "cpu", "--steps", "12", "--log-every",
                               "4"])
    text = out.getvalue()
    assert "world size 1, backend cpu" in text
    assert "weights identical on all 1 ranks after 12 steps (12 checks, checksum" in text
    assert text.count("loss ") == 3
    assert result["identical"] is True
    assert result["world_size"] == 1
    assert result["checks"] == 12
    assert len(result["losses"]) == 12
    assert all(math.isfinite(v) for v in result["losses"])
    assert np.mean(result["losses"][-4:]) < np.mean(result["losses"][:4])  # it learns
    assert result["samples_per_s"] > 0


def test_example_cpu_refuses_several_processes(example, monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(SystemExit, match=r"--backend cpu runs as one process only \(world "
                       r"size 1\), but WORLD_SIZE=2"):
        example.main([*TINY, "--backend", "cpu"])


def run_simulated(example, world: int, per_rank: int, steps: int):
    """``steps`` data-parallel steps of ``world`` ranks held in one process.

    Each phase runs on every rank before the next phase starts, as SimulatedComm needs.
    """
    args = example.parse_args([*TINY, "--per-gpu-batch", str(per_rank), "--backend", "cpu"])
    cfg = example.settings(args, world)
    sim = SimulatedComm(world)
    reps = [example.make_replica(cfg, args.seed, "cpu", sim[r]) for r in range(world)]
    x, y, _, _ = example.sd.make_data(cfg, np, args.seed)
    batches = example.global_batches(cfg.train, world * per_rank, args.seed)
    losses, first_grads = [], None
    for _ in range(steps):
        idx = next(batches)
        parts = [example.shard(idx, r.rank, world) for r in reps]
        step_losses = [example.local_gradients(r, x[p], y[p]) for r, p in
                       zip(reps, parts, strict=True)]
        for r in reps:
            example.reduce_gradients(r)
        assert sim.pending == 0
        if first_grads is None:  # rank 0's averaged gradients of the first step
            first_grads = [g.copy() for g in reps[0].model.grads()]
        for r in reps:
            example.apply_update(r)
        losses.append(float(np.mean(step_losses)))
    return reps, losses, first_grads


def test_three_ranks_train_like_one_with_the_whole_batch(example):
    reps, losses3, grads3 = run_simulated(example, world=3, per_rank=4, steps=5)
    (one,), losses1, grads1 = run_simulated(example, world=1, per_rank=12, steps=5)
    # The mean of the three slices' gradients is the gradient of the whole batch (a sum
    # in place of the mean would be 3x too large) ...
    for g3, g1 in zip(grads3, grads1, strict=True):
        np.testing.assert_allclose(g3, g1, rtol=1e-4, atol=1e-6 * float(np.abs(g1).max()))
    # ... the three ranks hold the same bits (they all took the same averaged step) ...
    sums = {example.checksum(r.model) for r in reps}
    assert len(sums) == 1
    # ... and match one rank with the 12 examples to float32 rounding: the gradient sums
    # are only grouped differently.
    for p3, p1 in zip(reps[0].model.params(), one.model.params(), strict=True):
        np.testing.assert_allclose(p3, p1, rtol=1e-4, atol=1e-6)
    assert losses3 == pytest.approx(losses1, rel=1e-5)
    # The comparison has teeth: the weights moved from their initial values.
    args = example.parse_args([*TINY, "--backend", "cpu"])
    fresh = example.make_replica(example.settings(args, 1), 0, "cpu", LocalComm())
    moved = max(float(np.abs(a - b).max()) for a, b in
                zip(one.model.params(), fresh.model.params(), strict=True))
    assert moved > 1e-3


def test_a_rank_that_differs_is_named(example):
    reps, _, _ = run_simulated(example, world=3, per_rank=4, steps=1)
    w = reps[2].model.layers[1].w.data  # rank 2's first block-sparse weight
    w.flat[0] = np.nextafter(w.flat[0], np.float32(np.inf))  # one unit in the last place
    slots = [example.gather(r, example.checksum(r.model), np.int64) for r in reps]
    sums = slots[0].tolist()
    assert all(s.tolist() == sums for s in slots)  # every rank sees the same list
    with pytest.raises(RuntimeError, match=r"after step 7 the weights of rank\(s\) \[2\] "
                       r"differ from rank 0's"):
        example.verify_identical(sums, step=7)
    example.verify_identical([sums[0]] * 3, step=7)  # equal: no error


# -- GPUs (NCCL) ----------------------------------------------------------------------------


@needs_cuda
def test_nccl_world_of_one():
    import cupy

    from cubsparse.distributed import nccl_communicator

    comm = nccl_communicator(0, 1)
    a = cupy.arange(6, dtype=cupy.float32)
    assert allreduce_(a, comm) is a
    assert allreduce_(a, comm, op="sum") is a
    assert a.get().tolist() == list(range(6))
    W = cs.BlockSparseMatrix.from_layout(np.eye(2, dtype=bool), 8, seed=0, backend="cuda")
    before = W.data.get()
    assert allreduce_(W, comm) is W
    np.testing.assert_array_equal(W.data.get(), before)
    with pytest.raises(TypeError, match="reduces CuPy arrays in GPU memory, got a NumPy"):
        allreduce_(np.zeros(3, dtype=np.float32), comm)
    comm.destroy()


@needs_cuda
def test_example_on_one_gpu(example, no_launcher):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = example.main([*TINY, "--backend", "cuda"])
    assert "backend cuda (CuPy" in out.getvalue()
    assert result["identical"] is True
    assert result["world_size"] == 1
    assert all(math.isfinite(v) for v in result["losses"])


@pytest.mark.parametrize("takes", ["bytes", "tuple"])
def test_nccl_id_reaches_either_cupy_signature(takes):
    # CuPy 13 and later take the id as bytes, earlier versions as signed char values;
    # the id may arrive as bytes (get_unique_id) or as ints (through the init file).
    from cubsparse.distributed import _communicator

    raw = bytes([0, 1, 127, 128, 255])
    seen = []

    class FakeNccl:
        class NcclCommunicator:
            def __init__(self, n, uid, rank):
                if not isinstance(uid, bytes if takes == "bytes" else tuple):
                    raise TypeError("commId has incorrect type")
                seen.append((n, uid, rank))

    for uid in (raw, tuple(raw), list(raw)):
        _communicator(FakeNccl, 2, uid, 1)
    want = raw if takes == "bytes" else (0, 1, 127, -128, -1)
    assert seen == [(2, want, 1)] * 3


# -- two GPUs, one process each (NCCL) -----------------------------------------------------

# One rank of an exact all-reduce: rank r reduces its own arrays and a block-sparse matrix on
# GPU r and writes the bytes it ends with. Both ranks draw every rank's values from one seed.
TWO_RANKS = """
import sys
import cupy
import numpy as np
import cubsparse as cs
from cubsparse.distributed import allreduce_, nccl_communicator

rank, init_file, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
cupy.cuda.Device(rank).use()
comm = nccl_communicator(rank, 2, init_file=init_file, timeout=120)
assert (comm.rank_id(), comm.size(), comm.device_id()) == (rank, 2, rank)
for dtype in sys.argv[4].split(","):
    rng = np.random.default_rng(0)
    mine = [rng.standard_normal((33, 7)).astype(cs._dtypes.as_dtype(dtype)) for _ in range(2)]
    for op in ("sum", "mean"):
        a = cupy.asarray(mine[rank])
        assert allreduce_(a, comm, op=op) is a
        open(f"{out}/{dtype}-{op}-{rank}", "wb").write(a.get().tobytes())
    layout = cs.layouts.random(4, 3, density=0.5, seed=1)
    w = cs.BlockSparseMatrix.from_layout(layout, 8, dtype=dtype, seed=rank).to("cuda")
    assert w.data.device.id == rank
    assert allreduce_(w, comm) is w
    open(f"{out}/{dtype}-matrix-{rank}", "wb").write(w.data.get().tobytes())
comm.destroy()
"""


@two_gpus
def test_nccl_over_two_gpus_is_exact(tmp_path):
    # With two ranks NCCL's sum is one rounding of a + b, as in the reference, so every
    # rank must hold exactly the reference's bits, for the arrays and the matrix alike.
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    init = str(tmp_path / "nccl-id.json")
    logs = [tmp_path / f"rank{r}.log" for r in range(2)]
    procs = []
    try:
        for r, log in enumerate(logs):  # output to files: a full pipe cannot stall a rank
            with open(log, "w") as out:
                procs.append(subprocess.Popen(
                    [sys.executable, "-c", TWO_RANKS, str(r), init, str(tmp_path),
                     ",".join(FLOATS)], cwd=ROOT, env=env, stdout=out,
                    stderr=subprocess.STDOUT))
        for p in procs:
            p.wait(timeout=240)
    finally:  # a rank left waiting in NCCL for a dead peer must not outlive the test
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0, 0], "\n".join(
        log.read_text() for log in logs)
    for dtype in FLOATS:
        values = rank_values(2, (33, 7), dtype)
        for op in ("sum", "mean"):
            want = reference(values, op).tobytes()
            for r in range(2):
                assert (tmp_path / f"{dtype}-{op}-{r}").read_bytes() == want, (dtype, op, r)
        layout = cs.layouts.random(4, 3, density=0.5, seed=1)
        mats = [cs.BlockSparseMatrix.from_layout(layout, 8, dtype=dtype, seed=r).data
                for r in range(2)]
        want = reference(mats, "mean").tobytes()
        assert want != mats[0].tobytes()  # the two ranks' matrices differ
        for r in range(2):
            assert (tmp_path / f"{dtype}-matrix-{r}").read_bytes() == want, (dtype, r)


@two_gpus
def test_example_on_two_gpus_trains_like_one_with_the_whole_batch(example, no_launcher,
                                                                   tmp_path):
    pytest.importorskip("torch")  # torchrun launches the two processes
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    steps = ["--steps", "6", "--log-every", "1", "--backend", "cuda"]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
           str(ROOT / "examples" / "cupy_data_parallel.py"), *TINY, *steps,
           "--init-file", str(tmp_path / "nccl-id.json"), "--json", str(tmp_path / "r.json")]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "world size 2, backend cuda" in proc.stdout
    assert "weights identical on all 2 ranks after 6 steps (6 checks" in proc.stdout
    two = json.loads((tmp_path / "r.json").read_text())
    assert two["world_size"] == 2
    assert two["identical"] is True
    assert len(two["checksums"]) == 2
    assert two["checksums"][0] == two["checksums"][1]
    # One process on one GPU with both ranks' examples (per-gpu-batch 8 -> 16): the same
    # training up to float32 rounding, since only the gradient sums are grouped differently.
    with contextlib.redirect_stdout(io.StringIO()):
        one = example.main([*TINY, *steps, "--per-gpu-batch", "16"])
    assert two["losses"] == pytest.approx(one["losses"], rel=1e-4)
    assert one["losses"][-1] != one["losses"][0]  # it trained
