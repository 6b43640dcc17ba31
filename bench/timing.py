"""Timing of one callable: events, warm-up, rotation over input sets, median of many.

The rules (see the device notes' METHOD.md) and how this module keeps them:

* Device work is asynchronous, so GPU time is read from CUDA events recorded on the
  stream the work runs on -- CuPy events for CuPy work, torch events for torch work, so
  that each library's own current stream is the one measured.
* Warm-up calls run first, so compilation, autotuning and handle creation stay out.
* The result is the median of many samples; the sample count adapts so a measurement
  takes about ``target_ms`` of device time, never fewer than ``min_samples``.
* Each call takes the next of several input sets (the caller decides how many: enough
  that the sets together exceed the L2 cache), so repeated calls do not read from cache.
* Many tiny launches measure the host, not the GPU. Eager samples therefore put several
  calls between two events (the GPU queue stays busy when the host is faster than the
  kernels) and, for calls under ``graph_below_ms``, the calls are also captured into a
  CUDA graph whose replays are timed. The graph time is then the reported time, and the
  eager time is kept beside it: it is what an un-captured training step pays.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass
class Policy:
    """How hard to measure. Defaults suit the H100 quick run (about 50 ms per number)."""

    repeats: int = 30            #: most timed samples per measurement
    min_samples: int = 5         #: fewest, even for slow calls
    target_ms: float = 50.0      #: device time one measurement aims to spend
    warmup_passes: int = 1       #: passes over all input sets before timing
    graphs: str = "auto"         #: "auto", "always" or "never"
    graph_below_ms: float = 1.0  #: in "auto", capture calls faster than this
    graph_max_calls: int = 256   #: calls captured into one graph at most
    eager_batch_ms: float = 0.5  #: eager samples hold at least this much work
    slow_ms: float = 1000.0      #: a call slower than this is timed from one pass only


class Clock:
    """Elapsed-time source for one library: ``elapsed(run)`` in milliseconds."""

    lib = "host"

    def elapsed(self, run: Callable[[], None]) -> float:
        t0 = time.perf_counter()
        run()
        return (time.perf_counter() - t0) * 1e3

    def sync(self) -> None:
        """Wait for all queued work."""


class CupyClock(Clock):
    """CUDA events on CuPy's current stream."""

    lib = "cupy"

    def __init__(self):
        import cupy

        self._cp = cupy

    def elapsed(self, run):
        cp = self._cp
        stream = cp.cuda.get_current_stream()
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record(stream)
        run()
        stop.record(stream)
        stop.synchronize()
        return float(cp.cuda.get_elapsed_time(start, stop))

    def sync(self):
        self._cp.cuda.Device().synchronize()


class TorchClock(Clock):
    """CUDA events on torch's current stream."""

    lib = "torch"

    def __init__(self):
        import torch

        self._torch = torch

    def elapsed(self, run):
        torch = self._torch
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        stop.record()
        stop.synchronize()
        return float(start.elapsed_time(stop))

    def sync(self):
        self._torch.cuda.synchronize()


_CLOCKS: dict[str, Clock] = {}


def clock_for(lib: str) -> Clock:
    """The clock for ``lib`` ("cupy", "torch", anything else: the host clock)."""
    if lib not in _CLOCKS:
        _CLOCKS[lib] = {"cupy": CupyClock, "torch": TorchClock}.get(lib, Clock)()
    return _CLOCKS[lib]


def _stats(samples: Sequence[float]) -> dict[str, float]:
    s = sorted(samples)
    med = statistics.median(s)
    # The 10th-90th percentile spread, relative to the median: a cheap noise indicator.
    lo = s[int(0.1 * (len(s) - 1))]
    hi = s[math.ceil(0.9 * (len(s) - 1))]
    return {"median": med, "min": s[0], "max": s[-1],
            "spread": (hi - lo) / med if med > 0 else float("nan")}


def _rotating(calls: Sequence[Callable[[], Any]]):
    """A function running the next ``k`` calls, cycling over the input sets."""
    state = {"i": 0}
    n = len(calls)

    def run(k: int) -> None:
        i = state["i"]
        for j in range(k):
            calls[(i + j) % n]()   # the result is dropped at once: no memory growth
        state["i"] = (i + k) % n

    return run


def measure(calls: Sequence[Callable[[], Any]], lib: str,
            policy: Policy | None = None) -> dict[str, Any]:
    """Time ``calls`` (one zero-argument callable per input set) and return a summary.

    The caller has already made one call (to check its result), so kernels are compiled.

    Returns a dict: ``ms`` (the reported per-call time: the graph time where a graph was
    timed, else the eager time), ``mode`` ("graph", "eager" or "single"), ``eager_ms``,
    ``graph_ms`` (or None), ``graph_note`` (why no graph, if tried and failed),
    ``samples``, ``batch`` (calls per sample), ``sets``, ``min_ms``, ``max_ms``,
    ``spread``.
    """
    policy = policy or Policy()
    clock = clock_for(lib)
    nsets = len(calls)
    run = _rotating(calls)

    for _ in range(policy.warmup_passes):
        run(nsets)
    clock.sync()
    # One timed pass estimates the call time (and is one more warm-up).
    t_est = clock.elapsed(lambda: run(nsets)) / nsets
    result: dict[str, Any] = {"sets": nsets, "graph_ms": None, "graph_note": None}
    if t_est >= policy.slow_ms:
        result.update(ms=t_est, eager_ms=t_est, mode="single", samples=1, batch=nsets,
                      min_ms=t_est, max_ms=t_est, spread=float("nan"))
        return result

    batch = max(1, min(policy.graph_max_calls,
                       math.ceil(policy.eager_batch_ms / max(t_est, 1e-6))))
    samples = int(min(policy.repeats,
                      max(policy.min_samples, policy.target_ms / max(t_est * batch, 1e-6))))
    times = [clock.elapsed(lambda: run(batch)) / batch for _ in range(samples)]
    st = _stats(times)
    result.update(ms=st["median"], eager_ms=st["median"], mode="eager", samples=samples,
                  batch=batch, min_ms=st["min"], max_ms=st["max"], spread=st["spread"])

    want_graph = lib in ("cupy", "torch") and (
        policy.graphs == "always"
        or (policy.graphs == "auto" and st["median"] < policy.graph_below_ms))
    if want_graph:
        try:
            g = _measure_graph(calls, lib, policy, st["median"])
        except Exception as exc:  # a failed capture falls back to eager
            result["graph_note"] = f"graph capture failed: {_short(exc)}"
        else:
            result.update(ms=g["median"], graph_ms=g["median"], mode="graph",
                          samples=g["samples"], batch=g["batch"], min_ms=g["min"],
                          max_ms=g["max"], spread=g["spread"])
    return result


def _graph_calls(nsets: int, eager_ms: float, policy: Policy) -> int:
    """Calls per graph: enough that one replay holds ~2 ms of eager time, whole passes."""
    k = max(nsets, min(policy.graph_max_calls, math.ceil(2.0 / max(eager_ms, 1e-6))))
    return math.ceil(k / nsets) * nsets


def _measure_graph(calls, lib: str, policy: Policy, eager_ms: float) -> dict[str, Any]:
    """Capture the rotating calls into one CUDA graph and time its replays."""
    k = _graph_calls(len(calls), eager_ms, policy)
    if lib == "cupy":
        replay, elapsed = _cupy_graph(calls, k)
    else:
        replay, elapsed = _torch_graph(calls, k)
    t1 = elapsed(replay) / k
    samples = int(min(policy.repeats, max(policy.min_samples, policy.target_ms / (t1 * k))))
    times = [elapsed(replay) / k for _ in range(samples)]
    st = _stats(times)
    st.update(samples=samples, batch=k)
    return st


def _cupy_graph(calls, k: int):
    import cupy as cp

    # Capture needs a stream other than the legacy default one. Warming up on that same
    # stream first lets CuPy's per-stream memory pool hold the blocks the capture needs.
    stream = cp.cuda.Stream(non_blocking=True)
    run = _rotating(calls)
    with stream:
        run(len(calls))
        stream.synchronize()
        stream.begin_capture()
        try:
            run(k)
        except BaseException:
            with contextlib.suppress(Exception):  # the capture is already broken
                stream.end_capture()
            raise
        graph = stream.end_capture()
    graph.launch(stream)
    stream.synchronize()

    def replay():
        graph.launch(stream)

    def elapsed(fn):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record(stream)
        fn()
        stop.record(stream)
        stop.synchronize()
        return float(cp.cuda.get_elapsed_time(start, stop))

    # Keep the stream and graph alive as long as the closures are.
    replay.keepalive = (stream, graph)
    return replay, elapsed


def _torch_graph(calls, k: int):
    import torch

    run = _rotating(calls)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # torch wants warm-up on a side stream before capture
        run(len(calls))
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run(k)
    graph.replay()
    torch.cuda.synchronize()
    clock = clock_for("torch")
    return graph.replay, clock.elapsed


def _short(exc: BaseException, limit: int = 120) -> str:
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def short_error(exc: BaseException, limit: int = 120) -> str:
    """``"Type: message"`` on one line, cut to ``limit`` characters (rows stay readable)."""
    return _short(exc, limit)
