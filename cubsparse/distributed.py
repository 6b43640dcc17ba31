"""All-reduce of gradients for data-parallel training written in array code.

In data-parallel training every process (rank) holds the same model, computes gradients on
its own slice of each batch, and then replaces every gradient by its mean over the ranks,
so that all ranks take the same optimiser step. :func:`allreduce_` does that last part in
place, for a :class:`~cubsparse.BlockSparseMatrix` (its stored blocks, ``W.data`` of shape
``(nnzb, b, b)``) or for a plain NumPy or CuPy array::

    for g in gradients:                   # BlockSparseMatrix objects and arrays alike
        allreduce_(g, comm)               # op="mean" by default

``comm`` is one of:

* a ``cupy.cuda.nccl.NcclCommunicator``, for CuPy arrays on GPUs, one GPU per process
  (:func:`nccl_communicator` makes one from torchrun-style environment variables);
* any object that follows the small communicator protocol below; this module has two:
  :class:`LocalComm`, a world of one process (nothing to exchange), and
  :class:`SimulatedComm`, several ranks held in one process, which tests use to check
  data-parallel code on a CPU without threads or processes.

**The communicator protocol.** An object with three methods:

``rank_id() -> int``
    This rank's number, ``0 <= rank_id() < size()``.
``size() -> int``
    The number of ranks.
``allreduce(array, op) -> None``
    A collective call (every rank makes it, in the same order): replace ``array`` in
    place, on every rank, by the elementwise sum over the ranks (``op="sum"``) or by that
    sum divided by ``size()`` (``op="mean"``). :func:`allreduce_` has already checked the
    array (C-contiguous, writeable, a dtype NCCL can reduce) and the op.

The first two are named as NCCL's communicator names them, so code that asks a
communicator for its rank and size works with either kind.

This module imports CuPy only when an NCCL communicator is used or made; ``import
cubsparse`` does not import this module.

Examples
--------
Three ranks in one process, each with its own gradient of one block-sparse weight; after
the all-reduce every rank holds the mean:

>>> import numpy as np
>>> import cubsparse as cs
>>> from cubsparse.distributed import SimulatedComm, allreduce_
>>> world = SimulatedComm(3)
>>> layout = np.array([[True, False], [True, True]])
>>> grads = [cs.BlockSparseMatrix.from_layout(layout, 8, init="ones") * (r + 1)
...          for r in range(3)]                 # rank r's gradient: every value r + 1
>>> for rank, g in enumerate(grads):
...     _ = allreduce_(g, world[rank])          # completes when the last rank has called
>>> [float(g.data.min()) for g in grads], [float(g.data.max()) for g in grads]
([2.0, 2.0, 2.0], [2.0, 2.0, 2.0])

On GPUs, one process per GPU, started by ``torchrun --nproc-per-node=G script.py``:

>>> import cupy                                                         # doctest: +SKIP
>>> from cubsparse.distributed import launch_env, nccl_communicator
>>> rank, world_size, local_rank = launch_env()                        # doctest: +SKIP
>>> cupy.cuda.Device(local_rank).use()                                 # doctest: +SKIP
>>> comm = nccl_communicator(rank, world_size)                         # doctest: +SKIP
>>> allreduce_(dW, comm)         # dW: a BlockSparseMatrix on the GPU   # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Mapping

import numpy as np

from ._arrays import SparseOperand, backend_of

__all__ = [
    "LocalComm",
    "SimulatedComm",
    "allreduce_",
    "launch_env",
    "nccl_communicator",
    "share_unique_id",
    "default_init_file",
]

#: The dtypes NCCL reduces, by NumPy dtype name, with the name of NCCL's constant for each
#: (``cupy.cuda.nccl.NCCL_*``). bfloat16 is ml_dtypes' dtype.
_NCCL_DTYPES = {
    "int8": "NCCL_INT8",
    "uint8": "NCCL_UINT8",
    "int32": "NCCL_INT32",
    "uint32": "NCCL_UINT32",
    "int64": "NCCL_INT64",
    "uint64": "NCCL_UINT64",
    "float16": "NCCL_FLOAT16",
    "bfloat16": "NCCL_BFLOAT16",
    "float32": "NCCL_FLOAT32",
    "float64": "NCCL_FLOAT64",
}
_FLOAT_NAMES = ("float16", "bfloat16", "float32", "float64")
_OPS = ("sum", "mean")
_PROTOCOL = ("rank_id", "size", "allreduce")


# -- the all-reduce ------------------------------------------------------------------------


def allreduce_(x, comm, op: str = "mean"):
    """All-reduce ``x`` in place over the ranks of ``comm``; return ``x``.

    Parameters
    ----------
    x : BlockSparseMatrix, numpy.ndarray or cupy.ndarray
        For a matrix, its stored blocks (``x.data``, shape ``(nnzb, b, b)``) are reduced;
        its layout must be the same on every rank, which is the case when every rank built
        it from the same seed. An array must be C-contiguous and writeable (it is reduced
        as one flat buffer), of a dtype NCCL reduces: float16, bfloat16, float32, float64,
        or for ``op="sum"`` also int8, uint8, int32, uint32, int64, uint64.
    comm : cupy.cuda.nccl.NcclCommunicator or communicator
        An NCCL communicator (CuPy arrays on the communicator's GPU), or an object with
        ``rank_id()``, ``size()`` and ``allreduce(array, op)`` (see the module
        documentation; :class:`LocalComm`, :class:`SimulatedComm`).
    op : {"mean", "sum"}
        ``"mean"`` (the default, what data-parallel gradients need) is the sum over the
        ranks divided by their number; ``"sum"`` is the sum.

    Returns
    -------
    BlockSparseMatrix or array
        ``x`` itself, its values replaced; its storage is kept (views of it and buffers
        that CUDA plans hold stay valid).

    Raises
    ------
    TypeError
        ``x`` or ``comm`` of a kind not listed above, a dtype NCCL cannot reduce, an
        integer dtype with ``op="mean"``, or a NumPy array with an NCCL communicator.
    ValueError
        An unknown ``op``, a non-contiguous or read-only array, a transposed view
        (``W.T``, which stores no values of its own), or a CuPy array on another GPU than
        the communicator's.

    Notes
    -----
    With NCCL the sum is ``ncclAllReduce`` with ``ncclSum``, in the array's own dtype,
    enqueued on CuPy's current stream of the array's device, and the mean divides the sum
    by ``comm.size()`` on that stream afterwards: every rank ends with the same bits. Like
    every CuPy operation the call returns before the GPU has finished; work queued later on
    the same stream sees the result.

    Examples
    --------
    >>> import numpy as np
    >>> from cubsparse.distributed import LocalComm, allreduce_
    >>> g = np.array([0.5, -1.0], dtype=np.float32)
    >>> allreduce_(g, LocalComm()) is g           # one rank: the mean is the value itself
    True
    >>> allreduce_(np.zeros((4, 4))[:, ::2], LocalComm())
    Traceback (most recent call last):
        ...
    ValueError: allreduce_ needs a C-contiguous array ... of shape (4, 2); ...
    """
    if not isinstance(op, str) or op not in _OPS:
        raise ValueError(f"op must be one of {_OPS}, got {op!r}")
    buf = _buffer_of(x)
    _check_op_dtype(buf, op)
    kind = _comm_kind(comm)
    if buf.size == 0:  # nothing to exchange, and NCCL need not see an empty call
        return x
    if kind == "nccl":
        _nccl_allreduce(buf, comm, op)
    else:
        comm.allreduce(buf, op)
    return x


def _buffer_of(x):
    """The array that holds ``x``'s values, checked for what an all-reduce needs."""
    if isinstance(x, SparseOperand):
        if x.base is not None:
            raise ValueError(
                "allreduce_ got a transposed view (W.T), which stores no values of its own; "
                "all-reduce the matrix it views, W.T.base"
            )
        buf = x.data
    elif backend_of(x) is not None:
        buf = x
    else:
        raise TypeError(
            "allreduce_ reduces a BlockSparseMatrix, a NumPy array or a CuPy array, "
            f"got {type(x).__module__}.{type(x).__qualname__}"
        )
    if not buf.flags.c_contiguous:
        raise ValueError(
            "allreduce_ needs a C-contiguous array (it is reduced as one flat buffer), got a "
            f"non-contiguous array of shape {tuple(buf.shape)}; pass a contiguous copy "
            "(numpy/cupy.ascontiguousarray) and copy the result back"
        )
    if not getattr(buf.flags, "writeable", True):  # CuPy arrays are always writeable
        raise ValueError("allreduce_ writes the result into the array, but it is read-only")
    name = buf.dtype.name
    if name not in _NCCL_DTYPES:
        raise TypeError(
            f"NCCL cannot reduce dtype {name}; allreduce_ takes "
            f"{', '.join(_NCCL_DTYPES)}"
        )
    return buf


def _check_op_dtype(buf, op: str) -> None:
    if op == "mean" and buf.dtype.name not in _FLOAT_NAMES:
        raise TypeError(
            f"op='mean' needs a floating dtype ({', '.join(_FLOAT_NAMES)}), got "
            f"{buf.dtype.name}: an integer mean would round; use op='sum'"
        )


def _nccl_module():
    """``cupy.cuda.nccl`` if CuPy is already imported, else None (never imports CuPy)."""
    for name in ("cupy.cuda.nccl", "cupy_backends.cuda.libs.nccl"):
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "NcclCommunicator"):
            return module
    return None


def _comm_kind(comm) -> str:
    """``"nccl"`` or ``"protocol"``; ``TypeError`` for anything else."""
    nccl = _nccl_module()
    if nccl is not None and isinstance(comm, nccl.NcclCommunicator):
        return "nccl"
    if all(callable(getattr(comm, m, None)) for m in _PROTOCOL):
        return "protocol"
    missing = [m for m in _PROTOCOL if not callable(getattr(comm, m, None))]
    raise TypeError(
        "comm must be a cupy.cuda.nccl.NcclCommunicator or an object with the methods "
        f"rank_id(), size() and allreduce(array, op) (e.g. LocalComm, SimulatedComm); got "
        f"{type(comm).__module__}.{type(comm).__qualname__}, which lacks {', '.join(missing)}"
    )


def _divide_(buf, n: int) -> None:
    """``buf /= n`` in place, keeping the dtype (true_divide with out= never promotes)."""
    if n == 1:
        return
    xp = sys.modules["cupy"] if backend_of(buf) == "cuda" else np
    xp.true_divide(buf, n, out=buf)


def _nccl_allreduce(buf, comm, op: str) -> None:
    import cupy
    from cupy.cuda import nccl

    if backend_of(buf) != "cuda":
        raise TypeError(
            "an NCCL communicator reduces CuPy arrays in GPU memory, got a NumPy array; "
            "move it with cupy.asarray, or use LocalComm/SimulatedComm for NumPy arrays"
        )
    device = comm.device_id()
    if buf.device.id != device:
        raise ValueError(
            f"the array is on GPU {buf.device.id} but the NCCL communicator on GPU {device}: "
            "each process reduces arrays on its own GPU (cupy.cuda.Device(local_rank).use() "
            "before making arrays and the communicator)"
        )
    dtype = getattr(nccl, _NCCL_DTYPES[buf.dtype.name], None)
    if dtype is None:
        raise TypeError(f"this CuPy's NCCL bindings have no {buf.dtype.name} type")
    with buf.device:
        stream = cupy.cuda.get_current_stream()
        # In place: the send and the receive buffer are the same, as NCCL allows.
        comm.allReduce(buf.data.ptr, buf.data.ptr, buf.size, dtype, nccl.NCCL_SUM, stream.ptr)
        if op == "mean":
            _divide_(buf, comm.size())  # the same stream: runs after the sum


# -- communicators for NumPy arrays ----------------------------------------------------------


class LocalComm:
    """The communicator of a world of one rank: every all-reduce leaves the array as it is.

    It lets the same training code run as a single process on a CPU (NumPy arrays), where
    the sum and the mean over one rank are the values themselves.

    Examples
    --------
    >>> import numpy as np
    >>> from cubsparse.distributed import LocalComm, allreduce_
    >>> comm = LocalComm()
    >>> comm.rank_id(), comm.size()
    (0, 1)
    >>> allreduce_(np.arange(3.0), comm, op="sum")
    array([0., 1., 2.])
    """

    def rank_id(self) -> int:
        """Always 0."""
        return 0

    def size(self) -> int:
        """Always 1."""
        return 1

    def allreduce(self, array, op: str) -> None:
        """Check ``op`` against the array's dtype and leave the array as it is."""
        if op not in _OPS:
            raise ValueError(f"op must be one of {_OPS}, got {op!r}")
        _check_op_dtype(array, op)

    def __repr__(self) -> str:
        return "LocalComm()"


class SimulatedComm:
    """Several ranks in one process, for testing data-parallel code without GPUs.

    ``SimulatedComm(G)[r]`` is rank ``r``'s communicator. A collective call completes when
    the last of the ``G`` ranks has made its matching call (the k-th call of each rank
    pairs with the k-th call of every other): then the sum, or the mean, is computed and
    written into every rank's array. So drive the ranks phase by phase, not one rank's
    whole step after another's: first every rank computes its gradients, then every rank
    all-reduces them, then every rank reads them (e.g. takes its optimiser step). Until a
    collective completes, :attr:`pending` counts it and its arrays hold their own values.

    Parameters
    ----------
    world_size : int
        The number of ranks, at least 1.

    Notes
    -----
    The sum is taken in rank order in the arrays' dtype, ``((x0 + x1) + x2) + ...``, and
    the mean divides that sum by ``G`` once, as :func:`allreduce_` does with NCCL (whose
    order of additions depends on its algorithm, so the last bits may differ from it).
    Arrays of one collective must agree in shape, dtype and op, else ``ValueError`` names
    the two ranks: that is the mismatch that makes a real NCCL job hang or compute garbage.
    Works on NumPy or CuPy arrays.

    Examples
    --------
    >>> import numpy as np
    >>> from cubsparse.distributed import SimulatedComm, allreduce_
    >>> world = SimulatedComm(2)
    >>> a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    >>> _ = allreduce_(a, world[0], op="sum")
    >>> world.pending, a                           # rank 1 has not called yet
    (1, array([1., 2.]))
    >>> _ = allreduce_(b, world[1], op="sum")
    >>> world.pending, a, b
    (0, array([4., 6.]), array([4., 6.]))
    """

    def __init__(self, world_size: int):
        if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
            raise ValueError(f"world_size must be an int >= 1, got {world_size!r}")
        self._size = world_size
        self._calls = [0] * world_size  # collectives each rank has entered
        self._open: dict[int, dict] = {}  # collective number -> {"op", "arrays": {rank: a}}
        self._ranks = tuple(_SimulatedRank(self, r) for r in range(world_size))

    def __getitem__(self, rank: int) -> _SimulatedRank:
        return self._ranks[rank]

    def __len__(self) -> int:
        return self._size

    def __iter__(self):
        return iter(self._ranks)

    @property
    def pending(self) -> int:
        """The number of collectives that some, but not all, ranks have entered."""
        return len(self._open)

    def __repr__(self) -> str:
        return f"SimulatedComm({self._size}), {self.pending} collective(s) pending"

    def _enter(self, rank: int, array, op: str) -> None:
        if op not in _OPS:
            raise ValueError(f"op must be one of {_OPS}, got {op!r}")
        _check_op_dtype(array, op)
        number = self._calls[rank]
        entry = self._open.setdefault(number, {"op": op, "arrays": {}})
        if entry["arrays"]:  # compare with the first rank to arrive
            other, a = next(iter(entry["arrays"].items()))
            mine = (tuple(array.shape), array.dtype.name, op)
            theirs = (tuple(a.shape), a.dtype.name, entry["op"])
            if mine != theirs:
                raise ValueError(
                    f"collective {number}: rank {rank} all-reduces shape {mine[0]}, dtype "
                    f"{mine[1]}, op {mine[2]!r} but rank {other} shape {theirs[0]}, dtype "
                    f"{theirs[1]}, op {theirs[2]!r}; every rank must make the same calls in "
                    "the same order"
                )
        self._calls[rank] += 1
        entry["arrays"][rank] = array
        if len(entry["arrays"]) < self._size:
            return
        del self._open[number]
        arrays = [entry["arrays"][r] for r in range(self._size)]
        total = arrays[0].copy()
        for a in arrays[1:]:
            total += a
        if op == "mean":
            _divide_(total, self._size)
        for a in arrays:
            a[...] = total


class _SimulatedRank:
    """One rank's view of a :class:`SimulatedComm` (the communicator protocol)."""

    def __init__(self, world: SimulatedComm, rank: int):
        self._world, self._rank = world, rank

    def rank_id(self) -> int:
        return self._rank

    def size(self) -> int:
        return self._world._size

    def allreduce(self, array, op: str) -> None:
        self._world._enter(self._rank, array, op)

    def __repr__(self) -> str:
        return f"<rank {self._rank} of SimulatedComm({self._world._size})>"


# -- making an NCCL communicator -------------------------------------------------------------


def launch_env(environ: Mapping[str, str] | None = None) -> tuple[int, int, int]:
    """``(rank, world_size, local_rank)`` from torchrun-style environment variables.

    ``RANK`` and ``WORLD_SIZE`` (both or neither) and ``LOCAL_RANK``, as ``torchrun`` and
    most launchers set them. Without them the process is a world of one: ``(0, 1, 0)``.
    ``LOCAL_RANK`` (the GPU to use on this machine) defaults to ``RANK``, which is right
    for processes started by hand on one machine.

    Examples
    --------
    >>> from cubsparse.distributed import launch_env
    >>> launch_env({})
    (0, 1, 0)
    >>> launch_env({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"})
    (3, 4, 1)
    """
    env = os.environ if environ is None else environ
    if ("RANK" in env) != ("WORLD_SIZE" in env):
        raise ValueError(
            "set both RANK and WORLD_SIZE (as torchrun does) or neither (one process), got "
            f"only {'RANK' if 'RANK' in env else 'WORLD_SIZE'}"
        )
    values = {}
    for name, default in (("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", None)):
        text = env.get(name, default if default is not None else env.get("RANK", "0"))
        try:
            values[name] = int(text)
        except ValueError:
            raise ValueError(f"{name} must be an integer, got {text!r}") from None
    rank, world, local = values["RANK"], values["WORLD_SIZE"], values["LOCAL_RANK"]
    if world < 1 or not 0 <= rank < world or local < 0:
        raise ValueError(
            f"need WORLD_SIZE >= 1, 0 <= RANK < WORLD_SIZE and LOCAL_RANK >= 0, got "
            f"RANK={rank}, WORLD_SIZE={world}, LOCAL_RANK={local}"
        )
    return rank, world, local


def default_init_file(environ: Mapping[str, str] | None = None) -> str:
    """Where :func:`nccl_communicator` shares NCCL's id when it is given no file.

    A file in the temporary directory, named after what the processes of one launch have in
    common and a later launch most likely does not: the user, the parent process (torchrun's
    agent, or the shell that started the processes), and torchrun's ``MASTER_PORT``,
    ``TORCHELASTIC_RUN_ID`` and ``TORCHELASTIC_RESTART_COUNT``. It serves processes on one
    machine; across machines pass a path on a file system they share.
    """
    env = os.environ if environ is None else environ
    parts = [str(os.getuid()), str(os.getppid())]
    parts += [env.get(k, "") for k in ("MASTER_PORT", "TORCHELASTIC_RUN_ID",
                                      "TORCHELASTIC_RESTART_COUNT", "WORLD_SIZE")]
    key = hashlib.blake2b("\0".join(parts).encode(), digest_size=8).hexdigest()
    return os.path.join(tempfile.gettempdir(), f"cubsparse-nccl-{key}.json")


def share_unique_id(
    rank: int,
    world_size: int,
    path: str | os.PathLike,
    make: Callable[[], tuple] | None = None,
    *,
    timeout: float = 300.0,
    poll: float = 0.05,
    max_age: float = 120.0,
) -> tuple:
    """Rank 0 makes NCCL's unique id and writes it to ``path``; the other ranks read it.

    Parameters
    ----------
    rank, world_size : int
        This process's rank and the number of ranks.
    path : str or path-like
        A file every rank can see (on one machine, any path in a temporary directory). Rank
        0 writes it atomically (a temporary file renamed into place), so a reader never
        sees half an id.
    make : callable, optional
        Makes the id on rank 0; default ``cupy.cuda.nccl.get_unique_id``.
    timeout, poll : float
        How long the other ranks wait for the file, and how often they look, in seconds.
    max_age : float
        The other ranks take only an id written at most this many seconds before they began
        to wait: a file left by an earlier launch (one whose rank 0 was killed) would
        otherwise hand them an id nobody is listening on.

    Returns
    -------
    tuple of int
        The id, as ``cupy.cuda.nccl.NcclCommunicator`` takes it.

    Raises
    ------
    TimeoutError
        On a rank other than 0, when no id for ``world_size`` ranks appears in time. A file
        written for another world size, or more than ``max_age`` seconds before the wait
        began (left over from an earlier launch), is not taken.

    Examples
    --------
    >>> import os, tempfile
    >>> from cubsparse.distributed import share_unique_id
    >>> path = os.path.join(tempfile.mkdtemp(), "nccl-id.json")
    >>> share_unique_id(0, 2, path, make=lambda: (1, 2, 3))
    (1, 2, 3)
    >>> share_unique_id(1, 2, path)
    (1, 2, 3)
    """
    path = os.fspath(path)
    if rank == 0:
        if make is None:
            from cupy.cuda import nccl

            make = nccl.get_unique_id
        unique_id = tuple(int(v) for v in make())
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".nccl-id-")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump({"world_size": world_size, "unique_id": list(unique_id),
                           "written": time.time()}, f)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return unique_id
    deadline = time.monotonic() + timeout
    oldest = time.time() - max_age
    while True:
        try:
            with open(path) as f:
                content = json.load(f)
            if content.get("world_size") == world_size and content.get("written", 0) >= oldest:
                return tuple(int(v) for v in content["unique_id"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass  # not there yet (or not ours): look again
        if time.monotonic() >= deadline:
            raise TimeoutError(
                f"rank {rank}: no NCCL id for {world_size} ranks appeared at {path} within "
                f"{timeout:g} s; rank 0 writes it there, so every rank must be given the same "
                "file, on a file system they all see (a file there older than "
                f"{max_age:g} s, from an earlier launch, is not taken)"
            )
        time.sleep(poll)


def nccl_communicator(
    rank: int,
    world_size: int,
    unique_id: bytes | tuple | None = None,
    *,
    init_file: str | os.PathLike | None = None,
    timeout: float = 300.0,
):
    """An NCCL communicator of ``world_size`` ranks for this process's current GPU.

    Call it on every rank after selecting the rank's GPU (``cupy.cuda.Device(local_rank)
    .use()``); it returns once all ranks have joined. The ranks need one id that rank 0
    makes: pass it as ``unique_id`` if you share it yourself (e.g. with MPI), or let this
    function share it through ``init_file`` (default :func:`default_init_file`, which
    suits processes on one machine), which rank 0 deletes once every rank has joined.

    Parameters
    ----------
    rank, world_size : int
        This process's rank and the number of ranks (see :func:`launch_env`).
    unique_id : bytes or sequence of int, optional
        ``cupy.cuda.nccl.get_unique_id()`` from rank 0, the same on every rank.
    init_file : str or path-like, optional
        The file through which rank 0 hands the id to the others (:func:`share_unique_id`).
    timeout : float
        Seconds the other ranks wait for rank 0's file.

    Returns
    -------
    cupy.cuda.nccl.NcclCommunicator

    Examples
    --------
    >>> import cupy                                                   # doctest: +SKIP
    >>> from cubsparse.distributed import launch_env, nccl_communicator
    >>> rank, world_size, local_rank = launch_env()                  # doctest: +SKIP
    >>> cupy.cuda.Device(local_rank).use()                           # doctest: +SKIP
    >>> comm = nccl_communicator(rank, world_size)                   # doctest: +SKIP
    >>> comm.rank_id() == rank, comm.size() == world_size            # doctest: +SKIP
    (True, True)
    """
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be an int >= 1, got {world_size!r}")
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world_size:
        raise ValueError(f"rank must be an int in [0, {world_size}), got {rank!r}")
    from cupy.cuda import nccl

    path = None
    if unique_id is None:
        if world_size == 1:
            unique_id = nccl.get_unique_id()
        else:
            path = os.fspath(init_file) if init_file is not None else default_init_file()
            unique_id = share_unique_id(rank, world_size, path, nccl.get_unique_id,
                                        timeout=timeout)
    try:
        return _communicator(nccl, world_size, unique_id, rank)
    finally:
        if path is not None and rank == 0:
            # Making a communicator is collective: every rank has read the id once it
            # returns. If it failed, the id is dead. Either way a file left behind could
            # mislead a later launch that maps to the same name.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


def _communicator(nccl, world_size: int, unique_id, rank: int):
    """``NcclCommunicator`` from an id given as bytes or as a sequence of ints (how it
    travels through :func:`share_unique_id`'s file). CuPy 13 and later take the id as
    bytes; earlier versions took a tuple of (signed) char values."""
    as_bytes = bytes(int(v) & 0xFF for v in unique_id)
    try:
        return nccl.NcclCommunicator(world_size, as_bytes, rank)
    except TypeError:
        signed = tuple(v - 256 if v > 127 else v for v in as_bytes)
        return nccl.NcclCommunicator(world_size, signed, rank)
