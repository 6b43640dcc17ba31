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

Users call the ops eagerly from Python loops, so every measurement yields four numbers
(see :func:`measure`):

``host_us``
    Host microseconds to issue one call: ``time.perf_counter`` around a short burst of
    calls that starts from an idle device, divided by the burst length. The burst is
    short (``host_burst``, 32 calls) so the launch queue never fills and the host never
    waits for the device: this is the Python, argument checking and launch cost alone.
``eager_ms``
    Time per call of a back-to-back loop: events around ``batch`` calls (at least
    ``eager_batch_ms`` of work), divided by ``batch``. The larger of host and device cost.
``sync_ms``
    Latency of one call followed by a synchronisation of the library's stream, wall
    clock: what a script that reads each result at once pays.
``graph_ms``
    Time per call replayed from a CUDA graph holding many calls: the device time alone,
    with the launch overhead removed. Every call that can be captured gets one; for calls
    under ``graph_below_ms`` it is also the reported time ``ms``.

On the host clock (CPU backend) all calls are synchronous: host, eager and sync times are
then all wall-clock times of the work itself, and there is no graph time.
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
    graph_below_ms: float = 1.0  #: in "auto", report the graph time for calls faster than this
    graph_max_calls: int = 256   #: calls captured into one graph at most
    eager_batch_ms: float = 0.5  #: eager samples hold at least this much work
    slow_ms: float = 1000.0      #: a call slower than this is timed from one pass only
    latency: bool = True         #: also time host issue (host_us) and sync latency (sync_ms)
    host_burst: int = 32         #: most calls in one host-time burst
    host_bursts: int = 30        #: most host-time bursts (their median is reported)
    sync_samples: int = 30       #: most synchronized single calls (their median is reported)
    paired_rounds: int = 16      #: alternating rounds of cubsparse against dense (0: none)


class Clock:
    """Elapsed-time source for one library: ``elapsed(run)`` in milliseconds."""

    lib = "host"

    def elapsed(self, run: Callable[[], None]) -> float:
        t0 = time.perf_counter()
        run()
        return (time.perf_counter() - t0) * 1e3

    def sync(self) -> None:
        """Wait for all queued work."""

    def stream_sync(self) -> None:
        """Wait for the work queued on the stream this library issues to."""


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

    def stream_sync(self):
        self._cp.cuda.get_current_stream().synchronize()


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

    def stream_sync(self):
        self._torch.cuda.current_stream().synchronize()


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


def _clamp(value: float, lo: int, hi: int) -> int:
    """``value`` rounded down and kept within ``[lo, hi]`` (``hi`` wins if ``lo > hi``)."""
    return int(min(hi, max(lo, math.floor(value))))


def _host_times(run: Callable[[int], None], clock: Clock, t_est: float,
                policy: Policy) -> dict[str, Any]:
    """Host microseconds per call, from short bursts issued onto an idle device.

    Each burst starts after a full synchronisation, so the launch queue is empty, and is
    short enough (``policy.host_burst`` calls) that it cannot fill the queue: the host
    then never blocks on the device and the wall time is the cost of issuing the calls.
    Longer bursts would measure the device once the queue is full. The burst shrinks for
    slow calls so that the bursts together spend about ``policy.target_ms`` of device time.
    """
    per_call = max(t_est, 1e-6)
    burst = _clamp(policy.target_ms / (policy.min_samples * per_call), 1, policy.host_burst)
    bursts = _clamp(policy.target_ms / (burst * per_call), policy.min_samples,
                    policy.host_bursts)
    times = []
    for _ in range(bursts):
        clock.sync()
        t0 = time.perf_counter()
        run(burst)
        times.append((time.perf_counter() - t0) * 1e6 / burst)
    clock.sync()
    st = _stats(times)
    return {"host_us": st["median"], "host_burst": burst, "host_bursts": bursts,
            "host_spread": st["spread"]}


def _sync_times(run: Callable[[int], None], clock: Clock, t_est: float,
                policy: Policy) -> dict[str, Any]:
    """Wall milliseconds of one call followed by a synchronisation of its stream.

    The queue is empty before each call (the previous sample waited for it), so a sample
    is the whole round trip a script pays when it needs each result before going on:
    issue, launch latency, device time, and the wake-up of the waiting host thread.
    """
    samples = _clamp(policy.target_ms / max(t_est, 1e-6), policy.min_samples,
                     policy.sync_samples)
    clock.sync()
    times = []
    for _ in range(samples):
        t0 = time.perf_counter()
        run(1)
        clock.stream_sync()
        times.append((time.perf_counter() - t0) * 1e3)
    st = _stats(times)
    return {"sync_ms": st["median"], "sync_samples": samples, "sync_spread": st["spread"]}


def measure(calls: Sequence[Callable[[], Any]], lib: str,
            policy: Policy | None = None, clock: Clock | None = None) -> dict[str, Any]:
    """Time ``calls`` (one zero-argument callable per input set) and return a summary.

    The caller has already made one call (to check its result), so kernels are compiled.

    Parameters
    ----------
    calls : sequence of callables
        One call per input set; consecutive calls take consecutive sets.
    lib : str
        Whose clock times the calls: "cupy", "torch", or anything else for the host clock.
    policy : Policy, optional
        How hard to measure; the defaults of :class:`Policy` if not given.
    clock : Clock, optional
        A clock to use instead of the one of ``lib`` (for a library with another stream,
        or for tests).

    Returns
    -------
    dict
        ``ms`` (the reported per-call time: the graph time where the policy reports it,
        else the eager time) and ``mode`` ("graph", "eager" or "single"); the four
        figures ``host_us``, ``eager_ms``, ``sync_ms`` and ``graph_ms`` (None when
        not captured; ``graph_note`` says why where a capture was tried and failed), each
        a median; how they were taken: ``samples``, ``batch`` (calls per sample) and
        ``min_ms``, ``max_ms``, ``spread`` of the reported time, ``sets``,
        ``host_burst``, ``host_bursts``, ``host_spread``, ``sync_samples``,
        ``sync_spread``, ``graph_calls`` and ``graph_samples``. With
        ``policy.latency`` false, ``host_us`` and ``sync_ms`` are None.
    """
    policy = policy or Policy()
    clock = clock or clock_for(lib)
    nsets = len(calls)
    run = _rotating(calls)

    for _ in range(policy.warmup_passes):
        run(nsets)
    clock.sync()
    # One timed pass estimates the call time (and is one more warm-up).
    t_est = clock.elapsed(lambda: run(nsets)) / nsets
    result: dict[str, Any] = {"sets": nsets, "graph_ms": None, "graph_note": None,
                              "graph_calls": None, "graph_samples": None,
                              "host_us": None, "sync_ms": None}
    if t_est >= policy.slow_ms:
        result.update(ms=t_est, eager_ms=t_est, mode="single", samples=1, batch=nsets,
                      min_ms=t_est, max_ms=t_est, spread=float("nan"))
        if policy.latency:
            # One more call gives both latency figures: repeating a call this slow
            # would cost seconds and tell little more.
            clock.sync()
            t0 = time.perf_counter()
            run(1)
            t1 = time.perf_counter()
            clock.stream_sync()
            t2 = time.perf_counter()
            result.update(host_us=(t1 - t0) * 1e6, host_burst=1, host_bursts=1,
                          sync_ms=(t2 - t0) * 1e3, sync_samples=1)
        return result

    batch = max(1, min(policy.graph_max_calls,
                       math.ceil(policy.eager_batch_ms / max(t_est, 1e-6))))
    samples = int(min(policy.repeats,
                      max(policy.min_samples, policy.target_ms / max(t_est * batch, 1e-6))))
    times = [clock.elapsed(lambda: run(batch)) / batch for _ in range(samples)]
    st = _stats(times)
    result.update(ms=st["median"], eager_ms=st["median"], mode="eager", samples=samples,
                  batch=batch, min_ms=st["min"], max_ms=st["max"], spread=st["spread"])
    if policy.latency:
        result.update(_host_times(run, clock, st["median"], policy))
        result.update(_sync_times(run, clock, st["median"], policy))

    # Every call that can be captured gets a graph time, so the eager figures always have
    # the device-only time beside them. It becomes the reported time only for fast calls
    # (in "auto"), where launch overhead would otherwise dominate; for slower calls the
    # reported time stays eager, as it was before graph times were kept for them too.
    if lib in ("cupy", "torch") and policy.graphs in ("auto", "always"):
        try:
            g = _measure_graph(calls, lib, policy, st["median"])
        except Exception as exc:  # a failed capture falls back to eager
            result["graph_note"] = f"graph capture failed: {_short(exc)}"
        else:
            result.update(graph_ms=g["median"], graph_calls=g["batch"],
                          graph_samples=g["samples"])
            if policy.graphs == "always" or st["median"] < policy.graph_below_ms:
                result.update(ms=g["median"], mode="graph", samples=g["samples"],
                              batch=g["batch"], min_ms=g["min"], max_ms=g["max"],
                              spread=g["spread"])
    return result


def paired(a_calls: Sequence[Callable[[], Any]], b_calls: Sequence[Callable[[], Any]],
           lib: str, a_ms: float, b_ms: float, policy: Policy | None = None,
           clock: Clock | None = None) -> dict[str, Any]:
    """The time of ``a_calls`` over that of ``b_calls``, timed in alternating rounds.

    Two products timed one after the other, each for a second or more, see the GPU in
    different states: an H100 running cuBLAS back to back lowers its clocks as it heats,
    and the same 8192^3 product took 1.26-1.65 ms across one sweep. A round here times a
    batch of each (about ``policy.eager_batch_ms`` of work), the order alternating from
    one round to the next, and the ratio is the median of the rounds' ratios: drift
    slower than a round cancels.

    Parameters
    ----------
    a_calls, b_calls : sequence of callables
        One call per input set for each product; both timed by ``lib``'s clock.
    a_ms, b_ms : float
        Their eager times per call, which size the batches.

    Returns
    -------
    dict
        ``ratio`` (median over rounds of a's time per call over b's), ``rounds``,
        ``spread`` (10th-90th percentile of the rounds' ratios over the median),
        ``a_batch`` and ``b_batch`` (calls per batch).
    """
    policy = policy or Policy()
    clock = clock or clock_for(lib)
    run_a, run_b = _rotating(a_calls), _rotating(b_calls)
    ka = max(1, math.ceil(policy.eager_batch_ms / max(a_ms, 1e-6)))
    kb = max(1, math.ceil(policy.eager_batch_ms / max(b_ms, 1e-6)))
    run_a(ka)
    run_b(kb)
    clock.sync()
    ratios = []
    for r in range(policy.paired_rounds):
        if r % 2:
            tb = clock.elapsed(lambda: run_b(kb)) / kb
            ta = clock.elapsed(lambda: run_a(ka)) / ka
        else:
            ta = clock.elapsed(lambda: run_a(ka)) / ka
            tb = clock.elapsed(lambda: run_b(kb)) / kb
        ratios.append(ta / tb if tb > 0 else float("nan"))
    st = _stats(ratios)
    return {"ratio": st["median"], "rounds": len(ratios), "spread": st["spread"],
            "a_batch": ka, "b_batch": kb}


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
