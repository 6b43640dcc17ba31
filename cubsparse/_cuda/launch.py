"""Kernel launches with their parameters packed once.

CuPy's ``RawKernel.__call__`` inspects every argument on every call, which costs about
half a microsecond an argument. A :class:`Launch` holds one ctypes value per kernel
parameter and the array of pointers to them that ``cuLaunchKernel`` takes; a plan fills
the constant parameters (tables, counts) once, and a call writes only the few that change
(operand addresses, strides, scalars) before one driver call. That call is CuPy's typed
binding of ``cuLaunchKernel`` (``cupy.cuda.driver.launchKernel``): its arguments are C
integers, so it adds well under a microsecond to the driver's own cost, where
``cuda.bindings`` builds an enum for every result and ctypes converts every argument.
"""

from __future__ import annotations

import ctypes

from . import device

_CTYPES = {"p": ctypes.c_uint64, "i": ctypes.c_int32, "l": ctypes.c_int64,
           "f": ctypes.c_float, "d": ctypes.c_double}


class LaunchError(RuntimeError):
    """The driver refused a kernel launch."""


class Launch:
    """One kernel with its launch shape and parameter slots.

    Parameters
    ----------
    function : cupy.cuda.Function
        The compiled kernel (its ``ptr`` is the CUfunction).
    grid, block : tuple of int
    smem : int
        Dynamic shared memory in bytes.
    signature : str
        One letter per parameter: ``p`` pointer, ``i`` int32, ``l`` int64, ``f`` float32,
        ``d`` float64, ``t`` a TMA tensor map passed by value (see :meth:`set_map`).
    values : sequence
        Initial values, ``None`` for those set per call; a CuPy array stands for its
        address (the caller keeps it alive).
    cooperative : bool, optional
        Launch by ``cuLaunchCooperativeKernel``: the driver refuses the launch unless every
        CTA of the grid can be resident at once, which kernels whose CTAs wait for each
        other need.
    """

    __slots__ = ("_api", "_block", "_fn", "_grid", "_keep", "_launch", "_params", "_pp",
                 "_shape", "_signature", "_smem", "_tail", "name", "v")

    def __init__(self, function, grid, block, smem: int, signature: str, values,
                 cooperative: bool = False):
        self.name = getattr(function, "name", "kernel")
        if len(values) != len(signature):
            raise ValueError(f"{self.name}: {len(values)} parameter values for the "
                             f"{len(signature)} of signature {signature!r}")
        self._fn = function.ptr
        self._launch = _launcher(cooperative)
        self._tail = () if cooperative else (0,)  # cuLaunchKernel's `extra`
        self._api = "cuLaunchCooperativeKernel" if cooperative else "cuLaunchKernel"
        grid = tuple(grid) + (1,) * (3 - len(grid))
        block = tuple(block) + (1,) * (3 - len(block))
        self._grid, self._block, self._smem = grid, block, int(smem)
        self._shape = (*grid, *block, self._smem)
        self._signature = signature
        self.v = [_CTYPES[k]() if k != "t" else None for k in signature]
        self._params = (ctypes.c_void_p * len(signature))(
            *[ctypes.addressof(v) if v is not None else 0 for v in self.v])
        self._pp = ctypes.addressof(self._params)
        self._keep = {}  # maps and arrays whose addresses the slots hold
        for i, value in enumerate(values):
            if value is not None:
                self.set(i, value)

    def set(self, i: int, value) -> None:
        """Set parameter ``i`` (an array stands for its address, kept alive here)."""
        if self.v[i] is None:
            self.set_map(i, value)
            return
        if hasattr(value, "data") and hasattr(value.data, "ptr"):
            self._keep[i] = value
            value = value.data.ptr
        self.v[i].value = value

    def set_map(self, i: int, tmap) -> None:
        """Point tensor-map parameter ``i`` at ``tmap`` (a :class:`device.TensorMap`, or
        ``device.BLANK_MAP`` where the kernel reads no map there)."""
        self._keep[i] = tmap
        self._params[i] = tmap.address

    def slot(self, i: int) -> tuple[int, str]:
        """The address of parameter ``i``'s value and its signature letter, for the
        compiled call path (:mod:`.fastcall`), which writes it in place."""
        if self.v[i] is None:
            raise ValueError(f"{self.name}: parameter {i} is a tensor map, not a value")
        i %= len(self.v)
        return ctypes.addressof(self.v[i]), self._signature[i]

    def native(self) -> tuple:
        """``(function, grid, block, smem, params, cooperative)``: what the compiled call
        path hands the driver."""
        return (self._fn, self._grid, self._block, self._smem, self._pp,
                self._api == "cuLaunchCooperativeKernel")

    def __call__(self, stream: int) -> None:
        try:
            self._launch(self._fn, *self._shape, stream, self._pp, *self._tail)
        except Exception as exc:
            raise LaunchError(f"{self._api} failed for {self.name}: {exc}; grid "
                              f"{self._grid}, block {self._block}, {self._smem} bytes of "
                              "shared memory") from exc


def _launcher(cooperative: bool = False):
    """``launch(f, gx, gy, gz, bx, by, bz, smem, stream, params[, extra])``: the driver's
    ``cuLaunchKernel`` (with ``extra``) or ``cuLaunchCooperativeKernel`` (without), raising
    where it fails. CuPy's binding where it has one, else ctypes."""
    name = "launchCooperativeKernel" if cooperative else "launchKernel"
    try:
        from cupy.cuda import driver

        return getattr(driver, name)
    except (ImportError, AttributeError):
        pass
    fn = getattr(device.libcuda(), "cu" + name[0].upper() + name[1:])

    def launch(*args):
        res = fn(*args)
        if res:
            raise RuntimeError(f"CUresult {res}")

    return launch
