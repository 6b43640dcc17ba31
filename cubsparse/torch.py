"""PyTorch layers on cubsparse: :class:`BlockSparseLinear` and its functional form :func:`linear`.

``y = x @ W + bias`` with a block-sparse ``W`` of shape ``(in_features, out_features)``
cut into ``b x b`` blocks, only the blocks of a fixed boolean ``layout`` stored. The stored
blocks are one ``Parameter`` of shape ``(nnzb, b, b)``, so every torch optimizer, gradient
clipping, ``state_dict`` and ``torch.autocast`` work as for ``torch.nn.Linear``; the three
products of the layer run on cubsparse (NumPy for CPU tensors, the CUDA kernels for CUDA
tensors), with compute and memory that scale with the number of stored blocks.

Install with ``pip install 'cubsparse[torch]'``. ``import cubsparse`` never imports torch;
importing this module does, and raises ``ImportError`` naming the extra where torch is
missing.

Example::

    import torch
    import cubsparse as cs
    from cubsparse.torch import BlockSparseLinear

    layout = cs.layouts.random(8, 4, density=0.25, seed=0)  # W: 256 x 128 in 32 x 32 blocks
    layer = BlockSparseLinear(256, 128, layout, blocksize=32)
    opt = torch.optim.AdamW(layer.parameters(), lr=1e-3)
    x = torch.randn(64, 256)
    loss = layer(x).square().mean()
    loss.backward()                    # dX, dW (on the 8 stored blocks only) and dbias
    opt.step()

    layer.cuda()                       # the same layer on the GPU (CuPy, [cuda13] extra)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y = layer(x.cuda())            # bfloat16 products, float32 master weights

How a call runs
---------------
The weight's storage is wrapped, without a copy, as the values of a
:class:`~cubsparse.BlockSparseMatrix` whose index structure (:class:`BlockStructure`) was
built once with the layer, so optimizer updates are seen by the next call. CPU tensors are
handed to NumPy (``tensor.numpy()`` / ``torch.from_numpy``), CUDA tensors to CuPy as
arrays over their memory (address, shape and strides), on torch's current stream; results
on CUDA are written into tensors torch allocates. ``forward`` computes ``Y = X @ W``;
``backward`` computes ``dX = dY @ W.T``, ``dW = sampled_matmul(X.T, dY, like=W)`` (the
dense ``X.T @ dY`` is never formed) and ``dbias = dY.sum(0)``, each only where its input
needs a gradient. Double backward is not supported.

dtypes are float16, bfloat16 (needs ``ml_dtypes``, the ``[bf16]`` extra, for the NumPy and
CuPy views of the values), float32 and float64; the input, weight and bias must share one,
except under ``torch.autocast``, where float16/bfloat16 autocast casts them (float64
excepted) to the autocast dtype, as torch does for ``nn.Linear``. Under ``torch.compile``
the call is a graph break: the surrounding code is compiled, the layer runs eagerly.
"""

from __future__ import annotations

import contextlib
import functools
import math
import numbers
import threading

import numpy as np

try:
    import torch
except ImportError as exc:  # pragma: no cover - exercised where torch is missing
    raise ImportError(
        "cubsparse.torch needs PyTorch (torch >= 2.1): pip install 'cubsparse[torch]'"
    ) from exc

from . import _dtypes
from ._matrix import BlockSparseMatrix, _as_layout
from ._ops import matmul, sampled_matmul

__all__ = ["BlockSparseLinear", "BlockStructure", "linear"]

_NUMPY_DTYPES = {
    torch.float16: np.dtype(np.float16),
    torch.float32: np.dtype(np.float32),
    torch.float64: np.dtype(np.float64),
    torch.bfloat16: _dtypes.bfloat16,  # None without ml_dtypes: refused with a clear error
}
_HALF = (torch.float16, torch.bfloat16)


# -- the index structure -------------------------------------------------------------------
class BlockStructure:
    """The fixed block layout of a block-sparse weight and its cubsparse index tables.

    This is what :class:`BlockSparseLinear` holds as ``layer.structure`` and what
    :func:`linear` takes: the layout, the block size and the index arrays of ``W``
    (``(in_features, out_features)``, stored in SciPy's BSR order: block rows in order,
    columns sorted within a row), with cubsparse's per-layout tables built once for the CPU
    and once per GPU, on first use there. A weight for it is a tensor of shape
    ``(nnzb, b, b)`` whose ``p``-th block sits at block row ``i`` (the ``i`` with
    ``indptr[i] <= p < indptr[i + 1]``) and block column ``indices[p]``.

    It is immutable: ``copy.deepcopy`` (of a layer, say) shares it, and pickling stores the
    layout and block size only.

    Parameters
    ----------
    layout : array_like of bool, shape ``(in_features // b, out_features // b)``
        True where a block of ``W`` is stored (NumPy array, nested lists or a tensor).
    blocksize : int
        ``b``, one of 8, 16, 32, 64, 128.
    """

    def __init__(self, layout, blocksize: int):
        if isinstance(layout, torch.Tensor):
            layout = layout.detach().cpu().numpy()
        layout = _as_layout(layout)
        b = _dtypes.check_blocksize(blocksize)
        # from_layout validates the layout and builds the index arrays; the values are not
        # wanted, so the init returns a broadcast zero, which allocates nothing.
        cpu = BlockSparseMatrix.from_layout(
            layout, b, init=lambda rng, shape: np.broadcast_to(np.float32(0), shape)
        )._structure
        self._cpu = cpu
        self._blocksize = b
        self._layout = cpu.layout()  # read-only
        self._cuda: dict = {}  # device index -> Structure with CuPy index arrays there
        self._local = threading.local()  # per thread: reusable matrices (see _operand)

    # -- description ------------------------------------------------------------------------
    @property
    def layout(self) -> np.ndarray:
        """The block layout: a read-only NumPy bool array ``(in_features // b,
        out_features // b)``."""
        return self._layout

    @property
    def blocksize(self) -> int:
        """``b``: blocks are ``b x b``."""
        return self._blocksize

    @property
    def shape(self) -> tuple[int, int]:
        """``(in_features, out_features)``: the shape of ``W``."""
        rows, cols = self._cpu.block_shape
        return rows * self._blocksize, cols * self._blocksize

    @property
    def nnzb(self) -> int:
        """The number of stored blocks."""
        return self._cpu.nnzb

    @property
    def weight_shape(self) -> tuple[int, int, int]:
        """``(nnzb, b, b)``: the shape of a weight for this structure."""
        return (self.nnzb, self._blocksize, self._blocksize)

    @property
    def indices(self) -> np.ndarray:
        """Block column of each stored block, int32 ``(nnzb,)``, read-only (BSR ``indices``)."""
        return self._cpu.host_indices

    @property
    def indptr(self) -> np.ndarray:
        """Block row pointers, int32 ``(in_features // b + 1,)``, read-only (BSR ``indptr``)."""
        return self._cpu.host_indptr

    def __repr__(self) -> str:
        m, n = self.shape
        density = self.nnzb / max(1, self._layout.size)
        return (f"<BlockStructure {m}x{n}, blocksize {self._blocksize}, {self.nnzb} blocks "
                f"(density {density:.3f})>")

    def __deepcopy__(self, memo):
        return self  # immutable: copies of a layer share one structure and its tables

    def __copy__(self):
        return self

    def __reduce__(self):
        return (BlockStructure, (np.array(self._layout), self._blocksize))

    # -- matrices over tensors --------------------------------------------------------------
    def matrix(self, weight: torch.Tensor) -> BlockSparseMatrix:
        """``weight`` as a :class:`~cubsparse.BlockSparseMatrix` sharing its memory.

        A NumPy-backed matrix for a CPU tensor, a CuPy-backed one for a CUDA tensor (which
        needs CuPy); writes to either reach the other (a non-contiguous ``weight`` is
        copied first). Use it to hand a layer's weight to cubsparse, e.g.
        ``cs.save_npz(f, layer.structure.matrix(layer.weight))``. On CUDA, the matrix's ops
        run on CuPy's current stream, not torch's.
        """
        _check_weight(weight, self)
        values = _as_array(weight.detach().contiguous())
        if weight.device.type == "cpu":
            return BlockSparseMatrix._from_parts(values, self._cpu, self._blocksize)
        return BlockSparseMatrix._from_parts(values, self._structure(weight.device.index),
                                             self._blocksize)

    def _structure(self, index: int | None):
        """The cubsparse ``Structure`` for the CPU (``None``) or GPU ``index``."""
        if index is None:
            return self._cpu
        s = self._cuda.get(index)
        if s is None:
            cupy = _cupy()
            from ._index import Structure

            host = self._cpu
            with cupy.cuda.Device(index):  # shares the (read-only) host arrays
                s = Structure(cupy.asarray(host.host_indices), cupy.asarray(host.host_indptr),
                              host.block_shape, host.host_indices, host.host_indptr)
            s = self._cuda.setdefault(index, s)
        return s

    @contextlib.contextmanager
    def _operand(self, values, index: int | None):
        """``values`` (an array ``(nnzb, b, b)``) as a matrix, for the duration of a call.

        On CUDA, cubsparse keeps each call's prepared kernel launches (its "runners") on
        the matrix object, so a new matrix per call would prepare them again every call;
        instead each thread reuses one matrix per device and dtype and points it at this
        call's values (the runners hold no values). The reference is dropped afterwards so
        that the values (an autocast copy, say) are not kept alive.
        """
        if index is None:
            yield BlockSparseMatrix._from_parts(values, self._cpu, self._blocksize)
            return
        anchors = self._local.__dict__.setdefault("anchors", {})
        key = (index, values.dtype)
        m = anchors.get(key)
        if m is None:
            m = anchors[key] = BlockSparseMatrix._from_parts(values, self._structure(index),
                                                             self._blocksize)
        else:
            m._init(values, self._structure(index), self._blocksize)
        try:
            yield m
        finally:
            m._data = None


# -- tensors <-> arrays --------------------------------------------------------------------
@functools.cache
def _cupy():
    try:
        import cupy
    except ImportError as exc:
        raise RuntimeError(
            "CUDA tensors need CuPy for cubsparse's CUDA backend: "
            "pip install 'cubsparse[cuda13]' (or [cuda12])"
        ) from exc
    return cupy


def _as_array(t: torch.Tensor, dev: int | None = None):
    """A detached tensor as a NumPy (CPU) or CuPy (CUDA) array sharing its memory.

    bfloat16 travels as int16 and is viewed as ``ml_dtypes.bfloat16`` on the other side:
    NumPy has no bfloat16 of its own, and the int16 view needs no DLPack bfloat16 support.

    A CUDA tensor goes through DLPack, which orders torch's current stream before CuPy's,
    unless ``dev`` is given: the device index :func:`_on_device` yielded, whose stream the
    two share. The CuPy array is then made from the tensor's address, shape and strides
    and holds the tensor, since torch's DLPack export looks the device and the streams up
    on every call: tens of microseconds, eight times in each layer's forward and backward,
    which left a training step of a few thousand rows bound by the host
    (``bench/NOTES.md`` 270).
    """
    bf16 = t.dtype == torch.bfloat16
    cuda = t.device.type != "cpu"
    if cuda and 0 in t.stride() and t.numel() > 1:  # an expanded gradient: give it real rows
        t = t.contiguous()
    dtype = _CUPY_DTYPES.get(t.dtype)
    if cuda and dev is not None and dtype is not None and t.numel():
        a = _address_view(t, dtype, dev)
    else:
        u = t.view(torch.int16) if bf16 else t
        a = _cupy().from_dlpack(u) if cuda else u.numpy()
    return a.view(_dtypes.bfloat16) if bf16 else a


#: The dtypes :func:`_as_array` views by address (bfloat16 as int16).
_CUPY_DTYPES = {torch.float16: np.float16, torch.float32: np.float32, torch.float64: np.float64,
                torch.bfloat16: np.int16}


def _address_view(t: torch.Tensor, dtype, dev: int):
    """CUDA tensor ``t`` (of one of :data:`_CUPY_DTYPES`, not empty) as a CuPy array of
    ``dtype`` (the same element size) over its memory on device ``dev``, holding ``t``."""
    cupy = _cupy()
    size = t.element_size()
    span = (1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride(), strict=True))) * size
    memory = cupy.cuda.UnownedMemory(t.data_ptr(), span, t, dev)
    return cupy.ndarray(tuple(t.shape), dtype, cupy.cuda.MemoryPointer(memory, 0),
                        tuple(st * size for st in t.stride()))


def _from_numpy(a: np.ndarray) -> torch.Tensor:
    """A NumPy result as a CPU tensor sharing its memory."""
    if a.dtype == _dtypes.bfloat16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


_STREAMS: dict = {}


@contextlib.contextmanager
def _on_device(device: torch.device):
    """Yield cubsparse's device index for ``device`` (None for the CPU); on CUDA, with that
    device current in CuPy and torch's current stream as CuPy's, so that cubsparse's
    kernels are ordered with torch's work and tensors pass between the two without a sync."""
    if device.type == "cpu":
        yield None
        return
    cupy = _cupy()
    index = device.index if device.index is not None else torch.cuda.current_device()
    current = torch.cuda.current_stream(index)
    key = (index, current.cuda_stream)
    stream = _STREAMS.get(key)
    if stream is None:  # a wrapper that owns nothing: kept for the next call on the stream
        if hasattr(cupy.cuda.Stream, "from_external") and hasattr(current, "__cuda_stream__"):
            stream = cupy.cuda.Stream.from_external(current)
        else:
            stream = cupy.cuda.ExternalStream(current.cuda_stream, index)
        stream = _STREAMS.setdefault(key, stream)
    with cupy.cuda.Device(index), stream:
        yield index


# -- checks --------------------------------------------------------------------------------
def _check_weight(weight, structure: BlockStructure) -> None:
    if not isinstance(structure, BlockStructure):
        raise TypeError(
            f"structure must be a cubsparse.torch.BlockStructure (a layer's .structure), "
            f"got {type(structure).__name__}"
        )
    if not isinstance(weight, torch.Tensor):
        raise TypeError(f"weight must be a torch.Tensor, got {type(weight).__name__}")
    if tuple(weight.shape) != structure.weight_shape:
        raise ValueError(
            f"weight must have shape (nnzb, b, b) = {structure.weight_shape} for {structure!r}, "
            f"got {tuple(weight.shape)}"
        )
    _check_dtype("weight", weight.dtype)
    if weight.device.type not in ("cpu", "cuda"):
        raise TypeError(
            f"cubsparse.torch runs on CPU and CUDA tensors, got weight on {weight.device}"
        )


def _check_dtype(name: str, dtype: torch.dtype) -> None:
    if dtype not in _NUMPY_DTYPES:
        raise TypeError(
            f"{name} has dtype {dtype}; cubsparse.torch supports torch.float16, "
            "torch.bfloat16, torch.float32 and torch.float64"
        )
    if _NUMPY_DTYPES[dtype] is None:
        raise TypeError(
            f"{name} has dtype torch.bfloat16, which needs the package ml_dtypes: "
            "pip install 'cubsparse[bf16]'"
        )


def _check_operands(x, weight, structure: BlockStructure, bias) -> None:
    """Types, shapes and devices; the dtypes are compared after autocast's casts."""
    _check_weight(weight, structure)
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    m, n = structure.shape
    if x.ndim < 1 or x.shape[-1] != m:
        raise ValueError(
            f"x's last dimension must be in_features = {m}, got x of shape {tuple(x.shape)}"
        )
    if bias is not None:
        if not isinstance(bias, torch.Tensor):
            raise TypeError(f"bias must be a torch.Tensor or None, got {type(bias).__name__}")
        if tuple(bias.shape) != (n,):
            raise ValueError(
                f"bias must have shape (out_features,) = ({n},), got {tuple(bias.shape)}"
            )
    for name, t in (("x", x), ("bias", bias)):
        if t is not None and t.device != weight.device:
            raise ValueError(
                f"{name} is on {t.device} but weight is on {weight.device}; move one with "
                f".to({str(weight.device)!r})"
            )


def _check_dtypes(x, weight, bias) -> None:
    for name, t in (("x", x), ("bias", bias)):
        if t is not None and t.dtype != weight.dtype:
            raise TypeError(
                f"{name} has dtype {t.dtype} but weight has dtype {weight.dtype}; convert one "
                "with .to(dtype), or run under torch.autocast"
            )


# -- autocast ------------------------------------------------------------------------------
def _autocast_dtype(device_type: str):
    """The autocast dtype in effect for ``device_type`` when it is float16/bfloat16, else None."""
    try:
        enabled = torch.is_autocast_enabled(device_type)
        dtype = torch.get_autocast_dtype(device_type) if enabled else None
    except (TypeError, AttributeError):  # torch < 2.4: one query per device type
        if device_type == "cuda":
            enabled, get = torch.is_autocast_enabled(), torch.get_autocast_gpu_dtype
        else:
            enabled, get = torch.is_autocast_cpu_enabled(), torch.get_autocast_cpu_dtype
        dtype = get() if enabled else None
    return dtype if dtype in _HALF else None


def _autocast(t, dtype):
    # The rule of torch.amp.custom_fwd(cast_inputs=...): floating tensors but float64.
    # Cast here, outside the autograd.Function, so that autograd casts the gradients back
    # to the float32 master weights; custom_fwd itself cannot be used, as it takes one fixed
    # device type and dtype where this layer follows whichever autocast is in effect.
    if t is None or not t.is_floating_point() or t.dtype in (dtype, torch.float64):
        return t
    return t.to(dtype)


# -- the autograd function -----------------------------------------------------------------
class _SparseLinear(torch.autograd.Function):
    """``x2 @ W + bias`` for 2-D ``x2``; cubsparse computes the three products."""

    @staticmethod
    def forward(ctx, x2, weight, bias, structure):
        # Autocast off inside: the operands are already in the dtype they run in.
        with torch.autocast(x2.device.type, enabled=False), _on_device(x2.device) as dev:
            xa = _as_array(x2.detach(), dev)
            with structure._operand(_as_array(weight.detach().contiguous(), dev), dev) as w:
                y = _dense_product(xa, w, x2, structure.shape[1], dev)
            if bias is not None:
                y.add_(bias.detach())
        # dX needs the weight (a reference, or under autocast the cast copy), dW the input.
        need_x, need_w = ctx.needs_input_grad[:2]
        ctx.save_for_backward(x2 if need_w else None, weight if need_x else None)
        ctx.structure = structure
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dy):
        x2, weight = ctx.saved_tensors
        structure = ctx.structure
        need_x, need_w, need_b, _ = ctx.needs_input_grad
        dx = dw = db = None
        with torch.autocast(dy.device.type, enabled=False), _on_device(dy.device) as dev:
            dya = _as_array(dy.detach(), dev) if need_x or need_w else None
            if need_x:
                with structure._operand(_as_array(weight.detach().contiguous(), dev), dev) as w:
                    dx = _dense_product(dya, w.T, dy, structure.shape[0], dev)
            if need_w:
                dw = torch.empty(structure.weight_shape, dtype=dy.dtype, device=dy.device)
                # The gradient's own (uninitialised) buffer supplies the layout and receives
                # the values: `like` is never read.
                with structure._operand(_as_array(dw, dev), dev) as g:
                    sampled_matmul(_as_array(x2.detach(), dev).T, dya, like=g, out=g)
            if need_b:
                db = dy.sum(0)
        return dx, dw, db, None


def _dense_product(a, w, like: torch.Tensor, cols: int, dev):
    """``a @ w`` as a tensor of ``like``'s dtype and device: NumPy's result on the CPU,
    written into a tensor from torch's allocator on CUDA."""
    if dev is None:
        return _from_numpy(matmul(a, w))
    y = torch.empty((a.shape[0], cols), dtype=like.dtype, device=like.device)
    matmul(a, w, out=_as_array(y, dev))
    return y


# -- the functional form -------------------------------------------------------------------
def _linear(x, weight, structure, bias):
    _check_operands(x, weight, structure, bias)
    dtype = _autocast_dtype(weight.device.type)
    if dtype is not None:
        x, weight, bias = _autocast(x, dtype), _autocast(weight, dtype), _autocast(bias, dtype)
    _check_dtypes(x, weight, bias)
    m, n = structure.shape
    y = _SparseLinear.apply(x.reshape(math.prod(x.shape[:-1]), m), weight, bias, structure)
    return y.reshape(*x.shape[:-1], n)


try:
    # torch's lazy torch.compiler.disable (torch's optimizers use it too): torch._dynamo,
    # seconds to import, is imported by the first call rather than by this module. It is
    # private, hence the public fallback.
    from torch._compile import _disable_dynamo as _compile_disable
except ImportError:  # pragma: no cover - depends on the torch version
    _compile_disable = torch.compiler.disable

# NumPy and CuPy calls cannot be traced: under torch.compile the call is a graph break and
# runs eagerly, the code around it compiled. The wrapper costs well under a microsecond.
_linear_eager = _compile_disable(_linear)


def linear(x: torch.Tensor, weight: torch.Tensor, structure: BlockStructure,
           bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ W + bias`` with the block-sparse ``W`` given by ``weight`` and ``structure``.

    The functional form of :class:`BlockSparseLinear` (whose ``forward`` calls it with
    ``layer.weight, layer.structure, layer.bias``); differentiable in ``x``, ``weight`` and
    ``bias``.

    Parameters
    ----------
    x : torch.Tensor, shape ``(..., in_features)``
        Any number of leading dimensions; CPU or CUDA.
    weight : torch.Tensor, shape ``(nnzb, b, b)``
        The stored blocks of ``W`` in ``structure``'s order, on ``x``'s device and with
        its dtype (float16, bfloat16, float32 or float64).
    structure : BlockStructure
        The layout of ``W`` (``(in_features, out_features)``) and its index tables:
        ``layer.structure`` of a :class:`BlockSparseLinear`, or
        ``BlockStructure(layout, blocksize)``. Build it once and reuse it; its tables are
        made on first use on each device.
    bias : torch.Tensor, shape ``(out_features,)``, optional

    Returns
    -------
    torch.Tensor, shape ``(..., out_features)``

    Raises
    ------
    ValueError
        ``x``'s last dimension is not ``in_features``; ``weight`` or ``bias`` has the wrong
        shape; the tensors are on different devices.
    TypeError
        The dtypes differ (outside ``torch.autocast``) or are not supported.

    Notes
    -----
    Under ``torch.autocast`` with float16 or bfloat16, ``x``, ``weight`` and ``bias`` (but
    float64 ones) are cast to the autocast dtype first, so the gradient of a float32 weight
    is float32. Under ``torch.compile`` the call is a graph break.

    For example (``layout`` a boolean array of ``(in_features // 16, out_features // 16)``
    blocks)::

        s = BlockStructure(layout, 16)
        w = torch.randn(s.weight_shape, requires_grad=True)
        y = linear(x, w, s)
    """
    return _linear_eager(x, weight, structure, bias)


# -- the module ----------------------------------------------------------------------------
class BlockSparseLinear(torch.nn.Module):
    """``y = x @ W + bias`` with a block-sparse ``W`` of a fixed block layout.

    Parameters
    ----------
    in_features, out_features : int
        Multiples of ``blocksize``; ``W`` has shape ``(in_features, out_features)`` (note:
        the transpose of ``torch.nn.Linear``'s ``weight``, as in ``y = x @ W``).
    layout : array_like of bool, shape ``(in_features // b, out_features // b)``
        True where a block of ``W`` is stored; see :mod:`cubsparse.layouts`.
    blocksize : int
        ``b``, one of 8, 16, 32, 64, 128.
    bias : bool, optional
        Learn an additive bias (default True).
    device, dtype : optional
        Of the parameters, as for ``torch.nn.Linear`` (float16, bfloat16, float32, float64).

    Attributes
    ----------
    weight : torch.nn.Parameter, shape ``(nnzb, b, b)``
        The stored blocks in BSR order (``structure.indices`` / ``structure.indptr``),
        initialised from N(0, 1/fan_in) with ``fan_in = nnzb * b / (out_features // b)``,
        the average number of inputs of an output (as
        ``BlockSparseMatrix.from_layout(init="normal")``), with torch's random generator.
    bias : torch.nn.Parameter, shape ``(out_features,)``, or None
        Initialised from U(-1/sqrt(fan_in), 1/sqrt(fan_in)), as ``torch.nn.Linear`` does.
    structure : BlockStructure
        The layout and its index tables, built once (see :func:`linear`).
    layout, indices, indptr : torch.Tensor
        Buffers holding the layout (bool) and BSR index arrays (int32), saved in the
        ``state_dict``; loading a state dict of another layout raises an error.

    Notes
    -----
    Every torch optimizer works on ``weight`` as it is: the blocks outside the layout do
    not exist, so they stay zero. ``layer.structure.matrix(layer.weight)`` views the weight
    as a :class:`~cubsparse.BlockSparseMatrix` (``toarray()``, ``save_npz``, ...). The
    products read ``structure``; the ``layout``, ``indices`` and ``indptr`` buffers are
    copies for the ``state_dict`` (they follow ``.to(device)`` like any buffer).

    Examples
    --------
    A layer, a training step and a dense check live in ``tests/test_torch.py``; in short::

        layer = BlockSparseLinear(256, 128, cs.layouts.random(8, 4, 0.25, seed=0), 32)
        y = layer(torch.randn(10, 256))        # (10, 128)
        y.sum().backward()                     # layer.weight.grad: (8, 32, 32)
    """

    def __init__(self, in_features: int, out_features: int, layout, blocksize: int,
                 bias: bool = True, device=None, dtype=None):
        super().__init__()
        b = _dtypes.check_blocksize(blocksize)
        for name, v in (("in_features", in_features), ("out_features", out_features)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 0 or v % b:
                raise ValueError(f"{name} must be a non-negative multiple of blocksize {b}, "
                                 f"got {v!r}")
        structure = BlockStructure(layout, b)
        if structure.shape != (in_features, out_features):
            raise ValueError(
                f"layout must have shape (in_features // b, out_features // b) = "
                f"{(in_features // b, out_features // b)}, got {structure.layout.shape}"
            )
        factory = {"device": device, "dtype": dtype}
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.blocksize = b
        self.structure = structure
        _check_dtype("weight", dtype if dtype is not None else torch.get_default_dtype())
        self.weight = torch.nn.Parameter(torch.empty(structure.weight_shape, **factory))
        if bias:
            self.bias = torch.nn.Parameter(torch.empty(out_features, **factory))
        else:
            self.register_parameter("bias", None)
        self.register_buffer("layout", torch.from_numpy(structure.layout.copy()).to(device))
        self.register_buffer("indices", torch.from_numpy(structure.indices.copy()).to(device))
        self.register_buffer("indptr", torch.from_numpy(structure.indptr.copy()).to(device))
        self.reset_parameters()

    @property
    def nnzb(self) -> int:
        """The number of stored blocks."""
        return self.structure.nnzb

    def reset_parameters(self) -> None:
        """Draw the initial values again (see the class's attributes)."""
        cols = self.structure.layout.shape[1]
        fan_in = max(1.0, self.nnzb * self.blocksize / max(cols, 1))  # as from_layout
        bound = 1.0 / math.sqrt(fan_in)
        with torch.no_grad():
            self.weight.normal_(0.0, bound)
            if self.bias is not None:
                self.bias.uniform_(-bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.structure, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"blocksize={self.blocksize}, nnzb={self.nnzb}, "
                f"density={self.nnzb / max(1, self.structure.layout.size):.3f}, "
                f"bias={self.bias is not None}")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        # The layout is fixed at construction (the structure and the weight's shape follow
        # from it): a state dict of another layout is refused rather than loaded into
        # buffers the computation does not read.
        problem = _layout_mismatch(state_dict, prefix, self.structure)
        if problem is not None:
            error_msgs.append(problem)
            return
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)


def _layout_mismatch(state_dict, prefix: str, structure: BlockStructure) -> str | None:
    """Why ``state_dict``'s layout buffers cannot be loaded into a layer of ``structure``,
    or None (buffers that are absent are left to torch's missing-key check)."""

    def host(name):
        t = state_dict.get(prefix + name)
        if isinstance(t, torch.Tensor):
            return t.detach().cpu().numpy()
        return None if t is None else np.asarray(t)

    theirs = host("layout")
    if theirs is not None and (theirs.shape != structure.layout.shape
                               or not np.array_equal(theirs, structure.layout)):
        return (
            f"{prefix}layout: the state dict's block layout differs from this layer's "
            f"({_describe(theirs)} vs {_describe(structure.layout)}); a BlockSparseLinear's "
            "layout is fixed when it is built: build one with the saved layout, "
            f"BlockSparseLinear(..., layout=state_dict[{prefix + 'layout'!r}], ...)"
        )
    for name, ours in (("indices", structure.indices), ("indptr", structure.indptr)):
        t = host(name)
        if t is not None and (t.shape != ours.shape or not np.array_equal(t, ours)):
            return (f"{prefix}{name}: the state dict's index arrays do not match the block "
                    "layout (this layer's, and the state dict's where it has one)")
    return None


def _describe(layout: np.ndarray) -> str:
    if layout.ndim != 2:
        return f"shape {layout.shape}"
    return f"{layout.shape[0]}x{layout.shape[1]} blocks, {int(np.count_nonzero(layout))} stored"
