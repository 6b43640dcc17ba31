"""The compiled eager call path, where the extension :mod:`._fastcall` is built.

A repeated eager call (``x @ W``, ``dy @ W.T``, ``matmul(x, W, out=y)``,
``sampled_matmul(x.T, dy, like=W)``, with ``out=G`` too) of a runner that has already run
once is made by one C function: the matrix's :class:`Table` holds an entry per call shape,
made here from the runner after the Python path has run it (:func:`arm_dsd`,
:func:`arm_sdd`). An entry names the runner's launches and which of their parameters a
call writes; the runner's own cached state (its tensor maps, its tile counter's stream,
its split workspace's stream) is read by the C path on every call, so a call that would
change any of it goes to the Python path instead. That state includes the stream whose
buffer (the layout keeps one a stream) a runner's copy of W's blocks goes to, and the side
stream and events of a weight gradient whose second launch runs beside its first.

On Hopper and newer the C function launches with programmatic dependent launch
(``cuLaunchKernelEx``): the GPU takes in a launch while the kernel before it runs, and
every kernel waits for that one's writes before it touches memory (``grid_dependency`` in
``kernels/common.cuh``). This halves the GPU's gap between two eager kernels.

``CUBSPARSE_FASTCALL=0`` in the environment (read at import) turns the compiled path off,
``CUBSPARSE_PDL=0`` the dependent launch; :func:`active` says whether the path is on.
Without the extension (a source checkout that was not built, a machine without a C
compiler at install time) every call takes the Python path, which gives the same results.
"""

from __future__ import annotations

import ctypes
import os
import warnings

try:
    from . import _fastcall
except ImportError:  # not built
    _fastcall = None
if _fastcall is not None and getattr(_fastcall, "API", None) != 8:
    # an in-place build older than these sources (a checkout updated without
    # `pip install -e .`): the Python path until it is rebuilt
    warnings.warn("cubsparse: the compiled call path (cubsparse/_cuda/_fastcall) was built "
                  "from other sources and is not used; rebuild it with `pip install -e .`",
                  RuntimeWarning, stacklevel=2)
    _fastcall = None

ENABLED = _fastcall is not None and os.environ.get("CUBSPARSE_FASTCALL", "1") != "0"
#: programmatic dependent launch of the compiled path's kernels on Hopper and newer
#: (``CUBSPARSE_PDL=0``, read at import, turns it off)
PDL = os.environ.get("CUBSPARSE_PDL", "1") != "0"
_bound = False


def active() -> bool:
    """Whether eager calls go through the compiled path."""
    return ENABLED


def _bind() -> None:
    """Hand the extension CuPy's array type and queries and the driver's launch calls."""
    global _bound
    if not _bound:
        import cupy

        from .. import _options
        from . import device
        from .configs import GENERATION

        lib = device.libcuda()
        addr = ctypes.cast(lib.cuLaunchKernel, ctypes.c_void_p).value
        coop = ctypes.cast(lib.cuLaunchCooperativeKernel, ctypes.c_void_p).value
        ex = getattr(lib, "cuLaunchKernelEx", None)
        ex = ctypes.cast(ex, ctypes.c_void_p).value if ex is not None else 0
        record = ctypes.cast(lib.cuEventRecord, ctypes.c_void_p).value
        wait = ctypes.cast(lib.cuStreamWaitEvent, ctypes.c_void_p).value
        capturing = ctypes.cast(lib.cuStreamIsCapturing, ctypes.c_void_p).value
        _fastcall.bind(cupy.ndarray, cupy.cuda.runtime.getDevice, cupy.cuda.get_current_stream,
                       addr, coop, ex, GENERATION, _options, record, wait, capturing)
        _fastcall.set_pdl(PDL)
        _bound = True


def table(w):
    """``w``'s table of entries (made on first use), or None where the path is off."""
    if not ENABLED:
        return None
    t = w.__dict__.get("_fast")
    if t is None:
        from .run import _MAX_RUNNERS

        _bind()
        t = w.__dict__["_fast"] = _fastcall.Table(_MAX_RUNNERS)
    return t


def _arm(w, op: str, key: int, runner, dev, cols, b_cols, inner, tf32) -> None:
    """Make ``runner``'s entry under ``key`` in ``w``'s table, unless it is there and in
    force; none where the runner's call does more than the compiled path (``fast_spec``
    None). ``fast_spec`` is ``(names, writes, tma, ymap, split, wcopy)``, with ``writes``
    as ``(launch name, parameter index, source)``."""
    from . import device
    from .run import _SIDE_STREAMS

    t = table(w)
    if t is None:
        return
    e = t.get(op, key)
    if e is not None and e.current(runner):
        return
    spec = runner.fast_spec()
    if spec is None:
        return
    names, writes, tma, ymap, split, wcopy = spec
    raw = [(*getattr(runner, n).slot(i), src) for n, i, src in writes]
    b = getattr(runner, "beside", None)  # the second launch on a side stream (run._Beside)
    beside = None if b is None else (_SIDE_STREAMS, b.fork, b.join)
    dtype = w._data.dtype
    t.set(op, key, _fastcall.Entry(
        runner, tuple(names), raw, runner.outputs, dtype, w._structure, dev, cols, b_cols,
        inner, -1 if dtype.char != "f" else int(tf32), tma, ymap, split,
        getattr(runner, "width", 0), getattr(runner, "out_align", 0), w._data.nbytes,
        device.arch(dev) >= 90, wcopy, beside))


def arm_dsd(w, runner, n: int, trans: bool, tf32: bool, dev: int) -> None:
    """After ``runner`` ran ``x @ op(w)`` for ``n`` rows of X on the Python path: make its
    entry, unless the table has it already."""
    cols = w._structure.block_shape[1 if trans else 0] * w._blocksize
    _arm(w, "dsd", (n << 1) | trans, runner, dev, cols, 0, 0, tf32)


def arm_sdd(like, runner, a, b, dev: int) -> None:
    """After ``runner`` ran the layer gradient ``a @ b`` on ``like``'s blocks on the Python
    path: make its entry, unless the table has it already."""
    _arm(like, "sdd", a.shape[1], runner, dev, a.shape[0], b.shape[1], a.shape[1], False)


def outputs(shape: tuple, dtype, keep_bytes: int | None = None):
    """An output cache (:class:`.outputs.Outputs`): the compiled one where the path is on.
    It keeps arrays of at most ``keep_bytes`` (default ``outputs.KEEP_BYTES``)."""
    from . import outputs as py

    keep_bytes = py.KEEP_BYTES if keep_bytes is None else keep_bytes
    if ENABLED:
        _bind()
        return _fastcall.Outputs(tuple(shape), dtype, py.KEEP, keep_bytes, py._ndarray())
    return py.Outputs(shape, dtype, keep_bytes)
