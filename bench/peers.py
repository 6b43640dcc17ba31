"""Everything that gets timed: cubsparse, the dense baselines, and the peers.

A *contender* turns a case's data and an op into a :class:`Prepared`: one zero-argument
call per input set (the timed product and nothing else -- conversions to the peer's
format happen here, outside the timing), the library whose clock times it, and a function
mapping its output to a float64 array comparable with the reference.

A contender that does not apply raises :class:`NotRun` with the reason; any other
exception is recorded as the contender refusing the case. Nothing is silently dropped.

Peers and what they call (CUDA):

``dense_cupy``        ``cupy.matmul`` (cuBLAS), IEEE for fp32 (CUPY_TF32 unset)
``dense_torch``       ``torch.matmul`` with TF32 off
``dense_torch_tf32``  ``torch.matmul`` with ``torch.backends.cuda.matmul.allow_tf32 = True``
``densify``           W densified on every call (``W.toarray()``), then ``cupy.matmul``;
                      for the weight gradient the dense product, then W's blocks gathered
                      from it: what a script pays when W changes every step
``torch_bsr``         ``W.T_bsr @ x.T`` (the BSR tensor as first operand: torch's Triton
                      BSR kernel), falling back to ``x @ W_bsr``; for the weight gradient
                      ``torch.sparse._triton_ops.sampled_addmm``
``cusparse_csr``      cuSPARSE CSR SpMM through ``cupyx.scipy.sparse.csr_matrix``
                      (fp32/fp64); for the weight gradient cuSPARSE SDDMM through
                      ``torch.sparse.sampled_addmm`` on a CSR pattern
CPU: ``dense_numpy`` and ``scipy_bsr`` (``scipy.sparse.bsr_matrix``).
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from .data import CaseData


class NotRun(Exception):
    """The contender does not apply to this case; the message says why."""


@dataclass
class Prepared:
    calls: list[Callable[[], Any]]
    lib: str                          #: "cupy", "torch" or "host": whose clock times it
    to_dense: Callable[[Any], Any]    #: output -> xp float64 array shaped like the reference
    impl: str                         #: what exactly is called, for the row
    note: str | None = None           #: e.g. why a preferred form was not used
    no_graph: str | None = None       #: why CUDA-graph timing cannot apply, if it cannot
    plan: str | None = None           #: the kernel plan the library reports, one line


@dataclass
class Contender:
    name: str
    role: str        #: "subject", "subject_tf32", "dense", "dense_tf32" or "peer"
    label: str
    prepare: Callable[[CaseData, str], Prepared]
    backends: tuple[str, ...] = ("cuda", "cpu")
    dtypes: tuple[str, ...] | None = None   #: None: every dtype
    #: a dense product: timed once per shape and dtype where RunConfig.dense_once is set
    shared_dense: bool = field(default=False)


# -- helpers ----------------------------------------------------------------------------

# CuPy raises NotImplementedError for cuBLAS and cuSPARSE calls inside a stream capture, so
# those contenders are timed eagerly (torch captures its cuBLAS calls; the dense baseline
# is the faster of the two libraries, so it still gets a graph time).
_NO_CUPY_CAPTURE = "not captured: CuPy refuses %s calls during CUDA stream capture"

def _import_cubsparse():
    try:
        import cubsparse as cs
    except Exception as exc:
        raise NotRun(f"unavailable: cubsparse does not import ({type(exc).__name__}: "
                     f"{str(exc)[:100]})") from None
    missing = [n for n in ("BlockSparseMatrix", "matmul", "sampled_matmul") if not hasattr(cs, n)]
    if missing:
        raise NotRun(f"unavailable: cubsparse lacks {', '.join(missing)}")
    return cs


def _torch():
    try:
        import torch
    except Exception as exc:
        raise NotRun(f"unavailable: torch does not import ({type(exc).__name__})") from None
    if not torch.cuda.is_available():
        raise NotRun("unavailable: torch sees no CUDA device")
    return torch


def _torch_dtype(torch, name: str):
    return {"float16": torch.float16, "bfloat16": torch.bfloat16,
            "float32": torch.float32, "float64": torch.float64}[name]


def _to_torch(data: CaseData, i: int, name: str):
    """Master ``name`` of set ``i`` as a torch tensor of the case dtype (shared if fp32)."""
    torch = _torch()

    def make():
        t = torch.from_dlpack(data.master(i)[name])
        return t.to(_torch_dtype(torch, data.case.dtype))

    return data.get(("torch", i, name), make)


def _torch_dense_w(data: CaseData, i: int):
    torch = _torch()
    return data.get(("torch_dense_w", i), lambda: torch.from_dlpack(
        data.dense_w(i, "float32" if data.case.dtype != "float64" else "float64"))
        .to(_torch_dtype(torch, data.case.dtype)))


def _torch_to_xp(data: CaseData, t):
    """A dense torch tensor as a CuPy float64 array (via float32: DLPack needs no bf16)."""
    import cupy

    torch = _torch()
    if t.layout != torch.strided:
        t = t.to_dense()
    if t.dtype in (torch.float16, torch.bfloat16):
        t = t.float()
    return cupy.from_dlpack(t.contiguous()).astype(cupy.float64)


def _accepts_kw(fn, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


@dataclass
class _TF32:
    """Turn torch's TF32 matmul mode on for one call and restore it after."""

    torch: Any
    on: bool

    def __call__(self, fn):
        m = self.torch.backends.cuda.matmul

        def wrapped():
            prev = m.allow_tf32
            m.allow_tf32 = self.on
            try:
                return fn()
            finally:
                m.allow_tf32 = prev

        return wrapped


def _masked(data: CaseData, op: str):
    """Output -> float64, masked to W's blocks for ``sdd`` (dense products fill it all)."""
    xp = data.xp

    def conv(a):
        a = a.astype(xp.float64)
        if op == "sdd":
            a = a * data.mask()
        return a

    return conv


# -- cubsparse --------------------------------------------------------------------------

def _cubsparse_objects(data: CaseData, i: int):
    cs = _import_cubsparse()

    def make():
        w = data.cast(i, "w")
        W = cs.BlockSparseMatrix((w, data.device_index("indices"), data.device_index("indptr")),
                                 shape=(data.case.c, data.case.k))
        return data.cast(i, "x"), data.cast(i, "dy"), W

    return data.get(("cubsparse", i), make)


def _prepare_cubsparse(data: CaseData, op: str, tf32: bool = False) -> Prepared:
    cs = _import_cubsparse()
    kw: dict[str, Any] = {}
    if tf32:
        if data.case.dtype != "float32":
            raise NotRun("not applicable: TF32 is a float32 mode")
        fn = cs.sampled_matmul if op == "sdd" else cs.matmul
        if not _accepts_kw(fn, "tf32"):
            raise NotRun(f"not available: cubsparse.{fn.__name__} has no tf32= keyword")
        kw = {"tf32": True}
    calls = []
    for i in range(data.sets_sparse):
        x, dy, W = _cubsparse_objects(data, i)
        # W.T and x.T are views made here, as a training step would hold them.
        if op == "xw":
            calls.append(partial(cs.matmul, x, W, **kw))
        elif op == "dywt":
            calls.append(partial(cs.matmul, dy, W.T, **kw))
        else:
            calls.append(partial(cs.sampled_matmul, x.T, dy, like=W, **kw))
    impl = {"xw": "cubsparse.matmul(x, W)", "dywt": "cubsparse.matmul(dy, W.T)",
            "sdd": "cubsparse.sampled_matmul(x.T, dy, like=W)"}[op]
    if tf32:
        impl = impl[:-1] + ", tf32=True)"
    plan, plan_note = _cubsparse_plan(cs, data, op, kw)
    xp = data.xp

    def to_dense(out):
        if op == "sdd":
            return out.toarray().astype(xp.float64)
        return out.astype(xp.float64)

    return Prepared(calls, data.backend.clock_lib(), to_dense, impl, note=plan_note,
                    plan=plan)


def _cubsparse_plan(cs, data: CaseData, op: str,
                    kw: dict[str, Any]) -> tuple[str | None, str | None]:
    """The kernel plan cubsparse reports for ``op`` on set 0, and a note if it failed.

    ``cubsparse.matmul_plan(a, b)`` and ``cubsparse.sampled_matmul_plan(a, b, like=W)``
    take the arguments of the product and return an object whose ``str()`` is one line.
    They are looked up rather than required, so the suite also measures versions of
    cubsparse without them (the plan is then None). A plan that fails to describe
    itself is a note on the row, never a reason not to time the product.

    Returns
    -------
    (str or None, str or None)
        The plan's one-line description, and why there is none where the call raised.
    """
    name = "sampled_matmul_plan" if op == "sdd" else "matmul_plan"
    plan_fn = getattr(cs, name, None)
    if plan_fn is None:
        return None, None
    x, dy, W = _cubsparse_objects(data, 0)
    # Pass tf32= only to a plan function that takes it: otherwise the plan of the
    # default (IEEE) product is not the one timed, and no plan is the honest answer.
    if kw and not _accepts_kw(plan_fn, "tf32"):
        return None, None
    try:
        if op == "xw":
            plan = plan_fn(x, W, **kw)
        elif op == "dywt":
            plan = plan_fn(dy, W.T, **kw)
        else:
            plan = plan_fn(x.T, dy, like=W, **kw)
        return " ".join(str(plan).split()), None
    except Exception as exc:
        from .timing import short_error

        return None, f"cubsparse.{name} failed: {short_error(exc, 100)}"


# -- dense ------------------------------------------------------------------------------

def _dense_call(xp_matmul, op: str, x, dy, wd):
    if op == "xw":
        return partial(xp_matmul, x, wd)
    if op == "dywt":
        return partial(xp_matmul, dy, wd.T)
    return partial(xp_matmul, x.T, dy)


def _prepare_dense_xp(data: CaseData, op: str) -> Prepared:
    xp = data.xp
    calls = [_dense_call(xp.matmul, op, data.cast(i, "x"), data.cast(i, "dy"), data.dense_w(i))
             for i in range(data.sets_dense)]
    lib = data.backend.clock_lib()
    impl = ("cupy.matmul (cuBLAS)" if data.backend.name == "cuda" else "numpy.matmul")
    return Prepared(calls, lib, _masked(data, op), impl, no_graph=_NO_CUPY_CAPTURE % "cuBLAS")


def _prepare_dense_torch(data: CaseData, op: str, tf32: bool = False) -> Prepared:
    torch = _torch()
    if tf32 and data.case.dtype != "float32":
        raise NotRun("not applicable: TF32 is a float32 mode")
    wrap = _TF32(torch, tf32)
    calls = [wrap(_dense_call(torch.matmul, op, _to_torch(data, i, "x"),
                              _to_torch(data, i, "dy"), _torch_dense_w(data, i)))
             for i in range(data.sets_dense)]
    conv = _masked(data, op)
    impl = "torch.matmul, allow_tf32=" + str(tf32)
    return Prepared(calls, "torch", lambda t: conv(_torch_to_xp(data, t)), impl)


def _prepare_densify(data: CaseData, op: str) -> Prepared:
    """What a script without a block-sparse kernel does each step, W's values having
    changed: densify W (cubsparse's ``toarray``), then cuBLAS; for the weight gradient,
    the dense product, then W's blocks taken from it by fancy indexing."""
    cs = _import_cubsparse()
    xp = data.xp
    c = data.case
    b = c.b
    indptr = data.device_index("indptr")
    cols = data.device_index("indices")
    rows = xp.repeat(xp.arange(c.c // b, dtype=xp.int32), xp.diff(indptr).astype(xp.int64))

    def gather(x_t, dy):
        return xp.matmul(x_t, dy).reshape(c.c // b, b, c.k // b, b)[rows, :, cols, :]

    calls = []
    for i in range(data.sets_sparse):
        x, dy, W = _cubsparse_objects(data, i)
        if op == "xw":
            calls.append(lambda x=x, W=W: xp.matmul(x, W.toarray()))
        elif op == "dywt":
            calls.append(lambda dy=dy, W=W: xp.matmul(dy, W.toarray().T))
        else:
            calls.append(partial(gather, x.T, dy))
    impl = {"xw": "cupy.matmul(x, W.toarray())", "dywt": "cupy.matmul(dy, W.toarray().T)",
            "sdd": "cupy.matmul(x.T, dy), then W's blocks by fancy indexing"}[op]
    if data.backend.name != "cuda":
        impl = impl.replace("cupy", "numpy")

    def to_dense(out):
        if op == "sdd":
            out = cs.BlockSparseMatrix((out, cols, indptr), shape=(c.c, c.k)).toarray()
        return out.astype(xp.float64)

    return Prepared(calls, data.backend.clock_lib(), to_dense, impl,
                    no_graph=_NO_CUPY_CAPTURE % "cuBLAS")


def dense_products(backend, dtype: str, size: int, tf32: bool = False):
    """(lib, factory) pairs for a square dense product, for the device ceilings."""
    from .data import numpy_dtype, quantize

    def xp_factory():
        xp = backend.xp
        rng = xp.random.default_rng(1234)
        a = quantize(xp, rng.standard_normal((size, size), dtype=xp.float32), dtype)
        b = quantize(xp, rng.standard_normal((size, size), dtype=xp.float32), dtype)
        a, b = a.astype(numpy_dtype(dtype)), b.astype(numpy_dtype(dtype))
        return partial(xp.matmul, a, b)

    def torch_factory():
        torch = _torch()
        g = torch.Generator(device="cuda").manual_seed(1234)
        td = _torch_dtype(torch, dtype)
        a = torch.randn((size, size), device="cuda", generator=g).to(td)
        b = torch.randn((size, size), device="cuda", generator=g).to(td)
        return _TF32(torch, tf32)(partial(torch.matmul, a, b))

    if backend.name == "cpu":
        return [("numpy", xp_factory)]
    out = [] if tf32 else [("cupy", xp_factory)]
    return [*out, ("torch", torch_factory)]


# -- torch BSR (Triton) ------------------------------------------------------------------

def _torch_bsr(data: CaseData, i: int, transposed: bool):
    """W (or W.T) of set ``i`` as a torch BSR tensor with exactly W's layout."""
    torch = _torch()
    from .cases import csr_of_layout, transpose_permutation

    def make():
        c = data.case
        vals = torch.from_dlpack(data.master(i)["w"]).to(_torch_dtype(torch, c.dtype))
        layout = data.layout
        if transposed:
            perm = torch.from_numpy(transpose_permutation(layout)).cuda()
            vals = vals[perm].transpose(1, 2).contiguous()
            layout = layout.T
        indptr, indices, _ = csr_of_layout(layout)
        shape = (c.k, c.c) if transposed else (c.c, c.k)
        return torch.sparse_bsr_tensor(torch.from_numpy(indptr).cuda(),
                                       torch.from_numpy(indices).cuda(), vals, size=shape)

    return data.get(("torch_bsr", i, transposed), make)


def _first_working(forms, data: CaseData):
    """Try each ``(impl, builder)`` on set 0; return the first that runs, and the failures."""
    failures = []
    for impl, builder, post in forms:
        try:
            call = builder(0)
            call()
            return impl, builder, post, failures
        except NotRun:
            raise
        except Exception as exc:
            from .timing import short_error

            failures.append(f"{impl}: {short_error(exc, 100)}")
    raise RuntimeError("; ".join(failures))


def _transpose(t):
    return t.T


def _identity(t):
    return t


def _prepare_torch_bsr(data: CaseData, op: str) -> Prepared:
    _torch()  # fail early, with the reason, where torch is missing

    def x(i):
        return _to_torch(data, i, "x")

    def dy(i):
        return _to_torch(data, i, "dy")

    def w(i, transposed):
        return _torch_bsr(data, i, transposed)

    mm = operator.matmul
    # The first form of each op returns the transpose of the result (post = _transpose).
    if op == "xw":
        forms = [
            ("W.T_bsr @ x.T (BSR first operand)",
             lambda i: partial(mm, w(i, True), x(i).T), _transpose),
            ("x @ W_bsr", lambda i: partial(mm, x(i), w(i, False)), _identity),
        ]
    elif op == "dywt":
        forms = [
            ("W_bsr @ dy.T (BSR first operand)",
             lambda i: partial(mm, w(i, False), dy(i).T), _transpose),
            ("dy @ W.T_bsr", lambda i: partial(mm, dy(i), w(i, True)), _identity),
        ]
    else:
        try:
            from torch.sparse import _triton_ops
            sampled_addmm = _triton_ops.sampled_addmm
        except Exception as exc:
            raise NotRun("unavailable: torch.sparse._triton_ops.sampled_addmm "
                         f"({type(exc).__name__}: {str(exc)[:80]})") from None
        forms = [
            ("torch.sparse._triton_ops.sampled_addmm(W_bsr, x.T, dy, beta=0)",
             lambda i: partial(sampled_addmm, w(i, False), x(i).T, dy(i), beta=0.0, alpha=1.0),
             _identity),
        ]
    impl, builder, post, failures = _first_working(forms, data)
    calls = [builder(i) for i in range(data.sets_sparse)]
    conv = _masked(data, "xw")  # no extra masking: the BSR result holds only W's blocks
    return Prepared(calls, "torch", lambda t: conv(_torch_to_xp(data, post(t))), impl,
                    note="; ".join(failures) or None)


# -- stk (Triton, 128 x 128 blocks) ------------------------------------------------------

def _stk_matrix(data: CaseData, i: int):
    """W of set ``i`` as an ``stk.Matrix`` (its BCSR: int16 block indices, int32 offsets;
    the transpose metadata stk derives itself)."""
    torch = _torch()
    import stk

    from .cases import csr_of_layout

    def make():
        c = data.case
        vals = torch.from_dlpack(data.master(i)["w"]).to(_torch_dtype(torch, c.dtype))
        indptr, indices, rows = csr_of_layout(data.layout)
        dev = vals.device
        return stk.Matrix((c.c, c.k), vals.contiguous(),
                          torch.from_numpy(rows).to(dev, torch.int16),
                          torch.from_numpy(indices).to(dev, torch.int16),
                          torch.from_numpy(indptr).to(dev, torch.int32))

    return data.get(("stk", i), make)


def _prepare_stk(data: CaseData, op: str) -> Prepared:
    """stk (Stanford's block-sparse kernels for MegaBlocks): b = 128, float16/bfloat16."""
    c = data.case
    if c.b != 128 or c.dtype not in ("float16", "bfloat16"):
        raise NotRun("not applicable: stk runs 128 x 128 blocks in float16/bfloat16 only")
    _torch()  # fail early, with the reason, where torch is missing
    try:
        import stk
    except Exception as exc:
        raise NotRun(f"unavailable: stk does not import ({type(exc).__name__}; "
                     "pip install stanford-stk)") from None
    if max(c.c, c.k) // 128 > np.iinfo(np.int16).max:
        raise NotRun("not applicable: stk's int16 block indices")

    def x(i):
        return _to_torch(data, i, "x")

    def dy(i):
        return _to_torch(data, i, "dy")

    def w(i):
        return _stk_matrix(data, i)

    if op == "xw":
        forms = [("stk.ops.dds(x, W)", lambda i: partial(stk.ops.dds, x(i), w(i)), _identity)]
    elif op == "dywt":
        forms = [("stk.ops.dds(dy, W.t())", lambda i: partial(stk.ops.dds, dy(i), w(i).t()),
                  _identity)]
    else:  # the result is an stk.Matrix of W's topology
        forms = [("stk.ops.sdd(x.T, dy, W)", lambda i: partial(stk.ops.sdd, x(i).T, dy(i), w(i)),
                  stk.ops.to_dense),
                 ("stk.ops.sdd(x.T.contiguous(), dy, W)",
                  lambda i: partial(stk.ops.sdd, x(i).T.contiguous(), dy(i), w(i)),
                  stk.ops.to_dense)]
    impl, builder, post, failures = _first_working(forms, data)
    calls = [builder(i) for i in range(data.sets_sparse)]
    conv = _masked(data, op)
    return Prepared(calls, "torch", lambda t: conv(_torch_to_xp(data, post(t))), impl,
                    note="; ".join(failures) or None)


# -- cuSPARSE CSR -----------------------------------------------------------------------

def _prepare_cusparse(data: CaseData, op: str) -> Prepared:
    if data.case.dtype not in ("float32", "float64"):
        raise NotRun("not applicable: cuSPARSE CSR through cupyx/torch runs float32/float64 "
                     "only")
    if op == "sdd":
        return _prepare_cusparse_sddmm(data)
    try:
        import cupyx.scipy.sparse as csp
    except Exception as exc:
        raise NotRun(f"unavailable: cupyx.scipy.sparse ({type(exc).__name__})") from None
    xp = data.xp

    def csr(i: int, transposed: bool):
        def make():
            # A transient dense W (not cached: there may be many sparse input sets).
            wd = data.dense_w(i, cache=False)
            return csp.csr_matrix(xp.ascontiguousarray(wd.T) if transposed else wd)
        return data.get(("cupyx_csr", i, transposed), make)

    calls = []
    for i in range(data.sets_sparse):
        if op == "xw":   # Y.T = W.T_csr @ x.T
            calls.append(partial(operator.matmul, csr(i, True), data.cast(i, "x").T))
        else:            # dX.T = W_csr @ dy.T
            calls.append(partial(operator.matmul, csr(i, False), data.cast(i, "dy").T))
    impl = ("cupyx csr_matrix(W.T) @ x.T (cuSPARSE SpMM)" if op == "xw"
            else "cupyx csr_matrix(W) @ dy.T (cuSPARSE SpMM)")
    return Prepared(calls, "cupy", lambda out: out.T.astype(xp.float64), impl,
                    no_graph=_NO_CUPY_CAPTURE % "cuSPARSE")


def _prepare_cusparse_sddmm(data: CaseData) -> Prepared:
    torch = _torch()
    td = _torch_dtype(torch, data.case.dtype)

    def pattern():
        # beta = 0 ignores the values; only the element pattern of W's blocks matters.
        # (through float32: DLPack export of bool arrays is not universal)
        return torch.from_dlpack(data.mask().astype(data.xp.float32)).to(td).to_sparse_csr()

    pat = data.get("torch_csr_pattern", pattern)
    calls = [partial(torch.sparse.sampled_addmm, pat, _to_torch(data, i, "x").T,
                     _to_torch(data, i, "dy"), beta=0.0, alpha=1.0)
             for i in range(data.sets_sparse)]
    conv = _masked(data, "xw")
    return Prepared(calls, "torch", lambda t: conv(_torch_to_xp(data, t)),
                    "torch.sparse.sampled_addmm(W_csr_pattern, x.T, dy, beta=0) (cuSPARSE SDDMM)")


# -- CPU peer ---------------------------------------------------------------------------

def _prepare_scipy_bsr(data: CaseData, op: str) -> Prepared:
    if op == "sdd":
        raise NotRun("not applicable: SciPy has no SDDMM")
    import scipy.sparse as sp

    c = data.case

    def bsr(i: int, transposed: bool):
        def make():
            m = sp.bsr_matrix((data.cast(i, "w"), data.indices, data.indptr),
                              shape=(c.c, c.k))
            return m.T.tobsr(blocksize=(c.b, c.b)) if transposed else m
        return data.get(("scipy_bsr", i, transposed), make)

    calls = []
    for i in range(data.sets_sparse):
        if op == "xw":
            calls.append(partial(operator.matmul, data.cast(i, "x"), bsr(i, False)))
        else:
            calls.append(partial(operator.matmul, data.cast(i, "dy"), bsr(i, True)))
    impl = "x @ scipy.sparse.bsr_matrix(W)" if op == "xw" else "dy @ bsr_matrix(W.T)"
    return Prepared(calls, "host", lambda out: np.asarray(out).astype(np.float64), impl)


def _gpu_only(name):
    def prep(data, op):
        raise NotRun(f"not run: {name} is a GPU peer (backend cpu)")
    return prep


# -- registry ---------------------------------------------------------------------------

def contenders(backend_name: str) -> list[Contender]:
    """Every contender for ``backend_name``, subject first, then dense, then peers."""
    cuda = backend_name == "cuda"
    out = [
        Contender("cubsparse", "subject", "cubsparse", _prepare_cubsparse),
        Contender("cubsparse_tf32", "subject_tf32", "cubsparse (tf32=True)",
                  lambda d, op: _prepare_cubsparse(d, op, tf32=True), dtypes=("float32",)),
    ]
    if cuda:
        out += [
            Contender("dense_cupy", "dense", "dense cuBLAS (CuPy)", _prepare_dense_xp,
                      shared_dense=True),
            Contender("dense_torch", "dense", "dense cuBLAS (torch)", _prepare_dense_torch,
                      shared_dense=True),
            Contender("dense_torch_tf32", "dense_tf32", "dense cuBLAS TF32 (torch)",
                      lambda d, op: _prepare_dense_torch(d, op, tf32=True),
                      dtypes=("float32",), shared_dense=True),
            Contender("densify", "peer", "densify + cuBLAS (per call)", _prepare_densify),
            Contender("torch_bsr", "peer", "torch BSR (Triton)", _prepare_torch_bsr),
            Contender("cusparse_csr", "peer", "cuSPARSE CSR", _prepare_cusparse),
            Contender("stk", "peer", "stk (Triton)", _prepare_stk, dtypes=("float16", "bfloat16")),
        ]
    else:
        out += [
            Contender("dense_numpy", "dense", "dense NumPy", _prepare_dense_xp,
                      shared_dense=True),
            Contender("torch_bsr", "peer", "torch BSR (Triton)", _gpu_only("torch BSR")),
            Contender("cusparse_csr", "peer", "cuSPARSE CSR", _gpu_only("cuSPARSE")),
            Contender("stk", "peer", "stk (Triton)", _gpu_only("stk"),
                      dtypes=("float16", "bfloat16")),
            Contender("densify", "peer", "densify + NumPy (per call)", _prepare_densify),
            Contender("scipy_bsr", "peer", "SciPy BSR", _prepare_scipy_bsr),
        ]
    return out
