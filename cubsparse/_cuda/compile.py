"""Compiling the kernel sources and caching the compiled functions per device.

Sources are the ``kernels/<family>.cu`` files with their ``.cuh`` headers inlined. A kernel
for the device's own architecture goes through ``cupy.RawModule`` (CuPy keeps the binary
in its disk cache); one that needs an architecture-specific target (``sm_90a`` for wgmma
and TMA, which CuPy does not pick by itself) is compiled by NVRTC and loaded from the
cubin. Either way each instance is compiled once per device and process.
"""

from __future__ import annotations

import functools
import importlib.resources
import os
import pathlib
import re

from .configs import KernelConfig

COMPILE_OPTIONS = ("--std=c++17",)


class KernelCompileError(RuntimeError):
    """NVRTC rejected a kernel; the message carries the compiler log."""


def source(family: str, kernels: str | None = None) -> str:
    """The family's CUDA source with its ``.cuh`` headers inlined, each once (NVRTC gets no
    include path); from the package's kernels (read once), or from the folder ``kernels``
    (another revision's, for tools that compare two; read at each call)."""
    if kernels is None:
        return _package_source(family)
    return _inline_source(pathlib.Path(kernels), family)


@functools.cache
def _package_source(family: str) -> str:
    return _inline_source(importlib.resources.files("cubsparse") / "kernels", family)


def _inline_source(kdir, family: str) -> str:
    seen: set = set()

    def inline(text: str) -> str:
        def header(m):
            if m.group(1) in seen:
                return ""
            seen.add(m.group(1))
            return inline((kdir / m.group(1)).read_text().replace("#pragma once\n", ""))

        return re.sub(r'#include "(\w+\.cuh)"', header, text)

    return inline((kdir / f"{family}.cu").read_text())


def get_kernel(cfg: KernelConfig):
    """The compiled kernel of ``cfg`` on the current device: a ``cupy.cuda.Function``
    (its ``ptr`` is the driver's CUfunction; calling it launches through CuPy)."""
    import cupy

    return _kernel(cupy.cuda.runtime.getDevice(), cfg)


@functools.cache
def _kernel(device: int, cfg: KernelConfig):
    import cupy

    if cfg.arch is None:
        try:
            mod = cupy.RawModule(code=source(cfg.family), options=COMPILE_OPTIONS,
                                 name_expressions=[cfg.name])
            fn = mod.get_function(cfg.name).kernel
        except cupy.cuda.compiler.CompileException as exc:
            raise KernelCompileError(f"NVRTC failed to compile {cfg.name}:\n{exc}") from exc
    else:
        fn = _compile_for_arch(cfg)
    if cfg.smem > 16 * 1024:  # static arrays count too: opt in above 48 KiB in all
        attr = getattr(cupy.cuda.driver, "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", 8)
        cupy.cuda.driver.funcSetAttribute(fn.ptr, attr, cfg.smem)
    return fn


_loaded_modules: list = []  # a module must outlive the functions taken from it


def _compile_for_arch(cfg: KernelConfig):
    """Compile ``cfg`` for ``cfg.arch`` with NVRTC through CuPy's bindings; load the cubin."""
    import cupy
    from cupy_backends.cuda.libs import nvrtc

    options = [*COMPILE_OPTIONS, f"--gpu-architecture={cfg.arch}"]
    prog = nvrtc.createProgram(source(cfg.family), f"{cfg.family}.cu", [], [])
    try:
        nvrtc.addNameExpression(prog, cfg.name)
        try:
            nvrtc.compileProgram(prog, options)
        except nvrtc.NVRTCError as exc:
            raise KernelCompileError(
                f"NVRTC failed to compile {cfg.name} for {cfg.arch}:\n"
                f"{nvrtc.getProgramLog(prog)}"
            ) from exc
        lowered = nvrtc.getLoweredName(prog, cfg.name)
        cubin = nvrtc.getCUBIN(prog)
    finally:
        nvrtc.destroyProgram(prog)
    module = cupy.cuda.function.Module()
    module.load(cubin)
    _loaded_modules.append(module)
    return module.get_function(lowered)


def compile_options_for_nvcc() -> list[str]:
    """Flags the CI compile check passes to nvcc besides the target."""
    return ["-std=c++17", "-Xptxas", "-v", *os.environ.get("CUBSPARSE_NVCC_FLAGS", "").split()]
